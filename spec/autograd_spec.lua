-- ordo.autograd: gradients of every differentiable op against central
-- differences (float64), and the rules of the tape (accumulation, freed
-- graphs, in-place guards, no_grad).
local ordo = require "ordo"
local ag = ordo.autograd
local H = require "support.helpers"

local D = {dtype = "float64"}

local function leaf(t) return t:requires_grad() end
local function randn(...) return leaf(ordo.randn({...}, D)) end
local function positive(...) return leaf(ordo.rand({...}, D):add(0.5)) end
-- values kept apart so that max/min/abs/relu/clamp are differentiable at them
local function spread(...)
    local shape = {...}
    local n = 1
    for _, s in ipairs(shape) do n = n * s end
    local vals = {}
    for i = 1, n do vals[i] = ((i * 7919) % n - n / 2 + 0.25) / n * 4 end
    return leaf(ordo.tensor(vals, D):reshape(shape))
end

local function check(fn, inputs, opts) assert.is_true(ag.gradcheck(fn, inputs, opts)) end

describe("autograd gradients match numerical differentiation (float64)", function()
    before_each(function() ordo.manual_seed(7) end)

    local a, b, p, m, bt
    before_each(function()
        a, b, p = randn(3, 4), randn(4), positive(3, 4)
        m, bt = randn(4, 5), randn(2, 3, 4)
    end)

    it("add, sub, mul with broadcasting and numbers on either side", function()
        check(function(x, y) return x + y end, {a, b})
        check(function(x, y) return x - y * 2 end, {a, b})
        check(function(x, y) return 3 - x * y end, {a, b})
        check(function(x, y) return x:add(y, 0.5) end, {a, b})
        check(function(x, y) return x:sub(y, 2) end, {a, b})
        check(function(x) return x * x end, {a})
    end)

    it("div and pow (tensor and number operands)", function()
        check(function(x, y) return x / (y:abs() + 1) end, {a, b})
        check(function(x) return 2 / x end, {p})
        check(function(x) return x:pow(2.5) end, {p})
        check(function(x, y) return x ^ y end, {p, b})
        check(function(y) return 2 ^ y end, {b})
    end)

    it("maximum, minimum, max/min over all and over a dim, clamp", function()
        local s = spread(3, 4)
        local r = ordo.randn({3, 4}, D)
        check(function(x) return x:maximum(r) end, {s})
        check(function(x) return x:minimum(r) end, {s})
        check(function(x) return x:max() end, {s})
        check(function(x) return (x:max(2)) end, {s})
        check(function(x) return (x:min(1, true)) end, {s})
        check(function(x) return x:clamp(-0.5, 0.5) end, {s})
        check(function(x) return x:clamp(nil, 0.3) end, {s})
    end)

    it("max(), min(), maximum and minimum where NaN makes the result NaN: the gradient as Torch's", function()
        for _, name in ipairs({"max", "min"}) do
            local x = ordo.tensor({1, 0 / 0, 3, 0 / 0}, D):requires_grad()
            x[name](x):backward()
            assert.same({0, 0.5, 0, 0.5}, x.grad:totable(), name) -- x == NaN matched nothing: 0 / 0, NaN everywhere
            local t = ordo.tensor({3, 1, 3}, D):requires_grad()
            t[name](t * (name == "max" and 1 or -1)):backward()
            assert.same(name == "max" and {0.5, 0, 0.5} or {-0.5, 0, -0.5}, t.grad:totable(), name .. " ties")
        end
        -- maximum / minimum: where a NaN makes the result NaN both sides get the gradient (the NaN side got none)
        for _, name in ipairs({"maximum", "minimum"}) do
            local a = ordo.tensor({1, 0 / 0, 3, 2, 0 / 0}, D):requires_grad()
            local b = ordo.tensor({2, 2, 2, 2, 0 / 0}, D):requires_grad()
            a[name](a, b):sum():backward()
            local mx = name == "maximum"
            assert.same(mx and {0, 1, 1, 0.5, 1} or {1, 1, 0, 0.5, 1}, a.grad:totable(), name)
            assert.same(mx and {1, 1, 0, 0.5, 1} or {0, 1, 1, 0.5, 1}, b.grad:totable(), name)
            local c = ordo.tensor({1, 0 / 0}, D):requires_grad()
            c[name](c, 2):sum():backward()
            assert.same(mx and {0, 1} or {1, 1}, c.grad:totable(), name .. " with a number")
        end
    end)

    it("clamp with tensor bounds: gradients to x and to the bounds, summed back under broadcasting", function()
        -- s's values are -1.92 + k/3; the bounds stay away from them, and the
        -- last row of hi (-0.7) crosses lo in columns 2 and 3, where the
        -- forward (as Torch's) gives hi and hi gets the gradient
        local s = spread(3, 4)
        local lo = leaf(ordo.tensor({-1.0, -0.4, 0.2, -3.0}, D))
        local hi = leaf(ordo.tensor({{0.5}, {1.2}, {-0.7}}, D))
        check(function(x, l, h) return x:clamp(l, h) end, {s, lo, hi})
        check(function(x, l) return x:clamp(l) end, {s, lo})
        check(function(x, h) return x:clamp(nil, h) end, {s, hi})
        check(function(x, h) return x:clamp(-0.5, h) end, {s, hi})
        check(function(x, l) return x:clamp(l, 0.6) end, {s, lo})
        local c = s:detach()
        check(function(l, h) return c:clamp(l, h) end, {lo, hi})
    end)

    it("clamp with tensor bounds: the gradient goes where each bound was selected", function()
        local x = leaf(ordo.tensor({-2, 0.5, 3}, D))
        local lo, hi = leaf(ordo.tensor({-1, -1, -1}, D)), leaf(ordo.tensor({1}, D))
        x:clamp(lo, hi):sum():backward()
        assert.same({0, 1, 0}, x.grad:totable())
        assert.same({1, 0, 0}, lo.grad:totable())
        assert.same({1}, hi.grad:totable()) -- broadcast over 3: summed back to shape 1
        -- crossed bounds: the output is hi everywhere, all the gradient goes to it
        local y = leaf(ordo.tensor({-2, 0.5, 3}, D))
        local l2, h2 = leaf(ordo.tensor({1, 1, 1}, D)), leaf(ordo.tensor({-1, -1, -1}, D))
        y:clamp(l2, h2):sum():backward()
        assert.same({0, 0, 0}, y.grad:totable())
        assert.same({0, 0, 0}, l2.grad:totable())
        assert.same({1, 1, 1}, h2.grad:totable())
    end)

    it("where: an inf or NaN gradient where the other side was chosen does not reach this side (Torch's)", function()
        local x = leaf(ordo.tensor({4, -1, 0}, D))
        ordo.where(x:gt(0), x, 0):sqrt():sum():backward() -- sqrt's gradient at 0 is inf
        assert.same({0.25, 0, 0}, x.grad:totable()) -- was NaN where 0 was chosen (inf * 0)
        local u, w = leaf(ordo.tensor({0, 4}, D)), leaf(ordo.tensor({{9, 0}, {1, 16}}, D))
        ordo.where(ordo.tensor({{0, 1}, {0, 0}}, "uint8"), u, w):sqrt():sum():backward()
        assert.same({0, 0.25}, u.grad:totable()) -- u broadcast over the rows
        assert.same({{1 / 6, 0}, {0.5, 0.125}}, w.grad:totable())
    end)

    it("clamp: an inf gradient where x was clamped does not reach x (Torch's); the bound gets it", function()
        local x = leaf(ordo.tensor({4, -1, 0}, D))
        x:clamp(0):sqrt():sum():backward() -- sqrt's gradient at 0 is inf
        assert.same({0.25, 0}, {x.grad[1], x.grad[2]}) -- -1 was clamped: 0, was NaN (inf * 0)
        assert.equals(math.huge, x.grad[3]) -- 0 is inside the bounds, as Torch's
        local y, hi = leaf(ordo.tensor({4, 20}, D)), leaf(ordo.tensor({10}, D))
        ;(y:clamp(nil, hi) - 4):sqrt():sum():backward()
        assert.same({math.huge, 0}, y.grad:totable())
        assert.is_true(math.abs(hi.grad[1] - 1 / (2 * math.sqrt(6))) < 1e-12)
    end)

    it("maximum and minimum: an inf gradient does not reach the side that lost (Torch's)", function()
        local x = leaf(ordo.tensor({4, -1}, D))
        x:maximum(0):sqrt():sum():backward()
        assert.same({0.25, 0}, x.grad:totable()) -- -1 lost to 0: was NaN (inf * 0)
        local a, b = leaf(ordo.tensor({4, -1}, D)), leaf(ordo.tensor({1, 0}, D))
        a:maximum(b):sqrt():sum():backward()
        assert.same({0.25, 0}, a.grad:totable())
        assert.same({0, math.huge}, b.grad:totable())
        local c = leaf(ordo.tensor({-4, 1}, D))
        c:minimum(0):neg():sqrt():sum():backward()
        assert.same({-0.25, 0}, c.grad:totable())
    end)

    it("masked_fill with a tensor value: the value gets the sum of the gradient where the mask is set", function()
        local v = leaf(ordo.tensor(0.7, D))
        local y = ordo.tensor({1.0, -1.0}):masked_fill(ordo.tensor({1, 0}, {dtype = "uint8"}), v)
        assert.is_true(y:needs_grad())
        ;(y * ordo.tensor({3, 5})):sum():backward()
        assert.same({}, v.grad:shape())
        assert.equal(3, v.grad:item())
        -- against differences, with x too, a mask broadcast over rows, a value of shape 1
        local mask = ordo.tensor({1, 0, 0, 1}, {dtype = "uint8"})
        check(function(x, val) return x:masked_fill(mask, val) end, {a, leaf(ordo.tensor(0.3, D))})
        check(function(x, val) return x:masked_fill(mask, val) end, {a, leaf(ordo.tensor({-0.2}, D))})
    end)

    it("unary ops", function()
        local s = spread(3, 4)
        check(function(x) return -x end, {a})
        check(function(x) return x:abs() end, {s})
        check(function(x) return x:relu() end, {s})
        check(function(x) return x:exp() end, {a})
        check(function(x) return x:log() end, {p})
        check(function(x) return x:sqrt() end, {p})
        check(function(x) return x:tanh() end, {a})
        check(function(x) return x:sigmoid() end, {a})
        check(function(x) return x:square() end, {a})
        check(function(x) return x:sin() end, {a})
        check(function(x) return x:cos() end, {a})
        check(function(x) return x:log1p() end, {p})
        check(function(x) return x:expm1() end, {a})
        check(function(x) return x:rsqrt() end, {p})
        check(function(x) return x:reciprocal() end, {p})
        -- piecewise constant: zero gradients (the values are kept off the steps)
        for _, name in ipairs({"sign", "floor", "ceil", "round", "trunc"}) do
            check(function(x) return x[name](x) * 3 + x end, {s})
        end
    end)

    it("the inverse trigonometric, hyperbolic and error functions keep the graph", function()
        -- inputs inside each function's domain, away from its poles
        local function within(lo, hi) return leaf(ordo.rand({3, 4}, D) * (hi - lo) + lo) end
        local cases = {
            tan = within(-1.2, 1.2), asin = within(-0.9, 0.9), acos = within(-0.9, 0.9),
            atan = within(-2, 2), sinh = within(-2, 2), cosh = within(-2, 2), asinh = within(-2, 2),
            acosh = within(1.1, 3), atanh = within(-0.9, 0.9), erf = within(-2, 2), erfc = within(-2, 2),
            erfinv = within(-0.9, 0.9),
        }
        for name, x in pairs(cases) do
            local y = x[name](x)
            assert.is_true(y:needs_grad(), name .. " must record a node")
            assert.equals(name, y:grad_fn())
            check(function(t) return t[name](t) end, {x}, {name = name})
        end
    end)

    it("pow: no NaN where the exponent is 0 or a number base is 0 (Torch's values)", function()
        -- d(x^0)/dx is 0, at x == 0 too (0 * 0^-1 would be NaN)
        local x = leaf(ordo.tensor({0, 2}, D))
        x:pow(0):sum():backward()
        assert.same({0, 0}, x.grad:totable())
        x.grad = nil
        x:pow(ordo.tensor({0, 1}, D)):sum():backward()
        assert.same({0, 1}, x.grad:totable())
        -- d(0^y)/dy is 0 for y >= 0 (0 * log 0 would be NaN), as for a tensor base of 0
        local y = leaf(ordo.tensor({0, 2, 3}, D))
        ;(0 ^ y):sum():backward()
        assert.same({0, 0, 0}, y.grad:totable())
        y.grad = nil
        ordo.zeros({3}, D):pow(y):sum():backward()
        assert.same({0, 0, 0}, y.grad:totable())
        -- a negative exponent: 0^y is inf and the gradient inf * log 0 = -inf, as Torch's, for a tensor
        -- base as for a number (the tensor base gave 0)
        local yn = leaf(ordo.tensor({-1, 2}, D))
        ordo.zeros({2}, D):pow(yn):sum():backward()
        assert.same({-1 / 0, 0}, yn.grad:totable())
        yn.grad = nil
        ;(0 ^ yn):sum():backward()
        assert.same({-1 / 0, 0}, yn.grad:totable())
        check(function(t) return t:pow(0) + t end, {a})
        check(function(t) return 0 ^ t:abs() end, {a})
    end)

    it("pow with an integer or float32 base tensor: the exponent's gradient in its own precision", function()
        local base = ordo.tensor({1, 2, 3}, {dtype = "int64"})
        local e = ordo.tensor({0.5, 1.5, -2}, D):requires_grad()
        base:pow(e):sum():backward()
        local want = {0, 2 ^ 1.5 * math.log(2), 3 ^ -2 * math.log(3)}
        -- (the base's log was float32: off by 5e-9)
        for i = 1, 3 do assert.is_true(math.abs(e.grad:totable()[i] - want[i]) < 1e-14, i) end
        e.grad = nil
        local b32 = ordo.tensor({1.1, 2.3, 3.7}, {dtype = "float32"})
        b32:pow(e):sum():backward()
        local bv = b32:totable() -- the float32 values, exactly
        for i = 1, 3 do
            local w = bv[i] ^ e:totable()[i] * math.log(bv[i])
            assert.is_true(math.abs(e.grad:totable()[i] - w) < 1e-13, i)
        end
        check(function(t) return ordo.tensor({{1, 2}, {3, 4}}, {dtype = "int64"}):pow(t) end, {positive(2, 2)})
    end)

    it("sum and mean over all, over a dim, keepdim", function()
        check(function(x) return x:sum() end, {a})
        check(function(x) return x:sum(2) end, {a})
        check(function(x) return x:sum(1, true) end, {a})
        check(function(x) return x:mean() end, {a})
        check(function(x) return x:mean(-1) end, {bt})
    end)

    it("softmax and log_softmax", function()
        check(function(x) return x:softmax(2) end, {a})
        check(function(x) return x:log_softmax(1) end, {a})
        check(function(x) return x:log_softmax() end, {bt})
    end)

    it("matmul: 2-D, 1-D operands, batched, broadcast batch", function()
        check(function(x, y) return x:matmul(y) end, {a, m})
        check(function(x, y) return x:matmul(y) end, {a, b})
        check(function(y, z) return y:matmul(z) end, {b, m})
        check(function(y) return y:matmul(y) end, {b})
        check(function(x, y) return x:matmul(y) end, {bt, m})
        check(function(x, y) return ordo.matmul(x, y:transpose(2, 3)) end, {a, bt})
        check(function(x) return x:t():matmul(x) end, {a})
        -- above 3-D: batch dims broadcast (2x1 against 3), 1-D operands on either side
        local a4, b3, v = randn(2, 1, 3, 4), randn(3, 4, 2), randn(4)
        check(function(x, y) return x:matmul(y) end, {a4, b3})
        check(function(x, y) return x:matmul(y) end, {a4, v})
        check(function(x, y) return y:matmul(x:transpose(-1, -2)) end, {a4, randn(4)})
        -- an empty batch: a batch of 1 or a 2-D operand broadcasts to 0 (it gave 1 and failed to expand)
        for _, c in ipairs({{{4, 5}, {0, 5, 3}}, {{0, 4, 5}, {5, 3}}, {{1, 4, 5}, {0, 5, 3}}, {{0, 1, 5}, {1, 5, 3}},
                            {{5}, {0, 5, 3}}, {{2, 0, 4, 5}, {1, 5, 3}}}) do
            local x, y = ordo.ones(c[1], D):requires_grad(), ordo.ones(c[2], D):requires_grad()
            local out = x:matmul(y)
            local bsz = (#c[1] >= 3 and c[1][#c[1] - 2] == 0 or #c[2] >= 3 and c[2][#c[2] - 2] == 0) and 0 or nil
            assert.equals(0, out:numel())
            if bsz then assert.equals(0, out:size(-3 + (#c[1] == 1 and 1 or 0))) end
            local s = out:sum()
            s:backward()
            assert.same(c[1], x.grad:shape())
            assert.same(c[2], y.grad:shape())
            assert.equals(0, x.grad:abs():sum():item() + y.grad:abs():sum():item())
        end
    end)

    it("views: view, reshape, flatten, transpose, permute, narrow, select, unsqueeze, squeeze, expand", function()
        local w12, w43 = ordo.randn({12}, D), ordo.randn({4, 3}, D)
        check(function(x) return x:view(4, 3) * w43 end, {a})
        check(function(x) return x:reshape(-1) * w12 end, {a})
        check(function(x) return x:flatten() * w12 end, {a})
        check(function(x) return x:t() * w43 end, {a})
        check(function(x) return x:transpose(1, 2):contiguous() * w43 end, {a})
        check(function(x) return x:permute(3, 1, 2):contiguous() * ordo.arange(24, D):view(4, 2, 3) end, {bt})
        check(function(x) return x:narrow(2, 2, 2) end, {a})
        check(function(x) return x:select(1, 2) end, {a})
        check(function(x) return x:unsqueeze(1):expand(3, 4) end, {b})
        check(function(x) return x:view(1, 4, 1):squeeze() end, {b})
        check(function(x) return x:expand_as(a) * a:detach() end, {b})
        -- diagonal (its own backward), and views made of the others
        check(function(x) return x:diagonal(1) * ordo.arange(1, 4, D) end, {a})
        check(function(x) return x:diagonal(-1, 3, 1) * ordo.arange(1, 7, D):view(3, 2) end, {bt})
        check(function(x) return x:movedim(1, 3):contiguous() * ordo.arange(24, D):view(3, 4, 2) end, {bt})
        check(function(x) return x:unbind(2)[3] * ordo.arange(1, 4, D) end, {a})
        check(function(x) return x:view_as(w43) * w43 end, {a})
        check(function(x) return x:swapaxes(1, 2) * w43 end, {a})
    end)

    it("gather, index_select, scatter_add, index_add", function()
        local idx = ordo.tensor({{1, 1}, {2, 4}, {3, 3}}, {dtype = "int64"})
        check(function(x) return x:gather(2, idx) end, {a})
        check(function(x) return x:index_select(2, {1, 1, 3}) end, {a})
        local src = randn(3, 2)
        check(function(x, s) return x:scatter_add(2, idx, s) end, {a, src})
        local src2 = randn(3, 3)
        check(function(x, s) return x:index_add(2, {4, 1, 4}, s) end, {a, src2})
    end)

    it("scatter_add with src larger than index: the uncovered part of src gets zeros", function()
        local I = {dtype = "int64"}
        local x, src = randn(3, 4), randn(2, 4)
        check(function(t, u) return t:scatter_add(1, ordo.tensor({{1, 3}}, I), u) end, {x, src})
        local src2 = randn(3, 2)
        check(function(t, u) return t:scatter_add(2, ordo.tensor({{1}, {3}, {2}}, I), u) end, {x, src2})
        check(function(t, u) return t:scatter(1, ordo.tensor({{1, 3}}, I), u) end, {x, src})
        ;(x:scatter_add(1, ordo.tensor({{1, 3}}, I), src) * 2):sum():backward()
        assert.same({{2, 2, 0, 0}, {0, 0, 0, 0}}, src.grad:totable())
    end)

    it("cat, stack, where, masked_fill, casts and copies", function()
        check(function(x, y) return ordo.cat({x, y:view(1, 4)}, 1) end, {a, b})
        check(function(x) return ordo.cat({x, x * 2}, 2) end, {a})
        check(function(x) return ordo.stack({x, x * 2}, 2) end, {a})
        check(function(x, y) return ordo.where(x:gt(0), x, y) end, {a, b})
        check(function(x) return x:where(x:lt(0), 0.5) end, {a})
        check(function(x) return x:masked_fill(x:gt(0), 3) end, {a})
        check(function(x) return x:clone() * 2 end, {a})
        check(function(x) return x:to("float64") + x end, {a})
    end)

    it("cat and stack of more tensors than Lua can return at once (an LSTM over 10,000 steps)", function()
        local x = ordo.ones({1}):requires_grad()
        local w = ordo.ones({1}):requires_grad()
        local list = {}
        for i = 1, 9000 do list[i] = (i % 2 == 0) and x or w * 1 end
        list[9001] = ordo.ones({1}) -- no gradient wanted
        ordo.cat(list):sum():backward()
        assert.equals(4500, x.grad:item())
        assert.equals(4500, w.grad:item())
        x.grad = nil
        for i = 1, 9000, 2 do list[i] = w * 1 end -- (the first backward freed their graph)
        ordo.stack(list):sum():backward()
        assert.equals(4500, x.grad:item())
        -- an op author's backward may return its gradients as one list
        local a, b = ordo.tensor({2}):requires_grad(), ordo.tensor({3}):requires_grad()
        local y = ordo.no_grad(function() return a * b end)
        ag.record("mul_list", y, {a, b}, function(g) return {g * b, g * a} end)
        y:backward()
        assert.equals(3, a.grad:item())
        assert.equals(2, b.grad:item())
        -- a gradient past the inputs raises (was dropped unseen: a backward of (x, w) written for (x, w, b)
        -- gives each input the wrong one), in either form; trailing nils and holes are fine
        for _, bw in ipairs({function(g) return g * b, g * a, g end, function(g) return {g * b, g * a, g} end,
                             function(g) return g * b, g * a, nil, g end}) do
            local y2 = ordo.no_grad(function() return a * b end)
            ag.record("mul3", y2, {a, b}, bw)
            H.raises(function() y2:backward() end, "backward of mul3 returned", "gradients for its 2 inputs")
        end
        a.grad, b.grad = nil, nil
        -- an op that returns its input as it is, recorded on that very tensor, made the input a non-leaf
        -- (its node looping to itself) that never got a .grad: refused, before anything changes
        H.raises(function() ag.record("ident", a, {a}, function(g) return g end) end,
                 "record: out of ident is its input 1 itself", "view_as")
        H.raises(function() ag.record("other", b, {a}, function(g) return g end) end,
                 "record: out of other is a leaf that requires a gradient")
        assert.is_true(a:is_leaf() and b:is_leaf())
        local via = ag.record("ident", ordo.no_grad(function() return a:view_as(a) end), {a}, function(g) return g end)
        a.grad = nil
        ;(via * 3):sum():backward()
        assert.equals(3, a.grad:item())
        a.grad, b.grad = nil, nil
        local y3 = ordo.no_grad(function() return a * b end)
        ag.record("mul_nil", y3, {a, b}, function(g) return nil, g * a, nil, nil end)
        y3:backward()
        assert.is_nil(a.grad)
        assert.equals(2, b.grad:item())
    end)

    it("a composite: a two-layer network with a cross-entropy loss", function()
        local x = ordo.randn({5, 4}, D)
        local w1, w2 = randn(4, 6), randn(6, 3)
        local y = ordo.tensor({1, 3, 2, 2, 1}, {dtype = "int64"})
        check(function(u, v)
            local logits = x:matmul(u):tanh():matmul(v)
            return -logits:log_softmax(2):gather(2, y:view(-1, 1)):mean()
        end, {w1, w2})
    end)

    it("gradcheck itself fails on a wrong gradient and on a non-deterministic fn", function()
        -- a wrong backward recorded through the op-author API
        local function bad_square(x)
            local y = ordo.no_grad(function() return x * x end)
            return ag.record("bad_square", y, {x, n = 1}, function(g) return g * x * 3 end)
        end
        assert.has_error(function() ag.gradcheck(bad_square, {a}) end)
        local ok, err = pcall(ag.gradcheck, function(x) return x * ordo.randn({3, 4}, D) end, {a})
        assert.is_false(ok)
        assert.matches("deterministic", err)
        -- an output with NaN is said to be one (NaN ~= NaN read as a non-deterministic fn)
        local col = ordo.randn({3, 1}, D):requires_grad()
        ok, err = pcall(ag.gradcheck, function(x) return x:std(2) end, {col})
        assert.is_false(ok)
        assert.matches("gradcheck: fn's output holds NaN", err, 1, true)
        assert.is_nil(err:find("deterministic", 1, true))
        -- on float32 the failure says why, not only the numbers
        ok, err = pcall(ag.gradcheck, function(x) return x:exp():sum() end, {ordo.ones({3}):requires_grad()})
        assert.is_false(ok)
        assert.matches("(input 1 is float32: central differences need float64)", err, 1, true)
        -- every output is checked, as Torch's: a wrong gradient of the second one fails (only the first was)
        H.raises(function() ag.gradcheck(function(x) return x * 2, bad_square(x) end, {a}) end,
                 "gradcheck: input 1", "backward gives")
        H.raises(function() ag.gradcheck(function(x) return bad_square(x), x:exp() end, {a}) end, "backward gives")
        assert.is_true(ag.gradcheck(function(x) return x * 2, x:exp(), x:argmax() end, {a})) -- (an int64 one: left out)
        H.raises(function() ag.gradcheck(function(x) return x * 2, 3 end, {a}) end, "number as output 2")
        -- Torch's raise_exception = false answers false; one tensor is a list of one
        assert.is_false(ag.gradcheck(bad_square, {a}, {raise_exception = false}))
        assert.is_true(ag.gradcheck(function(x) return x:exp() end, a, {raise_exception = false}))
        H.raises(function() ag.gradcheck(bad_square, {a}, {raise_exception = 0}) end, "raise_exception", "true or false")
        H.raises(function() ag.gradcheck(bad_square, "a") end, "inputs must be a tensor or a list", "string")
    end)

    it("gradcheck touches no .grad: neither its inputs' nor a parameter's that fn closes over", function()
        local w = ordo.tensor({1, 2, 3}, D):requires_grad()
        w.grad = ordo.tensor({10, 10, 10}, D)
        local x = ordo.tensor({1, 1, 1}, D):requires_grad()
        x.grad = ordo.tensor({7, 7, 7}, D)
        local u = ordo.tensor({2, 2, 2}, D):requires_grad() -- checked, and unused by fn
        assert.is_true(ag.gradcheck(function(t) return t * w end, {x, u}))
        assert.same({10, 10, 10}, w.grad:totable()) -- was 10 + the check's weights
        assert.same({7, 7, 7}, x.grad:totable()) -- was wiped
        assert.is_nil(u.grad)
        local lin = ordo.nn.Linear(3, 2):to("float64")
        assert.is_true(ag.gradcheck(function(t) return lin(t) end, {ordo.randn({4, 3}, D):requires_grad()}))
        assert.is_nil(lin.weight.grad)
        assert.is_nil(lin.bias.grad)
        -- still catches a wrong gradient, and an input listed twice gets its check
        local function bad_square(t)
            local y = ordo.no_grad(function() return t * t end)
            return ag.record("bad_square", y, {t, n = 1}, function(g) return g * t * 3 end)
        end
        assert.has_error(function() ag.gradcheck(bad_square, {x}) end)
        assert.is_true(ag.gradcheck(function(p, q) return p * q end, {x, x}))
    end)

    it("record with needs, as the README shows for new ops; needs refuses a fourth value instead of ignoring it", function()
        local function times5(x)
            local out = ordo.no_grad(function() return x * 5 end)
            if ag.needs(x) then ag.record("times5", out, {x}, function(g) return g * 5 end, {}) end
            return out
        end
        local x = ordo.ones({3}, D):requires_grad()
        local y = times5(x)
        assert.equals("times5", y:grad_fn())
        y:sum():backward()
        assert.same({5, 5, 5}, x.grad:totable())
        local plain = ordo.ones({1}, D)
        local ok, err = pcall(ag.needs, plain, plain, plain, x)
        assert.is_false(ok)
        assert.matches("needs: takes at most three values, got a fourth; use autograd.list_needs({...})", err, 1, true)
        assert.is_true(ag.list_needs({plain, plain, plain, x}))
    end)

    it("gradcheck works on inputs on another device (its weights go to the output's device)", function()
        local x = ordo.randn({3}, D):to(ordo.cpu(1)):requires_grad()
        local w = ordo.randn({3, 2}, D):to(ordo.cpu(1)):requires_grad()
        check(function(v) return (v * v):sum() end, {x})
        check(function(v, u) return v:view(1, 3):matmul(u):tanh() end, {x, w})
        assert.equals(ordo.cpu(1), x:device())
        -- and on another engine (its weights were made on the default one, which ops refuse to mix)
        local e = ordo.engine.new{kind = "pooled", cpu_workers = 1}
        local y = ordo.randn({3, 2}, {dtype = "float64", engine = e}):requires_grad()
        check(function(v) return v:exp():sum(2) end, {y})
        e:close()
    end)
end)

describe("autograd rules", function()
    it("backward defaults to 1 for one-element outputs and accumulates into .grad", function()
        local w = ordo.ones({2}, D):requires_grad()
        ;(w * 3):sum():backward()
        ;(w * 2):sum():backward()
        assert.same({5, 5}, w.grad:totable())
        w.grad = nil
        ;(w * w):sum():backward()
        assert.same({2, 2}, w.grad:totable())
    end)

    it("a given gradient seeds backward; shapes must match", function()
        local w = ordo.ones({2, 2}, D):requires_grad()
        local y = w * 2
        y:backward(ordo.tensor({{1, 2}, {3, 4}}, D))
        assert.same({{2, 4}, {6, 8}}, w.grad:totable())
        local ok, err = pcall(function() (w * 2):backward() end)
        assert.is_false(ok)
        assert.matches("a gradient must be given for an output of shape 2x2", err)
        ok, err = pcall(function() (w * 2):backward(ordo.ones({3}, D)) end)
        assert.is_false(ok)
        assert.matches("grad has shape 3 but the output has shape 2x2", err)
    end)

    it("a graph is freed by backward unless retain_graph is given", function()
        local w = ordo.ones({2}, D):requires_grad()
        local l = (w * w):sum()
        l:backward({retain_graph = true})
        l:backward()
        assert.same({4, 4}, w.grad:totable())
        local ok, err = pcall(function() l:backward() end)
        assert.is_false(ok)
        assert.matches("freed by an earlier backward", err)
    end)

    it("backward frees what the graph held: a loss kept after it (for logging) holds no activation", function()
        local function settle()
            for _ = 1, 3 do
                collectgarbage()
                collectgarbage()
                ordo.engine.wait_for_all()
            end
        end
        local w = ordo.randn({512, 512}, D):requires_grad() -- 2 MB
        settle()
        local base = ordo.memory.live_bytes()
        local kept = {}
        for i = 1, 4 do
            local h = (w * 2):tanh() -- 2 MB activations, several of them, each step
            local loss = (h * h):sum()
            loss:backward()
            kept[i] = loss
        end
        settle()
        -- w.grad (2 MB) and four 0-dim losses; the backward closures kept every step's activations (26 MB)
        local held = ordo.memory.live_bytes() - base
        assert.is_true(held < 3e6, ("%.1f MB still held"):format(held / 1e6))
        assert.equals(4, #kept)
        -- with retain_graph the graph stays, and a second backward goes through it
        local l = ((w * 2):tanh()):sum()
        l:backward({retain_graph = true})
        l:backward()
    end)

    it("register_hook sees each gradient, may replace it, and comes off with handle:remove()", function()
        local x = ordo.tensor({1, 2, 3}, D):requires_grad()
        local seen = {}
        local h = x:register_hook(function(g) seen[#seen + 1] = g:totable() end)
        ;(x * x):sum():backward()
        assert.same({{2, 4, 6}}, seen)
        assert.same({2, 4, 6}, x.grad:totable())
        x.grad = nil
        local h2 = x:register_hook(function(g) return g * 0.5 end) -- after the first: that one sees it unchanged
        ;(x * x):sum():backward()
        assert.same({1, 2, 3}, x.grad:totable())
        assert.equals(2, #seen)
        h2:remove()
        h:remove()
        x.grad = nil
        ;(x * x):sum():backward()
        assert.same({2, 4, 6}, x.grad:totable())
        assert.equals(2, #seen)
        -- on a non-leaf: the gradient its op passes on
        local y = x * 3
        y:register_hook(function(g) return g:clamp(-1, 1) end)
        x.grad = nil
        ;(y * y):sum():backward()
        assert.same({3, 3, 3}, x.grad:totable())
        assert.same({2, 2, 2}, ag.grad((x * 2):sum(), {x})[1]:totable()) -- (x's hooks are off)
        -- a gradient a hook returns (or keeps) is not taken as .grad: accumulating would change it
        local mine = ordo.tensor({5, 5}, D)
        local v = ordo.tensor({1, 2}, D):requires_grad()
        v:register_hook(function() return mine end)
        ;(v * 2):sum():backward()
        ;(v * 2):sum():backward()
        assert.same({5, 5}, mine:totable())
        assert.same({10, 10}, v.grad:totable())
        -- bad hooks and tensors
        local ok, err = pcall(function() ordo.zeros({2}, D):register_hook(print) end)
        assert.is_false(ok)
        assert.matches("register_hook: the tensor does not require a gradient", err)
        ok, err = pcall(function() x:register_hook(5) end)
        assert.matches("register_hook: expected a function, got number", err)
        local z = x * 1
        z:register_hook(function() return ordo.ones({5}, D) end)
        ok, err = pcall(function() z:sum():backward() end)
        assert.is_false(ok)
        assert.matches("a hook of a tensor of shape 3 returned a gradient of shape 5", err)
    end)

    it("a hook handle takes off its own registration only, once; a hook removed while hooks run skips none",
       function()
        local x = ordo.tensor({1, 2, 3}, D):requires_grad()
        local double = function(g) return g * 2 end
        local h1 = x:register_hook(double)
        x:register_hook(double) -- the same function, registered twice
        h1:remove()
        h1:remove() -- a second remove is a no-op (it took off the other registration)
        ;(x * 1):sum():backward()
        assert.same({2, 2, 2}, x.grad:totable())
        -- order kept: the handle takes off its own entry, not the last equal one
        local y = ordo.tensor({1}, D):requires_grad()
        local add1 = function(g) return g + 1 end
        local ha = y:register_hook(add1)
        y:register_hook(double)
        y:register_hook(add1)
        ha:remove() -- left: double, then add1: (1 * 2) + 1
        ;(y * 1):sum():backward()
        assert.same({3}, y.grad:totable())
        -- a hook that removes itself as it runs: the next one still runs
        local z = ordo.tensor({1}, D):requires_grad()
        local hz
        hz = z:register_hook(function() hz:remove() end)
        local ran = 0
        z:register_hook(function() ran = ran + 1 end)
        ;(z * 1):sum():backward()
        assert.equals(1, ran)
        ;(z * 1):sum():backward()
        assert.equals(2, ran)
    end)

    it("a .grad set by hand must match its tensor's shape, dtype and device: refused before anything changes",
       function()
        local function try(grad)
            local x = ordo.tensor({1, 2, 3}, D):requires_grad()
            local w = ordo.tensor({1, 1, 1}, D):requires_grad()
            x.grad = type(grad) == "function" and grad(x) or grad
            local before = ordo.is_tensor(x.grad) and x.grad:clone() or nil
            local loss = (w * 2 + x * 3):sum()
            local ok, err = pcall(function() loss:backward() end)
            assert.is_false(ok)
            assert.matches("backward: the .grad of a float64 tensor of shape 3", err, 1, true)
            assert.is_nil(w.grad) -- nothing accumulated: w comes before x in the walk
            assert.same({1, 2, 3}, x:totable())
            if before then assert.same(before:totable(), x.grad:totable()) end
            x.grad = nil -- fixed: the graph was not freed
            loss:backward()
            assert.same({3, 3, 3}, x.grad:totable())
            assert.same({2, 2, 2}, w.grad:totable())
            return err
        end
        assert.matches("is a tensor of shape 3x3", try(ordo.zeros({3, 3}, D))) -- was broadcast into all of it
        assert.matches("is a tensor of shape 1", try(ordo.zeros({1}, D)))
        assert.matches("is a tensor of dtype float32", try(ordo.zeros({3}, {dtype = "float32"}))) -- stayed float32
        assert.matches("is a tensor of dtype int64", try(ordo.zeros({3}, {dtype = "int64"})))
        assert.matches("is number", try(0))
        assert.matches("is the tensor itself", try(function(x) return x end)) -- backward wrote into x
        assert.matches("is the tensor itself", try(function(x) return x:detach() end))
        assert.matches("an expanded view", try(ordo.zeros({1}, D):expand(3)))
        -- one of the right kind is added into, transposed or not
        local x = ordo.tensor({{1, 2}, {3, 4}}, D):requires_grad()
        x.grad = ordo.tensor({{10, 20}, {30, 40}}, D):t()
        ;(x * 1):sum():backward()
        assert.same({{11, 31}, {21, 41}}, x.grad:totable())
        -- retain_grad's .grad is checked too
        local y = x * 2
        y:retain_grad()
        y.grad = ordo.zeros({4}, D)
        local ok, err = pcall(function() y:sum():backward() end)
        assert.is_false(ok)
        assert.matches("the .grad of a float64 tensor of shape 2x2 on cpu%(0%) is a tensor of shape 4", err)
    end)

    it("backward frees the graph's tensors while its output lives on", function()
        local function live()
            collectgarbage()
            collectgarbage()
            ordo.engine.wait_for_all()
            return ordo.memory.live_count()
        end
        local w = ordo.randn({1000}, D):requires_grad()
        local before = live()
        local y = w
        for _ = 1, 50 do y = (y * w):tanh() end -- each step saves its inputs or its output
        local loss = y:sum()
        assert.is_true(live() >= before + 100)
        loss:backward()
        w.grad = nil
        -- loss and y still live; the 100 tensors in between, held by the
        -- nodes' backward closures, are gone
        assert.is_true(live() <= before + 4, ("%d tensors still live"):format(live() - before))
        assert.equal("tanh", y:grad_fn())
        local ok, err = pcall(function() loss:backward() end)
        assert.is_false(ok)
        assert.matches("freed by an earlier backward", err)
    end)

    it("views of parts of a tensor (x[i], narrow, split) add their gradients in place, not as full-size tensors",
       function()
        local n, m = 200, 256
        local x = ordo.randn({n, m}, D):requires_grad()
        local loss = x[1]:sum()
        for i = 2, n do loss = loss + x[i]:sum() * i end
        for _, part in ipairs(x:split(50)) do loss = loss + part:narrow(2, 1, 2):sum() end
        loss = loss + x:sum() -- a dense contribution among them
        ordo.engine.wait_for_all()
        local before = ordo.memory.total_bytes()
        loss:backward()
        local allocated = ordo.memory.total_bytes() - before
        -- a zero-filled copy of x per view made n + 4 of them (40 MB here)
        local full = n * m * 8
        assert.is_true(allocated < 8 * full, ("backward allocated %.1f copies of x"):format(allocated / full))
        local g = x.grad:totable()
        for _, i in ipairs({1, 2, 77, n}) do
            assert.equal(i + 2, g[i][1])
            assert.equal(i + 1, g[i][m])
        end
    end)

    it("index_select and gather called step by step add their gradients into one, not a full-size one each",
       function()
        local w = ordo.randn({1000, 64}, D):requires_grad() -- an embedding table
        local steps = 50
        local loss = w:index_select(1, ordo.tensor({1, 2, 2}, "int64")):sum()
        for t = 2, steps do
            loss = loss + w:index_select(1, {t, 1000}):sum() * t
            loss = loss + w:gather(2, ordo.tensor({{t}}, "int64"):expand({1000, 1})):sum()
        end
        ordo.engine.wait_for_all()
        local before = ordo.memory.total_bytes()
        loss:backward()
        local allocated = ordo.memory.total_bytes() - before
        local full = 1000 * 64 * 8
        assert.is_true(allocated < 8 * full, ("backward allocated %.1f copies of w"):format(allocated / full))
        local g = w.grad
        assert.equal(1, g[{1, 1}])                           -- index 1 once
        assert.equal(2 + 2 + 1, g[{2, 2}])                   -- 1 twice, step 2 once, gather column 2
        assert.equal(3, g[{3, 1}])
        assert.equal(steps * (steps + 1) / 2 - 1, g[{1000, 64}]) -- steps 2..50; no gather reaches column 64
    end)

    it("a gradient passed on as it is (clone) and captured is not changed by parts added later", function()
        for _, order in ipairs({1, 2}) do
            local y = ordo.randn({3, 2}, D):requires_grad()
            local x = y:clone() -- its backward hands x's gradient to y as it is
            local a = x:narrow(1, 1, 1):sum() + x:narrow(1, 2, 1):sum() * 2
            local b = y:narrow(1, 3, 1):sum() * 3 + y:select(1, 1):sum() * 4
            local out = order == 1 and a + b or b + a
            local g = ordo.autograd.grad(out, {x, y})
            assert.same({{1, 1}, {2, 2}, {0, 0}}, g[1]:totable())
            assert.same({{5, 5}, {2, 2}, {3, 3}}, g[2]:totable())
        end
    end)

    it("a tensor used n times sums its n gradients into one tensor in place", function()
        local w = ordo.randn({100, 100}, D):requires_grad()
        local n = 40
        local loss = (w * 1):sum()
        for i = 2, n do loss = loss + (w * i):sum() end
        ordo.engine.wait_for_all()
        local before = ordo.memory.total_bytes()
        loss:backward()
        local copies = (ordo.memory.total_bytes() - before) / (100 * 100 * 8)
        -- each use's own gradient (g * i) is one; a new sum per use was another
        assert.is_true(copies < 1.5 * n, ("backward allocated %.1f copies of w for %d uses"):format(copies, n))
        assert.equal(n * (n + 1) / 2, w.grad[{7, 9}])
    end)

    it("the same tensor used twice gets both contributions", function()
        local x = ordo.tensor({3}, D):requires_grad()
        local y = x * x + x
        y:sum():backward()
        assert.same({7}, x.grad:totable())
    end)

    it("in-place ops on tensors that require a gradient raise, and work under no_grad", function()
        local w = ordo.ones({2}, D):requires_grad()
        local ok, err = pcall(function() w:add_(1) end)
        assert.is_false(ok)
        assert.matches("add_: a tensor that requires a gradient cannot be changed in place", err)
        ok, err = pcall(function() ordo.zeros({2}, D):add_(w) end)
        assert.is_false(ok)
        assert.matches("cannot take an input that requires a gradient", err)
        ordo.no_grad(function() w:mul_(3) end)
        assert.same({3, 3}, w:totable())
    end)

    it("a derived in-place op's refusal names it and its own out-of-place form", function()
        local w = ordo.ones({4}, D):requires_grad()
        local u = ordo.ones({4}, D)
        local idx = ordo.tensor({1, 3}, "int64")
        local mask = ordo.tensor({1, 0, 1, 0}, "uint8")
        for name, call in pairs({
            addcmul_ = function() w:addcmul_(u, u, 2) end,
            addcdiv_ = function() w:addcdiv_(u, u, 2) end,
            floor_divide_ = function() w:floor_divide_(2) end,
            cumsum_ = function() w:cumsum_(1) end,
            cumprod_ = function() w:cumprod_(1) end,
            clip_ = function() w:clip_(0, 1) end,
            index_fill_ = function() w:index_fill_(1, idx, 0) end,
            index_copy_ = function() w:index_copy_(1, idx, ordo.zeros({2}, D)) end,
            masked_scatter_ = function() w:masked_scatter_(mask, ordo.zeros({2}, D)) end,
        }) do
            local ok, err = pcall(call)
            assert.is_false(ok, name)
            local want = name .. ": a tensor that requires a gradient cannot be changed in place (use the " ..
                "out-of-place " .. name:sub(1, -2) .. ","
            assert.truthy(err:find(want, 1, true), name .. ": " .. err)
        end
        assert.same({1, 1, 1, 1}, w:totable()) -- left as it was
    end)

    it("a view made under no_grad of a tensor that requires a gradient cannot be changed in place with grad on", function()
        local w = ordo.tensor({1, 2, 3, 4}, D):requires_grad()
        local v = ordo.no_grad(function() return w:narrow(1, 1, 2) end)
        local row = ordo.no_grad(function() return w:view(2, 2) end)[1] -- a view of such a view too
        local h = (w * 2):exp() -- (a non-leaf alike)
        local hv = ordo.no_grad(function() return h:view(2, 2):t() end)
        H.raises(function() v:add_(1) end, "add_: this view was made under ordo.no_grad", "ordo.no_grad too")
        H.raises(function() row:fill_(0) end, "fill_: this view was made under ordo.no_grad")
        H.raises(function() v[1] = 5 end, "this view was made under ordo.no_grad")
        H.raises(function() hv:copy_(ordo.zeros({2, 2}, D)) end, "copy_: this view was made under ordo.no_grad")
        assert.same({1, 2, 3, 4}, w:totable()) -- unchanged
        -- under no_grad it may change, as w itself may; copies and detached views are free
        ordo.no_grad(function() v:mul_(10) end)
        assert.same({10, 20, 3, 4}, w:totable())
        local c = ordo.no_grad(function() return w:clone() end)
        c:add_(1)
        local d = ordo.no_grad(function() return w:detach():narrow(1, 3, 2) end)
        d:zero_() -- (detach: Torch's way to change the values outside the graph)
        assert.same({10, 20, 0, 0}, w:totable())
        -- a view of a tensor that needs no gradient is free under no_grad and out of it
        local u = ordo.zeros({4}, D)
        ordo.no_grad(function() return u:narrow(1, 1, 2) end):fill_(1)
        assert.same({1, 1, 0, 0}, u:totable())
    end)

    it("changing a saved tensor in place before backward is reported", function()
        local w = ordo.ones({2}, D):requires_grad()
        local x = ordo.ones({2}, D)
        local y = (w * x):sum()
        x:add_(1)
        local ok, err = pcall(function() y:backward() end)
        assert.is_false(ok)
        assert.matches("saved by mul was changed in place", err)
    end)

    it("a backward that raises (saved tensor changed, graph freed) touches no .grad and frees nothing", function()
        -- the failing node comes after a's in the walk: a's gradient was accumulated, then the error
        local a, b = ordo.tensor({1, 2}, D):requires_grad(), ordo.tensor({3, 4}, D):requires_grad()
        local c = ordo.ones({2}, D)
        local loss = (b * c):sum() * 2 + (a * 3):sum()
        c:add_(1)
        local ok, err = pcall(function() loss:backward() end)
        assert.is_false(ok)
        assert.matches("saved by mul was changed in place", err)
        assert.is_nil(a.grad)
        assert.is_nil(b.grad)
        local ok2, err2 = pcall(function() ordo.autograd.grad(loss, {b}) end)
        assert.is_false(ok2)
        assert.matches("saved by mul was changed in place", err2)
        assert.same({3, 3}, ordo.autograd.grad(loss, {a})[1]:totable()) -- (the changed tensor is not on its path)
        -- a graph partly freed by an earlier backward: nothing accumulated, the rest not freed
        local x, y = ordo.tensor({1, 2}, D):requires_grad(), ordo.tensor({0, 1}, D):requires_grad()
        local h = y:exp()
        h:sum():backward()
        local l2 = h:sum() + (x * 3):sum()
        ok, err = pcall(function() l2:backward() end)
        assert.is_false(ok)
        assert.matches("graph through exp was freed", err)
        assert.is_nil(x.grad)
        -- nothing of l2's own graph was freed: a second try meets the same node
        ok, err = pcall(function() l2:backward() end)
        assert.is_false(ok)
        assert.matches("graph through exp was freed", err)
        -- a saved tensor written by the pass itself (a .grad the forward read) is still caught
        local w = ordo.tensor({1, 2}, D):requires_grad()
        w.grad = ordo.ones({2}, D)
        local l3 = (x * w.grad):sum() + (w * 2):sum() -- w's .grad grows before x's mul reads it
        ok, err = pcall(function() l3:backward() end)
        assert.is_false(ok)
        assert.matches("saved by mul was changed in place", err)
    end)

    it("an op that does not read an operand in its backward (add) lets it change in place", function()
        local w = ordo.ones({2}, D):requires_grad()
        local x = ordo.ones({2}, D)
        local y = (w + x):sum()
        x:add_(1)
        y:backward()
        assert.same({1, 1}, w.grad:totable())
    end)

    it("no_grad records nothing, restores the mode after errors, returns the results", function()
        local w = ordo.ones({2}, D):requires_grad()
        local y, n = ordo.no_grad(function() return w * 2, 42 end)
        assert.is_false(y:needs_grad())
        assert.equal(42, n)
        assert.has_error(function() ordo.no_grad(function() error("boom") end) end)
        assert.is_true(ag.is_enabled())
        assert.is_true((w * 2):needs_grad())
        -- every result, trailing nils too, as a plain call's
        assert.equal(2, select("#", ordo.no_grad(function() return 1, nil end)))
        assert.equal(4, select("#", ordo.enable_grad(function() return nil, nil, 3, nil end)))
        assert.equal(0, select("#", ordo.no_grad(function() end)))
        -- an error object that is not a string comes through as it is
        local ok, e = pcall(ordo.no_grad, function() error({code = 5}) end)
        assert.is_false(ok)
        assert.equal(5, e.code)
        -- nested: an error inside enable_grad restores no_grad's mode, then the outer one
        ordo.no_grad(function()
            assert.is_false(pcall(ordo.enable_grad, function() error("x") end))
            assert.is_false(ag.is_enabled())
            assert.is_false((w * 2):needs_grad())
        end)
        assert.is_true(ag.is_enabled())
    end)

    it("detach, is_leaf, grad_fn, retain_grad", function()
        local w = ordo.ones({2}, D):requires_grad()
        local h = w * 2
        assert.is_true(w:is_leaf())
        assert.is_false(h:is_leaf())
        assert.equal("mul", h:grad_fn())
        assert.is_false(h:detach():needs_grad())
        h:retain_grad()
        h:sum():backward()
        assert.same({1, 1}, h.grad:totable())
        assert.same({2, 2}, w.grad:totable())
    end)

    it("detach_ takes a tensor out of the graph in place (truncated backpropagation through time)", function()
        local w = ordo.tensor({2}, D):requires_grad()
        local h = ordo.tensor({1}, D)
        local seen = 0
        for _ = 1, 3 do -- each chunk's backward reaches w through this chunk's steps only
            w.grad = nil
            for _ = 1, 2 do h = h * w end
            h:register_hook(function() seen = seen + 1 end)
            h:sum():backward()
            assert.same({h:item() / 2 * 2}, w.grad:totable()) -- d(c w^2)/dw = 2 c w: c = h / w^2
            assert.equal(h, h:detach_())
            assert.is_true(h:is_leaf())
            assert.is_false(h:needs_grad())
            assert.is_nil(h:grad_fn())
        end
        assert.equal(3, seen)
        assert.same({64}, h:totable()) -- the values stay
        -- a leaf that required a gradient no longer does (Torch's), grad mode on or off
        local x = ordo.tensor({1, 2}, D):requires_grad()
        x:detach_()
        assert.is_false((x * 2):needs_grad())
        local y = ordo.tensor({1, 2}, D):requires_grad() * 3
        ordo.no_grad(function() y:detach_() end)
        assert.is_false(y:needs_grad())
        -- a graph recorded before, through it, raises at backward before changing anything
        -- (Torch's goes on to a: here it gave a no gradient without a word)
        local a = ordo.tensor({3}, D):requires_grad()
        local b = a * a
        local loss = (b * 2):sum() + (a * 5):sum()
        b:detach_()
        local ok, err = pcall(function() loss:backward() end)
        assert.is_false(ok)
        assert.matches("backward: a tensor (shape 1) that mul took was detached in place (detach_)", err, 1, true)
        assert.is_nil(a.grad)
        -- nor does it when t requires a gradient again (a new leaf: the old graph's gradient is not its own)
        b:requires_grad()
        ok, err = pcall(function() loss:backward() end)
        assert.is_false(ok)
        assert.matches("was detached in place (detach_)", err, 1, true)
        assert.is_nil(b.grad)
        b:requires_grad(false)
        -- one recorded after, from it, does not (it is a constant there)
        local c = ordo.tensor({4}, D):requires_grad()
        local l2 = (b * c):sum()
        l2:backward()
        assert.same({9}, c.grad:totable())
        -- a leaf detached so gets no gradient, as Torch's
        local p = ordo.tensor({2}, D):requires_grad()
        local q = ordo.tensor({3}, D):requires_grad()
        local l3 = (p * q):sum()
        p:detach_()
        l3:backward()
        assert.is_nil(p.grad)
        assert.same({2}, q.grad:totable())
    end)

    it("Torch's p.requires_grad = false raises (it set a field hiding the method: p still trained)", function()
        local m = ordo.nn.Linear(3, 1)
        for _, p in ipairs(m:parameters()) do
            local ok, err = pcall(function() p.requires_grad = false end)
            assert.is_false(ok)
            assert.matches("t.requires_grad = false: requires_grad is a method here; call t:requires_grad(false)", err,
                           1, true)
            assert.equal("function", type(p.requires_grad)) -- the method still there
        end
        m(ordo.randn({2, 3})):sum():backward()
        assert.is_not_nil(m.weight.grad)
        local x = ordo.ones({2})
        local ok, err = pcall(function() x.sum = 5 end)
        assert.is_false(ok)
        assert.matches("t.sum = x: sum is a tensor method, not a field to set", err, 1, true)
        assert.equal(2, x:sum():item())
        x.note = "mine" -- other fields as before
        assert.equal("mine", x.note)
    end)

    it("requires_grad = true as a creation option (Torch's), on every maker that takes options", function()
        local src = ordo.randn({2})
        local made = {
            tensor = ordo.tensor({1, 2}, {requires_grad = true}),
            randn = ordo.randn(3, 4, {requires_grad = true}),
            randn64 = ordo.randn({3, 4}, {dtype = "float64", requires_grad = true}),
            rand = ordo.rand({2}, {requires_grad = true}),
            zeros = ordo.zeros({2}, {requires_grad = true}), ones = ordo.ones(2, {requires_grad = true}),
            empty = ordo.empty({2}, {requires_grad = true}), full = ordo.full({2}, 3, {requires_grad = true}),
            arange = ordo.arange(0, 1, 0.25, {requires_grad = true}),
            linspace = ordo.linspace(0, 1, 5, {requires_grad = true}),
            logspace = ordo.logspace(0, 1, 5, {requires_grad = true}),
            eye = ordo.eye(3, {requires_grad = true}), eye2 = ordo.eye(3, 2, {requires_grad = true}),
            zeros_like = ordo.zeros_like(src, {requires_grad = true}),
            ones_like = ordo.ones_like(src, {requires_grad = true}),
            empty_like = ordo.empty_like(src, {requires_grad = true}),
            full_like = ordo.full_like(src, 7, {requires_grad = true}),
            rand_like = ordo.rand_like(src, {requires_grad = true}),
            randn_like = ordo.randn_like(src, {requires_grad = true}),
            new_zeros = src:new_zeros({3}, {requires_grad = true}), new_ones = src:new_ones({3}, {requires_grad = true}),
            new_empty = src:new_empty({3}, {requires_grad = true}),
            new_full = src:new_full({3}, 2, {requires_grad = true}),
            new_tensor = src:new_tensor({3}, {requires_grad = true}),
            randint = ordo.randint(0, 5, {3}, {dtype = "float32", requires_grad = true}),
            randint_like = ordo.randint_like(src, 0, 5, {requires_grad = true}),
            normal = ordo.normal(0, 1, {3}, {requires_grad = true}),
        }
        for name, t in pairs(made) do
            assert.is_true(t:needs_grad(), name)
            assert.is_true(t:is_leaf(), name)
        end
        assert.equals("float64", made.randn64:dtype())
        assert.same({0, 0.25, 0.5, 0.75}, made.arange:totable())
        assert.same({7, 7}, made.full_like:totable())
        -- a leaf: backward reaches it
        local w = ordo.ones({3}, {dtype = "float64", requires_grad = true})
        ;(w * w):sum():backward()
        assert.same({2, 2, 2}, w.grad:totable())
        -- false: as if not given; the other options still apply
        local f = ordo.zeros({2}, {requires_grad = false, dtype = "float64"})
        assert.is_false(f:needs_grad())
        assert.equals("float64", f:dtype())
        -- only float dtypes, as :requires_grad(); refused before anything is drawn where the options say
        H.raises(function() return ordo.zeros({2}, {dtype = "int32", requires_grad = true}) end, "zeros",
                 "only float tensors (float32, float64) can require a gradient, got int32")
        H.raises(function() return ordo.tensor(ordo.tensor({1}, "int64"), {requires_grad = true}) end, "tensor",
                 "got int64")
        H.raises(function() return ordo.randperm(4, {requires_grad = true}) end, "randperm", "got int64")
        local state = ordo.get_rng_state()
        H.raises(function() return ordo.randint(0, 3, {4}, {requires_grad = true}) end, "randint", "got int64")
        assert.same(state:totable(), ordo.get_rng_state():totable())
        H.raises(function() return ordo.randn(2, {requires_grad = 1}) end, "randn",
                 "requires_grad must be a boolean, got number")
        H.raises(function() return src:new_zeros({2}, {requires_grad = "yes"}) end, "new_zeros",
                 "requires_grad must be a boolean")
        H.raises(function() return ordo.zeros({2}, {requires_grad = true, bogus = 1}) end, "zeros",
                 "unknown option 'bogus'")
    end)

    it("set_grad_enabled and is_grad_enabled, as Torch's; set_grad_enabled takes booleans only", function()
        assert.is_true(ordo.is_grad_enabled())
        local w = ordo.ones({2}, D):requires_grad()
        assert.is_true(ordo.set_grad_enabled(false)) -- returns the previous mode
        local ok, err = pcall(function()
            assert.is_false(ordo.is_grad_enabled())
            assert.is_false((w * 2):needs_grad())
        end)
        assert.is_false(ordo.set_grad_enabled(true))
        assert(ok, err)
        assert.is_true((w * 2):needs_grad())
        for _, bad in ipairs({{}, 0, "false"}) do
            ok, err = pcall(ordo.set_grad_enabled, bad)
            assert.is_false(ok)
            assert.matches("set_grad_enabled: expected a boolean, got", err, 1, true)
            assert.is_true(ordo.is_grad_enabled())
        end
        ok = pcall(ordo.set_grad_enabled) -- nil: was "off" for the rest of the program
        assert.is_false(ok)
        assert.is_true(ordo.is_grad_enabled())
    end)

    it("requires_grad only on float tensors; backward needs a graph", function()
        local ok, err = pcall(function() ordo.ones({2}, {dtype = "int64"}):requires_grad() end)
        assert.is_false(ok)
        assert.matches("only float tensors", err)
        ok, err = pcall(function() ordo.ones({1}):backward() end)
        assert.is_false(ok)
        assert.matches("does not require a gradient", err)
        -- a loss computed under no_grad from parameters that do require one: the hint names both causes
        local w = ordo.ones({2}):requires_grad()
        local l = ordo.no_grad(function() return (w * 2):sum() end)
        ok, err = pcall(function() l:backward() end)
        assert.is_false(ok)
        assert.is_truthy(err:find("backward: the tensor does not require a gradient (call requires_grad() on the " ..
                                  "inputs it was computed from, and compute it outside ordo.no_grad)", 1, true), err)
    end)

    it("integer results (comparisons, argmax) carry no gradient", function()
        local w = ordo.randn({3}, D):requires_grad()
        assert.is_false(w:gt(0):needs_grad())
        assert.is_false(w:argmax():needs_grad())
    end)

    it("autograd.grad returns gradients without touching .grad", function()
        local x = ordo.tensor({1, 2}, D):requires_grad()
        x.grad = ordo.tensor({10, 10}, D)
        local g = ag.grad((x * x):sum(), {x})
        assert.same({2, 4}, g[1]:totable())
        assert.same({10, 10}, x.grad:totable())
    end)

    it("autograd.grad touches no .grad, other leaves' included", function()
        local w, z = ordo.ones({3}, D):requires_grad(), ordo.ones({3}, D):requires_grad()
        local g = ag.grad((w * z * 2):sum(), {w})
        assert.same({2, 2, 2}, g[1]:totable())
        assert.is_nil(z.grad)
        assert.is_nil(w.grad)
        -- a retained non-leaf's .grad is left alone too
        local h = (w * 3):retain_grad()
        ag.grad(h:sum(), {w})
        assert.is_nil(h.grad)
    end)

    it("autograd.grad with respect to non-leaf tensors", function()
        local w = ordo.tensor({1, 2, 3}, D):requires_grad()
        local h = w * 3
        local g = ag.grad((h * h):sum(), {h})
        assert.same({6, 12, 18}, g[1]:totable())
        assert.is_nil(w.grad)
        -- a non-leaf and a leaf below it, a given seed, the output itself as an input
        local u = w * w
        local y = u * 2
        local seed = ordo.tensor({1, 1, 2}, D)
        local gu, gw, gy = unpack(ag.grad(y, {u, w, y}, seed))
        assert.same({2, 2, 4}, gu:totable())
        assert.same({4, 8, 24}, gw:totable())
        assert.same({1, 1, 2}, gy:totable())
        assert.are_not.equal(seed, gy)
    end)

    it("autograd.grad: each result its own tensor, nil for unused inputs, the graph freed unless retained", function()
        local a, b = ordo.ones({2}, D):requires_grad(), ordo.ones({2}, D):requires_grad()
        local c = ordo.ones({2}, D):requires_grad()
        local seed = ordo.ones({2}, D)
        local r = ag.grad(a + b, {a, b, a, c}, seed)
        assert.same({1, 1}, r[1]:totable())
        assert.same({1, 1}, r[2]:totable())
        assert.same({1, 1}, r[3]:totable())
        assert.is_nil(r[4])
        assert.are_not.equal(r[1], r[2])
        assert.are_not.equal(r[1], r[3])
        assert.are_not.equal(seed, r[1])
        ordo.no_grad(function() r[1]:fill_(7) end)
        assert.same({1, 1}, r[2]:totable())
        assert.same({1, 1}, seed:totable())
        -- retain_graph, as backward
        local l = (a * a):sum()
        assert.same({2, 2}, ag.grad(l, {a}, {retain_graph = true})[1]:totable())
        assert.same({2, 2}, ag.grad(l, {a})[1]:totable())
        local ok, err = pcall(ag.grad, l, {a})
        assert.is_false(ok)
        assert.matches("freed by an earlier backward", err)
        assert.is_nil(a.grad)
    end)

    it("autograd.grad refuses inputs without a gradient, create_graph and bad arguments", function()
        local w = ordo.ones({2}, D):requires_grad()
        local l = (w * 2):sum()
        local cases = {
            {function() ag.grad(l, {ordo.ones({2}, D)}) end, "grad: input 1 %(shape 2%) does not require a gradient"},
            {function() ag.grad(l, {w}, {create_graph = true}) end, "grad: create_graph is not supported"},
            {function() ag.grad(l, {w}, nil, 5) end, "grad: options must be a table, got number"},
            {function() ag.grad(l, {w}, 5) end, "grad: grad must be a tensor, got number"},
            {function() ag.grad(l, w) end, "grad: inputs must be a list of tensors"},
            {function() ag.grad(l, {w}, {retain = true}) end, "grad: unknown option 'retain'"},
            {function() ag.grad(ordo.ones({1}), {w}) end, "grad: the tensor does not require a gradient"},
            -- Torch's list of outputs: no advice to call a method t:grad that does not exist
            {function() ag.grad({l, l}, {w}) end,
             "grad: the output must be a tensor, got table %(one output: for several, take the gradient of their sum"},
            {function() ag.grad(nil, {w}) end, "grad: the output must be a tensor, got nil$"},
        }
        for i, c in ipairs(cases) do
            local ok, err = pcall(c[1])
            assert.is_false(ok, "case " .. i)
            assert.matches(c[2], err)
        end
    end)

    it("backward validates its arguments, naming backward", function()
        local w = ordo.ones({2}, D):requires_grad()
        local cases = {
            {function() (w * 2):sum():backward(nil, 5) end, "backward: options must be a table, got number"},
            {function() (w * 2):sum():backward(5) end, "backward: grad must be a tensor, got number"},
            {function() (w * 2):sum():backward({retain_graph = 1}) end, "backward: retain_graph must be a boolean"},
            {function() (w * 2):sum():backward(nil, {retain = true}) end, "backward: unknown option 'retain'"},
            {function() (w * 2):sum():backward({create_graph = true}) end, "backward: create_graph is not supported"},
            -- a gradient written as a Lua list (read as options: "unknown option '1'")
            {function() (w * 2):backward({1, 1}) end, "backward: grad must be a tensor, got a table of values"},
            {function() ag.grad(w * 2, {w}, {1, 1}) end, "grad: grad must be a tensor, got a table of values"},
            {function() (w * 2):backward({1, 1}, {retain_graph = true}) end, "backward: grad must be a tensor, got table"},
        }
        for i, c in ipairs(cases) do
            local ok, err = pcall(c[1])
            assert.is_false(ok, "case " .. i)
            assert.matches(c[2], err)
        end
        assert.is_nil(w.grad)
        ;(w * 2):sum():backward(nil, {retain_graph = false})
        assert.same({2, 2}, w.grad:totable())
    end)

    it("a condition, mask or index changed in place before backward is reported", function()
        local U8, I64 = {dtype = "uint8"}, {dtype = "int64"}
        local function changed(name, make, change)
            local x = ordo.tensor({{1, 2, 3}, {4, 5, 6}}, D):requires_grad()
            local y, t = make(x)
            change(t)
            local ok, err = pcall(function() y:sum():backward() end)
            assert.is_false(ok, name)
            assert.matches("saved by " .. name .. " was changed in place", err)
            assert.is_nil(x.grad)
        end
        local function zero(t) t:zero_() end
        changed("where", function(x)
            local cond = ordo.tensor({1, 0, 1}, U8)
            return ordo.where(cond, x, 0.0), cond
        end, zero)
        changed("masked_fill", function(x)
            local mask = ordo.tensor({1, 0, 1}, U8)
            return x:masked_fill(mask, 0), mask
        end, zero)
        changed("gather", function(x)
            local idx = ordo.tensor({{3}, {2}}, I64)
            return x:gather(2, idx), idx
        end, function(t) t:fill_(1) end)
        changed("index_select", function(x)
            local idx = ordo.tensor({3, 2}, I64)
            return x:index_select(2, idx), idx
        end, function(t) t:fill_(1) end)
        changed("scatter_add", function(x)
            local idx = ordo.tensor({{3}, {2}}, I64)
            return ordo.zeros({2, 3}, D):scatter_add(2, idx, x:narrow(2, 1, 1)), idx
        end, function(t) t:fill_(1) end)
        changed("index_add", function(x)
            local idx = ordo.tensor({3, 2}, I64)
            return ordo.zeros({2, 3}, D):index_add(2, idx, x:narrow(2, 1, 2)), idx
        end, function(t) t:fill_(1) end)
        changed("sort", function(x)
            local v, idx = x:sort(2)
            return v, idx
        end, function(t) t:fill_(1) end)
        changed("max", function(x)
            local v, idx = x:max(2)
            return v, idx
        end, function(t) t:fill_(1) end)
        -- max along a dim reads only its indices, as Torch's: its input may change after
        local x = ordo.tensor({{1, 5, 3}, {4, 2, 6}}, D):requires_grad()
        local v = x:max(2)
        ordo.no_grad(function() x:mul_(-1) end)
        v:sum():backward()
        assert.same({{0, 1, 0}, {0, 0, 1}}, x.grad:totable())
    end)

    it("the in-place errors name ops that exist (t[i] = x fills in place)", function()
        local w = ordo.ones({2}, D):requires_grad()
        local ok, err = pcall(function() w[1] = 5 end)
        assert.is_false(ok)
        -- named as the assignment, as a copy into it is (it said fill_)
        assert.matches("t[i] = x: a tensor that requires a gradient cannot be changed in place", err, 1, true)
        assert.matches("ordo.full_like", err, 1, true)
        assert.is_nil(err:find("out-of-place fill", 1, true))
        ok, err = pcall(function() w[{{1}}] = true end)
        assert.matches("t[{...}] = x: a tensor that requires", err, 1, true)
        -- index_put_ and t[index] = x suggest index_put, not the scatter inside them
        local i1 = ordo.tensor({1}, "int64")
        for _, f in ipairs({function() w:index_put_({i1}, 2) end, function() w:index_put_({i1}, 2, true) end,
                            function() w[i1] = 2 end,
                            function() local z = ordo.zeros({2}, D); z:index_put_({i1}, w:narrow(1, 1, 1)) end}) do
            ok, err = pcall(f)
            assert.is_false(ok)
            assert.matches("use the out-of-place index_put", err, 1, true)
        end
        assert.same({1, 1}, w:totable())
        ok, err = pcall(function() ordo.zeros({2}, D):copy_(w) end)
        assert.is_false(ok)
        assert.is_nil(err:find("out-of-place copy", 1, true))
        ok, err = pcall(function() w:add_(1) end)
        assert.matches("use the out-of-place add", err, 1, true)
        -- every suggested out-of-place op exists
        for name in pairs(ordo.Tensor) do
            if type(name) == "string" and name:match("[^_]_$") and name ~= "requires_grad_" then
                local t = ordo.ones({2}, D):requires_grad()
                local ok2, e2 = pcall(ordo.Tensor[name], t)
                if not ok2 then
                    local base = e2:match("use the out%-of%-place ([%w_]+)")
                    if base then assert.is_not_nil(ordo.Tensor[base], name .. " suggests " .. base) end
                end
            end
        end
    end)

    it("backward through a larger graph (matmul, tanh, reused weight)", function()
        -- a big enough graph that the backward ops are still queued when it returns
        local w = ordo.randn({256, 256}):requires_grad()
        local x = ordo.randn({256, 256})
        local l = x:matmul(w):tanh():matmul(w):sum()
        l:backward()
        assert.is_true(ordo.is_tensor(w.grad))
        assert.equal(256, w.grad:size(1))
        assert.is_true(w.grad:abs():sum():item() > 0)
    end)
end)
