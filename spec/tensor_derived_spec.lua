-- Ops made of other ops (lua/ordo/derived.lua): statistics, comparisons
-- answering with a Lua boolean, eye and linspace, chunk and split.  Each
-- is checked against plain Lua on small tensors, and its gradient by
-- gradcheck where it has one.
local ordo = require "ordo"
local H = require "support.helpers"

local function close(want, got, tol)
    tol = tol or 1e-5
    if type(want) == "number" then
        assert.is_true(math.abs(want - got) <= tol * (1 + math.abs(want)),
                       ("want %s, got %s"):format(tostring(want), tostring(got)))
        return
    end
    assert.equals(#want, #got)
    for i = 1, #want do close(want[i], got[i], tol) end
end

-- plain-Lua statistics of a list
local function mean(xs)
    local s = 0
    for _, x in ipairs(xs) do s = s + x end
    return s / #xs
end
local function var(xs, correction)
    local m, s = mean(xs), 0
    for _, x in ipairs(xs) do s = s + (x - m) ^ 2 end
    return s / (#xs - correction)
end

describe("derived ops", function()
    local rows = {{1, 2, 3, 4}, {4, 6, 8, -1}, {0.5, -2, 7, 3}}
    local all = {}
    for _, r in ipairs(rows) do for _, x in ipairs(r) do all[#all + 1] = x end end
    local function col(j) return {rows[1][j], rows[2][j], rows[3][j]} end

    it("var and std over all elements and over a dim, keepdim, correction; integers in float32", function()
        local a = ordo.tensor(rows, "float64")
        close(var(all, 1), a:var():item())
        close(var(all, 0), a:var(nil, nil, 0):item())
        close(math.sqrt(var(all, 1)), a:std():item())
        local want = {}
        for i = 1, 3 do want[i] = var(rows[i], 1) end
        close(want, a:var(2):totable())
        close(want, a:var(-1):totable())
        local by_col = a:std(1, true)
        assert.same({1, 4}, by_col:shape())
        for j = 1, 4 do close(math.sqrt(var(col(j), 1)), by_col:totable()[1][j]) end
        local i = ordo.tensor({1, 2, 3, 4}, "int32")
        assert.equals("float32", i:var():dtype())
        close(var({1, 2, 3, 4}, 1), i:var():item())
        local one = ordo.tensor({5}):var():item()
        assert.is_true(one ~= one, "the variance of one element is NaN (0 / 0)")
        H.raises(function() return a:var(3) end, "dim")
        H.raises(function() return a:var(1, false, "x") end, "var", "correction")
    end)

    it("norm: 2 (default), 1, inf and other p, over all and over a dim", function()
        local a = ordo.tensor(rows, "float64")
        local s1, s2, mx, s3 = 0, 0, 0, 0
        for _, x in ipairs(all) do
            s1, s2, s3 = s1 + math.abs(x), s2 + x * x, s3 + math.abs(x) ^ 3
            mx = math.max(mx, math.abs(x))
        end
        close(math.sqrt(s2), a:norm():item())
        close(s1, a:norm(1):item())
        close(mx, a:norm("inf"):item())
        close(mx, a:norm(math.huge):item())
        close(s3 ^ (1 / 3), a:norm(3):item())
        local want = {}
        for i = 1, 3 do
            local s = 0
            for _, x in ipairs(rows[i]) do s = s + x * x end
            want[i] = math.sqrt(s)
        end
        close(want, a:norm(2, 2):totable())
        assert.same({3, 1}, a:norm(2, 2, true):shape())
        assert.equals("float32", ordo.tensor({3, 4}, "int64"):norm():dtype())
        close(5, ordo.tensor({3, 4}, "int64"):norm():item())
        H.raises(function() return a:norm(0) end, "norm", "p")
        H.raises(function() return a:norm("two") end, "norm", "p")
    end)

    it("logsumexp is log(sum(exp)) without overflow, over all or a dim", function()
        local a = ordo.tensor(rows, "float64")
        local s = 0
        for _, x in ipairs(all) do s = s + math.exp(x) end
        close(math.log(s), a:logsumexp():item(), 1e-12)
        local want = {}
        for i = 1, 3 do
            local r = 0
            for _, x in ipairs(rows[i]) do r = r + math.exp(x) end
            want[i] = math.log(r)
        end
        close(want, a:logsumexp(2):totable(), 1e-12)
        assert.same({3, 1}, a:logsumexp(2, true):shape())
        close(1000 + math.log(2), ordo.tensor({1000, 1000}):logsumexp():item())
        assert.equals(-math.huge, ordo.tensor({-math.huge, -math.huge}):logsumexp():item())
        assert.equals(math.huge, ordo.tensor({math.huge, 1}):logsumexp():item())
    end)

    it("gradients of var, std, norm and logsumexp match numerical differentiation", function()
        local x = ordo.randn({3, 4}, "float64"):requires_grad()
        for _, fn in ipairs({
            function(t) return t:var() end, function(t) return t:std(2) end,
            function(t) return t:norm() end, function(t) return t:norm(1, 1) end,
            function(t) return t:logsumexp(2) end, function(t) return t:logsumexp() end,
        }) do
            assert.is_true(ordo.autograd.gradcheck(fn, {x}))
        end
    end)

    it("allclose and equal answer with a Lua boolean", function()
        local a = ordo.tensor(rows)
        assert.is_true(ordo.allclose(a, a + 1e-6))
        assert.is_false(ordo.allclose(a, a + 1e-3))
        assert.is_true(a:allclose(a + 1e-3, 1e-2))
        assert.is_true(ordo.allclose(ordo.tensor({1, 1}), 1))
        assert.is_true(ordo.allclose(a, a:narrow(1, 1, 1) * 0 + a)) -- broadcast
        assert.is_false(ordo.allclose(ordo.tensor({0 / 0}), ordo.tensor({0 / 0})))
        assert.is_true(ordo.allclose(ordo.zeros(0), ordo.zeros(0)))
        assert.is_true(ordo.equal(a, a:clone()))
        assert.is_true(a:equal(a:to("float64")))
        assert.is_false(ordo.equal(a, a + 1))
        assert.is_false(ordo.equal(a, a:narrow(1, 1, 2)))
        assert.is_false(ordo.equal(ordo.zeros(2, 3), ordo.zeros(3, 2)))
        H.raises(function() return ordo.allclose(a, "x") end, "allclose", "string")
        H.raises(function() return ordo.equal(a, 1) end, "equal", "number")
    end)

    it("all and any: Lua booleans over every element, uint8 tensors along a dim", function()
        assert.is_false(ordo.tensor({1, 2, 0}):all())
        assert.is_true(ordo.tensor({1, -2, 0.5}):all())
        assert.is_true(ordo.tensor({0 / 0}):all()) -- NaN is nonzero
        assert.is_false(ordo.zeros(3):any())
        assert.is_true(ordo.tensor({0, 0, 3}, "int32"):any())
        assert.is_true(ordo.zeros(0):all())
        assert.is_false(ordo.zeros(0):any())
        local m = ordo.tensor({{1, 0, 1}, {1, 1, 1}})
        local a = m:all(2)
        assert.equals("uint8", a:dtype())
        assert.same({0, 1}, a:totable())
        assert.same({{1, 1, 1}}, m:any(1, true):totable())
    end)

    it("randint and randperm: ranges, dtypes, a permutation, reproducible with manual_seed", function()
        ordo.manual_seed(5)
        local r = ordo.randint(-2, 3, {2000})
        assert.equals("int64", r:dtype())
        local seen = {}
        for _, v in ipairs(r:totable()) do
            assert.is_true(v >= -2 and v <= 2, "randint value " .. v .. " outside -2..2")
            seen[v] = (seen[v] or 0) + 1
        end
        for v = -2, 2 do assert.is_true((seen[v] or 0) > 300, "value " .. v .. " drawn too rarely") end
        assert.equals("int32", ordo.randint(4, {3}, "int32"):dtype())
        assert.same({2, 3}, ordo.randint(4, {2, 3}, {dtype = "uint8"}):shape())
        ordo.manual_seed(9)
        local p1 = ordo.randperm(50):totable()
        ordo.manual_seed(9)
        assert.same(p1, ordo.randperm(50):totable())
        local sorted = {}
        for i, v in ipairs(p1) do sorted[i] = v end
        table.sort(sorted)
        for i = 1, 50 do assert.equals(i, sorted[i]) end
        assert.same({0}, ordo.randperm(0):shape())
        H.raises(function() return ordo.randint(3, 3, {2}) end, "randint", "low < high")
        H.raises(function() return ordo.randint(3, "x") end, "randint", "shape", "string")
        H.raises(function() return ordo.randperm(-1) end, "randperm", "-1")
    end)

    it("eye and linspace, with a dtype", function()
        assert.same({{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, ordo.eye(3):totable())
        local e = ordo.eye(2, 3, "int64")
        assert.equals("int64", e:dtype())
        assert.same({{1, 0, 0}, {0, 1, 0}}, e:totable())
        assert.same({0, 2}, ordo.eye(0, 2):shape())
        local l = ordo.linspace(-1, 1, 5)
        assert.equals("float32", l:dtype())
        assert.same({-1, -0.5, 0, 0.5, 1}, l:totable())
        local l64 = ordo.linspace(0, 1, 11, "float64"):totable()
        assert.equals(1, l64[11])
        close(0.3, l64[4], 1e-15)
        assert.same({2}, ordo.linspace(2, 7, 1):totable())
        assert.same({0}, ordo.linspace(2, 7, 0):shape())
        H.raises(function() return ordo.eye(-1) end, "eye", "-1")
        H.raises(function() return ordo.linspace(0, 1, 2.5) end, "linspace", "2.5")
    end)

    it("dot, outer, tril, triu, flip, diag, masked_select against plain Lua; gradients", function()
        local a, b = ordo.tensor({1, 2, 3}, "float64"), ordo.tensor({4, -5, 6}, "float64")
        assert.equals(12, a:dot(b):item())
        assert.same({{4, -5, 6}, {8, -10, 12}, {12, -15, 18}}, a:outer(b):totable())
        local m = ordo.arange(1, 13, "float64"):view(3, 4)
        local mt = m:totable()
        for _, k in ipairs({-2, -1, 0, 1, 3}) do
            local lo, up = m:tril(k):totable(), m:triu(k):totable()
            for i = 1, 3 do
                for j = 1, 4 do
                    assert.equals(j - i <= k and mt[i][j] or 0, lo[i][j])
                    assert.equals(j - i >= k and mt[i][j] or 0, up[i][j])
                end
            end
        end
        assert.same({3, 2, 4}, ordo.ones(3, 2, 4):triu():shape()) -- a batch of matrices
        assert.same({{9, 10, 11, 12}, {5, 6, 7, 8}, {1, 2, 3, 4}}, m:flip(1):totable())
        assert.same({{12, 11, 10, 9}, {8, 7, 6, 5}, {4, 3, 2, 1}}, m:flip({1, -1}):totable())
        local same = m:flip({})
        assert.same(mt, same:totable())
        same:fill_(0) -- a copy, not m
        assert.equals(1, m:totable()[1][1])
        assert.same({1, 6, 11}, m:diag():totable())
        assert.same({1, 6}, m:t():narrow(1, 1, 2):diag():totable())
        assert.same({{1, 0, 0}, {0, 2, 0}, {0, 0, 3}}, a:diag():totable())
        assert.same({7, 8, 9, 10, 11, 12}, m:masked_select(m:gt(6)):totable())
        assert.same({1, 4, 5, 8, 9, 12}, m:masked_select(ordo.tensor({1, 0, 0, 1}, "uint8")):totable())
        assert.same({0}, m:masked_select(m:gt(100)):shape())
        local x = ordo.randn({3, 4}, "float64"):requires_grad()
        local v = ordo.randn({4}, "float64"):requires_grad()
        local mask = ordo.tensor({{1, 0, 1, 1}, {0, 0, 1, 0}, {1, 1, 1, 0}}, "uint8")
        for _, fn in ipairs({
            function(t) return t:tril() end, function(t) return t:triu(1) end, function(t) return t:flip({1, 2}) end,
            function(t) return t:diag() end, function(t) return t:masked_select(mask) end,
        }) do
            assert.is_true(ordo.autograd.gradcheck(fn, {x}))
        end
        local u = ordo.randn({3}, "float64"):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(p, q) return p:outer(q) end, {v, u}))
        assert.is_true(ordo.autograd.gradcheck(function(p) return p:dot(p) end, {v}))
        H.raises(function() return a:dot(ordo.ones(2)) end, "dot", "3", "2")
        H.raises(function() return a:tril() end, "tril", "matrix")
        H.raises(function() return m:tril(0.5) end, "tril", "integer")
        H.raises(function() return m:flip(3) end, "dim")
        H.raises(function() return ordo.ones(2, 2, 2):diag() end, "diag", "2x2x2")
    end)

    it("chunk and split cut views along a dim; writes reach the base", function()
        local a = ordo.arange(10)
        local sizes = {}
        for i, p in ipairs(a:chunk(3)) do sizes[i] = p:numel() end
        assert.same({4, 4, 2}, sizes)
        sizes = {}
        for i, p in ipairs(a:chunk(20)) do sizes[i] = p:numel() end
        assert.equals(10, #sizes)
        local parts = a:split(4)
        assert.same({8, 9}, parts[3]:totable())
        parts = a:split({3, 0, 7})
        assert.same({0, 1, 2}, parts[1]:totable())
        assert.same({0}, parts[2]:shape())
        parts[3]:fill_(-1)
        assert.same({0, 1, 2, -1, -1, -1, -1, -1, -1, -1}, a:totable())
        local m = ordo.arange(12):view(3, 4)
        local halves = m:chunk(2, 2)
        assert.same({{0, 1}, {4, 5}, {8, 9}}, halves[1]:totable())
        assert.same({{2, 3}, {6, 7}, {10, 11}}, halves[2]:totable())
        H.raises(function() return a:split({3, 3}) end, "split", "6", "10")
        H.raises(function() return a:split(0) end, "split", "size")
        H.raises(function() return a:chunk(0) end, "chunk", "count")
    end)
end)
