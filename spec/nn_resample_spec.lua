-- nn.functional.interpolate and nn.Upsample (lua/ordo/nn/resample.lua):
-- against Torch's published values and a plain-Lua reference that
-- computes each output element from its four (two, one) neighbours, not
-- dim by dim as the implementation does; gradients by gradcheck.
local ordo = require "ordo"
local H = require "support.helpers"
local nn, F = ordo.nn, ordo.nn.functional

local D = {dtype = "float64"}

-- got against want (H.close's order is the other way)
local function close(got, want, tol, where) return H.close(want, got, tol, where) end

-- Where output i (0-based) of a dim of n inputs and out outputs samples
-- the input: index lo, index hi and hi's weight (lo's is 1 - it).
local function source(i, n, out, r, mode, align)
    if mode == "nearest" then
        local k = math.min(math.floor(i * r), n - 1)
        return k, k, 0
    end
    local x
    if align then x = out > 1 and i * (n - 1) / (out - 1) or 0
    else x = math.max((i + 0.5) * r - 0.5, 0) end
    local lo = math.min(math.floor(x), n - 1)
    return lo, math.min(lo + 1, n - 1), x - lo
end

-- x N×C×H×W as nested tables -> the resized N×C×oh×ow
local function ref2d(X, oh, ow, rh, rw, mode, align)
    local Y = {}
    for n = 1, #X do
        Y[n] = {}
        for c = 1, #X[n] do
            local P = X[n][c]
            local H, W = #P, #P[1]
            Y[n][c] = {}
            for i = 0, oh - 1 do
                local y0, y1, ly = source(i, H, oh, rh, mode, align)
                local row = {}
                for j = 0, ow - 1 do
                    local x0, x1, lx = source(j, W, ow, rw, mode, align)
                    row[j + 1] = (1 - ly) * ((1 - lx) * P[y0 + 1][x0 + 1] + lx * P[y0 + 1][x1 + 1]) +
                                 ly * ((1 - lx) * P[y1 + 1][x0 + 1] + lx * P[y1 + 1][x1 + 1])
                end
                Y[n][c][i + 1] = row
            end
        end
    end
    return Y
end

describe("nn.functional.interpolate", function()
    before_each(function() ordo.manual_seed(31) end)

    it("gives Torch's values on a 2x2 image", function()
        local x = ordo.tensor({{{{1, 2}, {3, 4}}}})
        assert.same({{{{1, 1, 2, 2}, {1, 1, 2, 2}, {3, 3, 4, 4}, {3, 3, 4, 4}}}},
                    F.interpolate(x, {scale_factor = 2}):totable())
        close(F.interpolate(x, {scale_factor = 2, mode = "bilinear"}):totable(),
              {{{{1, 1.25, 1.75, 2}, {1.5, 1.75, 2.25, 2.5}, {2.5, 2.75, 3.25, 3.5}, {3, 3.25, 3.75, 4}}}}, 1e-6)
        close(F.interpolate(x, {size = 4, mode = "bilinear", align_corners = true}):totable(),
              {{{{1, 4 / 3, 5 / 3, 2}, {5 / 3, 2, 7 / 3, 8 / 3}, {7 / 3, 8 / 3, 3, 10 / 3}, {3, 10 / 3, 11 / 3, 4}}}}, 1e-6)
        assert.same({{{1, 2, 4}}}, F.interpolate(ordo.tensor({{{1, 2, 3, 4, 5}}}), {size = 3}):totable())
    end)

    it("matches the reference for sizes up and down, scale factors and every mode", function()
        local x = ordo.randn({2, 3, 5, 7}, D)
        local X = x:totable()
        for _, mode in ipairs({"nearest", "bilinear"}) do
            for _, align in ipairs(mode == "nearest" and {false} or {false, true}) do
                for _, o in ipairs({{size = {9, 4}}, {size = {3, 14}}, {size = 1}, {size = {5, 7}},
                                    {scale_factor = 2}, {scale_factor = {1.5, 0.5}}, {scale_factor = 2.5}}) do
                    local opts = {size = o.size, scale_factor = o.scale_factor, mode = mode, align_corners = align}
                    local y = F.interpolate(x, opts)
                    local oh, ow, rh, rw
                    if o.size then
                        local s = type(o.size) == "table" and o.size or {o.size, o.size}
                        oh, ow, rh, rw = s[1], s[2], 5 / s[1], 7 / s[2]
                    else
                        local f = type(o.scale_factor) == "table" and o.scale_factor or {o.scale_factor, o.scale_factor}
                        oh, ow, rh, rw = math.floor(5 * f[1]), math.floor(7 * f[2]), 1 / f[1], 1 / f[2]
                    end
                    local what = mode .. (align and " align" or "") .. " " .. tostring(o.size or o.scale_factor)
                    assert.same({2, 3, oh, ow}, y:shape(), what)
                    close(y:totable(), ref2d(X, oh, ow, rh, rw, mode, align), 1e-12, what)
                end
            end
        end
        -- 3-D inputs: nearest and linear are the 2-D ones on a height of 1
        local s = ordo.randn({2, 3, 6}, D)
        for _, mode in ipairs({"nearest", "linear"}) do
            local y = F.interpolate(s, {size = 10, mode = mode})
            local want = ref2d(s:unsqueeze(3):totable(), 1, 10, 1, 0.6, mode == "linear" and "bilinear" or mode, false)
            close(y:totable(), ordo.tensor(want, D):squeeze(3):totable(), 1e-12, mode)
        end
        -- integers resize by nearest, exactly
        local i = ordo.tensor({{{1, 2, 3}}}, "int32")
        assert.same({{{1, 1, 2, 2, 3, 3}}}, F.interpolate(i, {scale_factor = 2}):totable())
        assert.equals("int32", F.interpolate(i, {scale_factor = 2}):dtype())
    end)

    it("has gradients that agree with central differences", function()
        local x = ordo.randn({1, 2, 3, 4}, D):requires_grad()
        for _, o in ipairs({{scale_factor = 2}, {size = {5, 3}, mode = "bilinear"},
                            {size = {4, 7}, mode = "bilinear", align_corners = true}}) do
            assert.is_true(ordo.autograd.gradcheck(function(a) return F.interpolate(a, o) end, {x}))
        end
        local s = ordo.randn({2, 1, 5}, D):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(a) return F.interpolate(a, {size = 8, mode = "linear"}) end, {s}))
    end)

    it("nearest picks Torch's indices, computed in single precision (its nearest_idx)", function()
        -- floor(i · in/out) with the ratio and the product rounded to float;
        -- a double would pick the neighbour in these places
        local two = ordo.arange(2, D):view(1, 1, 2)
        local a = F.interpolate(two, {size = 82}):totable()[1][1]
        assert.same({0, 0, 1}, {a[41], a[42], a[43]}) -- 41 · (2/82): 0.99999994 as a float
        local b = F.interpolate(two, {size = 98}):totable()[1][1]
        assert.same({0, 1, 1}, {b[49], b[50], b[51]}) -- 49 · (2/98): 1 as a float, 0.999... as a double
        local c = F.interpolate(ordo.arange(31, D):view(1, 1, 31), {scale_factor = 1.3}):totable()[1][1]
        assert.equal(40, #c)
        assert.equal(30, c[40]) -- 39 / 1.3 with 1/1.3 as a float
        -- sizes equal, and twice the input, exact
        assert.same({0, 0, 1, 1}, F.interpolate(two, {size = 4}):totable()[1][1])
        assert.same({0, 1}, F.interpolate(two, {size = 2}):totable()[1][1])
    end)

    it("mode 'nearest-exact' and recompute_scale_factor, as Torch's", function()
        local s = ordo.arange(4, D):view(1, 1, 4)
        -- floor((i + 0.5) · 4/3): [0, 2, 3] where nearest gives [0, 1, 2]
        assert.same({0, 2, 3}, F.interpolate(s, {size = 3, mode = "nearest-exact"}):totable()[1][1])
        assert.same({0, 1, 2}, F.interpolate(s, {size = 3}):totable()[1][1])
        local img = ordo.arange(4, {dtype = "int64"}):view(1, 1, 2, 2) -- integers too
        assert.same({{0, 0, 1, 1}, {0, 0, 1, 1}, {2, 2, 3, 3}, {2, 2, 3, 3}},
                    nn.Upsample({scale_factor = 2, mode = "nearest-exact"})(img):totable()[1][1])
        -- a scale factor samples at 1/scale_factor; recomputed, at in/out as a size would
        local x = ordo.arange(5, D):view(1, 1, 5)
        H.close(F.interpolate(x, {scale_factor = 1.5, mode = "linear"}):totable()[1][1],
                {0, 0.5, 7 / 6, 11 / 6, 2.5, 19 / 6, 23 / 6}, 1e-12)
        H.close(F.interpolate(x, {scale_factor = 1.5, mode = "linear", recompute_scale_factor = true}):totable(),
                F.interpolate(x, {size = 7, mode = "linear"}):totable(), 0)
        local ok, e = pcall(F.interpolate, x, {size = 7, recompute_scale_factor = true})
        assert.is_false(ok)
        assert.matches("recompute_scale_factor goes with scale_factor, not size", tostring(e), 1, true)
        ok, e = pcall(nn.Upsample, {scale_factor = 2, recompute_scale_factor = 1})
        assert.is_false(ok)
        assert.matches("Upsample: recompute_scale_factor must be a boolean, got number", tostring(e), 1, true)
    end)

    it("mode 'area' is Torch's: adaptive average pooling to the size", function()
        local x = ordo.randn({2, 3, 7, 5}, D)
        H.close(F.interpolate(x, {size = {3, 4}, mode = "area"}):totable(),
                F.adaptive_avg_pool2d(x, {3, 4}):totable(), 0)
        H.close(F.interpolate(x, {scale_factor = 0.5, mode = "area"}):totable(),
                F.adaptive_avg_pool2d(x, {3, 2}):totable(), 0)
        -- Torch: interpolate(arange(6).view(1, 1, 6), size=4, mode='area') = [0.5, 1.5, 3.5, 4.5]
        H.close(nn.Upsample({size = 4, mode = "area"})(ordo.arange(6, D):view(1, 1, 6)):totable()[1][1],
                {0.5, 1.5, 3.5, 4.5}, 1e-15)
        local ok, e = pcall(F.interpolate, x, {size = 2, mode = "area", align_corners = true})
        assert.is_false(ok)
        assert.matches("align_corners applies to the linear modes only", tostring(e), 1, true)
    end)

    it("Upsample, and bad arguments named", function()
        local up = nn.Upsample({scale_factor = 2, mode = "bilinear"})
        local x = ordo.randn({1, 2, 3, 3})
        assert.same({1, 2, 6, 6}, up(x):shape())
        assert.equals("Upsample(scale_factor 2, mode bilinear)", tostring(up))
        local function err(fn, ...)
            local ok, e = pcall(fn, ...)
            assert.is_false(ok)
            return tostring(e)
        end
        assert.matches("give exactly one of size and scale_factor", err(F.interpolate, x, {}), 1, true)
        assert.matches("give exactly one of size and scale_factor", err(F.interpolate, x, {size = 2, scale_factor = 2}),
                       1, true)
        assert.matches("size needs 2 values (one per spatial dim), got 3", err(F.interpolate, x, {size = {1, 2, 3}}),
                       1, true)
        assert.matches("mode 'linear' takes a 3-D (N, C, L) input, got shape 1x2x3x3",
                       err(F.interpolate, x, {size = 4, mode = "linear"}), 1, true)
        assert.matches("mode must be 'nearest', 'nearest-exact', 'linear', 'bilinear' or 'area', got bicubic",
                       err(F.interpolate, x, {size = 4, mode = "bicubic"}), 1, true)
        assert.matches("size must be positive integers, got 2.5", err(F.interpolate, x, {size = 2.5}), 1, true)
        assert.matches("scale_factor 0.2 makes dim 3 of input 1x2x3x3 empty",
                       err(F.interpolate, x, {scale_factor = 0.2}), 1, true)
        assert.matches("align_corners applies to the linear modes only",
                       err(F.interpolate, x, {size = 4, align_corners = true}), 1, true)
        assert.matches("interpolate: unknown option", err(F.interpolate, x, {sizes = 4}), 1, true)
        assert.matches("Upsample: give exactly one of size and scale_factor", err(nn.Upsample, {}), 1, true)
        assert.matches("interpolate: input must be a tensor", err(F.interpolate, 3, {size = 2}), 1, true)
    end)

    it("Upsample checks its options when built, and its forward's errors name Upsample", function()
        local function err(fn, ...)
            local ok, e = pcall(fn, ...)
            assert.is_false(ok, "expected an error")
            return tostring(e)
        end
        assert.matches("Upsample: align_corners must be a boolean, got number",
                       err(nn.Upsample, {scale_factor = 2, mode = "bilinear", align_corners = 1}), 1, true)
        assert.matches("Upsample: align_corners applies to the linear modes only",
                       err(nn.Upsample, {scale_factor = 2, align_corners = true}), 1, true)
        assert.matches("Upsample: scale_factor must be positive numbers, got -2", err(nn.Upsample, {scale_factor = -2}),
                       1, true)
        assert.matches("Upsample: size must be positive integers, got 2.5", err(nn.Upsample, {size = {4, 2.5}}), 1, true)
        local x = ordo.randn({1, 2, 3, 3})
        assert.matches("Upsample: size needs 2 values (one per spatial dim), got 3",
                       err(nn.Upsample({size = {2, 3, 4}}), x), 1, true)
        assert.matches("Upsample: mode 'linear' takes a 3-D (N, C, L) input, got shape 1x2x3x3",
                       err(nn.Upsample({size = 4, mode = "linear"}), x), 1, true)
        local up = nn.Upsample({scale_factor = {2, 1.5}, mode = "bilinear", align_corners = false})
        assert.same({1, 2, 6, 4}, up(x):shape())
        H.close(F.interpolate(x, {scale_factor = {2, 1.5}, mode = "bilinear"}):totable(), up(x):totable(), 0)
    end)
end)
