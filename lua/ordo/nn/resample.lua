-- ordo.nn.resample: resizing feature maps, F.interpolate and nn.Upsample.
--
--   local y = F.interpolate(x, {scale_factor = 2})                      -- nearest
--   local z = F.interpolate(x, {size = {7, 9}, mode = "bilinear"})
--
-- x is N×C×L (modes "nearest", "linear", "area") or N×C×H×W ("nearest",
-- "bilinear", "area"; area: adaptive average pooling to the output size).  Each spatial dim is resized on its own, output position i
-- sampling the input at (0-based, Torch's rules):
--   nearest:                 floor(i · r), r = in/out, or 1/scale_factor
--                            when the size came from a scale factor (in
--                            single precision, as Torch's)
--   linear, bilinear:        x = (i + 0.5) · r − 0.5, at least 0, between
--                            floor(x) and the next element (the last one
--                            repeats), weighted by how close x is to each;
--   align_corners = true:    x = i · (in − 1) / (out − 1) (the corners
--                            match exactly).
-- A dim is one index_select (two and a weighted sum for linear), so the
-- gradient is index_select's (index_add) and it runs on every device.
local ffi = require "ffi"
local util = require "ordo.util"
local tensor = require "ordo.tensor"

local fail, typename, own_errors = util.fail, util.typename, util.own_errors
local is_tensor, shape_of = tensor.is_tensor, tensor.shape_of
local fmt, floor, min = string.format, math.floor, math.min
local type, tostring, ipairs, pairs = type, tostring, ipairs, pairs

local M = {}

local bicubic_dim -- (below)

-- v rounded to single precision (Torch computes nearest's indices in float)
local function f32(v) return tonumber(ffi.cast("float", v)) end

local MODES = {nearest = {[3] = true, [4] = true}, ["nearest-exact"] = {[3] = true, [4] = true},
               linear = {[3] = true}, bilinear = {[4] = true}, bicubic = {[4] = true},
               area = {[3] = true, [4] = true}}
local OPTS = {size = true, scale_factor = true, mode = true, align_corners = true, recompute_scale_factor = true}

local shape_str = tensor.shape_str_of
local MAX_OUT = 2 ^ 24 -- (interpolate's output size per dim but in mode 'area')

-- v, or v[k] of a table of one per spatial dim (n of them), checked.
local function per_dim(fname, what, v, n, positive_number)
    local t = v
    if type(v) ~= "table" then
        t = {}
        for k = 1, n do t[k] = v end
    elseif #v ~= n then
        fail(fmt("%s: %s needs %d value%s (one per spatial dim), got %d", fname, what, n, n > 1 and "s" or "", #v))
    end
    for k = 1, n do
        local x = t[k]
        if type(x) ~= "number" or not (x > 0) or x == math.huge or (not positive_number and x ~= floor(x)) then
            fail(fmt("%s: %s must be %s, got %s", fname, what,
                     positive_number and "positive numbers" or "positive integers", tostring(x)))
        end
    end
    return t
end

-- Torch's bicubic along dim d (n long) to out: the four taps around the
-- source position (not clamped at 0, as the linear modes are), the edge
-- repeated past either end, weighted by the cubic convolution kernel with
-- A = -0.75.
local A = -0.75
local function cc1(t) return ((A + 2) * t - (A + 3)) * t * t + 1 end
local function cc2(t) return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A end
bicubic_dim = function(x, d, n, out, r, align)
    local idx, wts = {{}, {}, {}, {}}, {{}, {}, {}, {}}
    for i = 0, out - 1 do
        local src
        if align then src = out > 1 and i * (n - 1) / (out - 1) or 0 else src = (i + 0.5) * r - 0.5 end
        local i0 = floor(src)
        local t = src - i0
        local c = {cc2(t + 1), cc1(t), cc1(1 - t), cc2(2 - t)}
        for k = 1, 4 do
            local j = i0 - 2 + k
            if j < 0 then j = 0 elseif j > n - 1 then j = n - 1 end
            idx[k][i + 1], wts[k][i + 1] = j + 1, c[k]
        end
    end
    local wshape = {}
    for k = 1, x:dim() do wshape[k] = 1 end
    wshape[d] = out
    local y
    for k = 1, 4 do
        local term = x:index_select(d, idx[k]) * tensor.tensor(wts[k], tensor.like(x)):view(wshape)
        y = y and y + term or term
    end
    return y
end

-- x resized along dim d (1-based) to out elements; r: the input elements
-- per output element.
local function resize_dim(x, d, out, r, mode, align)
    local n = x:size(d)
    if mode == "nearest" or mode == "nearest-exact" then
        -- Torch's arithmetic, in single precision whatever the dtype (its
        -- nearest_idx): out = n and out = 2n exactly, else floor(i · r)
        -- with r and the product rounded to float, which a double would
        -- round differently (10 -> 6: Torch's [0 1 3 4 6 8], not [0 1 3 5 6 8])
        local idx = {}
        local rf = f32(r)
        for i = 0, out - 1 do
            local src
            if mode == "nearest-exact" then -- the nearest centre: floor((i + 0.5) · r)
                src = min(floor(f32((i + 0.5) * rf)), n - 1)
            elseif out == n then
                src = i
            elseif out == 2 * n then
                src = floor(i / 2)
            else
                src = min(floor(f32(i * rf)), n - 1)
            end
            idx[i + 1] = src + 1
        end
        return x:index_select(d, idx)
    end
    if mode == "bicubic" then return bicubic_dim(x, d, n, out, r, align) end
    local lo, hi, w = {}, {}, {}
    for i = 0, out - 1 do
        local src
        if align then
            src = out > 1 and i * (n - 1) / (out - 1) or 0
        else
            src = (i + 0.5) * r - 0.5
            if src < 0 then src = 0 end
        end
        local i0 = min(floor(src), n - 1)
        lo[i + 1], hi[i + 1], w[i + 1] = i0 + 1, min(i0 + 1, n - 1) + 1, src - i0
    end
    local wshape = {}
    for k = 1, x:dim() do wshape[k] = 1 end
    wshape[d] = out
    local wt = tensor.tensor(w, tensor.like(x)):view(wshape)
    local a = x:index_select(d, lo)
    return a + (x:index_select(d, hi) - a) * wt
end

-- The options that do not depend on the input, checked (fname names the
-- caller: interpolate, or Upsample when it is built): mode and align.
local function check_static(fname, opts)
    local mode = opts.mode or "nearest"
    if not MODES[mode] then
        fail(fmt("%s: mode must be 'nearest', 'nearest-exact', 'linear', 'bilinear', 'bicubic' or 'area', got %s",
                 fname, tostring(mode)))
    end
    local align = opts.align_corners
    if align ~= nil and type(align) ~= "boolean" then
        fail(fmt("%s: align_corners must be a boolean, got %s", fname, typename(align)))
    end
    if align and (mode == "nearest" or mode == "nearest-exact" or mode == "area") then
        fail(fname .. ": align_corners applies to the linear modes only")
    end
    if (opts.size == nil) == (opts.scale_factor == nil) then
        fail(fmt("%s: give exactly one of size and scale_factor", fname))
    end
    local rc = opts.recompute_scale_factor
    if rc ~= nil and type(rc) ~= "boolean" then
        fail(fmt("%s: recompute_scale_factor must be a boolean, got %s", fname, typename(rc)))
    end
    if rc and opts.size ~= nil then fail(fname .. ": recompute_scale_factor goes with scale_factor, not size") end
    return mode, align
end

-- interpolate(x, {size = | scale_factor = [, mode = "nearest"] [,
-- align_corners = false]}): x resized in its spatial dims (all but the
-- first two).  size: the output's spatial size; scale_factor: how many
-- times larger (the output size is floor(in · scale_factor)); a number for
-- every dim or a table of one per dim.  fname: the name errors carry.
local function interpolate(fname, x, opts)
    if not is_tensor(x) then fail(fmt("%s: input must be a tensor, got %s", fname, typename(x))) end
    opts = util.check_opts(fname, opts, OPTS)
    local mode, align = check_static(fname, opts)
    local nd = x:dim()
    if not MODES[mode][nd] then
        fail(fmt("%s: mode '%s' takes a %s input, got shape %s", fname, mode,
                 MODES[mode][3] and MODES[mode][4] and "3-D (N, C, L) or 4-D (N, C, H, W)" or
                 mode == "linear" and "3-D (N, C, L)" or "4-D (N, C, H, W)", shape_str(x)))
    end
    local dt = x:dtype()
    if mode ~= "nearest" and mode ~= "nearest-exact" and dt ~= "float32" and dt ~= "float64" then
        fail(fmt("%s: mode '%s' needs a float input, got %s", fname, mode, dt))
    end
    local ns = nd - 2
    local sizes, ratios = {}, {}
    if opts.size ~= nil then
        sizes = per_dim(fname, "size", opts.size, ns)
        for k = 1, ns do ratios[k] = x:size(k + 2) / sizes[k] end
    else
        local sf = per_dim(fname, "scale_factor", opts.scale_factor, ns, true)
        for k = 1, ns do
            sizes[k] = floor(x:size(k + 2) * sf[k])
            -- recompute_scale_factor: sampled as if the size had been given
            ratios[k] = opts.recompute_scale_factor and x:size(k + 2) / sizes[k] or 1 / sf[k]
            if sizes[k] < 1 then
                fail(fmt("%s: scale_factor %g makes dim %d of input %s empty", fname, sf[k], k + 2, shape_str(x)))
            end
        end
    end
    -- the other modes list each output position's source in Lua: a size
    -- past 2^24 per dim is refused by name (2^40 overflowed the Lua table,
    -- "resample.lua:115: table overflow", or ran LuaJIT out of memory)
    for k = 1, ns do
        if mode ~= "area" and sizes[k] > MAX_OUT then
            fail(fmt("%s: output size %.17g in spatial dim %d is too large for mode '%s' (at most 2^24)", fname,
                     sizes[k], k, mode))
        end
    end
    if mode == "area" then -- Torch's: adaptive average pooling to the size
        local conv = require "ordo.nn.conv"
        if ns == 1 then return conv.adaptive_avg_pool1d(x, sizes[1]) end
        return conv.adaptive_avg_pool2d(x, {sizes[1], sizes[2]})
    end
    local y = x
    for k = 1, ns do y = resize_dim(y, k + 2, sizes[k], ratios[k], mode, align) end
    return y
end

-- (an op it is made of failing, out of memory above all, named after it:
-- "interpolate: index_select: out of memory ...")
function M.interpolate(x, opts) return own_errors("interpolate", pcall(interpolate, "interpolate", x, opts)) end

function M.install(nn)
    local F = nn.functional
    F.interpolate = M.interpolate

    -- Upsample({size = | scale_factor = [, mode = "nearest"] [,
    -- align_corners = false]}): interpolate as a module.
    local Upsample = nn.Module:extend("Upsample")
    nn.Upsample = Upsample
    function Upsample:init(opts)
        opts = util.check_opts("Upsample", opts, OPTS)
        local mode, align = check_static("Upsample", opts)
        -- the values now, their count (one per spatial dim) at forward
        local function values(what, v, positive_number)
            per_dim("Upsample", what, v, type(v) == "table" and #v or 1, positive_number)
        end
        if opts.size ~= nil then values("size", opts.size) else values("scale_factor", opts.scale_factor, true) end
        self.options = {size = opts.size, scale_factor = opts.scale_factor, mode = mode, align_corners = align,
                        recompute_scale_factor = opts.recompute_scale_factor}
    end
    function Upsample:forward(x) return own_errors("Upsample", pcall(interpolate, "Upsample", x, self.options)) end

    -- UpsamplingNearest2d({size = | scale_factor =}) and
    -- UpsamplingBilinear2d({...}): Torch's, Upsample with mode "nearest",
    -- and "bilinear" with align_corners = true, for 4-D input.
    for name, o in pairs({UpsamplingNearest2d = {mode = "nearest"},
                          UpsamplingBilinear2d = {mode = "bilinear", align = true}}) do
        local cls = Upsample:extend(name)
        nn[name] = cls
        function cls:init(opts)
            opts = util.check_opts(name, opts, {size = true, scale_factor = true})
            if (opts.size == nil) == (opts.scale_factor == nil) then
                fail(fmt("%s: give one of size and scale_factor", name))
            end
            local ok, err = pcall(Upsample.init, self, {size = opts.size, scale_factor = opts.scale_factor,
                                                         mode = o.mode, align_corners = o.align})
            if not ok then error((tostring(err):gsub("Upsample: ", name .. ": ", 1)), 0) end
        end
        function cls:forward(x)
            if not is_tensor(x) then fail(fmt("%s: expected a tensor input, got %s", name, typename(x))) end
            if x:dim() ~= 4 then
                fail(fmt("%s: expected a 4-D input (N, C, H, W), got %d dims", name, x:dim()))
            end
            return own_errors(name, pcall(interpolate, name, x, self.options))
        end
    end
    function Upsample:extra_repr()
        local o = self.options
        local what = o.size and "size " .. (type(o.size) == "table" and table.concat(o.size, "x") or tostring(o.size))
            or "scale_factor " .. (type(o.scale_factor) == "table" and table.concat(o.scale_factor, "x")
                                   or tostring(o.scale_factor))
        return fmt("%s, mode %s%s", what, o.mode, o.align_corners and ", align_corners" or "")
    end
    return nn
end

return M
