-- ordo.nn.conv: convolution and pooling (1-d and 2-d) and batch
-- normalisation.
--
--   local y = F.conv2d(x, w, b, {stride = 1, padding = 1})   -- x N×C×H×W, w O×C×kh×kw
--   local p = F.max_pool2d(y, 2)                             -- N×O×(H/2)×(W/2)
--   local z = F.batch_norm(p, rm, rv, gamma, beta, true, 0.1, 1e-5)
--
-- The heavy lifting is native (kernels/cpu/conv.c): a convolution is
-- im2col (patches as columns) and one matrix product through BLAS; its
-- backward is two products and col2im.  max_pool2d keeps the argmax of each
-- window, which its backward scatters the gradient to.  Each op records one
-- autograd node with a backward written directly, so a training step
-- pushes a handful of big kernels per layer rather than dozens of small
-- elementwise ops.
--
-- The 1-d ops (conv1d, max_pool1d, avg_pool1d) are the 2-d ones over
-- inputs of height 1.
--
-- install(nn) adds the functions to nn.functional and the modules (Conv1d,
-- Conv2d, the pooling layers, BatchNorm1d, BatchNorm2d) to nn (ordo.nn
-- calls it).
local cdef = require "ordo.cdef"
local util = require "ordo.util"
local tensor = require "ordo.tensor"
local autograd = require "ordo.autograd"

local C = cdef.C
local fail, typename = util.fail, util.typename
local is_int, own_errors = util.is_int, util.own_errors
local is_tensor, shape_of, push, new_on = tensor.is_tensor, tensor.shape_of, tensor.push, tensor.new_on
local check_float, check_same_dtype = tensor.check_float, tensor.check_same_dtype
local no_grad, record = autograd.no_grad, autograd.record
local fmt, floor, sqrt = string.format, math.floor, math.sqrt
local unpack = unpack
local type, getmetatable, tostring = type, getmetatable, tostring

local M = {}

local shape_str = tensor.shape_str_of

local function kid(name)
    local id = C.ordo_tensor_kernel_id(name)
    assert(id >= 0, name)
    return id
end
local K_IM2COL, K_COL2IM = kid("im2col"), kid("col2im")
local K_POOL, K_POOL_BW = kid("max_pool2d"), kid("max_pool2d_backward")

local FLOATS = {float32 = true, float64 = true}
-- The largest kernel size, stride, padding and dilation the kernels take
-- (kernels/cpu/conv.c read_params); an output size at most 2^31 - 1.
local GEOM_MAX, INT32_MAX = 2 ^ 24, 2 ^ 31 - 1
local function too_large(fname, what, x)
    local max = what == "output size" and INT32_MAX or GEOM_MAX
    if x > max then
        fail(fmt("%s: %s %.17g is too large (at most %s)", fname, what, x, max == GEOM_MAX and "2^24" or "2^31 - 1"))
    end
end

-- ---------------------------------------------------------------- arguments

-- n or {a, b} -> a, b (positive integers, or >= 0 when zero_ok)
local function pair(fname, what, v, zero_ok)
    local a, b
    if type(v) == "number" then
        a, b = v, v
    elseif type(v) == "table" and getmetatable(v) == nil and #v == 2 then
        a, b = v[1], v[2]
    else
        fail(fmt("%s: %s must be an integer or a pair {h, w}, got %s", fname, what,
                 type(v) == "table" and "a table of " .. #v or typename(v)))
    end
    local lo = zero_ok and 0 or 1
    for _, x in ipairs({a, b}) do
        if not is_int(x) or x < lo then
            fail(fmt("%s: %s must be %s integers, got %s", fname, what, zero_ok and "non-negative" or "positive",
                     tostring(x)))
        end
        -- else the kernel refused it under its own name, as not positive
        -- ("im2col: stride 1x1073741824 must be positive")
        too_large(fname, what, x)
    end
    return a, b
end

local function single(fname, what, v, zero_ok)
    if not is_int(v) or v < (zero_ok and 0 or 1) then
        fail(fmt("%s: %s must be a %s integer, got %s", fname, what, zero_ok and "non-negative" or "positive",
                 type(v) == "number" and tostring(v) or typename(v)))
    end
    too_large(fname, what, v)
    return v
end

local opts_of = util.check_opts

local check_tensor = tensor.check_tensor
local check_devices = tensor.check_devices

-- The windows along a dim of n (Torch's sizes; ceil_mode rounds up, less
-- a last window that would start past the input and its left padding).
local function out_size(n, k, s, p, d, ceil_mode)
    local span = d * (k - 1) + 1
    if not ceil_mode then
        if n + 2 * p < span then return nil end
        return floor((n + 2 * p - span) / s) + 1
    end
    -- (a window may then reach past the padding, as in Torch's)
    local out = math.ceil((n + 2 * p - span) / s) + 1
    if out > 0 and (out - 1) * s >= n + p then out = out - 1 end
    return out >= 1 and out or nil
end

-- Whether each of the out windows along a dim of n has a tap (start + j d)
-- inside the input, not only padding: dilation can skip over all of it.
local function every_window_real(n, out, k, s, p, d)
    for o = 0, out - 1 do
        local start = o * s - p
        local t = start >= 0 and start or start + math.ceil(-start / d) * d
        if t >= n or t > start + (k - 1) * d then return false end
    end
    return true
end

-- A 3-d (C, H, W) input is treated as a batch of one, as Torch does.
local function batched(fname, x)
    local nd = x:dim()
    if nd == 4 then return x, false end
    if nd == 3 then return x:unsqueeze(1), true end
    fail(fmt("%s: expected a 4-D input (N, C, H, W) or a 3-D one (C, H, W), got shape %s", fname, shape_str(x)))
end

-- ---------------------------------------------------------------- conv2d

-- Input and weight of a convolution: float, one dtype; nd the weight's dims.
local function check_float_pair(fname, x, weight, nd, dims)
    check_float(fname, "input", x)
    if weight:dim() ~= nd then fail(fmt("%s: weight must be %d-D %s, got shape %s", fname, nd, dims, shape_str(weight))) end
    check_same_dtype(fname, x, "weight", weight)
end

-- x as a batch (batched), its channels checked against dim cdim of the
-- weight (conv2d's 2, the transposed convolution's 1); also the weight's
-- shape.
local function batched_against(fname, x, weight, cdim)
    local xb, unbatched = batched(fname, x)
    local ws = shape_of(weight)
    if ws[cdim] ~= xb:size(2) then
        fail(fmt("%s: input of shape %s has %d channels but weight of shape %s expects %d", fname, shape_str(x),
                 xb:size(2), shape_str(weight), ws[cdim]))
    end
    return xb, unbatched, ws
end

-- A bias of one element per output channel (O of them), or nil.
local function check_bias(fname, bias, weight, O)
    if bias == nil then return end
    check_tensor(fname, "bias", bias)
    if bias:dim() ~= 1 or bias:size(1) ~= O then
        fail(fmt("%s: bias must have shape %d (one per output channel of weight %s), got %s", fname, O,
                 shape_str(weight), shape_str(bias)))
    end
    check_same_dtype(fname, weight, "bias", bias, "input") -- (the weight has the input's dtype)
end

-- Two ways to lay the products out (M.conv_layout; both are tested):
-- "batched" (default): cols N × CKK × L (CKK = C·kh·kw, L = oh·ow) and one
--   GEMM per image (matmul's batched form with W shared); the weight
--   gradient is a batched product summed over the batch.
-- "gemm": im2col writes cols as CKK × (N·L), so the forward is one GEMM
--   W (O × CKK) · cols and the weight gradient one GEMM over the whole
--   batch; the output comes out O × N × L and the bias add (or a copy)
--   makes it N × O × L.
-- Measured on the 2-core test machine (bench/conv_bench.lua, the
-- Fashion-MNIST CNN stack, batch 64): about the same for the whole step
-- (33-35 ms forward + backward either way), but OpenBLAS is 5x slower on
-- conv 1->32's single 32×9 · 9×50176 product than on 64 products of
-- 32×9 · 9×784 (4.2 ms against 0.8 ms), so "batched" is the default.
M.conv_layout = "batched"

local CONV_OPTS = {stride = true, padding = true, dilation = true, groups = true}

-- The groups option (1 when absent), checked against the channels: the
-- input's cin_x channels and the weight's (its dim 1 and 2) split into
-- groups, each group of input channels convolved with its own block of
-- filters.  transposed: the weight is in × out/groups × kh × kw (Torch's
-- conv_transpose), else out × in/groups × kh × kw.
local function check_groups(fname, opts, x, weight, cin_x, transposed)
    local g = opts.groups or 1
    if not is_int(g) or g < 1 then
        fail(fmt("%s: groups must be a positive integer, got %s", fname, type(g) == "number" and tostring(g)
                 or typename(g)))
    end
    if g == 1 then return 1 end
    local ws = shape_of(weight)
    local win = transposed and ws[1] or ws[2] * g -- the input channels the weight expects
    local wout = transposed and ws[2] * g or ws[1]
    if cin_x % g ~= 0 or win ~= cin_x then
        fail(fmt("%s: input of shape %s has %d channels but weight of shape %s with groups %d expects %d%s", fname,
                 shape_str(x), cin_x, shape_str(weight), g, win,
                 cin_x % g ~= 0 and fmt(" (in channels must be divisible by groups)") or ""))
    end
    if transposed and ws[1] % g ~= 0 or not transposed and wout % g ~= 0 then
        fail(fmt("%s: weight of shape %s: %s channels %d must be divisible by groups %d", fname, shape_str(weight),
                 transposed and "in" or "out", transposed and ws[1] or wout, g))
    end
    return g
end

-- A grouped convolution (conv, one of M.conv2d / M.conv_transpose2d) as
-- one per group on its slice of the channels, concatenated: x's channels
-- (dim cdim of x) and the weight's block of dim 1 per group, the bias's
-- outputs per group.  The gradients flow through narrow and cat.
local function grouped(conv, x, weight, bias, opts, g, cdim)
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    o.groups = nil
    local cg, wg = x:size(cdim) / g, weight:size(1) / g
    local ys = {}
    for i = 0, g - 1 do
        local bg
        local y = conv(x:narrow(cdim, i * cg + 1, cg), weight:narrow(1, i * wg + 1, wg), nil, o)
        if bias ~= nil then
            local og = y:size(cdim)
            bg = bias:narrow(1, i * og + 1, og)
            local bs = {}
            for d = 1, y:dim() do bs[d] = 1 end
            bs[cdim] = og
            y = y + bg:view(bs)
        end
        ys[#ys + 1] = y
    end
    return tensor.cat(ys, cdim)
end

-- The arguments conv2d and conv_transpose2d share: bias may be left out
-- before the options; stride, padding and dilation as pairs.
local function conv_args(fname, x, weight, bias, opts, allowed)
    if opts == nil and type(bias) == "table" and not is_tensor(bias) then bias, opts = nil, bias end
    check_tensor(fname, "input", x)
    check_tensor(fname, "weight", weight)
    check_devices(fname, x, weight, bias)
    opts = opts_of(fname, opts, allowed)
    local sh, sw = pair(fname, "stride", opts.stride or 1)
    local ph, pw = pair(fname, "padding", opts.padding or 0, true)
    local dh, dw = pair(fname, "dilation", opts.dilation or 1)
    return bias, opts, sh, sw, ph, pw, dh, dw
end

-- padding = "valid" (none) or "same" (the output as long as the input in
-- every spatial dim; stride 1 only, Torch's rule): opts with the padding
-- as numbers, and x, padded first when "same" needs more on one side than
-- the other (an even dilated kernel: the extra row or column goes at the
-- end, as Torch's).  nsp: the spatial dims (2 for conv2d, 1 for conv1d).
local PADDING_MODES = {same = true, valid = true}
local function check_padding_mode(fname, mode, stride)
    if not PADDING_MODES[mode] then
        fail(fmt("%s: padding must be an integer%s, \"same\" or \"valid\", got \"%s\"", fname,
                 fname:find("1d", 1, true) and "" or ", a pair {h, w}", mode))
    end
    if mode == "same" then
        local st = type(stride) == "table" and stride or {stride or 1}
        for i = 1, #st do
            if st[i] ~= 1 then
                fail(fmt("%s: padding \"same\" needs stride 1 (the output would not be as large as the input), " ..
                         "got stride %s", fname, tostring(st[i])))
            end
        end
    end
end
local function padding_mode(fname, x, weight, opts, nsp)
    local mode = opts.padding
    check_padding_mode(fname, mode, opts.stride)
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    o.padding = 0
    if mode == "valid" then return x, o end
    check_tensor(fname, "input", x)
    check_tensor(fname, "weight", weight)
    local ws = shape_of(weight)
    if #ws ~= nsp + 2 then return x, o end -- the conv names the weight's wrong shape
    local dil
    if nsp == 2 then dil = {pair(fname, "dilation", opts.dilation or 1)} else dil = {single(fname, "dilation",
                                                                                            opts.dilation or 1)} end
    local lo, hi, even = {}, {}, true
    for i = 1, nsp do
        local total = dil[i] * (ws[2 + i] - 1)
        lo[i] = floor(total / 2)
        hi[i] = total - lo[i]
        if lo[i] ~= hi[i] then even = false end
    end
    if even then
        o.padding = nsp == 2 and {lo[1], lo[2]} or lo[1]
        return x, o
    end
    local amounts = {} -- F.pad's order: the last dim first
    for i = nsp, 1, -1 do
        amounts[#amounts + 1] = lo[i]
        amounts[#amounts + 1] = hi[i]
    end
    return require("ordo.nn.functional").pad(x, amounts), o
end

-- conv2d's output height and width, or an error naming the layer when the
-- (dilated) kernel does not fit the padded input.
local function conv_out_hw(fname, x, H, W, kh, kw, sh, sw, ph, pw, dh, dw)
    local oh, ow = out_size(H, kh, sh, ph, dh), out_size(W, kw, sw, pw, dw)
    if not oh or not ow then
        fail(fmt("%s: kernel %dx%d%s is larger than the padded input %dx%d (input %s, padding %dx%d)", fname, kh, kw,
                 (dh ~= 1 or dw ~= 1) and fmt(" (dilation %dx%d)", dh, dw) or "", H + 2 * ph, W + 2 * pw,
                 shape_str(x), ph, pw))
    end
    return oh, ow
end

-- A grouped conv2d (groups G > 1, checked) in one piece: im2col of x as
-- N·G images of C/G channels, then one batched product of each group's
-- filters (G × O/G × C/G·kh·kw, shared over the batch) with its columns,
-- rather than a conv2d per group (depthwise layers have hundreds).
-- geo: {sh, sw, ph, pw, dh, dw}.
local function grouped_conv2d(fname, x, weight, bias, G, geo)
    local sh, sw, ph, pw, dh, dw = unpack(geo)
    local xb, unbatched = batched(fname, x)
    local ws = shape_of(weight)
    local N, Cin, H, W = xb:size(1), xb:size(2), xb:size(3), xb:size(4)
    local O, kh, kw = ws[1], ws[3], ws[4]
    local cg, og = Cin / G, O / G
    local oh, ow = conv_out_hw(fname, x, H, W, kh, kw, sh, sw, ph, pw, dh, dw)
    local L, CKK = oh * ow, cg * kh * kw
    local ip = {kh, kw, sh, sw, ph, pw, dh, dw}
    local y, cols
    no_grad(function()
        local xg = xb:reshape(N * G, cg, H, W)
        cols = new_on(fname, xb, {N * G, CKK, L}, xb._c.dtype)
        push(K_IM2COL, fname, 0, {xg}, {cols}, nil, ip)
        y = tensor.matmul(weight:reshape(1, G, og, CKK), cols:view(N, G, CKK, L)):view(N, O, oh, ow)
        if bias ~= nil then y = y + bias:view(1, O, 1, 1) end
    end)
    record("conv2d", y, {xb, weight, bias, n = 3}, function(gout)
        local gx, gw, gb
        local gy = gout:reshape(N, G, og, L)
        if xb._rg then
            local gcols = tensor.matmul(weight:reshape(1, G, og, CKK):transpose(3, 4), gy) -- N × G × CKK × L
            gx = new_on(fname, xb, {N * G, cg, H, W}, xb._c.dtype)
            push(K_COL2IM, fname, 0, {gcols:reshape(N * G, CKK, L)}, {gx}, nil, ip)
            gx = gx:view(N, Cin, H, W)
        end
        if weight._rg then
            gw = tensor.matmul(gy, cols:view(N, G, CKK, L):transpose(3, 4)):sum(1):view(O, cg, kh, kw)
        end
        if bias ~= nil and bias._rg then gb = gout:reshape(N, O, L):sum(3):sum(1) end
        return gx, gw, gb
    end, {weight})
    if unbatched then return y:squeeze(1) end
    return y
end

-- conv2d(x, weight [, bias] [, {stride=1, padding=0, dilation=1, groups=1}]):
-- x N×C×H×W (or C×H×W), weight O×(C/groups)×kh×kw, bias O or nil.  With
-- groups, the channels split into that many groups, each convolved with
-- its O/groups filters (groups = C: depthwise), one conv2d per group.
-- padding may also be "same" or "valid" (padding_mode).
function M.conv2d(x, weight, bias, opts, who)
    local fname = type(who) == "string" and who or "conv2d"
    if opts == nil and type(bias) == "table" and not is_tensor(bias) then bias, opts = nil, bias end
    check_devices(fname, x, weight, bias)
    if type(opts) == "table" and type(opts.padding) == "string" then
        x, opts = padding_mode(fname, x, weight, opts, 2)
    end
    local sh, sw, ph, pw, dh, dw
    bias, opts, sh, sw, ph, pw, dh, dw = conv_args(fname, x, weight, bias, opts, CONV_OPTS)
    check_float_pair(fname, x, weight, 4, "(out_channels, in_channels, kh, kw)")
    if opts.groups ~= nil and opts.groups ~= 1 then
        local g = check_groups(fname, opts, x, weight, batched(fname, x):size(2), false)
        check_bias(fname, bias, weight, weight:size(1))
        if M.conv_layout ~= "batched" then return grouped(M.conv2d, x, weight, bias, opts, g, x:dim() - 2) end
        return grouped_conv2d(fname, x, weight, bias, g, {sh, sw, ph, pw, dh, dw})
    end
    local xb, unbatched, ws = batched_against(fname, x, weight, 2)
    local N, Cin, H, W = xb:size(1), xb:size(2), xb:size(3), xb:size(4)
    local O, kh, kw = ws[1], ws[3], ws[4]
    check_bias(fname, bias, weight, O)
    local oh, ow = conv_out_hw(fname, x, H, W, kh, kw, sh, sw, ph, pw, dh, dw)
    local L, CKK = oh * ow, Cin * kh * kw
    local ip = {kh, kw, sh, sw, ph, pw, dh, dw}
    local layout = M.conv_layout

    local y, cols
    no_grad(function()
        local w2 = weight:reshape(O, CKK)
        if layout == "batched" then
            cols = new_on(fname, xb, {N, CKK, L}, xb._c.dtype)
            push(K_IM2COL, fname, 0, {xb}, {cols}, nil, ip)
            y = tensor.matmul(w2, cols):view(N, O, oh, ow)
            if bias ~= nil then y = y + bias:view(1, O, 1, 1) end
        else
            cols = new_on(fname, xb, {CKK, N * L}, xb._c.dtype)
            push(K_IM2COL, fname, 0, {xb}, {cols:view(CKK, N, L):transpose(1, 2)}, nil, ip)
            local yt = tensor.matmul(w2, cols):view(O, N, oh, ow):transpose(1, 2)
            if bias ~= nil then y = yt + bias:view(1, O, 1, 1) else y = yt:contiguous() end
        end
    end)

    record("conv2d", y, {xb, weight, bias, n = 3}, function(g)
        local gx, gw, gb
        local w2 = weight:reshape(O, CKK)
        if layout == "batched" then
            local gy = g:reshape(N, O, L)
            if xb._rg then
                local gcols = tensor.matmul(w2:t(), gy)
                gx = new_on(fname, xb, {N, Cin, H, W}, xb._c.dtype)
                push(K_COL2IM, fname, 0, {gcols}, {gx}, nil, ip)
            end
            if weight._rg then
                gw = tensor.matmul(gy, cols:transpose(2, 3)):sum(1):view(O, Cin, kh, kw)
            end
            if bias ~= nil and bias._rg then gb = gy:sum(3):sum(1) end
        else
            -- gy as O × (N·L): one copy, then every product is a single GEMM
            local gyt = g:transpose(1, 2):contiguous():view(O, N * L)
            if xb._rg then
                local gcols = tensor.matmul(w2:t(), gyt)
                gx = new_on(fname, xb, {N, Cin, H, W}, xb._c.dtype)
                push(K_COL2IM, fname, 0, {gcols:view(CKK, N, L):transpose(1, 2)}, {gx}, nil, ip)
            end
            if weight._rg then gw = tensor.matmul(gyt, cols:t()):view(O, Cin, kh, kw) end
            if bias ~= nil and bias._rg then gb = gyt:sum(2) end
        end
        return gx, gw, gb
    end, {weight})

    if unbatched then return y:squeeze(1) end
    return y
end

-- ---------------------------------------------------------------- conv_transpose2d

local TCONV_OPTS = {stride = true, padding = true, output_padding = true, dilation = true, groups = true}

-- output_padding (one per spatial dim), checked: each smaller than its
-- stride or its dilation (Torch's rule).
local function check_output_padding(fname, op, st, dil)
    for i = 1, #op do
        if op[i] >= st[i] and op[i] >= dil[i] then
            local function show(t) return #t == 1 and tostring(t[1]) or fmt("%dx%d", t[1], t[2]) end
            fail(fmt("%s: output_padding %s must be smaller than the stride %s or the dilation %s", fname, show(op),
                     show(st), show(dil)))
        end
    end
end

-- conv_transpose2d(x, weight [, bias] [, {stride=1, padding=0,
-- output_padding=0, dilation=1, groups=1}]): the adjoint of conv2d (its gradient
-- with respect to its input), which upsamples: x N×Cin×H×W (or Cin×H×W),
-- weight Cin×(Cout/groups)×kh×kw (Torch's layout), bias Cout; the output is
-- Hout = (H - 1) sh - 2 ph + dh (kh - 1) + oph + 1 high, likewise wide.
-- output_padding (< stride) adds rows and columns at the end, to reach
-- the size a strided conv2d came from.  The forward is conv2d's input
-- gradient (matmul, col2im); its gradients are conv2d's forward (im2col,
-- matmul) and its weight product.
function M.conv_transpose2d(x, weight, bias, opts, who)
    local fname = type(who) == "string" and who or "conv_transpose2d"
    local sh, sw, ph, pw, dh, dw
    bias, opts, sh, sw, ph, pw, dh, dw = conv_args(fname, x, weight, bias, opts, TCONV_OPTS)
    local oph, opw = pair(fname, "output_padding", opts.output_padding or 0, true)
    check_output_padding(fname, {oph, opw}, {sh, sw}, {dh, dw})
    check_float_pair(fname, x, weight, 4, "(in_channels, out_channels, kh, kw)")
    if oph >= sh or opw >= sw then
        -- (Torch allows output_padding up to the dilation.)  The whole
        -- output without padding, then cropped by the padding at the start
        -- and to the size at the end (zeros where output_padding passes it)
        local o = {}
        for k, v in pairs(opts) do o[k] = v end
        o.padding, o.output_padding = 0, 0
        local y = M.conv_transpose2d(x, weight, nil, o, fname)
        local H, W = y:size(y:dim() - 1), y:size(y:dim())
        local Ho, Wo = H - 2 * ph + oph, W - 2 * pw + opw
        if Ho < 1 or Wo < 1 then
            fail(fmt("%s: the output would be %dx%d: padding %dx%d is too large for input %s and kernel %dx%d", fname,
                     Ho, Wo, ph, pw, shape_str(x), weight:size(3), weight:size(4)))
        end
        y = require("ordo.nn.functional").pad(y, {-pw, Wo - (W - pw), -ph, Ho - (H - ph)})
        if bias ~= nil then
            check_bias(fname, bias, weight, weight:size(2) * (opts.groups or 1))
            y = y + (y:dim() == 4 and bias:view(1, -1, 1, 1) or bias:view(-1, 1, 1))
        end
        return y
    end
    if opts.groups ~= nil and opts.groups ~= 1 then
        local g = check_groups(fname, opts, x, weight, batched(fname, x):size(2), true)
        check_bias(fname, bias, weight, weight:size(2) * g)
        return grouped(M.conv_transpose2d, x, weight, bias, opts, g, x:dim() - 2)
    end
    local xb, unbatched, ws = batched_against(fname, x, weight, 1)
    local N, Cin, H, W = xb:size(1), xb:size(2), xb:size(3), xb:size(4)
    local Cout, kh, kw = ws[2], ws[3], ws[4]
    check_bias(fname, bias, weight, Cout)
    local Ho = (H - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    local Wo = (W - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    if Ho < 1 or Wo < 1 then
        fail(fmt("%s: the output would be %dx%d: padding %dx%d is too large for input %s and kernel %dx%d", fname, Ho,
                 Wo, ph, pw, shape_str(x), kh, kw))
    end
    local L, CKK = H * W, Cout * kh * kw
    local ip = {kh, kw, sh, sw, ph, pw, dh, dw}

    local y
    no_grad(function()
        local cols = tensor.matmul(weight:reshape(Cin, CKK):t(), xb:reshape(N, Cin, L)) -- N × CKK × L
        y = new_on(fname, xb, {N, Cout, Ho, Wo}, xb._c.dtype)
        push(K_COL2IM, fname, 0, {cols}, {y}, nil, ip)
        if bias ~= nil then y = y + bias:view(1, Cout, 1, 1) end
    end)

    record("conv_transpose2d", y, {xb, weight, bias, n = 3}, function(g)
        local gx, gw, gb
        local gcols = new_on(fname, g, {N, CKK, L}, g._c.dtype)
        push(K_IM2COL, fname, 0, {g:contiguous()}, {gcols}, nil, ip)
        if xb._rg then gx = tensor.matmul(weight:reshape(Cin, CKK), gcols):view(N, Cin, H, W) end
        if weight._rg then
            gw = tensor.matmul(xb:reshape(N, Cin, L), gcols:transpose(2, 3)):sum(1):view(Cin, Cout, kh, kw)
        end
        if bias ~= nil and bias._rg then gb = g:sum(4):sum(3):sum(1) end
        return gx, gw, gb
    end, {weight, xb})

    if unbatched then return y:squeeze(1) end
    return y
end

-- ---------------------------------------------------------------- max_pool2d

local POOL_OPTS = {stride = true, padding = true, dilation = true, ceil_mode = true, return_indices = true}

-- ceil_mode, checked: a boolean or nil (false)
local function ceil_mode_of(fname, opts)
    local c = opts.ceil_mode
    if c ~= nil and type(c) ~= "boolean" then fail(fmt("%s: ceil_mode must be a boolean, got %s", fname, typename(c))) end
    return c == true
end

-- opts[key], checked to be a boolean or nil (then false).
local function flag(fname, opts, key)
    local v = opts[key]
    if v ~= nil and type(v) ~= "boolean" then fail(fmt("%s: %s must be a boolean, got %s", fname, key, typename(v))) end
    return v == true
end

-- The window of a pooling op, checked: pool_geometry(fname, x, k, opts,
-- allowed) -> opts, xb (x as a batch), unbatched, and {kh, kw, sh, sw, ph,
-- pw, oh, ow, dh, dw, ceil_mode}.  The options table may come in k's place.
local function pool_geometry(fname, x, k, opts, allowed)
    check_tensor(fname, "input", x)
    if type(k) == "table" and getmetatable(k) == nil and opts == nil and #k ~= 2 then k, opts = nil, k end
    if k == nil then fail(fname .. ": expected a kernel size (an integer or a pair {h, w})") end
    opts = opts_of(fname, opts, allowed)
    local kh, kw = pair(fname, "kernel size", k)
    local sh, sw = kh, kw
    if opts.stride ~= nil then sh, sw = pair(fname, "stride", opts.stride) end
    local ph, pw = pair(fname, "padding", opts.padding or 0, true)
    if 2 * ph > kh or 2 * pw > kw then
        fail(fmt("%s: padding %dx%d must be at most half the kernel %dx%d", fname, ph, pw, kh, kw))
    end
    local dh, dw = 1, 1
    if opts.dilation ~= nil then dh, dw = pair(fname, "dilation", opts.dilation) end
    local ceil_mode = ceil_mode_of(fname, opts)
    local xb, unbatched = batched(fname, x)
    local H, W = xb:size(3), xb:size(4)
    local oh, ow = out_size(H, kh, sh, ph, dh, ceil_mode), out_size(W, kw, sw, pw, dw, ceil_mode)
    local dil = (dh ~= 1 or dw ~= 1) and fmt(" (dilation %dx%d)", dh, dw) or ""
    if not oh or not ow then
        fail(fmt("%s: kernel %dx%d%s is larger than the padded input %dx%d (input %s, padding %dx%d)", fname, kh, kw,
                 dil, H + 2 * ph, W + 2 * pw, shape_str(x), ph, pw))
    end
    if not every_window_real(H, oh, kh, sh, ph, dh) or not every_window_real(W, ow, kw, sw, pw, dw) then
        fail(fmt("%s: with kernel %dx%d%s and padding %dx%d a window over input %s holds only padding", fname, kh,
                 kw, dil, ph, pw, shape_str(x)))
    end
    return opts, xb, unbatched, {kh, kw, sh, sw, ph, pw, oh, ow, dh, dw, ceil_mode}
end

-- max_pool2d(x, kernel [, {stride=kernel, padding=0, dilation=1,
-- ceil_mode=false, return_indices=false}]): the max of each window (taps
-- dilation apart); with return_indices also the int64 index (from 1) of
-- each max in its H×W plane, flattened row-major.
function M.max_pool2d(x, k, opts, who)
    local fname = type(who) == "string" and who or "max_pool2d"
    local xb, unbatched, geo
    opts, xb, unbatched, geo = pool_geometry(fname, x, k, opts, POOL_OPTS)
    local kh, kw, sh, sw, ph, pw, oh, ow, dh, dw, ceil_mode = unpack(geo)
    local N, Cc, H, W = xb:size(1), xb:size(2), xb:size(3), xb:size(4)
    local dt = xb._c.dtype
    local y = new_on(fname, xb, {N, Cc, oh, ow}, dt)
    local idx = new_on(fname, xb, {N, Cc, oh, ow}, cdef.I64)
    local want_indices = flag(fname, opts, "return_indices")
    push(K_POOL, fname, 0, {xb}, {y, idx}, nil, {kh, kw, sh, sw, ph, pw, dh, dw, ceil_mode and 1 or 0})
    record("max_pool2d", y, {xb, n = 1}, function(g)
        local gx = new_on(fname, xb, {N, Cc, H, W}, g._c.dtype)
        push(K_POOL_BW, fname, 0, {g, idx}, {gx})
        return gx
    end)
    if unbatched then y = y:squeeze(1) end
    if want_indices then
        local i1 = no_grad(function() return idx + 1 end)
        return y, unbatched and i1:squeeze(1) or i1
    end
    return y
end

-- ---------------------------------------------------------------- unfold / fold

local UNFOLD_OPTS = {stride = true, padding = true, dilation = true}

-- unfold(x, kernel [, {dilation=1, padding=0, stride=1}]) (Torch's
-- F.unfold, im2col): x N×C×H×W (or C×H×W) -> N × C·kh·kw × L, a column
-- per window position (L of them, row-major), rows ordered channel, then
-- kernel row, then kernel column.  Its gradient is fold's.
function M.unfold(x, k, opts, who)
    local fname = type(who) == "string" and who or "unfold"
    check_tensor(fname, "input", x)
    opts = opts_of(fname, opts, UNFOLD_OPTS)
    local kh, kw = pair(fname, "kernel size", k)
    local sh, sw = pair(fname, "stride", opts.stride or 1)
    local ph, pw = pair(fname, "padding", opts.padding or 0, true)
    local dh, dw = pair(fname, "dilation", opts.dilation or 1)
    local dt = x:dtype()
    if not FLOATS[dt] then fail(fmt("%s: input must be float32 or float64, got %s", fname, dt)) end
    local xb, unbatched = batched(fname, x)
    local N, Cc, H, W = xb:size(1), xb:size(2), xb:size(3), xb:size(4)
    local oh, ow = conv_out_hw(fname, x, H, W, kh, kw, sh, sw, ph, pw, dh, dw)
    local ip = {kh, kw, sh, sw, ph, pw, dh, dw}
    local xc = xb:contiguous()
    local cols = new_on(fname, xc, {N, Cc * kh * kw, oh * ow}, xc._c.dtype)
    push(K_IM2COL, fname, 0, {xc}, {cols}, nil, ip)
    record("unfold", cols, {xb, n = 1}, function(g)
        local gx = new_on(fname, g, {N, Cc, H, W}, g._c.dtype)
        push(K_COL2IM, fname, 0, {g:contiguous()}, {gx}, nil, ip)
        return gx
    end)
    return unbatched and cols:squeeze(1) or cols
end

-- fold(x, output_size, kernel [, {dilation=1, padding=0, stride=1}])
-- (Torch's F.fold, col2im): unfold's adjoint, x N × C·kh·kw × L (or
-- C·kh·kw × L) summed back into N×C×H×W, {H, W} = output_size,
-- overlapping windows adding up.
function M.fold(x, output_size, k, opts, who)
    local fname = type(who) == "string" and who or "fold"
    check_tensor(fname, "input", x)
    opts = opts_of(fname, opts, UNFOLD_OPTS)
    local H, W = pair(fname, "output size", output_size)
    local kh, kw = pair(fname, "kernel size", k)
    local sh, sw = pair(fname, "stride", opts.stride or 1)
    local ph, pw = pair(fname, "padding", opts.padding or 0, true)
    local dh, dw = pair(fname, "dilation", opts.dilation or 1)
    local dt = x:dtype()
    if not FLOATS[dt] then fail(fmt("%s: input must be float32 or float64, got %s", fname, dt)) end
    local nd = x:dim()
    if nd ~= 2 and nd ~= 3 then
        fail(fmt("%s: expected a 3-D input (N, C*kh*kw, L) or a 2-D one, got shape %s", fname, shape_str(x)))
    end
    local xb = nd == 3 and x or x:unsqueeze(1)
    local N, CK, L = xb:size(1), xb:size(2), xb:size(3)
    if CK % (kh * kw) ~= 0 then
        fail(fmt("%s: input of shape %s: dim %d (%d) must be divisible by the kernel's %dx%d", fname, shape_str(x),
                 nd - 1, CK, kh, kw))
    end
    local oh, ow = out_size(H, kh, sh, ph, dh), out_size(W, kw, sw, pw, dw)
    if not oh or not ow or oh * ow ~= L then
        fail(fmt("%s: input of shape %s has %d blocks but output size %dx%d with kernel %dx%d gives %d", fname,
                 shape_str(x), L, H, W, kh, kw, (oh or 0) * (ow or 0)))
    end
    local Cc = CK / (kh * kw)
    local ip = {kh, kw, sh, sw, ph, pw, dh, dw}
    local xc = xb:contiguous()
    local y = new_on(fname, xc, {N, Cc, H, W}, xc._c.dtype)
    push(K_COL2IM, fname, 0, {xc}, {y}, nil, ip)
    record("fold", y, {xb, n = 1}, function(g)
        local gc = new_on(fname, g, {N, CK, L}, g._c.dtype)
        push(K_IM2COL, fname, 0, {g:contiguous()}, {gc}, nil, ip)
        return gc
    end)
    return nd == 3 and y or y:squeeze(1)
end

-- ---------------------------------------------------------------- max_unpool2d

local UNPOOL_OPTS = {stride = true, padding = true, output_size = true}

-- max_unpool2d(x, indices, kernel [, {stride=kernel, padding=0,
-- output_size}]): max_pool2d's partial inverse (Torch's): zeros of the
-- pooled input's size, each value of x put back where its index (from
-- max_pool2d's return_indices, from 1 in each H×W plane) says.  The size
-- is (H - 1) s - 2 p + k per dim unless output_size ({h, w}, or a longer
-- shape whose last two are taken) picks one of the sizes that pool to
-- x's (less than a stride more).  nsp = 1: max_unpool1d over N×C×L.
local function max_unpool(fname, nsp, x, indices, k, opts)
    check_tensor(fname, "input", x)
    check_tensor(fname, "indices", indices)
    check_devices(fname, x, indices)
    if type(k) == "table" and getmetatable(k) == nil and opts == nil and #k ~= nsp then k, opts = nil, k end
    if k == nil then fail(fname .. ": expected a kernel size") end
    opts = opts_of(fname, opts, UNPOOL_OPTS)
    local function dims(what, v, zero_ok)
        if nsp == 2 then return {pair(fname, what, v, zero_ok)} end
        return {single(fname, what, v, zero_ok)}
    end
    local ks = dims("kernel size", k)
    local ss = opts.stride == nil and ks or dims("stride", opts.stride)
    local ps = dims("padding", opts.padding or 0, true)
    local nd = x:dim()
    if nd ~= nsp + 1 and nd ~= nsp + 2 then
        fail(fmt("%s: expected a %d-D input %s or a %d-D one, got shape %s", fname, nsp + 2,
                 nsp == 2 and "(N, C, H, W)" or "(N, C, L)", nsp + 1, shape_str(x)))
    end
    if indices:dtype() ~= "int64" then fail(fmt("%s: indices must be int64, got %s", fname, indices:dtype())) end
    if shape_str(x) ~= shape_str(indices) then
        fail(fmt("%s: indices of shape %s do not match input %s", fname, shape_str(indices), shape_str(x)))
    end
    local xs = shape_of(x)
    local out = {}
    for i = 1, nsp do
        local n = xs[nd - nsp + i]
        out[i] = (n - 1) * ss[i] - 2 * ps[i] + ks[i]
    end
    if opts.output_size ~= nil then
        local os = opts.output_size
        if type(os) ~= "table" or #os < nsp then
            fail(fmt("%s: output_size must be a table of %d sizes (or the whole shape), got %s", fname, nsp,
                     type(os) == "table" and "a table of " .. #os or typename(os)))
        end
        for i = 1, nsp do
            local v, def = os[#os - nsp + i], out[i]
            if not is_int(v) or v <= def - ss[i] or v >= def + ss[i] then
                fail(fmt("%s: output_size %s must be within %d..%d in spatial dim %d (input %s)", fname, tostring(v),
                         def - ss[i] + 1, def + ss[i] - 1, i, shape_str(x)))
            end
            out[i] = v
        end
    end
    local plane = 1
    for i = 1, nsp do
        if out[i] < 1 then
            fail(fmt("%s: the output would be empty: padding too large for input %s and the kernel", fname, shape_str(x)))
        end
        plane = plane * out[i]
    end
    local lead, m = {}, 1
    for i = 1, nd - nsp do
        lead[i] = xs[i]
        m = m * xs[i]
    end
    local L = x:numel() / math.max(m, 1)
    local flat = tensor.zeros({m, plane}, tensor.like(x))
    -- (an index out of range, found when the scatter runs, fails the
    -- result as "max_unpool2d: scatter: index 30 out of range for dim 2 of
    -- size 4": dim 2 is each plane's places)
    local y = flat:scatter(2, indices:reshape(m, L), x:reshape(m, L), fname)
    for i = 1, nsp do lead[#lead + 1] = out[i] end
    return y:view(lead)
end
function M.max_unpool2d(x, indices, k, opts) return max_unpool("max_unpool2d", 2, x, indices, k, opts) end
function M.max_unpool1d(x, indices, k, opts) return max_unpool("max_unpool1d", 1, x, indices, k, opts) end

-- ---------------------------------------------------------------- avg_pool2d

local AVGPOOL_OPTS = {stride = true, padding = true, ceil_mode = true, count_include_pad = true,
                     divisor_override = true}

-- opts.count_include_pad: true (the default, Torch's) or false (each
-- window's mean over the input elements it covers, the padding left out).
local function count_pad(fname, opts)
    local c = opts.count_include_pad
    if c ~= nil and type(c) ~= "boolean" then
        fail(fmt("%s: count_include_pad must be a boolean, got %s", fname, typename(c)))
    end
    return c ~= false
end

-- opts.divisor_override: nil, or a positive integer every window's sum is
-- divided by (Torch's).
local function divisor_of(fname, opts)
    local d = opts.divisor_override
    if d ~= nil and (not is_int(d) or d < 1) then
        fail(fmt("%s: divisor_override must be a positive integer, got %s", fname,
                 type(d) == "number" and tostring(d) or typename(d)))
    end
    return d
end

-- t with eh rows and ew columns of zeros added at its end
local function pad_end(t, eh, ew)
    if eh == 0 and ew == 0 then return t end
    return require("ordo.nn.functional").pad(t, {0, ew, 0, eh})
end

-- avg_pool2d(x, kernel [, {stride=kernel, padding=0, ceil_mode=false,
-- count_include_pad=true, divisor_override}]): the mean of each window,
-- the zeros of the padding counted (Torch's count_include_pad): a
-- convolution of each channel alone with a kernel of 1/(kh kw), so its
-- gradient is conv2d's.  As Torch's: with ceil_mode, a last window that
-- runs past the padding counts only what it covers of the padded input
-- (of the input, with count_include_pad = false); divisor_override
-- divides every window's sum by that number instead.
function M.avg_pool2d(x, k, opts, who)
    local fname = type(who) == "string" and who or "avg_pool2d"
    local o, xb, unbatched, geo = pool_geometry(fname, x, k, opts, AVGPOOL_OPTS)
    local kh, kw, sh, sw, ph, pw, oh, ow = unpack(geo)
    local with_pad = count_pad(fname, o)
    local divisor = divisor_of(fname, o)
    local dt = x:dtype()
    if not FLOATS[dt] then fail(fmt("%s: input must be float32 or float64, got %s", fname, dt)) end
    local N, Cc, H, W = xb:size(1), xb:size(2), xb:size(3), xb:size(4)
    -- ceil_mode's last windows may reach past the padding: zeros added at the end
    local eh = math.max(0, (oh - 1) * sh + kh - (H + 2 * ph))
    local ew = math.max(0, (ow - 1) * sw + kw - (W + 2 * pw))
    local w = tensor.full({1, 1, kh, kw}, 1 / (kh * kw), tensor.like(xb, dt))
    local po = {stride = {sh, sw}, padding = {ph, pw}}
    local y = M.conv2d(pad_end(xb:reshape(N * Cc, 1, H, W), eh, ew), w, nil, po)
    if divisor ~= nil then
        y = y * (kh * kw / divisor)
    elseif not with_pad and (ph > 0 or pw > 0 or eh > 0 or ew > 0) then
        -- the share of each window that is input, the same pooling of ones
        local share = M.conv2d(pad_end(tensor.ones({1, 1, H, W}, tensor.like(xb, dt)), eh, ew), w, nil, po)
        y = y / share
    elseif eh > 0 or ew > 0 then
        -- the share of each window inside the padded input
        local share = M.conv2d(pad_end(tensor.ones({1, 1, H + 2 * ph, W + 2 * pw}, tensor.like(xb, dt)), eh, ew), w,
                               nil, {stride = {sh, sw}})
        y = y / share
    end
    y = y:reshape(N, Cc, y:size(3), y:size(4))
    return unbatched and y:squeeze(1) or y
end

-- ---------------------------------------------------------------- 1-D: conv1d, max_pool1d, avg_pool1d

-- The 1-D ops are the 2-D ones over inputs of height 1: x N×C×L (or C×L)
-- becomes N×C×1×L, each window 1×k; the gradients are the 2-D ops'.

-- (An integer option of a 1-D op, positive or >= 0 when zero_ok: single,
-- above.)

-- x as N×C×1×L, and whether it came without a batch dim.
local function as_2d(fname, x)
    check_tensor(fname, "input", x)
    local nd = x:dim()
    if nd == 3 then return x:unsqueeze(3), false end
    if nd == 2 then return x:unsqueeze(1):unsqueeze(3), true end
    fail(fmt("%s: expected a 3-D input (N, C, L) or a 2-D one (C, L), got shape %s", fname, shape_str(x)))
end

local function back_to_1d(y, unbatched)
    y = y:squeeze(3)
    return unbatched and y:squeeze(1) or y
end

-- conv1d(x, weight [, bias] [, {stride=1, padding=0, dilation=1, groups=1}]):
-- x N×C×L (or C×L), weight O×(C/groups)×k, bias O or nil.
function M.conv1d(x, weight, bias, opts, who)
    local fname = type(who) == "string" and who or "conv1d"
    if opts == nil and type(bias) == "table" and not is_tensor(bias) then bias, opts = nil, bias end
    check_devices(fname, x, weight, bias)
    if type(opts) == "table" and type(opts.padding) == "string" then
        x, opts = padding_mode(fname, x, weight, opts, 1)
    end
    local x4, unbatched = as_2d(fname, x)
    check_tensor(fname, "weight", weight)
    opts = opts_of(fname, opts, CONV_OPTS)
    local s = single(fname, "stride", opts.stride or 1)
    local p = single(fname, "padding", opts.padding or 0, true)
    local d = single(fname, "dilation", opts.dilation or 1)
    check_float_pair(fname, x, weight, 3, "(out_channels, in_channels, k)")
    local C, k = x4:size(2), weight:size(3)
    local g = check_groups(fname, opts, x, weight, C, false)
    if g == 1 and weight:size(2) ~= C then
        fail(fmt("%s: input of shape %s has %d channels but weight of shape %s expects %d", fname, shape_str(x), C,
                 shape_str(weight), weight:size(2)))
    end
    check_bias(fname, bias, weight, weight:size(1))
    local L = x4:size(4)
    if not out_size(L, k, s, p, d) then
        fail(fmt("%s: kernel %d%s is larger than the padded input %d (input %s, padding %d)", fname, k,
                 d ~= 1 and fmt(" (dilation %d)", d) or "", L + 2 * p, shape_str(x), p))
    end
    local y = M.conv2d(x4, weight:unsqueeze(3), bias, {stride = {1, s}, padding = {0, p}, dilation = {1, d},
                                                        groups = g}, who)
    return back_to_1d(y, unbatched)
end

-- conv_transpose1d(x, weight [, bias] [, {stride=1, padding=0,
-- output_padding=0, dilation=1, groups=1}]): x N×Cin×L (or Cin×L),
-- weight Cin×(Cout/groups)×k (Torch's layout), bias Cout; the output is
-- (L - 1) s - 2 p + d (k - 1) + output_padding + 1 long.  The 2-D op over
-- a height of 1.
function M.conv_transpose1d(x, weight, bias, opts, who)
    local fname = type(who) == "string" and who or "conv_transpose1d"
    if opts == nil and type(bias) == "table" and not is_tensor(bias) then bias, opts = nil, bias end
    check_devices(fname, x, weight, bias)
    local x4, unbatched = as_2d(fname, x)
    check_tensor(fname, "weight", weight)
    opts = opts_of(fname, opts, TCONV_OPTS)
    local s = single(fname, "stride", opts.stride or 1)
    local p = single(fname, "padding", opts.padding or 0, true)
    local op = single(fname, "output_padding", opts.output_padding or 0, true)
    local d = single(fname, "dilation", opts.dilation or 1)
    check_output_padding(fname, {op}, {s}, {d})
    check_float_pair(fname, x, weight, 3, "(in_channels, out_channels, k)")
    local C = x4:size(2)
    local g = check_groups(fname, opts, x, weight, C, true)
    if g == 1 and weight:size(1) ~= C then
        fail(fmt("%s: input of shape %s has %d channels but weight of shape %s expects %d", fname, shape_str(x), C,
                 shape_str(weight), weight:size(1)))
    end
    check_bias(fname, bias, weight, weight:size(2) * g)
    local L, k = x4:size(4), weight:size(3)
    local out = (L - 1) * s - 2 * p + d * (k - 1) + op + 1
    if out < 1 then
        fail(fmt("%s: the output would be %d long: padding %d is too large for input %s and kernel %d", fname, out, p,
                 shape_str(x), k))
    end
    local y = M.conv_transpose2d(x4, weight:unsqueeze(3), bias, {stride = {1, s}, padding = {0, p},
                                 output_padding = {0, op}, dilation = {1, d}, groups = opts.groups}, who)
    return back_to_1d(y, unbatched)
end

-- The window of a 1-D pooling op, checked: k, {stride, padding [,
-- dilation, ceil_mode]} as the 2-D op takes them.
local function window_1d(fname, x, k, opts, allowed)
    if type(k) == "table" and getmetatable(k) == nil and opts == nil then k, opts = nil, k end
    if k == nil then fail(fname .. ": expected a kernel size (an integer)") end
    opts = opts_of(fname, opts, allowed)
    k = single(fname, "kernel size", k)
    local s = opts.stride == nil and k or single(fname, "stride", opts.stride)
    local p = single(fname, "padding", opts.padding or 0, true)
    local d = opts.dilation == nil and 1 or single(fname, "dilation", opts.dilation)
    local ceil_mode = ceil_mode_of(fname, opts)
    if 2 * p > k then fail(fmt("%s: padding %d must be at most half the kernel %d", fname, p, k)) end
    local x4, unbatched = as_2d(fname, x)
    local L = x4:size(4)
    local dil = d ~= 1 and fmt(" (dilation %d)", d) or ""
    local out = out_size(L, k, s, p, d, ceil_mode)
    if not out then
        fail(fmt("%s: kernel %d%s is larger than the padded input %d (input %s, padding %d)", fname, k, dil,
                 L + 2 * p, shape_str(x), p))
    end
    if not every_window_real(L, out, k, s, p, d) then
        fail(fmt("%s: with kernel %d%s and padding %d a window over input %s holds only padding", fname, k, dil, p,
                 shape_str(x)))
    end
    local o2 = {stride = {1, s}, padding = {0, p}}
    o2.ceil_mode = ceil_mode
    if allowed.dilation then o2.dilation = {1, d} end
    return opts, x4, unbatched, {1, k}, o2
end

-- max_pool1d(x, kernel [, {stride=kernel, padding=0, dilation=1,
-- ceil_mode=false, return_indices=false}]): the max of each window; with
-- return_indices also the int64 index (from 1) of each max along L.
function M.max_pool1d(x, k, opts, who)
    local fname = type(who) == "string" and who or "max_pool1d"
    local x4, unbatched, k2, o2
    opts, x4, unbatched, k2, o2 = window_1d(fname, x, k, opts, POOL_OPTS)
    o2.return_indices = flag(fname, opts, "return_indices")
    local y, idx = M.max_pool2d(x4, k2, o2, who)
    if idx then return back_to_1d(y, unbatched), back_to_1d(idx, unbatched) end
    return back_to_1d(y, unbatched)
end

-- avg_pool1d(x, kernel [, {stride=kernel, padding=0, ceil_mode=false,
-- count_include_pad=true}]): the mean of each window, the padding's zeros
-- counted (as avg_pool2d; Torch's 1-D op has no divisor_override).
local AVGPOOL1D_OPTS = {stride = true, padding = true, ceil_mode = true, count_include_pad = true}
function M.avg_pool1d(x, k, opts, who)
    local fname = type(who) == "string" and who or "avg_pool1d"
    local o, x4, unbatched, k2, o2 = window_1d(fname, x, k, opts, AVGPOOL1D_OPTS)
    o2.count_include_pad = count_pad(fname, o)
    if not FLOATS[x:dtype()] then fail(fname .. ": input must be float32 or float64, got " .. x:dtype()) end
    return back_to_1d(M.avg_pool2d(x4, k2, o2, who), unbatched)
end

-- The rows [floor(i n / out) + 1, ceil((i + 1) n / out)] that output i of
-- an adaptive pooling averages (Torch's bins), as (start, length).
-- The out x n matrix whose row i averages input bin i: positions
-- floor(i n / out) .. ceil((i + 1) n / out) - 1 (0-based, Torch's bins,
-- which overlap when out does not divide n).  Built by the engine, so an
-- output size too large fails as an allocation, not as a loop in Lua.
local function adaptive_matrix(n, out, like)
    local f64 = tensor.like(like, "float64")
    local i = tensor.arange(out, f64)
    local lo = (i * n / out):floor():view(out, 1)
    local hi = ((i + 1) * n / out):ceil():view(out, 1)
    local j = tensor.arange(n, f64):view(1, n)
    local inside = j:ge(lo):mul(j:lt(hi)):to("float64")
    return (inside / (hi - lo)):to(like:dtype())
end

-- An adaptive pooling's output size per dim: beyond it the bins' positions
-- alone would not fit in memory (and 4.6e18 made a loop that never ended).
local MAX_ADAPTIVE_SIZE = 2 ^ 31 - 1

-- The output size of an adaptive pooling op over spatial sizes ns (one
-- per spatial dim): an integer (the same for every dim) or a table of
-- one per dim, false keeping that dim's size (Torch's None).
local function adaptive_size(fname, size, ns)
    local out = {}
    local function entry(i, v)
        if v == false then return ns[i] end
        if not is_int(v) or v < 1 then
            fail(fmt("%s: output size must be positive integers, got %s (false keeps the input's size)", fname,
                     type(v) == "number" and tostring(v) or typename(v)))
        end
        if v > MAX_ADAPTIVE_SIZE then
            fail(fmt("%s: output size %.17g is too large (at most 2^31 - 1)", fname, v))
        end
        return v
    end
    if type(size) == "table" and getmetatable(size) == nil then
        local n = 0
        for k in pairs(size) do
            if not is_int(k) or k < 1 or k > #ns then n = -1 break end
            n = n + 1
        end
        if n ~= #ns then
            fail(fmt("%s: output size must be an integer or a table of %d, got a table of %d", fname, #ns,
                     n < 0 and #size or n))
        end
        for i = 1, #ns do out[i] = entry(i, size[i]) end
    elseif type(size) == "number" then
        for i = 1, #ns do out[i] = entry(i, size) end
    else
        fail(fmt("%s: output size must be an integer or a table of %d, got %s", fname, #ns, typename(size)))
    end
    return out
end

-- adaptive_avg_pool2d(x, size): the mean over size[1] x size[2] bins that
-- cover the input (an integer: a square; 1: global average pooling; an
-- entry false keeps that dim, Torch's None).
local function adaptive_avg_pool2d(fname, x, size)
    check_tensor(fname, "input", x)
    local dt = x:dtype()
    if not FLOATS[dt] then fail(fmt("%s: input must be float32 or float64, got %s", fname, dt)) end
    local xb, unbatched = batched(fname, x)
    local H, W = xb:size(3), xb:size(4)
    local oh, ow = unpack(adaptive_size(fname, size, {H, W}))
    if H < 1 or W < 1 then fail(fmt("%s: input %s has an empty plane", fname, shape_str(x))) end
    local y
    if H % oh == 0 and W % ow == 0 then -- equal bins: one reshape and a mean
        local N, Cc = xb:size(1), xb:size(2)
        y = xb:reshape(N, Cc, oh, H / oh, ow, W / ow):mean(6):mean(4)
    else -- overlapping or uneven bins: a bin-averaging matrix on each side, two matmuls
        local N, Cc = xb:size(1), xb:size(2)
        local mw, mh = adaptive_matrix(W, ow, xb), adaptive_matrix(H, oh, xb)
        local t = xb:reshape(N * Cc * H, W):matmul(mw:t()) -- (N C H) x ow
        t = t:view(N * Cc, H, ow):transpose(2, 3):reshape(N * Cc * ow, H):matmul(mh:t()) -- (N C ow) x oh
        y = t:view(N, Cc, ow, oh):transpose(3, 4)
    end
    return unbatched and y:squeeze(1) or y
end

-- adaptive_avg_pool1d(x, size): x N×C×L (or C×L), the mean over size bins.
local function adaptive_avg_pool1d(fname, x, size)
    local x4, unbatched = as_2d(fname, x)
    local out = adaptive_size(fname, size, {x4:size(4)})
    return back_to_1d(adaptive_avg_pool2d(fname, x4, {1, out[1]}), unbatched)
end

-- The max over Torch's bins along dim d of t (n long) to out (each
-- gradient to its bin's first largest element).  Bin i holds positions
-- floor(i n / out) .. ceil((i + 1) n / out) - 1, at most ceil(n / out) + 1
-- of them: each bin is read as that many positions, the ones past its end
-- repeating its last (they change neither the max nor which comes first).
-- The positions are built by the engine, so an output size too large fails
-- as an allocation naming its size, not as a loop in Lua.
local function adaptive_max_dim(t, d, n, out)
    if n == out then return t end
    local L = math.min(n, math.ceil(n / out) + 1)
    local f64 = tensor.like(t, "float64")
    local i = tensor.arange(out, f64):view(out, 1)
    local lo = (i * n / out):floor()
    local last = ((i + 1) * n / out):ceil() - 1
    local pos = (lo + tensor.arange(L, f64):view(1, L)):minimum(last) + 1 -- (from 1)
    local x = t:movedim(d, -1)
    local shape = x:shape()
    local picked = x:index_select(-1, pos:reshape(out * L):to("int64"))
    shape[#shape], shape[#shape + 1] = out, L
    return picked:view(shape):max(-1):movedim(-1, d)
end

-- adaptive_max_pool2d(x, size): the max over Torch's size[1] x size[2]
-- bins (as adaptive_avg_pool2d's); adaptive_max_pool1d(x, size) over N×C×L.
local function adaptive_max_pool2d(fname, x, size)
    check_tensor(fname, "input", x)
    local xb, unbatched = batched(fname, x)
    local H, W = xb:size(3), xb:size(4)
    local oh, ow = unpack(adaptive_size(fname, size, {H, W}))
    if H < 1 or W < 1 then fail(fmt("%s: input %s has an empty plane", fname, shape_str(x))) end
    local y = adaptive_max_dim(adaptive_max_dim(xb, 3, H, oh), 4, W, ow)
    return unbatched and y:squeeze(1) or y
end
local function adaptive_max_pool1d(fname, x, size)
    local x4, unbatched = as_2d(fname, x)
    local L = x4:size(4)
    local out = adaptive_size(fname, size, {L})
    if L < 1 then fail(fmt("%s: input %s is empty", fname, shape_str(x))) end
    return back_to_1d(adaptive_max_dim(x4, 4, L, out[1]), unbatched)
end
-- (an output size too large fails as the allocation of its bins, named
-- after the op: "adaptive_max_pool1d: arange: out of memory ...")
function M.adaptive_avg_pool2d(x, size, who)
    local fname = type(who) == "string" and who or "adaptive_avg_pool2d"
    return own_errors(fname, pcall(adaptive_avg_pool2d, fname, x, size))
end
function M.adaptive_avg_pool1d(x, size, who)
    local fname = type(who) == "string" and who or "adaptive_avg_pool1d"
    return own_errors(fname, pcall(adaptive_avg_pool1d, fname, x, size))
end
function M.adaptive_max_pool2d(x, size, who)
    local fname = type(who) == "string" and who or "adaptive_max_pool2d"
    return own_errors(fname, pcall(adaptive_max_pool2d, fname, x, size))
end
function M.adaptive_max_pool1d(x, size, who)
    local fname = type(who) == "string" and who or "adaptive_max_pool1d"
    return own_errors(fname, pcall(adaptive_max_pool1d, fname, x, size))
end

-- ---------------------------------------------------------------- batch_norm

-- The per-channel sum of t viewed as N × C × S, kept as 1 × C × 1.
local function chan_sum(t3) return t3:sum(3, true):sum(1, true) end

-- batch_norm's and instance_norm's per-channel tensors: each given one is
-- a 1-D tensor of Cc elements of x's dtype; the running stats come in pairs.
local function check_channel_stats(fname, x, Cc, running_mean, running_var, weight, bias)
    for _, e in ipairs({{"running_mean", running_mean}, {"running_var", running_var}, {"weight", weight},
                        {"bias", bias}}) do
        local t = e[2]
        if t ~= nil then
            check_tensor(fname, e[1], t)
            if t:dim() ~= 1 or t:size(1) ~= Cc then
                fail(fmt("%s: %s must have shape %d (one per channel of input %s), got %s", fname, e[1], Cc,
                         shape_str(x), shape_str(t)))
            end
            check_same_dtype(fname, x, e[1], t)
        end
    end
    if (running_mean == nil) ~= (running_var == nil) then
        fail(fname .. ": give both running_mean and running_var, or neither")
    end
end

-- batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps)
-- x: N×C, N×C×L or N×C×H×W; statistics per channel (dim 2) over every other
-- dim.  training: normalise with the batch's mean and biased variance and,
-- when the running buffers are given, update them in place:
--   running = (1 - momentum) · running + momentum · batch stat
-- (the unbiased variance there, as Torch).  Otherwise normalise with the
-- running statistics.  weight/bias (C) may be nil.
function M.batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps, who)
    local fname = type(who) == "string" and who or "batch_norm"
    check_tensor(fname, "input", x)
    check_devices(fname, x, running_mean, running_var)
    check_devices(fname, x, weight, bias)
    if training ~= nil and type(training) ~= "boolean" then
        fail(fmt("%s: training must be a boolean, got %s", fname, typename(training)))
    end
    momentum = momentum == nil and 0.1 or momentum
    eps = eps == nil and 1e-5 or eps
    if type(momentum) ~= "number" or not (momentum >= 0 and momentum <= 1) then -- (NaN too)
        fail(fmt("%s: momentum must be a number in [0, 1], got %s", fname, tostring(momentum)))
    end
    if type(eps) ~= "number" or not (eps >= 0) then
        fail(fmt("%s: eps must be a non-negative number, got %s", fname, tostring(eps)))
    end
    local dt = x:dtype()
    if not FLOATS[dt] then fail(fmt("%s: input must be float32 or float64, got %s", fname, dt)) end
    local xs = shape_of(x)
    if #xs < 2 or #xs > 4 then
        fail(fmt("%s: expected an input of shape N×C, N×C×L or N×C×H×W, got %s", fname, shape_str(x)))
    end
    local N, Cc = xs[1], xs[2]
    local S = 1
    for i = 3, #xs do S = S * xs[i] end
    local Mn = N * S
    check_channel_stats(fname, x, Cc, running_mean, running_var, weight, bias)
    local use_batch = training or running_mean == nil
    if Mn == 0 then -- an empty batch (Torch's): empty out, the statistics left alone
        local bs = {1, Cc}
        for i = 3, #xs do bs[i] = 1 end
        local y = x:clone()
        if weight ~= nil then y = y * weight:view(bs) end
        if bias ~= nil then y = y + bias:view(bs) end
        return y
    end
    if use_batch and Mn <= 1 then
        fail(fmt("%s: expected more than 1 value per channel when training, got input of shape %s", fname,
                 shape_str(x)))
    end

    -- d: x less the mean (the batch's, or the running one), N × C × S; per
    -- channel (1 × C × 1): invstd, scale = weight · invstd, and dm, the
    -- error of the batch mean (below; nil with the running stats): the
    -- normalised x is xhat = (d - dm) · invstd, never made (the output is
    -- d · scale + a shift, the backward's sums are over g · d)
    local y, d, invstd, scale, dm
    no_grad(function()
        local x3 = x:reshape(N, Cc, S)
        if use_batch then
            local mean = chan_sum(x3) / Mn
            d = x3 - mean
            -- The rounding of the mean corrected (as Tensor:var): a float32 mean can be off by
            -- half a unit (1e7 and 1e7 + 1 alternating: the mean 1e7 + 0.5 is no float32), and
            -- d about it alone gave the variance 0.5, not 0.25, and the output 0 and 2, not -1
            -- and 1.  d's own mean dm is that error: sum (d - dm)^2 = sum d^2 - dm sum d.
            local sd = chan_sum(d)
            dm = sd / Mn
            local var = ((chan_sum(d * d) - sd * dm) / Mn):clamp(0) -- (rounding could give < 0)
            invstd = (var + eps):pow(-0.5)
            if training and running_mean ~= nil then
                local m = momentum
                running_mean:mul_(1 - m):add_((mean + dm):view(Cc) * m)
                running_var:mul_(1 - m):add_(var:view(Cc) * (m * Mn / (Mn - 1)))
            end
        else
            d = x3 - running_mean:view(1, Cc, 1)
            invstd = (running_var:view(1, Cc, 1) + eps):pow(-0.5)
        end
        scale = weight ~= nil and weight:view(1, Cc, 1) * invstd or invstd
        -- y = (d - dm) · scale + bias, the shift per channel
        local shift = dm ~= nil and -(dm * scale) or nil
        if bias ~= nil then shift = shift ~= nil and shift + bias:view(1, Cc, 1) or bias:view(1, Cc, 1) end
        y = d * scale
        if shift ~= nil then y:add_(shift) end
        y = y:view(xs)
    end)

    record("batch_norm", y, {x, weight, bias, n = 3}, function(g)
        local g3 = g:reshape(N, Cc, S)
        local gx, gw, gb
        local need_gw = (weight ~= nil and weight._rg) or (x._rg and use_batch)
        -- (sg: also for the weight's with the batch statistics, through dm)
        local need_gb = (bias ~= nil and bias._rg) or (x._rg and use_batch) or (need_gw and dm ~= nil)
        local sg = need_gb and chan_sum(g3) or nil
        local sgx -- the sum of g · xhat
        if need_gw then
            sgx = chan_sum(g3 * d)
            if dm ~= nil then sgx = sgx - dm * sg end
            sgx = sgx * invstd
        end
        if x._rg then
            if use_batch then
                -- d/dx of (x - mean) · invstd through the batch statistics:
                -- (g - sg / Mn - xhat · sgx / Mn) · scale, xhat = (d - dm) · invstd
                local k = sgx * invstd * scale / Mn
                gx = g3 * scale
                gx:sub_(d * k)
                gx:add_((dm * k - sg * scale / Mn))
            else
                gx = g3 * scale
            end
            gx = gx:view(xs)
        end
        if weight ~= nil and weight._rg then gw = sgx:view(Cc) end
        if bias ~= nil and bias._rg then gb = sg:view(Cc) end
        return gx, gw, gb
    end, {weight})
    return y
end

-- ---------------------------------------------------------------- instance_norm

-- instance_norm(x [, running_mean, running_var, weight, bias,
-- use_input_stats = true, momentum = 0.1, eps = 1e-5]) (Torch's F.instance_norm):
-- x N×C×… with each channel of each sample normalised over its positions
-- (the biased variance), then scaled and shifted per channel.  With
-- use_input_stats and running buffers (C each), these are updated in place
-- with the samples' average statistics (unbiased variance); without
-- use_input_stats they normalise instead.  who: the name errors carry.
function M.instance_norm(x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps, who)
    local fname = type(who) == "string" and who or "instance_norm"
    check_tensor(fname, "input", x)
    check_devices(fname, x, running_mean, running_var)
    check_devices(fname, x, weight, bias)
    if use_input_stats == nil then use_input_stats = true end
    if type(use_input_stats) ~= "boolean" then
        fail(fmt("%s: use_input_stats must be a boolean, got %s", fname, typename(use_input_stats)))
    end
    local xs = shape_of(x)
    if #xs < 3 then fail(fmt("%s: expected an input of shape N×C×L or N×C×H×W..., got %s", fname, shape_str(x))) end
    local N, Cc = xs[1], xs[2]
    check_channel_stats(fname, x, Cc, running_mean, running_var, weight, bias)
    if not use_input_stats and running_mean == nil then
        fail(fname .. ": use_input_stats = false needs running_mean and running_var")
    end
    local S = 1
    for i = 3, #xs do S = S * xs[i] end
    if use_input_stats and S <= 1 and N * Cc > 0 then
        fail(fmt("%s: expected more than 1 position per channel to normalise over, got input of shape %s", fname,
                 shape_str(x)))
    end
    -- batch_norm over one sample of N·C channels
    local rm, rv
    if running_mean ~= nil then
        no_grad(function()
            rm = running_mean:view(1, Cc):expand(N, Cc):contiguous():view(N * Cc)
            rv = running_var:view(1, Cc):expand(N, Cc):contiguous():view(N * Cc)
        end)
    end
    local y = M.batch_norm(x:reshape(1, N * Cc, S), rm, rv, nil, nil, use_input_stats, momentum, eps)
    if running_mean ~= nil and use_input_stats and N > 0 then
        no_grad(function()
            running_mean:copy_(rm:view(N, Cc):mean(1))
            running_var:copy_(rv:view(N, Cc):mean(1))
        end)
    end
    local bs = {1, Cc}
    for i = 3, #xs do bs[i] = 1 end
    y = y:view(xs)
    if weight ~= nil then y = y * weight:view(bs) end
    if bias ~= nil then y = y + bias:view(bs) end
    return y
end

-- ---------------------------------------------------------------- modules

-- install(nn): nn.functional gets conv2d, max_pool2d, batch_norm; nn gets
-- the modules.  Called by ordo.nn once its Module class exists.
function M.install(nn)
    local F = nn.functional
    F.conv2d, F.max_pool2d, F.batch_norm = M.conv2d, M.max_pool2d, M.batch_norm
    F.avg_pool2d, F.adaptive_avg_pool2d = M.avg_pool2d, M.adaptive_avg_pool2d
    F.conv1d, F.max_pool1d, F.avg_pool1d = M.conv1d, M.max_pool1d, M.avg_pool1d
    F.conv_transpose2d, F.conv_transpose1d = M.conv_transpose2d, M.conv_transpose1d
    F.max_unpool2d, F.max_unpool1d = M.max_unpool2d, M.max_unpool1d
    F.instance_norm = M.instance_norm
    F.unfold, F.fold = M.unfold, M.fold
    F.adaptive_avg_pool1d, F.adaptive_max_pool2d, F.adaptive_max_pool1d = M.adaptive_avg_pool1d,
        M.adaptive_max_pool2d, M.adaptive_max_pool1d
    local Module, init = nn.Module, nn.init

    local check_count = util.check_positive_int

    -- A convolution's weight (wshape) and bias (cout, unless opts.bias is
    -- false), drawn as Torch draws them: kaiming_uniform with a = sqrt 5,
    -- U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for the bias.
    local function conv_parameters(self, wshape, cout, fan_in, opts)
        flag(self._class_name or "conv", opts, "bias")
        local topts = util.param_opts(opts, self)
        local w = tensor.empty(wshape, topts)
        init.kaiming_uniform_(w, sqrt(5))
        self:register_parameter("weight", w)
        if opts.bias ~= false then
            local bound = 1 / sqrt(fan_in)
            self:register_parameter("bias", init.uniform_(tensor.empty({cout}, topts), -bound, bound))
        end
    end

    -- ", what AxB" for a pair option that is not {default, default}
    local function pair_repr(what, v, default)
        if v[1] == default and v[2] == default then return "" end
        return fmt(", %s %dx%d", what, v[1], v[2])
    end

    -- Conv2d(in_channels, out_channels, kernel_size [, {stride=1, padding=0,
    -- dilation=1, groups=1, bias=true, dtype="float32", device=}]); weight
    -- out × in/groups × kh × kw and bias drawn like Torch: U(-1/sqrt(fan_in),
    -- 1/sqrt(fan_in)), fan_in = (C/groups)·kh·kw
    -- (kaiming_uniform with a = sqrt 5), from the engine RNG.
    local Conv2d = Module:extend("Conv2d")
    nn.Conv2d = Conv2d
    local CONV2D_OPTS = {stride = true, padding = true, dilation = true, groups = true, bias = true, dtype = true,
                         device = true, padding_mode = true}

    -- padding_mode (Torch's): "zeros" (the default, the convolution's own
    -- padding) or reflect / replicate / circular, which F.pad applies
    -- before a convolution without padding.
    local PADDING_MODES_OF = {zeros = true, reflect = true, replicate = true, circular = true}
    local function padding_mode_of(name, opts)
        local m = opts.padding_mode
        if m == nil then return "zeros" end
        if not PADDING_MODES_OF[m] then
            fail(fmt("%s: padding_mode must be \"zeros\", \"reflect\", \"replicate\" or \"circular\", got %s",
                     name, type(m) == "string" and '"' .. m .. '"' or typename(m)))
        end
        return m
    end
    -- x padded as padding_mode says: pads[i] = {lo, hi} for spatial dim i
    -- (k: the kernel sizes, dil: the dilations, for "same").
    local function mode_padded(name, x, mode, padding, k, dil)
        check_tensor(name, "input", x)
        local nsp = #k
        if x:dim() ~= nsp + 1 and x:dim() ~= nsp + 2 then return x end -- the conv names the wrong rank
        local lo, hi = {}, {}
        for i = 1, nsp do
            if padding == "valid" then
                lo[i], hi[i] = 0, 0
            elseif padding == "same" then
                local total = dil[i] * (k[i] - 1)
                lo[i] = floor(total / 2)
                hi[i] = total - lo[i]
            else
                lo[i], hi[i] = padding[i], padding[i]
            end
        end
        local amounts = {} -- F.pad's order: the last dim first
        local off = x:dim() - nsp
        for i = nsp, 1, -1 do
            local n = x:size(off + i)
            if mode == "reflect" and (lo[i] >= n or hi[i] >= n) or mode == "circular" and (lo[i] > n or hi[i] > n) then
                fail(fmt("%s: padding_mode %s needs padding %d %s the input's size %d in dim %d (input %s)", name,
                         mode, math.max(lo[i], hi[i]), mode == "reflect" and "smaller than" or "at most", n, off + i,
                         shape_str(x)))
            end
            amounts[#amounts + 1] = lo[i]
            amounts[#amounts + 1] = hi[i]
        end
        return require("ordo.nn.functional").pad(x, amounts, {mode = mode})
    end

    -- The groups option of a module, checked against its channels.
    local function module_groups(name, opts, cin, cout)
        local g = opts.groups or 1
        check_count(name, "groups", g)
        if cin % g ~= 0 or cout % g ~= 0 then
            fail(fmt("%s: in_channels %d and out_channels %d must both be divisible by groups %d", name, cin, cout, g))
        end
        return g
    end
    function Conv2d:init(cin, cout, k, opts)
        check_count("Conv2d", "in_channels", cin)
        check_count("Conv2d", "out_channels", cout)
        opts = opts_of("Conv2d", opts, CONV2D_OPTS)
        local kh, kw = pair("Conv2d", "kernel_size", k)
        self.in_channels, self.out_channels, self.kernel_size = cin, cout, {kh, kw}
        self.stride = {pair("Conv2d", "stride", opts.stride or 1)}
        if type(opts.padding) == "string" then -- "same" or "valid"
            check_padding_mode("Conv2d", opts.padding, self.stride)
            self.padding = opts.padding
        else
            self.padding = {pair("Conv2d", "padding", opts.padding or 0, true)}
        end
        self.dilation = {pair("Conv2d", "dilation", opts.dilation or 1)}
        local g = module_groups("Conv2d", opts, cin, cout)
        self.groups = g
        self.padding_mode = padding_mode_of("Conv2d", opts)
        conv_parameters(self, {cout, cin / g, kh, kw}, cout, cin / g * kh * kw, opts)
    end
    function Conv2d:forward(x)
        local padding = self.padding
        if self.padding_mode ~= "zeros" then
            x = mode_padded("Conv2d", x, self.padding_mode, padding, self.kernel_size, self.dilation)
            padding = 0
        end
        return M.conv2d(x, self.weight, self.bias,
                        {stride = self.stride, padding = padding, dilation = self.dilation, groups = self.groups},
                        "Conv2d")
    end
    function Conv2d:extra_repr()
        return fmt("%d -> %d, kernel %dx%d", self.in_channels, self.out_channels, self.kernel_size[1],
                   self.kernel_size[2]) .. pair_repr("stride", self.stride, 1)
            .. (type(self.padding) == "string" and ", padding " .. self.padding or pair_repr("padding", self.padding, 0))
            .. pair_repr("dilation", self.dilation, 1) .. (self.groups ~= 1 and fmt(", groups %d", self.groups) or "")
            .. (self.padding_mode ~= "zeros" and ", padding_mode " .. self.padding_mode or "")
            .. (self.bias and "" or ", no bias")
    end

    -- ConvTranspose2d(in_channels, out_channels, kernel_size [, {stride=1,
    -- padding=0, output_padding=0, dilation=1, groups=1, bias=true, dtype,
    -- device}]): weight in_channels × out_channels/groups × kh × kw, drawn
    -- as Torch draws it (fan_in = (out_channels/groups)·kh·kw, the weight's
    -- dim 2 on).
    local ConvTranspose2d = Module:extend("ConvTranspose2d")
    nn.ConvTranspose2d = ConvTranspose2d
    local TCONV2D_OPTS = {stride = true, padding = true, output_padding = true, dilation = true, groups = true,
                          bias = true, dtype = true, device = true}
    function ConvTranspose2d:init(cin, cout, k, opts)
        local name = "ConvTranspose2d"
        check_count(name, "in_channels", cin)
        check_count(name, "out_channels", cout)
        opts = opts_of(name, opts, TCONV2D_OPTS)
        local kh, kw = pair(name, "kernel_size", k)
        self.in_channels, self.out_channels, self.kernel_size = cin, cout, {kh, kw}
        self.stride = {pair(name, "stride", opts.stride or 1)}
        self.padding = {pair(name, "padding", opts.padding or 0, true)}
        self.output_padding = {pair(name, "output_padding", opts.output_padding or 0, true)}
        self.dilation = {pair(name, "dilation", opts.dilation or 1)}
        check_output_padding(name, self.output_padding, self.stride, self.dilation)
        local g = module_groups(name, opts, cin, cout)
        self.groups = g
        conv_parameters(self, {cin, cout / g, kh, kw}, cout, cout / g * kh * kw, opts)
    end
    -- The output_padding that makes a transposed convolution's output
    -- output_size (Torch's forward(x, output_size): {h, w} or a whole
    -- shape, its last nsp taken), checked.
    local function output_padding_for(name, x, size, nsp, k, st, pad, dil)
        if type(size) ~= "table" or #size < nsp then
            fail(fmt("%s: output_size must be a table of %d sizes (or the whole shape), got %s", name, nsp,
                     type(size) == "table" and "a table of " .. #size or typename(size)))
        end
        check_tensor(name, "input", x)
        if x:dim() < nsp + 1 then return nil end -- the op names the wrong rank
        local op = {}
        for i = 1, nsp do
            local n = x:size(x:dim() - nsp + i)
            local base = (n - 1) * st[i] - 2 * pad[i] + dil[i] * (k[i] - 1) + 1
            local want = size[#size - nsp + i]
            local hi = base + math.max(st[i], dil[i]) - 1
            if not is_int(want) or want < base or want > hi then
                fail(fmt("%s: output_size %s is not reachable from input %s: spatial dim %d can be %d..%d", name,
                         tostring(want), shape_str(x), i, base, hi))
            end
            op[i] = want - base
        end
        return op
    end
    function ConvTranspose2d:forward(x, output_size)
        local op = self.output_padding
        if output_size ~= nil then
            op = output_padding_for("ConvTranspose2d", x, output_size, 2, self.kernel_size, self.stride, self.padding,
                                    self.dilation) or op
        end
        return M.conv_transpose2d(x, self.weight, self.bias, {stride = self.stride, padding = self.padding,
                                  output_padding = op, dilation = self.dilation, groups = self.groups},
                                  "ConvTranspose2d")
    end
    function ConvTranspose2d:extra_repr()
        return fmt("%d -> %d, kernel %dx%d", self.in_channels, self.out_channels, self.kernel_size[1],
                   self.kernel_size[2]) .. pair_repr("stride", self.stride, 1) .. pair_repr("padding", self.padding, 0)
            .. pair_repr("output_padding", self.output_padding, 0) .. pair_repr("dilation", self.dilation, 1)
            .. (self.groups ~= 1 and fmt(", groups %d", self.groups) or "") .. (self.bias and "" or ", no bias")
    end

    -- ConvTranspose1d(in_channels, out_channels, kernel_size [, {stride=1,
    -- padding=0, output_padding=0, dilation=1, groups=1, bias=true, dtype,
    -- device}]): weight in_channels × out_channels/groups × k, drawn as
    -- ConvTranspose2d's.
    local ConvTranspose1d = Module:extend("ConvTranspose1d")
    nn.ConvTranspose1d = ConvTranspose1d
    function ConvTranspose1d:init(cin, cout, k, opts)
        local name = "ConvTranspose1d"
        check_count(name, "in_channels", cin)
        check_count(name, "out_channels", cout)
        opts = opts_of(name, opts, TCONV2D_OPTS)
        self.in_channels, self.out_channels = cin, cout
        self.kernel_size = single(name, "kernel_size", k)
        self.stride = single(name, "stride", opts.stride or 1)
        self.padding = single(name, "padding", opts.padding or 0, true)
        self.output_padding = single(name, "output_padding", opts.output_padding or 0, true)
        self.dilation = single(name, "dilation", opts.dilation or 1)
        check_output_padding(name, {self.output_padding}, {self.stride}, {self.dilation})
        local g = module_groups(name, opts, cin, cout)
        self.groups = g
        conv_parameters(self, {cin, cout / g, k}, cout, cout / g * k, opts)
    end
    function ConvTranspose1d:forward(x, output_size)
        local op = self.output_padding
        if output_size ~= nil then
            local o = output_padding_for("ConvTranspose1d", x, output_size, 1, {self.kernel_size}, {self.stride},
                                         {self.padding}, {self.dilation})
            if o then op = o[1] end
        end
        return M.conv_transpose1d(x, self.weight, self.bias, {stride = self.stride, padding = self.padding,
                                  output_padding = op, dilation = self.dilation, groups = self.groups},
                                  "ConvTranspose1d")
    end
    function ConvTranspose1d:extra_repr()
        local s = fmt("%d -> %d, kernel %d", self.in_channels, self.out_channels, self.kernel_size)
        if self.stride ~= 1 then s = s .. fmt(", stride %d", self.stride) end
        if self.padding ~= 0 then s = s .. fmt(", padding %d", self.padding) end
        if self.output_padding ~= 0 then s = s .. fmt(", output_padding %d", self.output_padding) end
        if self.dilation ~= 1 then s = s .. fmt(", dilation %d", self.dilation) end
        if self.groups ~= 1 then s = s .. fmt(", groups %d", self.groups) end
        return s .. (self.bias and "" or ", no bias")
    end

    -- Conv1d(in_channels, out_channels, kernel_size [, {stride=1, padding=0,
    -- dilation=1, groups=1, bias=true, dtype="float32", device=}]), drawn as
    -- Conv2d (fan_in = (C/groups)·k).
    local Conv1d = Module:extend("Conv1d")
    nn.Conv1d = Conv1d
    function Conv1d:init(cin, cout, k, opts)
        check_count("Conv1d", "in_channels", cin)
        check_count("Conv1d", "out_channels", cout)
        opts = opts_of("Conv1d", opts, CONV2D_OPTS)
        self.in_channels, self.out_channels = cin, cout
        self.kernel_size = single("Conv1d", "kernel_size", k)
        self.stride = single("Conv1d", "stride", opts.stride or 1)
        if type(opts.padding) == "string" then -- "same" or "valid"
            check_padding_mode("Conv1d", opts.padding, self.stride)
            self.padding = opts.padding
        else
            self.padding = single("Conv1d", "padding", opts.padding or 0, true)
        end
        self.dilation = single("Conv1d", "dilation", opts.dilation or 1)
        local g = module_groups("Conv1d", opts, cin, cout)
        self.groups = g
        self.padding_mode = padding_mode_of("Conv1d", opts)
        conv_parameters(self, {cout, cin / g, k}, cout, cin / g * k, opts)
    end
    function Conv1d:forward(x)
        local padding = self.padding
        if self.padding_mode ~= "zeros" then
            x = mode_padded("Conv1d", x, self.padding_mode, type(padding) == "string" and padding or {padding},
                            {self.kernel_size}, {self.dilation})
            padding = 0
        end
        return M.conv1d(x, self.weight, self.bias, {stride = self.stride, padding = padding,
                        dilation = self.dilation, groups = self.groups}, "Conv1d")
    end
    function Conv1d:extra_repr()
        local s = fmt("%d -> %d, kernel %d", self.in_channels, self.out_channels, self.kernel_size)
        if self.stride ~= 1 then s = s .. fmt(", stride %d", self.stride) end
        if self.padding ~= 0 then s = s .. ", padding " .. tostring(self.padding) end
        if self.dilation ~= 1 then s = s .. fmt(", dilation %d", self.dilation) end
        if self.groups ~= 1 then s = s .. fmt(", groups %d", self.groups) end
        if self.padding_mode ~= "zeros" then s = s .. ", padding_mode " .. self.padding_mode end
        return s .. (self.bias and "" or ", no bias")
    end

    -- MaxPool1d(kernel_size [, {stride=kernel_size, padding=0, dilation=1,
    -- ceil_mode=false, return_indices=false}]) / AvgPool1d(kernel_size [,
    -- {stride=kernel_size, padding=0, count_include_pad=true}])
    local function pool1d_class(name, f, allowed)
        local cls = Module:extend(name)
        nn[name] = cls
        function cls:init(k, opts)
            opts = opts_of(name, opts, allowed)
            self.kernel_size = single(name, "kernel_size", k)
            self.stride = opts.stride == nil and self.kernel_size or single(name, "stride", opts.stride)
            self.padding = single(name, "padding", opts.padding or 0, true)
            if 2 * self.padding > self.kernel_size then
                fail(fmt("%s: padding %d must be at most half the kernel %d", name, self.padding, self.kernel_size))
            end
            if allowed.count_include_pad then self.count_include_pad = count_pad(name, opts) end
            self.ceil_mode = ceil_mode_of(name, opts)
            if allowed.dilation then
                self.dilation = opts.dilation == nil and 1 or single(name, "dilation", opts.dilation)
                self.return_indices = flag(name, opts, "return_indices") or nil
            end
        end
        function cls:forward(x)
            return f(x, self.kernel_size, {stride = self.stride, padding = self.padding,
                                           count_include_pad = self.count_include_pad, dilation = self.dilation,
                                           ceil_mode = self.ceil_mode, return_indices = self.return_indices}, name)
        end
        function cls:extra_repr()
            local s = fmt("kernel %d, stride %d", self.kernel_size, self.stride)
            if self.padding ~= 0 then s = s .. fmt(", padding %d", self.padding) end
            if self.dilation and self.dilation ~= 1 then s = s .. fmt(", dilation %d", self.dilation) end
            if self.count_include_pad == false then s = s .. ", count_include_pad = false" end
            return self.ceil_mode and s .. ", ceil_mode" or s
        end
    end
    pool1d_class("MaxPool1d", M.max_pool1d, POOL_OPTS)
    pool1d_class("AvgPool1d", M.avg_pool1d, AVGPOOL1D_OPTS)

    -- MaxPool2d(kernel_size [, {stride=kernel_size, padding=0, dilation=1,
    -- ceil_mode=false, return_indices=false}])
    local MaxPool2d = Module:extend("MaxPool2d")
    nn.MaxPool2d = MaxPool2d
    function MaxPool2d:init(k, opts)
        opts = opts_of("MaxPool2d", opts, POOL_OPTS)
        self.kernel_size = {pair("MaxPool2d", "kernel_size", k)}
        self.stride = opts.stride and {pair("MaxPool2d", "stride", opts.stride)} or self.kernel_size
        self.padding = {pair("MaxPool2d", "padding", opts.padding or 0, true)}
        if 2 * self.padding[1] > self.kernel_size[1] or 2 * self.padding[2] > self.kernel_size[2] then
            fail(fmt("MaxPool2d: padding %dx%d must be at most half the kernel %dx%d", self.padding[1],
                     self.padding[2], self.kernel_size[1], self.kernel_size[2]))
        end
        self.dilation = opts.dilation and {pair("MaxPool2d", "dilation", opts.dilation)} or {1, 1}
        self.ceil_mode = ceil_mode_of("MaxPool2d", opts)
        self.return_indices = flag("MaxPool2d", opts, "return_indices") or nil
    end
    function MaxPool2d:forward(x)
        return M.max_pool2d(x, self.kernel_size, {stride = self.stride, padding = self.padding,
                                                  dilation = self.dilation, ceil_mode = self.ceil_mode,
                                                  return_indices = self.return_indices}, "MaxPool2d")
    end

    -- Unfold(kernel_size [, {dilation, padding, stride}]) and
    -- Fold(output_size, kernel_size [, {...}]): F.unfold / F.fold as modules.
    local function unfold_options(name, opts)
        opts = opts_of(name, opts, UNFOLD_OPTS)
        pair(name, "stride", opts.stride or 1)
        pair(name, "padding", opts.padding or 0, true)
        pair(name, "dilation", opts.dilation or 1)
        return opts
    end
    -- ", stride 2x2, padding 1x1, dilation 2x2": those not the defaults (they
    -- were not printed: Fold(..., {stride = 2}) printed as the stride-1 one)
    local function unfold_repr(name, opts)
        local s = ""
        for _, c in ipairs({{"stride", 1}, {"padding", 0}, {"dilation", 1}}) do
            local a, b = pair(name, c[1], opts[c[1]] or c[2], c[1] == "padding")
            if a ~= c[2] or b ~= c[2] then s = s .. fmt(", %s %dx%d", c[1], a, b) end
        end
        return s
    end
    local Unfold = Module:extend("Unfold")
    nn.Unfold = Unfold
    function Unfold:init(k, opts)
        self.kernel_size = {pair("Unfold", "kernel_size", k)}
        self.options = unfold_options("Unfold", opts)
    end
    function Unfold:forward(x) return M.unfold(x, self.kernel_size, self.options, "Unfold") end
    function Unfold:extra_repr()
        return fmt("kernel %dx%d", self.kernel_size[1], self.kernel_size[2]) .. unfold_repr("Unfold", self.options)
    end
    local Fold = Module:extend("Fold")
    nn.Fold = Fold
    function Fold:init(size, k, opts)
        self.output_size = {pair("Fold", "output_size", size)}
        self.kernel_size = {pair("Fold", "kernel_size", k)}
        self.options = unfold_options("Fold", opts)
    end
    function Fold:forward(x) return M.fold(x, self.output_size, self.kernel_size, self.options, "Fold") end
    function Fold:extra_repr()
        return fmt("output %dx%d, kernel %dx%d", self.output_size[1], self.output_size[2], self.kernel_size[1],
                   self.kernel_size[2]) .. unfold_repr("Fold", self.options)
    end

    -- MaxUnpool2d(kernel_size [, {stride=kernel_size, padding=0}]) /
    -- MaxUnpool1d: forward(x, indices [, output_size]), max_unpool's.
    local function unpool_class(name, f, nsp)
        local cls = Module:extend(name)
        nn[name] = cls
        function cls:init(k, opts)
            opts = opts_of(name, opts, {stride = true, padding = true})
            if nsp == 2 then
                self.kernel_size = {pair(name, "kernel_size", k)}
                self.stride = opts.stride and {pair(name, "stride", opts.stride)} or self.kernel_size
                self.padding = {pair(name, "padding", opts.padding or 0, true)}
            else
                self.kernel_size = single(name, "kernel_size", k)
                self.stride = opts.stride and single(name, "stride", opts.stride) or self.kernel_size
                self.padding = single(name, "padding", opts.padding or 0, true)
            end
        end
        function cls:forward(x, indices, output_size)
            return f(x, indices, self.kernel_size, {stride = self.stride, padding = self.padding,
                                                    output_size = output_size})
        end
        function cls:extra_repr()
            if nsp == 1 then return fmt("kernel %d, stride %d, padding %d", self.kernel_size, self.stride, self.padding) end
            return fmt("kernel %dx%d, stride %dx%d, padding %dx%d", self.kernel_size[1], self.kernel_size[2],
                       self.stride[1], self.stride[2], self.padding[1], self.padding[2])
        end
    end
    unpool_class("MaxUnpool2d", M.max_unpool2d, 2)
    unpool_class("MaxUnpool1d", M.max_unpool1d, 1)

    -- AvgPool2d(kernel_size [, {stride=kernel_size, padding=0, ceil_mode=false,
    -- count_include_pad=true, divisor_override}])
    local AvgPool2d = Module:extend("AvgPool2d")
    nn.AvgPool2d = AvgPool2d
    function AvgPool2d:init(k, opts)
        opts = opts_of("AvgPool2d", opts, AVGPOOL_OPTS)
        self.kernel_size = {pair("AvgPool2d", "kernel_size", k)}
        self.stride = opts.stride and {pair("AvgPool2d", "stride", opts.stride)} or self.kernel_size
        self.padding = {pair("AvgPool2d", "padding", opts.padding or 0, true)}
        if 2 * self.padding[1] > self.kernel_size[1] or 2 * self.padding[2] > self.kernel_size[2] then
            fail(fmt("AvgPool2d: padding %dx%d must be at most half the kernel %dx%d", self.padding[1],
                     self.padding[2], self.kernel_size[1], self.kernel_size[2]))
        end
        self.ceil_mode = ceil_mode_of("AvgPool2d", opts)
        self.count_include_pad = count_pad("AvgPool2d", opts)
        self.divisor_override = divisor_of("AvgPool2d", opts)
    end
    function AvgPool2d:forward(x)
        return M.avg_pool2d(x, self.kernel_size, {stride = self.stride, padding = self.padding,
                                                  ceil_mode = self.ceil_mode,
                                                  count_include_pad = self.count_include_pad,
                                                  divisor_override = self.divisor_override}, "AvgPool2d")
    end
    function AvgPool2d:extra_repr()
        local s = fmt("kernel %dx%d, stride %dx%d", self.kernel_size[1], self.kernel_size[2], self.stride[1],
                      self.stride[2])
        if self.padding[1] ~= 0 or self.padding[2] ~= 0 then
            s = s .. fmt(", padding %dx%d", self.padding[1], self.padding[2])
        end
        if self.count_include_pad == false then s = s .. ", count_include_pad = false" end
        if self.divisor_override then s = s .. fmt(", divisor_override %d", self.divisor_override) end
        return self.ceil_mode and s .. ", ceil_mode" or s
    end

    -- AdaptiveAvgPool2d(output_size) (1: global average pooling),
    -- AdaptiveMaxPool2d, AdaptiveAvgPool1d, AdaptiveMaxPool1d: an integer
    -- or one entry per spatial dim, false keeping that dim (Torch's None).
    local function adaptive_class(name, f, nsp)
        local cls = Module:extend(name)
        nn[name] = cls
        function cls:init(size)
            local probe = {}
            for i = 1, nsp do probe[i] = 1 end
            adaptive_size(name, size, probe) -- checked now, resolved against each input
            if type(size) == "table" then
                local s = {}
                for i = 1, nsp do s[i] = size[i] end
                size = s
            end
            self.output_size = size
        end
        function cls:forward(x) return f(x, self.output_size, name) end
        function cls:extra_repr()
            local s = self.output_size
            if type(s) ~= "table" then return tostring(s) end
            local t = {}
            for i = 1, nsp do t[i] = s[i] == false and "None" or tostring(s[i]) end
            return table.concat(t, "x")
        end
        return cls
    end
    adaptive_class("AdaptiveAvgPool2d", M.adaptive_avg_pool2d, 2)
    adaptive_class("AdaptiveMaxPool2d", M.adaptive_max_pool2d, 2)
    adaptive_class("AdaptiveAvgPool1d", M.adaptive_avg_pool1d, 1)
    adaptive_class("AdaptiveMaxPool1d", M.adaptive_max_pool1d, 1)
    function MaxPool2d:extra_repr()
        local s = fmt("kernel %dx%d, stride %dx%d", self.kernel_size[1], self.kernel_size[2], self.stride[1],
                      self.stride[2])
        if self.padding[1] ~= 0 or self.padding[2] ~= 0 then
            s = s .. fmt(", padding %dx%d", self.padding[1], self.padding[2])
        end
        if self.dilation[1] ~= 1 or self.dilation[2] ~= 1 then
            s = s .. fmt(", dilation %dx%d", self.dilation[1], self.dilation[2])
        end
        return self.ceil_mode and s .. ", ceil_mode" or s
    end

    -- BatchNorm1d(n) / BatchNorm2d(n) [, {eps=1e-5, momentum=0.1 (false:
    -- Torch's None, a cumulative average), affine=true,
    -- track_running_stats=true, dtype=, device=}]: weight 1, bias 0,
    -- running_mean 0, running_var 1 and num_batches_tracked 0 (an int64
    -- count of the batches seen in training; buffers, saved with the
    -- parameters, Torch's state).
    local BN_OPTS = {eps = true, momentum = true, affine = true, track_running_stats = true, dtype = true,
                     device = true}
    local function batch_norm_class(name, dims, dims_str)
        local cls = Module:extend(name)
        nn[name] = cls
        function cls:init(n, opts)
            check_count(name, "num_features", n)
            opts = opts_of(name, opts, BN_OPTS)
            self.num_features = n
            self.eps = opts.eps == nil and 1e-5 or opts.eps
            self.momentum = opts.momentum == nil and 0.1 or opts.momentum
            if type(self.eps) ~= "number" or not (self.eps >= 0) then
                fail(fmt("%s: eps must be a non-negative number, got %s", name, tostring(self.eps)))
            end
            -- false: Torch's momentum = None, the cumulative average of the batches' statistics
            if self.momentum ~= false and (type(self.momentum) ~= "number"
                                           or not (self.momentum >= 0 and self.momentum <= 1)) then
                fail(fmt("%s: momentum must be a number in [0, 1] or false (a cumulative average), got %s", name,
                         tostring(self.momentum)))
            end
            flag(name, opts, "affine")
            flag(name, opts, "track_running_stats")
            local topts = util.param_opts(opts, self)
            if opts.affine ~= false then
                self:register_parameter("weight", tensor.ones({n}, topts))
                self:register_parameter("bias", tensor.zeros({n}, topts))
            end
            if opts.track_running_stats ~= false then
                self:register_buffer("running_mean", tensor.zeros({n}, topts))
                self:register_buffer("running_var", tensor.ones({n}, topts))
                self:register_buffer("num_batches_tracked", tensor.zeros({}, {dtype = "int64", device = opts.device}))
            end
        end
        -- a checkpoint of older ordo has no num_batches_tracked: it loads, the count left as it is
        function cls:_optional_state_names() return {num_batches_tracked = true} end
        function cls:forward(x)
            check_tensor(name, "input", x)
            if not dims[x:dim()] then
                fail(fmt("%s: expected a %s input, got shape %s", name, dims_str, shape_str(x)))
            end
            if x:size(2) ~= self.num_features then
                fail(fmt("%s: input of shape %s has %d channels, expected %d", name, shape_str(x), x:size(2),
                         self.num_features))
            end
            local momentum = self.momentum
            local nbt = self.num_batches_tracked
            local counting = self.training and self.running_mean ~= nil and is_tensor(nbt)
            if momentum == false then -- the running statistics average every batch so far equally
                momentum = counting and 1 / (nbt:item() + 1) or 0
            end
            local y = M.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, self.training,
                                   momentum, self.eps, name)
            if counting then nbt:add_(1) end
            return y
        end
        function cls:extra_repr()
            return fmt("%d, eps = %g, momentum = %s%s%s", self.num_features, self.eps,
                       self.momentum == false and "cumulative" or fmt("%g", self.momentum),
                       self.weight == nil and ", no affine" or "", self.running_mean == nil and ", no running stats" or "")
        end
        return cls
    end
    batch_norm_class("BatchNorm1d", {[2] = true, [3] = true}, "2-D (N, C) or 3-D (N, C, L)")
    batch_norm_class("BatchNorm2d", {[4] = true}, "4-D (N, C, H, W)")

    -- InstanceNorm1d(n) / InstanceNorm2d(n) [, {eps=1e-5, momentum=0.1,
    -- affine=false, track_running_stats=false, dtype=, device=}] (Torch's
    -- defaults): each channel of each sample normalised over its positions
    -- (the biased variance).  With track_running_stats, training also
    -- updates running_mean / running_var with the samples' average
    -- statistics (the unbiased variance, as Torch's), which eval then uses.
    -- Input N×C×L (or C×L) / N×C×H×W (or C×H×W).
    local IN_OPTS = {eps = true, momentum = true, affine = true, track_running_stats = true, dtype = true,
                     device = true}
    local function instance_norm_class(name, nsp)
        local cls = Module:extend(name)
        nn[name] = cls
        function cls:init(n, opts)
            check_count(name, "num_features", n)
            opts = opts_of(name, opts, IN_OPTS)
            flag(name, opts, "affine")
            flag(name, opts, "track_running_stats")
            self.num_features = n
            self.eps = opts.eps == nil and 1e-5 or opts.eps
            self.momentum = opts.momentum == nil and 0.1 or opts.momentum
            if type(self.eps) ~= "number" or not (self.eps >= 0) then
                fail(fmt("%s: eps must be a non-negative number, got %s", name, tostring(self.eps)))
            end
            if type(self.momentum) ~= "number" or not (self.momentum >= 0 and self.momentum <= 1) then
                fail(fmt("%s: momentum must be a number in [0, 1], got %s", name, tostring(self.momentum)))
            end
            local topts = util.param_opts(opts, self)
            if opts.affine == true then
                self:register_parameter("weight", tensor.ones({n}, topts))
                self:register_parameter("bias", tensor.zeros({n}, topts))
            end
            if opts.track_running_stats == true then
                self:register_buffer("running_mean", tensor.zeros({n}, topts))
                self:register_buffer("running_var", tensor.ones({n}, topts))
                self:register_buffer("num_batches_tracked", tensor.zeros({}, {dtype = "int64", device = opts.device}))
            end
        end
        function cls:forward(x)
            check_tensor(name, "input", x)
            local nd = x:dim()
            if nd ~= nsp + 1 and nd ~= nsp + 2 then
                fail(fmt("%s: expected a %d-D input %s or a %d-D one %s, got shape %s", name, nsp + 2,
                         nsp == 1 and "(N, C, L)" or "(N, C, H, W)", nsp + 1, nsp == 1 and "(C, L)" or "(C, H, W)",
                         shape_str(x)))
            end
            local xb = nd == nsp + 2 and x or x:unsqueeze(1)
            local Cc = xb:size(2)
            if Cc ~= self.num_features then
                fail(fmt("%s: input of shape %s has %d channels, expected %d", name, shape_str(x), Cc,
                         self.num_features))
            end
            local y = M.instance_norm(xb, self.running_mean, self.running_var, self.weight, self.bias,
                                      self.training or self.running_mean == nil, self.momentum, self.eps, name)
            return nd == nsp + 2 and y or y:squeeze(1)
        end
        function cls:extra_repr()
            return fmt("%d, eps = %g, momentum = %g%s%s", self.num_features, self.eps, self.momentum,
                       self.weight ~= nil and ", affine" or "", self.running_mean ~= nil and ", track_running_stats" or "")
        end
        return cls
    end
    instance_norm_class("InstanceNorm1d", 1)
    instance_norm_class("InstanceNorm2d", 2)
    return nn
end

return M
