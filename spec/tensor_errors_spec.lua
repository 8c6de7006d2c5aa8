-- Errors: a bad call raises at the call, naming the op, the shapes and what
-- was expected; a kernel failing at run time raises at the wait that meets
-- it.  After any error the engine and the user's data stay usable.
local ordo = require "ordo"
local H = require "support.helpers"

local raises = H.raises

-- the engine still runs ops, and a tensor made before the error still holds its values
local keep = ordo.tensor({{1, 2}, {3, 4}})
local function usable()
    local r = (keep + 1):sum():item()
    assert.equals(14, r)
    assert.same({{1, 2}, {3, 4}}, keep:totable())
end

-- raises at the caller's line (the message starts with this spec's file name);
-- the closures avoid `return f()`: a tail call leaves no frame of the caller
local function raises_here(fn, ...)
    local err = raises(fn, ...)
    assert.truthy(err:find("tensor_errors_spec.lua:%d+:"), "error not positioned at the call: " .. err)
    usable()
    return err
end

describe("bad calls raise at the call", function()
    local a = ordo.zeros({2, 3})
    local b = ordo.zeros({4, 5})

    it("composite ops name themselves, not the op they are made of", function()
        local e = raises_here(function() local _ = a:lerp(b, 0.5) end, "lerp", "2x3", "4x5")
        assert.falsy(e:find("sub:"), e)
        raises_here(function() local _ = a:lerp(a, ordo.zeros({4})) end, "lerp", "2x3", "4")
        e = raises_here(function() local _ = a:expand_as(b) end, "expand_as", "2x3", "4x5")
        assert.falsy(e:find("expand:"), e)
        for _, c in ipairs({{"mv", ordo.zeros({5}), "5"}, {"mm", b, "4x5"}}) do
            e = raises_here(function() local _ = a[c[1]](a, c[2]) end, c[1], "2x3", c[3], "inner dimensions 3")
            assert.falsy(e:find("matmul:"), e)
        end
        raises_here(function() local _ = ordo.zeros({2, 2, 3}):bmm(ordo.zeros({2, 4, 5})) end, "bmm", "2x2x3",
                    "2x4x5", "inner dimensions 3 and 4")
    end)

    it("shape mismatches in elementwise ops name the op and both shapes", function()
        raises_here(function() local _ = a + b end, "add", "2x3", "4x5", "broadcast")
        raises_here(function() local _ = a - b end, "sub", "2x3", "4x5")
        raises_here(function() local _ = a * b end, "mul", "2x3", "4x5")
        raises_here(function() local _ = a / b end, "div", "2x3", "4x5")
        raises_here(function() local _ = a:pow(b) end, "pow", "2x3", "4x5")
        raises_here(function() local _ = a:eq(b) end, "eq", "2x3", "4x5")
        raises_here(function() local _ = a:maximum(b) end, "maximum", "2x3", "4x5")
        raises_here(function() a:add_(b) end, "add_", "4x5", "2x3")
        raises_here(function() a:add_(ordo.zeros({3, 3})) end, "add_", "3x3", "2x3")
        raises_here(function() a:copy_(b) end, "copy_", "4x5", "2x3")
        raises_here(function() local _ = ordo.where(ordo.zeros({2}, "uint8"), a, b) end, "where", "2x3", "4x5")
        raises_here(function() local _ = a:masked_fill(ordo.zeros({4}, "uint8"), 1) end, "masked_fill", "4", "2x3")
    end)

    it("operands that are not tensors or numbers", function()
        raises_here(function() local _ = a + "x" end, "add", "string")
        raises_here(function() local _ = a * {} end, "mul", "table")
        raises_here(function() a:add_(nil) end, "add_", "nil")
        raises_here(function() a:fill_("x") end, "fill_", "number")
        raises_here(function() local _ = ordo.Tensor.add(3, a) end, "add", "self")
        -- a value that prints over several lines is named by its type: a module's whole
        -- tree went into the message ("view: size Sequential\n  (1): Linear(2 -> 2)...")
        local seq = ordo.nn.Sequential(ordo.nn.Linear(2, 2), ordo.nn.ReLU())
        local e = raises_here(function() a:view(seq) end, "view: size nn.Sequential at position 1 is invalid")
        assert.falsy(tostring(e):find("Linear", 1, true), e)
        raises_here(function() a:view(ordo.cpu(0)) end, "view: size cpu(0) at position 1") -- one line: as it prints
    end)

    it("dtypes an op does not accept", function()
        local u = ordo.zeros({2}, "uint8")
        local i = ordo.zeros({2}, "int32")
        raises_here(function() local _ = u:neg() end, "neg", "uint8", "float32")
        raises_here(function() i:exp_() end, "exp_", "int32", "float32")
        raises_here(function() i:add_(0.5) end, "add_", "float32", "int32")
        raises_here(function() i:add_(ordo.ones({2})) end, "add_", "float32", "int32")
        raises_here(function() i:div_(2) end, "div_", "float32", "int32")
        raises_here(function() i:uniform_() end, "uniform_", "int32")
        raises_here(function() local _ = ordo.rand({2}, {dtype = "int64"}) end, "rand", "int64")
        raises_here(function() i:div_(2.5, "floor") end, "div_", "float32", "int32")
        raises_here(function() local _ = ordo.where(ordo.zeros({2}), a, a) end, "where", "uint8", "float32")
        raises_here(function() local _ = a:masked_fill(ordo.zeros({3}), 1) end, "masked_fill", "uint8", "float32")
        raises_here(function() local _ = a:index_select(1, ordo.zeros({1})) end, "index_select", "float32")
        -- a uint8 index is a mask given by mistake: its 1s picked slice 1, silently
        local mask = ordo.tensor({1, 1}, "uint8")
        raises_here(function() local _ = a:index_select(1, mask) end, "index_select", "got uint8", "a mask?")
        raises_here(function() local _ = a:gather(1, ordo.ones({1, 3}, "uint8")) end, "gather", "got uint8")
        raises_here(function() local _ = a:scatter(1, ordo.ones({1, 3}, "uint8"), 0) end, "scatter:", "got uint8")
        raises_here(function() local _ = a:index_add(1, mask, ordo.ones({2, 3})) end, "index_add", "got uint8")
        assert.equals(2, a:index_select(1, ordo.tensor({2, 1}, "int32")):size(1)) -- int32 stays accepted
        raises_here(function() local _ = ordo.zeros({2}, {dtype = "complex"}) end, "zeros", "complex", "float32")
        raises_here(function() local _ = a:to("float16") end, "to", "float16")
    end)

    it("bad dims", function()
        raises_here(function() local _ = a:sum(3) end, "sum", "dim 3", "2x3", "1..2")
        raises_here(function() local _ = a:mean(-3) end, "mean", "dim -3")
        raises_here(function() local _ = a:max(0) end, "max", "dim 0")
        raises_here(function() local _ = a:argmax(5) end, "argmax", "dim 5")
        raises_here(function() local _ = a:transpose(1, 3) end, "transpose", "dim 3")
        raises_here(function() local _ = a:softmax(4) end, "softmax", "dim 4")
        raises_here(function() local _ = a:size(3) end, "size", "dim 3")
        raises_here(function() local _ = a:narrow(1, 2, 2) end, "narrow", "2x3")
        raises_here(function() local _ = a:narrow(3, 1, 1) end, "narrow", "dim 3")
        raises_here(function() local _ = a:select(2, 4) end, "select", "index 4")
        raises_here(function() local _ = a:unsqueeze(4) end, "unsqueeze", "dim 4")
        raises_here(function() local _ = a:squeeze(3) end, "squeeze", "dim 3")
        raises_here(function() local _ = a:permute(1, 1) end, "permute", "permutation")
        raises_here(function() local _ = a:permute(1) end, "permute", "1 dims")
        raises_here(function() local _ = a:sum(1.5) end, "sum", "integer")
        raises_here(function() local _ = ordo.cat({a, a}, 3) end, "cat", "dim 3")
        raises_here(function() local _ = ordo.tensor(1):sum(1) end, "sum", "no dims")
    end)

    it("bad shapes for creation, views and matmul", function()
        raises_here(function() local _ = ordo.zeros({2, -1}) end, "zeros", "-1", "position 2")
        raises_here(function() local _ = ordo.ones(1.5) end, "ones", "1.5")
        raises_here(function() local _ = ordo.empty("x") end, "empty", "shape")
        raises_here(function() local _ = ordo.zeros({1, 1, 1, 1, 1, 1, 1, 1, 1}) end, "zeros", "9 dims")
        raises_here(function() local _ = ordo.full(2, 1) end, "full", "shape")
        raises_here(function() local _ = ordo.tensor({{1, 2}, {3}}) end, "tensor", "ragged", "[2]")
        raises_here(function() local _ = ordo.tensor({1, "x"}) end, "tensor", "[2]", "string")
        raises_here(function() local _ = ordo.tensor("x") end, "tensor", "string")
        raises_here(function() local _ = a:view(4, 2) end, "view", "4x2", "6 elements", "2x3")
        raises_here(function() local _ = a:reshape(-1, -1) end, "reshape", "-1")
        raises_here(function() local _ = a:reshape(5, -1) end, "reshape", "6 elements")
        raises_here(function() local _ = a:expand(4, 3) end, "expand", "2x3", "4x3")
        raises_here(function() local _ = a:matmul(b) end, "matmul", "2x3", "4x5", "3 and 4")
        raises_here(function() local _ = ordo.zeros({2, 2, 3}):matmul(ordo.zeros({3, 3, 1})) end, "matmul", "batch")
        raises_here(function() local _ = ordo.matmul(ordo.tensor(1), a) end, "matmul", "at least 1 dim", "scalar")
        raises_here(function() local _ = ordo.cat({a, b}) end, "cat", "2x3", "4x5")
        raises_here(function() local _ = ordo.cat({a, ordo.zeros({2})}) end, "cat", "dims")
        raises_here(function() local _ = ordo.cat({}) end, "cat", "non-empty")
        raises_here(function() local _ = ordo.stack({a, b}) end, "stack", "4x5", "2x3")
        raises_here(function() local _ = a:gather(1, ordo.zeros({2}, "int64")) end, "gather", "dims")
        raises_here(function() local _ = a:item() end, "item", "one element", "2x3")
        raises_here(function() local _ = ordo.arange(0, 1, 0) end, "arange", "step")
        raises_here(function() local _ = ordo.zeros({2}):bernoulli_(2) end, "bernoulli_", "[0, 1]")
        -- named as called (ordo.bernoulli's error named bernoulli_), and a wrong p by its type
        local e = raises_here(function() local _ = ordo.bernoulli({2}, 1.5) end, "bernoulli: expected", "1.5")
        assert.falsy(e:find("bernoulli_", 1, true), e)
        raises_here(function() local _ = ordo.zeros({2}):bernoulli_({0.5, 0.5}) end, "bernoulli_", "got table")
        -- a tensor of probabilities out of range is refused (at the wait) without printing it whole
        local z2 = ordo.zeros({2}):bernoulli_(ordo.tensor({0.5, 5}))
        e = raises_here(function() local _ = z2:totable() end, "bernoulli_", "[0, 1]")
        assert.falsy(e:find("FloatTensor", 1, true), e)
        raises_here(function() local _ = ordo.zeros({2}):normal_(0, -1) end, "normal_", "std")
        raises_here(function() local _ = ordo.manual_seed("x") end, "manual_seed", "integer")
        raises_here(function() local _ = ordo.zeros({2}, {dtyp = "int32"}) end, "zeros", "dtyp")
    end)

    it("unknown devices", function()
        raises_here(function() local _ = ordo.zeros({2}, {device = "tpu"}) end, "zeros", "tpu", "device")
        raises_here(function() local _ = ordo.cpu(-1) end, "cpu", "0..63")
        raises_here(function() local _ = a:to("moon") end, "to", "moon")
        -- a device string is exactly "kind", "kind:N" or "kind(N)"
        for _, bad in ipairs({"cpu1", "cpu(1", "cpu1)", "cpu:", "cpu:1)"}) do
            raises_here(function() local _ = a:to(bad) end, "to", "'" .. bad .. "'")
            raises_here(function() local _ = ordo.zeros({2}, {device = bad}) end, "zeros", bad)
        end
        assert.equals(ordo.cpu(1), a:to("cpu:1"):device())
        assert.equals(ordo.cpu(1), a:to("cpu(1)"):device())
        assert.equals(ordo.cpu(0), ordo.zeros({2}, {device = "cpu"}):device())
        -- to takes one dtype and one device, not the last of two
        raises_here(function() local _ = a:to("float64", "int32") end, "to: two dtypes given (float64 and int32)")
        raises_here(function() local _ = a:to(ordo.cpu(0), ordo.cpu(1)) end, "to: two devices given (cpu(0) and cpu(1))")
        raises_here(function() local _ = a:to(nil, "int32") end, "to: the first argument is nil")
        raises_here(function() local _ = a:to(b, "int32") end, "to: t:to(u) takes nothing after the tensor")
        local c = a:to(ordo.cpu(1), "int32")
        assert.same({ordo.cpu(1), "int32"}, {c:device(), c:dtype()})
        c = a:to("int64", ordo.cpu(1))
        assert.same({ordo.cpu(1), "int64"}, {c:device(), c:dtype()})
        if not ordo.cuda.is_available() then
            raises_here(function() local _ = ordo.gpu(0) end, "gpu(0)", "no CUDA device available")
            raises_here(function() local _ = ordo.randn({2}, {device = "gpu:0"}) end, "no CUDA device available")
        end
    end)

    it("a value that does not fit an integer tensor's dtype, at the call instead of at a later wait", function()
        local u = ordo.tensor({1, 2}, "uint8")
        local i = ordo.tensor({1, 2}, "int32")
        raises_here(function() u:fill_(300) end, "fill_", "300", "uint8")
        raises_here(function() u:fill_(-1) end, "fill_", "uint8")
        raises_here(function() i:fill_(0 / 0) end, "fill_", "nan", "int32")
        raises_here(function() local _ = ordo.full({2}, 1e10, {dtype = "int32"}) end, "full", "int32")
        raises_here(function() local _ = ordo.full_like(u, 256) end, "full_like", "uint8")
        raises_here(function() local _ = i:masked_fill(ordo.tensor({1, 0}, "uint8"), 1e10) end, "masked_fill", "int32")
        raises_here(function() local _ = u:maximum(300) end, "maximum", "uint8")
        raises_here(function() local _ = u:div(-1, "trunc") end, "div", "-1", "uint8")
        raises_here(function() local _ = i:add(1e30) end, "add", "1e+30", "int32")
        raises_here(function() i:mul_(-1e19) end, "mul_", "int32")
        -- an integer scalar operand must fit the tensor's dtype, as Torch
        -- (it wrapped: uint8 250 + 300 gave 38)
        raises_here(function() local _ = ordo.tensor({250}, "uint8") + 300 end, "add", "300", "uint8")
        raises_here(function() u:add_(-1) end, "add_", "-1", "uint8")
        raises_here(function() local _ = i * 3e9 end, "mul", "3000000000", "int32")
        -- the arithmetic itself still wraps, as Torch's
        assert.same({255, 0}, u:add(254):totable())
        assert.same({1, 2}, u:totable()) -- untouched by the refused calls
        assert.same({1, 0}, i:lt(2):totable()) -- comparisons take any number
        assert.same({0, 0}, i:eq(1e30):totable())
    end)

    it("arange, linspace and logspace values that do not fit an integer dtype, at the call", function()
        -- arange raised only at a later wait; linspace and logspace clamped (300 became 255 in uint8)
        raises_here(function() local _ = ordo.arange(-3, 3, 1, "uint8") end, "arange", "-3", "uint8")
        raises_here(function() local _ = ordo.arange(250, 260, 1, "uint8") end, "arange", "259", "uint8")
        raises_here(function() local _ = ordo.arange(0, 2 ^ 31 + 2, 2 ^ 30, "int32") end, "arange", "2147483648")
        raises_here(function() local _ = ordo.linspace(0, 300, 4, "uint8") end, "linspace", "300", "uint8")
        raises_here(function() local _ = ordo.linspace(-1, 1, 3, "uint8") end, "linspace", "-1", "uint8")
        raises_here(function() local _ = ordo.linspace(0, 1e10, 3, "int32") end, "linspace", "int32")
        raises_here(function() local _ = ordo.logspace(0, 10, 3, {dtype = "int32"}) end, "logspace", "int32")
        raises_here(function() local _ = ordo.logspace(0, 1, 2.5) end, "logspace", "count", "2.5")
        -- what fits still works, ends included
        assert.same({250, 251, 255}, {ordo.arange(250, 256, 1, "uint8")[1], ordo.arange(250, 256, 1, "uint8")[2],
                                      ordo.arange(250, 256, 1, "uint8")[-1]})
        assert.same({0, 85, 170, 255}, ordo.linspace(0, 255, 4, "uint8"):totable())
        assert.same({1, 10, 100}, ordo.logspace(0, 2, 3, {dtype = "int32"}):totable())
        assert.same({0}, ordo.linspace(0, 300, 1, "uint8"):totable()) -- one value: start alone
        assert.same({0}, ordo.arange(0, 1, 1, "uint8"):totable())
    end)

    it("engine and profiler calls", function()
        raises_here(function() local _ = ordo.engine.new({kind = "fast"}) end, "engine.new", "kind", "naive")
        raises_here(function() local _ = ordo.engine.new({cpu_workers = -1}) end, "engine.new", "cpu_workers")
        raises_here(function() local _ = ordo.engine.new({workers = 2}) end, "engine.new", "workers")
        raises_here(function() local _ = ordo.engine.new({max_inflight = 2^40}) end, "engine.new", "max_inflight")
        raises_here(function() local _ = ordo.engine.new({bulk_op_max_ns = 0.5}) end, "engine.new", "bulk_op_max_ns")
        raises_here(function() local _ = ordo.engine.new({push_inline_after = 1/0}) end, "engine.new",
                    "push_inline_after")
        raises_here(function() ordo.engine.push("no_such_kernel", {a}, {a}) end, "no_such_kernel", "cpu")
        raises_here(function() ordo.engine.push("add", {a, "x"}, {a}) end, "push", "inputs[2]")
        raises_here(function() ordo.engine.wait_for_var(42) end, "wait_for_var", "number")
        raises_here(function() ordo.profiler.dump(nil) end, "profiler.dump", "path")
        raises_here(function() ordo.profiler.dump("/nonexistent/dir/trace.json") end, "profiler.dump")
        local e = ordo.engine.new({kind = "naive"})
        local t = ordo.zeros({2}, {engine = e})
        raises_here(function() local _ = t + ordo.zeros({2}) end, "add", "engines")
        e:close()
        raises_here(function() local _ = ordo.zeros({2}, {engine = e}) end, "closed")
        assert.same({0, 0}, t:totable()) -- tensors outlive their engine's handle
    end)
end)

describe("every public function checks its arguments", function()
    local a = ordo.zeros({2, 3})
    local cases = {
        {function() local _ = ordo.empty_like(42) end, "empty_like", "tensor"},
        {function() local _ = ordo.zeros_like(a, 5) end, "options"},
        {function() local _ = ordo.full_like(a, "x") end, "full_like", "number"},
        {function() local _ = ordo.result_type(1, 2) end, "result_type", "tensor"},
        {function() local _ = ordo.arange("x") end, "arange", "string"},
        {function() local _ = ordo.bernoulli("x", 0.5) end, "bernoulli", "shape"},
        {function() local _ = ordo.rand({2}, {dtype = "uint8"}) end, "rand", "uint8"},
        {function() local _ = ordo.where(a:gt(0), "x", a) end, "where", "x must be"},
        {function() local _ = ordo.stack({}) end, "stack", "non-empty"},
        {function() local _ = ordo.cat({a, 3}) end, "cat", "element 2"},
        {function() local _ = a:expand_as(3) end, "expand_as", "tensor"},
        {function() local _ = a:clamp() end, "clamp", "min and max"},
        {function() local _ = ordo.tensor(1):softmax(2) end, "softmax", "0-dim"},
        {function() local _ = a:index_select(1, ordo.zeros({2, 2}, "int64")) end, "index_select", "1-D"},
        {function() local _ = a:gather(2, ordo.ones({3, 3}, "int64")) end, "gather", "exceeds"},
        {function() local _ = a:view("x") end, "view", "position 1"},
        {function() local _ = a:select(1, 1.5) end, "select", "integer"},
        {function() local _ = a:narrow(1, 1, "x") end, "narrow", "integers"},
        {function() local _ = a:to() end, "to", "dtype or a device"},
        {function() a:copy_("x") end, "copy_", "tensor"},
        {function() local _ = a:masked_fill(a:gt(0), "v") end, "masked_fill", "number"},
        {function() a:uniform_(2, 1) end, "uniform_", "low <= high"},
        {function() local _ = a:div(a, "round") end, "div", "rounding mode", "floor"},
        {function() local _ = a:add(a, "x") end, "add", "alpha"},
        {function() local _ = ordo.zeros({2}, "int32"):div(0, "trunc") end, "div", "division by zero"},
        {function() local _ = ordo.Tensor.sum(nil) end, "sum", "self"},
        {function() ordo.profiler.start(42) end, "profiler.start", "engine"},
        {function() local _ = ordo.engine.new("x") end, "engine.new", "table"},
        {function() ordo.engine.push(1, {a}, {a}) end, "push", "kernel name"},
        {function() ordo.engine.push("add", {}, {}) end, "push", "at least one tensor"},
        {function() ordo.engine.push("fill", {}, {a}, {"x"}) end, "push", "scalars[1]"},
        {function() ordo.engine.default():close() end, "default engine"},
        -- autograd's methods on something that is not a tensor (detach used to reach C with NULL)
        {function() local _ = ordo.detach({}) end, "detach", "self"},
        {function() local _ = ordo.requires_grad(3) end, "requires_grad", "self"},
        {function() local _ = ordo.is_leaf(nil) end, "is_leaf", "self"},
        {function() local _ = ordo.grad_fn("x") end, "grad_fn", "self"},
        {function() local _ = ordo.needs_grad(true) end, "needs_grad", "self"},
        {function() local _ = ordo.retain_grad({}) end, "retain_grad", "self"},
        {function() ordo.backward(1) end, "backward", "self"},
        {function() local _ = ordo.autograd.grad(a, {a, 3}) end, "grad", "input 2"},
        {function() local _ = ordo.autograd.gradcheck(function(x) return x end, {a}, {tol = 1}) end, "gradcheck", "tol"},
        {function() local _ = ordo.autograd.sum_to(3, {1}) end, "sum_to", "tensor"},
        -- add/sub's alpha form with an operand that is not a tensor or a number
        {function() local _ = a:add(true, 2) end, "add", "other", "boolean"},
        {function() a:sub_({}, 2) end, "sub_", "other", "table"},
        -- random fills: NaN and infinite parameters
        {function() a:uniform_(0, math.huge) end, "uniform_", "finite"},
        {function() a:normal_(0 / 0, 1) end, "normal_", "finite"},
        {function() a:normal_(0, math.huge) end, "normal_", "std"},
        {function() a:bernoulli_(0 / 0) end, "bernoulli_", "[0, 1]"},
        -- sizes of inf are refused like fractions, never looped over
        {function() local _ = ordo.nn.Linear(math.huge, 2) end, "Linear", "positive integer", "inf"},
        {function() local _ = ordo.nn.Conv2d(3, 2, math.huge) end, "Conv2d", "inf"},
        {function() local _ = ordo.nn.functional.adaptive_avg_pool2d(ordo.zeros({1, 1, 4, 4}), math.huge) end,
         "adaptive_avg_pool2d", "inf"},
        {function() local _ = ordo.eye(2 ^ 31) end, "eye", "too large"},
        {function() local _ = a:flatten(2, 1) end, "flatten", "start_dim 2", "end_dim 1"},
        {function() local _ = a:flatten(3) end, "flatten", "dim 3"},
        -- a view whose element count would overflow int64
        {function() local _ = a:expand(1e18, 2, 3) end, "expand", "too many elements"},
        {function() local _ = a:reshape(2 ^ 40, 2 ^ 40) end, "reshape", "invalid for a tensor of 6 elements"},
        {function() local _ = ordo.arange(0, 1, 1e-320) end, "arange", "too many"},
        -- numbers written into integer tensors must fit (truncated toward zero, never wrapped)
        {function() local _ = ordo.tensor({1, 300}, "uint8") end, "tensor", "300", "uint8"},
        {function() local _ = ordo.tensor({-1}, "uint8") end, "tensor", "-1", "uint8"},
        {function() local _ = ordo.tensor({{1}, {0 / 0}}, "int32") end, "tensor", "nan", "int32"},
        {function() local _ = ordo.tensor({2 ^ 63}, "int64") end, "tensor", "int64"},
        {function() local _ = a:index_select(2, {math.huge}) end, "index_select", "inf", "integer"},
        {function() local _ = a:index_select(1, {1.5}) end, "index_select", "1.5", "not an integer"},
        {function() ordo.zeros({2}, "int32"):copy_({1, 2 ^ 31}) end, "copy_", "int32"},
        {function() local _ = a:reshape(6, 1):repeat_interleave(1e18, 2) end, "expand", "too many elements"},
    }
    it("and names the function in the error", function()
        for i, case in ipairs(cases) do
            local ok, err = pcall(raises_here, case[1], unpack(case, 2))
            assert(ok, "case " .. i .. ": " .. tostring(err))
        end
    end)
end)

describe("run-time failures raise at the wait that meets them", function()
    local function failing()
        local x = ordo.tensor({1, 2, 3}, {dtype = "int32"})
        return x:div(ordo.tensor({1, 0, 1}, {dtype = "int32"}), "trunc")
    end

    it("at item, totable, print and wait_for_var, once, with the kernel's message", function()
        for _, read in ipairs({
            function(t) local v = t:sum():item() return v end,
            function(t) local v = t:totable() return v end,
            function(t) local v = tostring(t) return v end,
            function(t) ordo.engine.wait_for_var(t) end,
            function(t) t:wait() end,
        }) do
            local r = failing() -- pushed, returns at once: no error yet
            local err = raises(function() local v = read(r) return v end, "div", "zero")
            assert.truthy(err:find("tensor_errors_spec.lua:%d+:"), err)
            -- reported once: the next wait on it passes, and the tensor is writable
            r:fill_(7)
            assert.same({7, 7, 7}, r:totable())
            usable()
        end
    end)

    it("ops depending on a failed op are skipped and pass the failure on", function()
        local r = failing()
        local s = (r + 1):mul(2)
        raises(function() return s:totable() end, "div", "zero")
        assert.same({2, 2, 2}, (r:fill_(0) + 1):mul(2):totable())
        usable()
    end)

    it("a tensor whose value was never computed raises at every read, and so does what is built on it", function()
        -- g's op failed: g holds no data.  It used to raise once and then read as whatever its memory held,
        -- and h (pushed before the report) and k (after it) read as garbage with no error at all.
        local g = ordo.zeros({3}):gather(1, ordo.tensor({1, 7}, "int64"))
        local h = g + 1
        local first = raises(function() return g:totable() end, "gather", "index 7 out of range")
        assert.falsy(first:find("reported before", 1, true), first)
        for _, read in ipairs({
            function() return g:totable() end,
            function() return tostring(g) end,
            function() g:wait() end,
            function() return h:sum():item() end,
            function() return (g * 2):totable() end, -- pushed after the report: skipped, passes it on
            function() return g:to("float64"):totable() end,
        }) do
            raises(read, "gather", "index 7 out of range", "reported before: its value was never computed")
        end
        -- a write makes it again
        g:fill_(5)
        assert.same({5, 5}, g:totable())
        assert.same({6, 6}, (g + 1):totable())
        -- an in-place op that failed left its tensor as it was: readable after the report, whether an op
        -- made it, or the host wrote it (from a table, a file)
        local path = os.tmpname()
        ordo.save({saved = ordo.ones({3})}, path)
        for _, w in ipairs({ordo.ones({3}), ordo.tensor({1, 1, 1}), ordo.load(path).saved}) do
            w:index_add_(1, ordo.tensor({9}, "int64"), ordo.ones({1}))
            raises(function() return w:totable() end, "index_add", "index 9")
            assert.same({1, 1, 1}, w:totable())
            assert.equals(6, (w * 2):sum():item())
        end
        os.remove(path)
        usable()
    end)

    it("wait_for_all reports a failure nobody waited for", function()
        local _ = failing()
        raises(function() ordo.engine.wait_for_all() end, "div", "zero")
        ordo.engine.wait_for_all()
        usable()
    end)

    it("a chain of 1000 ops whose 10th fails: the other 990 are skipped, one report, then work goes on", function()
        for _, kind in ipairs({"perdevice", "pooled", "naive"}) do
            local e = ordo.engine.new({kind = kind})
            local t = ordo.ones({3}, {engine = e})
            for _ = 1, 9 do t = t + 1 end
            ordo.profiler.start(e)
            t = t + ordo.arange(3, {engine = e}):gather(1, ordo.tensor({1, 9, 2}, {dtype = "int64", engine = e}))
            for _ = 11, 1000 do t = t * 1 end
            local err = raises(function() return t:sum():item() end, "gather", "index 9 out of range")
            assert.is_nil(err:find("gather.*gather"), err)
            ordo.profiler.stop(e)
            local s = ordo.profiler.summary(e)
            -- the gather failed; the add of its result, the 990 after it and the sum were skipped
            assert.truthy(s:find("(failed: 1, skipped for a failed input: 992;", 1, true), kind .. "\n" .. s)
            e:wait_for_all() -- reported once
            assert.same({1, 2, 3}, (ordo.ones({3}, {engine = e}) + ordo.arange(3, {engine = e})):totable())
            e:close()
        end
    end)

    it("failing ops in a loop, read or never read, leave one report each and the engine working", function()
        local x = ordo.arange(5)
        local bad = ordo.tensor({7}, {dtype = "int64"})
        for _ = 1, 2000 do
            local r = x:gather(1, bad) -- read: raised there
            raises(function() return r:item() end, "gather", "index 7")
        end
        ordo.engine.wait_for_all()
        for _ = 1, 20000 do local _ = x:gather(1, bad) end -- never read: counted, the oldest one whole
        local err = raises(function() ordo.engine.wait_for_all() end, "gather", "index 7")
        assert.truthy(err:find("(and 19999 more failures)", 1, true), err)
        ordo.engine.wait_for_all()
        assert.equals(10, x:sum():item())
    end)

    it("the user's other data is untouched by a failure", function()
        local good = ordo.arange(5)
        local r = failing()
        good:add_(1)
        assert.same({1, 2, 3, 4, 5}, good:totable())
        raises(function() return r:item() end, "item")
        raises(function() return r:totable() end, "div")
        usable()
    end)
end)

-- Found by a tester: calls that went through with a wrong meaning, or
-- raised later or under another name.
describe("bad calls that used to pass", function()
    it("t[k] with a key that is not an index raises instead of answering nil", function()
        local x = ordo.arange(4)
        raises_here(function() local _ = x[true] end, "t[i]", "boolean")
        raises_here(function() local _ = x[ordo.tensor({1})] end, "t[i]", "uint8 mask", "int64", "float32")
        raises_here(function() x[true] = 3 end, "t[i] = x", "boolean")
        assert.is_nil(x.grad) -- a field not set is still nil
        assert.equals(1, x[2])
    end)

    it("a table with holes or named keys is not taken as a shorter list", function()
        raises_here(function() local _ = ordo.tensor({1, nil, 3}) end, "tensor", "not a list")
        raises_here(function() local _ = ordo.tensor({a = 1}) end, "tensor", 'key "a"')
        raises_here(function() local _ = ordo.tensor({{1, 2}, {3, 4, x = 1}}) end, "tensor", "element [2]", 'key "x"')
        raises_here(function() local _ = ordo.arange(12):view(3, 4):index_select(1, {1.5}) end, "index_select",
                    "1.5", "not an integer")
        -- cat and stack dropped the tensors past a hole, or under a name
        local z = ordo.zeros({2})
        raises_here(function() local _ = ordo.cat({[1] = z, [3] = z}) end, "cat", "element 2 is nil")
        raises_here(function() local _ = ordo.cat({z, nil, z}) end, "cat", "element 2 is nil")
        raises_here(function() local _ = ordo.stack({z, nil, nil, z}) end, "stack", "element 2 is nil")
        raises_here(function() local _ = ordo.stack({z, nil, z}) end, "stack", "element 2 is nil")
        assert.same({0, 0, 0, 0}, ordo.cat({z, z}):totable())
    end)

    it("a nil size or dim in a shape or a list of dims is refused, not taken as the end of the list", function()
        -- these made a tensor of another shape, or used fewer dims, silently
        local hidden -- nil: a typo'd variable
        local x = ordo.arange(6):view(2, 3)
        raises_here(function() local _ = ordo.zeros({2, hidden, 3}) end, "zeros", "entry 2 of the shape is nil")
        raises_here(function() local _ = ordo.zeros(2, hidden, 3) end, "zeros", "size 2 is nil")
        raises_here(function() local _ = ordo.rand({2, hidden, 3}) end, "rand", "entry 2")
        raises_here(function() local _ = ordo.randn(2, hidden, 3) end, "randn", "size 2 is nil")
        raises_here(function() local _ = ordo.full({2, hidden, 3}, 1) end, "full", "entry 2")
        raises_here(function() local _ = ordo.randint(0, 3, {2, hidden, 3}) end, "randint", "entry 2")
        raises_here(function() local _ = ordo.zeros({2, hidden, hidden, 3}) end, "zeros", "nil at position 2")
        raises_here(function() local _ = x:tile({2, x = 3}) end, "tile", "key x") -- (the strict lists: not hot paths)
        raises_here(function() local _ = ordo.arange(6):reshape({6, hidden, 1}) end, "reshape", "entry 2")
        raises_here(function() local _ = ordo.arange(6):view(2, hidden, 3) end, "view", "size nil at position 2")
        raises_here(function() local _ = x:expand({2, hidden, 3}) end, "expand", "entry 2")
        raises_here(function() local _ = x:permute({2, hidden, 1}) end, "permute", "entry 2")
        raises_here(function() local _ = x:permute(2, hidden, 1) end, "permute", "3 dims")
        raises_here(function() local _ = x:sum({1, hidden, 2}) end, "sum", "entry 2 of the list of dims is nil")
        raises_here(function() local _ = x:flip({1, hidden, 2}) end, "flip", "entry 2")
        raises_here(function() local _ = x:tile({2, hidden, 2}) end, "tile", "entry 2")
        raises_here(function() local _ = x:roll({1, hidden, 1}, {1, hidden, 2}) end, "roll", "entry 2")
        raises_here(function() local _ = ordo.arange(6):split({2, hidden, 4}) end, "split", "entry 2")
        local a, b = ordo.arange(2), ordo.arange(3)
        raises_here(function() local _ = ordo.meshgrid(a, hidden, b) end, "meshgrid", "argument 2 is nil")
        raises_here(function() local _ = ordo.meshgrid({a, hidden, b}) end, "meshgrid", "entry 2")
        raises_here(function() local _ = ordo.einsum("i,j->ij", a, hidden, b) end, "einsum", "operand 2 is nil")
        raises_here(function() local _ = ordo.einsum("i,j->ij", {a, hidden, b}) end, "einsum", "entry 2")
        -- trailing nils (an options argument left out) are fine
        assert.same({2, 3}, ordo.zeros(2, 3, nil):shape())
        assert.same({2, 3}, (ordo.meshgrid(a, b, nil)):shape())
        assert.same({2, 3}, ordo.einsum("i,j->ij", a, b, nil):shape())
        assert.same({3, 2}, x:permute(2, 1):shape())
        -- a shape given as a table (or a tensor's) and then more: the rest was dropped unseen
        raises_here(function() local _ = x:expand({2, 3}, 4) end, "expand", "one shape", "a table and then 4")
        raises_here(function() local _ = x:view({3, 2}, 1) end, "view", "one shape", "a table and then 1")
        raises_here(function() local _ = x:reshape(x, 6) end, "reshape", "one shape", "a tensor and then 6")
        assert.same({3, 2}, x:view({3, 2}, nil):shape())
    end)

    it("sizes and indices past int64 are named as written", function()
        raises_here(function() local _ = ordo.ones({3}):select(1, 2 ^ 63) end, "select", "9.2233720368548e+18")
        raises_here(function() local _ = ordo.arange(6):view(2 ^ 63) end, "view", "too large")
        raises_here(function() local _ = ordo.arange(6):narrow(1, -2 ^ 63, 1) end, "narrow", "start")
        raises_here(function() local _ = ordo.zeros(2 ^ 63) end, "zeros", "too large")
        -- a dim or a t[{...}] index past int64 was printed with %d, as -9223372036854775808
        local x = ordo.arange(6):view(2, 3)
        for _, f in ipairs({function() local _ = x:sum(2 ^ 63) end, function() local _ = x[{2 ^ 63}] end,
                            function() local _ = x:unsqueeze(2 ^ 63) end, function() local _ = ordo.tensor(5):sum(2 ^ 63) end,
                            function() local _ = ordo.arange(6):split({2 ^ 63, 1}) end}) do
            local e = raises_here(f, "9.2233720368548e+18")
            assert.falsy(e:find("-9223372036854775808", 1, true), e)
        end
    end)

    it("index_add_, scatter_add_ and scatter check shapes at the call", function()
        local z = ordo.zeros({3, 2})
        raises_here(function() z:index_add_(1, ordo.tensor({1}, "int64"), ordo.ones({1, 5})) end, "index_add_",
                    "shape mismatch", "1x5")
        raises_here(function() z:scatter_add_(1, ordo.tensor({{1, 1, 1, 1}}, "int64"), ordo.ones({1, 2})) end,
                    "scatter_add_", "shape mismatch")
        raises_here(function() local _ = ordo.zeros({3}):scatter(1, ordo.tensor({1, 2, 3}, "int64"), ordo.tensor({7})) end,
                    "scatter", "shape mismatch")
        assert.same({{0, 0}, {0, 0}, {0, 0}}, z:totable())
    end)

    -- an index out of range found by the kernel: the gradient's failure
    -- names the op the user called ("<op> backward"), not its adjoint alone
    it("a bad index's gradient fails naming the op it is the gradient of", function()
        local bad = ordo.tensor({1, 7}, "int64")
        local w = ordo.randn({5, 3}):requires_grad()
        w:index_select(1, bad):sum():backward()
        raises(function() return w.grad:totable() end, "index_select backward: index_add: index 7 out of range")
        raises(ordo.engine.wait_for_all, "index_select: index 7 out of range")
        local w2 = ordo.randn({5, 3}):requires_grad()
        w2:gather(1, ordo.tensor({{1, 7, 1}}, "int64")):sum():backward()
        raises(function() return w2.grad:totable() end, "gather backward: scatter_add: index 7 out of range")
        raises(ordo.engine.wait_for_all, "gather: index 7 out of range")
        local e = ordo.nn.Embedding(4, 2)
        e(ordo.tensor({1, 9}, "int64")):sum():backward()
        raises(function() return e.weight.grad:totable() end, "Embedding backward: index_add: index 9 out of range")
        raises(ordo.engine.wait_for_all, "Embedding: index_select: index 9 out of range")
        usable()
    end)

    it("*_like take just a dtype or a device, as the constructors do", function()
        local x = ordo.ones({2})
        assert.equals("float64", ordo.zeros_like(x, "float64"):dtype())
        assert.same({1, 1}, ordo.ones_like(x, ordo.cpu(0)):totable())
        assert.same({7, 7}, ordo.full_like(x, 7, "int32"):totable())
        assert.equals("int32", ordo.empty_like(x, "int32"):dtype())
        raises_here(function() local _ = ordo.zeros_like(x, "float65") end, "zeros_like", "float65")
        raises_here(function() local _ = ordo.ones_like(x, 3) end, "ones_like", "number")
    end)

    it("a nil operand is named as nil, not as the tensor beside it", function()
        local x = ordo.ones({2})
        for _, c in ipairs({{"add", function() local _ = x + nil end}, {"add", function() local _ = x:add(nil) end},
                            {"mul", function() local _ = x * nil end}, {"eq", function() local _ = x:eq(nil) end}}) do
            local e = raises_here(c[2], c[1], "got nil")
            assert.falsy(e:find("ordo.Tensor", 1, true), e)
        end
        raises_here(function() local _ = ordo.result_type(x, nil) end, "result_type", "got nil")
        assert.equals("float32", ordo.result_type(ordo.ones({2}, "int32"), 1.5))
    end)

    it("a tensor passed where a number belongs is named by its shape, not printed whole into the message", function()
        -- tostring(t) waited for the values and put every line of the tensor into the error
        local t = ordo.arange(3000)
        local x = ordo.zeros({3, 3})
        local calls = {
            {"uniform_", function() x:uniform_(t, 1) end}, {"narrow", function() local _ = x:narrow(1, t, 1) end},
            {"select", function() local _ = x:select(1, t) end}, {"topk", function() local _ = x:topk(t) end},
            {"chunk", function() local _ = x:chunk(t) end}, {"tril", function() local _ = x:tril(t) end},
            {"norm", function() local _ = x:norm(t) end}, {"eye", function() local _ = ordo.eye(t) end},
            {"randperm", function() local _ = ordo.randperm(t) end}, {"softmax", function() local _ = x:softmax(t) end},
            {"div", function() local _ = x:div(2, t) end}, {"transpose", function() local _ = x:transpose(t, 1) end},
        }
        for _, c in ipairs(calls) do
            local e = raises_here(c[2], c[1], "a tensor of shape 3000")
            assert.falsy(e:find("FloatTensor", 1, true) or e:find("\n"), e)
        end
        for _, c in ipairs({{"sum", function() local _ = x:sum(t) end}, {"flip", function() local _ = x:flip(t) end},
                            {"split", function() local _ = x:split(t) end}}) do
            raises_here(c[2], c[1], "plain table", "got ordo.Tensor")
        end
    end)

    it("a string passed where a number belongs is quoted, so \"1\" and 1 do not look the same", function()
        -- before: "select: index must be an integer, got 1" for the string "1"
        local x = ordo.zeros({3, 3})
        raises_here(function() local _ = x:select(1, "1") end, 'select: index must be an integer, got "1"')
        raises_here(function() local _ = x:narrow(1, "1", 1) end, 'got "1" and 1')
        raises_here(function() local _ = x:sum("2") end, 'sum: dim must be an integer, got "2"')
        raises_here(function() local _ = ordo.zeros({"2", 3}) end, 'zeros: size "2" at position 1 is invalid')
        raises_here(function() local _ = ordo.eye("2") end, 'eye: sizes must be integers >= 0, got "2" and "2"')
        raises_here(function() local _ = x:norm("1") end, 'got "1"')
        raises_here(function() local _ = x:div(2, "round") end, 'div: unknown rounding mode "round"')
        raises_here(function() local _ = ordo.zeros(2, {device = "tpu"}) end, 'zeros: unknown device "tpu"')
        raises_here(function() local _ = ordo.nn.LayerNorm(3, {eps = "1"}) end,
                    'LayerNorm: option eps must be a non-negative number, got "1"')
        -- a string with a newline stays on one line, as the REPL shows it inside a table
        raises_here(function() local _ = x:select(1, "a\nb") end, 'got "a\\nb"')
        -- numbers as before
        raises_here(function() local _ = x:select(1, 1.5) end, "index must be an integer, got 1.5")
    end)

    it("a float -0.0 prints with its sign", function()
        assert.truthy(tostring(ordo.tensor({-0.0, 0 / 0})):find("-0", 1, true))
        assert.is_nil(tostring(ordo.tensor({0, 1}, "int32")):find("-", 1, true))
    end)
end)

-- A further positional argument (x:exp(3), x:transpose(1, 2, 3), x:clamp(0,
-- 1, 2), ordo.cat({x, x}, 1, 5)) was dropped unseen, where Torch raises a
-- TypeError: a Torch habit in that place (an alpha, an out=) gave another
-- result without a word.  Every public function raises, naming the value.
describe("a further positional argument", function()
    local jutil = require "jit.util"
    local raw = require("ordo.grad_ops").raw

    -- the function whose parameters are the public one's: a vararg wrapper
    -- (autograd's in-place and view wrappers pass their arguments on) has
    -- those of the function it wraps; an in-place op made of the
    -- out-of-place one (fmod_), those of that one
    local function signature(name, fn)
        if not jutil.funcinfo(fn).isvararg then return fn end
        -- a wrapper passing its arguments on to the function it holds (f, fn),
        -- or to the method it is another name of (inner: subtract for sub)
        for i = 1, jutil.funcinfo(fn).upvalues do
            local uname, v = debug.getupvalue(fn, i)
            if (uname == "f" or uname == "fn") and type(v) == "function" then return signature(name, v) end
            if uname == "inner" and type(v) == "string" and ordo.Tensor[v] then return signature(v, ordo.Tensor[v]) end
        end
        if raw[name] and not jutil.funcinfo(raw[name]).isvararg then return raw[name] end
        local base = ordo.Tensor[name:match("^(.-)_$") or ""]
        if base and not jutil.funcinfo(base).isvararg then return base end
    end

    -- a function's own parameters: its fixed ones, less the trailing extra
    -- (the check) or who (an internal name, refused when not a string)
    local function own_params(fn)
        local n = jutil.funcinfo(fn).params
        local last = n > 0 and debug.getlocal(fn, n)
        if last == "extra" or last == "who" then n = n - 1 end
        return n
    end

    -- those taking their sizes, dims or operands as arguments: a further
    -- one is one of those and raises as such (checked here with valid calls)
    local x = ordo.randn({2, 3})
    local VARARGS = {
        view = function() return x:view(2, 3, 9) end,
        new_empty = function() return x:new_empty({2}, nil, 9) end,
        new_zeros = function() return x:new_zeros({2}, nil, 9) end,
        new_ones = function() return x:new_ones({2}, nil, 9) end,
        reshape = function() return x:reshape(2, 3, 9) end,
        permute = function() return x:permute({2, 1}, 9) end, -- (permute(2, 1, 3): 3 dims for a 2-d tensor)
        expand = function() return x:expand(2, 3, 9) end,
        tile = function() return x:tile({1, 1}, 9) end,
        multinomial = function() return ordo.ones({3}):multinomial(1, false, 9) end,
        det = function() return ordo.eye(2):det(9) end,
        inverse = function() return ordo.eye(2):inverse(9) end,
        slogdet = function() return ordo.eye(2):slogdet(9) end,
        logdet = function() return ordo.eye(2):logdet(9) end,
        inv = function() return ordo.linalg.inv(ordo.eye(2), 9) end,
        solve = function() return ordo.linalg.solve(ordo.eye(2), ordo.ones({2}), nil, 9) end,
        arange = function() return ordo.arange(1, 5, 1, "float32", 9) end,
        empty = function() return ordo.empty({2}, "float32", 9) end,
        zeros = function() return ordo.zeros(2, 3, "float32", 9) end,
        ones = function() return ordo.ones({2}, nil, 9) end,
        rand = function() return ordo.rand({2}, "float32", 9) end,
        randn = function() return ordo.randn(2, {}, 9) end,
        broadcast_tensors = function() return ordo.broadcast_tensors(x, x, 9) end,
        meshgrid = function() return ordo.meshgrid(ordo.ones({2}), 9) end,
        einsum = function() return ordo.einsum("ij->ji", x, 9) end,
        save = function() return ordo.save(x, os.tmpname(), 9) end,
        -- no_grad(fn, ...) and enable_grad(fn, ...) pass their further arguments to fn
    }
    local PASS_ON = {no_grad = true, enable_grad = true}

    local function check(where, name, fn, self)
        if PASS_ON[name] then return end
        if VARARGS[name] then
            local ok = pcall(VARARGS[name])
            assert(not ok, where .. name .. ": accepted a further argument")
            return
        end
        local sig = signature(name, fn)
        assert(sig, where .. name .. " takes any number of arguments: list it in VARARGS, with a call")
        H.refuses_further(where, name, fn, self, own_params(sig))
    end

    it("every Tensor method raises, naming it", function()
        for name, fn in pairs(ordo.Tensor) do
            if type(fn) == "function" and not name:match("^__") then check("t:", name, fn, ordo.randn({3, 4})) end
        end
        usable()
    end)

    it("every ordo function raises, naming it", function()
        for name, fn in pairs(ordo) do
            if type(fn) == "function" and ordo.Tensor[name] ~= fn then check("ordo.", name, fn, nil) end
        end
        usable()
    end)

    it("every function of ordo.linalg, ordo.cuda and ordo.memory raises, naming it", function()
        for _, sub in ipairs({"linalg", "cuda", "memory"}) do
            for name, fn in pairs(ordo[sub]) do
                if type(fn) == "function" then check("ordo." .. sub .. ".", name, fn, nil) end
            end
        end
        usable()
    end)

    it("the cases users met raise at the call, naming the op, its parameters and the value", function()
        local y = ordo.randn({2, 3})
        local before = x:totable()
        assert.truthy(raises_here(function() local _ = x:transpose(1, 2, 3) end)
                      :find("transpose: takes (dim0, dim1), got a further argument 3", 1, true))
        assert.truthy(raises_here(function() local _ = x:clamp(0, 1, 2) end)
                      :find("clamp: takes (min, max), got a further argument 2", 1, true))
        assert.truthy(raises_here(function() local _ = x:abs(3) end):find("abs: takes no arguments, got a further argument 3", 1, true))
        assert.truthy(raises_here(function() local _ = x:exp(3) end):find("exp: takes no arguments", 1, true))
        assert.truthy(raises_here(function() local _ = x:mul(y, 3) end):find("mul: takes (other), got a further argument 3", 1, true))
        assert.truthy(raises_here(function() local _ = x:pow(2, 3) end):find("pow: takes (exponent), got a further argument 3", 1, true))
        assert.truthy(raises_here(function() local _ = ordo.cat({x, x}, 1, 5) end)
                      :find("cat: takes (tensors, dim), got a further argument 5", 1, true))
        assert.truthy(raises_here(function() local _ = x:add(y, 2, 5) end):find("add: takes (other, alpha)", 1, true))
        assert.truthy(raises_here(function() local _ = x:permute({2, 1}, 5) end)
                      :find("permute: takes (dims) or (dim, dim, ...), got a further argument 5", 1, true))
        assert.truthy(raises_here(function() local _ = x:sum(1, true, nil, 5) end)
                      :find("sum: takes (dim, keepdim, dtype), got a further argument 5", 1, true))
        assert.truthy(raises_here(function() local _ = x:sum(1, true, "float32", 5) end):find("sum: takes", 1, true))
        assert.truthy(raises_here(function() local _ = x:std(1, true, 1, 5) end):find("std: takes (dim, keepdim, correction)", 1, true))
        assert.truthy(raises_here(function() local _ = ordo.zeros_like(x, nil, 5) end):find("zeros_like: takes (t, opts)", 1, true))
        -- in place: x unchanged
        local c = x:clone()
        for _, f in ipairs({function() c:add_(y, 1, 5) end, function() c:exp_(5) end, function() c:clamp_(0, 1, 5) end,
                            function() c:fmod_(2, 5) end, function() c:fill_(1, 5) end, function() c:copy_(y, 5) end}) do
            assert.truthy(raises_here(f):find("got a further argument 5", 1, true))
        end
        assert.same(x:totable(), c:totable())
        assert.same(before, x:totable())
        -- with a gradient: through autograd's wrappers
        local w = ordo.randn({2, 3}):requires_grad()
        assert.truthy(raises_here(function() local _ = w:exp(3) end):find("exp: takes no arguments", 1, true))
        assert.truthy(raises_here(function() local _ = w:mul(y, 3) end):find("mul: takes (other)", 1, true))
        assert.truthy(raises_here(function() local _ = w:transpose(1, 2, 3) end):find("transpose: takes", 1, true))
        -- and the ops still work without one
        assert.same({3, 2}, x:transpose(1, 2):shape())
        assert.same({2, 3}, ordo.zeros(2, 3, "float64"):shape())
        assert.equals("float64", ordo.zeros({2}, "float64"):dtype())
    end)
end)
