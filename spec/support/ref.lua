-- spec/support/ref.lua: a straightforward plain-Lua tensor, the reference the
-- specs check ordo's ops against.  A ref is {shape = {...}, data = {...}
-- (flat, row-major), dtype = "float32"|...}; dims count from 1.
local ffi = require "ffi"

local R = {}

local floor, huge = math.floor, math.huge

local f32 = ffi.new("float[1]")
local i32 = ffi.new("int32_t[1]")
local u8 = ffi.new("uint8_t[1]")

R.ISFLOAT = {float32 = true, float64 = true}
R.RANK = {uint8 = 0, int32 = 1, int64 = 2, float32 = 3, float64 = 4}
R.DTYPES = {"float32", "float64", "int32", "int64", "uint8"}

local function trunc(v)
    if v ~= v or v == huge or v == -huge then return 0 end
    return v >= 0 and floor(v) or -floor(-v)
end

-- v stored in dtype (float32 rounding, integer truncation and wrap-around)
function R.cast(v, dtype)
    if type(v) == "boolean" then v = v and 1 or 0 end
    if dtype == "float64" then return v end
    if dtype == "float32" then
        f32[0] = v
        return f32[0]
    end
    v = trunc(v)
    if dtype == "int32" then
        i32[0] = v % 4294967296 >= 2147483648 and v % 4294967296 - 4294967296 or v % 4294967296
        return i32[0]
    end
    if dtype == "uint8" then
        u8[0] = v % 256
        return u8[0]
    end
    return v -- int64: the specs keep values far below 2^53
end

function R.numel(shape)
    local n = 1
    for i = 1, #shape do n = n * shape[i] end
    return n
end

function R.new(shape, data, dtype)
    return {shape = shape, data = data, dtype = dtype or "float32"}
end

local function copy_shape(s)
    local r = {}
    for i = 1, #s do r[i] = s[i] end
    return r
end
R.copy_shape = copy_shape

-- row-major strides
local function strides_of(shape)
    local st, s = {}, 1
    for i = #shape, 1, -1 do
        st[i] = s
        s = s * shape[i]
    end
    return st
end

-- calls f(idx) for every multi-index (a table reused between calls), in order
local function each_index(shape, f)
    local n = R.numel(shape)
    if n == 0 then return end
    local nd = #shape
    local idx = {}
    for i = 1, nd do idx[i] = 1 end
    for _ = 1, n do
        f(idx)
        for d = nd, 1, -1 do
            idx[d] = idx[d] + 1
            if idx[d] <= shape[d] then break end
            idx[d] = 1
        end
    end
end
R.each_index = each_index

local function offset(strides, idx)
    local o = 1
    for i = 1, #idx do o = o + (idx[i] - 1) * strides[i] end
    return o
end

function R.get(r, idx) return r.data[offset(strides_of(r.shape), idx)] end

-- random values fitting dtype: floats in [-3, 3), integers in [-9, 9] ([0, 20] for uint8)
function R.rand(shape, dtype, rng)
    rng = rng or math.random
    local data = {}
    for i = 1, R.numel(shape) do
        local v
        if R.ISFLOAT[dtype] then v = R.cast(rng() * 6 - 3, dtype)
        elseif dtype == "uint8" then v = floor(rng() * 21)
        else v = floor(rng() * 19) - 9 end
        data[i] = v
    end
    return R.new(copy_shape(shape), data, dtype)
end

function R.totable(r)
    local shape, data = r.shape, r.data
    local nd = #shape
    if nd == 0 then return data[1] end
    local pos = 0
    local function build(d)
        local t = {}
        for i = 1, shape[d] do
            if d == nd then
                pos = pos + 1
                t[i] = data[pos]
            else
                t[i] = build(d + 1)
            end
        end
        return t
    end
    return build(1)
end

function R.map(r, f, dtype)
    dtype = dtype or r.dtype
    local data = {}
    for i = 1, #r.data do data[i] = R.cast(f(r.data[i]), dtype) end
    return R.new(copy_shape(r.shape), data, dtype)
end

function R.broadcast_shape(shapes)
    local n = 0
    for _, s in ipairs(shapes) do if #s > n then n = #s end end
    local out = {}
    for i = 1, n do
        local size = 1
        for _, s in ipairs(shapes) do
            local j = i - (n - #s)
            local v = j >= 1 and s[j] or 1
            if v ~= 1 then
                if size ~= 1 and size ~= v then return nil end
                size = v
            end
        end
        out[i] = size
    end
    return out
end

-- value of r at out-index idx under broadcasting to a shape of #idx dims
local function bget(r, st, idx)
    local lead = #idx - #r.shape
    local o = 1
    for j = 1, #r.shape do
        local i = idx[j + lead]
        if r.shape[j] == 1 then i = 1 end
        o = o + (i - 1) * st[j]
    end
    return r.data[o]
end

-- f over broadcast operands (refs), result dtype
function R.nary(refs, f, dtype)
    local shapes = {}
    for i, r in ipairs(refs) do shapes[i] = r.shape end
    local shape = assert(R.broadcast_shape(shapes), "shapes do not broadcast")
    local sts = {}
    for i, r in ipairs(refs) do sts[i] = strides_of(r.shape) end
    local data = {}
    local vals = {}
    each_index(shape, function(idx)
        for i, r in ipairs(refs) do vals[i] = bget(r, sts[i], idx) end
        data[#data + 1] = R.cast(f(unpack(vals, 1, #refs)), dtype)
    end)
    return R.new(shape, data, dtype)
end

function R.binary(a, b, f, dtype) return R.nary({a, b}, f, dtype) end

function R.scalar(v, dtype) return R.new({}, {R.cast(v, dtype)}, dtype) end

-- reduce along dim (nil = all): init, step(acc, v, i) -> acc, final(acc, n)
function R.reduce(r, dim, init, step, final, dtype, keepdim)
    dtype = dtype or r.dtype
    local shape = r.shape
    if dim == nil then
        local acc = init
        for i = 1, #r.data do acc = step(acc, r.data[i], i) end
        local out_shape = {}
        if keepdim then for i = 1, #shape do out_shape[i] = 1 end end
        return R.new(out_shape, {R.cast(final and final(acc, #r.data) or acc, dtype)}, dtype)
    end
    local out_shape = copy_shape(shape)
    out_shape[dim] = 1
    local st = strides_of(shape)
    local data = {}
    each_index(out_shape, function(idx)
        local acc = init
        local j = {}
        for k = 1, #idx do j[k] = idx[k] end
        for i = 1, shape[dim] do
            j[dim] = i
            acc = step(acc, r.data[offset(st, j)], i)
        end
        data[#data + 1] = R.cast(final and final(acc, shape[dim]) or acc, dtype)
    end)
    if not keepdim then table.remove(out_shape, dim) end
    return R.new(out_shape, data, dtype)
end

function R.sum(r, dim, dtype, keepdim)
    return R.reduce(r, dim, 0, function(a, v) return a + v end, nil, dtype, keepdim)
end

function R.mean(r, dim, dtype, keepdim)
    return R.reduce(r, dim, 0, function(a, v) return a + v end, function(a, n) return a / n end, dtype, keepdim)
end

function R.max(r, dim, keepdim)
    return R.reduce(r, dim, -huge, function(a, v) return v > a and v or a end, nil, r.dtype, keepdim)
end

function R.min(r, dim, keepdim)
    return R.reduce(r, dim, huge, function(a, v) return v < a and v or a end, nil, r.dtype, keepdim)
end

-- first index (from 1) of the max/min
function R.argmax(r, dim, keepdim)
    return R.reduce(r, dim, {-huge, 0}, function(a, v, i) if v > a[1] then return {v, i} end return a end,
                    function(a) return a[2] end, "int64", keepdim)
end

function R.argmin(r, dim, keepdim)
    return R.reduce(r, dim, {huge, 0}, function(a, v, i) if v < a[1] then return {v, i} end return a end,
                    function(a) return a[2] end, "int64", keepdim)
end

function R.permute(r, perm)
    local shape = {}
    for i = 1, #perm do shape[i] = r.shape[perm[i]] end
    local st = strides_of(r.shape)
    local data = {}
    local src = {}
    each_index(shape, function(idx)
        for i = 1, #perm do src[perm[i]] = idx[i] end
        data[#data + 1] = r.data[offset(st, src)]
    end)
    return R.new(shape, data, r.dtype)
end

function R.transpose(r, d1, d2)
    local perm = {}
    for i = 1, #r.shape do perm[i] = i end
    perm[d1], perm[d2] = perm[d2], perm[d1]
    return R.permute(r, perm)
end

function R.narrow(r, dim, start, len)
    local shape = copy_shape(r.shape)
    shape[dim] = len
    local st = strides_of(r.shape)
    local data = {}
    local src = {}
    each_index(shape, function(idx)
        for i = 1, #idx do src[i] = idx[i] end
        src[dim] = idx[dim] + start - 1
        data[#data + 1] = r.data[offset(st, src)]
    end)
    return R.new(shape, data, r.dtype)
end

-- 2-D (MxK @ KxN) or batched 3-D
function R.matmul(a, b, dtype)
    dtype = dtype or a.dtype
    if #a.shape == 2 then
        local m, k, n = a.shape[1], a.shape[2], b.shape[2]
        local data = {}
        for i = 1, m do
            for j = 1, n do
                local s = 0
                for p = 1, k do s = s + a.data[(i - 1) * k + p] * b.data[(p - 1) * n + j] end
                data[#data + 1] = R.cast(s, dtype)
            end
        end
        return R.new({m, n}, data, dtype)
    end
    local bs, m, k, n = a.shape[1], a.shape[2], a.shape[3], b.shape[3]
    local data = {}
    for q = 1, bs do
        for i = 1, m do
            for j = 1, n do
                local s = 0
                for p = 1, k do
                    s = s + a.data[(q - 1) * m * k + (i - 1) * k + p] * b.data[(q - 1) * k * n + (p - 1) * n + j]
                end
                data[#data + 1] = R.cast(s, dtype)
            end
        end
    end
    return R.new({bs, m, n}, data, dtype)
end

function R.softmax(r, dim, log)
    local mx = R.max(r, dim, true)
    local shifted = R.binary(r, mx, function(x, m) return x - m end, "float64")
    local e = R.map(shifted, math.exp, "float64")
    local s = R.sum(e, dim, "float64", true)
    if log then
        return R.binary(shifted, s, function(x, z) return x - math.log(z) end, r.dtype)
    end
    return R.binary(e, s, function(x, z) return x / z end, r.dtype)
end

-- out[idx] = r[idx with idx[dim] = index[idx]] (index values from 1)
function R.gather(r, dim, index)
    local st = strides_of(r.shape)
    local data = {}
    local src = {}
    each_index(index.shape, function(idx)
        for i = 1, #idx do src[i] = idx[i] end
        src[dim] = R.get(index, idx)
        data[#data + 1] = r.data[offset(st, src)]
    end)
    return R.new(copy_shape(index.shape), data, r.dtype)
end

function R.index_select(r, dim, list)
    local shape = copy_shape(r.shape)
    shape[dim] = #list
    local st = strides_of(r.shape)
    local data = {}
    local src = {}
    each_index(shape, function(idx)
        for i = 1, #idx do src[i] = idx[i] end
        src[dim] = list[idx[dim]]
        data[#data + 1] = r.data[offset(st, src)]
    end)
    return R.new(shape, data, r.dtype)
end

function R.cat(list, dim, dtype)
    local shape = copy_shape(list[1].shape)
    local total = 0
    for _, r in ipairs(list) do total = total + r.shape[dim] end
    shape[dim] = total
    local data = {}
    each_index(shape, function(idx)
        local i = idx[dim]
        for _, r in ipairs(list) do
            if i <= r.shape[dim] then
                local src = {}
                for k = 1, #idx do src[k] = idx[k] end
                src[dim] = i
                data[#data + 1] = R.cast(R.get(r, src), dtype)
                return
            end
            i = i - r.shape[dim]
        end
    end)
    return R.new(shape, data, dtype)
end

-- ---------------------------------------------------------------- comparing

local function close(a, b, rtol, atol)
    if a ~= a and b ~= b then return true end
    if a == b then return true end
    if a == huge or a == -huge or b == huge or b == -huge then return false end
    return math.abs(a - b) <= atol + rtol * math.abs(b)
end

-- Compares a nested table (from :totable()) with a ref; returns true or
-- false and a message naming the first difference.
function R.compare(got, ref, rtol, atol)
    rtol = rtol or 0
    atol = atol or 0
    local exp = R.totable(ref)
    local function walk(g, e, path)
        if type(e) ~= "table" then
            if type(g) ~= "number" then return false, path .. ": got " .. type(g) .. ", expected " .. tostring(e) end
            if not close(g, e, rtol, atol) then
                return false, ("%s: got %.17g, expected %.17g"):format(path, g, e)
            end
            return true
        end
        if type(g) ~= "table" then return false, path .. ": got a " .. type(g) .. ", expected a table" end
        if #g ~= #e then return false, ("%s: got %d entries, expected %d"):format(path, #g, #e) end
        for i = 1, #e do
            local ok, msg = walk(g[i], e[i], path .. "[" .. i .. "]")
            if not ok then return false, msg end
        end
        return true
    end
    return walk(got, exp, "value")
end

function R.shape_str(s)
    if #s == 0 then return "scalar" end
    local p = {}
    for i = 1, #s do p[i] = tostring(s[i]) end
    return table.concat(p, "x")
end

return R
