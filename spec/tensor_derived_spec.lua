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

    it("var and std of float32 values far from 0: the rounding of the mean is corrected for (Torch's 0.25, not 0.5)", function()
        -- 1e7 and 1e7 + 1 alternating: both float32s, their mean 1e7 + 0.5 is not
        local n = 1000
        local x = ordo.arange(n):remainder(2):add(1e7)
        local want = 0.25 * n / (n - 1)
        close(want, x:var():item())
        close(math.sqrt(want), x:std():item())
        close(0.25, x:var(nil, false, 0):item())
        local half = 0.25 * (n / 2) / (n / 2 - 1)
        close({half, half}, x:view(2, n / 2):var(2):totable())
        close({want}, x:view(n, 1):var(1):totable())
        close(want, x:view(10, 100):var({1, 2}):item())
        local v = x:var_mean()
        close(want, v:item())
        -- a constant input still has variance 0 exactly, and std a gradient of 0
        for _, c in ipairs({0.1, 1 / 3, 1e7 + 0.3, -7.77}) do
            local k = ordo.full({7}, c):requires_grad()
            assert.equals(0, k:var():item())
            local s = k:std()
            assert.equals(0, s:item())
            s:backward()
            assert.same({0, 0, 0, 0, 0, 0, 0}, k.grad:totable())
        end
    end)

    it("sum, mean, var, std, logsumexp, norm, all and any over a list of dims, as Torch's; gradients", function()
        -- a 2x3x4 tensor of known values, reduced over dims 1 and 3: one answer per middle index
        local vals, n = {}, 0
        for i = 1, 2 do
            vals[i] = {}
            for j = 1, 3 do
                vals[i][j] = {}
                for k = 1, 4 do n = n + 1; vals[i][j][k] = (n * 7) % 11 - 5 end
            end
        end
        local t = ordo.tensor(vals, "float64")
        local function over_1_3(j)
            local xs = {}
            for i = 1, 2 do for k = 1, 4 do xs[#xs + 1] = vals[i][j][k] end end
            return xs
        end
        local want = {sum = {}, mean = {}, var = {}, std = {}, lse = {}, norm = {}}
        for j = 1, 3 do
            local xs = over_1_3(j)
            local s, e, q = 0, 0, 0
            for _, x in ipairs(xs) do s, e, q = s + x, e + math.exp(x), q + x * x end
            want.sum[j], want.mean[j], want.var[j] = s, s / #xs, var(xs, 1)
            want.std[j], want.lse[j], want.norm[j] = math.sqrt(var(xs, 1)), math.log(e), math.sqrt(q)
        end
        close(want.sum, t:sum({1, 3}):totable())
        close(want.sum, ordo.sum(t, {-1, 1}):totable()) -- any order, negative dims
        close(want.mean, t:mean({1, 3}):totable())
        close(want.var, t:var({1, 3}):totable())
        close(want.std, t:std({3, 1}):totable())
        close(want.lse, t:logsumexp({1, 3}):totable())
        close(want.norm, t:norm(2, {1, 3}):totable())
        assert.same({1, 3, 1}, t:mean({1, 3}, true):shape())
        close(want.mean, t:mean({1, 3}, true):reshape(3):totable())
        assert.same({{1, 1, 1}}, t:ne(0):any({1, 3}, true):reshape(1, 3):totable())
        assert.same({0, 0, 0}, t:eq(100):any({1, 3}):totable())
        close({t:sum():item()}, {t:sum({1, 2, 3}):item()})
        assert.same({0, 0}, ordo.zeros({2, 0, 3}):sum({2, 3}):totable()) -- nothing to add: 0
        -- gradients reach every element, through the merged dims
        local x = ordo.randn({2, 3, 4}, {dtype = "float64"}):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(v) return v:mean({1, 3}) end, {x}))
        assert.is_true(ordo.autograd.gradcheck(function(v) return v:var({2, 3}, true) end, {x}))
        assert.is_true(ordo.autograd.gradcheck(function(v) return v:norm(2, {1, 2}) end, {x}))
        H.raises(function() return t:sum({}) end, "sum", "list of dims is empty")
        H.raises(function() return t:mean({2, -2}) end, "mean", "appears twice")
        H.raises(function() return t:var({1, 4}) end, "var", "dim 4 out of range")
    end)

    it("amax and amin over all, a dim or a list of dims", function()
        local t = ordo.tensor({{{1, 9}, {4, -2}}, {{7, 0}, {3, 5}}})
        assert.equals(9, t:amax():item())
        assert.equals(-2, t:amin():item())
        assert.same({{7, 9}, {4, 5}}, t:amax(1):totable())
        assert.same({{1, -2}, {0, 3}}, t:amin(3):totable())
        assert.same({9, 7}, t:amax({2, 3}):totable())
        assert.same({{{-2}}, {{0}}}, t:amin({-1, 2}, true):totable())
        H.raises(function() return t:amax({1, 1}) end, "amax", "twice")
    end)

    it("repeat_interleave: a count for all, or one per element (zero skips it); gradients", function()
        local t = ordo.tensor({{1, 2}, {3, 4}})
        assert.same({1, 1, 2, 2, 3, 3, 4, 4}, t:repeat_interleave(2):totable())
        assert.same({{1, 2}, {1, 2}, {3, 4}, {3, 4}}, t:repeat_interleave(2, 1):totable())
        assert.same({{1, 2, 2, 2}, {3, 4, 4, 4}}, t:repeat_interleave({1, 3}, 2):totable())
        assert.same({{3, 4}, {3, 4}}, t:repeat_interleave(ordo.tensor({0, 2}, "int64"), 1):totable())
        assert.same({2, 2}, ordo.tensor({1, 2, 3}):repeat_interleave({0, 2, 0}):totable())
        assert.same({1, 1, 3}, ordo.tensor({1, 2, 3}):repeat_interleave({2, 0, 1}):totable())
        assert.same({0, 2}, t:repeat_interleave(0, 1):shape())
        assert.same({1, 1, 2, 2}, ordo.tensor({1, 2}):repeat_interleave({2}):totable()) -- one count for all
        -- a copy, as Torch's, also where a view would do (repeats 1; one element along the dim)
        local o = ordo.tensor({5})
        local r3 = o:repeat_interleave(3)
        r3[1] = 0 -- (one element of a stride-0 view was written through to o)
        r3:fill_(1)
        t:repeat_interleave(1):fill_(0)
        ordo.tensor({{1}, {2}}):repeat_interleave(2, 2):fill_(0)
        assert.same({5}, o:totable())
        assert.same({{1, 2}, {3, 4}}, t:totable())
        local x = ordo.randn({2, 3}, {dtype = "float64"}):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(v) return v:repeat_interleave({2, 0, 1}, 2) end, {x}))
        assert.is_true(ordo.autograd.gradcheck(function(v) return v:repeat_interleave(3, 1) end, {x}))
        H.raises(function() return t:repeat_interleave({1, 2, 3}, 1) end, "repeat_interleave", "3 counts for 2")
        H.raises(function() return t:repeat_interleave(-1) end, "repeat_interleave", ">= 0", "-1")
        H.raises(function() return t:repeat_interleave({1, -1}, 1) end, "repeat_interleave", ">= 0")
        H.raises(function() return t:repeat_interleave(ordo.tensor({1.5, 1}), 1) end, "repeat_interleave", "integers")
        H.raises(function() return t:repeat_interleave("x") end, "repeat_interleave", "string")
    end)

    it("to(u) and type_as(u) take u's dtype (and to, u's device)", function()
        local t = ordo.tensor({1.5, 2})
        local d = ordo.zeros({1}, {dtype = "float64"})
        assert.equals("float64", t:to(d):dtype())
        assert.equals("int32", t:type_as(ordo.zeros({1}, "int32")):dtype())
        assert.same({1, 2}, t:type_as(ordo.zeros({1}, "int32")):totable())
        assert.equals(t, t:to(t)) -- already there: t itself
        H.raises(function() return t:type_as(3) end, "type_as", "tensor")
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
        H.raises(function() return a:norm(-1) end, "norm", "p", "-1")
        H.raises(function() return a:norm("two") end, "norm", "p")
    end)

    it("norm 0 (the nonzero count) and -inf (the smallest magnitude), as Torch", function()
        local x = ordo.tensor({{1, 0, -3}, {0, 0, -0.5}, {0, 0, 0}}, "float64")
        assert.equals(3, x:norm(0):item())
        assert.same({2, 1, 0}, x:norm(0, 2):totable())
        assert.same({{2}, {1}, {0}}, x:norm(0, 2, true):totable())
        assert.equals(2, ordo.tensor({1, 0, 3}, "int32"):norm(0):item())
        assert.equals(1, ordo.tensor({0 / 0, 0}):norm(0):item()) -- NaN is not 0
        assert.equals(0, x:norm("-inf"):item())
        assert.same({0, 0, 0}, x:norm(-math.huge, 2):totable())
        assert.same({1, 0.5}, ordo.tensor({{1, -3, 2}, {4, -0.5, 7}}):norm("-inf", 2):totable())
        assert.equals(0.5, ordo.tensor({{1, -3, 2}, {4, -0.5, 7}}):norm("-inf", {1, 2}):item())
        local m = ordo.tensor({0 / 0, 1}):norm("-inf"):item()
        assert.is_true(m ~= m) -- NaN propagates, as min
        local w = ordo.tensor({3, -1, 2}, "float64"):requires_grad()
        w:norm("-inf"):backward()
        assert.same({0, -1, 0}, w.grad:totable())
        -- the count's gradient is 0, as Torch's (it had none: its backward raised)
        w.grad = nil
        w:norm(0):backward()
        assert.same({0, 0, 0}, w.grad:totable())
        assert.equals("norm", w:norm(0, 1, true):grad_fn())
        H.raises(function() return ordo.zeros({0}):norm("-inf") end, "norm", "-inf", "no elements", "0")
        H.raises(function() return ordo.zeros({2, 0}):norm("-inf", 2) end, "norm", "-inf", "2x0")
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

    it("prod over an empty dim stays in the graph (a zero gradient)", function()
        local x = ordo.zeros({0, 3}, "float64"):requires_grad()
        local p = x:prod(1)
        assert.same({1, 1, 1}, p:totable())
        assert.is_true(p:needs_grad())
        p:sum():backward()
        assert.same({0, 3}, x.grad:shape())
        local all = ordo.zeros({0}, "float64"):requires_grad():prod()
        assert.equals(1, all:item())
        assert.is_true(all:needs_grad())
        assert.equals("int64", ordo.zeros({0, 2}, "int32"):prod(1):dtype())
    end)

    it("amax, amin and the inf-norm share the gradient among ties, over a dim as over everything", function()
        local function grad_of(f, vals)
            local x = ordo.tensor(vals, "float64"):requires_grad()
            f(x):sum():backward()
            return x.grad:totable()
        end
        assert.same({0.5, 0.5, 0}, grad_of(function(t) return t:amax() end, {3, 3, 1}))
        assert.same({0.5, 0.5, 0}, grad_of(function(t) return t:amax(1) end, {3, 3, 1}))
        assert.same({0.5, 0.5, 0}, grad_of(function(t) return t:amax({1}) end, {3, 3, 1}))
        assert.same({{0.5, 0, 0.5}, {0, 1, 0}}, grad_of(function(t) return t:amin(2, true) end, {{1, 2, 1}, {5, 4, 6}}))
        assert.same({{0.5, 0, 0.5}, {0, 1, 0}}, grad_of(function(t) return t:amin(-1) end, {{1, 2, 1}, {5, 4, 6}}))
        assert.same({{-0.5, 0.5, 0}}, grad_of(function(t) return t:norm("inf", 2) end, {{-3, 3, 1}}))
        -- the values are max's
        local x = ordo.tensor({{1, 7, 7}, {2, 0, 2}}, "float64"):requires_grad()
        assert.same({7, 2}, x:amax(2):totable())
        assert.same({{7}, {2}}, x:amax(-1, true):totable())
        assert.equals("amax", x:amax(2):grad_fn())
        -- away from ties, against differences
        local y = ordo.randn({3, 4}, "float64"):requires_grad()
        for _, fn in ipairs({
            function(t) return t:amax(1) end, function(t) return t:amin(2, true) end,
            function(t) return t:amax({1, 2}) end, function(t) return t:norm("inf", -1) end,
        }) do
            assert.is_true(ordo.autograd.gradcheck(fn, {y}))
        end
    end)

    it("median() of everything shares the gradient among ties (and NaNs), as Torch's; median(dim) its index", function()
        local function grad_of(f, vals)
            local x = ordo.tensor(vals, "float64"):requires_grad()
            f(x):sum():backward()
            return x.grad:totable()
        end
        -- (it gave all of it to one of the tied elements)
        assert.same({0, 0.5, 0.5, 0}, grad_of(function(t) return t:median() end, {1, 2, 2, 3}))
        assert.same({{0.25, 0.25}, {0.25, 0.25}}, grad_of(function(t) return t:median() end, {{2, 2}, {2, 2}}))
        assert.same({0, 0.5, 0, 0.5}, grad_of(function(t) return t:median() end, {1, 0 / 0, 3, 0 / 0}))
        assert.same({1}, grad_of(function(t) return t:median() end, {5}))
        assert.same({0, 1, 0, 0}, grad_of(function(t) return (t:median(1)) end, {1, 2, 2, 3}))
        local x = ordo.tensor({3, 1, 2}, "float64"):requires_grad()
        local m = x:median()
        assert.equals(2, m:item())
        assert.same({}, m:shape())
        assert.equals("median", m:grad_fn())
        assert.is_true(ordo.autograd.gradcheck(function(t) return t:median() end, {ordo.randn({3, 4}, "float64"):requires_grad()}))
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
        -- a constant input (zero spread): std's gradient is 0, as Torch's, not NaN (sqrt's inf times 0)
        local c = ordo.tensor({{2, 2, 2}, {1, 2, 3}}, "float64"):requires_grad()
        c:std(2):sum():backward()
        local g = c.grad:totable()
        assert.same({0, 0, 0}, g[1])
        assert.same({-0.5, 0, 0.5}, g[2])
        local whole = ordo.ones({4}, "float64"):requires_grad()
        whole:std():backward()
        assert.same({0, 0, 0, 0}, whole.grad:totable())
        assert.equal(0, whole:std():item())
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

    it("allclose of integer tensors: the difference does not wrap in their dtype", function()
        local u = function(v) return ordo.tensor(v, "uint8") end
        assert.is_true(ordo.allclose(u({0}), u({1}), 0, 1)) -- 0 - 1 is 255 in uint8
        assert.is_true(ordo.allclose(u({1}), u({0}), 0, 1))
        assert.is_false(ordo.allclose(u({0}), u({2}), 0, 1))
        local big = ordo.full({1}, 2 ^ 62, "int64")
        assert.is_false(ordo.allclose(big, -big)) -- 2^62 - -2^62 wrapped to -2^63
        assert.is_true(ordo.allclose(big, big))
        assert.is_false(ordo.allclose(ordo.tensor({5}, "int32"), ordo.tensor({-2 ^ 31}, "int32"))) -- |b| wrapped
        assert.is_false(ordo.allclose(ordo.tensor({5}, "int32"), -2 ^ 31))
        assert.is_true(ordo.allclose(ordo.tensor({100}, "int32"), ordo.tensor({101}, "int64"), 0.01))
        assert.is_true(ordo.allclose(ordo.tensor({3}, "int32"), ordo.tensor({3.0000001}, "float64")))
    end)

    it("logical_not/and/or/xor: uint8 masks, nonzero (NaN too) as true, a tensor or a number beside", function()
        local a = ordo.tensor({0, 1, 2, 0 / 0, -3})
        local b = ordo.tensor({0, 0, 5, 1, 0}, "int32")
        assert.same({1, 0, 0, 0, 0}, a:logical_not():totable())
        assert.same({0, 0, 1, 1, 0}, a:logical_and(b):totable())
        assert.same({0, 1, 1, 1, 1}, a:logical_or(b):totable())
        assert.same({0, 1, 0, 0, 1}, a:logical_xor(b):totable())
        assert.equals("uint8", a:logical_and(b):dtype())
        assert.same({0, 0, 0, 0, 0}, a:logical_and(0):totable())
        assert.same({0, 1, 1, 1, 1}, a:logical_and(0 / 0):totable())
        assert.same({1, 0, 0, 0, 0}, a:logical_xor(true):totable())
        assert.same({1, 1, 0, 0, 1}, ordo.logical_not(b):totable())
        -- masks of comparisons, broadcast
        local m = ordo.tensor({1, 2, 3}):view(3, 1):gt(1):logical_or(ordo.tensor({1, 0}, "uint8"))
        assert.same({{1, 0}, {1, 1}, {1, 1}}, m:totable())
        H.raises(function() return a:logical_and("x") end, "logical_and", "string")
        H.raises(function() return a:logical_or(ordo.zeros(2)) end, "logical_or: shapes 5 and 2 cannot be broadcast")
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

    it("randint past 2^53: every value of a narrow range, never high (low added in int64)", function()
        ordo.manual_seed(3)
        -- 2^53 + 1 is not a double: the draw added to low in float64 gave only even values
        local d = ordo.randint(2 ^ 53, 2 ^ 53 + 4, {4000}):sub(2 ^ 53)
        assert.same({0, 1, 2, 3}, d:unique():totable())
        -- doubles are 1024 apart at 2^62: the values were 0, 1024 and 2048 (high itself)
        d = ordo.randint(2 ^ 62, 2 ^ 62 + 2048, {20000}):sub(2 ^ 62)
        assert.equals(0, d:min():item())
        assert.equals(2047, d:max():item())
        assert.is_true(d:unique():numel() > 1900, "only " .. d:unique():numel() .. " distinct values of 2048")
        d = ordo.randint(-2 ^ 62 - 2048, -2 ^ 62, {20000}):add(2 ^ 62)
        assert.is_true(d:min():item() >= -2048 and d:max():item() <= -1)
        assert.is_true(d:unique():numel() > 1900)
        -- the other integer dtypes still get their range
        assert.same({-5, -4, -3}, ordo.randint(-5, -2, {500}, "int32"):unique():totable())
        assert.same({253, 254, 255}, ordo.randint(253, 256, {500}, "uint8"):unique():totable())
    end)

    it("randint and randperm: float dtypes within their exact integers, dtype aliases, options checked", function()
        -- float32 holds the integers up to 2^24: past it draws rounded (high itself came out)
        H.raises(function() return ordo.randint(0, 2 ^ 25, {4}, "float32") end, "randint",
                 "values 0..33554431 do not fit in float32")
        H.raises(function() return ordo.randperm(2 ^ 24 + 1, "float32") end, "randperm",
                 "values 1..16777217 do not fit in float32")
        H.raises(function() return ordo.randint(-2 ^ 53 - 2, 0, {4}, {dtype = "double"}) end, "randint", "float64")
        assert.equals("float32", ordo.randint(-2 ^ 24, 2 ^ 24 + 1, {3}, "float32"):dtype())
        -- the aliases are the dtypes they name: "i64" missed int64's exact path (only even values)
        ordo.manual_seed(2)
        assert.same({0, 1, 2, 3}, ordo.randint(2 ^ 53, 2 ^ 53 + 4, {2000}, "i64"):sub(2 ^ 53):unique():totable())
        assert.equals("int64", ordo.randperm(3, {dtype = "long"}):dtype())
        H.raises(function() return ordo.randint(0, 3, {4}, {dtype = "int32", requires_grad = true}) end, "randint",
                 "only float tensors (float32, float64) can require a gradient, got int32")
        H.raises(function() return ordo.randint(0, 3, {4}, {dtype = "int32", bogus = true}) end, "randint",
                 "unknown option 'bogus'")
        H.raises(function() return ordo.randint(0, 3, {4}, "bogus") end, "randint", "unknown dtype 'bogus'")
        H.raises(function() return ordo.randint("5", {4}) end, "randint", 'got 0 and string "5"')
        H.raises(function() return ordo.randperm(3, {dtype = "bogus"}) end, "randperm", "unknown dtype 'bogus'")
    end)

    it("multinomial never draws a zero weight, not even where the uniform draw is 0", function()
        -- seed 9: one of the first 2^22 float32 uniforms is 0, on a category of weight 1;
        -- its Gumbel key was -inf, tied with the zero weight's, which was picked
        ordo.manual_seed(9)
        assert.equals(0, ordo.tensor({0, 1}):multinomial(2 ^ 21, true):eq(1):sum():item())
        ordo.manual_seed(9)
        local rows = ordo.tensor({0, 1}):view(1, 2):expand(2 ^ 21, 2)
        assert.equals(0, rows:multinomial(1):eq(1):sum():item())
    end)

    it("multinomial: Torch's draws, with and without replacement, frequencies as the weights, checked weights", function()
        ordo.manual_seed(1)
        local n = 20000
        local s = ordo.tensor({0.1, 0, 0.6, 0.3}):multinomial(n, true)
        assert.equals("int64", s:dtype())
        assert.same({n}, s:shape())
        local counts = {0, 0, 0, 0}
        for _, v in ipairs(s:totable()) do counts[v] = counts[v] + 1 end
        assert.equals(0, counts[2]) -- a zero weight is never drawn
        for i, p in ipairs({0.1, 0, 0.6, 0.3}) do
            assert.is_true(math.abs(counts[i] / n - p) < 0.015, ("category %d: %d of %d"):format(i, counts[i], n))
        end
        -- without replacement (the default): rows of distinct indices; the first
        -- in proportion to the weights, the next among the rest in proportion
        local rows = ordo.tensor({1, 2, 3, 4}, "float64"):view(1, 4):expand(6000, 4):contiguous()
        local first, second_after_4, total_after_4 = {0, 0, 0, 0}, {0, 0, 0, 0}, 0
        local draws = ordo.multinomial(rows, 3)
        assert.same({6000, 3}, draws:shape())
        for _, r in ipairs(draws:totable()) do
            assert.is_true(r[1] ~= r[2] and r[1] ~= r[3] and r[2] ~= r[3], table.concat(r, ","))
            first[r[1]] = first[r[1]] + 1
            if r[1] == 4 then
                second_after_4[r[2]] = second_after_4[r[2]] + 1
                total_after_4 = total_after_4 + 1
            end
        end
        for i = 1, 4 do assert.is_true(math.abs(first[i] / 6000 - i / 10) < 0.025, "first " .. i) end
        for i = 1, 3 do
            assert.is_true(math.abs(second_after_4[i] / total_after_4 - i / 6) < 0.04, "second " .. i)
        end
        -- many draws with replacement go in blocks (bounded memory): the blocks' draws differ
        local many = ordo.ones({2, 1000}):multinomial(5000, true)
        assert.same({2, 5000}, many:shape())
        assert.is_true(many:min():item() >= 1 and many:max():item() <= 1000)
        assert.is_true(many:narrow(2, 4001, 1000):unique():numel() > 500)
        -- n = the number of nonzero weights: a permutation of them
        local perm = ordo.tensor({0, 2, 0, 1, 5}):multinomial(3):totable()
        table.sort(perm)
        assert.same({2, 4, 5}, perm)
        -- the same seed, the same draws
        ordo.manual_seed(3)
        local a = ordo.tensor({{1, 2, 3}, {3, 0, 1}}):multinomial(2):totable()
        ordo.manual_seed(3)
        assert.same(a, ordo.tensor({{1, 2, 3}, {3, 0, 1}}):multinomial(2):totable())
        -- bad weights fail the result at its wait; bad arguments at the call
        H.raises(function() return ordo.tensor({1, -1}):multinomial(1):totable() end, "multinomial (weights)",
                 "value -1 at element 2")
        H.raises(function() return ordo.tensor({1, 0 / 0}):multinomial(1, true):totable() end,
                 "multinomial (weights)", "element 2")
        H.raises(function() return ordo.tensor({1, 1 / 0}):multinomial(1, true):totable() end,
                 "multinomial (weights)", "inf at element 2")
        H.raises(function() return ordo.tensor({{1, 1}, {1, 0}}):multinomial(2):totable() end,
                 "multinomial (nonzero weights)", "value 1 at element 2 is outside [2, inf]")
        H.raises(function() return ordo.tensor({0, 0}):multinomial(1, true):totable() end,
                 "multinomial (nonzero weights)", "value 0 at element 1")
        H.raises(function() return ordo.tensor({1, 2}):multinomial(3) end, "multinomial", "cannot draw 3 samples of 2")
        H.raises(function() return ordo.tensor({1, 2}, "int64"):multinomial(1) end, "multinomial", "int64")
        H.raises(function() return ordo.ones({2, 2, 2}):multinomial(1) end, "multinomial", "2x2x2")
        H.raises(function() return ordo.ones({2, 0}):multinomial(1, true) end, "multinomial", "no categories")
        H.raises(function() return ordo.ones({2}):multinomial(0) end, "multinomial", ">= 1, got 0")
        H.raises(function() return ordo.ones({2}):multinomial(1.5) end, "multinomial", "1.5")
        H.raises(function() return ordo.ones({2}):multinomial(1, 1) end, "multinomial", "true or false")
        -- Torch's keyword table (generator, out) is refused, not dropped; trailing nils are no arguments
        H.raises(function() return ordo.ones({2}):multinomial(1, true, {generator = 1}) end, "multinomial",
                 "further argument", "engine's generator")
        H.raises(function() return ordo.multinomial(ordo.ones({2}), 1, false, nil, {}) end, "multinomial",
                 "further argument")
        assert.equals(2, ordo.ones({2}):multinomial(2, false, nil):numel())
    end)

    it("randint over an int64 range past 2^53 draws every bit (a float64 draw left the low bits 0)", function()
        ordo.manual_seed(11)
        local n = 4000
        for _, c in ipairs({{0, 2 ^ 62}, {-2 ^ 62, 2 ^ 62}, {5, 2 ^ 54 + 5}, {-2 ^ 63, 2 ^ 63 - 1024}}) do
            local lo, hi = c[1], c[2]
            local x = ordo.randint(lo, hi, {n})
            assert.equals("int64", x:dtype())
            local odd = (x % 2):sum():item() -- was 0: only even numbers
            assert.is_true(odd > 0.4 * n and odd < 0.6 * n, ("%s..%s: %d odd of %d"):format(lo, hi, odd, n))
            assert.is_true((x % 1024):unique():numel() > 900, "low bits vary") -- was 2 values
            assert.is_true(x:ge(ordo.full({}, lo, "int64")):all())
            assert.is_true(x:lt(ordo.full({}, hi, "int64")):all()) -- high stays out (high - low rounds up to 2^64)
            local upper = x:ge(ordo.full({}, lo / 2 + hi / 2, "int64")):sum():item() -- above the middle
            assert.is_true(upper > 0.4 * n and upper < 0.6 * n, "both halves of the range")
        end
        local top = ordo.randint(2 ^ 63 - 2 ^ 54, 2 ^ 63 - 1024, {n})
        assert.is_true(top:lt(ordo.full({}, 2 ^ 63 - 1024, "int64")):all())
        ordo.manual_seed(3)
        local a = ordo.randint(0, 2 ^ 60, {8})
        ordo.manual_seed(3)
        assert.is_true(ordo.equal(a, ordo.randint(0, 2 ^ 60, {8})))
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
        -- Torch's dtype rules: one dtype, kept (an int32 dot wraps as int32; no widening to int64 as sum does)
        local i32 = ordo.tensor({65536, 65536, 3}, "int32")
        assert.equals("int32", i32:dot(i32):dtype())
        assert.equals(9, i32:dot(i32):item())
        local u8 = ordo.tensor({200, 2, 3}, "uint8")
        assert.equals("uint8", u8:dot(u8):dtype())
        assert.equals(40013 % 256, u8:dot(u8):item())
        H.raises(function() return a:dot(ordo.tensor({1, 2, 3}, "int32")) end, "dot", "one dtype", "float64", "int32")
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

    -- plain-Lua matrices: a list of rows
    local function lua_mm(x, y)
        local r = {}
        for i = 1, #x do
            r[i] = {}
            for j = 1, #y[1] do
                local acc = 0
                for k = 1, #y do acc = acc + x[i][k] * y[k][j] end
                r[i][j] = acc
            end
        end
        return r
    end

    it("mm, bmm, mv and trace against plain Lua; gradients; shapes checked", function()
        ordo.manual_seed(3)
        local x, y = ordo.randn({3, 4}, {dtype = "float64"}), ordo.randn({4, 2}, {dtype = "float64"})
        local tx, ty = x:totable(), y:totable()
        close(lua_mm(tx, ty)[2], x:mm(y):totable()[2], 1e-12)
        local mmr = x:mm(y):totable()
        for i = 1, 3 do close(lua_mm(tx, ty)[i], mmr[i], 1e-12) end
        local v = ordo.randn({4}, {dtype = "float64"})
        local tv = v:totable()
        local want = {}
        for i = 1, 3 do
            want[i] = 0
            for k = 1, 4 do want[i] = want[i] + tx[i][k] * tv[k] end
        end
        close(want, x:mv(v):totable(), 1e-12)
        local bx, by = ordo.randn({2, 3, 4}, {dtype = "float64"}), ordo.randn({2, 4, 5}, {dtype = "float64"})
        local bt = bx:bmm(by)
        assert.same({2, 3, 5}, bt:shape())
        for b = 1, 2 do
            local w = lua_mm(bx:totable()[b], by:totable()[b])
            for i = 1, 3 do close(w[i], bt:totable()[b][i], 1e-12) end
        end
        local sq = ordo.randn({4, 4}, {dtype = "float64"})
        local tr = 0
        for i = 1, 4 do tr = tr + sq:totable()[i][i] end
        close(tr, sq:trace():item(), 1e-12)
        close(tx[1][1] + tx[2][2] + tx[3][3], x:trace():item(), 1e-12) -- not square: the main diagonal
        for _, fn in ipairs({function(p, q) return p:mm(q) end}) do
            assert.is_true(ordo.autograd.gradcheck(fn, {x:clone():requires_grad(), y:clone():requires_grad()}))
        end
        assert.is_true(ordo.autograd.gradcheck(function(p, q) return p:bmm(q) end,
                                               {bx:requires_grad(), by:requires_grad()}))
        assert.is_true(ordo.autograd.gradcheck(function(p, q) return p:mv(q) end,
                                               {x:clone():requires_grad(), v:requires_grad()}))
        assert.is_true(ordo.autograd.gradcheck(function(p) return p:trace() end, {sq:requires_grad()}))
        H.raises(function() return x:mm(v) end, "mm", "3x4", "4", "2-dim")
        H.raises(function() return x:mm(ordo.ones(3, 2)) end, "mm", "3x4", "3x2", "inner dimensions 4 and 3")
        H.raises(function() return bx:bmm(ordo.ones(3, 4, 5)) end, "bmm", "batch sizes", "2x3x4", "3x4x5")
        H.raises(function() return bx:bmm(y) end, "bmm", "3-dim")
        H.raises(function() return x:mv(y) end, "mv", "1-dim", "4x2")
        H.raises(function() return v:trace() end, "trace", "2-dim", "4")
        H.raises(function() return x:mm("x") end, "mm", "string")
    end)

    it("log2, log10, isnan, isinf, isfinite, nan_to_num against plain Lua", function()
        local nan, inf = 0 / 0, math.huge
        local vals = {1, 8, 0.5, 1000, 0, -2}
        for _, dt in ipairs({"float32", "float64"}) do
            local t = ordo.tensor(vals, dt)
            local l2, l10 = t:log2():totable(), t:log10():totable()
            for i, x in ipairs(vals) do
                local w2, w10 = math.log(x) / math.log(2), math.log10(x)
                if x > 0 then
                    close(w2, l2[i], 1e-6)
                    close(w10, l10[i], 1e-6)
                elseif x == 0 then
                    assert.equals(-inf, l2[i])
                else
                    assert.is_true(l2[i] ~= l2[i])
                end
            end
            local odd = ordo.tensor({1, nan, inf, -inf, -0.5}, dt)
            assert.same({0, 1, 0, 0, 0}, odd:isnan():totable())
            assert.same({0, 0, 1, 1, 0}, odd:isinf():totable())
            assert.same({1, 0, 0, 0, 1}, odd:isfinite():totable())
            assert.equals("uint8", odd:isnan():dtype())
            local big = dt == "float32" and 3.4028234663852886e38 or 1.7976931348623157e308
            assert.same({1, 0, big, -big, -0.5}, odd:nan_to_num():totable())
            assert.same({1, 7, 8, -9, -0.5}, odd:nan_to_num(7, 8, -9):totable())
        end
        assert.equals(3, ordo.tensor({8}, "int32"):log2():item())
        assert.equals("float32", ordo.tensor({8}, "int32"):log2():dtype())
        local it = ordo.tensor({1, -2}, "int64")
        assert.same({0, 0}, it:isnan():totable())
        assert.same({0, 0}, it:isinf():totable())
        assert.same({1, 1}, it:isfinite():totable())
        assert.same({1, -2}, it:nan_to_num():totable())
        H.raises(function() return ordo.ones(2):nan_to_num("x") end, "nan_to_num", "nan", "string")
        H.raises(function() return ordo.ones(2):nan_to_num(0, 0, {}) end, "nan_to_num", "neginf", "table")
    end)

    it("lerp, fmod and remainder against plain Lua, for floats and integers; gradients", function()
        local a = ordo.tensor({1, 2, 3})
        assert.same({1.5, 2, 2.5}, a:lerp(2, 0.5):totable())
        assert.same({1, 3, 3}, a:lerp(ordo.tensor({1, 4, 3}), ordo.tensor({0.5, 0.5, 0})):totable())
        -- integers interpolate in float32: stop - self wrapped in uint8 (5 to 3 by 0.25 gave 68.5),
        -- and the dtype no longer depends on whether the weight is a whole number
        local u5, u3 = ordo.tensor({5}, "uint8"), ordo.tensor({3}, "uint8")
        for _, c in ipairs({{0.25, 4.5}, {1, 3}, {2, 1}, {0, 5}}) do
            local r = u5:lerp(u3, c[1])
            assert.equals("float32", r:dtype())
            assert.same({c[2]}, r:totable())
        end
        assert.same({4.5}, u5:lerp(u3, ordo.tensor({0.25})):totable())
        assert.same({4.5}, u5:lerp(3, 0.25):totable())
        assert.equals("float32", ordo.tensor({5}, "int64"):lerp(ordo.tensor({3}, "int32"), 1):dtype())
        H.raises(function() return ordo.tensor({5}, "int32"):lerp_(ordo.tensor({3}, "int32"), 1) end, "lerp_", "int32")
        -- Python's % (floor) and C's fmod (trunc) on every sign pairing
        local xs = {-7, 7, -7, 7, 6, -6, 0, 5}
        local ys = {3, 3, -3, -3, 3, -3, 4, 7}
        local function lua_fmod(x, y) return math.fmod(x, y) end
        local function lua_rem(x, y) return x - math.floor(x / y) * y end
        for _, dt in ipairs({"float32", "float64", "int32", "int64"}) do
            local x, y = ordo.tensor(xs, dt), ordo.tensor(ys, dt)
            local f, r = x:fmod(y), x:remainder(y)
            assert.equals(dt, f:dtype())
            assert.equals(dt, r:dtype())
            for i = 1, #xs do
                assert.equals(lua_fmod(xs[i], ys[i]), f:totable()[i], dt .. " fmod " .. i)
                assert.equals(lua_rem(xs[i], ys[i]), r:totable()[i], dt .. " remainder " .. i)
            end
            -- a number divisor, both signs
            for _, d in ipairs({3, -3}) do
                local fr, rr = x:fmod(d):totable(), x:remainder(d):totable()
                for i = 1, #xs do
                    assert.equals(lua_fmod(xs[i], d), fr[i])
                    assert.equals(lua_rem(xs[i], d), rr[i])
                end
            end
        end
        close({0.5, 1.25}, ordo.tensor({2.5, -2.75}, "float64"):remainder(2):totable(), 1e-12)
        local fx = ordo.tensor({1, 2}):fmod(0):totable()
        assert.is_true(fx[1] ~= fx[1], "fmod by 0 of floats is NaN")
        local w = ordo.tensor({0.3, 0.7}, "float64"):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(p) return p:lerp(ordo.ones(2, {dtype = "float64"}), 0.3) end, {w}))
        assert.is_true(ordo.autograd.gradcheck(function(p) return p:remainder(0.5) end, {w}))
        H.raises(function() return a:lerp("x", 1) end, "lerp", "end", "string")
        H.raises(function() return a:lerp(1, {}) end, "lerp", "weight", "table")
        H.raises(function() return a:fmod("x") end, "fmod", "divisor", "string")
        H.raises(function() return a:remainder(ordo.ones(2)) end, "2", "3")
    end)

    it("div with rounding mode floor (floor_divide) and trunc, for floats and integers, as Torch and Python's //", function()
        local xs = {-7, 7, -7, 7, 6, -6, 0, 5}
        local ys = {2, 2, -2, -2, 3, -3, 4, 7}
        local function lua_trunc(q) return q >= 0 and math.floor(q) or -math.floor(-q) end
        for _, dt in ipairs({"float32", "float64", "int32", "int64"}) do
            local x, y = ordo.tensor(xs, dt), ordo.tensor(ys, dt)
            local f, t, fd = x:div(y, "floor"), x:div(y, "trunc"), ordo.floor_divide(x, y)
            assert.equals(dt, f:dtype())
            assert.equals(dt, t:dtype())
            for i = 1, #xs do
                assert.equals(math.floor(xs[i] / ys[i]), f:totable()[i], dt .. " floor " .. i)
                assert.equals(math.floor(xs[i] / ys[i]), fd:totable()[i], dt .. " floor_divide " .. i)
                assert.equals(lua_trunc(xs[i] / ys[i]), t:totable()[i], dt .. " trunc " .. i)
            end
            for _, d in ipairs({2, -2}) do
                local fr = x:div(d, "floor"):totable()
                for i = 1, #xs do assert.equals(math.floor(xs[i] / d), fr[i], dt .. " floor by " .. d) end
            end
        end
        -- floats as Python: from the exact remainder, so 1 // 0.1 is 9 (floor(1 / 0.1) is 10)
        assert.same({9, -10, 52, -53, 6}, ordo.tensor({1, -1, 5.3, -5.3, 0.7}, "float64"):div(0.1, "floor"):totable())
        assert.same({-3, 3, 10}, ordo.tensor({-7.5, 7.5, 1}):div(ordo.tensor({2, 2, 0.1}), "trunc"):totable())
        local z = ordo.tensor({0, 0, 1, -1}):div(ordo.tensor({3, -3, 0, 0}), "floor"):totable()
        assert.equals(1 / 0, 1 / z[1]) -- +0
        assert.equals(-1 / 0, 1 / z[2]) -- -0
        assert.same({1 / 0, -1 / 0}, {z[3], z[4]}) -- a float divisor of 0 gives a / b
        -- an integer tensor by a fraction computes in float32; in place keeps the dtype
        assert.same({-3, 2}, ordo.tensor({-7, 7}, "int64"):div(2.5, "floor"):totable())
        assert.equals("float32", ordo.tensor({-7, 7}, "int64"):div(2.5, "floor"):dtype())
        local i = ordo.tensor({-7, 7}, "int32")
        assert.equals(i, i:floor_divide_(2))
        assert.same({-4, 3}, i:totable())
        local fl = ordo.tensor({-7.5, 7})
        fl:div_(2, "floor")
        assert.same({-4, 3}, fl:totable())
        fl = ordo.tensor({-7.5, 7})
        fl:div_(2, "trunc")
        assert.same({-3, 3}, fl:totable())
        -- the gradient is zero, as Torch's
        local w = ordo.tensor({1.5, -2.5}):requires_grad()
        local out = w:div(2, "floor") * 3
        out:sum():backward()
        assert.same({0, 0}, w.grad:totable())
        H.raises(function() return ordo.tensor({1}, "int32"):div(0, "floor") end, "div", "division by zero")
        H.raises(function() return ordo.tensor({1}, "int32"):floor_divide(0) end, "floor_divide", "division by zero")
        H.raises(function() return ordo.tensor({1}, "int32"):div_(2.5, "floor") end, "div_", "float32", "int32")
        H.raises(function() return ordo.tensor({1}):div(2, "round") end, "div", "rounding mode", "floor")
        H.raises(function() return ordo.tensor({1}):div("x", "trunc") end, "div", "divisor", "string")
    end)

    it("roll and tile against plain Lua; gradients", function()
        local m = ordo.arange(1, 13):view(3, 4)
        local tm = m:totable()
        local function lua_roll2(t, s1, s2)
            local r = {}
            for i = 1, #t do
                r[i] = {}
                for j = 1, #t[1] do
                    r[i][j] = t[(i - 1 - s1) % #t + 1][(j - 1 - s2) % #t[1] + 1]
                end
            end
            return r
        end
        assert.same(lua_roll2(tm, 0, 1), m:roll(1, 2):totable())
        assert.same(lua_roll2(tm, 0, -5), m:roll(-5, -1):totable())
        assert.same(lua_roll2(tm, 2, 3), m:roll({2, 3}, {1, 2}):totable())
        assert.same(tm, m:roll(4, 2):totable())
        assert.same({{12, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}}, m:roll(1):totable()) -- flattened
        assert.same({3, 4}, m:roll(0, 1):shape())
        local r0 = m:roll(0, 1)
        r0:fill_(0) -- a copy, not the tensor itself
        assert.equals(1, m:totable()[1][1])
        assert.same({0}, ordo.zeros(0):roll(3, 1):shape())
        local v = ordo.tensor({1, 2})
        assert.same({1, 2, 1, 2, 1, 2}, v:tile(3):totable())
        assert.same({{1, 2, 1, 2}, {1, 2, 1, 2}}, v:tile(2, 2):totable())
        assert.same({{1, 2}, {1, 2}}, v:tile({2, 1}):totable())
        assert.same({{1, 2, 1, 2}, {3, 4, 3, 4}}, ordo.tensor({{1, 2}, {3, 4}}):tile(2):totable()) -- last dims
        assert.same({0, 2}, ordo.ones(2, 2):tile(0, 1):shape())
        -- a copy, as Torch's, also where a view would do (all counts 1; a repeated dim of size 1)
        local w = ordo.tensor({{1, 2, 3}})
        w:tile(1, 1):fill_(0)
        local w2 = w:tile(2, 1)
        w2:fill_(0) -- (a stride-0 view could not be written)
        w2[1][1] = 7
        assert.same({{1, 2, 3}}, w:totable())
        local x = ordo.randn({2, 3}, {dtype = "float64"}):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(p) return p:roll({1, -1}, {1, 2}) end, {x}))
        assert.is_true(ordo.autograd.gradcheck(function(p) return p:tile(2, 1, 3) end, {x}))
        H.raises(function() return m:roll(1.5, 1) end, "roll", "shift", "1.5")
        H.raises(function() return m:roll({1, 2}, 1) end, "roll", "as many shifts as dims")
        H.raises(function() return m:roll({1}) end, "roll", "one integer")
        H.raises(function() return m:roll(1, 3) end, "dim")
        H.raises(function() return m:tile() end, "tile", "counts")
        H.raises(function() return m:tile(-1) end, "tile", "count 1", "-1")
    end)

    it("logspace and meshgrid (ij and xy)", function()
        close({1, 10, 100, 1000}, ordo.logspace(0, 3, 4):totable())
        local l2 = ordo.logspace(-1, 2, 4, {base = 2, dtype = "float64"})
        assert.equals("float64", l2:dtype())
        close({0.5, 1, 2, 4}, l2:totable(), 1e-15)
        assert.same({0}, ordo.logspace(0, 1, 0):shape())
        -- Torch's base in 4th place, the options (a table, a dtype or a device) after it
        close({0.5, 1, 2, 4}, ordo.logspace(-1, 2, 4, 2):totable())
        assert.equals("float64", ordo.logspace(-1, 2, 4, 2, "float64"):dtype())
        local l3 = ordo.logspace(0, 2, 3, 3, {dtype = "float64"})
        assert.equals("float64", l3:dtype())
        close({1, 3, 9}, l3:totable())
        H.raises(function() ordo.logspace(0, 1, 2, 2, {base = 3}) end, "logspace: base given twice")
        H.raises(function() ordo.logspace(0, 1, 2, -2) end, "logspace: base must be a positive number")
        H.raises(function() ordo.logspace(0, 1, 2, {base = 2}, 5) end, "logspace: takes (start, stop, n, base, opts)")
        -- on an engine of their own: it stays theirs (linspace once made its steps on the default engine)
        local e = ordo.engine.new({kind = "pooled", cpu_workers = 1})
        for _, t in ipairs({ordo.linspace(0, 1, 3, {engine = e}), ordo.logspace(0, 1, 3, {engine = e})}) do
            assert.equals(3, (t * 0 + ordo.ones({3}, {engine = e})):sum():item())
            H.raises(function() return t + ordo.ones({3}) end, "different engines")
        end
        H.raises(function() return ordo.logspace(0, 1, 3, {base = -2}) end, "logspace", "base")
        H.raises(function() return ordo.logspace(0, 1, 3, {bass = 2}) end, "logspace", "unknown option 'bass'")
        local a, b, c = ordo.tensor({1, 2}), ordo.tensor({3, 4, 5}), ordo.tensor({6, 7, 8, 9})
        local X, Y, Z = ordo.meshgrid(a, b, c)
        assert.same({2, 3, 4}, X:shape())
        for i = 1, 2 do
            for j = 1, 3 do
                for k = 1, 4 do
                    assert.same({a[i], b[j], c[k]}, {X[i][j][k], Y[i][j][k], Z[i][j][k]})
                end
            end
        end
        local P, Q = ordo.meshgrid({a, b}, {indexing = "xy"})
        assert.same({{1, 2}, {1, 2}, {1, 2}}, P:totable())
        assert.same({{3, 3}, {4, 4}, {5, 5}}, Q:totable())
        H.raises(function() return ordo.meshgrid(a, ordo.zeros(2, 2)) end, "meshgrid", "argument 2", "2x2")
        H.raises(function() return ordo.meshgrid(a, b, {indexing = "yx"}) end, "meshgrid", "indexing")
        H.raises(function() return ordo.meshgrid() end, "meshgrid", "at least one")
    end)

    it("unique: sorted distinct values, the inverse and the counts, against plain Lua", function()
        math.randomseed(77)
        for _, dt in ipairs({"int64", "int32", "float32", "uint8"}) do
            local vals = {}
            for i = 1, 24 do vals[i] = math.random(0, 6) end
            local t = ordo.tensor(vals, dt):view(4, 6)
            local u, inv, cnt = t:unique({return_inverse = true, return_counts = true})
            local seen, want = {}, {}
            for _, v in ipairs(vals) do
                if not seen[v] then seen[v] = 0; want[#want + 1] = v end
                seen[v] = seen[v] + 1
            end
            table.sort(want)
            assert.same(want, u:totable(), dt)
            assert.equals(dt, u:dtype())
            local pos = {}
            for k, v in ipairs(want) do pos[v] = k end
            local wi, wc = {}, {}
            for i, v in ipairs(vals) do wi[i] = pos[v] end
            for k, v in ipairs(want) do wc[k] = seen[v] end
            assert.same(wi, inv:reshape(-1):totable(), dt .. " inverse")
            assert.same({4, 6}, inv:shape())
            assert.same(wc, cnt:totable(), dt .. " counts")
            -- u[inverse] gives the input back
            assert.same(t:reshape(-1):totable(), u:index_select(1, inv:reshape(-1)):totable())
        end
        assert.same({}, ordo.zeros(0):unique():totable())
        local u, counts = ordo.tensor({2, 2}):unique({return_counts = true})
        assert.same({2}, u:totable())
        assert.same({2}, counts:totable())
        local n = ordo.tensor({0 / 0, 1, 0 / 0}):unique():totable()
        assert.equals(3, #n) -- each NaN is distinct
        -- sorted = false leaves the order free, as Torch's (it was refused): these come out sorted too
        assert.same({1, 3}, ordo.tensor({3, 1, 3}):unique({sorted = false}):totable())
        H.raises(function() return ordo.zeros(2):unique({sorted = 0}) end, "unique", "sorted")
        H.raises(function() return ordo.zeros(2):unique({dim = "1"}) end, "unique: dim must be an integer")
    end)

    it("unique_consecutive: each run of equal neighbours once, in place, its inverse and counts, as Torch's", function()
        local x = ordo.tensor({1, 1, 2, 2, 3, 1, 1, 2})
        local u, inv, cnt = x:unique_consecutive({return_inverse = true, return_counts = true})
        assert.same({1, 2, 3, 1, 2}, u:totable())
        assert.same({1, 1, 2, 2, 3, 4, 4, 5}, inv:totable())
        assert.same({2, 2, 1, 2, 1}, cnt:totable())
        assert.same(x:totable(), u:index_select(1, inv):totable())
        -- several dims: over the flattened tensor, the inverse in x's shape
        local _, inv2 = ordo.tensor({{1, 1}, {2, 2}}):unique_consecutive({return_inverse = true})
        assert.same({{1, 1}, {2, 2}}, inv2:totable())
        -- with dim: runs of equal slices
        local s = ordo.tensor({{1, 2}, {1, 2}, {3, 4}, {1, 2}})
        local us, is, cs = s:unique_consecutive({dim = 1, return_inverse = true, return_counts = true})
        assert.same({{1, 2}, {3, 4}, {1, 2}}, us:totable())
        assert.same({1, 1, 2, 3}, is:totable())
        assert.same({2, 1, 1}, cs:totable())
        assert.same({{1, 2}, {3, 4}}, ordo.tensor({{1, 1, 2}, {3, 3, 4}}):unique_consecutive({dim = -1}):totable())
        local e, ie, ce = ordo.zeros(0):unique_consecutive({return_inverse = true, return_counts = true})
        assert.same({{0}, {0}, {0}}, {e:shape(), ie:shape(), ce:shape()})
        assert.equals(3, #ordo.tensor({0 / 0, 0 / 0, 1}):unique_consecutive():totable()) -- NaN equals nothing
        assert.same({1, 2}, ordo.unique_consecutive(ordo.tensor({1, 1, 2}, "int32")):totable())
        H.raises(function() return x:unique_consecutive({sorted = true}) end, "unique_consecutive", "unknown option")
        H.raises(function() return x:unique_consecutive({dim = 2}) end, "unique_consecutive", "dim 2 out of range")
        H.raises(function() return x:unique_consecutive({return_counts = 1}) end, "unique_consecutive", "return_counts")
    end)

    it("addmm and baddbmm: beta * self + alpha * product; gradients", function()
        local D = "float64"
        local m, a, b = ordo.randn({2, 4}, D), ordo.randn({2, 3}, D), ordo.randn({3, 4}, D)
        close((m * 0.5 + a:mm(b) * 2):reshape(-1):totable(), m:addmm(a, b, {beta = 0.5, alpha = 2}):reshape(-1):totable(), 1e-12)
        close((m + a:mm(b)):reshape(-1):totable(), m:addmm(a, b):reshape(-1):totable(), 1e-12)
        -- a broadcast self, and beta = 0 ignoring NaN in self
        local bias = ordo.randn({4}, D)
        close((a:mm(b) + bias):reshape(-1):totable(), bias:addmm(a, b):reshape(-1):totable(), 1e-12)
        local nan = ordo.full({2, 4}, 0 / 0, {dtype = D})
        close(a:mm(b):reshape(-1):totable(), nan:addmm(a, b, {beta = 0}):reshape(-1):totable(), 1e-12)
        local bm, ba, bb = ordo.randn({3, 2, 2}, D), ordo.randn({3, 2, 5}, D), ordo.randn({3, 5, 2}, D)
        close((bm * -1 + ba:bmm(bb) * 0.5):reshape(-1):totable(),
              bm:baddbmm(ba, bb, {beta = -1, alpha = 0.5}):reshape(-1):totable(), 1e-12)
        local x, y, z = m:requires_grad(), a:requires_grad(), b:requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(p, q, r) return p:addmm(q, r, {beta = 0.3, alpha = 1.7}) end,
                                               {x, y, z}))
        H.raises(function() return m:addmm(a, b, {gamma = 1}) end, "addmm", "unknown option 'gamma'")
        H.raises(function() return m:addmm(b, a) end, "cannot be multiplied", "3x4 and 2x3")
        -- integers: a scale that does not fit names addmm (mul named itself)
        local u = ordo.tensor({{1, 2}, {3, 4}}, "uint8")
        assert.same({{23, 34}, {51, 74}}, u:addmm(u, u, {beta = 2, alpha = 3}):totable())
        H.raises(function() return u:addmm(u, u, {beta = -1}) end, "addmm: value -1 does not fit in uint8 (beta)")
        H.raises(function() return u:addmm(u, u, {alpha = 300}) end, "addmm: value 300 does not fit in uint8 (alpha)")
        local bu = u:view(1, 2, 2)
        H.raises(function() return bu:baddbmm(bu, bu, {alpha = -2}) end, "baddbmm", "(alpha)")
        H.raises(function() return u:addmm(-1, u) end, "addmm: a must be a tensor, got number") -- (said mm ... as self)
        H.raises(function() return bu:baddbmm(bu, "x") end, "baddbmm: b must be a tensor, got string")
        H.raises(function() return ordo.tensor({3, 1}):argsort(300) end, "argsort: dim 300 out of range") -- (said sort)
        H.raises(function() return m:addmm(b, a) end, "addmm: ", "cannot be multiplied") -- (said mm)
        H.raises(function() return bu:baddbmm(u, bu) end, "baddbmm: ") -- (said bmm)
        -- shapes that cannot be broadcast, and scatter's arguments, named as called (they said div, fmod,
        -- scatter_add_ and full)
        local x3, x22 = ordo.tensor({1, 2, 3}, "int32"), ordo.ones({2, 2}, "float64")
        for _, f in ipairs({"fmod", "remainder", "floor_divide", "fmod_", "remainder_", "floor_divide_"}) do
            H.raises(function() return x3[f](x3:clone(), x22) end, (f:gsub("_$", "")), "cannot be broadcast")
            H.raises(function() return x3[f](x3:clone(), ordo.ones({2}, "int32")) end, (f:gsub("_$", "")),
                     "cannot be broadcast")
        end
        H.raises(function() return ordo.zeros({3}):scatter(ordo.ones({3}), ordo.ones({3}, "int64"), 1) end,
                 "scatter: dim must be an integer")
        H.raises(function() return ordo.zeros({3}, "uint8"):scatter_(1, ordo.ones({3}, "int64"), -1) end,
                 "scatter: value -1 does not fit in uint8")
    end)

    it("addmv, addr and addbmm: beta * self + alpha * (mv, outer, the batch's summed bmm); gradients", function()
        local D = "float64"
        local m, v, c = ordo.randn({3, 4}, D), ordo.randn({4}, D), ordo.randn({3}, D)
        local tm, tv, tc = m:totable(), v:totable(), c:totable()
        local want = {}
        for i = 1, 3 do
            local s = 0
            for j = 1, 4 do s = s + tm[i][j] * tv[j] end
            want[i] = 0.5 * tc[i] + 2 * s
        end
        close(want, c:addmv(m, v, {beta = 0.5, alpha = 2}):totable(), 1e-12)
        close((c + m:mv(v)):totable(), ordo.addmv(c, m, v):totable(), 1e-12)
        local u, w = ordo.randn({3}, D), ordo.randn({4}, D)
        local tu, tw = u:totable(), w:totable()
        local got = m:addr(u, w, {beta = -1, alpha = 3}):totable()
        for i = 1, 3 do
            for j = 1, 4 do close(-tm[i][j] + 3 * tu[i] * tw[j], got[i][j], 1e-12) end
        end
        local ba, bb = ordo.randn({5, 3, 2}, D), ordo.randn({5, 2, 4}, D)
        local sum = ordo.zeros({3, 4}, D)
        for k = 1, 5 do sum = sum + ba[k]:mm(bb[k]) end
        assert.is_true(ordo.allclose(m:addbmm(ba, bb, {beta = 2, alpha = 0.5}), m * 2 + sum * 0.5, 1e-12, 1e-12))
        assert.is_true(ordo.allclose(m:addbmm(ordo.zeros({0, 3, 2}, D), ordo.zeros({0, 2, 4}, D)), m, 0, 0))
        assert.is_true(ordo.autograd.gradcheck(function(p, q, r) return p:addbmm(q, r, {beta = 0.3, alpha = 1.7}) end,
                                               {m:clone():requires_grad(), ba:requires_grad(), bb:requires_grad()}))
        assert.is_true(ordo.autograd.gradcheck(function(p, q, r) return p:addmv(q, r) end,
                                               {c:clone():requires_grad(), m:clone():requires_grad(), v:requires_grad()}))
        assert.is_true(ordo.autograd.gradcheck(function(p, q, r) return p:addr(q, r) end,
                                               {m:clone():requires_grad(), u:requires_grad(), w:requires_grad()}))
        H.raises(function() return c:addmv(m, u) end, "addmv: ", "cannot be multiplied")
        H.raises(function() return m:addr(m, w) end, "addr: ", "1-dim")
        H.raises(function() return m:addbmm(m, m) end, "addbmm: ", "batches")
        H.raises(function() return m:addbmm(ba, bb, {gamma = 1}) end, "addbmm", "unknown option 'gamma'")
        -- self broadcasts to the product's shape, never past it (addmm of a 3x2x2 self gave 3x2x2)
        local sq = ordo.ones({2, 2}, D)
        H.raises(function() return ordo.ones({3, 2, 2}, D):addmm(sq, sq) end,
                 "addmm: self of shape 3x2x2 cannot be broadcast to the product's shape 2x2")
        H.raises(function() return ordo.ones({3, 2, 2}, D):baddbmm(sq:view(1, 2, 2), sq:view(1, 2, 2)) end,
                 "baddbmm: self of shape 3x2x2")
        H.raises(function() return ordo.ones({3}, D):addmm(sq, sq) end, "addmm: self of shape 3") -- (said add)
        H.raises(function() return sq:addmv(sq, ordo.ones({2}, D)) end, "addmv: self of shape 2x2")
        H.raises(function() return ordo.ones({2, 2, 2}, D):addr(u, w) end, "addr: self of shape 2x2x2")
        assert.same({{3, 3}, {3, 3}}, ordo.ones({2, 1}, D):addmm(sq, sq):totable())
        assert.same({{3, 3}, {3, 3}}, ordo.tensor(1, D):addmm(sq, sq):totable())
    end)

    it("einsum against a plain-Lua loop over every index; implicit outputs; gradients; bad equations", function()
        -- the reference: every assignment of the letters, the operands'
        -- product added at the output's place
        local function ref(eq, ts)
            local lhs, rhs = eq:match("^(.-)%->(.*)$")
            local ops = {}
            for part in (lhs .. ","):gmatch("([^,]*),") do ops[#ops + 1] = part end
            local size, order = {}, {}
            local tabs = {}
            for k, part in ipairs(ops) do
                tabs[k] = ts[k]:totable()
                for i = 1, #part do
                    local c = part:sub(i, i)
                    if not size[c] then order[#order + 1] = c end
                    size[c] = ts[k]:size(i)
                end
            end
            local out = {}
            local at = {}
            local function get(t, part)
                for i = 1, #part do t = t[at[part:sub(i, i)]] end
                return t
            end
            local function walk(i)
                if i > #order then
                    local v = 1
                    for k, part in ipairs(ops) do v = v * (#part == 0 and tabs[k] or get(tabs[k], part)) end
                    local key = {}
                    for j = 1, #rhs do key[j] = at[rhs:sub(j, j)] end
                    local kk = table.concat(key, ",")
                    out[kk] = (out[kk] or 0) + v
                    return
                end
                for x = 1, size[order[i]] do
                    at[order[i]] = x
                    walk(i + 1)
                end
            end
            walk(1)
            return out, size
        end
        local function check(eq, ...)
            local ts = {...}
            local y = ordo.einsum(eq, ...)
            local want, size = ref(eq, ts)
            local rhs = eq:match("%->(.*)$")
            assert.equals(#rhs, y:dim(), eq)
            for j = 1, #rhs do assert.equals(size[rhs:sub(j, j)], y:size(j), eq) end
            local flat = y:contiguous():reshape(-1):totable()
            local i = 0
            local key = {}
            local function visit(d)
                if d > #rhs then
                    i = i + 1
                    close(want[table.concat(key, ",")], flat[i], 1e-10)
                    return
                end
                for x = 1, size[rhs:sub(d, d)] do
                    key[d] = x
                    visit(d + 1)
                end
            end
            visit(1)
        end
        local D = "float64"
        local a, b, c = ordo.randn({2, 3}, D), ordo.randn({3, 4}, D), ordo.randn({4, 2}, D)
        local v, w = ordo.randn({3}, D), ordo.randn({5}, D)
        local x3, y3 = ordo.randn({2, 3, 4}, D), ordo.randn({2, 4, 5}, D)
        check("ij,jk->ik", a, b)
        check("ij->ji", a)
        check("ij->", a)
        check("ij->j", a)
        check("i,i->", v, v)
        check("i,j->ij", v, w)
        check("bij,bjk->bik", x3, y3)
        check("bij,bjk->kbi", x3, y3)
        check("ijk,jl->lik", x3:transpose(2, 3):contiguous():view(2, 4, 3):transpose(2, 3), ordo.randn({3, 6}, D))
        check("ij,jk,kl->il", a, b, c)
        check("ij,jk,kl->", a, b, c)
        check("ij,kl->ijkl", a, c)
        check("bij,b->bj", x3, ordo.randn({2}, D))
        -- implicit output: the letters seen once, alphabetically; a table of operands
        assert.is_true(ordo.allclose(ordo.einsum("ij,jk", {a, b}), a:mm(b)))
        assert.is_true(ordo.allclose(ordo.einsum("ba", a), a:t()))
        assert.is_true(ordo.allclose(ordo.einsum("ij,ij", a, a), (a * a):sum()))
        -- gradients through it
        local p, q = ordo.randn({2, 3}, D):requires_grad(), ordo.randn({3, 2, 2}, D):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(s, t) return ordo.einsum("ij,jkl->lik", s, t) end, {p, q}))
        H.raises(function() return ordo.einsum("ii->i", ordo.randn({3, 2})) end, "einsum", "index i repeated", "3 and 2")
        H.raises(function() return ordo.einsum("ij,jk->ik", a, a) end, "einsum", "index j is 3", "operand 2")
        H.raises(function() return ordo.einsum("ij->k", a) end, "einsum", "output index k")
        H.raises(function() return ordo.einsum("ij->ii", a) end, "einsum", "twice in the output")
        H.raises(function() return ordo.einsum("......", a) end, "einsum", "one '...' at most")
        H.raises(function() return ordo.einsum("...i,...i", ordo.zeros(2, 3), ordo.zeros(4, 3)) end, "einsum",
                 "a dim of '...' is 2", "4 in operand 2")
        H.raises(function() return ordo.einsum("...ijk", a) end, "einsum", "names 3 besides '...'")
        H.raises(function() return ordo.einsum("ij", a, b) end, "einsum", "1 operand, got 2 tensors")
        H.raises(function() return ordo.einsum("ijk", a) end, "einsum", "operand 1 has 2 dims")
        H.raises(function() return ordo.einsum("i1", a) end, "einsum", "only letters")
        H.raises(function() return ordo.einsum(3, a) end, "einsum", "equation")
    end)

    it("einsum: a repeated index takes the diagonal, '...' stands for the dims not named, size 1 broadcasts", function()
        local D = "float64"
        local x = ordo.randn({3, 3}, D)
        local t = x:totable()
        close(t[1][1] + t[2][2] + t[3][3], ordo.einsum("ii", x):item(), 1e-12)
        close({t[1][1], t[2][2], t[3][3]}, ordo.einsum("ii->i", x):totable(), 1e-12)
        local y = ordo.randn({2, 3, 3}, D)
        local ty = y:totable()
        local want = {}
        for b = 1, 2 do want[b] = ty[b][1][1] + ty[b][2][2] + ty[b][3][3] end
        close(want, ordo.einsum("bii->b", y):totable(), 1e-12)
        close(want, ordo.einsum("...ii->...", y):totable(), 1e-12)
        -- "iij->ji": x[i, i, j] transposed
        local z = ordo.randn({3, 3, 2}, D)
        local tz = z:totable()
        want = {}
        for j = 1, 2 do
            want[j] = {}
            for i = 1, 3 do want[j][i] = tz[i][i][j] end
        end
        close(want, ordo.einsum("iij->ji", z):totable(), 1e-12)
        local total = 0
        for i = 1, 3 do total = total + tz[i][i][1] + tz[i][i][2] end
        close(total, ordo.einsum("iij->", z):item(), 1e-12)
        -- "...": batched products, the batch dims of each operand right-aligned and broadcast
        local a, b = ordo.randn({4, 2, 3, 5}, D), ordo.randn({2, 5, 6}, D)
        assert.is_true(ordo.allclose(ordo.einsum("...ij,...jk->...ik", a, b), a:matmul(b), 1e-12, 1e-12))
        assert.is_true(ordo.allclose(ordo.einsum("...ij->...ji", a), a:transpose(-1, -2), 0, 0))
        assert.is_true(ordo.allclose(ordo.einsum("i...->i", a), a:sum({2, 3, 4}), 1e-12, 1e-12))
        -- implicit output with "...": its dims first, then the letters seen once
        local v = ordo.randn({5}, D)
        assert.is_true(ordo.allclose(ordo.einsum("...j,j", a, v), a:matmul(v), 1e-12, 1e-12))
        assert.same({4, 2, 3, 5}, ordo.einsum("a...", a:permute({4, 1, 2, 3})):shape())
        -- size 1 broadcasts against the other operands
        local r = ordo.randn({1, 3}, D)
        assert.is_true(ordo.allclose(ordo.einsum("ij,ij->ij", x, r), x * r, 0, 0))
        assert.is_true(ordo.autograd.gradcheck(function(p) return ordo.einsum("ii->i", p) end,
                                               {ordo.randn({3, 3}, D):requires_grad()}))
        assert.is_true(ordo.autograd.gradcheck(function(p, q) return ordo.einsum("...ij,...jk->...ik", p, q) end,
                                               {ordo.randn({2, 3, 4}, D):requires_grad(),
                                                ordo.randn({1, 4, 2}, D):requires_grad()}))
    end)

    it("tensordot: sums of products over an integer's dims or listed dims, against plain Lua; bad dims", function()
        local D = "float64"
        local a, b = ordo.randn({2, 3, 4}, D), ordo.randn({4, 3, 5}, D)
        local ta, tb = a:totable(), b:totable()
        -- a's dims 2 and 3 with b's 2 and 1: r[i][l] = sum over j, k of a[i][j][k] * b[k][j][l]
        local want = {}
        for i = 1, 2 do
            want[i] = {}
            for l = 1, 5 do
                local s = 0
                for j = 1, 3 do for k = 1, 4 do s = s + ta[i][j][k] * tb[k][j][l] end end
                want[i][l] = s
            end
        end
        local r = ordo.tensordot(a, b, {{2, 3}, {2, 1}})
        assert.same({2, 5}, r:shape())
        for i = 1, 2 do close(want[i], r:totable()[i], 1e-12) end
        r = a:tensordot(b, {{-1, -2}, {1, 2}}) -- negative dims; the method form
        for i = 1, 2 do close(want[i], r:totable()[i], 1e-12) end
        -- an integer n: a's last n dims with b's first n (2 by default)
        local c = ordo.randn({3, 4}, D)
        assert.is_true(ordo.allclose(ordo.tensordot(a, c), ordo.einsum("ijk,jk->i", a, c), 1e-12, 1e-12))
        assert.is_true(ordo.allclose(ordo.tensordot(a, b, 1), ordo.einsum("ijk,klm->ijlm", a, b), 1e-12, 1e-12))
        assert.is_true(ordo.allclose(ordo.tensordot(c, c:t(), 0), ordo.einsum("ij,kl->ijkl", c, c:t()), 0, 0))
        close(6, ordo.tensordot(ordo.tensor(2, D), ordo.tensor(3, D), 0):item(), 0)
        assert.same({}, ordo.tensordot(c, c, 2):shape())
        assert.same({{11}}, ordo.tensordot(ordo.tensor({{1, 2}}, "int64"), ordo.tensor({{3}, {4}}, "int64"), 1):totable())
        assert.same({2, 3}, ordo.tensordot(ordo.zeros(2, 0), ordo.zeros(0, 3), 1):shape())
        assert.is_true(ordo.autograd.gradcheck(function(p, q) return ordo.tensordot(p, q, {{2, 3}, {2, 1}}) end,
                                               {a:clone():requires_grad(), b:clone():requires_grad()}))
        H.raises(function() return ordo.tensordot(a, c, {{1}, {1}}) end, "tensordot", "size 2", "size 3")
        H.raises(function() return ordo.tensordot(c, c, 3) end, "tensordot", "dims 3")
        H.raises(function() return ordo.tensordot(c, c, -1) end, "tensordot", "integer >= 0")
        H.raises(function() return ordo.tensordot(c, c, {{1, 1}, {1, 2}}) end, "tensordot", "given twice")
        H.raises(function() return ordo.tensordot(c, c, {{1}, {1, 2}}) end, "tensordot", "one length")
        H.raises(function() return ordo.tensordot(c, c, {{1}, {1}, {2}}) end, "tensordot", "pair of lists")
        H.raises(function() return ordo.tensordot(c, c, {{5}, {1}}) end, "tensordot", "dim 5 out of range")
        H.raises(function() return ordo.tensordot(c, 3) end, "tensordot", "two tensors")
    end)

    it("logcumsumexp: running log-sums without overflow or underflow, against plain Lua; gradients", function()
        local D = "float64"
        -- plain Lua, one line: m + log(sum exp(x - m)) of the prefix
        local function ref(xs)
            local out = {}
            for i = 1, #xs do
                local m = -math.huge
                for j = 1, i do m = math.max(m, xs[j]) end
                local s = 0
                for j = 1, i do s = s + math.exp(xs[j] - m) end
                out[i] = m + math.log(s)
            end
            return out
        end
        local x = ordo.randn({3, 7}, D)
        local tx = x:totable()
        local r = x:logcumsumexp(2):totable()
        for i = 1, 3 do close(ref(tx[i]), r[i], 1e-12) end
        local rt = x:t():logcumsumexp(1):t():totable() -- a transposed view, along dim 1
        for i = 1, 3 do close(ref(tx[i]), rt[i], 1e-12) end
        close(x:logcumsumexp(-1):totable()[2], r[2], 0)
        -- a wide spread: exp(x) overflows or underflows, the result does not
        local wide = {1000, -1000, 1000, 0, -2000}
        close(ref(wide), ordo.tensor(wide, D):logcumsumexp(1):totable(), 1e-12)
        close({-1000, 0, 0}, ordo.tensor({-1000, 0, -1000}, D):logcumsumexp():totable(), 1e-12)
        local inf = ordo.tensor({-math.huge, -math.huge, 1, math.huge, 2}, D):logcumsumexp(1):totable()
        assert.same({-math.huge, -math.huge, 1, math.huge, math.huge}, inf)
        close(2, ordo.tensor(2, D):logcumsumexp(1):item(), 0)
        assert.same({0, 3}, ordo.zeros(0, 3):logcumsumexp(1):shape())
        assert.equals("float32", ordo.tensor({1, 2}, "int64"):logcumsumexp(1):dtype())
        close(ref({0, 0}), ordo.logcumsumexp(ordo.tensor({0, 0}, D), 1):totable(), 1e-12)
        assert.is_true(ordo.autograd.gradcheck(function(p) return p:logcumsumexp(2) end,
                                               {ordo.randn({3, 9}, D):requires_grad()}))
        assert.is_true(ordo.autograd.gradcheck(function(p) return p:logcumsumexp(1) end,
                                               {(ordo.randn({6}, D) * 300):requires_grad()}))
        H.raises(function() return x:logcumsumexp() end, "logcumsumexp", "expected a dim")
        H.raises(function() return x:logcumsumexp(3) end, "logcumsumexp", "dim 3 out of range")
        H.raises(function() return x:logcumsumexp(1, "float64") end, "logcumsumexp", "a dim only")
        -- the products, scans and searches refuse an argument past their last (each was ignored)
        local v = ordo.tensor({1, 3, 2})
        H.raises(function() return v:cummax(1, true) end, "cummax: unexpected extra argument true", "t:cummax(dim)")
        H.raises(function() return v:cumsum(1, "float64", 3) end, "cumsum: unexpected extra argument 3")
        H.raises(function() return v:diff(1, 1, nil, nil, 5) end, "diff: unexpected extra argument 5")
        H.raises(function() return ordo.kron(v, v, 3) end, "kron: unexpected extra argument 3")
        H.raises(function() return ordo.cross(v, v, 1, 2) end, "cross: unexpected extra argument 2")
        H.raises(function() return v:histc(3, 0, 3, 1) end, "histc: unexpected extra argument 1")
        H.raises(function() return ordo.outer(v, v, 1) end, "outer: unexpected extra argument 1")
        H.raises(function() return ordo.tensordot(v, v, 1, 1) end, "tensordot: unexpected extra argument 1")
        H.raises(function() return ordo.searchsorted(v, v, nil, 1) end, "searchsorted: unexpected extra argument 1")
        assert.same({1, 4, 6}, v:cumsum(1, nil):totable()) -- (a trailing nil is no argument)
    end)

    it("nonzero: the positions of the nonzero elements in row-major order, as rows or per dim", function()
        math.randomseed(91)
        for _, dt in ipairs({"float32", "int32", "uint8", "int64"}) do
            local vals = {}
            for i = 1, 24 do vals[i] = math.random() < 0.4 and math.random(1, 5) or 0 end
            local t = ordo.tensor(vals, dt):view(2, 3, 4)
            local want, per = {}, {{}, {}, {}}
            for i = 1, 24 do
                if vals[i] ~= 0 then
                    local p = i - 1
                    local row = {math.floor(p / 12) + 1, math.floor(p / 4) % 3 + 1, p % 4 + 1}
                    want[#want + 1] = row
                    for d = 1, 3 do per[d][#per[d] + 1] = row[d] end
                end
            end
            local got = t:nonzero()
            assert.equals("int64", got:dtype())
            assert.same(#want > 0 and want or {}, #want > 0 and got:totable() or {}, dt)
            assert.same({#want, 3}, got:shape())
            local tuple = t:nonzero({as_tuple = true})
            for d = 1, 3 do assert.same(per[d], tuple[d]:totable(), dt .. " dim " .. d) end
        end
        assert.same({0, 2}, ordo.zeros(2, 2):nonzero():shape())
        assert.same({{1}}, ordo.tensor({0 / 0, 0}):nonzero():totable()) -- NaN is nonzero
        assert.same({1, 0}, ordo.tensor(5):nonzero():shape())
        -- a tensor with a dim of size 0 has no nonzero element (and no division by that size)
        assert.same({0, 2}, ordo.zeros(0, 3):nonzero():shape())
        assert.same({0, 3}, ordo.zeros(2, 0, 4, "int32"):nonzero():shape())
        assert.same({0, 1}, ordo.zeros(0):nonzero():shape())
        local tuple = ordo.zeros(3, 0):nonzero({as_tuple = true})
        assert.same({{0}, {0}}, {tuple[1]:shape(), tuple[2]:shape()})
        H.raises(function() return ordo.zeros(2):nonzero({tuple = true}) end, "nonzero", "unknown option")
    end)

    it("tile and repeat_interleave work on 8-dim tensors; stack and one_hot past 8 dims name themselves", function()
        local S = {1, 2, 1, 2, 1, 1, 1, 3}
        local x = ordo.arange(12, "float64"):view(S):requires_grad()
        local flat = x:reshape(-1):totable()
        local function strides(shape)
            local st, acc = {}, 1
            for k = #shape, 1, -1 do st[k], acc = acc, acc * shape[k] end
            return st
        end
        local sx = strides(S)
        -- every element of y against x at the position its index maps to
        local function check(y, want_shape, src)
            assert.same(want_shape, y:shape())
            local got, sy, pos = y:reshape(-1):totable(), strides(want_shape), {}
            for f = 0, #got - 1 do
                local rest, at = f, 0
                for k = 1, 8 do
                    pos[k] = math.floor(rest / sy[k])
                    rest = rest % sy[k]
                end
                for k = 1, 8 do at = at + src(k, pos[k]) * sx[k] end
                assert.equal(flat[at + 1], got[f + 1])
            end
        end
        local reps = {1, 2, 1, 1, 3, 1, 1, 2}
        local t = x:tile(reps)
        check(t, {1, 4, 1, 2, 3, 1, 1, 6}, function(k, p) return p % S[k] end)
        t:sum():backward()
        assert.same(ordo.full(S, 12, "float64"):totable(), x.grad:totable()) -- each element 2 * 3 * 2 times
        local r = x:repeat_interleave(3, 4)
        check(r, {1, 2, 1, 6, 1, 1, 1, 3}, function(k, p) return k == 4 and math.floor(p / 3) or p end)
        assert.same({1, 2, 1, 0, 1, 1, 1, 3}, x:repeat_interleave(0, 4):shape())
        assert.same({1, 0, 1, 2, 1, 1, 1, 6}, x:tile({1, 0, 1, 1, 1, 1, 1, 2}):shape())
        H.raises(function() return ordo.stack({x, x}) end, "stack", "9 dims", "at most 8")
        -- stack of tensors that need a gradient checks as stack, not as the unsqueeze and cat it is made of
        local a = ordo.ones({2, 3}):requires_grad()
        H.raises(function() return ordo.stack({a, ordo.ones({3, 2})}) end, "stack", "tensor 2 has shape 3x2")
        H.raises(function() return ordo.stack({a, a}, 5) end, "stack", "dim 5 out of range")
        H.raises(function() return ordo.nn.functional.one_hot(ordo.ones(S, "int64")) end, "one_hot", "9 dims")
        H.raises(function() return x:tile({1, 1, 1, 1, 1, 1, 1, 1, 2}) end, "tile", "9 dims")
    end)

    it("masked_select, nonzero and integer cumsum: linear in the elements (no sort), no extra int64 copy", function()
        local n = 100000
        local x = ordo.arange(n):remainder(7) -- 0..6 repeating: every 7th element is 0
        local mask = x:ne(0)
        ordo.engine.wait_for_all()
        ordo.profiler.clear()
        ordo.profiler.start()
        local sel = x:masked_select(mask)
        local nz = x:nonzero()
        local c = mask:cumsum(1)
        ordo.engine.wait_for_all()
        ordo.profiler.stop()
        local summary = ordo.profiler.summary()
        ordo.profiler.clear()
        assert.is_nil(summary:find("sort", 1, true), "an n log n sort ran:\n" .. summary)
        local k = n - math.ceil(n / 7)
        assert.same({k}, sel:shape())
        assert.same({k, 1}, nz:shape())
        assert.equal(1, sel[1])
        assert.equal(6, sel[6])
        assert.equal(1, sel[7]) -- element 9 (x = 1): element 8 (x = 0) skipped
        assert.equal(2, nz[{1, 1}])
        assert.equal(9, nz[{7, 1}])
        assert.equal(n, nz[{k, 1}]) -- x[n] = 4
        assert.equal(k, c[n])
        -- uint8 -> int64 cumsum allocates its int64 result once
        ordo.engine.wait_for_all()
        local before = ordo.memory.total_bytes()
        local c2 = mask:cumsum(1)
        assert.is_true(ordo.memory.total_bytes() - before <= 8 * n + 64,
                       ("cumsum allocated %d bytes for %d elements"):format(ordo.memory.total_bytes() - before, n))
        assert.equal(k, c2[n])
    end)

    it("scatter and scatter_: writes along a dim against plain Lua; a number as src; gradients", function()
        local D = "float64"
        local x = ordo.randn({3, 4}, D)
        local X = x:totable()
        -- along dim 2: row i writes src[i][j] at column index[i][j] (each row's columns distinct)
        local idx2 = ordo.tensor({{2, 4}, {1, 3}, {4, 1}}, "int64")
        local src = ordo.randn({3, 2}, D)
        local Y, I, S = x:scatter(2, idx2, src):totable(), idx2:totable(), src:totable()
        for i = 1, 3 do
            local want = {X[i][1], X[i][2], X[i][3], X[i][4]}
            for j = 1, 2 do want[I[i][j]] = S[i][j] end
            close(want, Y[i], 1e-15)
        end
        -- along dim 1, a number
        local idx1 = ordo.tensor({{3, 1, 2, 3}}, "int64")
        local Z = x:scatter(1, idx1, -5):totable()
        for j, r in ipairs({3, 1, 2, 3}) do
            for i = 1, 3 do close(i == r and -5 or X[i][j], Z[i][j], 1e-15) end
        end
        -- in place, and the input left alone by the out-of-place form
        local c = x:clone()
        assert.equals(c, c:scatter_(2, idx2, src))
        close(Y[2], c:totable()[2], 1e-15)
        close(X[1], x:totable()[1], 1e-15)
        -- gradients: to self where not written, to src everywhere
        local a, b = x:requires_grad(), src:requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(u, v) return u:scatter(2, idx2, v) end, {a, b}))
        H.raises(function() return x:scatter(2, ordo.tensor({{5}}, "int64"), 1):totable() end,
                 "scatter: index 5 out of range for dim 2 of size 4")
        pcall(ordo.engine.wait_for_all)
        H.raises(function() return x:scatter(2, idx2, "a") end, "scatter", "src", "string")
    end)

    it("scatter and scatter_ (one kernel) against plain Lua: random shapes, dims, repeated indices (the last in "
       .. "row-major order wins), views, every dtype", function()
        math.randomseed(7)
        local function numel(shape)
            local n = 1
            for _, s in ipairs(shape) do n = n * s end
            return n
        end
        local function flat(t) return t:numel() > 0 and t:reshape({t:numel()}):totable() or {} end
        local function make(data, shape, dt)
            if #data == 0 then return ordo.zeros(shape, dt) end
            return ordo.tensor(data, dt):view(shape)
        end
        -- row-major strides of shape
        local function strides(shape)
            local st, s = {}, 1
            for k = #shape, 1, -1 do st[k], s = s, s * shape[k] end
            return st
        end
        local function value(dt)
            if dt == "uint8" then return math.random(0, 255) end
            if dt == "int32" or dt == "int64" then return math.random(-1000, 1000) end
            return math.random(-64, 64) / 8
        end
        for trial = 1, 300 do
            local dt = ({"float32", "float64", "int32", "int64", "uint8"})[trial % 5 + 1]
            local nd = math.random(1, 3)
            local shape, ishape, sshape = {}, {}, {}
            for k = 1, nd do shape[k] = math.random(1, 4) end
            local dim = math.random(1, nd)
            for k = 1, nd do
                ishape[k] = k == dim and math.random(0, 5) or math.random(1, shape[k])
                sshape[k] = ishape[k] + math.random(0, 1)
            end
            local n, ni, ns = numel(shape), numel(ishape), numel(sshape)
            local X, IDX, S = {}, {}, {}
            for i = 1, n do X[i] = value(dt) end
            for i = 1, ns do S[i] = value(dt) end
            -- an index expanded along one dim (every row the same indices) one time in four
            local ex = trial % 4 == 0 and nd > 1 and (dim % nd) + 1 or nil
            local ist = strides(ishape)
            for i = 1, ni do
                IDX[i] = math.random(1, shape[dim])
                if ex then -- the entry of the first slice along dim ex (walked before)
                    local q = i - 1
                    IDX[i] = IDX[q - math.floor(q / ist[ex]) % ishape[ex] * ist[ex] + 1]
                end
            end
            local x = make(X, shape, dt)
            if trial % 3 == 0 then -- a view: x is the first columns of a wider tensor
                local wide = ordo.zeros({n, 2}, dt)
                wide[{{}, 1}] = ordo.tensor(X, dt)
                x = wide:select(2, 1):view(shape)
            end
            local index = make(IDX, ishape, trial % 2 == 0 and "int32" or "int64")
            if ex then index = index:narrow(ex, 1, 1):expand(ishape) end
            local src = make(S, sshape, dt)
            -- the reference: index walked in row-major order, each place written over
            local want = {}
            for i = 1, n do want[i] = X[i] end
            local xst, sst = strides(shape), strides(sshape)
            for i = 1, ni do
                local q, to, from = i - 1, 0, 0
                for k = 1, nd do
                    local c = math.floor(q / ist[k])
                    q = q - c * ist[k]
                    to = to + (k == dim and IDX[i] - 1 or c) * xst[k]
                    from = from + c * sst[k]
                end
                want[to + 1] = S[from + 1]
            end
            local what = ("%s shape %s dim %d index %s src %s%s"):format(dt, table.concat(shape, "x"), dim,
                                                                           table.concat(ishape, "x"),
                                                                           table.concat(sshape, "x"), ex and " expanded" or "")
            assert.same(want, flat(x:scatter(dim, index, src)), what)
            assert.same(X, flat(x), what .. ": scatter changed its input")
            local c = x:clone()
            assert.equals(c, c:scatter_(dim, index, src))
            assert.same(want, flat(c), what .. " in place")
            -- in place on a view: written through to its base
            if trial % 3 == 0 then
                assert.same(want, flat(x:scatter_(dim, index, src)), what .. " in place on a view")
            end
            -- a number: every indexed place gets it
            local v = value(dt)
            local wv = {}
            for i = 1, n do wv[i] = X[i] end
            for i = 1, ni do
                local q, to = i - 1, 0
                for k = 1, nd do
                    local cc = math.floor(q / ist[k])
                    q = q - cc * ist[k]
                    to = to + (k == dim and IDX[i] - 1 or cc) * xst[k]
                end
                wv[to + 1] = v
            end
            assert.same(wv, flat(make(X, shape, dt):scatter_(dim, index, v)), what .. " number " .. v)
        end
    end)

    it("scatter_ with a bad index fails naming it and leaves the tensor as it was; bad arguments", function()
        for _, dt in ipairs({"float32", "float64", "int32", "int64", "uint8"}) do
            -- (made by an op: a tensor written from a Lua table is not marked as computed, so a failed
            -- in-place op on it leaves it unreadable, a separate bug)
            local x = ordo.tensor({{1, 2, 3}, {4, 5, 6}}, dt):clone()
            for _, bad in ipairs({4, 0, -1}) do
                local idx = ordo.tensor({{1, bad}}, "int64")
                H.raises(function() x:scatter_(2, idx, ordo.tensor({{9, 9}}, dt)):totable() end,
                         ("scatter: index %d out of range for dim 2 of size 3 (indices count from 1)"):format(bad))
                pcall(ordo.engine.wait_for_all)
                assert.same({{1, 2, 3}, {4, 5, 6}}, x:totable(), dt .. " index " .. bad)
                H.raises(function() x:scatter_(2, idx, 7):totable() end, "scatter: index " .. bad)
                pcall(ordo.engine.wait_for_all)
                assert.same({{1, 2, 3}, {4, 5, 6}}, x:totable(), dt .. " number, index " .. bad)
            end
        end
        local x = ordo.zeros({2, 3})
        H.raises(function() return x:scatter_(2, ordo.tensor({{1, 2, 3, 1}}, "int64"), ordo.ones({1, 3})) end,
                 "scatter: shape mismatch")
        H.raises(function() return x:scatter_(1, ordo.tensor({{1, 1, 1, 1}}, "int64"), ordo.ones({1, 4})) end,
                 "scatter: shape mismatch")
        H.raises(function() return x:scatter_(1, ordo.tensor({1, 2}, "int64"), ordo.ones({2})) end,
                 "scatter: shape mismatch")
        H.raises(function() return x:scatter_(3, ordo.tensor({{1}}, "int64"), 1) end, "scatter", "dim 3")
        H.raises(function() return x:scatter_(1, ordo.tensor({{1}}), 1) end, "scatter", "got float32")
        H.raises(function() return x:scatter_(1, {{1}}, 1) end, "scatter: index must be", "got table")
        H.raises(function() return x:scatter_(1, ordo.tensor({{1}}, "int64"), {1}) end, "scatter: src must be",
                 "got table")
        assert.same({{0, 0, 0}, {0, 0, 0}}, x:totable())
        -- an expanded tensor cannot be written into
        H.raises(function() return ordo.zeros({1, 3}):expand(2, 3):scatter_(1, ordo.tensor({{1}}, "int64"), 1) end,
                 "scatter", "expanded")
    end)

    it("scatter_ writes into the tensor with no temporaries of its size; scatter makes one copy", function()
        local n, m = 512, 256 -- 1 MiB of float64
        local x = ordo.zeros({n, m}, "float64")
        local idx = ordo.tensor({{3}}, "int64"):expand(1, m)
        local row = ordo.ones({1, m}, "float64")
        ordo.engine.wait_for_all()
        collectgarbage("collect")
        local full = n * m * 8
        for _, src in ipairs({row, 5}) do
            local before = ordo.memory.total_bytes()
            x:scatter_(1, idx, src)
            local grew = ordo.memory.total_bytes() - before
            assert.is_true(grew < full / 8, ("scatter_ allocated %d bytes for a tensor of %d"):format(grew, full))
            before = ordo.memory.total_bytes()
            local y = x:scatter(1, idx, src)
            grew = ordo.memory.total_bytes() - before
            assert.is_true(grew < full + full / 8, ("scatter allocated %d bytes for a tensor of %d"):format(grew, full))
            assert.equal(src == 5 and 5 or 1, y[{3, 7}])
        end
        assert.equal(5, x[{3, 1}])
        assert.equal(0, x[{4, 1}])
    end)

    it("scatter's gradient with repeated indices is Torch's: src gets g everywhere it was read, self where "
       .. "nothing was written", function()
        local x = ordo.randn({2, 4}, "float64"):requires_grad()
        local src = ordo.randn({2, 3}, "float64"):requires_grad()
        local idx = ordo.tensor({{2, 2, 4}, {1, 3, 1}}, "int64")
        local w = ordo.randn({2, 4}, "float64")
        x:scatter(2, idx, src):mul(w):sum():backward()
        local W = w:totable()
        assert.same({{W[1][1], 0, W[1][3], 0}, {0, W[2][2], 0, W[2][4]}}, x.grad:totable())
        assert.same({{W[1][2], W[1][2], W[1][4]}, {W[2][1], W[2][3], W[2][1]}}, src.grad:totable())
        -- the value: the last of the repeated sources
        local y, S, X = x:detach():scatter(2, idx, src:detach()):totable(), src:totable(), x:totable()
        assert.same({{X[1][1], S[1][2], X[1][3], S[1][3]}, {S[2][3], X[2][2], S[2][2], X[2][4]}}, y)
    end)

    it("scatter over NaN and inf: the written places get src, the others keep theirs", function()
        local t = ordo.tensor({0 / 0, 1 / 0, -1 / 0, 4, 0 / 0})
        local idx = ordo.tensor({1, 2, 3}, "int64")
        local r = t:scatter(1, idx, ordo.tensor({5, 6, 7})):totable()
        assert.same({5, 6, 7, 4}, {r[1], r[2], r[3], r[4]}) -- were NaN: self * 0 kept the NaN
        assert.is_true(r[5] ~= r[5])
        r = t:scatter(1, idx, 0):totable()
        assert.same({0, 0, 0, 4}, {r[1], r[2], r[3], r[4]})
        local c = t:clone()
        c:scatter_(1, idx, 9)
        assert.same({9, 9, 9, 4}, {c[1], c[2], c[3], c[4]})
    end)

    it("index_add(_) take Torch's alpha (a number or {alpha = n}), with the gradient scaled by it", function()
        local i = ordo.tensor({1, 1, 3}, "int64")
        local src = ordo.tensor({1, 2, 4})
        -- (it failed inside the FFI: "cannot convert 'number' to 'const char *'")
        assert.same({6, 0, 8}, ordo.zeros(3):index_add(1, i, src, 2):totable())
        assert.same({-3, 0, -4}, ordo.zeros(3):index_add_(1, i, src, {alpha = -1}):totable())
        assert.same({3, 0, 4}, ordo.zeros(3):index_add(1, i, src, 1):totable())
        assert.same({3, 0, 0}, ordo.zeros({3}, "int64"):index_add(1, ordo.tensor({1}, "int64"),
                                                                    ordo.tensor({1}, "int64"), 3):totable())
        local s = ordo.tensor({1, 2, 4}):requires_grad()
        ordo.zeros(3):index_add(1, i, s, 3):mul(ordo.tensor({1, 2, 3})):sum():backward()
        assert.same({3, 3, 9}, s.grad:totable())
        H.raises(function() return ordo.zeros(3):index_add(1, i, src, {alpha = "x"}) end, "index_add", "alpha",
                 "number")
        H.raises(function() return ordo.zeros({3}, "int64"):index_add(1, i, i, 0.5) end, "index_add", "alpha 0.5",
                 "integer")
    end)

    it("gather, index_select, the scatters and index_put_ refuse an extra argument (Torch's reduce was ignored)", function()
        local i = ordo.tensor({1, 1}, "int64")
        local src = ordo.tensor({2, 3})
        local t = ordo.ones(3)
        -- Torch's scatter_(dim, index, src, reduce = "add") gives 6: the reduce was taken as a name, 3 came back
        H.raises(function() return t:scatter_(1, i, src, "add") end, "scatter_", "reduce", "\"add\"", "scatter_add")
        H.raises(function() return t:scatter(1, i, src, {reduce = "multiply"}) end, "scatter", "reduce")
        assert.same({1, 1, 1}, t:totable())
        -- a number or a boolean failed inside the FFI ("cannot convert 'number' to 'const char *'")
        H.raises(function() return t:scatter_add(1, i, src, 2) end, "scatter_add: unexpected extra argument 2")
        H.raises(function() return t:scatter_add_(1, i, src, 2) end, "scatter_add_: unexpected extra argument 2")
        H.raises(function() return t:index_select(1, i, 5) end, "index_select: unexpected extra argument 5")
        H.raises(function() return t:gather(1, i, false) end, "gather: unexpected extra argument false")
        H.raises(function() return t:index_put_({i}, 2, false, 7) end, "index_put_: unexpected extra argument 7")
        assert.same({1, 1, 1}, t:totable())
    end)

    it("scatter, scatter_add and index_add refuse a float src into an integer tensor (it was truncated)", function()
        local i32 = ordo.tensor({1, 2, 3}, "int32")
        local idx = ordo.tensor({1}, "int64")
        for _, f in ipairs({"scatter", "scatter_", "scatter_add", "scatter_add_", "index_add", "index_add_"}) do
            H.raises(function() return i32[f](i32, 1, idx, ordo.tensor({2.5})) end, (f:gsub("_$", "")),
                     "src is float32", "int32")
        end
        assert.same({1, 2, 3}, i32:totable())
        -- integer into integer, integer into float and float into float are cast as before
        assert.same({3, 2, 3}, i32:index_add(1, idx, ordo.tensor({2}, "int64")):totable())
        assert.same({3, 2, 3}, i32:scatter_add(1, idx, ordo.tensor({2}, "uint8")):totable())
        assert.same({2, 2, 3}, i32:scatter(1, idx, ordo.tensor({2}, "int64")):totable())
        assert.same({3.5, 2, 3}, ordo.tensor({1, 2, 3}):scatter_add(1, idx, ordo.tensor({2.5}, "float64")):totable())
        assert.same({3, 2, 3}, ordo.tensor({1, 2, 3}, "float64"):index_add(1, idx, ordo.tensor({2}, "int32")):totable())
        assert.same({2, 2, 3}, i32:scatter(1, idx, 2.5):totable()) -- a number is truncated, as fill_'s
    end)

    it("ops that make tensors of their own make them on their input's engine", function()
        local e = ordo.engine.new({kind = "pooled", cpu_workers = 1})
        local on = {engine = e}
        local x = ordo.tensor({{3, 1, 2}, {0, 5, 4}}, on)
        local F, nn = ordo.nn.functional, ordo.nn
        local results = {
            x:flip(1), x:narrow(2, 1, 2):diag(), ordo.tensor({1, 2}, on):diag(), x:tril(),
            x:median(2), x:kthvalue(1), x:prod(2), ordo.zeros({2, 0}, on):prod(2), ordo.tensor(3, on):median(1),
            (x:unique({return_inverse = true, return_counts = true})), x:roll(1, 2), ordo.eye(3, nil, on),
            F.one_hot(ordo.tensor({1, 3}, {dtype = "int64", engine = e}), 3),
            F.interpolate(x:view(1, 1, 2, 3), {scale_factor = 2, mode = "bilinear"}),
            F.dropout2d(x:view(1, 2, 3, 1), 0.5), F.avg_pool2d(x:view(1, 1, 2, 3), 2),
            F.scaled_dot_product_attention(x:view(1, 2, 3), x:view(1, 2, 3), x:view(1, 2, 3), {is_causal = true}),
        }
        for i, r in ipairs(results) do
            -- adding a tensor of the engine works only when r is on it too
            assert.is_true(ordo.is_tensor(r), "result " .. i)
            local sum = r * 0 + ordo.zeros(r:shape(), {dtype = r:dtype(), engine = e})
            sum:wait()
        end
        H.raises(function() return x + ordo.ones({2, 3}) end, "different engines")
    end)

    it("nn.functional.one_hot: int64 rows with a 1 at each index; range checked", function()
        local F = ordo.nn.functional
        local idx = ordo.tensor({{2, 1}, {3, 3}}, "int64")
        local oh = F.one_hot(idx)
        assert.same({2, 2, 3}, oh:shape())
        assert.equals("int64", oh:dtype())
        assert.same({{{0, 1, 0}, {1, 0, 0}}, {{0, 0, 1}, {0, 0, 1}}}, oh:totable())
        assert.same({{0, 1, 0, 0, 0}}, F.one_hot(ordo.tensor({2}, "int32"), 5):totable())
        assert.same({0, 4}, F.one_hot(ordo.zeros({0}, {dtype = "int64"}), 4):shape())
        H.raises(function() return F.one_hot(ordo.tensor({0, 1}, "int64")) end, "one_hot", "index 0", "1..1")
        H.raises(function() return F.one_hot(ordo.tensor({4}, "int64"), 3) end, "one_hot", "index 4", "1..3")
        H.raises(function() return F.one_hot(ordo.tensor({1.0})) end, "one_hot", "integer", "float32")
        H.raises(function() return F.one_hot(ordo.tensor({1}, "int64"), 0) end, "one_hot", "num_classes")
        H.raises(function() return F.one_hot(ordo.zeros({0}, {dtype = "int64"})) end, "one_hot", "empty")
        H.raises(function() return F.one_hot({1, 2}) end, "one_hot", "indices", "table")
    end)

    -- Found by a tester: results the composed forms got wrong.
    it("fmod and remainder are exact for large quotients and infinite divisors; gradients through both operands", function()
        assert.same({1, -1}, ordo.tensor({1e8, -1e8}):fmod(3):totable())
        assert.same({2}, ordo.tensor({2 ^ 60 + 256}, "float64"):fmod(3):totable())
        assert.same({5, -5}, ordo.tensor({5, -5}):fmod(1 / 0):totable())
        assert.same({5, 1 / 0}, ordo.tensor({5, -5}):remainder(1 / 0):totable()) -- Python: -5 % inf == inf
        assert.equals(math.fmod(5.5, 1e-3), ordo.tensor({5.5}, "float64"):fmod(1e-3):totable()[1])
        assert.same({1, 2, -2, -1}, ordo.tensor({7, -7, 7, -7}):remainder(ordo.tensor({3, 3, -3, -3})):totable())
        local a = ordo.tensor({1.3, -2.7, 5.1}, "float64"):requires_grad()
        local b = ordo.tensor({0.5, 0.7, -0.4}, "float64"):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(p, q) return p:remainder(q) end, {a, b}))
        assert.is_true(ordo.autograd.gradcheck(function(p, q) return p:fmod(q) end, {a, b}))
        assert.is_true(ordo.autograd.gradcheck(function(p) return p:fmod(ordo.tensor({0.6}, "float64")) end, {a}))
    end)

    it("lerp gives stop at weight 1 (and self at 0), for number and tensor weights", function()
        local x, y = ordo.tensor({0.1, 1e8, 3.7}), ordo.tensor({0.7, 1, 1e-3})
        assert.same(y:totable(), x:lerp(y, 1):totable())
        assert.same(x:totable(), x:lerp(y, 0):totable())
        assert.same(y:totable(), x:lerp(y, ordo.ones({3})):totable())
        close({0.25, 0.5}, ordo.tensor({0, 0}):lerp(ordo.tensor({1, 2}), 0.25):totable())
        local w = ordo.tensor({0.2, 0.9}, "float64"):requires_grad()
        local s = ordo.tensor({1, 2}, "float64"):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(p, q) return p:lerp(q, 0.7) end, {w, s}))
        assert.is_true(ordo.autograd.gradcheck(function(p, q) return p:lerp(q, 0.3) end, {w, s}))
    end)

    it("diag of a vector holding inf or NaN keeps zeros off the diagonal", function()
        local d = ordo.tensor({1 / 0, 0 / 0, 1}):diag():totable()
        assert.equals(1 / 0, d[1][1])
        assert.is_true(d[2][2] ~= d[2][2])
        for i = 1, 3 do
            for j = 1, 3 do
                if i ~= j then assert.equals(0, d[i][j]) end
            end
        end
        local v = ordo.tensor({1, 2}, "float64"):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(p) return p:diag() end, {v}))
    end)

    it("randint and randperm refuse values their dtype cannot hold, instead of clamping or wrapping them", function()
        H.raises(function() return ordo.randint(0, 300, {20}, "uint8") end, "randint", "0..299", "uint8")
        H.raises(function() return ordo.randint(-5, 5, {4}, "uint8") end, "randint", "uint8")
        H.raises(function() return ordo.randint(2 ^ 31, 2 ^ 31 + 10, {3}, "int32") end, "randint", "int32")
        H.raises(function() return ordo.randperm(256, "uint8") end, "randperm", "1..256", "uint8")
        local r = ordo.randint(0, 256, {2000}, "uint8")
        assert.equals(255, r:max():item()) -- the whole range is drawn (2000 draws: p(miss) < 1e-3)
        assert.equals(255, ordo.randperm(255, "byte"):unique():numel())
    end)

    it("roll by a shift past 2^53 moves by the shift's exact remainder", function()
        assert.same({2, 0, 1}, ordo.arange(3):roll(1e18):totable()) -- 1e18 = 1 (mod 3)
        assert.same({1, 2, 0}, ordo.arange(3):roll(-1e18):totable())
        assert.same({2, 0, 1}, ordo.arange(3):roll(2 ^ 60):totable())
    end)

    it("norms have a finite gradient (Torch's subgradient 0) at zero", function()
        for _, p in ipairs({2, 3}) do
            local y = ordo.zeros({3}, "float64"):requires_grad()
            y:norm(p):backward()
            assert.same({0, 0, 0}, y.grad:totable())
        end
        local x = ordo.tensor({{0, 0}, {3, 4}}, "float64"):requires_grad()
        x:norm(2, 2):sum():backward()
        close({{0, 0}, {0.6, 0.8}}, x.grad:totable(), 1e-12)
        local w = ordo.tensor({0.5, -1, 2}, "float64"):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(q) return q:norm() end, {w}))
        assert.is_true(ordo.autograd.gradcheck(function(q) return q:norm(3) end, {w}))
        -- p < 1: |x|^(p-1) is infinite at a zero element; Torch's gradient is 0 there (was NaN)
        local z = ordo.tensor({0, 1, 4}, "float64"):requires_grad()
        z:norm(0.5):backward()
        close({0, 3, 1.5}, z.grad:totable(), 1e-12)
        local zd = ordo.tensor({{0, 1}, {4, 0}}, "float64"):requires_grad()
        zd:norm(0.5, 2):sum():backward()
        close({{0, 1}, {1, 0}}, zd.grad:totable(), 1e-12)
    end)

    it("logsumexp and the inf-norm of no elements are -inf and 0, as Torch", function()
        assert.equals(-1 / 0, ordo.zeros({0}):logsumexp():item())
        assert.same({-1 / 0, -1 / 0}, ordo.zeros({2, 0}):logsumexp(2):totable())
        assert.equals(0, ordo.zeros({0}):norm("inf"):item())
        assert.same({{0}, {0}}, ordo.zeros({2, 0}):norm("inf", 2, true):totable())
    end)

    it("allclose: equal infinities are close, opposite ones and NaN are not; shapes checked under its name", function()
        assert.is_true(ordo.allclose(ordo.tensor({1 / 0, -1 / 0, 1}), ordo.tensor({1 / 0, -1 / 0, 1})))
        assert.is_false(ordo.allclose(ordo.tensor({1 / 0}), ordo.tensor({-1 / 0})))
        assert.is_false(ordo.allclose(ordo.tensor({0 / 0}), ordo.tensor({0 / 0})))
        H.raises(function() return ordo.allclose(ordo.ones(3), ordo.ones(2)) end, "allclose", "broadcast")
    end)

    it("clamp of an integer tensor takes bounds outside its dtype; bad bounds are named under clamp", function()
        assert.same({0, 1, 200}, ordo.tensor({0, 1, 200}, "uint8"):clamp(-5, 300):totable())
        assert.same({3, 3, 100}, ordo.tensor({0, 1, 200}, "uint8"):clamp(3, 100):totable())
        assert.same({2 ^ 31 - 1}, ordo.tensor({2 ^ 31 - 1}, "int32"):clamp(nil, 1e10):totable())
        assert.equals("float32", ordo.tensor({1, 5}, "int32"):clamp(1.5, 3.5):dtype())
        H.raises(function() return ordo.ones(2):clamp("x") end, "clamp", "min", "string")
        H.raises(function() return ordo.ones(2, "int32"):clamp_(1.5, 3) end, "clamp_", "1.5", "int32")
    end)

    it("derived ops name themselves, not the op they are made of, for a bad dim", function()
        local x = ordo.randn({3, 4})
        local calls = {
            {"var", function() return x:var(0 / 0) end}, {"std", function() return x:std(1.5) end},
            {"chunk", function() return x:chunk(2, "x") end}, {"split", function() return x:split(2, "x") end},
            {"roll", function() return x:roll(1, 0 / 0) end}, {"flip", function() return x:flip(0 / 0) end},
            {"norm", function() return x:norm(2, "x") end}, {"logsumexp", function() return x:logsumexp("x") end},
            {"amax", function() return x:amax("x") end}, {"any", function() return x:gt(0):any("x") end},
            {"all", function() return x:gt(0):all("x") end},
        }
        for _, c in ipairs(calls) do H.raises(c[2], c[1] .. ": dim must be an integer") end
        H.raises(function() return ordo.linspace(0, 1, 1e18) end, "linspace", "count")
        H.raises(function() return x:fill_(ordo.ones({2})) end, "fill_", "one-element")
        H.raises(function() return ordo.tensor({1}, "int32"):remainder(0) end, "remainder: integer division by zero")
        H.raises(function() return ordo.tensor({1}, "int64"):fmod(0) end, "fmod: integer division by zero")
    end)

    it("the % operator is remainder, as Lua's own % on numbers, a number on either side", function()
        local xs, ds = {-7, 7, 6, -6, 0}, {3, -3}
        for _, dt in ipairs({"int32", "int64", "float32", "float64"}) do
            for _, d in ipairs(ds) do
                local want = {}
                for i, x in ipairs(xs) do want[i] = x % d end
                assert.same(want, (ordo.tensor(xs, dt) % d):totable())
                assert.equals(dt, (ordo.tensor(xs, dt) % d):dtype())
                local rwant = {}
                for i, x in ipairs(xs) do rwant[i] = x ~= 0 and d % x or 0 end
                local nz = ordo.tensor({-7, 7, 6, -6, 1}, dt)
                local got = (d % nz):totable()
                for i, x in ipairs({-7, 7, 6, -6, 1}) do assert.equals(d % x, got[i]) end
            end
        end
        assert.same({0.5, 1.5, -0.5}, (ordo.tensor({-7.5, 7.5, 7.5}) % ordo.tensor({2, 2, -2})):totable())
        assert.equals("float32", (7.5 % ordo.tensor({2}, "int32")):dtype())
        H.raises(function() return ordo.tensor({1}, "int32") % 0 end, "remainder: integer division by zero")
        H.raises(function() return ordo.tensor({1}) % "x" end, "remainder", "string")
        -- a number that does not fit an integer tensor's dtype, named under the op called (not div or tensor)
        H.raises(function() return ordo.tensor({7}, "uint8") % -3 end, "remainder: value -3 does not fit in uint8")
        H.raises(function() return 300 % ordo.tensor({7}, "uint8") end, "remainder: value 300 does not fit in uint8")
        H.raises(function() return ordo.tensor({7}, "uint8"):fmod(-3) end, "fmod: value -3 does not fit in uint8")
        H.raises(function() return ordo.tensor({7}, "int32"):floor_divide(-3e9) end,
                 "floor_divide: value -3000000000 does not fit in int32")
        -- a tensor divisor of 0, met when the op runs, names the op called (it said "div" alone)
        local zero = ordo.tensor({1, 0}, "int32")
        for _, c in ipairs({{"remainder", function(a) return a % zero end}, {"fmod", function(a) return a:fmod(zero) end},
                            {"remainder", function(a) return a:remainder(zero) end},
                            {"floor_divide", function(a) return a:floor_divide(zero) end},
                            {"fmod", function(a) return a:clone():fmod_(zero) end}}) do
            for _, dt in ipairs({"int32", "int64", "uint8"}) do
                local r = c[2](ordo.tensor({5, 6}, dt))
                H.raises(function() return r:totable() end, c[1] .. ": div: integer division by zero")
            end
        end
        assert.same({0, 1}, (ordo.tensor({5, 6}, "int32") % ordo.tensor({1, 5}, "int32")):totable()) -- still works
        assert.same({1}, (ordo.tensor({7}, "uint8") % 3):totable())
    end)

    it("flip refuses a dim given twice (it flipped it back, silently); masked_fill names itself for a bad value", function()
        local x = ordo.arange(9):view(3, 3)
        H.raises(function() return x:flip({1, 1}) end, "flip: dims 1 and 1 are the same dim")
        H.raises(function() return x:flip({2, -1}) end, "flip: dims 2 and -1 are the same dim")
        assert.same({{8, 7, 6}, {5, 4, 3}, {2, 1, 0}}, x:flip({2, -2}):totable())
        local e = H.raises(function() return x:masked_fill(x:gt(3), ordo.tensor({2, 3})) end, "masked_fill:",
                           "one element", "shape 2")
        assert.falsy(e:find("item:", 1, true), e)
        H.raises(function() return x:masked_fill_(x:gt(3), ordo.zeros({0})) end, "masked_fill_:", "one element")
        assert.same({{0, 1, 2}, {3, 9, 9}, {9, 9, 9}}, x:masked_fill(x:gt(3), ordo.tensor({{9}})):totable())
    end)

    it("keepdim without a dim keeps every dim as size 1 in var, std, prod, norm, logsumexp, amax, amin (as sum does)", function()
        local x = ordo.tensor({{1, 5, 2}, {2, 3, 7}})
        assert.same({1, 1}, x:sum(nil, true):shape())
        local calls = {
            var = function() return x:var(nil, true) end, std = function() return x:std(nil, true) end,
            prod = function() return x:prod(nil, true) end, norm = function() return x:norm(2, nil, true) end,
            logsumexp = function() return x:logsumexp(nil, true) end, amax = function() return x:amax(nil, true) end,
            amin = function() return x:amin(nil, true) end,
        }
        local want = {prod = 420, amax = 7, amin = 1}
        for name, f in pairs(calls) do
            local r = f()
            assert.same({1, 1}, r:shape(), name)
            local flat = ({var = x:var(), std = x:std(), prod = x:prod(), norm = x:norm(), logsumexp = x:logsumexp(),
                           amax = x:amax(), amin = x:amin()})[name]
            assert.same({}, flat:shape(), name) -- without keepdim: 0-dim, as before
            close(want[name] or flat:item(), r:view(1):totable()[1])
        end
        assert.same({1, 1, 1}, ordo.ones({2, 3, 4}):std(nil, true, 0):shape())
    end)

    it("softmax and log_softmax of a 0-dim tensor: one line of one element, as Torch's; gradients", function()
        assert.equals(1, ordo.tensor(5):softmax():item())
        assert.same({}, ordo.tensor(5):softmax(1):shape())
        assert.equals(0, ordo.tensor(5):log_softmax(-1):item())
        assert.equals("float32", ordo.tensor(5, "int32"):softmax():dtype())
        H.raises(function() return ordo.tensor(5):softmax(2) end, "softmax: dim 2 out of range for a 0-dim tensor")
        for _, name in ipairs({"softmax", "log_softmax"}) do
            local x = ordo.tensor(5):requires_grad_()
            local y = x[name](x) * 3
            y:backward()
            assert.equals(0, x.grad:item(), name)
        end
    end)

    it("norm neither overflows nor underflows float32 where the norm itself fits; gradients", function()
        -- x^2 of 1e30 is inf in float32 (the norm was inf), of 1e-30 is 0 (the norm was 0)
        close(math.sqrt(2) * 1e30, ordo.tensor({1e30, 1e30}):norm():item(), 1e-6)
        close(math.sqrt(2), ordo.tensor({1e-30, -1e-30}):norm():item() * 1e30, 1e-6)
        close(2 ^ (1 / 3) * 1e25, ordo.tensor({1e25, -1e25}):norm(3):item(), 1e-6)
        local rows = ordo.tensor({{3, 4}, {0, 0}, {1e30, 0}, {1 / 0, 1}}):norm(2, 2):totable()
        close({5, 0, 1.0000000150474662e30}, {rows[1], rows[2], rows[3]}, 1e-6)
        assert.equals(math.huge, rows[4])
        assert.same({4, 1}, ordo.tensor({{3, 4}, {0, 0}, {1e30, 0}, {1, 1}}):norm(2, 2, true):shape())
        assert.same({0, 0}, ordo.zeros({2, 0}):norm(2, 2):totable())
        assert.same({0, 0, 0}, ordo.zeros({0, 3}):norm(2, 1):totable())
        local x = ordo.tensor({1e30, 1e30}):requires_grad_()
        x:norm():backward()
        close({math.sqrt(0.5), math.sqrt(0.5)}, x.grad:totable(), 1e-6)
    end)

    it("masked_select broadcasts self and the mask together, as Torch's; gradients", function()
        -- a mask larger than self failed inside expand_as ("expected 1 or 1")
        local x = ordo.arange(3):view(1, 3)
        local m = ordo.tensor({{1, 0, 1}, {0, 1, 1}}, "uint8")
        assert.same({0, 2, 1, 2}, x:masked_select(m):totable())
        assert.same({0, 1, 2}, ordo.arange(6):view(2, 3):masked_select(ordo.tensor({{1}, {0}}, "uint8")):totable())
        H.raises(function() return ordo.arange(6):view(2, 3):masked_select(ordo.tensor({1, 0}, "uint8")) end,
                 "masked_select", "2x3 and 2")
        local xg = ordo.arange(3):view(1, 3):requires_grad_()
        xg:masked_select(m):sum():backward()
        assert.same({{1, 1, 2}}, xg.grad:totable())
    end)

    it("nan_to_num_, lerp_, fmod_ and remainder_ write into self, as Torch's", function()
        local x = ordo.tensor({0 / 0, 1 / 0, 2})
        assert.equals(x, x:nan_to_num_(0, 9, -9))
        assert.same({0, 9, 2}, x:totable())
        assert.same({0.5, 1, 1.5}, ordo.arange(3):lerp_(ordo.ones({3}), 0.5):totable())
        assert.same({-1, 1}, ordo.tensor({-7, 7}, "int32"):fmod_(3):totable())
        assert.same({2, 1}, ordo.tensor({-7, 7}, "int32"):remainder_(3):totable())
        local v = ordo.arange(6):view(2, 3)
        v:t():fmod_(4) -- through a view
        assert.same({{0, 1, 2}, {3, 0, 1}}, v:totable())
        H.raises(function() return ordo.arange(3, "int32"):lerp_(ordo.ones({3}), 0.5) end, "lerp_", "float32", "int32")
        H.raises(function() return ordo.tensor({1}, "int32"):remainder_(2.5) end, "remainder_", "float32", "int32")
        H.raises(function() return ordo.arange(3):lerp_(ordo.ones({2, 3}), 0.5) end, "lerp_", "2x3", "3")
        local g = ordo.tensor({1.5}):requires_grad_()
        H.raises(function() return g:fmod_(1) end, "fmod_", "requires a gradient", "out-of-place fmod")
        -- the write's errors name the op, not the copy_ it is made of
        H.raises(function() return ordo.zeros(3, 1):expand(3, 2):lerp_(ordo.ones(3, 2), 0.5) end, "lerp_: cannot write")
        H.raises(function() return ordo.arange(7):unfold(1, 3, 2):nan_to_num_() end, "nan_to_num_: cannot write")
        H.raises(function() return ordo.zeros(3, 1):expand(3, 2):div_(2, "floor") end, "div_: cannot write")
        H.raises(function() return ordo.arange(7):unfold(1, 3, 2):floor_divide_(2) end, "floor_divide_: cannot write")
        local w = ordo.no_grad(function() return g:view(1, 1) end)
        H.raises(function() return w:remainder_(1) end, "remainder_: this view was made under ordo.no_grad")
        assert.same({1.5}, g:totable())
    end)

    it("nonzero of an empty tensor: no positions (it divided by the size 0)", function()
        for _, s in ipairs({{2, 0}, {0}, {0, 3, 4}}) do
            local z = ordo.zeros(s)
            assert.same({0, #s}, z:nonzero():shape())
            local tuple = z:nonzero({as_tuple = true})
            assert.equals(#s, #tuple)
            for d = 1, #s do
                assert.same({0}, tuple[d]:shape())
                assert.equals("int64", tuple[d]:dtype())
            end
        end
    end)

    it("all and any along a dim of size 0: true and false, as over no elements at all", function()
        local z = ordo.zeros({2, 0, 3})
        assert.same({{1, 1, 1}, {1, 1, 1}}, z:all(2):totable())
        assert.same({{0, 0, 0}, {0, 0, 0}}, z:any(-2):totable())
        assert.same({{{1, 1, 1}}, {{1, 1, 1}}}, z:all(2, true):totable())
        assert.same({2, 1, 1}, z:any({2, 3}, true):shape())
        assert.same({0, 0}, z:any({2, 3}):totable())
        assert.same({1, 1}, z:all({-1, 2}):totable())
        assert.equals("uint8", z:all(2):dtype())
        assert.same({0, 3}, z:all(1):shape()) -- a dim of size 0 kept is fine as before
        assert.is_true(z:all())
        assert.is_false(z:any())
        -- amax and amin still refuse, under their own names
        H.raises(function() return z:amax(2) end, "amax: cannot reduce dim 2 of size 0")
        H.raises(function() return z:amin() end, "amin: cannot reduce an empty tensor")
        H.raises(function() return z:amax({2, 3}) end, "amax: cannot reduce")
    end)
end)

describe("more of Torch's tensor functions against plain Lua", function()
    local gradcheck = function(f, xs) return ordo.autograd.gradcheck(f, xs) end
    -- plain-Lua matrices
    local function mat(r, c, f)
        local m = {}
        for i = 1, r do
            m[i] = {}
            for j = 1, c do m[i][j] = f(i, j) end
        end
        return m
    end
    local function diag_ref(m, k)
        local out = {}
        for i = 1, #m do
            local j = i + k
            if j >= 1 and j <= #m[1] then out[#out + 1] = m[i][j] end
        end
        return out
    end

    it("diag(k) takes the diagonal k of a matrix and puts a vector on the diagonal k, as Torch's", function()
        local m = mat(3, 4, function(i, j) return 10 * i + j end)
        local t = ordo.tensor(m)
        for k = -4, 5 do
            assert.same(diag_ref(m, k), t:diag(k):totable())
            -- a non-contiguous view: the transpose's diagonal k is the matrix's -k
            assert.same(diag_ref(m, -k), t:t():diag(k):totable())
        end
        for _, k in ipairs({-2, -1, 0, 1, 3}) do
            local n = 2 + math.abs(k)
            local want = mat(n, n, function() return 0 end)
            for i = 1, 2 do
                if k >= 0 then want[i][i + k] = i else want[i - k][i] = i end
            end
            assert.same(want, ordo.tensor({1, 2}):diag(k):totable())
        end
        H.raises(function() return t:diag(0.5) end, "diag", "integer")
        local v = ordo.randn(3, 4):double():requires_grad()
        assert.is_true(gradcheck(function(p) return p:diag(1) end, {v}))
        assert.is_true(gradcheck(function(p) return p:diag(-2) end, {v}))
        local w = ordo.tensor({1, 2}, "float64"):requires_grad()
        assert.is_true(gradcheck(function(p) return p:diag(-1) end, {w}))
    end)

    it("diagonal(offset, dim1, dim2) and diag_embed as Torch's, on batches; gradients", function()
        local x = ordo.arange(24, "float64"):view(2, 3, 4)
        local function at(a, b, c) return a * 12 + b * 4 + c end -- (from 0)
        -- dims 2 and 3 (a batch of 2), offset 1: shape 2 x 3
        local want = {}
        for a = 0, 1 do
            want[a + 1] = {}
            for i = 0, 2 do want[a + 1][i + 1] = at(a, i, i + 1) end
        end
        assert.same(want, x:diagonal(1, 2, 3):totable())
        -- dim1 the last, dim2 the first, offset -1: x[i, :, i + 1], shape 3 x 2
        want = {}
        for b = 0, 2 do
            want[b + 1] = {}
            for i = 0, 1 do want[b + 1][i + 1] = at(i, b, i + 1) end
        end
        assert.same(want, x:diagonal(-1, -1, 1):totable())
        assert.same({3, 0}, ordo.zeros(0, 3, 3):diagonal():shape())
        assert.same({2, 0}, x:diagonal(5, 2, 3):shape())
        H.raises(function() return x:diagonal(0, 2, -2) end, "diagonal", "both dim 2")
        H.raises(function() return ordo.zeros(3):diagonal() end, "diagonal", "2 dims")
        local e = ordo.tensor({{1, 2}, {3, 4}}):diag_embed()
        assert.same({{{1, 0}, {0, 2}}, {{3, 0}, {0, 4}}}, e:totable())
        assert.same({{0, 1, 0}, {0, 0, 2}, {0, 0, 0}}, ordo.tensor({1, 2}):diag_embed(1):totable())
        assert.same({{0, 0, 0}, {1, 0, 0}, {0, 2, 0}}, ordo.tensor({1, 2}):diag_embed(-1):totable())
        -- the new dims first and last: out[k, b, k] = x[b, k]
        assert.same({{{1, 0}, {3, 0}}, {{0, 2}, {0, 4}}}, ordo.tensor({{1, 2}, {3, 4}}):diag_embed(0, 1, 3):totable())
        -- diagonal undoes diag_embed
        local r = ordo.randn(2, 3)
        assert.is_true(ordo.equal(r, r:diag_embed(2):diagonal(2, -2, -1)))
        local p = ordo.randn(2, 3, 4):double():requires_grad()
        assert.is_true(gradcheck(function(q) return q:diagonal(1, 3, 2) end, {p}))
        assert.is_true(gradcheck(function(q) return q:diag_embed(-1) end, {p}))
    end)

    it("isclose and allclose take equal_nan, as Torch's", function()
        local a, b = ordo.tensor({1, 0 / 0, 1 / 0, 2}), ordo.tensor({1.000001, 0 / 0, 1 / 0, 3})
        assert.same({1, 0, 1, 0}, ordo.isclose(a, b):totable())
        assert.same({1, 1, 1, 0}, ordo.isclose(a, b, nil, nil, true):totable())
        assert.same({1, 1, 1, 1}, a:isclose(b, 0, 1, true):totable())
        assert.equals("uint8", a:isclose(b):dtype())
        assert.same({{1, 0}, {0, 1}}, ordo.tensor({{1, 2}, {3, 4}}):isclose(ordo.tensor({1, 4})):totable())
        local n = ordo.tensor({1, 0 / 0})
        assert.is_false(ordo.allclose(n, n))
        assert.is_true(ordo.allclose(n, n, 1e-5, 1e-8, true))
        assert.is_true(n:allclose(n:clone(), nil, nil, true))
        H.raises(function() return ordo.allclose(n, n, 1e-5, 1e-8, "yes") end, "allclose", "equal_nan", "boolean")
        H.raises(function() return ordo.isclose(n, ordo.zeros(3)) end, "isclose", "broadcast")
    end)

    it("norm('fro') is the 2-norm, over all elements or dims", function()
        local x = ordo.tensor({{1, 2, 3}, {4, 5, 6}}, "float64")
        close(math.sqrt(91), x:norm("fro"):item(), 1e-12)
        close(math.sqrt(91), x:norm("fro", {1, 2}):item(), 1e-12)
        close({math.sqrt(14), math.sqrt(77)}, x:norm("fro", 2):totable(), 1e-12)
        H.raises(function() return x:norm("nuc") end, "norm", "fro")
    end)

    it("diff with n, dim, prepend and append", function()
        local x = ordo.tensor({{1, 2, 4}, {7, 11, 16}})
        assert.same({{1, 2}, {4, 5}}, x:diff():totable())
        assert.same({{6, 9, 12}}, x:diff(1, 1):totable())
        assert.same({{1}, {1}}, x:diff(2):totable())
        assert.same({2, 0}, x:diff(3):shape())
        assert.same({1, 3, 6, 10}, ordo.tensor({1, 4}):diff(1, 1, ordo.tensor({0}), ordo.tensor({10, 20})):totable())
        assert.same({{1, 2, 4}, {7, 11, 16}}, x:diff(0):totable())
        assert.same({255}, ordo.tensor({1, 0}, "uint8"):diff():totable()) -- wraps, as Torch's uint8
        H.raises(function() return x:diff(-1) end, "diff", "n")
        H.raises(function() return ordo.tensor(3):diff() end, "diff", "0-dim")
        H.raises(function() return x:diff(1, 1, ordo.tensor({1})) end, "diff", "prepend")
        -- a shape that differs off dim: diff's error, not cat's
        H.raises(function() return x:diff(1, 2, ordo.zeros(3, 1)) end, "diff: prepend of shape 3x1", "except along dim 2")
        H.raises(function() return x:diff(1, 1, nil, ordo.zeros(1, 2)) end, "diff: append of shape 1x2")
        assert.same({{1, 1, 2}, {7, 4, 5}}, x:diff(1, 2, ordo.zeros(2, 1)):totable())
        local p = ordo.randn(3, 4):double():requires_grad()
        assert.is_true(gradcheck(function(q) return q:diff(2, 2) end, {p}))
    end)

    it("addcmul, addcdiv and their in-place forms", function()
        local s, a, b = ordo.tensor({1, 1}), ordo.tensor({2, 3}), ordo.tensor({4, 5})
        assert.same({5, 8.5}, s:addcmul(a, b, 0.5):totable())
        assert.same({9, 16}, s:addcmul(a, b):totable())
        close({2, 2.2}, s:addcdiv(a, b, {value = 2}):totable())
        local t = ordo.tensor({1, 1})
        assert.equals(t, t:addcmul_(a, b, 2))
        assert.same({17, 31}, t:totable())
        t:addcdiv_(a, b, -1)
        close({16.5, 30.4}, t:totable())
        H.raises(function() return s:addcmul(a, 2) end, "addcmul", "two tensors")
        H.raises(function() return s:addcmul(a, b, "x") end, "addcmul", "value")
        H.raises(function() return s:addcdiv(a, ordo.zeros(3)) end, "addcdiv", "broadcast")
        local p, q, r = ordo.randn(2, 3):double():requires_grad(), ordo.randn(3):double():requires_grad(),
            ordo.rand(2, 1):double():add(1):requires_grad()
        assert.is_true(gradcheck(function(x, y, z) return x:addcdiv(y, z, 0.5) end, {p, q, r}))
    end)

    it("kron, cross and cdist against plain Lua; gradients", function()
        local a, b = {{1, 2}, {3, 4}}, {{0, 1, 2}, {1, 0, 5}}
        local want = {}
        for i = 1, 4 do
            want[i] = {}
            for j = 1, 6 do
                want[i][j] = a[math.floor((i - 1) / 2) + 1][math.floor((j - 1) / 3) + 1] * b[(i - 1) % 2 + 1][(j - 1) % 3 + 1]
            end
        end
        assert.same(want, ordo.kron(ordo.tensor(a), ordo.tensor(b)):totable())
        assert.same({{1, 2}, {10, 20}}, ordo.kron(ordo.tensor({1, 2}), ordo.tensor({{1}, {10}})):totable())
        -- past 4 dims too (it was refused), against the definition element by element, and its gradient
        local a5, b5 = ordo.randn({2, 1, 3, 2, 2}, "float64"), ordo.randn({1, 2, 2, 1, 3}, "float64")
        local k5 = ordo.kron(a5, b5)
        assert.same({2, 2, 6, 2, 6}, k5:shape())
        local A5, B5, K5 = a5:totable(), b5:totable(), k5:totable()
        for _, ia in ipairs({{1, 1, 1, 1, 1}, {2, 1, 3, 2, 2}, {1, 1, 2, 2, 1}}) do
            for _, ib in ipairs({{1, 1, 1, 1, 1}, {1, 2, 2, 1, 3}, {1, 1, 2, 1, 2}}) do
                local o = {}
                for d = 1, 5 do o[d] = (ia[d] - 1) * b5:size(d) + ib[d] end
                close(A5[ia[1]][ia[2]][ia[3]][ia[4]][ia[5]] * B5[ib[1]][ib[2]][ib[3]][ib[4]][ib[5]],
                      K5[o[1]][o[2]][o[3]][o[4]][o[5]], 1e-12)
            end
        end
        local a4, b4 = ordo.randn({2, 3, 2, 2}, "float64"), ordo.randn({3, 2, 1, 3}, "float64")
        assert.is_true(ordo.allclose(ordo.kron(a4:unsqueeze(1), b4:unsqueeze(1)):squeeze(1), ordo.kron(a4, b4), 0, 0))
        assert.same({2, 1, 1, 1, 1, 1, 1, 4}, ordo.kron(ordo.ones(2, 1, 1, 1, 1, 1, 1, 2), ordo.ones(2)):shape())
        assert.is_true(ordo.autograd.gradcheck(function(x, y) return ordo.kron(x, y) end,
                                               {ordo.randn({2, 1, 1, 1, 2}, "float64"):requires_grad(),
                                                ordo.randn({1, 2, 1, 1, 2}, "float64"):requires_grad()}))
        local function cross(u, v) return {u[2] * v[3] - u[3] * v[2], u[3] * v[1] - u[1] * v[3], u[1] * v[2] - u[2] * v[1]} end
        local u, v = {{1, 2, 3}, {4, 5, 6}}, {7, 8, 9}
        assert.same({cross(u[1], v), cross(u[2], v)}, ordo.tensor(u):cross(ordo.tensor(v)):totable())
        -- along dim 1 of the transposes (non-contiguous)
        assert.same({{-6, -3}, {12, 6}, {-6, -3}},
                    ordo.cross(ordo.tensor(u):t(), ordo.tensor({v, v}):t(), 1):totable())
        H.raises(function() return ordo.cross(ordo.zeros(2, 4), ordo.zeros(2, 4)) end, "cross", "size 3")
        local x1, x2 = {{0, 0}, {1, 1}, {-1, 2}}, {{3, 4}, {1, 0}}
        local function dist(p, q, pw)
            if pw == "inf" then return math.max(math.abs(p[1] - q[1]), math.abs(p[2] - q[2])) end
            return (math.abs(p[1] - q[1]) ^ pw + math.abs(p[2] - q[2]) ^ pw) ^ (1 / pw)
        end
        for _, pw in ipairs({1, 2, 3}) do
            local got = ordo.cdist(ordo.tensor(x1, "float64"), ordo.tensor(x2, "float64"), pw):totable()
            for i = 1, 3 do for j = 1, 2 do close(dist(x1[i], x2[j], pw), got[i][j], 1e-12) end end
        end
        assert.same({2, 3, 2}, ordo.cdist(ordo.randn(2, 3, 5), ordo.randn(2, 5)):shape())
        H.raises(function() return ordo.cdist(ordo.zeros(3, 2), ordo.zeros(3, 3)) end, "cdist", "3x2", "3x3")
        local p, q = ordo.randn(3, 2):double():requires_grad(), ordo.randn(4, 2):double():requires_grad()
        assert.is_true(gradcheck(function(m, n) return ordo.cdist(m, n) end, {p, q}))
        assert.is_true(gradcheck(function(m, n) return ordo.kron(m, n) end, {p, q}))
        local c1, c2 = ordo.randn(2, 3):double():requires_grad(), ordo.randn(2, 3):double():requires_grad()
        assert.is_true(gradcheck(function(m, n) return m:cross(n) end, {c1, c2}))
    end)

    it("take, cummax and cummin (ties to the latest, NaN kept), bincount and histc", function()
        local x = ordo.tensor({{1, 2, 3}, {4, 5, 6}})
        assert.same({{1, 3}, {2, 4}}, x:t():take(ordo.tensor({{1, 5}, {3, 2}}, "int64")):totable()) -- of {1, 4, 2, 5, 3, 6}
        H.raises(function() return x:take(ordo.tensor({1})) end, "take", "float32")
        local function cum(xs, better)
            local v, idx = {}, {}
            for i, e in ipairs(xs) do
                local prev = v[i - 1]
                if i == 1 or e ~= e or (prev == prev and better(e, prev)) then v[i], idx[i] = e, i
                else v[i], idx[i] = prev, idx[i - 1] end
            end
            return v, idx
        end
        local ge = function(a, b) return a >= b end
        local le = function(a, b) return a <= b end
        for _, xs in ipairs({{1, 3, 2, 3, 5}, {3, 1, 2, 1, 0, 0, 7, -1, 2}, {1, 0 / 0, 2, 0 / 0, 5}, {4}}) do
            for _, f in ipairs({{"cummax", ge}, {"cummin", le}}) do
                local wv, wi = cum(xs, f[2])
                local gv, gi = ordo.tensor(xs)[f[1]](ordo.tensor(xs), 1)
                local got = gv:totable()
                for i = 1, #xs do
                    assert.is_true(wv[i] == got[i] or (wv[i] ~= wv[i] and got[i] ~= got[i]), f[1])
                end
                assert.same(wi, gi:totable())
                assert.equals("int64", gi:dtype())
            end
        end
        local v2, i2 = ordo.tensor({{1, 3, 2}, {5, 4, 6}}, "int32"):cummax(1)
        assert.same({{1, 3, 2}, {5, 4, 6}}, v2:totable())
        assert.same({{1, 1, 1}, {2, 2, 2}}, i2:totable())
        assert.equals("int32", v2:dtype())
        local _, i3 = ordo.tensor({{1, 3, 2}, {5, 4, 6}}):t():cummin(-2)
        assert.same({{1, 1}, {1, 2}, {1, 2}}, i3:totable())
        H.raises(function() return x:cummax() end, "cummax", "dim")
        local p = ordo.tensor({0.5, 2, 1, 3, -1}, "float64"):requires_grad()
        local cv = p:cummax(1)
        cv:sum():backward()
        assert.same({1, 2, 0, 2, 0}, p.grad:totable()) -- each output's gradient to the element its index names
        local c = ordo.tensor({0, 1, 1, 3}, "int64")
        assert.same({1, 2, 0, 1}, c:bincount():totable())
        assert.equals("int64", c:bincount():dtype())
        assert.same({0.5, 2, 0, 2, 0, 0}, c:bincount(ordo.tensor({0.5, 1, 1, 2}), 6):totable())
        assert.same({0, 0}, ordo.tensor({}, "int64"):bincount(nil, 2):totable())
        H.raises(function() return ordo.tensor({-1, 2}, "int32"):bincount() end, "bincount", ">= 0")
        H.raises(function() return ordo.tensor({1.5}):bincount() end, "bincount", "integers")
        -- histc: bins over [min, max], the last one closed, outside and NaN not counted
        local h = ordo.tensor({1, 2, 1, 3, 3.5, -1, 0 / 0}):histc(4, 0, 3)
        assert.same({0, 2, 1, 1}, h:totable())
        assert.same({2, 1, 1}, ordo.tensor({1, 2, 1, 4}):histc(3):totable()) -- the data's range
        assert.same({0, 0, 2, 0}, ordo.tensor({2, 2}):histc(4):totable()) -- one value: [v - 1, v + 1]
        -- min and max in a float32 input's dtype, as Torch's: 0.3 (as a float32, above the double 0.3)
        -- falls in the last bin of [0.1, 0.3]
        assert.same({1, 1, 1}, ordo.tensor({0.1, 0.2, 0.3}, "float32"):histc(3, 0.1, 0.3):totable())
        assert.same({1, 1, 1}, ordo.tensor({0.1, 0.2, 0.3}, "float64"):histc(3, 0.1, 0.3):totable())
        -- a tiny range: no inf bin width (the first element went nowhere sensible), and one that
        -- float32 cannot tell apart is refused
        assert.same({2, 1}, ordo.tensor({0, 1e-320, 3e-320}, "float64"):histc(2, 0, 4e-320):totable())
        H.raises(function() return ordo.tensor({0, 1}):histc(2, 0, 1e-46) end, "histc", "one value in float32")
        H.raises(function() return ordo.tensor({1}, "int32"):histc() end, "histc", "float")
        H.raises(function() return ordo.tensor({1}):histc(4, 3, 1) end, "histc", "min")
        H.raises(function() return ordo.tensor({1}):histc(2 ^ 50) end, "histc", "out of memory")
        H.raises(function() return ordo.tensor({2 ^ 50}, "int64"):bincount() end, "bincount", "out of memory")
    end)

    it("where(cond) is nonzero(cond, as_tuple); t[mask] reads and t[mask] = v fills; t[index] rows", function()
        local w = ordo.where(ordo.tensor({{0, 1}, {1, 0}}))
        assert.same({1, 2}, w[1]:totable())
        assert.same({2, 1}, w[2]:totable())
        local x = ordo.tensor({{1, 2, 3}, {4, 5, 6}})
        assert.same({4, 5, 6}, x[x:gt(3)]:totable())
        x[x:gt(3)] = 0
        assert.same({{1, 2, 3}, {0, 0, 0}}, x:totable())
        x[x:eq(2)] = ordo.tensor(9)
        assert.same({{1, 9, 3}, {0, 0, 0}}, x:totable())
        x[ordo.tensor({{1, 0, 1}, {1, 0, 1}}, "uint8")] = -1
        assert.same({{-1, 9, -1}, {-1, 0, -1}}, x:totable())
        H.raises(function() x[x:eq(9)] = ordo.tensor({1, 2}) end, "t[mask] = x", "cannot expand shape 2 to 1")
        H.raises(function() x[x:eq(9)] = "a" end, "t[mask] = x", "number or a tensor", "string")
        H.raises(function() x[ordo.tensor({1.5})] = 1 end, "t[i] = x", "uint8 mask", "float32")
        -- an index of several dims gives the rows in its shape, as Torch's (it was refused)
        local rows = ordo.arange(1, 10):view(3, 3)[ordo.tensor({{3, 1}, {2, 2}}, "int64")]
        assert.same({{{7, 8, 9}, {1, 2, 3}}, {{4, 5, 6}, {4, 5, 6}}}, rows:totable())
        local r2 = ordo.zeros(3, 2)
        r2[ordo.tensor({{1}, {3}}, "int64")] = ordo.tensor({{5, 6}})
        assert.same({{5, 6}, {0, 0}, {5, 6}}, r2:totable())
        H.raises(function() r2[ordo.tensor({{1, 2}}, "int64")] = ordo.tensor({{1, 2, 3}}) end, "t[index] = x",
                 "1x3")
        -- an int64 or int32 index tensor: rows of the first dim, read and written
        local y = ordo.arange(12):view(3, 4)
        assert.same({{8, 9, 10, 11}, {0, 1, 2, 3}}, y[ordo.tensor({3, 1}, "int64")]:totable())
        y[ordo.tensor({1, 3}, "int32")] = 0
        assert.same({{0, 0, 0, 0}, {4, 5, 6, 7}, {0, 0, 0, 0}}, y:totable())
        y[ordo.tensor({2}, "int64")] = ordo.tensor({9, 8, 7, 6})
        assert.same({9, 8, 7, 6}, y:totable()[2])
        local v = ordo.tensor({5, 6, 7})
        v[ordo.tensor({1, 3}, "int64")] = -1
        assert.same({-1, 6, -1}, v:totable())
        H.raises(function() y[ordo.tensor({1}, "int64")] = ordo.tensor({1, 2}) end, "t[index] = x", "expand")
        H.raises(function() local s = ordo.tensor(1); s[ordo.tensor({1}, "int64")] = 2 end, "t[index] = x", "0-dim")
        local i = ordo.tensor({1, 2, 3}, "int32")
        H.raises(function() i[i:gt(1)] = 2.5 end, "t[mask] = x", "int32")
        assert.same({1, 2, 3}, i:totable())
    end)

    it("t[mask] with a mask of the leading dims selects and fills slices, as Torch's; other shapes are refused", function()
        -- a square matrix: the mask of its rows picked columns (broadcast as masked_select's)
        local x = ordo.arange(1, 10):view(3, 3)
        local rows = ordo.tensor({1, 0, 1}, "uint8")
        assert.same({{1, 2, 3}, {7, 8, 9}}, x[rows]:totable())
        assert.same({{1, 4, 7}, {3, 6, 9}}, x:t()[rows]:totable())
        assert.same({0, 3}, x[ordo.zeros({3}, "uint8")]:shape())
        local z = ordo.arange(24):view(2, 3, 4)
        assert.same({{0, 1, 2, 3}, {20, 21, 22, 23}}, z[ordo.tensor({{1, 0, 0}, {0, 0, 1}}, "uint8")]:totable())
        local y = x:clone()
        y[rows] = 0
        assert.same({{0, 0, 0}, {4, 5, 6}, {0, 0, 0}}, y:totable())
        local b = ordo.zeros(3, 3)
        b:t()[ordo.tensor({0, 1, 0}, "uint8")] = 7 -- through a view: column 2 of b
        assert.same({{0, 7, 0}, {0, 7, 0}, {0, 7, 0}}, b:totable())
        -- the gradient reaches the selected rows
        local w = ordo.ones(3, 2):requires_grad()
        w[rows]:sum():backward()
        assert.same({{1, 1}, {0, 0}, {1, 1}}, w.grad:totable())
        -- a mask of another shape is refused, the tensor untouched (Torch raises too)
        local y0 = y:totable()
        H.raises(function() return x[ordo.tensor({1, 0, 1, 0}, "uint8")] end, "t[mask]", "shape 4", "3x3")
        H.raises(function() return x[ordo.ones({1, 3}, "uint8")] end, "t[mask]", "1x3", "leading dims")
        H.raises(function() return x[ordo.ones({2, 3, 3}, "uint8")] end, "t[mask]", "2x3x3")
        H.raises(function() return x[ordo.tensor(1, "uint8")] end, "t[mask]", "scalar")
        H.raises(function() y[ordo.ones({1, 3}, "uint8")] = 5 end, "t[mask] = x", "1x3", "leading dims")
        assert.same(y0, y:totable())
        -- a full-shape mask of a 0-dim tensor, as Torch's
        assert.same({5}, ordo.tensor(5)[ordo.tensor(1, "uint8")]:totable())
    end)

    it("t[mask] = values writes the selected elements or slices in order, as Torch's (x[m] = y[m])", function()
        local x = ordo.arange(6):view(2, 3)
        x[x:gt(2)] = ordo.tensor({10, 20, 30})
        assert.same({{0, 1, 2}, {10, 20, 30}}, x:totable())
        local y, z = ordo.arange(6):view(2, 3), ordo.zeros(2, 3)
        local m = y:lt(3):logical_and(y:ne(1))
        z[m] = y[m]
        assert.same({{0, 0, 2}, {0, 0, 0}}, z:totable())
        local r = ordo.zeros(3, 2)
        r[ordo.tensor({1, 0, 1}, "uint8")] = ordo.tensor({{1, 2}, {3, 4}}) -- slices of a mask of the rows
        assert.same({{1, 2}, {0, 0}, {3, 4}}, r:totable())
        r[ordo.tensor({0, 1, 0}, "uint8")] = ordo.tensor({5, 6}) -- broadcast to them
        assert.same({{1, 2}, {5, 6}, {3, 4}}, r:totable())
        local b = ordo.zeros(3, 3)
        b:t()[ordo.eye(3):byte()] = ordo.tensor({1, 2, 3}) -- through a view
        assert.same({{1, 0, 0}, {0, 2, 0}, {0, 0, 3}}, b:totable())
        -- a count that does not fit, a float into integers, a tensor that requires a gradient: refused, untouched
        H.raises(function() r[r:eq(0)] = ordo.tensor({1, 2}) end, "t[mask] = x", "2")
        local i = ordo.zeros({2}, "int32")
        H.raises(function() i[i:eq(0)] = ordo.tensor({1.5, 2.5}) end, "t[mask] = x", "float32", "int32")
        i[i:eq(0)] = ordo.tensor({7, 8}, "int64")
        assert.same({7, 8}, i:totable())
        local w = ordo.zeros(2):requires_grad()
        H.raises(function() w[ordo.ones({2}, "uint8")] = ordo.tensor({1, 2}) end, "t[mask] = x", "requires a gradient")
        assert.same({{1, 2}, {5, 6}, {3, 4}}, r:totable())
        assert.same({0, 0}, w:detach():totable())
    end)

    it("masked_scatter(_): Torch's, source's elements in order where the (broadcast) mask is set; gradients", function()
        local m = ordo.tensor({{1, 0, 1}, {0, 1, 0}}, "uint8")
        local src = ordo.arange(1, 7)
        assert.same({{1, 0, 2}, {0, 3, 0}}, ordo.zeros(2, 3):masked_scatter(m, src):totable())
        assert.same({{1, 0, 2}, {3, 0, 4}}, ordo.zeros(2, 3):masked_scatter(ordo.tensor({1, 0, 1}, "uint8"), src):totable())
        local y = ordo.zeros(2, 3)
        assert.equals(y, y:t():masked_scatter_(ordo.tensor({1, 0}, "uint8"), src:view(2, 3)) and y or nil)
        assert.same({{1, 2, 3}, {0, 0, 0}}, y:totable())
        assert.equals(9, ordo.tensor(3):masked_scatter(ordo.tensor(1, "uint8"), ordo.tensor({9})):item())
        local s = ordo.arange(1, 7):requires_grad()
        local b = ordo.zeros(2, 3):requires_grad()
        b:masked_scatter(ordo.tensor({1, 0, 1}, "uint8"), s):mul(ordo.arange(1, 7):view(2, 3)):sum():backward()
        assert.same({1, 3, 4, 6, 0, 0}, s.grad:totable())
        assert.same({{0, 2, 0}, {0, 5, 0}}, b.grad:totable())
        H.raises(function() return y:masked_scatter(ordo.ones({2, 3}, "uint8"), ordo.tensor({1, 2})) end,
                 "masked_scatter", "selects 6 elements", "has 2")
        H.raises(function() return y:masked_scatter(ordo.ones(2, 3), src) end, "masked_scatter", "uint8", "float32")
        H.raises(function() return ordo.zeros({2}, "int32"):masked_scatter_(ordo.ones({2}, "uint8"), src) end,
                 "masked_scatter_", "float32", "int32")
        assert.same({{1, 2, 3}, {0, 0, 0}}, y:totable())
    end)

    it("t[index] with a 0-dim index tensor drops the dim, as Torch's (as t[i] does)", function()
        local x = ordo.arange(1, 13):view(3, 4)
        local r = x[ordo.tensor(2, "int64")]
        assert.same({4}, r:shape())
        assert.same({5, 6, 7, 8}, r:totable())
        local e = ordo.tensor({4, 5})[ordo.tensor(2, "int32")]
        assert.same({}, e:shape())
        assert.equals(5, e:item())
        x[ordo.tensor(2, "int64")] = ordo.tensor({0, 0, 0, 1})
        assert.same({0, 0, 0, 1}, x:totable()[2])
    end)

    it("split of an empty dim gives one empty view (as chunk and Torch); logspace takes a dtype alone; makers name themselves", function()
        local s = ordo.zeros(0, 2):split(2)
        assert.equals(1, #s)
        assert.same({0, 2}, s[1]:shape())
        assert.same({2, 0}, ordo.zeros(2, 0):split(3, 2)[1]:shape())
        local l = ordo.logspace(0, 3, 4, "int64")
        assert.equals("int64", l:dtype())
        assert.same({1, 10, 100, 1000}, l:totable())
        assert.equals("float64", ordo.logspace(0, 1, 2, {dtype = "float64", base = 2}):dtype())
        H.raises(function() return ordo.linspace(0, 1, 3, "int9") end, "linspace: unknown dtype")
        H.raises(function() return ordo.logspace(0, 1, 3, "int9") end, "logspace: unknown dtype")
        H.raises(function() return ordo.eye(3, {dtype = "x"}) end, "eye: unknown dtype")
    end)

    it("tensor_split into n views (the first len % n one longer) or at cuts, as Torch's", function()
        local function vals(list)
            local out = {}
            for i, t in ipairs(list) do out[i] = t:reshape(-1):totable() end
            return out
        end
        local x = ordo.arange(7)
        assert.same({{0, 1, 2}, {3, 4}, {5, 6}}, vals(x:tensor_split(3)))
        assert.same({{0}, {1}, {2}, {3}, {4}, {5}, {6}, {}, {}}, vals(x:tensor_split(9)))
        assert.same({{0}, {1, 2, 3}, {4, 5, 6}}, vals(x:tensor_split({1, 4})))
        assert.same({{0, 1, 2, 3}, {}, {2, 3, 4, 5, 6}, {}}, vals(x:tensor_split({4, 2, 9}))) -- Python's slices
        assert.same({{0, 1, 2, 3, 4, 5, 6}}, vals(x:tensor_split({})))
        local m = ordo.arange(6):view(2, 3):t() -- along dim 2 of a non-contiguous view
        assert.same({{0, 1, 2}, {3, 4, 5}}, vals(m:tensor_split(2, -1)))
        H.raises(function() return x:tensor_split(0) end, "tensor_split", "count")
        H.raises(function() return x:tensor_split(2 ^ 40) end, "tensor_split", "at most the length")
        H.raises(function() return x:tensor_split({1.5}) end, "tensor_split", "cut 1")
        H.raises(function() return x:tensor_split(2, 2) end, "tensor_split", "dim")
    end)

    it("keepdim must be a boolean: x:sum(1, 0) or x:sum(1, \"float64\") kept the dim silently", function()
        local x = ordo.ones(2, 3)
        for _, name in ipairs({"sum", "mean", "max", "min", "argmax", "argmin", "amax", "amin", "var", "std",
                               "logsumexp", "prod", "all", "any", "median"}) do
            H.raises(function() return x[name](x, 1, 0) end, name .. ": keepdim must be true or false, got 0")
            H.raises(function() return ordo[name](x, 1, "float64") end, name .. ": keepdim", "float64")
            assert.same({3}, (x[name](x, 1, false)):shape(), name)
            assert.same({1, 3}, (x[name](x, 1, true)):shape(), name)
        end
        H.raises(function() return x:norm(2, 1, 1) end, "norm: keepdim")
        H.raises(function() return x:kthvalue(1, 1, "yes") end, "kthvalue: keepdim")
        assert.same({1, 1}, x:norm(2, {1, 2}, true):shape())
        assert.same({3}, x:var(1, false, 0):shape()) -- (the correction after a false keepdim)
        assert.same({0, 0, 0}, x:var(1, false, 0):totable())
    end)

    it("cumsum and cumprod take Torch's dtype (it was ignored): the input cast to it, the result of it", function()
        local i = ordo.tensor({1, 2, 3}, "int32")
        assert.equals("float64", i:cumsum(1, "float64"):dtype())
        assert.same({1, 3, 6}, i:cumsum(1, "float64"):totable())
        assert.equals("int32", i:cumsum(1, {dtype = "int32"}):dtype())
        assert.equals("int64", i:cumsum(1):dtype()) -- as before without one
        assert.same({1, 3}, ordo.cumsum(ordo.tensor({1.5, 2}), 1, "int64"):totable()) -- cast first, as Torch's
        assert.same({200, 44}, ordo.tensor({200, 100}, "uint8"):cumsum(1, "uint8"):totable()) -- wraps in uint8
        assert.same({2, 6, 24}, ordo.tensor({2, 3, 4}):cumprod(1, "float64"):totable())
        H.raises(function() return i:cumsum(1, "int9") end, "cumsum", "unknown dtype")
        H.raises(function() return i:cumprod(1, {dtyp = "int32"}) end, "cumprod", "unknown option")
        local g = ordo.tensor({1, 2}, "float64"):requires_grad()
        g:cumsum(1, "float32"):sum():backward()
        assert.same({2, 1}, g.grad:totable())
    end)

    it("cumsum_ and cumprod_: in place, self's dtype kept, through views", function()
        local i = ordo.tensor({1, 2, 3}, "int32")
        assert.is_true(rawequal(i, i:cumsum_(1)))
        assert.equals("int32", i:dtype())
        assert.same({1, 3, 6}, i:totable())
        local u = ordo.tensor({200, 100}, "uint8")
        u:cumsum_(1)
        assert.same({200, 44}, u:totable()) -- wraps in uint8, as Torch's
        local y = ordo.tensor({{1, 2}, {3, 4}})
        y:t():cumprod_(1) -- along y's rows, through the transposed view
        assert.same({{1, 2}, {3, 12}}, y:totable())
        local z = ordo.tensor({{1, 2}, {3, 4}})
        z:cumsum_(1)
        assert.same({{1, 2}, {4, 6}}, z:totable())
        H.raises(function() return ordo.tensor({1, 2}):cumsum_(3) end, "cumsum_", "dim 3 out of range")
        H.raises(function() return ordo.tensor({1, 2}):cumprod_(1, 2) end, "cumprod_: unexpected extra argument 2")
        H.raises(function() return ordo.randn({3}):requires_grad():cumsum_(1) end, "cumsum_", "in place")
    end)

    it("a list of dims with named keys is refused: x:var({correction = 0}) said the list was empty, x:mean({1, dim = 2}) took dim 1", function()
        local x = ordo.ones(2, 3)
        H.raises(function() return x:var({correction = 0}) end, "var", "key correction")
        H.raises(function() return x:mean({1, dim = 2}) end, "mean", "key dim")
        H.raises(function() return x:amax({1, keepdim = true}) end, "amax", "key keepdim")
        assert.same({}, x:sum({1, 2}):shape())
    end)
end)

describe("small conveniences a Torch user reaches for, against plain Lua", function()
    local inf, nan = 1 / 0, 0 / 0
    local function same_num(w, g) return w == g or (w ~= w and g ~= g) end

    it("round(decimals) as Torch's: halves to even at the decimal place, in the tensor's dtype (the decimals were ignored)", function()
        local ffi = require "ffi"
        local f32 = ffi.new("float[1]")
        local function r32(v) f32[0] = v return tonumber(f32[0]) end -- v as a float32
        -- float32: x * 10^d rounded in float32, then divided, as Torch's kernel
        local xs = {1.2345, 2.675, -1.005, 0.125, 0.135, 0.25, -0.05}
        local got = ordo.tensor(xs):round(2):totable()
        local want = {1.23, 2.68, -1, 0.12, 0.14, 0.25, -0.05}
        for i = 1, #xs do assert.equals(r32(want[i]), got[i]) end
        assert.same({20, 20, 40, -20, 1230}, ordo.tensor({15, 25, 35, -15, 1234.5}):round(-1):totable())
        assert.same({1200, 1400}, ordo.tensor({1250, 1350}, "float64"):round({decimals = -2}):totable())
        local s = ordo.tensor({0 / 0, 1 / 0}):round(3):totable()
        assert.is_true(s[1] ~= s[1])
        assert.equals(1 / 0, s[2])
        assert.same({2}, ordo.tensor({2.5}):round(0):totable())
        local x = ordo.tensor({1.26, 3.14159})
        assert.is_true(rawequal(x, x:round_(1)))
        assert.same({r32(1.3), r32(3.1)}, x:totable())
        -- integers have no decimals: kept for d > 0, refused for d < 0 (Torch has no kernel)
        local i = ordo.tensor({7}, "int32")
        assert.same({7}, i:round(2):totable())
        H.raises(function() return i:round(-1) end, "round", "float tensor", "int32")
        H.raises(function() return ordo.tensor({1}):round(1.5) end, "round", "decimals must be an integer", "1.5")
        H.raises(function() return ordo.tensor({1}):round("2") end, "round", "decimals must be an integer", "string")
        H.raises(function() return ordo.tensor({1}):round({digits = 2}) end, "round", "digits")
        -- the gradient is zero, as round's
        local g = ordo.tensor({1.26}):requires_grad()
        g:round(1):sum():backward()
        assert.same({0}, g.grad:totable())
    end)

    it("softmax and log_softmax take Torch's dtype (it was ignored: float32 out); F.softmin, nn.Softmin", function()
        local rows = {{1, 2, 4}, {3, 5, 9}}
        local x = ordo.tensor(rows)
        local want, want_log = {}, {}
        for i, r in ipairs(rows) do
            local z = 0
            for _, v in ipairs(r) do z = z + math.exp(v) end
            want[i], want_log[i] = {}, {}
            for j, v in ipairs(r) do want[i][j], want_log[i][j] = math.exp(v) / z, v - math.log(z) end
        end
        for _, dt in ipairs({"float64", {dtype = "float64"}}) do
            local s, l = x:softmax(2, dt), x:log_softmax(-1, dt)
            assert.equals("float64", s:dtype())
            assert.equals("float64", l:dtype())
            for i = 1, 2 do close(want[i], s:totable()[i], 1e-7) close(want_log[i], l:totable()[i], 1e-7) end
        end
        local F = ordo.nn.functional
        assert.equals("float64", F.softmax(x, 2, "float64"):dtype())
        assert.equals("float64", F.log_softmax(x, 2, "float64"):dtype())
        assert.equals("float64", ordo.tensor({1, 2}, "int32"):softmax(1, "float64"):dtype())
        assert.equals("float32", x:softmax(2, {}):dtype())
        H.raises(function() return x:softmax(2, "int32") end, "softmax", "float32 or float64", "int32")
        H.raises(function() return x:log_softmax(2, {dtyp = "float64"}) end, "log_softmax", "dtyp")
        -- the gradient goes through the cast
        local y = x:clone():requires_grad()
        y:softmax(2, "float64"):select(2, 1):sum():backward()
        local y2 = x:clone():requires_grad()
        y2:softmax(2):select(2, 1):sum():backward()
        for i = 1, 2 do close(y2.grad:totable()[i], y.grad:totable()[i], 1e-6) end
        -- softmin: softmax of -x
        local m = F.softmin(x, 2):totable()
        local neg = (-x):softmax(2):totable()
        for i = 1, 2 do close(neg[i], m[i], 1e-7) end
        assert.equals("float64", F.softmin(x, 2, "float64"):dtype())
        local mm = ordo.nn.Softmin(1):forward(x):totable()
        local negc = (-x):softmax(1):totable()
        for i = 1, 2 do close(negc[i], mm[i], 1e-7) end
        H.raises(function() return F.softmin(x, 3) end, "softmin", "dim 3")
    end)

    it("clamp_min, clamp_max and their in-place forms, as Torch's (clamp with one bound)", function()
        local nan = 0 / 0
        local a = ordo.tensor({1, nan, 5}):clamp_min(2):totable()
        assert.is_true(a[1] == 2 and a[2] ~= a[2] and a[3] == 5)
        local b = ordo.tensor({1, nan, 5}):clamp_max(2):totable()
        assert.is_true(b[1] == 1 and b[2] ~= b[2] and b[3] == 2)
        assert.same({2, 3}, ordo.tensor({1, 3}):clamp_min(ordo.tensor({2, 2})):totable())
        local x = ordo.tensor({1, 3})
        assert.is_true(rawequal(x, x:clamp_min_(2)))
        assert.same({2, 3}, x:totable())
        x:clamp_max_(2.5)
        assert.same({2, 2.5}, x:totable())
        assert.same({3}, ordo.clamp_min(ordo.tensor({1}), 3):totable())
        H.raises(function() return ordo.tensor({1}):clamp_min() end, "clamp_min", "lower bound", "nil")
        H.raises(function() return ordo.tensor({1}):clamp_max("a") end, "clamp_max", "string")
        H.raises(function() return ordo.tensor({1}, "int32"):clamp_min_(0.5) end, "clamp_min_", "int32")
        local g = ordo.tensor({1, 2, 3}):requires_grad()
        g:clamp_min(2):sum():backward() -- (the gradient passes at the bound, as Torch's)
        assert.same({0, 1, 1}, g.grad:totable())
    end)

    it("logit's gradient is Torch's 1 / (p (1 - p)): infinite at 0 and 1 (was NaN), 0 outside [eps, 1 - eps], NaN outside [0, 1]", function()
        local x = ordo.tensor({0, 0.25, 0.5, 1, 2, -1}):requires_grad()
        local y = x:logit()
        y:sum():backward()
        local v, gr = y:totable(), x.grad:totable()
        assert.same({-inf, inf}, {v[1], v[4]})
        close({math.log(1 / 3), 0}, {v[2], v[3]})
        assert.equals(inf, gr[1])
        assert.equals(inf, gr[4])
        close({16 / 3, 4}, {gr[2], gr[3]})
        assert.is_true(gr[5] ~= gr[5] and gr[6] ~= gr[6])
        local e = ordo.tensor({0, 0.1, 0.25, 0.95, 1}):requires_grad()
        e:logit(0.1):sum():backward()
        local ge = e.grad:totable()
        close({0, 1 / 0.09, 16 / 3, 0, 0}, ge, 1e-6)
        local d = ordo.tensor({0.2, 0.7}, "float64"):requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(t) return t:logit() end, {d}))
        assert.is_true(ordo.autograd.gradcheck(function(t) return t:logit(0.25) end,
                                               {ordo.tensor({0.2, 0.5, 0.9}, "float64"):requires_grad()}))
    end)

    it("norm, nansum and nanmean take Torch's dtype, the input cast to it first (it was ignored: float32 out)", function()
        local x = ordo.tensor({{1, -2, 4}, {3, nan, -9}})
        local n = x:norm(1, 2, true, "float64")
        assert.equals("float64", n:dtype())
        assert.same({2, 1}, n:shape())
        assert.equals(7, n:totable()[1][1])
        local a = ordo.tensor({3, 4}, "int32"):norm(2, nil, false, {dtype = "float64"})
        assert.equals("float64", a:dtype())
        assert.equals(5, a:item())
        local s = x:nansum(2, false, "float64")
        assert.equals("float64", s:dtype())
        assert.same({3, -6}, s:totable())
        assert.equals("int32", ordo.tensor({3, 4}, "int32"):nansum(nil, false, "int32"):dtype())
        local m = x:nanmean(2, false, "float64")
        assert.equals("float64", m:dtype())
        close({1, -3}, m:totable(), 1e-12)
        assert.equals("float32", x:nanmean(2, false, {}):dtype())
        H.raises(function() return x:norm(2, nil, false, "int32") end, "norm", "float32 or float64", "int32")
        H.raises(function() return x:nanmean(2, false, "int64") end, "nanmean", "float32 or float64", "int64")
        H.raises(function() return x:nansum(2, false, "float16") end, "nansum", "float16")
        local g = ordo.tensor({3, 4}):requires_grad()
        g:norm(2, nil, false, "float64"):backward()
        close({0.6, 0.8}, g.grad:totable(), 1e-6)
    end)

    it("atan2 as C's on every quadrant, signed zeros and infinities; hypot, logaddexp, xlogy, logit; gradients", function()
        local ys = {0, -0.0, 1, -1, 0, -0.0, 2, -2, inf, -inf, inf, -inf, 1, 1, inf, nan, 0, 3, 0.5}
        local xs = {1, 1, 0, 0, -1, -1, -3, -3, inf, inf, -inf, -inf, inf, -inf, 1, 1, -0.0, 4, nan}
        local got = ordo.atan2(ordo.tensor(ys, "float64"), ordo.tensor(xs, "float64")):totable()
        for i = 1, #ys do
            local w = math.atan2(ys[i], xs[i])
            assert.is_true(same_num(w, got[i]) and (w ~= 0 or 1 / w == 1 / got[i]),
                           ("atan2(%s, %s): want %s, got %s"):format(ys[i], xs[i], w, got[i]))
        end
        assert.equals("float32", ordo.atan2(ordo.tensor({1}, "int32"), 2):dtype())
        close({math.atan2(1, 2)}, ordo.tensor({1}):atan2(2):totable())
        close({math.atan2(2, -1)}, ordo.atan2(2, ordo.tensor({-1})):totable())
        local h = ordo.tensor({3, 1e30, 0, inf, nan, -5}):hypot(ordo.tensor({4, 1e30, 0, nan, inf, 12})):totable()
        close({5, math.sqrt(2) * 1e30, 0}, {h[1], h[2], h[3]})
        assert.same({inf, inf, 13}, {h[4], h[5], h[6]})
        local l = ordo.logaddexp(ordo.tensor({1000, -inf, inf, 0, 1}, "float64"),
                                 ordo.tensor({1000, -inf, inf, 0, 2}, "float64")):totable()
        assert.same({-inf, inf}, {l[2], l[3]})
        close({1000 + math.log(2), math.log(2), math.log(math.exp(1) + math.exp(2))}, {l[1], l[4], l[5]}, 1e-12)
        local xl = ordo.xlogy(ordo.tensor({0, 0, 2, 3}), ordo.tensor({0, nan, 3, 0})):totable()
        assert.equals(0, xl[1])
        assert.is_true(xl[2] ~= xl[2])
        close(2 * math.log(3), xl[3])
        assert.equals(-inf, xl[4])
        -- y broadcast up to x's shape (and x to y's): y:masked_fill with the
        -- broadcast mask refused it ("masked_fill: shape 2x3 cannot be
        -- broadcast to 1")
        local xb = ordo.xlogy(ordo.tensor({{0, 1, 2}, {3, 0, 1}}, "float64"), ordo.tensor({2}, "float64")):totable()
        close({{0, math.log(2), 2 * math.log(2)}, {3 * math.log(2), 0, math.log(2)}}, xb, 1e-12)
        close({{0, 2 * math.log(2)}, {0, 2 * math.log(3)}},
              ordo.xlogy(ordo.tensor({0, 2}, "float64"), ordo.tensor({{2}, {3}}, "float64")):totable(), 1e-12)
        assert.is_true(ordo.autograd.gradcheck(function(p, q) return ordo.xlogy(p, q) end,
                                               {ordo.tensor({{0.5, 1, 2}, {3, 0.7, 1}}, "float64"):requires_grad(),
                                                ordo.tensor({2}, "float64"):requires_grad()}))
        close({math.log(1 / 3), math.log(1e-6 / (1 - 1e-6))}, ordo.tensor({0.25, 0}, "float64"):logit(1e-6):totable(), 1e-9)
        H.raises(function() return ordo.atan2(1, 2) end, "atan2", "a tensor")
        H.raises(function() return ordo.hypot(ordo.zeros(2), ordo.zeros(3)) end, "hypot", "broadcast")
        H.raises(function() return ordo.ones(2):logit(0.7) end, "logit", "eps")
        local y, x = ordo.randn(5):double():requires_grad(), ordo.randn(5):double():requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(p, q) return ordo.atan2(p, q) end, {y, x}))
        assert.is_true(ordo.autograd.gradcheck(function(p, q) return ordo.hypot(p, q) end, {y, x}))
        assert.is_true(ordo.autograd.gradcheck(function(p, q) return ordo.logaddexp(p, q) end, {y, x}))
        assert.is_true(ordo.autograd.gradcheck(function(p, q) return ordo.xlogy(p, q:abs() + 0.5) end, {y, x}))
        -- the origin: atan2's gradient is 0 there, as Torch's
        local z = ordo.zeros({1}, "float64"):requires_grad()
        local w = ordo.zeros({1}, "float64"):requires_grad()
        ordo.atan2(z, w):sum():backward()
        assert.same({0}, z.grad:totable())
        assert.same({0}, w.grad:totable())
    end)

    it("movedim, swapaxes, rot90, fliplr, flipud, unbind, view_as, reshape_as, broadcast_to, broadcast_tensors", function()
        local a = ordo.arange(24):view(2, 3, 4)
        assert.same({3, 4, 2}, a:movedim(1, -1):shape())
        assert.same({3, 4, 2}, a:movedim({1, 2}, {3, 1}):shape())
        assert.is_true(ordo.equal(a:movedim(1, 3), a:permute({2, 3, 1})))
        assert.is_true(ordo.equal(a:moveaxis(3, 1), a:permute({3, 1, 2})))
        assert.is_true(ordo.equal(a:swapaxes(1, 3), a:transpose(1, 3)))
        H.raises(function() return a:movedim({1, 1}, {2, 3}) end, "movedim", "twice")
        H.raises(function() return a:movedim({1}, {2, 3}) end, "movedim", "1 source dims but 2")
        H.raises(function() return a:swapaxes(1, 4) end, "swapaxes", "4")
        local m = ordo.tensor({{1, 2, 3}, {4, 5, 6}})
        assert.same({{3, 6}, {2, 5}, {1, 4}}, m:rot90():totable())
        assert.same({{4, 1}, {5, 2}, {6, 3}}, m:rot90(-1):totable())
        assert.same({{6, 5, 4}, {3, 2, 1}}, m:rot90(2):totable())
        assert.same({{4, 1}, {5, 2}, {6, 3}}, m:rot90(1, {2, 1}):totable())
        assert.same(m:totable(), m:rot90(4):totable())
        assert.same({{3, 2, 1}, {6, 5, 4}}, m:fliplr():totable())
        assert.same({{4, 5, 6}, {1, 2, 3}}, m:flipud():totable())
        H.raises(function() return ordo.ones(3):fliplr() end, "fliplr", "2 dims")
        local cols = m:unbind(2)
        assert.equals(3, #cols)
        assert.same({2, 5}, cols[2]:totable())
        assert.same({4, 5, 6}, m:unbind()[2]:totable())
        assert.same({3, 2}, m:view_as(ordo.zeros(3, 2)):shape())
        assert.same({6}, m:t():reshape_as(ordo.zeros(6)):shape())
        H.raises(function() return m:view_as(ordo.zeros(4)) end, "view_as")
        assert.same({{1, 2}, {1, 2}}, ordo.tensor({1, 2}):broadcast_to({2, 2}):totable())
        H.raises(function() return ordo.tensor({1, 2}):broadcast_to({3}) end, "broadcast_to")
        local p, q = ordo.broadcast_tensors(ordo.tensor({1, 2}), ordo.tensor({{1}, {2}}))
        assert.same({{1, 2}, {1, 2}}, p:totable())
        assert.same({{1, 1}, {2, 2}}, q:totable())
        H.raises(function() return ordo.broadcast_tensors(ordo.zeros(2), ordo.zeros(3)) end, "broadcast_tensors")
        local g = ordo.randn(2, 3):double():requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(t) return t:rot90(1) end, {g}))
    end)

    it("new_zeros/ones/full/empty/tensor take self's dtype and device; clip is clamp", function()
        local i = ordo.tensor({1}, "int32")
        assert.equals("int32", i:new_zeros({2, 3}):dtype())
        assert.same({{0, 0, 0}, {0, 0, 0}}, i:new_zeros({2, 3}):totable())
        assert.same({1, 1}, i:new_ones({2}):totable())
        assert.same({2}, i:new_empty({2}):shape())
        assert.equals("float64", i:new_full({2}, 3, "float64"):dtype())
        assert.same({3, 3}, i:new_full({2}, 3):totable())
        assert.equals("int32", i:new_tensor({4, 5}):dtype())
        assert.equals("float32", i:new_tensor({4, 5}, {dtype = "float32"}):dtype())
        assert.same({0, 0, 0}, i:new_zeros(3):totable()) -- sizes as arguments, as Torch's (it raised)
        H.raises(function() return i:new_zeros("3") end, "new_zeros", "shape")
        assert.same({1, 1}, i:new_full({2}, 1.5):totable()) -- truncated, as full and Torch
        H.raises(function() return ordo.tensor({1}, "uint8"):new_full({2}, 300) end, "new_full", "300", "uint8")
        H.raises(function() return i:new_ones({2}, {dtyp = "x"}) end, "new_ones", "unknown option")
        assert.same({1, 2, 2}, ordo.tensor({0, 2, 5}):clip(1, 2):totable())
        local c = ordo.tensor({0, 5})
        assert.equals(c, c:clip_(1, 2))
        assert.same({1, 2}, c:totable())
    end)

    it("frac, deg2rad, rad2deg, count_nonzero, nansum, nanmean, aminmax, var_mean, std_mean, dist, inner", function()
        close({-0.5, 0.25, 0}, ordo.tensor({-1.5, 2.25, 3}):frac():totable())
        H.raises(function() return ordo.tensor({1}, "int32"):frac() end, "frac", "float")
        close({math.pi, -math.pi / 2}, ordo.tensor({180, -90}, "int32"):deg2rad():totable())
        close({180}, ordo.tensor({math.pi}, "float64"):rad2deg():totable(), 1e-12)
        assert.equals(2, ordo.tensor({1, 0, nan}):count_nonzero():item())
        assert.same({2, 0}, ordo.tensor({{1, 0}, {2, 0}}):count_nonzero(1):totable())
        local x = ordo.tensor({{1, nan, 3}, {nan, nan, nan}})
        assert.same({4, 0}, x:nansum(2):totable())
        assert.equals(4, x:nansum():item())
        local nm = x:nanmean(2):totable()
        assert.equals(2, nm[1])
        assert.is_true(nm[2] ~= nm[2])
        assert.equals(2, x:nanmean():item())
        local lo, hi = ordo.tensor({{3, 1}, {2, 5}}):aminmax(1)
        assert.same({2, 1}, lo:totable())
        assert.same({3, 5}, hi:totable())
        local v, mu = ordo.tensor({1, 2, 3, 4}):var_mean()
        close(5 / 3, v:item())
        assert.equals(2.5, mu:item())
        local sd, mu2 = ordo.tensor({{1, 3}}):std_mean(2, true, 0)
        assert.same({{1}}, sd:totable())
        assert.same({{2}}, mu2:totable())
        close(2, ordo.tensor({1, 2, 3}):dist(ordo.tensor({1, 2, 5})):item())
        close(3, ordo.tensor({1, 2, 3}):dist(ordo.tensor({2, 3, 4}), 1):item())
        assert.same({3, 7}, ordo.tensor({{1, 2}, {3, 4}}):inner(ordo.tensor({1, 1})):totable())
        assert.same({2, 3}, ordo.randn(2, 4):inner(ordo.randn(3, 4)):shape())
        H.raises(function() return ordo.zeros(2, 3):inner(ordo.zeros(4)) end, "inner", "last dims")
    end)

    it("quantile (linear, as Torch's; NaN lines give NaN) and tril_indices / triu_indices against plain Lua", function()
        local function q_ref(xs, q)
            local s = {}
            for i, v in ipairs(xs) do s[i] = v end
            table.sort(s)
            local pos = q * (#s - 1)
            local lo = math.floor(pos)
            local hi = math.min(lo + 1, #s - 1)
            return s[lo + 1] + (s[hi + 1] - s[lo + 1]) * (pos - lo)
        end
        local rows = {{3, 1, 4, 1, 5}, {9, 2, 6, 5, 3}}
        local t = ordo.tensor(rows, "float64")
        for _, q in ipairs({0, 0.1, 0.25, 0.5, 0.9, 1}) do
            close({q_ref(rows[1], q), q_ref(rows[2], q)}, t:quantile(q, 2):totable(), 1e-12)
            close(q_ref({3, 1, 4, 1, 5, 9, 2, 6, 5, 3}, q), t:quantile(q):item(), 1e-12)
        end
        local many = t:quantile({0.25, 0.75}, -1, true)
        assert.same({2, 2, 1}, many:shape())
        close({{q_ref(rows[1], 0.25)}, {q_ref(rows[2], 0.25)}}, many:totable()[1], 1e-12)
        assert.same({1, 1}, t:quantile(0.5, nil, true):shape())
        -- Torch's keywords as a trailing options table
        local v = ordo.tensor({1, 2, 3, 4}, "float64")
        assert.equals(2, v:quantile(0.5, {interpolation = "lower"}):item())
        assert.same({3}, v:quantile(0.5, {dim = 1, keepdim = true, interpolation = "higher"}):totable())
        assert.same({2.5}, v:quantile(0.5, 1, {keepdim = true}):totable())
        H.raises(function() v:quantile(0.5, {dims = 1}) end, "quantile: unknown option 'dims'")
        assert.same({3, 5}, t:quantile(ordo.tensor({0.1, 0.2, 0.3}), 1):shape())
        assert.same({3}, t:quantile(ordo.tensor({0.1, 0.2, 0.3})):shape())
        local n = ordo.tensor({{1, 2, 3}, {4, 0 / 0, 5}}):quantile(0.5, 2):totable()
        assert.equals(2, n[1])
        assert.is_true(n[2] ~= n[2])
        H.raises(function() return t:quantile(1.5) end, "quantile", "[0, 1]")
        H.raises(function() return ordo.tensor({1, 2}, "int32"):quantile(0.5) end, "quantile", "float")
        H.raises(function() return ordo.zeros(0):quantile(0.5) end, "quantile", "no elements")
        assert.is_true(ordo.autograd.gradcheck(function(p) return p:quantile(0.3, 2) end,
                                               {ordo.randn(3, 4):double():requires_grad()}))
        -- Torch's interpolation modes (they were ignored: every one gave linear's): ranks q (n - 1)
        -- 0, 0.4, 0.5, 1, 1.5, 2, 2.5, 3.6, 4 of 1..5 (shuffled)
        local u = ordo.tensor({4, 1, 5, 3, 2}, "float64")
        local qs = {0, 0.1, 0.125, 0.25, 0.375, 0.5, 0.625, 0.9, 1}
        local modes = {
            linear = {1, 1.4, 1.5, 2, 2.5, 3, 3.5, 4.6, 5},
            lower = {1, 1, 1, 2, 2, 3, 3, 4, 5},
            higher = {1, 2, 2, 2, 3, 3, 4, 5, 5},
            nearest = {1, 1, 1, 2, 3, 3, 3, 5, 5}, -- (halves to even: rank 0.5 -> 0, 1.5 -> 2, 2.5 -> 2)
            midpoint = {1, 1.5, 1.5, 2, 2.5, 3, 3.5, 4.5, 5},
        }
        for m, want in pairs(modes) do
            close(want, u:quantile(qs, nil, false, m):totable(), 1e-12)
            close(want, u:quantile(qs, nil, false, {interpolation = m}):totable(), 1e-12)
        end
        assert.same({{3}, {8}}, ordo.tensor({{1, 5, 3}, {9, 7, 8}}):quantile(0.25, 2, true, "higher"):totable())
        local gn = ordo.tensor({4, 1, 3, 2}):requires_grad()
        gn:quantile(0.5, nil, false, "nearest"):backward() -- rank 1.5 -> 2: the value 3
        assert.same({0, 0, 1, 0}, gn.grad:totable())
        H.raises(function() return t:quantile(0.5, nil, false, "cubic") end, "quantile", "interpolation", "'cubic'")
        H.raises(function() return t:quantile(0.5, nil, false, 3) end, "quantile", "interpolation", "number")
        H.raises(function() return t:quantile(0.5, nil, false, {interp = "lower"}) end, "quantile", "interp")
        -- tril / triu indices: row-major positions from 1
        local function band_ref(r, c, k, lower)
            local rr, cc = {}, {}
            for i = 1, r do
                for j = 1, c do
                    if (lower and j - i <= k) or (not lower and j - i >= k) then rr[#rr + 1], cc[#cc + 1] = i, j end
                end
            end
            return {rr, cc}
        end
        for _, case in ipairs({{3, 3, 0}, {3, 4, 1}, {4, 2, -1}, {2, 2, -5}, {2, 3, 7}}) do
            local r, c, k = case[1], case[2], case[3]
            local lo, up = ordo.tril_indices(r, c, k), ordo.triu_indices(r, c, k)
            local wl, wu = band_ref(r, c, k, true), band_ref(r, c, k, false)
            assert.same({2, #wl[1]}, lo:shape())
            assert.same({2, #wu[1]}, up:shape())
            if #wl[1] > 0 then assert.same(wl, lo:totable()) end
            if #wu[1] > 0 then assert.same(wu, up:totable()) end
        end
        assert.equals("int64", ordo.tril_indices(2, 2):dtype())
        assert.equals("int32", ordo.triu_indices(2, 2, 0, "int32"):dtype())
        H.raises(function() return ordo.tril_indices(2, 2, 0, "float32") end, "tril_indices", "int64 or int32")
        H.raises(function() return ordo.triu_indices(-1, 2) end, "triu_indices", "rows and cols")
    end)

    it("unique with dim: the distinct slices in lexicographic order, the inverse and counts, as Torch's", function()
        math.randomseed(7)
        local rows = {}
        for i = 1, 12 do rows[i] = {math.random(0, 2), math.random(0, 1), math.random(0, 2)} end
        local function key(r) return table.concat(r, ",") end
        local function less(a, b)
            for j = 1, #a do if a[j] ~= b[j] then return a[j] < b[j] end end
            return false
        end
        local seen, want = {}, {}
        for _, r in ipairs(rows) do
            if not seen[key(r)] then seen[key(r)] = true; want[#want + 1] = r end
        end
        table.sort(want, less)
        local place = {}
        for i, r in ipairs(want) do place[key(r)] = i end
        local want_inv, want_counts = {}, {}
        for i, r in ipairs(rows) do
            want_inv[i] = place[key(r)]
            want_counts[want_inv[i]] = (want_counts[want_inv[i]] or 0) + 1
        end
        local t = ordo.tensor(rows, "int32")
        local u, inv, counts = t:unique({dim = 1, return_inverse = true, return_counts = true})
        assert.same(want, u:totable())
        assert.equals("int32", u:dtype())
        assert.same(want_inv, inv:totable())
        assert.same(want_counts, counts:totable())
        -- along dim 2 of the transpose (non-contiguous): the same slices as columns
        local ut = t:t():unique({dim = -1})
        assert.same(want, ut:t():totable())
        assert.same({1, 0}, ordo.zeros(2, 0):unique({dim = 1}):shape())
        assert.same({0, 3}, ordo.zeros(0, 3):unique({dim = 1}):shape())
        H.raises(function() return t:unique({dim = 3}) end, "unique", "3")
    end)

    it("index_fill, index_copy, index_put (with accumulate) and isin against plain Lua; gradients", function()
        local x = ordo.arange(12):view(3, 4)
        local want = x:totable()
        for i = 1, 3 do want[i][1], want[i][3] = 7, 7 end
        assert.same(want, x:index_fill(2, ordo.tensor({1, 3}, "int64"), 7):totable())
        local y = x:clone()
        assert.equals(y, y:index_fill_(1, {2}, -1))
        assert.same({-1, -1, -1, -1}, y:totable()[2])
        assert.same({{3, 4}, {0, 0}, {1, 2}},
                    ordo.zeros(3, 2):index_copy(1, ordo.tensor({3, 1}, "int64"), ordo.tensor({{1, 2}, {3, 4}})):totable())
        H.raises(function() return ordo.zeros(3, 2):index_copy(1, {1}, ordo.zeros(2, 2)) end, "index_copy", "2x2")
        H.raises(function() return x:index_fill(1, ordo.tensor({1.0}), 0) end, "index_fill", "float32")
        -- index_put: element (i1[k], i2[k]) of each k; accumulate adds repeated places
        local a = ordo.zeros(3, 3)
        a:index_put_({ordo.tensor({1, 2, 1}, "int64"), ordo.tensor({3, 1, 3}, "int64")}, ordo.tensor({5, 6, 7}), true)
        assert.same({{0, 0, 12}, {6, 0, 0}, {0, 0, 0}}, a:totable())
        -- a row of a non-contiguous tensor, written in place
        local z = ordo.zeros(3, 2):t()
        z:index_put_({ordo.tensor({2}, "int64")}, ordo.tensor({1, 2, 3}))
        assert.same({{0, 0, 0}, {1, 2, 3}}, z:totable())
        local b = ordo.zeros(2, 2)
        assert.same({{0, 9}, {9, 0}}, b:index_put({ordo.tensor({1, 2}, "int64"), ordo.tensor({2, 1}, "int64")}, 9):totable())
        assert.same({{0, 0}, {0, 0}}, b:totable()) -- index_put makes a copy
        H.raises(function() return b:index_put_({}, 1) end, "index_put_", "1 to 2 index tensors")
        H.raises(function() return b:index_put_({ordo.tensor({1}, "int64")}, 1, 1) end, "index_put_", "accumulate")
        H.raises(function() return ordo.zeros({2}, "uint8"):index_put_({ordo.tensor({1}, "int64")}, 300) end,
                 "index_put_", "300")
        local p = ordo.randn(3, 3):double():requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(q) return q:index_fill(1, {2}, 0) end, {p}))
        local s = ordo.randn(2, 3):double():requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(q, r) return q:index_copy(1, {3, 1}, r) end, {p, s}))
        local v = ordo.randn(2):double():requires_grad()
        assert.is_true(ordo.autograd.gradcheck(function(q, r)
            return q:index_put({ordo.tensor({1, 3}, "int64"), ordo.tensor({2, 2}, "int64")}, r, true)
        end, {p, v}))
        -- isin: against a plain-Lua set (NaN in neither)
        math.randomseed(5)
        local es, ts = {}, {}
        for i = 1, 40 do es[i] = math.random(-5, 5) end
        for i = 1, 7 do ts[i] = math.random(-5, 5) end
        local set = {}
        for _, t in ipairs(ts) do set[t] = true end
        local w = {}
        for i, e in ipairs(es) do w[i] = set[e] and 1 or 0 end
        assert.same(w, ordo.isin(ordo.tensor(es, "int32"), ordo.tensor(ts, "int64")):totable())
        assert.same({0, 1, 0, 0, 1}, ordo.isin(ordo.tensor({1, 2, 3, 0 / 0, 2}), ordo.tensor({2, 0 / 0, 5})):totable())
        -- Torch's invert (assume_unique taken)
        assert.same({1, 0, 1, 1, 0}, ordo.isin(ordo.tensor({1, 2, 3, 0 / 0, 2}), ordo.tensor({2, 0 / 0, 5}),
                                               {invert = true, assume_unique = false}):totable())
        assert.same({0, 1}, ordo.isin(ordo.tensor({1, 2}), 2, {invert = false}):totable())
        H.raises(function() ordo.isin(ordo.tensor({1}), ordo.tensor({1}), {invert = 1}) end, "isin: invert must be a boolean")
        H.raises(function() ordo.isin(ordo.tensor({1}), ordo.tensor({1}), {invrt = true}) end, "isin: unknown option 'invrt'")
        assert.same({{0, 1}, {1, 0}}, ordo.tensor({{1, 4}, {4, 1}}):isin(4):totable())
        assert.same({0}, ordo.tensor({1}):isin(ordo.zeros(0)):totable())
    end)

    it("searchsorted and bucketize: Torch's insertion places, from 1, against plain Lua", function()
        math.randomseed(9)
        local bs = {}
        for i = 1, 9 do bs[i] = math.random(0, 12) end
        table.sort(bs)
        local vs = {}
        for i = 1, 30 do vs[i] = math.random(-2, 14) end
        local function place(v, right)
            local c = 0
            for _, x in ipairs(bs) do if x < v or (right and x == v) then c = c + 1 end end
            return c + 1
        end
        local wl, wr = {}, {}
        for i, v in ipairs(vs) do wl[i], wr[i] = place(v, false), place(v, true) end
        local b, v = ordo.tensor(bs), ordo.tensor(vs, "int32")
        assert.same(wl, ordo.searchsorted(b, v):totable())
        assert.same(wr, b:searchsorted(v, {right = true}):totable())
        assert.same(wl, ordo.bucketize(v, b):totable())
        assert.same(wr, v:bucketize(b, {right = true}):totable())
        assert.equals("int64", ordo.bucketize(v, b):dtype())
        assert.equals("int32", ordo.bucketize(v, b, {out_int32 = true}):dtype())
        assert.same({2, 15}, ordo.searchsorted(b, v:view(2, 15)):shape())
        assert.same({}, ordo.bucketize(3, b):shape())
        assert.same({5}, ordo.bucketize(ordo.tensor({0 / 0}), ordo.tensor({1, 2, 4, 8})):totable()) -- NaN last
        assert.same({1, 1}, ordo.searchsorted(ordo.tensor({}), ordo.tensor({1, 2})):totable())
        H.raises(function() return ordo.searchsorted(ordo.zeros(2, 2), v) end, "searchsorted",
                 "leading dims of the sequence's shape 2x2")
        H.raises(function() return ordo.bucketize(v, ordo.zeros(2, 2)) end, "bucketize", "1-dim")
        H.raises(function() return ordo.bucketize(v, b, {right = 1}) end, "bucketize", "right")
        -- a number the sequence's dtype cannot hold is compared as itself (2.5 was cut to 2 against
        -- int64 boundaries, -1 refused against uint8 ones)
        local ib = ordo.tensor({1, 2, 3}, "int64")
        assert.equals(3, ordo.searchsorted(ib, 2.5):item())
        assert.equals(3, ordo.bucketize(2.5, ib):item())
        assert.equals(1, ordo.searchsorted(ordo.tensor({1, 2, 3}, "uint8"), -1):item())
        assert.equals(4, ordo.searchsorted(ordo.tensor({1, 2, 3}, "uint8"), 300):item())
        assert.equals(2, ordo.searchsorted(ib, 2):item())
        -- isin likewise: 2.5 is in no int64 tensor (it matched 2), 300 in no uint8 one
        assert.same({0, 0, 0}, ordo.isin(ib, 2.5):totable())
        assert.same({0, 1, 0}, ordo.isin(ib, 2):totable())
        assert.equals(0, ordo.isin(2.5, ib):item())
        assert.equals(0, ordo.isin(300, ordo.tensor({44}, "uint8")):item())
    end)

    it("searchsorted: an N-dim sequence searched row by row, side and sorter, as Torch's", function()
        -- one sorted row per leading index; values of the same leading dims, each row's against its own
        math.randomseed(17)
        local rows, want, vals = {}, {}, {}
        for r = 1, 6 do
            rows[r] = {}
            for i = 1, 5 do rows[r][i] = math.random(0, 9) end
            table.sort(rows[r])
            vals[r], want[r] = {}, {}
            for i = 1, 4 do
                local x = math.random(-1, 10)
                local c = 0
                for _, y in ipairs(rows[r]) do if y < x then c = c + 1 end end
                vals[r][i], want[r][i] = x, c + 1
            end
        end
        local seq, v = ordo.tensor(rows, "float64"), ordo.tensor(vals, "float64")
        assert.same(want, ordo.searchsorted(seq, v):totable())
        -- 3 dims: 2 x 3 rows
        local got = ordo.searchsorted(seq:view(2, 3, 5), v:view(2, 3, 4)):totable()
        for r = 1, 6 do assert.same(want[r], got[math.floor((r - 1) / 3) + 1][(r - 1) % 3 + 1]) end
        -- a transposed (non-contiguous) sequence
        assert.same({{3}, {2}}, ordo.searchsorted(ordo.tensor({{1, 2}, {3, 4}, {5, 6}}):t(), ordo.tensor({{4}, {4}})):totable())
        assert.same({{1, 1}, {1, 1}}, ordo.searchsorted(ordo.zeros(2, 0), ordo.zeros(2, 2)):totable())
        -- side, Torch's other spelling of right
        local b = ordo.tensor({1, 3, 5, 7, 9})
        assert.same({3, 4, 6}, ordo.searchsorted(b, ordo.tensor({3, 6, 9}), {side = "right"}):totable())
        assert.same({2, 4, 5}, ordo.searchsorted(b, ordo.tensor({3, 6, 9}), {side = "left"}):totable())
        -- sorter: positions (from 1) that sort the sequence
        assert.same({2, 3}, ordo.searchsorted(ordo.tensor({3, 1, 2}), ordo.tensor({2, 2.5}),
                                              {sorter = ordo.tensor({2, 3, 1}, "int64")}):totable())
        H.raises(function() return ordo.searchsorted(seq, ordo.zeros(4)) end, "searchsorted", "leading dims")
        H.raises(function() return ordo.searchsorted(seq, ordo.zeros(5, 4)) end, "searchsorted", "leading dims")
        H.raises(function() return ordo.searchsorted(seq, 3) end, "searchsorted", "must be a tensor")
        H.raises(function() return ordo.searchsorted(b, b, {side = "up"}) end, "searchsorted", "side")
        H.raises(function() return ordo.searchsorted(b, b, {side = "left", right = true}) end, "searchsorted",
                 "disagree")
        H.raises(function() return ordo.searchsorted(b, b, {sorter = b}) end, "searchsorted", "sorter")
        H.raises(function() return ordo.searchsorted(b, b, {sorter = ordo.tensor({1, 2}, "int64")}) end,
                 "searchsorted", "sorter of shape 2")
        H.raises(function() return ordo.searchsorted(b, b, {out_int32 = 1}) end, "searchsorted", "out_int32")
        -- a sorter index out of range is named as searchsorted's when the gather runs (it said gather alone)
        local bad = ordo.searchsorted(ordo.tensor({3, 1, 2}), ordo.tensor({2}), {sorter = ordo.tensor({4, 3, 1}, "int64")})
        H.raises(function() return bad:totable() end, "searchsorted (sorter): gather: index 4 out of range")
    end)

    it("sum, mean and prod take Torch's dtype third (it was ignored); max, amax... refuse a third argument", function()
        local i = ordo.tensor({{1, 2}, {3, 4}}, "int32")
        assert.equals("int32", i:sum(1, false, "int32"):dtype())
        assert.same({4, 6}, i:sum(1, false, "int32"):totable())
        assert.equals("float64", i:sum(nil, false, "float64"):dtype())
        assert.equals(10, ordo.sum(i, nil, nil, {dtype = "float32"}):item())
        assert.same({{1.5}, {3.5}}, i:mean(2, true, "float64"):totable())
        assert.equals("float64", i:mean(2, true, "float64"):dtype())
        assert.equals(24, i:prod(nil, nil, "float32"):item())
        assert.equals(44, ordo.tensor({200, 100}, "uint8"):sum(nil, nil, "uint8"):item()) -- wraps in uint8, as Torch's
        assert.equals("int64", i:sum(1):dtype()) -- as before without one
        H.raises(function() return i:mean(1, false, "int64") end, "mean", "float32 or float64")
        H.raises(function() return i:sum(1, false, "int9") end, "sum", "unknown dtype")
        for _, name in ipairs({"max", "min", "argmax", "argmin", "amax", "amin", "logsumexp", "all", "any", "median"}) do
            H.raises(function() return i[name](i:float(), 1, false, "float64") end, name, "third argument")
        end
        local g = ordo.tensor({1, 2}, "float64"):requires_grad()
        g:sum(nil, nil, "float32"):backward()
        assert.same({1, 1}, g.grad:totable())
    end)

    -- ops made of scatter / index_add: an index out of range, found when
    -- the kernel runs, fails the result naming the op the user called
    it("index_put_, index_fill, index_copy: a bad index named after the op called, not the scatter inside", function()
        local i3 = ordo.tensor({3}, "int64")
        local cases = {
            {"index_put_: scatter: index 3 out of range", function() return ordo.zeros({2, 2}):index_put_({i3}, 1) end},
            {"index_put: scatter: index 3 out of range", function() return ordo.zeros({2, 2}):index_put({i3}, 1) end},
            {"index_put: scatter_add: index 3 out of range",
             function() return ordo.zeros({2, 2}):index_put({i3}, 1, true) end},
            {"index_fill: index_add: index 3 out of range for dim 1", function() return ordo.zeros({2, 2}):index_fill(1, i3, 1) end},
            {"index_fill_: index_add: index 3 out of range for dim 2 of size 2",
             function() return ordo.zeros({2, 2}):index_fill_(2, i3, 1) end},
            {"index_copy: scatter: index 3 out of range",
             function() return ordo.zeros({2, 2}):index_copy(1, i3, ordo.ones({1, 2})) end},
            {"index_copy_: scatter: index 3 out of range for dim 2",
             function() return ordo.zeros({2, 2}):index_copy_(2, i3, ordo.ones({2, 1})) end},
        }
        for _, c in ipairs(cases) do
            H.raises(function() return c[2]():totable() end, c[1])
            pcall(ordo.engine.wait_for_all)
        end
        -- t[index] = x goes through index_put_ and is named so at the read too
        local t = ordo.zeros({2, 2})
        t[i3] = 1
        H.raises(function() return t:totable() end, "t[index] = x: scatter: index 3 out of range")
        pcall(ordo.engine.wait_for_all)
        -- the in-range ones still right
        assert.same({{0, 7}, {0, 7}}, ordo.zeros({2, 2}):index_fill(2, ordo.tensor({2}, "int64"), 7):totable())
        assert.same({{0, 0}, {5, 5}}, ordo.zeros({2, 2}):index_copy(1, ordo.tensor({2}, "int64"), ordo.full({1, 2}, 5)):totable())
    end)

    -- with several indices the scatter sees only the linear place: each
    -- index is checked against its own dim (else {1}, {5} of a 2x3 tensor
    -- wrote element (2, 2) without a word)
    it("index_put_ refuses float values for an integer tensor, a 0-dim tensor and an expanded view in its own name", function()
        local i = ordo.tensor({1, 2, 3}, "int32")
        local idx = ordo.tensor({1}, "int64")
        -- (2.5 was truncated to 2 silently, where scatter, which writes it, refuses)
        H.raises(function() return i:index_put_({idx}, ordo.tensor({2.5})) end, "index_put_", "values are float32",
                 "int32")
        H.raises(function() return i:index_put({idx}, ordo.tensor({2.5}), true) end, "index_put", "float32")
        assert.same({1, 2, 3}, i:totable())
        i:index_put_({idx}, ordo.tensor({7}, "int64")) -- integers of another dtype are cast
        assert.same({7, 2, 3}, i:totable())
        i[idx] = ordo.tensor({4.5}) -- t[index] = x casts, as copy_ and Torch's setitem
        assert.same({4, 2, 3}, i:totable())
        H.raises(function() return ordo.tensor(1):index_put_({idx}, 2) end, "index_put_", "0-dim")
        local e = ordo.zeros({1, 3}):expand(3, 3)
        H.raises(function() return e:index_put_({idx}, 2) end, "index_put_: cannot write into an expanded view")
        assert.same({{0, 0, 0}, {0, 0, 0}, {0, 0, 0}}, e:totable())
    end)

    it("index_put_ with several indices refuses one out of its own dim's range", function()
        local t = ordo.zeros({2, 3})
        t:index_put_({ordo.tensor({1}, "int64"), ordo.tensor({5}, "int64")}, 1)
        H.raises(function() return t:totable() end, "index_put_ (index 2): check_range: value 5 at element 1",
                 "outside [1, 3]")
        pcall(ordo.engine.wait_for_all)
        local u = ordo.zeros({2, 3})
        H.raises(function()
            return u:index_put({ordo.tensor({3, 1}, "int64"), ordo.tensor({1, 1}, "int64")}, 1, true):totable()
        end, "index_put (index 1): check_range: value 3 at element 1", "outside [1, 2]")
        pcall(ordo.engine.wait_for_all)
        -- in range: as before
        local v = ordo.zeros({2, 3}):index_put_({ordo.tensor({2, 1}, "int64"), ordo.tensor({3, 2}, "int64")},
                                               ordo.tensor({5, 6}))
        assert.same({{0, 6, 0}, {0, 0, 5}}, v:totable())
        local w = ordo.zeros({2, 3, 2}):index_put({ordo.tensor({2}, "int64"), ordo.tensor({3}, "int64")}, 4)
        assert.same({{{0, 0}, {0, 0}, {0, 0}}, {{0, 0}, {0, 0}, {4, 4}}}, w:totable())
    end)

    it("repeat_interleave: a failure of an op it is made of (out of memory) is named after it", function()
        H.raises(function() return ordo.tensor({{1}}):repeat_interleave(2 ^ 40) end,
                 "repeat_interleave: clone: out of memory")
        H.raises(function() return ordo.tensor({{1, 2}}):repeat_interleave(2 ^ 40, 2) end, "repeat_interleave: ",
                 "out of memory")
        H.raises(function() return ordo.tensor({1, 2}):repeat_interleave({2 ^ 40, 1}) end, "repeat_interleave: ",
                 "out of memory")
        H.raises(function() return ordo.tensor({{1, 2, 3, 4}}):repeat_interleave(2 ^ 62) end,
                 "repeat_interleave: expand: ", "too many elements")
        -- its own errors once, with the caller's position
        local ok, err = pcall(function() return ordo.tensor({1, 2}):repeat_interleave({-1, 1}) end)
        assert.is_false(ok)
        assert.matches("^.-tensor_derived_spec.lua:%d+: repeat_interleave: repeats must be >= 0$", err)
        assert.same({1, 1, 2, 2}, ordo.tensor({1, 2}):repeat_interleave(2):totable())
    end)

    it("diag, diag_embed, tile and nanmean name themselves when an op they are made of refuses", function()
        H.raises(function() return ordo.randn({3}):diag(2 ^ 40) end, "diag: zeros: ", "too large")
        H.raises(function() return ordo.randn({3}):diag_embed(2 ^ 40) end, "diag_embed: zeros: ", "too large")
        H.raises(function() return ordo.randn({2, 3}):tile(2 ^ 40) end, "tile: ", "out of memory")
        H.raises(function() return ordo.randn({3}):nanmean("x") end, 'nanmean: dim must be an integer, got "x"')
        -- their own errors named once, at the caller's line
        local ok, err = pcall(function() return ordo.randn({2, 3}):tile(-1) end)
        assert.is_false(ok)
        assert.matches("^.-tensor_derived_spec.lua:%d+: tile: count 1 must be an integer >= 0, got %-1$", err)
        assert.same({{0, 1, 0}, {0, 0, 2}, {0, 0, 0}}, ordo.tensor({1, 2}):diag(1):totable())
        assert.same({4, 3}, ordo.randn({2, 3}):tile(2, 1):shape())
    end)

    it("kron, cdist, outer, randperm, linspace and t[index] name themselves when an op inside fails", function()
        H.raises(function() return ordo.kron(ordo.ones({2 ^ 20}), ordo.ones({2 ^ 20})) end, "kron: mul: out of memory")
        H.raises(function() return ordo.cdist(ordo.ones({2 ^ 20, 2}), ordo.ones({2 ^ 20, 2})) end,
                 "cdist: ", "out of memory")
        H.raises(function()
            return ordo.cdist(ordo.ones({2 ^ 20, 2}), ordo.ones({2 ^ 20, 2}), {compute_mode = "donot_use_mm_for_euclid_dist"})
        end, "cdist: sub: out of memory")
        H.raises(function() return ordo.ones({2 ^ 25}):outer(ordo.ones({2 ^ 25})) end, "outer: mul: out of memory")
        H.raises(function() return ordo.randperm(2 ^ 50) end, "randperm: rand: out of memory")
        H.raises(function() return ordo.linspace(0, 1, 2 ^ 50) end, "linspace: arange: out of memory")
        H.raises(function() return ordo.logspace(0, 1, 2 ^ 50) end, "logspace: ", "out of memory")
        -- t[index]'s bad index, found when the index_select runs
        local x = ordo.randn({3, 4})
        H.raises(function() return x[ordo.tensor({9}, "int64")]:totable() end,
                 "t[index]: index_select: index 9 out of range for dim 1 of size 3")
        pcall(ordo.engine.wait_for_all)
        -- results as before
        assert.same({{3, 4}, {6, 8}}, ordo.tensor({1, 2}):outer(ordo.tensor({3, 4})):totable())
        assert.same({0, 0.5, 1}, ordo.linspace(0, 1, 3):totable())
        assert.same({1, 2, 3}, ordo.randperm(3):sort():totable())
        assert.same({3, 4}, ordo.kron(ordo.ones({1, 2}), ordo.ones({3, 2})):shape())
    end)

    it("other names and in-place forms name themselves: arctan2, moveaxis, fmod_, remainder_, lerp_, nan_to_num_, " ..
       "requires_grad_", function()
        local x = ordo.randn({2, 3})
        H.raises(function() return x:arctan2("x") end, "arctan2: expected a tensor or a number, got string")
        H.raises(function() return x:moveaxis("x") end, "moveaxis: expected dims")
        H.raises(function() return x:clone():fmod_("x") end, "fmod_: the divisor must be a tensor or a number")
        H.raises(function() return x:clone():remainder_("x") end, "remainder_: the divisor must be")
        H.raises(function() return x:clone():lerp_("x", 0.5) end, "lerp_: the end must be a tensor or a number")
        H.raises(function() return x:clone():nan_to_num_("x") end, "nan_to_num_: nan must be a number")
        H.raises(function() return x:clone():requires_grad_("x") end, "requires_grad_: expected a boolean")
        H.raises(function() return ordo.tensor({1}, "int64"):requires_grad_() end, "requires_grad_: only float tensors")
        H.raises(function() return x:clone():requires_grad("x") end, "requires_grad: expected a boolean")
        -- as before otherwise
        assert.same({3, 2}, x:moveaxis(1, 2):shape())
        assert.same({2, 3}, x:arctan2(x):shape())
        assert.is_false(x:clone():requires_grad_():requires_grad_(false):needs_grad())
        local y = ordo.tensor({5, 7})
        assert.same({1, 1}, y:fmod_(2):totable())
    end)

    it("unique refuses a flag that is not a boolean (return_inverse = 2 was taken as true)", function()
        local x = ordo.tensor({3, 1, 3})
        H.raises(function() return x:unique({return_inverse = 2}) end, "unique: return_inverse must be true or false, got 2")
        H.raises(function() return x:unique({return_counts = "yes"}) end, "unique: return_counts must be true or false")
        H.raises(function() return x:unique({sorted = 1}) end, "unique: sorted must be true or false")
        local v, inv = x:unique({return_inverse = true})
        assert.same({1, 3}, v:totable())
        assert.same({2, 1, 2}, inv:totable())
        assert.same({1, 3}, x:unique({return_inverse = false, sorted = true}):totable())
    end)

    it("Torch's small names: is_floating_point, is_signed, tolist, ndimension, nbytes, itemsize, positive", function()
        local f, d, i, u = ordo.randn(2, 3), ordo.zeros({2}, "float64"), ordo.tensor({1, -2}, "int64"),
            ordo.tensor({1, 2}, "uint8")
        assert.is_true(f:is_floating_point())
        assert.is_true(d:is_floating_point())
        assert.is_false(i:is_floating_point())
        assert.is_false(u:is_floating_point())
        assert.is_true(ordo.is_floating_point(f))
        assert.is_true(i:is_signed())
        assert.is_false(u:is_signed())
        assert.same({{1, 2}, {3, 4}}, ordo.tensor({{1, 2}, {3, 4}}):tolist())
        assert.equals(5, ordo.tensor(5):tolist())
        assert.equals(2, f:ndimension())
        assert.equals(0, ordo.tensor(1):ndimension())
        assert.equals(24, f:nbytes())
        assert.equals(16, d:nbytes())
        assert.equals(8, d:itemsize())
        assert.equals(1, u:itemsize())
        assert.equals(i, i:positive())
        H.raises(function() u:positive() end, "positive", "uint8")
        local b = ordo.tensor({0, -2, 0.5, 0 / 0, -0.0}):bool()
        assert.equals("uint8", b:dtype())
        assert.same({0, 1, 1, 1, 0}, b:totable())
        assert.same({0, 1}, ordo.tensor({0, 7}, "int64"):bool():totable())
        H.raises(function() return ordo.tolist(5) end, "tolist", "number")
        H.raises(function() return ordo.is_floating_point({}) end, "is_floating_point", "table")
    end)

    it("NumPy's and Torch's other names of the elementwise ops, with gradients; errors name the name called", function()
        local x = ordo.tensor({0.25, -0.5, 0.75}, "float64")
        local y = ordo.tensor({0.5, 0.5, -2}, "float64")
        local pairs_ = {absolute = "abs", negative = "neg", arcsin = "asin", arccos = "acos", arctan = "atan",
                        arcsinh = "asinh", arctanh = "atanh", sgn = "sign", fix = "trunc"}
        for alias, op in pairs(pairs_) do
            assert.same(x[op](x):totable(), x[alias](x):totable(), alias)
            local c = x:clone()
            assert.equals(c, c[alias .. "_"](c), alias .. "_")
            assert.same(x[op](x):totable(), c:totable(), alias .. "_")
            assert.same(x[op](x):totable(), ordo[alias](x):totable(), "ordo." .. alias)
        end
        assert.same(ordo.tensor({2}, "float64"):acosh():totable(), ordo.tensor({2}, "float64"):arccosh():totable())
        assert.same(x:atan2(y):totable(), x:arctan2(y):totable())
        for alias, op in pairs({subtract = "sub", multiply = "mul", divide = "div", true_divide = "div", greater = "gt",
                                greater_equal = "ge", less = "lt", less_equal = "le", not_equal = "ne"}) do
            assert.same(x[op](x, y):totable(), x[alias](x, y):totable(), alias)
        end
        assert.same({0.25 - 2 * 0.5, -0.5 - 2 * 0.5, 0.75 + 2 * 2}, x:subtract(y, 2):totable()) -- alpha passes through
        local c = x:clone()
        c:multiply_(y)
        assert.same(x:mul(y):totable(), c:totable())
        -- gradients through the alias
        local w = ordo.tensor({0.3, -0.2}, {dtype = "float64", requires_grad = true})
        w:arcsin():sum():backward()
        close({1 / math.sqrt(1 - 0.09), 1 / math.sqrt(1 - 0.04)}, w.grad:totable(), 1e-12)
        H.raises(function() x:subtract("a") end, "subtract", "string")
        H.raises(function() ordo.tensor({1}, "int32"):arcsin_() end, "arcsin_", "int32")
        -- ordo.concat / ordo.concatenate: cat's other names
        assert.same({1, 1, 0}, ordo.concat({ordo.ones(2), ordo.zeros(1)}, 1):totable())
        assert.same({1, 1, 0}, ordo.concatenate({ordo.ones(2), ordo.zeros(1)}):totable())
        -- an alias's errors name it, not the op behind it
        H.raises(function() ordo.concat({ordo.ones(2, 2), ordo.ones(3, 3)}, 1) end, "concat: shapes 2x2 and 3x3")
        H.raises(function() ordo.concatenate("a") end, "concatenate: expected a non-empty list")
        H.raises(function() x:ndim(1) end, "ndim: takes no arguments")
        H.raises(function() x:nelement(1) end, "nelement: takes no arguments")
        assert.equals(1, x:ndim())
        assert.equals(3, x:nelement())
    end)

    it("new_zeros(2, 3): sizes as arguments; unflatten; take_along_dim; fill_diagonal_", function()
        local a = ordo.arange(6, {dtype = "float64"}):view(2, 3)
        assert.same({2, 3}, a:new_zeros(2, 3):shape())
        assert.equals("float64", a:new_ones(4):dtype())
        assert.equals("int32", a:new_empty(2, {dtype = "int32"}):dtype())
        assert.same({{7, 7}}, a:new_full({1, 2}, 7):totable())
        assert.is_true(a:new_zeros(2, 2, {requires_grad = true}):needs_grad())
        H.raises(function() a:new_zeros(2, {}, 3) end, "new_zeros", "options last")
        -- unflatten
        assert.same({{0, 1, 2}, {3, 4, 5}}, a:flatten():unflatten(1, {2, 3}):totable())
        assert.same({2, 3}, a:flatten():unflatten(1, {-1, 3}):shape())
        assert.same({2, 1, 3}, a:unflatten(-1, {1, 3}):shape())
        H.raises(function() a:unflatten(2, {2, 2}) end, "unflatten", "sizes {2, 2} (4 elements) do not fit dim 2 of size 3")
        H.raises(function() a:unflatten(2, {-1, 2}) end, "unflatten", "cannot fill dim 2 of size 3")
        H.raises(function() a:unflatten(2, {1.5, 2}) end, "unflatten", "integers")
        H.raises(function() a:unflatten(3, {3}) end, "unflatten", "out of range")
        -- take_along_dim: with argmax's keepdim indices, broadcast, or flattened
        assert.same({{2}, {5}}, a:take_along_dim(a:argmax(2, true), 2):totable())
        assert.same({{0, 2}, {3, 5}}, a:take_along_dim(ordo.tensor({{1, 3}}, "int64"), 2):totable())
        assert.same({5, 0}, a:take_along_dim(ordo.tensor({6, 1}, "int64")):totable())
        H.raises(function() a:take_along_dim(ordo.tensor({1}, "int64"), 2) end, "take_along_dim", "as many dims")
        H.raises(function() a:take_along_dim(ordo.tensor({{1}, {1}, {1}}, "int64"), 2) end, "take_along_dim",
                 "do not broadcast")
        H.raises(function() a:take_along_dim(ordo.tensor({{4}, {1}}, "int64"), 2):totable() end, "take_along_dim",
                 "out of range")
        local w = ordo.tensor({{1, 2}, {3, 4}}, {dtype = "float64", requires_grad = true})
        w:take_along_dim(ordo.tensor({{2}, {1}}, "int64"), 2):sum():backward()
        assert.same({{0, 1}, {1, 0}}, w.grad:totable())
        -- fill_diagonal_
        local m = ordo.zeros(3, 4)
        assert.equals(m, m:fill_diagonal_(2))
        assert.same({{2, 0, 0, 0}, {0, 2, 0, 0}, {0, 0, 2, 0}}, m:totable())
        assert.same({{1, 0}, {0, 1}, {0, 0}, {0, 0}, {0, 0}}, ordo.zeros(5, 2):fill_diagonal_(1):totable())
        assert.same({{1, 0}, {0, 1}, {0, 0}, {1, 0}, {0, 1}}, ordo.zeros(5, 2):fill_diagonal_(1, true):totable())
        local c = ordo.zeros(2, 2, 2):fill_diagonal_(1)
        assert.same({{{1, 0}, {0, 0}}, {{0, 0}, {0, 1}}}, c:totable())
        local t = ordo.zeros(3, 3):t() -- a non-contiguous view
        t:fill_diagonal_(4)
        assert.same({{4, 0, 0}, {0, 4, 0}, {0, 0, 4}}, t:totable())
        H.raises(function() ordo.zeros(3):fill_diagonal_(1) end, "fill_diagonal_", "at least 2 dims")
        H.raises(function() ordo.zeros(2, 2, 3):fill_diagonal_(1) end, "fill_diagonal_", "same size")
        H.raises(function() ordo.zeros(2, 2):fill_diagonal_("x") end, "fill_diagonal_", "number")
        local leaf = ordo.zeros(2, 2):requires_grad()
        H.raises(function() leaf:fill_diagonal_(1) end, "fill_diagonal_", "requires a gradient")
        H.raises(function() leaf:tril_() end, "tril_", "requires a gradient", "out-of-place tril")
    end)

    it("hstack, vstack, atleast_1d, atleast_2d (Torch's), with gradients", function()
        assert.same({1, 1, 0, 0, 0}, ordo.hstack({ordo.ones(2), ordo.zeros(3)}):totable())
        assert.same({{1, 0, 0}, {1, 0, 0}}, ordo.hstack({ordo.ones(2, 1), ordo.zeros(2, 2)}):totable())
        assert.same({{1, 1, 1}, {0, 0, 0}, {0, 0, 0}}, ordo.vstack({ordo.ones(3), ordo.zeros(2, 3)}):totable())
        assert.same({{1}, {2}}, ordo.vstack({ordo.tensor(1), ordo.tensor(2)}):totable())
        assert.same({1}, ordo.atleast_1d(ordo.tensor(3)):shape())
        assert.same({1, 1}, ordo.atleast_2d(ordo.tensor(3)):shape())
        assert.same({1, 4}, ordo.atleast_2d(ordo.ones(4)):shape())
        local m = ordo.ones(2, 2)
        assert.equals(m, ordo.atleast_2d(m))
        local l = ordo.atleast_1d({ordo.tensor(1), m})
        assert.same({1}, l[1]:shape())
        assert.equals(m, l[2])
        local w = ordo.tensor({1, 2}, {dtype = "float64", requires_grad = true})
        ordo.vstack({w, w * 2}):sum():backward()
        assert.same({3, 3}, w.grad:totable())
        H.raises(function() ordo.vstack({ordo.ones(3), ordo.zeros(2)}) end, "vstack", "differ in dim 2")
        H.raises(function() ordo.hstack({}) end, "hstack", "non-empty list")
        H.raises(function() ordo.hstack({ordo.ones(2), 3}) end, "hstack", "element 2", "number")
        H.raises(function() ordo.atleast_2d(5) end, "atleast_2d", "number")
    end)

    it("exponential_, log_normal_, cauchy_, geometric_, random_: Torch's distributions, in place", function()
        ordo.manual_seed(11)
        local n = 100000
        local e = ordo.empty(n, "float64")
        assert.equals(e, e:exponential_(2))
        close(0.5, e:mean():item(), 0.01)
        assert.is_true(e:min():item() >= 0)
        close(math.log(2) / 2, e:median():item(), 0.01) -- the median of Exp(2)
        local l = ordo.empty(n, "float64"):log_normal_(0, 0.5)
        close(1, l:median():item(), 0.02)
        close(math.exp(0.125), l:mean():item(), 0.02)
        assert.is_true(ordo.empty(1000):log_normal_():min():item() > 0) -- Torch's defaults mean 1, std 2
        local c = ordo.empty(n, "float64"):cauchy_(3, 2)
        close(3, c:median():item(), 0.05)
        close(5, c:quantile(0.75):item(), 0.05) -- median + sigma
        local g = ordo.empty(n, "int64"):geometric_(0.25)
        assert.equals("int64", g:dtype())
        close(4, g:double():mean():item(), 0.05) -- 1 / p
        assert.equals(1, g:min():item())
        close(0.25, g:eq(1):double():mean():item(), 0.01)
        assert.same({1, 1, 1}, ordo.empty(3):geometric_(1):totable())
        local r = ordo.empty(n, "int32"):random_(3, 7)
        assert.same({3, 4, 5, 6}, r:unique():totable())
        local f = ordo.empty(1000):random_(10)
        assert.same({0, 9}, {f:min():item(), f:max():item()})
        assert.equals(0, (f - f:floor()):abs():sum():item())
        H.raises(function() ordo.empty(3):random_() end, "random_", "to")
        H.raises(function() ordo.empty(3):random_(5, 2) end, "random_", "low < high")
        H.raises(function() ordo.empty(3, "uint8"):random_(0, 300) end, "random_", "uint8")
        H.raises(function() ordo.empty(3, "int32"):exponential_() end, "exponential_", "int32")
        H.raises(function() ordo.empty(3):exponential_(-1) end, "exponential_", "lambd", "> 0")
        H.raises(function() ordo.empty(3):cauchy_(0, 0) end, "cauchy_", "sigma")
        H.raises(function() ordo.empty(3):log_normal_(0 / 0) end, "log_normal_", "mean")
        H.raises(function() ordo.empty(3):geometric_(0) end, "geometric_", "(0, 1]")
        H.raises(function() ordo.empty(3):geometric_(1.5) end, "geometric_", "(0, 1]")
        -- a tensor that requires a gradient: refused under the op's own name (uniform_ or copy_ named
        -- themselves), the generator untouched; under no_grad it is filled
        local w = ordo.ones(4):requires_grad()
        local state = ordo.get_rng_state():totable()
        for name, arg in pairs({exponential_ = 1, log_normal_ = 0, cauchy_ = 0, geometric_ = 0.5, random_ = 5}) do
            H.raises(function() w[name](w, arg) end, name, "requires a gradient", "ordo.no_grad")
        end
        assert.same(state, ordo.get_rng_state():totable())
        assert.same({1, 1, 1, 1}, w:totable())
        ordo.no_grad(function() w:exponential_() end)
        assert.is_false(w:eq(1):all())
    end)

    it("ordo.normal (numbers with a shape, or tensors), ordo.randint_like, t:sinc()", function()
        ordo.manual_seed(5)
        local a = ordo.normal(2, 3, {100000}, "float64")
        assert.equals("float64", a:dtype())
        close(2, a:mean():item(), 0.02)
        close(3, a:std():item(), 0.01)
        assert.same({2, 5}, ordo.normal(0, 1, {2, 5}):shape())
        local m = ordo.tensor({0, 10, 100})
        local b = ordo.normal(m, 0.001):totable()
        for i, v in ipairs({0, 10, 100}) do assert.is_true(math.abs(b[i] - v) < 0.01, tostring(b[i])) end
        assert.same({0, 0}, ordo.normal(0, ordo.tensor({0, 0})):totable())
        local c = ordo.normal(m:view(3, 1), ordo.tensor({1, 2}, "float64"))
        assert.same({3, 2}, c:shape())
        assert.equals("float64", c:dtype())
        H.raises(function() ordo.normal(0, -1, {2}) end, "normal", "std >= 0")
        H.raises(function() ordo.normal(0, 1) end, "normal", "need a shape")
        H.raises(function() ordo.normal(m, ordo.tensor({-1, 1, 1})) end, "normal", "std must be >= 0")
        H.raises(function() ordo.normal(m, 1, {3}) end, "normal", "no shape")
        H.raises(function() ordo.normal("0", 1, {3}) end, "normal", "mean", "string")
        H.raises(function() ordo.normal(0, 1, {3}, "int32") end, "normal", "int32")
        -- randint_like: t's shape, dtype and device
        local r = ordo.randint_like(ordo.zeros(200, 3), 5)
        assert.same({200, 3}, r:shape())
        assert.equals("float32", r:dtype())
        assert.same({0, 1, 2, 3, 4}, r:unique():totable())
        local ri = ordo.randint_like(ordo.zeros({300}, "int32"), 2, 4)
        assert.equals("int32", ri:dtype())
        assert.same({2, 3}, ri:unique():totable())
        assert.equals("int64", ordo.randint_like(ordo.zeros(2), 10, "int64"):dtype())
        H.raises(function() ordo.randint_like({2}, 3) end, "randint_like", "expected a tensor")
        H.raises(function() ordo.randint_like(ordo.zeros(2), 3, 1) end, "randint_like", "low < high")
        -- sinc
        local sv = ordo.tensor({0, 0.5, -1.5, 2.25}, "float64"):sinc():totable()
        local function sinc(v) return v == 0 and 1 or math.sin(math.pi * v) / (math.pi * v) end
        close({1, sinc(0.5), sinc(-1.5), sinc(2.25)}, sv, 1e-12)
        assert.equals("float32", ordo.tensor({0, 1}, "int32"):sinc():dtype())
        local x = ordo.tensor({0, 0.3}, {dtype = "float64", requires_grad = true})
        x:sinc():sum():backward()
        local g = x.grad:totable()
        assert.equals(0, g[1]) -- (no NaN at 0: Torch's 0)
        local px = math.pi * 0.3
        close((px * math.cos(px) - math.sin(px)) / (math.pi * 0.09), g[2], 1e-10)
    end)

    it("apply_ and map_: Lua functions elementwise, in place (Torch's); bad results change nothing", function()
        local t = ordo.tensor({{1, 2}, {3, 4}})
        assert.equals(t, t:apply_(function(x) return x * 10 end))
        assert.same({{10, 20}, {30, 40}}, t:totable())
        t:map_(ordo.tensor({1, 2}), function(x, y) return x + y end) -- broadcast
        assert.same({{11, 22}, {31, 42}}, t:totable())
        t:apply_(function(x) if x > 30 then return 0 end end) -- nil keeps the element
        assert.same({{11, 22}, {0, 0}}, t:totable())
        assert.same({1, 0}, ordo.tensor({0, 5}):apply_(function(x) return x == 0 end):totable())
        assert.equals(4, ordo.tensor(3):apply_(function(x) return x + 1 end):item())
        local v = ordo.zeros(3, 3):t():narrow(1, 2, 2) -- a non-contiguous view: its base changes
        v:apply_(function() return 1 end)
        assert.same({{1, 1, 1}, {1, 1, 1}}, v:totable())
        H.raises(function() t:apply_(function() return "a" end) end, "apply_", "returned string for element 1")
        H.raises(function() t:apply_(5) end, "apply_", "expected a function")
        local u = ordo.tensor({1, 2}, "uint8")
        H.raises(function() u:apply_(function() return 300 end) end, "apply_", "300", "uint8")
        assert.same({1, 2}, u:totable())
        H.raises(function() t:map_(ordo.ones(3), function(x) return x end) end, "map_", "does not broadcast")
        H.raises(function() t:map_(3, function(x) return x end) end, "map_", "tensor", "number")
        local big = ordo.tensor({9007199254740993LL}, "int64")
        H.raises(function() big:apply_(function(x) return x end) end, "apply_", "2^53")
        assert.is_true(big:eq(ordo.tensor({9007199254740993LL}, "int64")):all()) -- unchanged
        local w = ordo.ones(2):requires_grad()
        H.raises(function() w:apply_(function(x) return x end) end, "apply_", "requires a gradient")
    end)

    it("is_cuda, is_same_size, is_nonzero, storage_offset, float_power", function()
        local a = ordo.arange(6):view(2, 3)
        assert.is_false(a:is_cuda())
        assert.is_true(a:is_same_size(ordo.zeros(2, 3, {dtype = "int32"})))
        assert.is_false(a:is_same_size(ordo.zeros(3, 2)))
        H.raises(function() a:is_same_size({2, 3}) end, "is_same_size", "table")
        assert.is_true(ordo.tensor({2}):is_nonzero())
        assert.is_false(ordo.tensor(0):is_nonzero())
        H.raises(function() a:is_nonzero() end, "is_nonzero", "6 elements")
        assert.equals(0, a:storage_offset())
        assert.equals(4, a:select(1, 2):narrow(1, 2, 2):storage_offset())
        local p = ordo.tensor({2, 3}, "int32"):float_power(2)
        assert.equals("float64", p:dtype())
        assert.same({4, 9}, p:totable())
        assert.same({8, 3}, ordo.tensor({2, 3}):float_power(ordo.tensor({3, 1}, "int64")):totable())
    end)

    it("fmax / fmin skip NaN; isposinf, isneginf, signbit (-0.0 too), exp2; tril_ / triu_ in place", function()
        local nan, inf = 0 / 0, math.huge
        local a = ordo.tensor({1, nan, 3, nan, -inf}, "float64")
        local b = ordo.tensor({2, 5, nan, nan, 1}, "float64")
        local mx, mn = a:fmax(b):totable(), a:fmin(b):totable()
        assert.same({2, 5, 3}, {mx[1], mx[2], mx[3]})
        assert.is_true(mx[4] ~= mx[4])
        assert.equals(1, mx[5])
        assert.same({1, 5, 3}, {mn[1], mn[2], mn[3]})
        assert.is_true(mn[4] ~= mn[4])
        assert.equals(-inf, mn[5])
        assert.same({2, 2, 3, 2, 2}, a:fmax(2):totable())
        assert.same({1, 2}, ordo.tensor({1, 4}, "int32"):fmin(ordo.tensor({3, 2}, "int32")):totable())
        assert.equals("int32", ordo.tensor({1, 4}, "int32"):fmin(ordo.tensor({3, 2}, "int32")):dtype())
        local s = ordo.tensor({inf, -inf, nan, 0, -0.0, -2, 2})
        assert.same({1, 0, 0, 0, 0, 0, 0}, s:isposinf():totable())
        assert.same({0, 1, 0, 0, 0, 0, 0}, s:isneginf():totable())
        assert.same({0, 1, 0, 0, 1, 1, 0}, s:signbit():totable())
        assert.same({0, 0}, ordo.tensor({5, 7}, "int32"):isposinf():totable())
        assert.same({1, 0}, ordo.tensor({-5, 7}, "int32"):signbit():totable())
        assert.same({0, 0}, ordo.tensor({5, 7}, "uint8"):signbit():totable())
        assert.same({0.5, 1, 8}, ordo.tensor({-1, 0, 3}):exp2():totable())
        assert.equals("float32", ordo.tensor({3}, "int64"):exp2():dtype())
        local m = ordo.ones(3, 3)
        assert.equals(m, m:tril_())
        assert.same({{1, 0, 0}, {1, 1, 0}, {1, 1, 1}}, m:totable())
        local u = ordo.ones(2, 3)
        u:triu_(1)
        assert.same({{0, 1, 1}, {0, 0, 1}}, u:totable())
        H.raises(function() ordo.ones(3):tril_() end, "tril_")
    end)
end)

describe("cov and corrcoef, against plain Lua", function()
    local rows = {{0, 1, 2, -1}, {2, 1, 0.5, 3}, {1, 4, 2, 2}}
    -- numpy's / Torch's weighted covariance, in plain Lua
    local function ref_cov(fw, aw, corr)
        local n = #rows[1]
        local w, ws = {}, 0
        for i = 1, n do
            w[i] = (fw and fw[i] or 1) * (aw and aw[i] or 1)
            ws = ws + w[i]
        end
        local avg = {}
        for a = 1, #rows do
            local s = 0
            for i = 1, n do s = s + rows[a][i] * w[i] end
            avg[a] = s / ws
        end
        local nf
        if corr == 0 then nf = ws
        elseif not aw then nf = ws - corr
        else
            local s = 0
            for i = 1, n do s = s + w[i] * aw[i] end
            nf = ws - corr * s / ws
        end
        local c = {}
        for a = 1, #rows do
            c[a] = {}
            for b = 1, #rows do
                local s = 0
                for i = 1, n do s = s + (rows[a][i] - avg[a]) * (rows[b][i] - avg[b]) * w[i] end
                c[a][b] = s / nf
            end
        end
        return c
    end
    local fw, aw = {1, 2, 3, 1}, {0.5, 1, 2, 0.25}

    it("matches the reference with and without weights and corrections", function()
        local x = ordo.tensor(rows, "float64")
        close(ref_cov(nil, nil, 1), x:cov():totable(), 1e-12)
        close(ref_cov(nil, nil, 0), ordo.cov(x, {correction = 0}):totable(), 1e-12)
        close(ref_cov(nil, nil, 2), x:cov({correction = 2}):totable(), 1e-12)
        local f, a = ordo.tensor(fw, "int64"), ordo.tensor(aw, "float64")
        close(ref_cov(fw, nil, 1), x:cov({fweights = f}):totable(), 1e-12)
        close(ref_cov(nil, aw, 1), x:cov({aweights = a}):totable(), 1e-12)
        close(ref_cov(fw, aw, 1), x:cov({fweights = f, aweights = a}):totable(), 1e-12)
        close(ref_cov(fw, aw, 0), x:cov({fweights = f, aweights = a, correction = 0}):totable(), 1e-12)
        -- one variable: a 0-dim result; integer input: the default float dtype
        local v = ordo.tensor({1, 2, 4})
        assert.equals(0, v:cov():dim())
        close(7 / 3, v:cov():item())
        assert.equals("float32", ordo.tensor({1, 2, 4}, "int64"):cov():dtype())
        close(7 / 3, ordo.tensor({1, 2, 4}, "int64"):cov():item())
    end)

    it("corrcoef is cov over the standard deviations, in [-1, 1]", function()
        local x = ordo.tensor(rows, "float64")
        local c = ref_cov(nil, nil, 1)
        local r = ordo.corrcoef(x):totable()
        for a = 1, 3 do
            for b = 1, 3 do close(c[a][b] / math.sqrt(c[a][a] * c[b][b]), r[a][b], 1e-12) end
        end
        close(1, ordo.tensor({{1, 2, 3}, {2, 4, 6}}):corrcoef():totable()[1][2])
        close(-1, ordo.tensor({{1, 2, 3}, {6, 4, 2}}):corrcoef():totable()[1][2])
        assert.equals(1, ordo.tensor({3, 1, 2}):corrcoef():item())
    end)

    it("has gradients (input and aweights)", function()
        local x = ordo.tensor(rows, "float64"):requires_grad()
        local a = ordo.tensor(aw, "float64"):requires_grad()
        local f = ordo.tensor(fw, "int64")
        assert.is_true(ordo.autograd.gradcheck(function(v) return v:cov() end, {x}))
        assert.is_true(ordo.autograd.gradcheck(function(v) return v:corrcoef() end, {x}))
        assert.is_true(ordo.autograd.gradcheck(function(v, w) return v:cov({fweights = f, aweights = w}) end, {x, a}))
    end)

    it("refuses bad input naming it", function()
        local x = ordo.tensor(rows, "float64")
        H.raises(function() x:cov({correction = -1}) end, "cov: correction must be an integer >= 0")
        H.raises(function() x:cov({correction = 0.5}) end, "cov: correction must be an integer >= 0")
        H.raises(function() x:cov({fweights = ordo.tensor(aw)}) end, "cov: fweights must be an integer tensor")
        H.raises(function() x:cov({aweights = ordo.tensor(fw, "int64")}) end, "cov: aweights must be a float tensor")
        H.raises(function() x:cov({fweights = ordo.tensor({1, 2}, "int64")}) end,
                 "cov: fweights must have one weight per observation (4")
        H.raises(function() x:cov({aweights = ordo.ones(2, 2)}) end, "cov: aweights must have one dim or none")
        H.raises(function() x:cov({fweights = ordo.tensor({1, -1, 1, 1}, "int64")}) end,
                 "cov: fweights must not be negative")
        H.raises(function() x:cov({aweights = ordo.tensor({1, -1, 1, 1})}) end, "cov: aweights must not be negative")
        H.raises(function() x:cov({aweights = 3}) end, "cov: aweights must be a tensor")
        H.raises(function() x:cov({weights = 1}) end, "cov: unknown option 'weights'")
        H.raises(function() x:cov(1) end, "cov: options must be a table")
        H.raises(function() ordo.zeros(2, 2, 2):cov() end, "cov: expected a tensor of 2 dims or fewer, got 3")
        H.raises(function() ordo.zeros(2, 2, 2):corrcoef() end, "corrcoef: expected a tensor of 2 dims or fewer")
        H.raises(function() x:corrcoef({correction = 0}) end, "corrcoef: takes no arguments")
        H.raises(function() ordo.cov(5) end, "cov")
    end)
end)
