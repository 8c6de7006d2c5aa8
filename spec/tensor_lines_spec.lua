-- Ops along one dim whose outputs depend on the line before them: cumsum,
-- cumprod (and prod on it), sort (and argsort, topk on it), against plain Lua on random shapes, every
-- dtype and layout, with their gradients.
local ordo = require "ordo"
local R = require "support.ref"
local H = require "support.helpers"

local ISFLOAT = R.ISFLOAT

-- The lines of a row-major shape along dim d: a list of lists of flat
-- (1-based) positions.
local function lines_of(shape, d)
    local strides, s = {}, 1
    for i = #shape, 1, -1 do
        strides[i] = s
        s = s * shape[i]
    end
    local out = {}
    local n = R.numel(shape)
    for pos = 0, n - 1 do
        if math.floor(pos / strides[d]) % shape[d] == 0 then
            local line = {}
            for k = 0, shape[d] - 1 do line[#line + 1] = pos + k * strides[d] + 1 end
            out[#out + 1] = line
        end
    end
    return out
end

local function ref_cumsum(r, d, dtype)
    local data = {}
    for _, line in ipairs(lines_of(r.shape, d)) do
        local acc = 0
        for _, p in ipairs(line) do
            acc = acc + r.data[p]
            data[p] = R.cast(acc, dtype)
        end
    end
    return R.new(r.shape, data, dtype)
end

-- running products; integers wrap as the kernel's uint64 does (the
-- specs' small values keep every product exact in a double until then)
local function ref_cumprod(r, d, dtype)
    local data = {}
    for _, line in ipairs(lines_of(r.shape, d)) do
        local acc = 1
        for _, p in ipairs(line) do
            acc = acc * r.data[p]
            data[p] = R.cast(acc, dtype)
        end
    end
    return R.new(r.shape, data, dtype)
end

-- the product over dim d (nil: over everything, a 0-dim result)
local function ref_prod(r, d, dtype)
    if d == nil then
        local acc = 1
        for i = 1, R.numel(r.shape) do acc = acc * r.data[i] end
        return R.new({}, {R.cast(acc, dtype)}, dtype)
    end
    local shape, data = {}, {}
    for i, s in ipairs(r.shape) do shape[i] = i == d and 1 or s end
    local k = 0
    if r.shape[d] == 0 then
        for i = 1, R.numel(shape) do data[i] = 1 end
    end
    for _, line in ipairs(lines_of(r.shape, d)) do
        local acc = 1
        for _, p in ipairs(line) do acc = acc * r.data[p] end
        k = k + 1
        data[k] = R.cast(acc, dtype)
    end
    return R.new(shape, data, dtype)
end

-- stable, NaN largest; indices from 1
local function ref_sort(r, d, descending)
    local values, idx = {}, {}
    for _, line in ipairs(lines_of(r.shape, d)) do
        local order = {}
        for k = 1, #line do order[k] = k end
        local function key(k) return r.data[line[k]] end
        table.sort(order, function(a, b)
            local x, y = key(a), key(b)
            local xn, yn = x ~= x, y ~= y
            if xn ~= yn then
                if descending then return xn end
                return yn
            end
            if not xn and x ~= y then
                if descending then return x > y end
                return x < y
            end
            return a < b
        end)
        for k, o in ipairs(order) do
            values[line[k]] = r.data[line[o]]
            idx[line[k]] = o
        end
    end
    return R.new(r.shape, values, r.dtype), R.new(r.shape, idx, "int64")
end

describe("ops along a dim", function()
    it("cumsum over each dim, every dtype and layout (integers in int64)", function()
        math.randomseed(61)
        for _, dt in ipairs(R.DTYPES) do
            for _, layout in ipairs(H.LAYOUTS) do
                local shape = H.rand_shape(3, 5, true)
                if #shape == 0 then shape = {3} end
                local ra = R.rand(shape, dt)
                local a = H.make(ordo, ra, layout)
                local odt = ISFLOAT[dt] and dt or "int64"
                for d = 1, #shape do
                    local what = ("cumsum(%d) %s %s %s"):format(d, dt, layout, R.shape_str(shape))
                    H.check(a:cumsum(d), ref_cumsum(ra, d, odt), nil, nil, what)
                    H.check(a:cumsum(d - #shape - 1), ref_cumsum(ra, d, odt), nil, nil, what .. " negative dim")
                end
            end
        end
        assert.same({1, 3, 6}, ordo.tensor({1, 2, 3}):cumsum():totable())
        assert.equals(5, ordo.tensor(5):cumsum():item())
        H.raises(function() return ordo.zeros(2, 3):cumsum() end, "cumsum", "dim", "2x3")
        H.raises(function() return ordo.zeros(2, 3):cumsum(3) end, "cumsum", "dim")
    end)

    it("cumprod and prod over each dim and over all, every dtype and layout (integers in int64)", function()
        math.randomseed(63)
        for _, dt in ipairs(R.DTYPES) do
            for _, layout in ipairs(H.LAYOUTS) do
                local shape = H.rand_shape(3, 5, true)
                if #shape == 0 then shape = {3} end
                local ra = R.rand(shape, dt)
                local a = H.make(ordo, ra, layout)
                local odt = ISFLOAT[dt] and dt or "int64"
                local tol = dt == "float32" and 1e-5 or 0 -- prod's order of products is not the line's
                for d = 1, #shape do
                    local what = ("(%d) %s %s %s"):format(d, dt, layout, R.shape_str(shape))
                    H.check(a:cumprod(d), ref_cumprod(ra, d, odt), nil, nil, "cumprod" .. what)
                    H.check(a:cumprod(d - #shape - 1), ref_cumprod(ra, d, odt), nil, nil, "cumprod negative" .. what)
                    local p = ref_prod(ra, d, odt)
                    H.check(a:prod(d, true), p, tol, 0, "prod keepdim" .. what)
                    local squeezed = {}
                    for i, sz in ipairs(shape) do if i ~= d then squeezed[#squeezed + 1] = sz end end
                    assert.same(squeezed, a:prod(d):shape(), "prod" .. what)
                end
                local all = a:prod()
                assert.same({}, all:shape())
                assert.equals(odt, all:dtype())
                H.check(all, ref_prod(ra, nil, odt), tol, 0, ("prod() %s %s"):format(dt, layout))
            end
        end
        assert.same({1, 2, 6, 24}, ordo.tensor({1, 2, 3, 4}):cumprod():totable())
        assert.equals(5, ordo.tensor(5):prod():item())
        assert.equals(1, ordo.zeros(0):prod():item())
        assert.same({{1}, {1}}, ordo.zeros(2, 0):prod(2, true):totable())
        assert.equals("int64", ordo.zeros(2, 0, "int32"):prod(2):dtype())
        -- int64 wraps modulo 2^64, as sum does
        assert.equals(0, ordo.tensor({2 ^ 32, 2 ^ 32}, "int64"):prod():item())
        assert.same({-2, 4, -8}, ordo.tensor({-2, -2, -2}, "int32"):cumprod():totable())
        H.raises(function() return ordo.zeros(2, 3):cumprod() end, "cumprod", "dim", "2x3")
        H.raises(function() return ordo.zeros(2, 3):cumprod(3) end, "cumprod", "dim")
        H.raises(function() return ordo.zeros(2, 3):prod(3) end, "prod", "dim 3", "2x3")
        H.raises(function() return ordo.zeros(2, 3):prod("x") end, "prod", "dim must be an integer")
    end)

    it("sort ascending and descending over each dim: values and indices, every dtype and layout", function()
        math.randomseed(62)
        for _, dt in ipairs(R.DTYPES) do
            for _, layout in ipairs(H.LAYOUTS) do
                local shape = H.rand_shape(3, 6, true)
                if #shape == 0 then shape = {4} end
                local ra = R.rand(shape, dt)
                local a = H.make(ordo, ra, layout)
                for d = 1, #shape do
                    for _, desc in ipairs({false, true}) do
                        local what = ("sort(%d, %s) %s %s %s"):format(d, tostring(desc), dt, layout, R.shape_str(shape))
                        local v, i = a:sort(d, desc)
                        local rv, ri = ref_sort(ra, d, desc)
                        H.check(v, rv, 0, 0, what .. " values")
                        H.check(i, ri, 0, 0, what .. " indices")
                        H.check(a:argsort(d, desc), ri, 0, 0, what .. " argsort")
                    end
                end
            end
        end
    end)

    it("sort is stable, puts NaN last (first descending), defaults to the last dim", function()
        local a = ordo.tensor({{2, 0 / 0, 1, 2, -1}, {5, 5, 5, 0, 5}})
        local v, i = a:sort()
        assert.same({1, 2, 3, 5}, {i:totable()[2][2], i:totable()[2][3], i:totable()[2][4], i:totable()[2][5]})
        assert.same({5, 3, 1, 4, 2}, i:totable()[1])
        local row = v:totable()[1]
        assert.same({-1, 1, 2, 2}, {row[1], row[2], row[3], row[4]})
        assert.is_true(row[5] ~= row[5])
        local _, di = a:sort(true)
        assert.same({2, 1, 4, 3, 5}, di:totable()[1])
        assert.same({1, 2, 3, 5, 4}, di:totable()[2])
        -- 2^53 + 1 and 2^53 are one double: int64 lines sort on the integers
        local big = ordo.tensor({2 ^ 53, 2 ^ 53, 3}, "int64") + ordo.tensor({1, 0, 0}, "int64")
        assert.same({3, 2, 1}, big:argsort():totable())
        H.raises(function() return a:sort(1, "down") end, "sort", "descending", "string")
        H.raises(function() return a:sort(3) end, "sort", "dim")
    end)

    it("kthvalue and median along each dim and over all, against sorted lines", function()
        math.randomseed(64)
        for _, dt in ipairs(R.DTYPES) do
            local shape = {3, 4, 5}
            local ra = R.rand(shape, dt)
            local a = H.make(ordo, ra, "transposed")
            for d = 1, 3 do
                local sv, si = ref_sort(ra, d, false)
                local lines_s = lines_of(shape, d)
                local n = shape[d]
                for _, k in ipairs({1, math.floor((n + 1) / 2), n}) do
                    local v, i = a:kthvalue(k, d, true)
                    local vt, it_ = v:reshape(-1):totable(), i:reshape(-1):totable()
                    for li, line in ipairs(lines_s) do
                        assert.equals(sv.data[line[k]], vt[li], ("kthvalue(%d, %d) %s line %d"):format(k, d, dt, li))
                        assert.equals(si.data[line[k]], it_[li], ("kthvalue index (%d, %d) %s"):format(k, d, dt))
                    end
                end
                local mv, mi = a:median(d)
                local _, kv = a:kthvalue(math.floor((n + 1) / 2), d)
                assert.same(kv:totable(), mi:totable(), "median indices " .. d .. " " .. dt)
                assert.same(a:kthvalue(math.floor((n + 1) / 2), d):totable(), mv:totable(), "median " .. d .. " " .. dt)
            end
            -- over everything: the lower median of the 60 values, the 30th smallest
            local sorted = {}
            for k = 1, 60 do sorted[k] = ra.data[k] end
            table.sort(sorted)
            assert.equals(sorted[30], a:median():item(), "median() " .. dt)
            assert.same({}, a:median():shape())
            assert.equals(a:dtype(), a:median():dtype())
        end
        -- a line with NaN has median NaN (and a NaN's index); the others are not touched
        local x = ordo.tensor({{3, 1, 2, 5}, {0 / 0, 4, 1, 2}})
        local v, i = x:median(2)
        assert.equals(2, v:totable()[1])
        assert.is_true(v:totable()[2] ~= v:totable()[2])
        assert.same({3, 1}, i:totable())
        assert.is_true(x:median():item() ~= x:median():item())
        -- keepdim, 0-dim inputs, errors
        assert.same({2, 1}, x:median(2, true):shape())
        assert.equals(5, ordo.tensor(5):median():item())
        assert.equals(1, select(2, ordo.tensor(5):kthvalue(1)):item())
        H.raises(function() return x:kthvalue(5, 2) end, "kthvalue", "1..4", "5")
        H.raises(function() return x:kthvalue(0) end, "kthvalue", "1..4")
        H.raises(function() return ordo.zeros(0):median() end, "median", "empty")
        H.raises(function() return ordo.zeros(2, 0):median(2) end, "median", "dim 2 of size 0")
        H.raises(function() return x:median(3) end, "median", "dim 3")
    end)

    it("topk: the k largest or smallest along a dim, in order, with indices", function()
        local a = ordo.tensor({{3, 9, 1, 7}, {4, 4, 8, 0}})
        local v, i = a:topk(2)
        assert.same({{9, 7}, {8, 4}}, v:totable())
        assert.same({{2, 4}, {3, 1}}, i:totable())
        v, i = a:topk(1, 1, false)
        assert.same({{3, 4, 1, 0}}, v:totable())
        assert.same({{1, 2, 1, 2}}, i:totable())
        assert.same({2, 0}, a:topk(0):shape())
        -- contiguous results, as Torch's: view takes them
        v, i = a:topk(2)
        assert.same({9, 7, 8, 4}, v:view(-1):totable())
        assert.same({2, 4, 3, 1}, i:view(-1):totable())
        assert.same({1, 3, 0, 4}, (a:topk(2, 2, false)):view(4):totable())
        H.raises(function() return a:topk(5) end, "topk", "0..4", "2x4", "5")
        H.raises(function() return a:topk(1, 2, "yes") end, "topk", "largest", "string")
    end)

    it("topk with k up to half the line, kthvalue and median (selections, no sort) are sort's exactly: ties by "
       .. "index, NaN the largest, every dtype, non-contiguous lines", function()
        math.randomseed(65)
        local DTS = {"float32", "float64", "int32", "int64", "uint8"}
        -- the same shape and values, NaN equal to NaN
        local function same(want, got, what)
            assert.same(want:shape(), got:shape(), what)
            local w = want:numel() > 0 and want:reshape(-1):totable() or {}
            local g = got:numel() > 0 and got:reshape(-1):totable() or {}
            for j = 1, #w do
                assert(w[j] == g[j] or (w[j] ~= w[j] and g[j] ~= g[j]),
                       ("%s: element %d is %s, sort gives %s"):format(what, j, tostring(g[j]), tostring(w[j])))
            end
        end
        for trial = 1, 200 do
            local dt = DTS[trial % 5 + 1]
            local nd = math.random(1, 3)
            local shape, numel = {}, 1
            for k = 1, nd do
                shape[k] = math.random(1, k == nd and 40 or 5)
                numel = numel * shape[k]
            end
            local data = {}
            for i = 1, numel do
                -- few distinct values: many ties; NaN in float lines one time in eight
                local v = math.random(0, 4)
                if ISFLOAT[dt] then
                    v = math.random(-3, 3) / 2
                    if math.random(8) == 1 then v = 0 / 0 end
                end
                data[i] = v
            end
            local a = ordo.tensor(data, dt):view(shape)
            if nd > 1 and trial % 2 == 0 then a = a:transpose(1, nd) end -- lines with a stride
            if dt == "int64" and trial % 3 == 0 then a = a + 2 ^ 53 end -- beyond a double's integers
            local d = math.random(1, nd)
            local n = a:size(d)
            for _, k in ipairs({0, 1, math.floor(n / 2), math.random(0, math.floor(n / 2))}) do
                for _, largest in ipairs({true, false}) do
                    local what = ("topk(%d, %d, %s) %s %s"):format(k, d, tostring(largest), dt,
                                                                   table.concat(a:shape(), "x"))
                    local sv, si = a:sort(d, largest)
                    local v, i = a:topk(k, d, largest)
                    same(sv:narrow(d, 1, k), v, what .. " values")
                    same(si:narrow(d, 1, k), i, what .. " indices")
                    assert.is_true(v:is_contiguous() and i:is_contiguous(), what .. " contiguous")
                end
            end
            -- kthvalue and median (a selection): sort's k-th; a line with NaN has median its last NaN
            local what = ("%s %s dim %d"):format(dt, table.concat(a:shape(), "x"), d)
            local sv, si = a:sort(d)
            for _, k in ipairs({1, n, math.random(1, n), math.floor((n + 1) / 2)}) do
                local kv, ki = a:kthvalue(k, d, true)
                same(sv:narrow(d, k, 1), kv, what .. " kthvalue " .. k)
                same(si:narrow(d, k, 1), ki, what .. " kthvalue index " .. k)
            end
            local m = math.floor((n + 1) / 2)
            local wv, wi = sv:narrow(d, m, 1), si:narrow(d, m, 1)
            if ISFLOAT[dt] then
                local nan = sv:narrow(d, n, 1):isnan()
                wv, wi = ordo.where(nan, sv:narrow(d, n, 1), wv), ordo.where(nan, si:narrow(d, n, 1), wi)
            end
            local mv, mi = a:median(d, true)
            same(wv, mv, what .. " median")
            same(wi, mi, what .. " median index")
            local all = a:reshape(-1):sort()
            local whole = all[math.floor((all:numel() + 1) / 2)]
            if ISFLOAT[dt] and all[all:numel()] ~= all[all:numel()] then whole = 0 / 0 end
            local got = a:median():item()
            assert(got == whole or (got ~= got and whole ~= whole), what .. " median(): " .. tostring(got))
        end
        -- the selection runs no sort (n log n, n int64 indices): the profiler sees topk alone
        local x = ordo.randn({4, 10000})
        ordo.engine.wait_for_all()
        ordo.profiler.clear()
        ordo.profiler.start()
        local v = x:topk(5)
        local kv = x:kthvalue(3, 2)
        local kv2 = x:kthvalue(7000, 2)
        local mv = x:median(2)
        local m = x:median()
        ordo.engine.wait_for_all()
        ordo.profiler.stop()
        local summary = ordo.profiler.summary()
        ordo.profiler.clear()
        assert.is_nil(summary:find("sort", 1, true), "a sort ran:\n" .. summary)
        assert.is_truthy(summary:find("topk", 1, true), summary)
        assert.same({4, 5}, v:shape())
        assert.same({4}, kv:shape())
        assert.same({4}, kv2:shape())
        assert.same({4}, mv:shape())
        assert.same({}, m:shape())
    end)

    it("gradients of cumsum, sort, topk, median and kthvalue match numerical differentiation", function()
        ordo.manual_seed(3)
        local x = ordo.randn({3, 5}, "float64"):requires_grad()
        for _, fn in ipairs({
            function(t) return t:cumsum(2) end, function(t) return t:cumsum(-2) end,
            function(t) return t:reshape(15):cumsum() end,
            function(t) return (t:sort(2)) end, function(t) return (t:sort(1, true)) end,
            function(t) return (t:topk(2)) end, function(t) return (t:topk(2, 1, false)) end,
            function(t) return t:median() end, function(t) return (t:median(2)) end,
            function(t) return (t:kthvalue(2, 1)) end,
        }) do
            assert.is_true(ordo.autograd.gradcheck(fn, {x}))
        end
    end)

    it("gradients of cumprod and prod match numerical differentiation, zeros included", function()
        ordo.manual_seed(4)
        local x = ordo.randn({3, 5}, "float64")
        -- one zero in row 1, two in row 2: the gradients a division by x would get wrong
        x[1][3] = 0
        x[2][2], x[2][5] = 0, 0
        x:requires_grad_()
        for _, fn in ipairs({
            function(t) return t:cumprod(2) end, function(t) return t:cumprod(-2) end,
            function(t) return t:reshape(15):cumprod() end,
            function(t) return t:prod() end, function(t) return t:prod(2) end,
            function(t) return t:prod(1, true) end, function(t) return t:t():prod(1) end,
        }) do
            assert.is_true(ordo.autograd.gradcheck(fn, {x}))
        end
        -- the exact values: d prod / d x_i is the product of the others
        local y = ordo.tensor({2, 0, 3, 0.5}, "float64"):requires_grad_()
        y:prod():backward()
        assert.same({0, 3, 0, 0}, y.grad:totable())
        local z = ordo.tensor({2, 0, 3, 0.5}, "float64"):requires_grad_()
        z:cumprod():sum():backward()
        assert.same({1, 11, 0, 0}, z.grad:totable())
    end)
end)
