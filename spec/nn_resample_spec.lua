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

    it("mode 'bicubic' is Torch's (A = -0.75, four taps, the edge repeated), both alignments; gradients", function()
        -- Torch's kernel: for each output, 4x4 taps around floor(src), src not clamped at 0
        local A = -0.75
        local function c1(t) return ((A + 2) * t - (A + 3)) * t * t + 1 end
        local function c2(t) return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A end
        local function coeffs(t) return {c2(t + 1), c1(t), c1(1 - t), c2(2 - t)} end
        local function ref(x, oh, ow, align)
            local X = x:totable()[1][1]
            local H, W = #X, #X[1]
            local function src(i, n, o)
                if align then return o > 1 and i * (n - 1) / (o - 1) or 0 end
                return (i + 0.5) * n / o - 0.5
            end
            local Y = {}
            for i = 0, oh - 1 do
                Y[i + 1] = {}
                local sy = src(i, H, oh)
                local y0 = math.floor(sy)
                local cy = coeffs(sy - y0)
                for j = 0, ow - 1 do
                    local sx = src(j, W, ow)
                    local x0 = math.floor(sx)
                    local cx = coeffs(sx - x0)
                    local v = 0
                    for a = 1, 4 do
                        for b = 1, 4 do
                            local r = math.max(0, math.min(H - 1, y0 - 2 + a))
                            local c = math.max(0, math.min(W - 1, x0 - 2 + b))
                            v = v + cy[a] * cx[b] * X[r + 1][c + 1]
                        end
                    end
                    Y[i + 1][j + 1] = v
                end
            end
            return Y
        end
        local x = ordo.randn({1, 1, 4, 5}, D)
        for _, c in ipairs({{7, 9, false}, {3, 2, false}, {8, 10, true}, {4, 5, false}, {1, 3, true}}) do
            H.close(F.interpolate(x, {size = {c[1], c[2]}, mode = "bicubic", align_corners = c[3]}):totable()[1][1],
                    ref(x, c[1], c[2], c[3]), 1e-12)
        end
        -- [[0, 1], [2, 3]] doubled: the corner is 3 · cubic(1.25) = 3 · -0.10546875 (the source at -0.25)
        local y = F.interpolate(ordo.arange(4, D):view(1, 1, 2, 2), {scale_factor = 2, mode = "bicubic"})
        H.close(y:totable()[1][1][1][1], -0.31640625, 1e-15)
        local xg = ordo.randn({1, 2, 3, 4}, D):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(a) return F.interpolate(a, {size = {5, 7}, mode = "bicubic"}) end,
                                               {xg}))
        local ok, e = pcall(F.interpolate, ordo.randn({1, 2, 5}), {size = 4, mode = "bicubic"})
        assert.is_false(ok)
        assert.matches("mode 'bicubic' takes a 4-D (N, C, H, W) input", tostring(e), 1, true)
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
        assert.matches("mode must be 'nearest', 'nearest-exact', 'linear', 'bilinear', 'bicubic' or 'area', got cubic",
                       err(F.interpolate, x, {size = 4, mode = "cubic"}), 1, true)
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

    -- each output position's source is listed in Lua: a size past 2^24 per
    -- dim is refused by name (2^40 was "resample.lua:115: table overflow",
    -- 2^30 ran LuaJIT out of memory); a failing op inside is named after it
    it("an output size too large is refused by name; a failing op inside named after interpolate / Upsample", function()
        local x = ordo.randn({1, 1, 4, 4})
        H.raises(function() return F.interpolate(x, {size = {2 ^ 40, 2}}) end,
                 "interpolate: output size 1099511627776 in spatial dim 1 is too large for mode 'nearest' (at most 2^24)")
        H.raises(function() return F.interpolate(x, {scale_factor = 2 ^ 30, mode = "bilinear"}) end,
                 "interpolate: output size 4294967296 in spatial dim 1 is too large for mode 'bilinear'")
        H.raises(function() return nn.Upsample({scale_factor = 2 ^ 40})(x) end, "Upsample: output size", "too large")
        H.raises(function() return F.interpolate(ordo.randn({1, 1, 4}), {size = 2 ^ 25, mode = "linear"}) end,
                 "interpolate: output size 33554432 in spatial dim 1 is too large for mode 'linear'")
        -- 2^24 x 2^24 outputs: each dim's list is fine, the result cannot be allocated
        H.raises(function() return F.interpolate(x, {size = {2 ^ 24, 2 ^ 24}}) end,
                 "interpolate: index_select: out of memory")
        assert.same({1, 1, 8, 2}, F.interpolate(x, {size = {8, 2}}):shape())
    end)

    it("UpsamplingNearest2d and UpsamplingBilinear2d (align_corners = true), as Torch's", function()
        local x = ordo.arange(4, D):view(1, 1, 2, 2)
        local u = nn.UpsamplingNearest2d({scale_factor = 2})(x)
        assert.same({{{{0, 0, 1, 1}, {0, 0, 1, 1}, {2, 2, 3, 3}, {2, 2, 3, 3}}}}, u:totable())
        local b = nn.UpsamplingBilinear2d({size = {3, 3}})(x)
        assert.same({{{{0, 0.5, 1}, {1, 1.5, 2}, {2, 2.5, 3}}}}, b:totable())
        assert.same(F.interpolate(x, {size = 3, mode = "bilinear", align_corners = true}):totable(),
                    nn.UpsamplingBilinear2d({size = 3})(x):totable())
        H.raises(function() nn.UpsamplingNearest2d({}) end, "UpsamplingNearest2d: give one of size and scale_factor")
        H.raises(function() nn.UpsamplingNearest2d({size = 2, scale_factor = 2}) end, "give one of size and scale_factor")
        H.raises(function() nn.UpsamplingBilinear2d({mode = "nearest"}) end, "UpsamplingBilinear2d: unknown option 'mode'")
        H.raises(function() nn.UpsamplingNearest2d({scale_factor = -1}) end, "UpsamplingNearest2d: scale_factor")
        H.raises(function() nn.UpsamplingNearest2d({scale_factor = 2})(ordo.zeros(1, 2, 3)) end,
                 "UpsamplingNearest2d: expected a 4-D input")
    end)
end)
