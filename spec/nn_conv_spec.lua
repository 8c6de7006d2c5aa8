-- ordo.nn convolution, pooling and batch normalisation (lua/ordo/nn/conv.lua,
-- kernels/cpu/conv.c): forwards against naive Lua loops written from the
-- definitions, gradients against central differences (float64 gradcheck),
-- module behaviour (shapes, init, train/eval, running statistics) and the
-- error messages.
local ordo = require "ordo"
local conv = require "ordo.nn.conv"
local nn, ag = ordo.nn, ordo.autograd
local F = nn.functional

local D = {dtype = "float64"}

local function close(a, b, tol, where)
    tol = tol or 1e-10
    if type(a) == "table" then
        assert.equal(#b, #a, where)
        for i = 1, #a do close(a[i], b[i], tol, (where or "") .. "[" .. i .. "]") end
        return
    end
    assert(math.abs(a - b) <= tol * (1 + math.abs(b)),
           string.format("%s: %.15g vs %.15g", where or "value", a, b))
end

local function err_of(fn, ...)
    local ok, err = pcall(fn, ...)
    assert.is_false(ok, "expected an error")
    return tostring(err)
end

local function pair(v) if type(v) == "table" then return v[1], v[2] end return v, v end

-- y[n][o][i][j] = b[o] + sum_{c,a,b} x[n][c][i*sh - ph + a*dh][j*sw - pw + b*dw] * w[o][c][a][b]
local function ref_conv(x, w, b, stride, padding, dilation)
    local sh, sw = pair(stride or 1)
    local ph, pw = pair(padding or 0)
    local dh, dw = pair(dilation or 1)
    local X, Wt = x:totable(), w:totable()
    local B = b and b:totable()
    local N, C, H, W = #X, #X[1], #X[1][1], #X[1][1][1]
    local O, kh, kw = #Wt, #Wt[1][1], #Wt[1][1][1]
    local oh = math.floor((H + 2 * ph - dh * (kh - 1) - 1) / sh) + 1
    local ow = math.floor((W + 2 * pw - dw * (kw - 1) - 1) / sw) + 1
    local Y = {}
    for n = 1, N do
        Y[n] = {}
        for o = 1, O do
            Y[n][o] = {}
            for i = 1, oh do
                Y[n][o][i] = {}
                for j = 1, ow do
                    local s = B and B[o] or 0
                    for c = 1, C do
                        for a = 1, kh do
                            for bb = 1, kw do
                                local iy = (i - 1) * sh - ph + (a - 1) * dh + 1
                                local ix = (j - 1) * sw - pw + (bb - 1) * dw + 1
                                if iy >= 1 and iy <= H and ix >= 1 and ix <= W then
                                    s = s + X[n][c][iy][ix] * Wt[o][c][a][bb]
                                end
                            end
                        end
                    end
                    Y[n][o][i][j] = s
                end
            end
        end
    end
    return Y
end

-- values and flat indices (from 1) of each window's max; padding is -inf
-- Walks every plane P (H x W) of x and each output (i, j) of the grid that
-- out_size(H, W) gives: Y[n][c][i][j], I[n][c][i][j] = window(P, i, j, H, W).
local function ref_planes(x, out_size, window)
    local X = x:totable()
    local Y, I = {}, {}
    for n = 1, #X do
        Y[n], I[n] = {}, {}
        for c = 1, #X[1] do
            local P = X[n][c]
            local H, W = #P, #P[1]
            local oh, ow = out_size(H, W)
            Y[n][c], I[n][c] = {}, {}
            for i = 1, oh do
                Y[n][c][i], I[n][c][i] = {}, {}
                for j = 1, ow do Y[n][c][i][j], I[n][c][i][j] = window(P, i, j, H, W) end
            end
        end
    end
    return Y, I
end

-- The windows along a dim of n, Torch's formula: rounded up in ceil_mode,
-- less a last window starting past the input and its left padding.
local function ref_out(n, k, s, p, d, ceil_mode)
    local span = d * (k - 1) + 1
    if not ceil_mode then return math.floor((n + 2 * p - span) / s) + 1 end
    local out = math.ceil((n + 2 * p - span) / s) + 1
    if (out - 1) * s >= n + p then out = out - 1 end
    return out
end

-- A sliding window of kernel k: ref_planes over its output grid, fold(P,
-- iy, ix, acc) called for each in-bounds element of window (i, j) from
-- acc = nil, finish(acc) the output.  The taps are dilation apart.
local function ref_sliding(x, k, stride, padding, fold, finish, dilation, ceil_mode)
    local kh, kw = pair(k)
    local sh, sw = pair(stride or k)
    local ph, pw = pair(padding or 0)
    local dh, dw = pair(dilation or 1)
    return ref_planes(x, function(H, W)
        return ref_out(H, kh, sh, ph, dh, ceil_mode), ref_out(W, kw, sw, pw, dw, ceil_mode)
    end, function(P, i, j, H, W)
        local acc
        for a = 1, kh do
            for bb = 1, kw do
                local iy, ix = (i - 1) * sh - ph + (a - 1) * dh + 1, (j - 1) * sw - pw + (bb - 1) * dw + 1
                if iy >= 1 and iy <= H and ix >= 1 and ix <= W then acc = fold(P, iy, ix, acc, W) end
            end
        end
        return finish(acc, kh * kw)
    end)
end

-- max pooling: values and their indices (from 1) in the flattened plane
local function ref_pool(x, k, stride, padding, dilation, ceil_mode)
    return ref_sliding(x, k, stride, padding, function(P, iy, ix, acc, W)
        local v = P[iy][ix]
        if acc == nil or v > acc[1] then return {v, (iy - 1) * W + ix} end
        return acc
    end, function(acc) return acc[1], acc[2] end, dilation, ceil_mode)
end

local function each_layout(fn)
    local old = conv.conv_layout
    for _, layout in ipairs({"batched", "gemm"}) do
        conv.conv_layout = layout
        local ok, err = pcall(fn, layout)
        conv.conv_layout = old
        if not ok then error(layout .. " layout: " .. tostring(err), 0) end
    end
end

describe("nn.functional.conv2d", function()
    before_each(function() ordo.manual_seed(7) end)

    it("matches a naive loop for several strides, paddings and dilations (both layouts)", function()
        local x = ordo.randn({2, 3, 7, 6}, D)
        local w = ordo.randn({4, 3, 3, 2}, D)
        local b = ordo.randn({4}, D)
        local cases = {
            {}, {stride = 2}, {padding = 1}, {stride = {2, 3}, padding = {1, 0}}, {stride = 3, padding = 2},
            {dilation = 2}, {dilation = {2, 1}, padding = 2, stride = 2},
        }
        each_layout(function()
            for _, o in ipairs(cases) do
                local y = F.conv2d(x, w, b, o)
                local want = ref_conv(x, w, b, o.stride, o.padding, o.dilation)
                assert.same({#want, #want[1], #want[1][1], #want[1][1][1]}, y:shape())
                close(y:totable(), want, 1e-12)
            end
            -- no bias (nil and omitted), options in third place
            close(F.conv2d(x, w, nil, {padding = 1}):totable(), ref_conv(x, w, nil, 1, 1), 1e-12)
            close(F.conv2d(x, w, {padding = 1}):totable(), ref_conv(x, w, nil, 1, 1), 1e-12)
            close(F.conv2d(x, w):totable(), ref_conv(x, w, nil), 1e-12)
        end)
    end)

    it("takes non-contiguous inputs, a 3-D (C, H, W) input, and float32", function()
        local x = ordo.randn({3, 2, 6, 5}, D):transpose(1, 2) -- 2x3x6x5, not contiguous
        local w = ordo.randn({2, 3, 2, 2}, D)
        close(F.conv2d(x, w, nil, {padding = 1}):totable(), ref_conv(x, w, nil, 1, 1), 1e-12)
        local x3 = ordo.randn({3, 5, 5}, D)
        local y3 = F.conv2d(x3, w)
        assert.same({2, 4, 4}, y3:shape())
        close(y3:totable(), ref_conv(x3:unsqueeze(1), w)[1], 1e-12)
        local xf, wf = ordo.randn({2, 3, 6, 6}), ordo.randn({4, 3, 3, 3})
        local yf = F.conv2d(xf, wf, nil, {padding = 1})
        assert.equal("float32", yf:dtype())
        close(yf:totable(), ref_conv(xf, wf, nil, 1, 1), 1e-5)
        -- an empty batch: an empty output of the right shape, and gradients (both layouts)
        each_layout(function()
            local x0 = ordo.randn({0, 3, 6, 5}, D):requires_grad()
            local w0, b0 = ordo.randn({2, 3, 3, 3}, D):requires_grad(), ordo.randn({2}, D):requires_grad()
            local y0 = F.conv2d(x0, w0, b0, {padding = 1})
            assert.same({0, 2, 6, 5}, y0:shape())
            local s = y0:sum()
            s:backward()
            assert.same({0, 3, 6, 5}, x0.grad:shape())
            assert.equals(0, w0.grad:abs():sum():item() + b0.grad:abs():sum():item())
        end)
    end)

    it("has gradients that agree with central differences (x, weight, bias; both layouts)", function()
        each_layout(function()
            for _, o in ipairs({{stride = 1, padding = 1}, {stride = 2, padding = 0}, {stride = {1, 2}, padding = {2, 1}, dilation = {1, 2}}}) do
                local x = ordo.randn({2, 2, 5, 6}, D):requires_grad()
                local w = ordo.randn({3, 2, 3, 2}, D):requires_grad()
                local b = ordo.randn({3}, D):requires_grad()
                assert.is_true(ag.gradcheck(function(a, c, d) return F.conv2d(a, c, d, o) end, {x, w, b}))
            end
            -- only some inputs need a gradient
            local x = ordo.randn({1, 2, 4, 4}, D)
            local w = ordo.randn({2, 2, 3, 3}, D):requires_grad()
            assert.is_true(ag.gradcheck(function(a, c) return F.conv2d(a, c, nil, {padding = 1}) end, {x, w}))
            local xr = ordo.randn({1, 2, 4, 4}, D):requires_grad()
            assert.is_true(ag.gradcheck(function(a) return F.conv2d(a, w:detach(), nil, {padding = 1}) end, {xr}))
        end)
    end)

    it("reports bad inputs naming the op and the shapes", function()
        local x, w = ordo.randn({2, 3, 5, 5}), ordo.randn({4, 3, 3, 3})
        assert.matches("conv2d: expected a 4%-D input %(N, C, H, W%) or a 3%-D one %(C, H, W%), got shape 5x5",
                       err_of(F.conv2d, ordo.randn({5, 5}), w))
        assert.matches("conv2d: weight must be 4%-D %(out_channels, in_channels, kh, kw%), got shape 4x3",
                       err_of(F.conv2d, x, ordo.randn({4, 3})))
        assert.matches("conv2d: input of shape 2x3x5x5 has 3 channels but weight of shape 4x2x3x3 expects 2",
                       err_of(F.conv2d, x, ordo.randn({4, 2, 3, 3})))
        assert.matches("conv2d: kernel 7x7 is larger than the padded input 7x5 %(input 2x3x5x5, padding 1x0%)",
                       err_of(F.conv2d, x, ordo.randn({4, 3, 7, 7}), nil, {padding = {1, 0}}))
        assert.matches("conv2d: kernel 3x3 %(dilation 3x1%) is larger than the padded input 5x5",
                       err_of(F.conv2d, x, w, nil, {dilation = {3, 1}}))
        assert.matches("conv2d: bias must have shape 4 %(one per output channel of weight 4x3x3x3%), got 3",
                       err_of(F.conv2d, x, w, ordo.randn({3})))
        assert.matches("conv2d: input is float32 but weight is float64", err_of(F.conv2d, x, w:double()))
        assert.matches("conv2d: input must be float32 or float64, got int32", err_of(F.conv2d, x:int(), w))
        assert.matches("conv2d: stride must be positive integers, got 0", err_of(F.conv2d, x, w, nil, {stride = 0}))
        assert.matches("conv2d: padding must be non%-negative integers, got %-1",
                       err_of(F.conv2d, x, w, nil, {padding = {-1, 0}}))
        assert.matches("conv2d: unknown option 'strides'", err_of(F.conv2d, x, w, nil, {strides = 2}))
        assert.matches("conv2d: weight must be a tensor, got nil", err_of(F.conv2d, x))
    end)
end)

describe("grouped convolutions (groups = ...)", function()
    before_each(function() ordo.manual_seed(17) end)

    -- each group of channels against the naive loop on its slices
    local function check_groups(x, w, b, g, o)
        local y = F.conv2d(x, w, b, {stride = o.stride, padding = o.padding, dilation = o.dilation, groups = g})
        local cg, og = x:size(2) / g, w:size(1) / g
        assert.equal(w:size(1), y:size(2))
        for i = 0, g - 1 do
            close(y:narrow(2, i * og + 1, og):totable(),
                  ref_conv(x:narrow(2, i * cg + 1, cg), w:narrow(1, i * og + 1, og), b and b:narrow(1, i * og + 1, og),
                           o.stride, o.padding, o.dilation), 1e-12, "group " .. i)
        end
    end

    it("avg pooling with count_include_pad = false averages only the input elements of each window", function()
        local ones = ordo.ones({1, 1, 3, 3}, D)
        close(F.avg_pool2d(ones, 3, {stride = 1, padding = 1, count_include_pad = false}):reshape(-1):totable(),
              {1, 1, 1, 1, 1, 1, 1, 1, 1})
        close(F.avg_pool2d(ones, 3, {stride = 1, padding = 1}):reshape(-1):totable(),
              {4 / 9, 6 / 9, 4 / 9, 6 / 9, 1, 6 / 9, 4 / 9, 6 / 9, 4 / 9}) -- the default, Torch's: zeros counted
        local x = ordo.arange(1, 6, D):reshape(1, 1, 5)
        close(F.avg_pool1d(x, 3, {stride = 2, padding = 1, count_include_pad = false}):reshape(-1):totable(),
              {1.5, 3, 4.5})
        close(nn.AvgPool1d(3, {stride = 2, padding = 1, count_include_pad = false})(x):reshape(-1):totable(),
              {1.5, 3, 4.5})
        close(nn.AvgPool2d(2, {padding = 1, count_include_pad = false})(ones:narrow(3, 1, 2):narrow(4, 1, 2))
                  :reshape(-1):totable(), {1, 1, 1, 1})
        assert.is_true(ag.gradcheck(function(u) return F.avg_pool2d(u, 3, {stride = 2, padding = 1,
                                                                         count_include_pad = false}) end,
                                    {ordo.randn({1, 2, 4, 5}, D):requires_grad()}))
        assert.matches("unknown option 'count_include_pad'", err_of(nn.MaxPool1d, 2, {count_include_pad = false}))
        assert.matches("count_include_pad must be a boolean", err_of(nn.AvgPool2d, 2, {count_include_pad = 0}))
    end)

    it("padding \"same\" keeps the spatial size (the extra pad at the end, Torch's) and \"valid\" is none", function()
        local x = ordo.randn({2, 3, 5, 6}, D)
        for _, k in ipairs({{3, 3}, {2, 4}, {4, 3}}) do
            for _, d in ipairs({1, 2}) do
                local w = ordo.randn({4, 3, k[1], k[2]}, D)
                local y = F.conv2d(x, w, nil, {padding = "same", dilation = d})
                assert.same({2, 4, 5, 6}, y:shape())
                local th, tw = d * (k[1] - 1), d * (k[2] - 1)
                local lh, lw = math.floor(th / 2), math.floor(tw / 2)
                local ref = F.conv2d(F.pad(x, {lw, tw - lw, lh, th - lh}), w, nil, {dilation = d})
                close(y:reshape(-1):totable(), ref:reshape(-1):totable(), 1e-12, "same " .. k[1] .. "x" .. k[2])
            end
        end
        local w = ordo.randn({4, 3, 3, 3}, D)
        assert.same(F.conv2d(x, w):totable(), F.conv2d(x, w, {padding = "valid"}):totable())
        local x1 = ordo.randn({2, 3, 7}, D)
        assert.same({2, 4, 7}, F.conv1d(x1, ordo.randn({4, 3, 4}, D), {padding = "same"}):shape())
        assert.same({2, 4, 4}, F.conv1d(x1, ordo.randn({4, 3, 4}, D), {padding = "valid"}):shape())
        assert.same({4, 5, 5}, F.conv2d(ordo.randn({3, 5, 5}), ordo.randn({4, 3, 2, 2}), {padding = "same"}):shape())
        assert.same({2, 4, 5, 5}, F.conv2d(ordo.randn({2, 4, 5, 5}), ordo.randn({4, 2, 2, 2}), ordo.zeros({4}),
                                           {padding = "same", groups = 2}):shape())
        assert.is_true(ag.gradcheck(function(a, b) return F.conv2d(a, b, nil, {padding = "same"}) end,
                                    {x:clone():requires_grad(), ordo.randn({4, 3, 2, 3}, D):requires_grad()}))
        local m = nn.Conv2d(3, 4, {2, 3}, {padding = "same"})
        assert.same({1, 4, 5, 5}, m(ordo.randn({1, 3, 5, 5})):shape())
        assert.matches("padding same", tostring(m))
        local m1 = nn.Conv1d(3, 4, 4, {padding = "same", dilation = 2})
        assert.same({1, 4, 9}, m1(ordo.randn({1, 3, 9})):shape())
        assert.matches("needs stride 1", err_of(nn.Conv2d, 3, 4, 3, {padding = "same", stride = 2}))
        assert.matches("needs stride 1", err_of(F.conv2d, x, w, {padding = "same", stride = {1, 2}}))
        assert.matches('Conv2d: padding must be an integer, a pair {h, w}, "same" or "valid", got "full"',
                       err_of(nn.Conv2d, 3, 4, 3, {padding = "full"}), 1, true)
        assert.matches('conv1d: padding must be an integer, "same" or "valid", got "foo"',
                       err_of(F.conv1d, x1, ordo.randn({4, 3, 3}, D), {padding = "foo"}), 1, true)
    end)

    it("conv2d, conv1d and conv_transpose2d: each group of channels is its own convolution", function()
        each_layout(function()
            local x = ordo.randn({6, 2, 5, 7}, D):transpose(1, 2) -- not contiguous
            check_groups(x, ordo.randn({9, 2, 3, 2}, D), ordo.randn({9}, D), 3,
                         {stride = {2, 1}, padding = {1, 2}, dilation = {1, 2}})
            check_groups(x, ordo.randn({6, 1, 3, 3}, D), nil, 6, {padding = 1}) -- depthwise
            check_groups(x, ordo.randn({4, 3, 1, 1}, D), ordo.randn({4}, D), 2, {})
        end)
        -- a 3-D input
        local x3, w3 = ordo.randn({4, 5, 5}, D), ordo.randn({2, 2, 3, 3}, D)
        close(F.conv2d(x3, w3, nil, {groups = 2}):totable(), F.conv2d(x3:unsqueeze(1), w3, nil, {groups = 2})[1]:totable(), 0)
        -- conv1d: the 2-D op over a height of 1
        local x1, w1, b1 = ordo.randn({2, 4, 9}, D), ordo.randn({6, 2, 3}, D), ordo.randn({6}, D)
        close(F.conv1d(x1, w1, b1, {stride = 2, padding = 1, groups = 2}):totable(),
              F.conv2d(x1:unsqueeze(3), w1:unsqueeze(3), b1, {stride = {1, 2}, padding = {0, 1}, groups = 2})
                  :squeeze(3):totable(), 1e-15)
        -- conv_transpose2d: the block-diagonal weight's
        local xt, wt, bt = ordo.randn({2, 4, 3, 3}, D), ordo.randn({4, 3, 2, 2}, D), ordo.randn({6}, D)
        local full = ordo.zeros({4, 6, 2, 2}, D)
        full:narrow(1, 1, 2):narrow(2, 1, 3):copy_(wt:narrow(1, 1, 2))
        full:narrow(1, 3, 2):narrow(2, 4, 3):copy_(wt:narrow(1, 3, 2))
        local yt = F.conv_transpose2d(xt, wt, bt, {stride = 2, padding = 1, output_padding = 1, groups = 2})
        assert.same({2, 6, 5, 5}, yt:shape())
        close(yt:totable(), F.conv_transpose2d(xt, full, bt, {stride = 2, padding = 1, output_padding = 1}):totable(),
              1e-12)
    end)

    it("have gradients that agree with central differences", function()
        local x = ordo.randn({2, 4, 5, 4}, D):requires_grad()
        local w, b = ordo.randn({6, 2, 3, 2}, D):requires_grad(), ordo.randn({6}, D):requires_grad()
        assert.is_true(ag.gradcheck(function(a, c, d) return F.conv2d(a, c, d, {padding = 1, stride = 2, groups = 2}) end,
                                    {x, w, b}))
        -- depthwise with two filters per channel, dilated, both layouts; through a transposed
        -- (not contiguous) view of the input too
        local wd = ordo.randn({8, 1, 2, 3}, D):requires_grad()
        local xt = ordo.randn({2, 4, 5, 6}, D):requires_grad()
        each_layout(function()
            assert.is_true(ag.gradcheck(function(a, c, d)
                return F.conv2d(a:transpose(3, 4):transpose(3, 4), c, d, {padding = {1, 2}, dilation = {2, 1},
                                                                         groups = 4})
            end, {xt, wd, ordo.randn({8}, D):requires_grad()}))
            assert.is_true(ag.gradcheck(function(a, c)
                return F.conv2d(a:transpose(3, 4), c, nil, {padding = 1, groups = 4})
            end, {xt, wd}))
        end)
        local wt, bt = ordo.randn({4, 1, 2, 2}, D):requires_grad(), ordo.randn({4}, D):requires_grad()
        assert.is_true(ag.gradcheck(function(a, c, d) return F.conv_transpose2d(a, c, d, {stride = 2, groups = 4}) end,
                                    {x, wt, bt}))
    end)

    it("modules: weight shapes and init bounds as Torch's; mismatched groups named", function()
        local m = nn.Conv2d(4, 8, 3, {groups = 4, padding = 1})
        assert.same({8, 1, 3, 3}, m.weight:shape())
        assert.is_true(m.weight:abs():max():item() <= 1 / 3 + 1e-7) -- fan_in = 1·3·3
        assert.is_true(m.bias:abs():max():item() <= 1 / 3 + 1e-7)
        assert.same({2, 8, 5, 5}, m(ordo.randn({2, 4, 5, 5})):shape())
        assert.equal("Conv2d(4 -> 8, kernel 3x3, padding 1x1, groups 4)", tostring(m))
        local m1 = nn.Conv1d(4, 6, 3, {groups = 2})
        assert.same({6, 2, 3}, m1.weight:shape())
        assert.same({2, 6, 3}, m1(ordo.randn({2, 4, 5})):shape())
        assert.equal("Conv1d(4 -> 6, kernel 3, groups 2)", tostring(m1))
        local mt = nn.ConvTranspose2d(4, 6, 3, {groups = 2})
        assert.same({4, 3, 3, 3}, mt.weight:shape())
        assert.same({6, 7, 7}, mt(ordo.randn({4, 5, 5})):shape())
        assert.matches("Conv2d: in_channels 4 and out_channels 6 must both be divisible by groups 4",
                       err_of(nn.Conv2d, 4, 6, 3, {groups = 4}), 1, true)
        assert.matches("Conv1d: groups must be a positive integer, got 0", err_of(nn.Conv1d, 4, 6, 3, {groups = 0}), 1,
                       true)
        assert.matches("conv2d: input of shape 1x6x5x5 has 6 channels but weight of shape 6x3x3x3 with groups 3 expects 9",
                       err_of(F.conv2d, ordo.randn({1, 6, 5, 5}), ordo.randn({6, 3, 3, 3}), nil, {groups = 3}), 1, true)
        assert.matches("conv2d: weight of shape 4x2x3x3: out channels 4 must be divisible by groups 3",
                       err_of(F.conv2d, ordo.randn({1, 6, 5, 5}), ordo.randn({4, 2, 3, 3}), nil, {groups = 3}), 1, true)
        assert.matches("conv2d: groups must be a positive integer, got 1.5",
                       err_of(F.conv2d, ordo.randn({1, 6, 5, 5}), ordo.randn({6, 2, 3, 3}), nil, {groups = 1.5}), 1, true)
        assert.matches("conv_transpose2d: input of shape 1x6x5x5 has 6 channels but weight of shape 6x3x3x3 with groups 4",
                       err_of(F.conv_transpose2d, ordo.randn({1, 6, 5, 5}), ordo.randn({6, 3, 3, 3}), nil, {groups = 4}),
                       1, true)
    end)
end)

describe("nn.functional.max_pool2d", function()
    before_each(function() ordo.manual_seed(11) end)

    it("matches a naive loop (values and indices) for kernels, strides and paddings", function()
        local x = ordo.randn({2, 3, 7, 8}, D)
        for _, c in ipairs({{2}, {3, {stride = 2}}, {3, {stride = 1, padding = 1}}, {{2, 3}, {stride = {1, 2}}},
                            {{3, 2}, {padding = {1, 1}}}}) do
            local o = c[2] or {}
            o.return_indices = true
            local y, idx = F.max_pool2d(x, c[1], o)
            local wy, wi = ref_pool(x, c[1], o.stride, o.padding)
            close(y:totable(), wy, 0)
            assert.equal("int64", idx:dtype())
            assert.same(wi, idx:totable())
        end
        -- float32 and integer inputs too; a 3-D input
        local xi = ordo.tensor({{{{1, 5, 2, 0}, {3, 4, 7, 7}, {9, 8, 1, 6}, {0, 9, 1, 2}}}}, {dtype = "int32"})
        assert.same({{{{5, 7}, {9, 6}}}}, F.max_pool2d(xi, 2):totable())
        assert.same({{{5, 7}, {9, 6}}}, F.max_pool2d(xi:squeeze(1), 2):totable())
        local xf = ordo.randn({1, 2, 4, 4})
        close(F.max_pool2d(xf, 2):totable(), (ref_pool(xf, 2)), 0)
    end)

    it("has a gradient that agrees with central differences (overlapping windows add up)", function()
        for _, c in ipairs({{2, {}}, {3, {stride = 1, padding = 1}}, {{2, 3}, {stride = {2, 1}}}}) do
            local x = ordo.randn({2, 2, 5, 6}, D):requires_grad()
            assert.is_true(ag.gradcheck(function(a) return F.max_pool2d(a, c[1], c[2]) end, {x}))
        end
        -- the gradient lands on the max of each window
        local x = ordo.tensor({{{{1, 5}, {3, 4}}}}, D):requires_grad()
        F.max_pool2d(x, 2):sum():backward()
        assert.same({{{{0, 1}, {0, 0}}}}, x.grad:totable())
    end)

    it("dilation and ceil_mode (Torch's): values, indices (first of ties) and gradients match a naive loop", function()
        -- fixed cases from Torch's docs and the edges: a ceil_mode window reaching past the padding, dropped
        -- when it would start past the input; dilation wider than the input in ceil_mode
        local x = ordo.arange(1, 1 + 5 * 5, D):view(1, 1, 5, 5)
        assert.same({1, 1, 3, 3}, F.max_pool2d(x, 2, {ceil_mode = true}):size())
        assert.same({1, 1, 2, 2}, F.max_pool2d(x, 2):size())
        assert.same({{{{13, 14, 15}, {18, 19, 20}, {23, 24, 25}}}},
                    F.max_pool2d(x, 2, {stride = 1, dilation = 2}):totable())
        assert.same({{{{19, 19}, {19, 19}}}}, F.max_pool2d(x, 3, {stride = 2, dilation = 2, padding = 1}):totable())
        assert.same({1, 1, 2, 2}, F.max_pool2d(x, 2, {stride = 3, ceil_mode = true}):size())
        -- random geometries in float64 and ties in int32, on a non-contiguous view too
        math.randomseed(17)
        local checked = 0
        for trial = 1, 60 do
            local k = {math.random(1, 4), math.random(1, 4)}
            local st = {math.random(1, 3), math.random(1, 3)}
            local pd = {math.random(0, math.floor(k[1] / 2)), math.random(0, math.floor(k[2] / 2))}
            local dl = {math.random(1, 3), math.random(1, 3)}
            local ceil_mode = trial % 2 == 0
            local H, W = math.random(3, 8), math.random(3, 9)
            local xs = {trial % 3 == 0 and ordo.randint(0, 3, {2, 2, W, H}, "int32"):transpose(3, 4)
                        or ordo.randn({2, 2, H, W}, D)}
            local o = {stride = st, padding = pd, dilation = dl, ceil_mode = ceil_mode, return_indices = true}
            local ok, y, idx = pcall(F.max_pool2d, xs[1], k, o)
            if ok then
                checked = checked + 1
                local wy, wi = ref_pool(xs[1], k, st, pd, dl, ceil_mode)
                local where = string.format("trial %d: kernel %dx%d stride %dx%d padding %dx%d dilation %dx%d%s", trial,
                                            k[1], k[2], st[1], st[2], pd[1], pd[2], dl[1], dl[2],
                                            ceil_mode and " ceil" or "")
                assert.same(wy, y:totable(), where)
                assert.same(wi, idx:totable(), where)
                if xs[1]:dtype() == "float64" and trial % 4 == 0 then
                    local xg = xs[1]:clone():requires_grad()
                    o.return_indices = nil
                    assert.is_true(ag.gradcheck(function(a) return F.max_pool2d(a, k, o) end, {xg}), where)
                end
            else
                -- refused only where a window would hold padding alone or none fits
                local msg = tostring(y)
                assert.is_truthy(msg:find("holds only padding", 1, true) or
                                 msg:find("larger than the padded input", 1, true), msg)
            end
        end
        assert.is_true(checked >= 40, "checked " .. checked)
        -- the modules and the 1-D op take them too
        local m = nn.MaxPool2d(2, {ceil_mode = true, dilation = {1, 2}})
        assert.same({1, 1, 3, 2}, m:forward(x):size())
        assert.matches("dilation 1x2, ceil_mode", tostring(m))
        local x1 = ordo.tensor({{{3, 1, 4, 1, 5, 9}}}, D)
        -- taps {1, 3}, {3, 5} and in ceil_mode {5, 7}, 7 past the end
        assert.same({{{4, 5, 5}}}, F.max_pool1d(x1, 2, {ceil_mode = true, dilation = 2, stride = 2}):totable())
        assert.same({{{4, 5}}}, nn.MaxPool1d(2, {dilation = 2, stride = 2}):forward(x1):totable())
        local y1, i1 = nn.MaxPool1d(3, {return_indices = true}):forward(x1)
        assert.same({{{4, 9}}}, y1:totable())
        assert.same({{{3, 6}}}, i1:totable())
    end)

    it("max_unpool2d / max_unpool1d and their modules put each max back (Torch's example too)", function()
        local x = ordo.randn({2, 3, 5, 6}, D)
        local y, i = F.max_pool2d(x, 2, {return_indices = true})
        assert.same({2, 3, 4, 6}, F.max_unpool2d(y, i, 2):shape())
        local u = nn.MaxUnpool2d(2)(y, i, {5, 6})
        assert.same({2, 3, 5, 6}, u:shape())
        local X, U, n = x:totable(), u:totable(), 0
        for a = 1, 2 do
            for c = 1, 3 do
                for h = 1, 5 do
                    for w = 1, 6 do
                        if U[a][c][h][w] ~= 0 then
                            n = n + 1
                            assert.equal(X[a][c][h][w], U[a][c][h][w])
                        end
                    end
                end
            end
        end
        assert.equal(36, n) -- every max of the 2x3 windows of each plane, back in place
        assert.same(u[1]:totable(), F.max_unpool2d(y[1], i[1], 2, {output_size = {5, 6}}):totable())
        -- Torch's MaxUnpool1d example
        local s = ordo.tensor({{{1, 2, 3, 4, 5, 6, 7, 8}}}, D)
        local p, pi = F.max_pool1d(s, 2, {return_indices = true})
        assert.same({0, 2, 0, 4, 0, 6, 0, 8}, nn.MaxUnpool1d(2)(p, pi):totable()[1][1])
        assert.same({0, 2, 0, 4, 0, 6, 0, 8, 0}, nn.MaxUnpool1d(2)(p, pi, {1, 1, 9}):totable()[1][1])
        assert.is_true(ag.gradcheck(function(a) return F.max_unpool2d(a, i, 2) end, {y:clone():requires_grad()}))
        assert.matches("max_unpool2d: indices must be int64, got float32", err_of(F.max_unpool2d, y, i:float(), 2))
        assert.matches("max_unpool2d: output_size 7 must be within 3..5 in spatial dim 1 %(input 2x3x2x3%)",
                       err_of(F.max_unpool2d, y, i, 2, {output_size = {7, 6}}))
        assert.matches("max_unpool2d: indices of shape 3x2x3 do not match input 2x3x2x3",
                       err_of(F.max_unpool2d, y, i[1], 2))
        -- an index out of the output plane, found when the scatter runs:
        -- the failure names max_unpool2d, not the scatter it is made of
        local bad = F.max_unpool2d(ordo.ones({1, 1, 1, 1}), ordo.tensor({{{{30}}}}, {dtype = "int64"}), 2)
        assert.matches("max_unpool2d: scatter: index 30 out of range", err_of(bad.totable, bad), 1, true)
        pcall(ordo.engine.wait_for_all)
    end)

    -- the kernels take kernel sizes, strides, paddings and dilations up to
    -- 2^24: a larger one was refused by the kernel under its own name, as
    -- not positive ("im2col: stride 1x1073741824 must be positive")
    it("a kernel size, stride, padding or dilation past 2^24 is refused by the op called, as too large", function()
        local x = ordo.randn({1, 1, 4, 4})
        assert.matches("avg_pool2d: stride 1073741824 is too large (at most 2^24)",
                       err_of(F.avg_pool2d, x, 2, {stride = 2 ^ 30}), 1, true)
        assert.matches("avg_pool1d: stride 1099511627776 is too large (at most 2^24)",
                       err_of(F.avg_pool1d, ordo.randn({1, 1, 4}), 2, {stride = 2 ^ 40}), 1, true)
        assert.matches("max_pool1d: stride 1099511627776 is too large",
                       err_of(F.max_pool1d, ordo.randn({1, 1, 4}), 2, {stride = 2 ^ 40}), 1, true)
        assert.matches("unfold: stride 1099511627776 is too large", err_of(F.unfold, x, 2, {stride = 2 ^ 40}), 1, true)
        assert.matches("conv2d: padding 33554432 is too large",
                       err_of(F.conv2d, x, ordo.randn({1, 1, 2, 2}), nil, {padding = 2 ^ 25}), 1, true)
        assert.matches("Conv2d: kernel_size 33554432 is too large", err_of(nn.Conv2d, 1, 1, 2 ^ 25), 1, true)
        -- 2^24 itself is taken (and the window is then larger than the input)
        assert.matches("avg_pool2d: kernel", err_of(F.avg_pool2d, x, 2 ^ 24))
        assert.same({1, 1, 1, 1}, F.avg_pool2d(x, 2, {stride = 2 ^ 24}):shape())
    end)

    -- (adaptive pooling of an output size whose bins cannot be allocated
    -- names itself too, "adaptive_max_pool2d: arange: out of memory ...",
    -- through util.own_errors as one_hot's, nn_spec; not run here: 2^31 - 1
    -- bins may well be allocated, 16 GiB of them; its own errors still come
    -- once, at the caller's line)
    it("adaptive pooling through its error-naming wrapper: results and own errors as before", function()
        assert.same({1, 3, 2}, F.adaptive_avg_pool1d(ordo.randn({1, 3, 5}), 2):shape())
        assert.same({1, 3, 2}, F.adaptive_max_pool1d(ordo.randn({1, 3, 5}), 2):shape())
        assert.same({1, 3, 2, 2}, F.adaptive_avg_pool2d(ordo.randn({1, 3, 5, 5}), 2):shape())
        assert.same({1, 3, 2, 3}, F.adaptive_max_pool2d(ordo.randn({1, 3, 5, 5}), {2, 3}):shape())
        assert.matches("^.-nn_conv_spec.lua:%d+: adaptive_max_pool2d: output size must be positive integers, got 0",
                       err_of(function() return F.adaptive_max_pool2d(ordo.randn({1, 1, 5, 5}), 0) end))
    end)

    it("reports bad dilation and ceil_mode arguments, and windows of padding alone", function()
        local x = ordo.randn({1, 1, 4, 4})
        assert.matches("max_pool2d: dilation must be positive integers, got 0", err_of(F.max_pool2d, x, 2, {dilation = 0}))
        assert.matches("max_pool2d: ceil_mode must be a boolean, got number",
                       err_of(F.max_pool2d, x, 2, {ceil_mode = 1}))
        assert.matches("MaxPool2d: ceil_mode must be a boolean", err_of(nn.MaxPool2d, 2, {ceil_mode = "yes"}))
        assert.matches("max_pool1d: dilation must be a positive integer",
                       err_of(F.max_pool1d, ordo.randn({1, 1, 4}), 2, {dilation = -1}))
        -- taps at -1 and 3 of a 3-wide input: this window never sees the input
        assert.matches("max_pool2d: with kernel 2x2 %(dilation 4x4%) and padding 1x1 a window over input 1x1x3x3 " ..
                       "holds only padding", err_of(F.max_pool2d, ordo.randn({1, 1, 3, 3}), 2,
                                                    {dilation = 4, padding = 1}))
        assert.matches("max_pool2d: kernel 3x3 %(dilation 2x2%) is larger than the padded input 4x4",
                       err_of(F.max_pool2d, x, 3, {dilation = 2}))
        assert.matches("avg_pool2d: .*dilation", err_of(F.avg_pool2d, x, 2, {dilation = 2}))
    end)

    it("reports bad arguments", function()
        local x = ordo.randn({1, 1, 4, 4})
        assert.matches("max_pool2d: padding 2x2 must be at most half the kernel 3x3",
                       err_of(F.max_pool2d, x, 3, {padding = 2}))
        assert.matches("max_pool2d: kernel 5x5 is larger than the padded input 4x4",
                       err_of(F.max_pool2d, x, 5))
        assert.matches("max_pool2d: expected a 4%-D input", err_of(F.max_pool2d, ordo.randn({4, 4}), 2))
        assert.matches("max_pool2d: kernel size must be positive integers, got 0", err_of(F.max_pool2d, x, 0))
        assert.matches("max_pool2d: expected a kernel size", err_of(F.max_pool2d, x))
    end)
end)

-- Plain-Lua average pooling (zeros of the padding counted) and adaptive
-- average pooling (Torch's bins: floor(i H / oh) .. ceil((i + 1) H / oh)).
local function ref_avg_pool(x, k, stride, padding)
    return (ref_sliding(x, k, stride, padding, function(P, iy, ix, acc) return (acc or 0) + P[iy][ix] end,
                        function(acc, area) return (acc or 0) / area end))
end

local function ref_adaptive(x, oh, ow)
    return (ref_planes(x, function() return oh, ow end, function(P, i, j, H, W)
        local r0, r1 = math.floor((i - 1) * H / oh) + 1, math.ceil(i * H / oh)
        local c0, c1 = math.floor((j - 1) * W / ow) + 1, math.ceil(j * W / ow)
        local s = 0
        for r = r0, r1 do for q = c0, c1 do s = s + P[r][q] end end
        return s / ((r1 - r0 + 1) * (c1 - c0 + 1))
    end))
end

describe("nn.functional.avg_pool2d and adaptive_avg_pool2d", function()
    before_each(function() ordo.manual_seed(12) end)

    it("match naive loops for kernels, strides, paddings and output sizes", function()
        local x = ordo.randn({2, 3, 7, 8}, D)
        for _, c in ipairs({{2}, {3, {stride = 2}}, {3, {stride = 1, padding = 1}}, {{2, 3}, {stride = {1, 2}}},
                            {{3, 2}, {padding = {1, 1}}}}) do
            local o = c[2] or {}
            close(F.avg_pool2d(x, c[1], o):totable(), ref_avg_pool(x, c[1], o.stride, o.padding), 1e-12)
        end
        -- larger than the input too: overlapping bins, as Torch
        for _, size in ipairs({{1, 1}, {7, 8}, {3, 4}, {2, 3}, {5, 5}, {9, 11}, {4, 16}}) do
            close(F.adaptive_avg_pool2d(x, size):totable(), ref_adaptive(x, size[1], size[2]), 1e-12)
        end
        assert.same({3, 1, 1}, F.adaptive_avg_pool2d(x[1], 1):shape()) -- a 3-D input
        assert.same({2, 3, 3, 4}, nn.AvgPool2d(2)(x):shape())
        assert.same({2, 3, 1, 1}, nn.AdaptiveAvgPool2d(1)(x):shape())
    end)

    it("adaptive max pooling, 1-D adaptive pooling and false (Torch's None) output sizes", function()
        local x = ordo.randn({2, 3, 7, 5}, D)
        local X = x:totable()
        local function ref_max(oh, ow)
            local Y = {}
            for n = 1, 2 do
                Y[n] = {}
                for c = 1, 3 do
                    Y[n][c] = {}
                    for i = 0, oh - 1 do
                        Y[n][c][i + 1] = {}
                        for j = 0, ow - 1 do
                            local m = -math.huge
                            for a = math.floor(i * 7 / oh), math.ceil((i + 1) * 7 / oh) - 1 do
                                for b = math.floor(j * 5 / ow), math.ceil((j + 1) * 5 / ow) - 1 do
                                    m = math.max(m, X[n][c][a + 1][b + 1])
                                end
                            end
                            Y[n][c][i + 1][j + 1] = m
                        end
                    end
                end
            end
            return Y
        end
        for _, size in ipairs({{1, 1}, {3, 2}, {7, 5}, {4, 3}, {9, 7}, {2, 5}}) do
            assert.same(ref_max(size[1], size[2]), F.adaptive_max_pool2d(x, size):totable())
        end
        assert.same(ref_max(3, 5), nn.AdaptiveMaxPool2d({3, false})(x):totable())
        assert.same(ref_max(2, 2)[1], F.adaptive_max_pool2d(x[1], 2):totable()) -- (C, H, W)
        close(F.adaptive_avg_pool2d(x, {false, 2}):totable(), F.adaptive_avg_pool2d(x, {7, 2}):totable(), 1e-15)
        assert.equal("AdaptiveMaxPool2d(3xNone)", tostring(nn.AdaptiveMaxPool2d({3, false})))
        -- Torch: adaptive_avg_pool1d(arange(6), 4) = [0.5, 1.5, 3.5, 4.5]; the max: [1, 2, 4, 5]
        local seq = ordo.arange(6, D):view(1, 1, 6)
        close(F.adaptive_avg_pool1d(seq, 4):totable()[1][1], {0.5, 1.5, 3.5, 4.5})
        assert.same({1, 2, 4, 5}, nn.AdaptiveMaxPool1d(4)(seq[1]):totable()[1])
        assert.same({{2.5}}, nn.AdaptiveAvgPool1d(1)(seq[1]):totable())
        local xg = ordo.randn({1, 2, 5, 6}, D):requires_grad()
        assert.is_true(ag.gradcheck(function(a) return F.adaptive_max_pool2d(a, {3, 4}) end, {xg}))
        assert.is_true(ag.gradcheck(function(a) return F.adaptive_max_pool1d(a, 4) end, {ordo.randn({2, 7}, D):requires_grad()}))
        assert.is_true(ag.gradcheck(function(a) return F.adaptive_avg_pool1d(a, 4) end, {ordo.randn({1, 2, 7}, D):requires_grad()}))
        assert.matches("adaptive_max_pool2d: output size must be an integer or a table of 2, got a table of 3",
                       err_of(F.adaptive_max_pool2d, x, {1, 2, 3}))
        assert.matches("AdaptiveMaxPool2d: output size must be positive integers, got 0",
                       err_of(nn.AdaptiveMaxPool2d, {0, 1}))
        assert.matches("adaptive_max_pool1d: expected a 3%-D input %(N, C, L%) or a 2%-D one %(C, L%), got shape 5",
                       err_of(F.adaptive_max_pool1d, ordo.randn({5}), 2))
        -- a huge output size is refused at once (2^62 looped in Lua without end)
        assert.matches("adaptive_max_pool1d: output size 4.6116860184273879e%+18 is too large",
                       err_of(F.adaptive_max_pool1d, ordo.randn({2, 3}), 2 ^ 62))
        assert.matches("adaptive_avg_pool2d: output size 2147483648 is too large",
                       err_of(F.adaptive_avg_pool2d, ordo.randn({1, 2, 3}), {1, 2 ^ 31}))
        -- more bins than elements: they repeat elements, as Torch's
        assert.same({{0, 1, 1, 2, 2}}, F.adaptive_max_pool1d(ordo.arange(3, D):view(1, 3), 5):totable())
    end)

    it("ceil_mode and divisor_override: Torch's divisors (clipped last windows), modules and 1-D", function()
        -- Torch's CPU kernel: a window's divisor is its extent inside the
        -- padded input (count_include_pad) or the input, or the override
        local function outsz(n, k, s, p, ceil)
            if not ceil then return math.floor((n + 2 * p - k) / s) + 1 end
            local o = math.ceil((n + 2 * p - k) / s) + 1
            if (o - 1) * s >= n + p then o = o - 1 end
            return o
        end
        local function ref(x, kh, kw, sh, sw, ph, pw, ceil, cip, div)
            local X, Y = x:totable(), {}
            local H, W = #X[1][1], #X[1][1][1]
            local oh, ow = outsz(H, kh, sh, ph, ceil), outsz(W, kw, sw, pw, ceil)
            for n = 1, #X do
                Y[n] = {}
                for c = 1, #X[1] do
                    Y[n][c] = {}
                    for i = 0, oh - 1 do
                        Y[n][c][i + 1] = {}
                        for j = 0, ow - 1 do
                            local hs, ws = i * sh - ph, j * sw - pw
                            local he, we = math.min(hs + kh, H + ph), math.min(ws + kw, W + pw)
                            local ps = (he - hs) * (we - ws)
                            hs, ws, he, we = math.max(hs, 0), math.max(ws, 0), math.min(he, H), math.min(we, W)
                            local s = 0
                            for a = hs, he - 1 do for b = ws, we - 1 do s = s + X[n][c][a + 1][b + 1] end end
                            Y[n][c][i + 1][j + 1] = s / (div or (cip and ps or (he - hs) * (we - ws)))
                        end
                    end
                end
            end
            return Y
        end
        for _, H in ipairs({5, 6}) do
            local x = ordo.randn({2, 2, H, 7}, D)
            for _, c in ipairs({{2, 3, 1, 2, 0, 1}, {3, 2, 2, 3, 1, 0}, {3, 2, 3, 2, 1, 1}, {2, 2, 2, 2, 1, 0}}) do
                for _, ceil in ipairs({false, true}) do
                    for _, cip in ipairs({true, false}) do
                        for _, div in ipairs({false, 5}) do
                            local o = {stride = {c[3], c[4]}, padding = {c[5], c[6]}, ceil_mode = ceil,
                                       count_include_pad = cip, divisor_override = div or nil}
                            close(F.avg_pool2d(x, {c[1], c[2]}, o):totable(),
                                  ref(x, c[1], c[2], c[3], c[4], c[5], c[6], ceil, cip, div or nil), 1e-12)
                        end
                    end
                end
            end
        end
        local xg = ordo.randn({1, 2, 5, 6}, D):requires_grad()
        assert.is_true(ag.gradcheck(function(a)
            return F.avg_pool2d(a, 3, {stride = 2, padding = 1, ceil_mode = true, count_include_pad = false})
        end, {xg}))
        assert.is_true(ag.gradcheck(function(a) return F.avg_pool2d(a, 2, {ceil_mode = true}) end, {xg}))
        -- Torch: avg_pool1d([0, 1, 2, 3, 4], 2, ceil_mode = True) = [0.5, 2.5, 4]
        local seq = ordo.arange(5, D):view(1, 1, 5)
        close(F.avg_pool1d(seq, 2, {ceil_mode = true}):totable()[1][1], {0.5, 2.5, 4})
        close(nn.AvgPool1d(2, {ceil_mode = true})(seq):totable()[1][1], {0.5, 2.5, 4})
        local m = nn.AvgPool2d(2, {ceil_mode = true, divisor_override = 3})
        close(m(ordo.ones({1, 1, 3, 3}, D)):totable()[1][1], {{4 / 3, 2 / 3}, {2 / 3, 1 / 3}})
        assert.equal("AvgPool2d(kernel 2x2, stride 2x2, divisor_override 3, ceil_mode)", tostring(m))
        assert.matches("AvgPool2d: divisor_override must be a positive integer, got 0",
                       err_of(nn.AvgPool2d, 2, {divisor_override = 0}))
        assert.matches("avg_pool2d: divisor_override must be a positive integer, got 1.5",
                       err_of(F.avg_pool2d, seq:view(1, 1, 1, 5), 1, {divisor_override = 1.5}))
        assert.matches("avg_pool2d: ceil_mode must be a boolean", err_of(F.avg_pool2d, seq:view(1, 1, 1, 5), 1,
                                                                        {ceil_mode = 1}))
        assert.matches("AvgPool2d: padding 2x2 must be at most half the kernel 3x3",
                       err_of(nn.AvgPool2d, 3, {padding = 2}))
        assert.matches("avg_pool1d: unknown option 'divisor_override'",
                       err_of(F.avg_pool1d, seq, 2, {divisor_override = 2}))
    end)

    it("have gradients that agree with central differences", function()
        local x = ordo.randn({1, 2, 5, 6}, D):requires_grad()
        assert.is_true(ag.gradcheck(function(a) return F.avg_pool2d(a, 3, {stride = 2, padding = 1}) end, {x}))
        assert.is_true(ag.gradcheck(function(a) return F.adaptive_avg_pool2d(a, {2, 4}) end, {x}))
        assert.is_true(ag.gradcheck(function(a) return F.adaptive_avg_pool2d(a, 1) end, {x}))
    end)

    it("report bad arguments", function()
        local x = ordo.randn({1, 1, 4, 4})
        assert.matches("avg_pool2d: padding 2x2 must be at most half the kernel 3x3",
                       err_of(F.avg_pool2d, x, 3, {padding = 2}))
        assert.matches("avg_pool2d: kernel 5x5 is larger than the padded input 4x4", err_of(F.avg_pool2d, x, 5))
        assert.matches("avg_pool2d: input must be float32 or float64, got int32",
                       err_of(F.avg_pool2d, ordo.ones({1, 1, 2, 2}, {dtype = "int32"}), 2))
        assert.matches("adaptive_avg_pool2d: output size must be positive integers, got 0",
                       err_of(F.adaptive_avg_pool2d, x, 0))
        assert.matches("AvgPool2d: unknown option 'strid'", err_of(nn.AvgPool2d, 2, {strid = 1}))
    end)
end)

-- conv_transpose2d from its definition: each input element scatters
-- x[n][ci][h][w] * w[ci][co][a][b] to y[n][co][h*sh - ph + a*dh][w*sw - pw + b*dw]
-- (0-based), what falls outside the output dropped.
local function ref_conv_transpose(x, w, b, stride, padding, output_padding, dilation)
    local sh, sw = pair(stride or 1)
    local ph, pw = pair(padding or 0)
    local oph, opw = pair(output_padding or 0)
    local dh, dw = pair(dilation or 1)
    local X, Wt, B = x:totable(), w:totable(), b and b:totable()
    local N, Ci, H, W = #X, #X[1], #X[1][1], #X[1][1][1]
    local Co, kh, kw = #Wt[1], #Wt[1][1], #Wt[1][1][1]
    local Ho = (H - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    local Wo = (W - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    local Y = {}
    for n = 1, N do
        Y[n] = {}
        for co = 1, Co do
            Y[n][co] = {}
            for i = 1, Ho do
                Y[n][co][i] = {}
                for j = 1, Wo do Y[n][co][i][j] = B and B[co] or 0 end
            end
        end
        for ci = 1, Ci do
            for h = 0, H - 1 do
                for ww = 0, W - 1 do
                    for co = 1, Co do
                        for a = 0, kh - 1 do
                            for bb = 0, kw - 1 do
                                local i, j = h * sh - ph + a * dh, ww * sw - pw + bb * dw
                                if i >= 0 and i < Ho and j >= 0 and j < Wo then
                                    local row = Y[n][co][i + 1]
                                    row[j + 1] = row[j + 1] + X[n][ci][h + 1][ww + 1] * Wt[ci][co][a + 1][bb + 1]
                                end
                            end
                        end
                    end
                end
            end
        end
    end
    return Y
end

describe("nn.functional.conv_transpose2d", function()
    before_each(function() ordo.manual_seed(23) end)

    it("matches a naive scatter for strides, paddings, output paddings and dilations", function()
        local x = ordo.randn({2, 3, 4, 5}, D)
        local w = ordo.randn({3, 2, 3, 2}, D)
        local b = ordo.randn({2}, D)
        for _, o in ipairs({{}, {stride = 2}, {stride = 2, padding = 1, output_padding = 1}, {padding = 1},
                            {stride = {2, 3}, output_padding = {1, 2}}, {dilation = 2, padding = 1},
                            {stride = 3, dilation = {1, 2}, padding = {2, 1}, output_padding = {2, 0}}}) do
            local want = ref_conv_transpose(x, w, b, o.stride, o.padding, o.output_padding, o.dilation)
            local y = F.conv_transpose2d(x, w, b, o)
            assert.same({2, 2, #want[1][1], #want[1][1][1]}, y:shape())
            close(y:totable(), want, 1e-12)
        end
        close(F.conv_transpose2d(x, w):totable(), ref_conv_transpose(x, w, nil), 1e-12)
        close(F.conv_transpose2d(x[1], w, b, {stride = 2}):totable(), ref_conv_transpose(x, w, b, 2)[1], 1e-12)
        -- Torch allows output_padding up to the dilation too (not only the stride)
        for _, o in ipairs({{dilation = 2, output_padding = 1}, {dilation = 2, padding = 1, output_padding = 1},
                            {dilation = 3, padding = 2, output_padding = 2},
                            {stride = {1, 2}, dilation = {3, 1}, padding = {1, 0}, output_padding = {2, 1}}}) do
            local want = ref_conv_transpose(x, w, b, o.stride, o.padding, o.output_padding, o.dilation)
            close(F.conv_transpose2d(x, w, b, o):totable(), want, 1e-12)
            close(F.conv_transpose2d(x[2], w, b, o):totable(), want[2], 1e-12)
        end
        local m = nn.ConvTranspose2d(3, 2, {3, 2}, {dilation = 2, output_padding = 1, dtype = "float64"})
        close(m(x):totable(), ref_conv_transpose(x, m.weight, m.bias, 1, 0, 1, 2), 1e-12)
        assert.is_true(ag.gradcheck(function(a, ww, bb)
            return F.conv_transpose2d(a, ww, bb, {dilation = 2, padding = 1, output_padding = 1})
        end, {ordo.randn({1, 2, 3, 3}, D):requires_grad(), ordo.randn({2, 2, 2, 2}, D):requires_grad(),
              ordo.randn({2}, D):requires_grad()}))
        local s1 = ordo.randn({1, 3, 5}, D)
        local w1 = ordo.randn({3, 2, 3}, D)
        close(F.conv_transpose1d(s1, w1, nil, {dilation = 2, output_padding = 1}):totable(),
              F.conv_transpose2d(s1:unsqueeze(3), w1:unsqueeze(3), nil, {dilation = {1, 2},
                                 output_padding = {0, 1}}):squeeze(3):totable(), 1e-12)
        assert.matches("conv_transpose2d: output_padding 2x2 must be smaller than the stride 1x1 or the dilation 2x2",
                       err_of(F.conv_transpose2d, x, w, nil, {dilation = 2, output_padding = 2}))
        -- it undoes a strided conv2d's shape (9x9 and 10x10 both go to 5x5:
        -- output_padding says which to go back to), and it is conv2d's
        -- adjoint: <conv2d(z, k), u> = <z, conv_transpose2d(u, k)>
        local k = ordo.randn({3, 2, 3, 3}, D)
        for _, n in ipairs({9, 10}) do
            local z = ordo.randn({1, 2, n, n}, D)
            local down = F.conv2d(z, k, {stride = 2, padding = 1})
            assert.same({1, 3, 5, 5}, down:shape())
            local up = F.conv_transpose2d(down, k, {stride = 2, padding = 1, output_padding = n - 9})
            assert.same({1, 2, n, n}, up:shape())
            local u = ordo.randn({1, 3, 5, 5}, D)
            close((down * u):sum():item(), (z * F.conv_transpose2d(u, k, {stride = 2, padding = 1,
                                                                          output_padding = n - 9})):sum():item(), 1e-12)
        end
    end)

    it("has gradients that agree with central differences", function()
        local x = ordo.randn({2, 2, 3, 3}, D):requires_grad()
        local w = ordo.randn({2, 3, 2, 3}, D):requires_grad()
        local b = ordo.randn({3}, D):requires_grad()
        assert.is_true(ag.gradcheck(function(a, ww, bb)
            return F.conv_transpose2d(a, ww, bb, {stride = 2, padding = 1, output_padding = 1})
        end, {x, w, b}))
        assert.is_true(ag.gradcheck(function(a, ww) return F.conv_transpose2d(a, ww, {dilation = 2}) end, {x, w}))
    end)

    it("ConvTranspose1d/2d forward(x, output_size) picks the output_padding, as Torch's", function()
        local m = nn.ConvTranspose2d(3, 2, 3, {stride = 2, padding = 1, dtype = "float64"})
        local x = ordo.randn({1, 3, 5, 5}, D)
        assert.same({1, 2, 9, 9}, m(x):shape())
        local y = m(x, {10, 9})
        assert.same({1, 2, 10, 9}, y:shape())
        close(y:totable(), F.conv_transpose2d(x, m.weight, m.bias, {stride = 2, padding = 1,
                                                                    output_padding = {1, 0}}):totable(), 0)
        assert.same({1, 2, 10, 10}, m(x, {1, 2, 10, 10}):shape()) -- a whole shape: its last two
        assert.same({2, 10, 10}, m(x[1], {10, 10}):shape())
        assert.matches("ConvTranspose2d: output_size 11 is not reachable from input 1x3x5x5: spatial dim 1 can be 9..10",
                       err_of(m, x, {11, 9}))
        local m1 = nn.ConvTranspose1d(3, 2, 3, {stride = 3})
        assert.same({2, 14}, m1(ordo.randn({3, 4}), {14}):shape())
        assert.matches("ConvTranspose1d: output_size 15 is not reachable", err_of(m1, ordo.randn({3, 4}), {15}))
    end)

    it("conv_transpose1d / ConvTranspose1d: a naive scatter (groups too), gradients, errors", function()
        local function ref(x, w, b, s, p, op, d, g)
            local X, Wt = x:totable(), w:totable()
            local N, Ci, L = #X, #X[1], #X[1][1]
            local Cog, k = #Wt[1], #Wt[1][1]
            local out = (L - 1) * s - 2 * p + d * (k - 1) + op + 1
            local Y = {}
            for n = 1, N do
                Y[n] = {}
                for co = 1, Cog * g do
                    Y[n][co] = {}
                    for i = 1, out do Y[n][co][i] = b[co] end
                end
                for ci = 1, Ci do
                    local grp = math.floor((ci - 1) / (Ci / g))
                    for l = 0, L - 1 do
                        for c = 1, Cog do
                            for a = 0, k - 1 do
                                local i = l * s - p + a * d
                                if i >= 0 and i < out then
                                    local row = Y[n][grp * Cog + c]
                                    row[i + 1] = row[i + 1] + X[n][ci][l + 1] * Wt[ci][c][a + 1]
                                end
                            end
                        end
                    end
                end
            end
            return Y
        end
        for _, c in ipairs({{1, 0, 0, 1, 1}, {2, 1, 1, 1, 1}, {3, 1, 2, 2, 1}, {2, 0, 1, 1, 2}, {2, 2, 1, 2, 2}}) do
            local s, p, op, d, g = unpack(c)
            local x, w, b = ordo.randn({2, 4, 5}, D), ordo.randn({4, 3, 3}, D), ordo.randn({3 * g}, D)
            close(F.conv_transpose1d(x, w, b, {stride = s, padding = p, output_padding = op, dilation = d,
                                               groups = g}):totable(), ref(x, w, b:totable(), s, p, op, d, g), 1e-12)
        end
        local m = nn.ConvTranspose1d(4, 6, 3, {stride = 2, output_padding = 1, groups = 2, dtype = "float64"})
        assert.equal("ConvTranspose1d(4 -> 6, kernel 3, stride 2, output_padding 1, groups 2)", tostring(m))
        assert.same({4, 3, 3}, m.weight:shape())
        assert.same({6, 12}, m(ordo.randn({4, 5}, D)):shape()) -- unbatched (C, L)
        assert.is_true(ag.gradcheck(function(a, w) return F.conv_transpose1d(a, w, nil, {stride = 2, padding = 1}) end,
                                    {ordo.randn({1, 2, 4}, D):requires_grad(), ordo.randn({2, 3, 3}, D):requires_grad()}))
        assert.matches("conv_transpose1d: input of shape 1x2x4 has 2 channels but weight of shape 3x3x3 expects 3",
                       err_of(F.conv_transpose1d, ordo.randn({1, 2, 4}), ordo.randn({3, 3, 3})))
        assert.matches("conv_transpose1d: output_padding 1 must be smaller than the stride 1",
                       err_of(F.conv_transpose1d, ordo.randn({1, 2, 4}), ordo.randn({2, 3, 3}), nil,
                              {output_padding = 1}))
        assert.matches("conv_transpose1d: the output would be %-1 long",
                       err_of(F.conv_transpose1d, ordo.randn({1, 2, 1}), ordo.randn({2, 3, 1}), {padding = 1}))
        assert.matches("ConvTranspose1d: in_channels 2 and out_channels 3 must both be divisible by groups 2",
                       err_of(nn.ConvTranspose1d, 2, 3, 3, {groups = 2}))
    end)

    it("ConvTranspose2d: shapes, Torch's init bounds; bad arguments named", function()
        local m = nn.ConvTranspose2d(4, 6, 3, {stride = 2, padding = 1, output_padding = 1})
        assert.same({4, 6, 3, 3}, m.weight:shape())
        local bound = 1 / math.sqrt(6 * 9)
        assert.is_true(m.weight:abs():max():item() <= bound and m.bias:abs():max():item() <= bound)
        local x = ordo.randn({2, 4, 7, 7})
        assert.same({2, 6, 14, 14}, m(x):shape())
        assert.equals("ConvTranspose2d(4 -> 6, kernel 3x3, stride 2x2, padding 1x1, output_padding 1x1)",
                      tostring(m):match("^[^\n]*"))
        assert.matches("conv_transpose2d: input of shape 2x4x7x7 has 4 channels but weight of shape 3x6x3x3 expects 3",
                       err_of(F.conv_transpose2d, x, ordo.randn({3, 6, 3, 3})), 1, true)
        assert.matches("conv_transpose2d: output_padding 2x2 must be smaller than the stride 2x2",
                       err_of(F.conv_transpose2d, x, m.weight, {stride = 2, output_padding = 2}), 1, true)
        assert.matches("conv_transpose2d: the output would be -3x-3",
                       err_of(F.conv_transpose2d, ordo.randn({1, 4, 1, 1}), m.weight, {padding = 3}), 1, true)
        assert.matches("conv_transpose2d: bias must have shape 6", err_of(F.conv_transpose2d, x, m.weight,
                                                                          ordo.randn({4})), 1, true)
        assert.matches("conv_transpose2d: input must be float32 or float64, got int32",
                       err_of(F.conv_transpose2d, ordo.zeros({1, 4, 2, 2}, "int32"), m.weight), 1, true)
        assert.matches("ConvTranspose2d: output_padding 1x1 must be smaller than the stride 1x1",
                       err_of(nn.ConvTranspose2d, 2, 2, 3, {output_padding = 1}), 1, true)
    end)
end)

-- The 1-D ops from their definitions over x N×C×L: for output l, the
-- window's positions (l-1)*s - p + (j-1)*d + 1, j = 1..k, those inside x.
local function ref_1d(x, k, s, p, d, reduce)
    local X = x:totable()
    local N, C, L = #X, #X[1], #X[1][1]
    local ol = math.floor((L + 2 * p - d * (k - 1) - 1) / s) + 1
    local Y = {}
    for n = 1, N do
        Y[n] = {}
        for c = 1, C do
            Y[n][c] = {}
            for l = 1, ol do
                local at = {}
                for j = 1, k do at[j] = (l - 1) * s - p + (j - 1) * d + 1 end
                Y[n][c][l] = reduce(X[n], c, at, L)
            end
        end
    end
    return Y
end

local function ref_conv1d(x, w, b, s, p, d)
    local Wt, B = w:totable(), b and b:totable()
    local O, C, k = #Wt, #Wt[1], #Wt[1][1]
    local per_o = {}
    for o = 1, O do
        per_o[o] = ref_1d(x, k, s, p, d, function(Xn, _, at, L)
            local sum = B and B[o] or 0
            for c = 1, C do
                for j = 1, k do
                    if at[j] >= 1 and at[j] <= L then sum = sum + Xn[c][at[j]] * Wt[o][c][j] end
                end
            end
            return sum
        end)
    end
    local Y = {} -- per_o[o][n][1][l] -> Y[n][o][l] (the reduce ignored c; channel 1's rows hold it)
    for n = 1, #per_o[1] do
        Y[n] = {}
        for o = 1, O do Y[n][o] = per_o[o][n][1] end
    end
    return Y
end

local function ref_pool1d(x, k, s, p, max)
    return ref_1d(x, k, s, p, 1, function(Xn, c, at, L)
        local r, arg = max and -math.huge or 0, nil
        for j = 1, k do
            local i = at[j]
            if i >= 1 and i <= L then
                if not max then r = r + Xn[c][i]
                elseif Xn[c][i] > r then r, arg = Xn[c][i], i end
            end
        end
        if max then return {r, arg} end
        return r / k -- the padding's zeros count
    end)
end

describe("nn.functional.unfold and fold (im2col, col2im)", function()
    before_each(function() ordo.manual_seed(31) end)

    it("unfold's columns times the flattened weight are conv2d; fold is its adjoint; modules; errors", function()
        local x = ordo.randn({2, 3, 5, 6}, D)
        local w = ordo.randn({4, 3, 3, 2}, D)
        local o = {stride = {2, 1}, padding = {1, 0}, dilation = {1, 2}}
        local cols = F.unfold(x, {3, 2}, o)
        assert.same({2, 18, 12}, cols:shape())
        local ref = F.conv2d(x, w, nil, o)
        close(w:view(4, -1):matmul(cols):view(ref:shape()):totable(), ref:totable(), 1e-12)
        local xp = x:permute(1, 3, 4, 2):contiguous():permute(1, 4, 2, 3) -- an NHWC view
        close(F.unfold(xp, {3, 2}, o):totable(), cols:totable(), 0)
        close(F.fold(F.unfold(x, 1), {5, 6}, 1):totable(), x:totable(), 0)
        local u = ordo.randn(cols:shape(), D) -- <unfold(x), u> = <x, fold(u)>
        close((cols * u):sum():item(), (x * F.fold(u, {5, 6}, {3, 2}, o)):sum():item(), 1e-12)
        assert.is_true(ag.gradcheck(function(a) return F.unfold(a, {3, 2}, o) end, {x:clone():requires_grad()}))
        assert.is_true(ag.gradcheck(function(a) return F.fold(a, {5, 6}, {3, 2}, o) end,
                                    {cols:clone():requires_grad()}))
        assert.same({12, 20}, F.unfold(x[1], 2):shape()) -- (C, H, W)
        local m = nn.Unfold({2, 3}, {padding = 1})
        assert.same({2, 18, 36}, m(x):shape())
        assert.same({2, 3, 5, 6}, nn.Fold({5, 6}, {2, 3}, {padding = 1})(m(x)):shape())
        assert.matches("fold: input of shape 2x18x12 has 12 blocks but output size 5x7 with kernel 3x2 gives 15",
                       err_of(F.fold, cols, {5, 7}, {3, 2}, o))
        assert.matches("fold: input of shape 2x17x12: dim 2 %(17%) must be divisible by the kernel's 3x2",
                       err_of(F.fold, cols:narrow(2, 1, 17), {5, 6}, {3, 2}, o))
        assert.matches("unfold: kernel 7x7 is larger than the padded input 5x6", err_of(F.unfold, x, 7))
        assert.matches("Unfold: stride must be positive integers, got 0", err_of(nn.Unfold, 2, {stride = 0}))
    end)
end)

describe("nn.functional.conv1d, max_pool1d and avg_pool1d", function()
    before_each(function() ordo.manual_seed(21) end)

    it("match naive loops for strides, paddings and dilations", function()
        local x = ordo.randn({2, 3, 11}, D)
        local w = ordo.randn({4, 3, 3}, D)
        local b = ordo.randn({4}, D)
        for _, o in ipairs({{}, {stride = 2}, {padding = 1}, {stride = 3, padding = 2}, {dilation = 2, padding = 1},
                            {dilation = 3, stride = 2}}) do
            local want = ref_conv1d(x, w, b, o.stride or 1, o.padding or 0, o.dilation or 1)
            local y = F.conv1d(x, w, b, o)
            assert.same({2, 4, #want[1][1]}, y:shape())
            close(y:totable(), want, 1e-12)
        end
        close(F.conv1d(x, w):totable(), ref_conv1d(x, w, nil, 1, 0, 1), 1e-12)
        close(F.conv1d(x, w, {padding = 1}):totable(), ref_conv1d(x, w, nil, 1, 1, 1), 1e-12)
        -- a 2-D (C, L) input, a transposed (non-contiguous) one
        close(F.conv1d(x[2], w, b):totable(), ref_conv1d(x, w, b, 1, 0, 1)[2], 1e-12)
        local xt = x:transpose(2, 3):contiguous():transpose(2, 3)
        close(F.conv1d(xt, w, b):totable(), ref_conv1d(x, w, b, 1, 0, 1), 1e-12)
        for _, c in ipairs({{2}, {3, {stride = 1}}, {3, {stride = 2, padding = 1}}, {4, {padding = 2}}}) do
            local o = c[2] or {}
            local s, p = o.stride or c[1], o.padding or 0
            local mx = ref_pool1d(x, c[1], s, p, true)
            local v, i = F.max_pool1d(x, c[1], {stride = o.stride, padding = o.padding, return_indices = true})
            local vals, idx = {}, {}
            for n = 1, #mx do
                vals[n], idx[n] = {}, {}
                for ch = 1, #mx[n] do
                    vals[n][ch], idx[n][ch] = {}, {}
                    for l = 1, #mx[n][ch] do vals[n][ch][l], idx[n][ch][l] = mx[n][ch][l][1], mx[n][ch][l][2] end
                end
            end
            close(v:totable(), vals, 0)
            assert.same(idx, i:totable())
            close(F.avg_pool1d(x, c[1], o):totable(), ref_pool1d(x, c[1], s, p, false), 1e-12)
        end
        assert.same({3, 5}, F.max_pool1d(x[1], 2):shape())
    end)

    it("have gradients that agree with central differences", function()
        local x = ordo.randn({2, 2, 7}, D):requires_grad()
        local w = ordo.randn({3, 2, 3}, D):requires_grad()
        local b = ordo.randn({3}, D):requires_grad()
        assert.is_true(ag.gradcheck(function(a, ww, bb) return F.conv1d(a, ww, bb, {stride = 2, padding = 1}) end,
                                    {x, w, b}))
        assert.is_true(ag.gradcheck(function(a, ww) return F.conv1d(a, ww, {dilation = 2}) end, {x, w}))
        assert.is_true(ag.gradcheck(function(a) return F.max_pool1d(a, 3, {stride = 2, padding = 1}) end, {x}))
        assert.is_true(ag.gradcheck(function(a) return F.avg_pool1d(a, 2, {stride = 1}) end, {x}))
    end)

    it("modules: Conv1d's parameters and init bounds, the pooling modules; bad arguments named", function()
        local c = nn.Conv1d(3, 5, 4, {padding = 2})
        assert.same({5, 3, 4}, c.weight:shape())
        assert.same({5}, c.bias:shape())
        local bound = 1 / math.sqrt(3 * 4)
        assert.is_true(c.weight:abs():max():item() <= bound and c.bias:abs():max():item() <= bound)
        local x = ordo.randn({2, 3, 9})
        close(c(x):totable(), F.conv1d(x, c.weight, c.bias, {padding = 2}):totable(), 1e-6)
        assert.same({2, 3, 4}, nn.MaxPool1d(2)(x):shape())
        assert.same({2, 3, 5}, nn.AvgPool1d(3, {stride = 2, padding = 1})(x):shape())
        assert.equals("Conv1d(3 -> 5, kernel 4, padding 2)", tostring(c):match("^[^\n]*"))
        assert.is_nil(nn.Conv1d(2, 2, 3, {bias = false}).bias)
        assert.matches("conv1d: input of shape 2x3x9 has 3 channels but weight of shape 5x2x4 expects 2",
                       err_of(F.conv1d, x, ordo.randn({5, 2, 4})), 1, true)
        assert.matches("conv1d: weight must be 3-D", err_of(F.conv1d, x, ordo.randn({5, 3, 2, 2})), 1, true)
        assert.matches("conv1d: expected a 3-D input (N, C, L) or a 2-D one (C, L), got shape 9",
                       err_of(F.conv1d, ordo.randn({9}), c.weight), 1, true)
        assert.matches("conv1d: kernel 4 (dilation 3) is larger than the padded input",
                       err_of(F.conv1d, ordo.randn({1, 3, 5}), c.weight, {dilation = 3}), 1, true)
        assert.matches("conv1d: stride must be a positive integer, got table",
                       err_of(F.conv1d, x, c.weight, {stride = {1, 2}}), 1, true)
        assert.matches("conv1d: bias must have shape 5", err_of(F.conv1d, x, c.weight, ordo.randn({4})), 1, true)
        assert.matches("max_pool1d: padding 2 must be at most half the kernel 3",
                       err_of(F.max_pool1d, x, 3, {padding = 2}), 1, true)
        assert.matches("avg_pool1d: kernel 12 is larger than the padded input 9",
                       err_of(F.avg_pool1d, x, 12), 1, true)
        assert.matches("MaxPool1d: kernel_size must be a positive integer, got 0", err_of(nn.MaxPool1d, 0), 1, true)
        assert.matches("Conv1d: unknown option", err_of(nn.Conv1d, 1, 1, 1, {strides = 2}), 1, true)
    end)
end)

describe("nn.functional.batch_norm", function()
    before_each(function() ordo.manual_seed(5) end)

    -- per-channel mean and biased variance of a table N x C [x S]
    local function stats(X)
        local N, C = #X, #X[1]
        local mean, var, cnt = {}, {}, 0
        for c = 1, C do
            local s, n = 0, 0
            for i = 1, N do
                local v = X[i][c]
                if type(v) == "table" then
                    for _, r in ipairs(v) do
                        if type(r) == "table" then for _, e in ipairs(r) do s, n = s + e, n + 1 end
                        else s, n = s + r, n + 1 end
                    end
                else
                    s, n = s + v, n + 1
                end
            end
            mean[c] = s / n
            local q = 0
            for i = 1, N do
                local v = X[i][c]
                if type(v) == "table" then
                    for _, r in ipairs(v) do
                        if type(r) == "table" then for _, e in ipairs(r) do q = q + (e - mean[c]) ^ 2 end
                        else q = q + (r - mean[c]) ^ 2 end
                    end
                else
                    q = q + (v - mean[c]) ^ 2
                end
            end
            var[c] = q / n
            cnt = n
        end
        return mean, var, cnt
    end

    it("normalises with batch statistics in training and updates the running buffers like Torch", function()
        for _, shape in ipairs({{6, 3}, {4, 3, 5}, {3, 3, 4, 2}}) do
            local x = ordo.randn(shape, D) * 2 + 1
            local w, b = ordo.randn({3}, D), ordo.randn({3}, D)
            local rm, rv = ordo.randn({3}, D), ordo.rand({3}, D) + 0.5
            local rm0, rv0 = rm:totable(), rv:totable()
            local y = F.batch_norm(x, rm, rv, w, b, true, 0.2, 1e-5)
            local mean, var, n = stats(x:totable())
            -- y = (x - mean) / sqrt(var + eps) * w + b, checked through its per-channel stats
            local ym, yv = stats(y:totable())
            local W, B = w:totable(), b:totable()
            for c = 1, 3 do
                close(ym[c], B[c], 1e-9)
                close(yv[c], W[c] ^ 2 * var[c] / (var[c] + 1e-5), 1e-9)
                close(rm:totable()[c], 0.8 * rm0[c] + 0.2 * mean[c], 1e-12)
                close(rv:totable()[c], 0.8 * rv0[c] + 0.2 * var[c] * n / (n - 1), 1e-12)
            end
            -- one element against the formula
            local xf, yf = x:reshape(-1):totable(), y:reshape(-1):totable()
            local per = n / shape[1]
            close(yf[1], (xf[1] - mean[1]) / math.sqrt(var[1] + 1e-5) * W[1] + B[1], 1e-12)
            close(yf[per + 1], (xf[per + 1] - mean[2]) / math.sqrt(var[2] + 1e-5) * W[2] + B[2], 1e-12)
        end
    end)

    it("uses the running statistics in eval mode and leaves them unchanged", function()
        local x = ordo.randn({4, 2, 3, 3}, D)
        local rm, rv = ordo.tensor({0.5, -1}, D), ordo.tensor({2, 0.25}, D)
        local w, b = ordo.tensor({1.5, 2}, D), ordo.tensor({0.1, -0.2}, D)
        local y = F.batch_norm(x, rm, rv, w, b, false, 0.1, 1e-5)
        local X, Y = x:totable(), y:totable()
        for n = 1, 4 do
            for i = 1, 3 do
                for j = 1, 3 do
                    close(Y[n][1][i][j], (X[n][1][i][j] - 0.5) / math.sqrt(2 + 1e-5) * 1.5 + 0.1, 1e-12)
                    close(Y[n][2][i][j], (X[n][2][i][j] + 1) / math.sqrt(0.25 + 1e-5) * 2 - 0.2, 1e-12)
                end
            end
        end
        assert.same({0.5, -1}, rm:totable())
        assert.same({2, 0.25}, rv:totable())
        -- no running buffers: batch statistics even outside training
        local z = F.batch_norm(x, nil, nil, nil, nil, false)
        local zm, zv = stats(z:totable())
        for c = 1, 2 do close(zm[c], 0, 1e-9); close(zv[c], 1, 1e-4) end
    end)

    it("has gradients that agree with central differences (train and eval, 2-D and 4-D)", function()
        for _, shape in ipairs({{5, 3}, {3, 3, 2, 3}}) do
            local x = ordo.randn(shape, D):requires_grad()
            local w = ordo.randn({3}, D):requires_grad()
            local b = ordo.randn({3}, D):requires_grad()
            assert.is_true(ag.gradcheck(function(a, c, d) return F.batch_norm(a, nil, nil, c, d, true) end,
                                        {x, w, b}))
            local rm, rv = ordo.randn({3}, D), ordo.rand({3}, D) + 0.5
            assert.is_true(ag.gradcheck(function(a, c, d) return F.batch_norm(a, rm, rv, c, d, false) end,
                                        {x, w, b}))
            -- no affine parameters
            assert.is_true(ag.gradcheck(function(a) return F.batch_norm(a, nil, nil, nil, nil, true) end, {x}))
        end
    end)

    it("reports bad arguments", function()
        local x = ordo.randn({4, 3})
        local c3 = ordo.zeros({3})
        assert.matches("batch_norm: running_mean must have shape 3 %(one per channel of input 4x3%), got 2",
                       err_of(F.batch_norm, x, ordo.zeros({2}), c3, nil, nil, true))
        assert.matches("batch_norm: expected an input of shape N×C, N×C×L or N×C×H×W, got 4",
                       err_of(F.batch_norm, ordo.randn({4}), nil, nil, nil, nil, true))
        assert.matches("batch_norm: expected more than 1 value per channel when training, got input of shape 1x3",
                       err_of(F.batch_norm, ordo.randn({1, 3}), c3, ordo.ones({3}), nil, nil, true))
        assert.matches("batch_norm: input is float32 but weight is float64",
                       err_of(F.batch_norm, x, nil, nil, ordo.ones({3}, D), nil, true))
        assert.matches("batch_norm: give both running_mean and running_var, or neither",
                       err_of(F.batch_norm, x, c3, nil, nil, nil, true))
        assert.matches("batch_norm: training must be a boolean, got string",
                       err_of(F.batch_norm, ordo.randn({4, 3}), nil, nil, nil, nil, "false"))
        assert.matches("batch_norm: momentum must be a number in %[0, 1%], got 2",
                       err_of(F.batch_norm, x, nil, nil, nil, nil, true, 2))
    end)
end)

describe("nn conv modules", function()
    before_each(function() ordo.manual_seed(3) end)

    it("Conv2d: parameter shapes, Torch's init bounds, seeded init, forward = conv2d", function()
        local m = nn.Conv2d(3, 8, 3, {padding = 1})
        assert.same({8, 3, 3, 3}, m.weight:shape())
        assert.same({8}, m.bias:shape())
        local bound = 1 / math.sqrt(3 * 3 * 3)
        assert.is_true(m.weight:abs():max():item() <= bound)
        assert.is_true(m.bias:abs():max():item() <= bound)
        assert.is_true(m.weight:abs():max():item() > bound * 0.8) -- spread over the whole range
        assert.is_true(m.weight:needs_grad() and m.bias:needs_grad())
        ordo.manual_seed(3)
        local m2 = nn.Conv2d(3, 8, 3, {padding = 1})
        assert.same(m.weight:totable(), m2.weight:totable())
        local x = ordo.randn({2, 3, 6, 6})
        assert.same({2, 8, 6, 6}, m(x):shape())
        close(m(x):totable(), F.conv2d(x, m.weight, m.bias, {padding = 1}):totable(), 0)
        local names = {}
        for i, e in ipairs(m:named_parameters()) do names[i] = e.name end
        assert.same({"weight", "bias"}, names)
        local nb = nn.Conv2d(2, 4, {3, 1}, {bias = false, stride = {2, 1}, dtype = "float64"})
        assert.is_nil(nb.bias)
        assert.same({4, 2, 3, 1}, nb.weight:shape())
        assert.equal("float64", nb.weight:dtype())
        assert.same({1, 4, 3, 5}, nb(ordo.randn({1, 2, 7, 5}, D)):shape())
        assert.matches("Conv2d%(3 %-> 8, kernel 3x3, padding 1x1%)", tostring(m))
    end)

    it("MaxPool2d halves the plane; a small CNN trains (loss goes down)", function()
        local p = nn.MaxPool2d(2)
        assert.same({2, 3, 3, 4}, p(ordo.randn({2, 3, 7, 8})):shape())
        assert.same({2, 3, 6, 7}, nn.MaxPool2d(2, {stride = 1})(ordo.randn({2, 3, 7, 8})):shape())
        local model = nn.Sequential(nn.Conv2d(1, 4, 3, {padding = 1}), nn.BatchNorm2d(4), nn.ReLU(),
                                    nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 4 * 4, 2))
        local x = ordo.randn({16, 1, 8, 8})
        -- class 2 when the top half is brighter than the bottom half
        local top = x:narrow(3, 1, 4):sum(4):sum(3):sum(2)
        local bottom = x:narrow(3, 5, 4):sum(4):sum(3):sum(2)
        local y = top:gt(bottom):long() + 1
        local opt = ordo.optim.SGD(model:parameters(), {lr = 0.1})
        local first, last
        for i = 1, 30 do
            opt:zero_grad()
            local loss = F.cross_entropy(model(x), y)
            loss:backward()
            opt:step()
            if i == 1 then first = loss:item() end
            last = loss:item()
        end
        assert.is_true(last < first * 0.5, string.format("loss %.4f -> %.4f", first, last))
    end)

    it("BatchNorm on an empty batch gives an empty output and leaves the statistics alone (Torch's)", function()
        local m = nn.BatchNorm2d(2, {dtype = "float64"})
        local x = ordo.randn({0, 2, 4, 4}, D):requires_grad()
        local y = m(x)
        assert.same({0, 2, 4, 4}, y:shape())
        assert.same({0, 0}, m.running_mean:totable())
        assert.same({1, 1}, m.running_var:totable())
        y:sum():backward()
        assert.same({0, 0}, m.weight.grad:totable())
        assert.same({0, 2, 4, 4}, x.grad:shape())
        assert.same({0, 3}, F.batch_norm(ordo.zeros({0, 3}), nil, nil, nil, nil, true):shape())
    end)

    it("BatchNorm and InstanceNorm statistics of float32 features far from 0 match float64 (the mean's rounding)",
       function()
        -- 1e7 + small integers (exact in float32): the float32 mean (1e7 + 0.5...) rounds, and d about it
        -- alone gave running_var 0.5 for 1e7, 1e7 + 1 alternating (not 0.25) and outputs 0 and 2 (not -1, 1)
        ordo.manual_seed(5)
        local vals = {}
        for i = 1, 6 * 2 * 3 * 2 do vals[i] = 1e7 + (i % 2) + (i % 7 == 0 and 2 or 0) end
        local x64 = ordo.tensor(vals, D):view(6, 2, 3, 2)
        local x32 = x64:float()
        local g64 = ordo.randn({6, 2, 3, 2}, D)
        local w, b = ordo.randn({2}, D) + 1, ordo.randn({2}, D)
        local function run(x, g, dt)
            local m = nn.BatchNorm2d(2, {dtype = dt, momentum = 0.5})
            ordo.no_grad(function() m.weight:copy_(w) m.bias:copy_(b) end)
            x = x:clone():requires_grad()
            local y = m(x)
            y:backward(g)
            return {y = y, gx = x.grad, gw = m.weight.grad, gb = m.bias.grad, rm = m.running_mean,
                    rv = m.running_var, eval = m:eval()(x:detach())}
        end
        local r32, r64 = run(x32, g64:float(), "float32"), run(x64, g64, "float64")
        for _, k in ipairs({"y", "gx", "gw", "gb", "rm", "rv", "eval"}) do
            close(r32[k]:double():view(-1):totable(), r64[k]:view(-1):totable(), 1e-4, k)
        end
        -- the weight's gradient alone (an input and a bias that need none: it took the bias's sum, not made)
        local m = nn.BatchNorm2d(2)
        ordo.no_grad(function() m.weight:copy_(w) end)
        m.bias:requires_grad_(false)
        m(x32):backward(g64:float())
        close(m.weight.grad:double():totable(), r64.gw:totable(), 1e-4, "the weight's gradient alone")
        -- the alternating case itself: variance 0.25, the output -1 and 1
        local alt = ordo.tensor({1e7, 1e7 + 1, 1e7, 1e7 + 1}):view(4, 1)
        local bn = nn.BatchNorm1d(1, {momentum = 1, affine = false})
        close(bn(alt):view(-1):totable(), {-1, 1, -1, 1}, 1e-4, "alternating")
        close(bn.running_var:item(), 0.25 * 4 / 3, 1e-6, "running_var (unbiased)")
        -- InstanceNorm (batch_norm per sample and channel)
        local i32 = F.instance_norm(x32:view(6, 2, 6))
        local i64 = F.instance_norm(x64:view(6, 2, 6))
        close(i32:double():view(-1):totable(), i64:view(-1):totable(), 1e-4, "instance_norm")
    end)

    it("BatchNorm momentum = false (Torch's None): the running statistics are the batches' plain average", function()
        local bn = nn.BatchNorm1d(2, {momentum = false, dtype = "float64"})
        local xs = {}
        for i = 1, 3 do
            xs[i] = ordo.randn({4, 2}, D) * i + i
            bn(xs[i])
        end
        local mean = (xs[1]:mean(1) + xs[2]:mean(1) + xs[3]:mean(1)) / 3
        local var = (xs[1]:var(1) + xs[2]:var(1) + xs[3]:var(1)) / 3 -- unbiased, as Torch's buffer
        close(bn.running_mean:totable(), mean:totable(), 1e-12)
        close(bn.running_var:totable(), var:totable(), 1e-12)
        assert.equal(3, bn.num_batches_tracked:item())
        assert.equal("BatchNorm1d(2, eps = 1e-05, momentum = cumulative)", tostring(bn))
        bn:eval() -- eval leaves them and the count alone
        bn(xs[1])
        close(bn.running_mean:totable(), mean:totable(), 1e-12)
        assert.equal(3, bn.num_batches_tracked:item())
        assert.matches("BatchNorm2d: momentum must be a number in %[0, 1%] or false", err_of(nn.BatchNorm2d, 3,
                                                                                         {momentum = true}))
    end)

    it("BatchNorm2d / BatchNorm1d: buffers, train vs eval, running statistics", function()
        local bn = nn.BatchNorm2d(3, {momentum = 0.5})
        assert.same({1, 1, 1}, bn.weight:totable())
        assert.same({0, 0, 0}, bn.bias:totable())
        assert.same({0, 0, 0}, bn.running_mean:totable())
        assert.same({1, 1, 1}, bn.running_var:totable())
        local names = {}
        for i, e in ipairs(bn:state_dict()) do names[i] = e.name end
        -- Torch's state: the count of training batches too (int64, 0-dim)
        assert.same({"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}, names)
        assert.equal("int64", bn.num_batches_tracked:dtype())
        assert.same({}, bn.num_batches_tracked:shape())
        assert.equal(0, bn.num_batches_tracked:item())
        assert.equal(2, #bn:parameters())
        local x = ordo.randn({4, 3, 5, 5}) * 3 + 2
        local y = bn(x)
        -- training: every channel of y has mean 0, variance 1
        local m = y:transpose(1, 2):reshape(3, -1):mean(2):totable()
        for c = 1, 3 do close(m[c], 0, 1e-5) end
        local bm = x:transpose(1, 2):reshape(3, -1):mean(2):totable()
        local rm = bn.running_mean:totable()
        for c = 1, 3 do close(rm[c], 0.5 * bm[c], 1e-5) end
        -- eval: the running statistics, unchanged by the call
        bn:eval()
        local before = bn.running_mean:totable()
        local ye = bn(x)
        assert.same(before, bn.running_mean:totable())
        local rv = bn.running_var:totable()
        local xe, yt = x:reshape(-1):totable(), ye:reshape(-1):totable()
        close(yt[1], (xe[1] - before[1]) / math.sqrt(rv[1] + 1e-5), 1e-5)
        assert.equal(1, bn.num_batches_tracked:item()) -- counted in training only
        bn:train()
        bn(x)
        assert.are_not.same(before, bn.running_mean:totable())
        assert.equal(2, bn.num_batches_tracked:item())
        -- a Torch state dict (with it) loads strictly; one of older ordo (without it) loads, the count kept
        local torch_sd = {}
        for _, e in ipairs(bn:state_dict()) do torch_sd[e.name] = e.tensor:clone() end
        torch_sd.num_batches_tracked = ordo.tensor(7, "int64")
        local other = nn.Sequential(nn.BatchNorm2d(3))
        other:get(1):load_state_dict(torch_sd)
        assert.equal(7, other:get(1).num_batches_tracked:item())
        local old = {}
        for _, e in ipairs(bn:state_dict()) do
            if e.name ~= "num_batches_tracked" then old["1." .. e.name] = e.tensor end
        end
        local missing = other:load_state_dict(old)
        assert.same({}, missing)
        assert.equal(7, other:get(1).num_batches_tracked:item())
        assert.same(bn.running_var:totable(), other:get(1).running_var:totable())
        local path = os.tmpname()
        ordo.save(old, path)
        nn.Sequential(nn.BatchNorm2d(3)):load(path)
        os.remove(path)
        -- to(dtype) keeps the count int64
        assert.equal("int64", nn.BatchNorm1d(2):double().num_batches_tracked:dtype())
        -- BatchNorm1d on N x C and N x C x L
        local b1 = nn.BatchNorm1d(4)
        assert.same({8, 4}, b1(ordo.randn({8, 4})):shape())
        assert.same({8, 4, 3}, b1(ordo.randn({8, 4, 3})):shape())
        local na = nn.BatchNorm1d(4, {affine = false, track_running_stats = false})
        assert.is_nil(na.weight)
        assert.is_nil(na.running_mean)
        assert.same({8, 4}, na(ordo.randn({8, 4})):shape())
        -- gradients flow to the affine parameters through a module
        local b2 = nn.BatchNorm2d(3, {dtype = "float64"})
        local xg = ordo.randn({3, 3, 2, 2}, D):requires_grad()
        assert.is_true(ag.gradcheck(function(a, w, b) return F.batch_norm(a, nil, nil, w, b, true) end,
                                    {xg, b2.weight, b2.bias}))
    end)

    it("Conv1d/Conv2d padding_mode (Torch's): reflect, replicate and circular pad the input first", function()
        local m = nn.Conv1d(1, 1, 3, {padding = 1, padding_mode = "circular", bias = false, dtype = "float64"})
        ordo.no_grad(function() m.weight:fill_(1) end)
        local x = ordo.tensor({{{1, 2, 3, 4}}}, D)
        -- Torch's values for a kernel of ones over [1, 2, 3, 4]
        assert.same({7, 6, 9, 8}, m(x):totable()[1][1])
        assert.equal("Conv1d(1 -> 1, kernel 3, padding 1, padding_mode circular, no bias)", tostring(m))
        m.padding_mode = "reflect"
        assert.same({5, 6, 9, 10}, m(x):totable()[1][1])
        m.padding_mode = "replicate"
        assert.same({4, 6, 9, 11}, m(x):totable()[1][1])
        assert.same({{4, 6, 9, 11}}, m(x[1]):totable()) -- unbatched (C, L)
        -- 2-D, with "same" and dilation, against F.pad and conv2d; the gradient
        local c = nn.Conv2d(2, 3, {3, 2}, {padding = "same", padding_mode = "reflect", dilation = {1, 2},
                                           dtype = "float64"})
        local x2 = ordo.randn({2, 2, 5, 6}, D)
        local ref = F.conv2d(F.pad(x2, {1, 1, 1, 1}, {mode = "reflect"}), c.weight, c.bias, {dilation = {1, 2}})
        close(c(x2):totable(), ref:totable(), 1e-12)
        local c2 = nn.Conv2d(2, 2, 3, {padding = {1, 2}, padding_mode = "circular", dtype = "float64"})
        local ref2 = F.conv2d(F.pad(x2, {2, 2, 1, 1}, {mode = "circular"}), c2.weight, c2.bias)
        close(c2(x2):totable(), ref2:totable(), 1e-12)
        assert.is_true(ag.gradcheck(function(a) return c2(a) end, {ordo.randn({1, 2, 4, 5}, D):requires_grad()}))
        assert.matches('Conv2d: padding_mode must be "zeros", "reflect", "replicate" or "circular", got "mirror"',
                       err_of(nn.Conv2d, 2, 3, 3, {padding_mode = "mirror"}))
        local r = nn.Conv2d(1, 1, 3, {padding = 3, padding_mode = "reflect"})
        assert.matches("Conv2d: padding_mode reflect needs padding 3 smaller than the input's size 3 in dim 3 " ..
                       "%(input 1x1x3x5%)", err_of(r, ordo.randn({1, 1, 3, 5})))
    end)

    it("InstanceNorm1d/2d: per sample and channel (Torch's defaults), running statistics when tracked", function()
        local x = ordo.randn({3, 4, 2, 5}, D) * 2 + 1
        local m = nn.InstanceNorm2d(4, {dtype = "float64"})
        assert.is_nil(m.weight)
        assert.is_nil(m.running_mean)
        close(m(x):totable(), F.group_norm(x, 4, nil, nil, 1e-5):totable(), 1e-12)
        m:eval() -- no running statistics: eval uses the input's too
        close(m(x):totable(), F.group_norm(x, 4, nil, nil, 1e-5):totable(), 1e-12)
        local mt = nn.InstanceNorm2d(4, {affine = true, track_running_stats = true, momentum = 0.5,
                                         dtype = "float64"})
        assert.equal("InstanceNorm2d(4, eps = 1e-05, momentum = 0.5, affine, track_running_stats)", tostring(mt))
        close(mt(x):totable(), F.group_norm(x, 4, nil, nil, 1e-5):totable(), 1e-12)
        local x3 = x:reshape(3, 4, 10) -- the samples' average statistics, the unbiased variance
        close(mt.running_mean:totable(), (x3:mean(3):mean(1) * 0.5):totable(), 1e-12)
        close(mt.running_var:totable(), (x3:var(3):mean(1) * 0.5 + 0.5):totable(), 1e-12)
        mt:eval()
        local ref = (x - mt.running_mean:view(1, 4, 1, 1)) / (mt.running_var:view(1, 4, 1, 1) + 1e-5):sqrt()
        close(mt(x):totable(), ref:totable(), 1e-12)
        local names = {}
        for i, e in ipairs(mt:state_dict()) do names[i] = e.name end
        assert.same({"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}, names)
        assert.is_true(ag.gradcheck(function(a) return nn.InstanceNorm1d(2, {affine = true, dtype = "float64"})(a) end,
                                    {ordo.randn({2, 2, 5}, D):requires_grad()}))
        local one = ordo.randn({2, 6}, D) -- unbatched (C, L)
        close(nn.InstanceNorm1d(2, {dtype = "float64"})(one):totable(),
              F.group_norm(one:unsqueeze(1), 2):squeeze(1):totable(), 1e-12)
        assert.matches("InstanceNorm1d: input of shape 2x3x6 has 3 channels, expected 2",
                       err_of(nn.InstanceNorm1d(2), ordo.randn({2, 3, 6})))
        assert.matches("InstanceNorm1d: expected more than 1 position per channel",
                       err_of(nn.InstanceNorm1d(2), ordo.randn({2, 2, 1})))
        assert.matches("InstanceNorm2d: expected a 4%-D input %(N, C, H, W%) or a 3%-D one %(C, H, W%), got shape 2x2",
                       err_of(nn.InstanceNorm2d(2), ordo.randn({2, 2})))
        assert.matches("InstanceNorm2d: affine must be a boolean", err_of(nn.InstanceNorm2d, 2, {affine = 1}))
        assert.matches("InstanceNorm2d: input is float64 but running_mean is float32",
                       err_of(nn.InstanceNorm2d(4, {track_running_stats = true}), x))
        -- F.instance_norm (Torch's signature)
        local w, b = ordo.randn({4}, D), ordo.randn({4}, D)
        close(F.instance_norm(x, nil, nil, w, b):totable(), F.group_norm(x, 4, w, b):totable(), 1e-12)
        local rm, rv = ordo.zeros({4}, D), ordo.ones({4}, D)
        F.instance_norm(x, rm, rv, nil, nil, true, 1)
        close(rm:totable(), x3:mean(3):mean(1):totable(), 1e-12)
        close(rv:totable(), x3:var(3):mean(1):totable(), 1e-12)
        close(F.instance_norm(x, rm, rv, nil, nil, false):totable(),
              ((x - rm:view(1, 4, 1, 1)) / (rv:view(1, 4, 1, 1) + 1e-5):sqrt()):totable(), 1e-12)
        assert.matches("instance_norm: use_input_stats = false needs running_mean and running_var",
                       err_of(F.instance_norm, x, nil, nil, nil, nil, false))
        assert.matches("instance_norm: weight must have shape 4 %(one per channel of input 3x4x2x5%), got 3",
                       err_of(F.instance_norm, x, nil, nil, ordo.ones({3}, D)))
    end)

    it("boolean options refuse other values (a string \"no\" would have meant true)", function()
        assert.matches("Conv2d: bias must be a boolean, got string", err_of(nn.Conv2d, 1, 1, 3, {bias = "no"}))
        assert.matches("Conv1d: bias must be a boolean, got number", err_of(nn.Conv1d, 1, 1, 3, {bias = 0}))
        assert.matches("ConvTranspose2d: bias must be a boolean", err_of(nn.ConvTranspose2d, 1, 1, 3, {bias = "x"}))
        assert.matches("BatchNorm2d: affine must be a boolean", err_of(nn.BatchNorm2d, 2, {affine = "no"}))
        assert.matches("BatchNorm1d: track_running_stats must be a boolean",
                       err_of(nn.BatchNorm1d, 2, {track_running_stats = 0}))
        assert.matches("GroupNorm: option affine must be a boolean", err_of(nn.GroupNorm, 1, 2, {affine = "no"}))
        assert.matches("MaxPool2d: return_indices must be a boolean", err_of(nn.MaxPool2d, 2, {return_indices = 1}))
        assert.matches("MaxPool1d: return_indices must be a boolean", err_of(nn.MaxPool1d, 2, {return_indices = 1}))
        assert.matches("max_pool2d: return_indices must be a boolean",
                       err_of(F.max_pool2d, ordo.randn({1, 1, 4, 4}), 2, {return_indices = "yes"}))
        assert.matches("max_pool1d: return_indices must be a boolean",
                       err_of(F.max_pool1d, ordo.randn({1, 1, 4}), 2, {return_indices = "yes"}))
    end)

    it("modules report bad inputs", function()
        assert.matches("BatchNorm2d: expected a 4%-D %(N, C, H, W%) input, got shape 4x3",
                       err_of(function() nn.BatchNorm2d(3)(ordo.randn({4, 3})) end))
        assert.matches("BatchNorm1d: input of shape 4x5 has 5 channels, expected 3",
                       err_of(function() nn.BatchNorm1d(3)(ordo.randn({4, 5})) end))
        assert.matches("Conv2d: in_channels must be a positive integer, got 0", err_of(nn.Conv2d, 0, 3, 3))
        assert.matches("Conv2d: kernel_size must be an integer or a pair", err_of(nn.Conv2d, 1, 3, "3"))
        -- a module's forward names the module
        assert.matches("Conv2d: input of shape 2x2x5x5 has 2 channels but weight of shape 4x3x3x3 expects 3",
                       err_of(function() nn.Conv2d(3, 4, 3)(ordo.randn({2, 2, 5, 5})) end))
        assert.matches("Conv2d: kernel 7x7 is larger than the padded input 5x5",
                       err_of(function() nn.Conv2d(2, 4, 7)(ordo.randn({2, 2, 5, 5})) end))
        assert.matches("Conv2d: expected a 4%-D input", err_of(function() nn.Conv2d(2, 4, 3)(ordo.randn({5, 5})) end))
        assert.matches("Conv1d: input of shape 1x3x8 has 3 channels but weight of shape 4x2x3 expects 2",
                       err_of(function() nn.Conv1d(2, 4, 3)(ordo.randn({1, 3, 8})) end))
        assert.matches("Conv1d: kernel 9 is larger than the padded input 8",
                       err_of(function() nn.Conv1d(3, 4, 9)(ordo.randn({1, 3, 8})) end))
        assert.matches("ConvTranspose2d: input of shape 1x2x5x5 has 2 channels",
                       err_of(function() nn.ConvTranspose2d(3, 4, 3)(ordo.randn({1, 2, 5, 5})) end))
        assert.matches("ConvTranspose1d: input of shape 1x2x5 has 2 channels",
                       err_of(function() nn.ConvTranspose1d(3, 4, 3)(ordo.randn({1, 2, 5})) end))
        assert.matches("MaxPool2d: kernel 7x7 is larger than the padded input 5x5",
                       err_of(function() nn.MaxPool2d(7)(ordo.randn({1, 2, 5, 5})) end))
        assert.matches("AvgPool2d: kernel 7x7 is larger than the padded input 5x5",
                       err_of(function() nn.AvgPool2d(7)(ordo.randn({1, 2, 5, 5})) end))
        assert.matches("MaxPool1d: kernel 9 is larger than the padded input 8",
                       err_of(function() nn.MaxPool1d(9)(ordo.randn({1, 2, 8})) end))
        assert.matches("AvgPool1d: expected a 3%-D input", err_of(function() nn.AvgPool1d(2)(ordo.randn({8})) end))
        assert.matches("Conv2d: input is float64 but weight is float32",
                       err_of(function() nn.Conv2d(2, 4, 3)(ordo.randn({1, 2, 5, 5}, D)) end))
        assert.matches("MaxPool2d: padding 2x2 must be at most half the kernel 2x2",
                       err_of(nn.MaxPool2d, 2, {padding = 2}))
        assert.matches("BatchNorm2d: momentum must be a number in %[0, 1%]",
                       err_of(nn.BatchNorm2d, 3, {momentum = -1}))
    end)
end)
