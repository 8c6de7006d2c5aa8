-- spec/gpu_spec.lua: GPU tensors, checked against the CPU.
--
-- Runs when ordo.cuda.is_available(): a CUDA device, or the simulated one
-- (ORDO_SIMULATED_GPUS=1: device memory is host memory, streams are host
-- threads, the kernels are the CPU ones run on those streams).  Without a
-- device every test is pending ("no CUDA device available"), never passed,
-- but for the block "gpu tensors without a device" (the errors a machine
-- without one gives), which is pending with a device.
-- spec/run_tests.sh runs this file a second time on the simulated device
-- (ORDO_SIMULATED_GPUS=1 ORDO_SIMULATED_GPU_MEM_MB=64
-- ORDO_SIMULATED_GPU_DELAY_NS=2000), so all of it runs on any machine.
--
-- Each op runs on gpu(0) and on cpu(0) with the same inputs; the GPU result,
-- copied back, must have the CPU result's dtype and shape and its values:
--   integers and uint8                         exactly
--   float32 elementwise                        |g - c| <= 1e-5 |c| + 1e-6
--   float32 reductions, softmax, matmul, conv,
--   gradients, optimiser steps                 |g - c| <= 1e-4 (|c| + 1)
--   float64                                    1e-12 and 1e-10 likewise
-- The simulated device runs the CPU kernels, so there the results agree bit
-- for bit; the tolerances are for a real GPU (other summation orders, fused
-- multiply-adds, its own exp/tanh).
local ordo = require "ordo"
local H = require "support.helpers"

local fmt = string.format
local abs, floor, huge = math.abs, math.floor, math.huge

local DTYPES = {"float32", "float64", "int32", "int64", "uint8"}
local FLOAT = {float32 = true, float64 = true}
local EW = {float32 = {1e-5, 1e-6}, float64 = {1e-12, 1e-12}}  -- elementwise
local RED = {float32 = {1e-4, 1e-4}, float64 = {1e-10, 1e-10}} -- reductions, matmul, gradients

local SIM_ENV = tonumber((os.getenv("ORDO_SIMULATED_GPUS") or ""):match("^%s*(%d+)") or "0") > 0
local SIM_MEM_MB = tonumber(os.getenv("ORDO_SIMULATED_GPU_MEM_MB") or "")

local G, CPU -- gpu(0) and cpu(0), set by need_gpu

local function need_gpu()
    if not ordo.cuda.is_available() then pending("no CUDA device available") end
    G, CPU = ordo.gpu(0), ordo.cpu(0)
end

-- ---------------------------------------------------------------- helpers

local function flatten(x, out)
    out = out or {}
    if type(x) == "table" then
        for i = 1, #x do flatten(x[i], out) end
    else
        out[#out + 1] = x
    end
    return out
end

local function shape_str(s)
    if #s == 0 then return "scalar" end
    return table.concat(s, "x")
end

-- Asserts that g (a GPU result) matches c (the CPU one): device, dtype,
-- shape, and values within tol = {rtol, atol} for floats (default EW).
local function check(g, c, what, tol)
    what = what or "result"
    assert(ordo.is_tensor(g) and ordo.is_tensor(c), what .. ": expected two tensors")
    assert(g:device() == G, fmt("%s: on %s, expected gpu(0)", what, tostring(g:device())))
    assert(g:dtype() == c:dtype(), fmt("%s: dtype %s on the gpu, %s on the cpu", what, g:dtype(), c:dtype()))
    assert(shape_str(g:shape()) == shape_str(c:shape()),
           fmt("%s: shape %s on the gpu, %s on the cpu", what, shape_str(g:shape()), shape_str(c:shape())))
    local gv, cv = flatten(g:totable()), flatten(c:totable())
    assert(#gv == #cv, what .. ": element counts differ")
    local isf = FLOAT[c:dtype()]
    local t = (tol or EW)[c:dtype()] or {0, 0}
    for i = 1, #cv do
        local a, b = gv[i], cv[i]
        local ok
        if not isf then
            ok = a == b
        elseif b ~= b then
            ok = a ~= a
        elseif b == huge or b == -huge then
            ok = a == b
        else
            ok = abs(a - b) <= t[2] + t[1] * abs(b)
        end
        assert(ok, fmt("%s (%s %s): element %d is %s on the gpu, %s on the cpu", what, c:dtype(),
                       shape_str(c:shape()), i, tostring(a), tostring(b)))
    end
end

-- Same check for two nested tables of numbers (no tensors).
local function check_tables(got, want, what, rtol, atol)
    local gv, wv = flatten(got), flatten(want)
    assert(#gv == #wv, fmt("%s: %d values, expected %d", what, #gv, #wv))
    for i = 1, #wv do
        local a, b = gv[i], wv[i]
        assert(abs(a - b) <= (atol or 0) + (rtol or 0) * abs(b),
               fmt("%s: value %d is %s, expected %s", what, i, tostring(a), tostring(b)))
    end
end

-- A nested table of shape with random values: floats uniform in [lo, hi),
-- integers in [lo, hi].
local function rand_data(shape, int, lo, hi, d)
    d = d or 1
    if d > #shape then
        if int then return math.random(lo, hi) end
        return lo + (hi - lo) * math.random()
    end
    local t = {}
    for i = 1, shape[d] do t[i] = rand_data(shape, int, lo, hi, d + 1) end
    return t
end

-- A CPU tensor of random values for dtype: floats in [lo, hi), integers in
-- [ceil lo, floor hi] (uint8 from max(lo, 0)).
local function rnd(shape, dtype, lo, hi)
    local int = not FLOAT[dtype]
    if int then
        lo, hi = math.ceil(lo), floor(hi)
        if dtype == "uint8" then lo = math.max(lo, 0) end
    end
    return ordo.tensor(rand_data(shape, int, lo, hi), {dtype = dtype})
end

-- A CPU tensor of the values 1..n in random order, scaled (distinct: no
-- ties for argmax / max indices), of shape and dtype (n <= 255).
local function distinct(shape, dtype)
    local n = 1
    for _, s in ipairs(shape) do n = n * s end
    local v = {}
    for i = 1, n do v[i] = i end
    for i = n, 2, -1 do
        local j = math.random(i)
        v[i], v[j] = v[j], v[i]
    end
    local scale = FLOAT[dtype] and 0.37 or 1
    return ordo.tensor(v, {dtype = "float64"}):mul_(scale):to(dtype):view(shape)
end

local function gpu(t) return t:to(G) end

-- A settled state for memory counts: garbage collected and its frees run.
local function settle()
    collectgarbage("collect")
    collectgarbage("collect")
    ordo.engine.wait_for_all()
end

local MiB = 2 ^ 20

-- Fills gpu(0) with blocks of every size until none more fits, and returns
-- them: dropped, they are all cached (a function of its own, so that no
-- stale slot of the caller's frame keeps the last block alive).
local function hold_device_memory()
    local held = {}
    for _, n in ipairs({MiB / 4, 16384, 1024, 128}) do
        while true do
            local ok, t = pcall(ordo.empty, {n}, {device = G})
            if not ok then break end
            held[#held + 1] = t
        end
    end
    return held
end

local function raises(fn, ...)
    local ok, err = pcall(fn)
    assert(not ok, "expected an error, got none")
    err = tostring(err)
    for i = 1, select("#", ...) do
        local p = select(i, ...)
        assert(err:find(p, 1, true), fmt("error %q does not mention %q", err, p))
    end
    return err
end

-- ---------------------------------------------------------------- without a device

-- The one block that runs without a device (and is pending with one): the
-- errors a machine without a GPU must give.
describe("gpu tensors without a device", function()
    it("every spelling of a gpu device names it gpu(n) in the 'no CUDA device available' error", function()
        if ordo.cuda.is_available() then pending("a device is present: the no-device errors cannot be seen") end
        for _, spelling in ipairs({"gpu", "gpu:0", "cuda", "cuda:0", "cuda(0)"}) do
            local err = raises(function() return ordo.zeros({2}, {device = spelling}) end,
                               "zeros: gpu(0): no CUDA device available")
            assert.is_nil(err:find("cuda(", 1, true), err)
        end
        raises(function() return ordo.zeros({2}):to("cuda:1") end, "to: gpu(1): no CUDA device available")
        raises(function() return ordo.gpu(1) end, "gpu(1): no CUDA device available")
        raises(function() return ordo.zeros({2}):cuda() end, "cuda: gpu(0): no CUDA device available")
        raises(function() return ordo.nn.Linear(1, 1):cuda(1) end, "cuda: gpu(1): no CUDA device available")
        raises(function() ordo.cuda.synchronize() end, "synchronize: gpu(0): no CUDA device available")
        -- a bad ORDO_SIMULATED_GPUS is why there is none: the error says so
        local f = assert(io.popen("ORDO_SIMULATED_GPUS=abc LUA_PATH='lua/?.lua;lua/?/init.lua;;' luajit -e " ..
                                  "'local o = require(\"ordo\") print(select(2, pcall(o.gpu, 0))) " ..
                                  "print(select(2, pcall(o.zeros, {1}, {device = \"cuda:1\"})))' 2>&1"))
        local out = f:read("*a")
        f:close()
        assert.truthy(out:find("gpu(0): no CUDA device available (ORDO_SIMULATED_GPUS=abc: expected an integer " ..
                               "from 0 to 16)", 1, true), out)
        assert.truthy(out:find("zeros: gpu(1): no CUDA device available (ORDO_SIMULATED_GPUS=abc", 1, true), out)
    end)
end)

-- ---------------------------------------------------------------- moving data

describe("gpu tensors: moving data", function()
    it("t:cuda([dev]), t:cpu(), m:cuda([dev]), m:cpu() and cuda.synchronize(), as Torch's", function()
        need_gpu()
        local t = ordo.arange(1, 7):view(2, 3):t()
        local g = t:cuda()
        assert.equals("gpu(0)", tostring(g:device()))
        assert.same(t:totable(), g:totable())
        assert.is_true(rawequal(g, g:cuda()) and rawequal(g, g:cuda(0)) and rawequal(g, g:cuda(G)))
        assert.equals("cpu(0)", tostring(g:cpu():device()))
        assert.same(t:totable(), g:cpu():totable())
        raises(function() return t:cuda(ordo.cpu(0)) end, "cuda: expected a GPU", "cpu(0)")
        raises(function() return t:cuda(-1) end, "cuda: expected a GPU", "-1")
        raises(function() return t:cuda(63) end, "gpu(63) does not exist")
        local m = ordo.nn.Sequential(ordo.nn.Linear(3, 2), ordo.nn.BatchNorm1d(2))
        assert.is_true(rawequal(m, m:cuda()))
        assert.equals("gpu(0)", tostring(m:get(1).weight:device()))
        assert.equals("gpu(0)", tostring(m:get(2).running_mean:device()))
        assert.is_true(m:get(1).weight:needs_grad())
        m:cpu()
        assert.equals("cpu(0)", tostring(m:get(1).weight:device()))
        assert.equals("cpu(0)", tostring(m:get(2).running_var:device()))
        -- synchronize waits for the pushed work and raises its errors
        local a = ordo.tensor({1}, {dtype = "int64", device = G})
        local x = a:div(ordo.zeros_like(a), "trunc")
        raises(function() ordo.cuda.synchronize() end, "division by zero")
        x = nil
        ordo.cuda.synchronize(0)
        raises(function() ordo.cuda.synchronize(ordo.cpu(0)) end, "synchronize: expected a GPU")
    end)

    it("cpu -> gpu -> cpu keeps values, dtype and shape for every dtype, views included", function()
        need_gpu()
        math.randomseed(1)
        for _, dt in ipairs(DTYPES) do
            for _, shape in ipairs({{}, {0}, {7}, {3, 4}, {2, 3, 5}}) do
                local c = rnd(shape, dt, -50, 50)
                local g = c:to(G)
                assert.equals(G, g:device())
                assert.equals(dt, g:dtype())
                assert.same(c:shape(), g:shape())
                local back = g:to(CPU)
                assert.equals(CPU, back:device())
                assert.same(c:totable(), back:totable())
                assert.same(c:totable(), g:totable()) -- totable copies through the cpu itself
            end
            -- non-contiguous sources on either side
            local c = rnd({4, 6}, dt, 0, 90)
            assert.same(c:t():totable(), c:t():to(G):totable())
            assert.same(c:narrow(2, 2, 3):totable(), c:to(G):narrow(2, 2, 3):to(CPU):totable())
            assert.same(c:t():totable(), c:to(G):t():to(CPU):totable())
            -- copy_ across devices, into a view
            local g = ordo.zeros({4, 6}, {dtype = dt, device = G})
            g:narrow(1, 2, 2):copy_(c:narrow(1, 1, 2))
            local want = ordo.zeros({4, 6}, {dtype = dt})
            want:narrow(1, 2, 2):copy_(c:narrow(1, 1, 2))
            check(g, want, dt .. " copy_ into a gpu view")
            local h = ordo.zeros({6, 4}, {dtype = dt})
            h:copy_(g:t())
            assert.same(want:t():totable(), h:totable())
        end
    end)

    it("creates tensors on the gpu: tensor, zeros, ones, full, arange, *_like, item, tostring", function()
        need_gpu()
        local t = ordo.tensor({{1, 2, 3}, {4, 5, 6}}, {device = G})
        assert.equals(G, t:device())
        assert.same({{1, 2, 3}, {4, 5, 6}}, t:totable())
        assert.equals(5, t:select(1, 2):select(1, 2):item())
        assert.same({{1, 4}, {2, 5}, {3, 6}}, t:t():totable())
        local i64 = ordo.tensor({2 ^ 40 + 1, -3}, {dtype = "int64", device = "gpu:0"})
        assert.same({2 ^ 40 + 1, -3}, i64:totable())
        assert.equals(7.5, ordo.tensor(7.5, {device = G}):item())
        assert.same({0, 0, 0}, ordo.zeros({3}, {device = G}):totable())
        assert.same({{1, 1}}, ordo.ones({1, 2}, {dtype = "int32", device = G}):totable())
        assert.same({2.5, 2.5}, ordo.full({2}, 2.5, {dtype = "float64", device = G}):totable())
        assert.same({1, 3, 5}, ordo.arange(1, 7, 2, {device = G}):totable())
        local z = ordo.zeros_like(t)
        assert.equals(G, z:device())
        assert.same({{0, 0, 0}, {0, 0, 0}}, z:totable())
        assert.same({{9, 9, 9}, {9, 9, 9}}, ordo.full_like(t, 9):totable())
        assert.equals(CPU, ordo.ones_like(t, {device = CPU}):device())
        -- printing shows the device and the values
        assert.equals(" 1  2  3\n 4  5  6\n[ordo.FloatTensor of size 2x3 on gpu(0)]", tostring(t))
        assert.truthy(tostring(ordo.zeros({0}, {device = G})):find("on gpu(0)", 1, true))
        -- copy_ from a nested table
        t:copy_({{6, 5, 4}, {3, 2, 1}})
        assert.same({{6, 5, 4}, {3, 2, 1}}, t:totable())
        -- ordo.tensor(gpu tensor) copies on the gpu
        local u = ordo.tensor(t)
        assert.equals(G, u:device())
        t:fill_(0)
        assert.same({{6, 5, 4}, {3, 2, 1}}, u:totable())
    end)

    it("prints a large tensor as the cpu does, copying only the shown elements to the host", function()
        need_gpu()
        for _, shape in ipairs({{2000}, {100, 1000}, {7, 7, 30}, {3, 500}, {500, 3}, {2, 3, 4, 5, 6, 7}, {1001}}) do
            local n = 1
            for _, s in ipairs(shape) do n = n * s end
            for _, dt in ipairs({"float64", "int64"}) do
                local c = ordo.arange(1, n + 1, {dtype = dt}):view(shape)
                for _, v in ipairs({c, c:transpose(1, #shape)}) do
                    local want = tostring(v):gsub("on cpu%(0%)%]$", "on gpu(0)]")
                    assert.equals(want, tostring(v:to(G)))
                end
            end
        end
        -- 1e10 elements of one value: the whole copy asked for 40 GB ("out of memory")
        local s = tostring(ordo.tensor(1.5, {device = G}):expand({100000, 100000}))
        assert.truthy(s:find("1.5000     ...  1.5000", 1, true), s)
        assert.truthy(s:find("[ordo.FloatTensor of size 100000x100000 on gpu(0)]", 1, true), s)
    end)
end)

-- ---------------------------------------------------------------- elementwise

describe("gpu tensors: elementwise ops", function()
    -- operand ranges per op: values that stay well defined on every dtype
    local RANGE = {
        add = {-100, 100, -100, 100}, sub = {-100, 100, -100, 100}, mul = {-60, 60, -60, 60},
        div = {-100, 100, 1, 9}, pow = {0.5, 4, 0, 3},
        maximum = {-100, 100, -100, 100}, minimum = {-100, 100, -100, 100},
    }
    local PAIRS = {{{3, 4, 5}, {4, 1}}, {{2, 1, 3}, {4, 1}}, {{5}, {}}, {{}, {2, 3}}, {{6, 7}, {6, 7}},
                   {{1, 6}, {5, 1}}}

    it("binary ops with broadcasting match the cpu for every dtype", function()
        need_gpu()
        math.randomseed(2)
        for _, dt in ipairs(DTYPES) do
            for op, r in pairs(RANGE) do
                for _, p in ipairs(PAIRS) do
                    local a, b = rnd(p[1], dt, r[1], r[2]), rnd(p[2], dt, r[3], r[4])
                    check(a:to(G)[op](a:to(G), b:to(G)), a[op](a, b),
                          fmt("%s %s %s and %s", dt, op, shape_str(p[1]), shape_str(p[2])))
                end
                -- a non-contiguous left operand
                local a, b = rnd({5, 4}, dt, r[1], r[2]), rnd({5}, dt, r[3], r[4])
                check(gpu(a):t()[op](gpu(a):t(), gpu(b)), a:t()[op](a:t(), b), fmt("%s %s transposed", dt, op))
            end
            -- operators and in-place forms (the operand broadcast to the tensor's shape)
            local a, b = rnd({4, 3}, dt, 1, 60), rnd({3}, dt, 1, 4)
            local ga, gb = gpu(a), gpu(b)
            check(ga + gb, a + b, dt .. " +")
            check(ga - gb, a - b, dt .. " -")
            check(ga * gb, a * b, dt .. " *")
            check(ga / gb, a / b, dt .. " /")
            for _, op in ipairs({"add_", "sub_", "mul_", "maximum_", "minimum_"}) do
                local gc, cc = ga:clone(), a:clone()
                gc[op](gc, gb)
                cc[op](cc, b)
                check(gc, cc, dt .. " " .. op)
            end
            if FLOAT[dt] then
                local gc, cc = ga:clone(), a:clone()
                check(gc:div_(gb):pow_(gb), cc:div_(b):pow_(b), dt .. " div_ pow_")
            else
                check(ga:div(gb, "trunc"), a:div(b, "trunc"), dt .. " div trunc")
                check(ga:clone():div_(gb, "trunc"), a:clone():div_(b, "trunc"), dt .. " div_ trunc")
            end
            check(ga:add(gb, 3), a:add(b, 3), dt .. " add alpha")
            check(ga:clamp(10, 40), a:clamp(10, 40), dt .. " clamp")
            check(ga:clone():clamp_(10, 40), a:clone():clamp_(10, 40), dt .. " clamp_")
        end
        -- type promotion between dtypes, and 0-d tensors
        for _, p in ipairs({{"int32", "float32"}, {"uint8", "int64"}, {"float32", "float64"}, {"uint8", "float64"},
                            {"int64", "int32"}}) do
            local a, b = rnd({3, 4}, p[1], 0, 50), rnd({4}, p[2], 1, 9)
            check(gpu(a) + gpu(b), a + b, p[1] .. " + " .. p[2])
            check(gpu(a) * gpu(b), a * b, p[1] .. " * " .. p[2])
            check(gpu(b) - gpu(a), b - a, p[2] .. " - " .. p[1])
        end
        local a, z = rnd({3}, "int32", 0, 9), ordo.tensor(2.5, {dtype = "float64"})
        check(gpu(a) * gpu(z), a * z, "int32 * 0-d float64")
    end)

    it("scalar ops on either side match the cpu", function()
        need_gpu()
        math.randomseed(3)
        for _, dt in ipairs(DTYPES) do
            local a = rnd({4, 5}, dt, -9, 9)
            local p = rnd({4, 5}, dt, 1, 4)
            local ga, gp = gpu(a), gpu(p)
            for _, s in ipairs(dt == "uint8" and {3, 2.5, 0} or {3, 2.5, -1}) do
                local w = fmt("%s with %s", dt, tostring(s))
                check(ga + s, a + s, w .. ": t + s")
                check(s + ga, s + a, w .. ": s + t")
                check(ga - s, a - s, w .. ": t - s")
                check(s - ga, s - a, w .. ": s - t")
                check(ga * s, a * s, w .. ": t * s")
                check(s * ga, s * a, w .. ": s * t")
                check(ga / s, a / s, w .. ": t / s")
                check(s / gp, s / p, w .. ": s / t")
                check(gp ^ 2, p ^ 2, w .. ": t ^ 2")
                check(gp ^ 0.5, p ^ 0.5, w .. ": t ^ 0.5")
                check(2 ^ gp, 2 ^ p, w .. ": 2 ^ t")
                check(ga:maximum(s), a:maximum(s), w .. ": maximum")
                check(ga:minimum(s), a:minimum(s), w .. ": minimum")
            end
            if dt ~= "uint8" then check(-ga, -a, dt .. " unary -") end
            -- in place with a number keeps the dtype
            check(ga:clone():add_(2):mul_(3):sub_(1), a:clone():add_(2):mul_(3):sub_(1), dt .. " add_ mul_ sub_ number")
            if not FLOAT[dt] then check(ga:div(2, "trunc"), a:div(2, "trunc"), dt .. " div trunc number") end
        end
    end)

    it("comparisons match the cpu (tensors with broadcasting, numbers on either side)", function()
        need_gpu()
        math.randomseed(4)
        for _, dt in ipairs(DTYPES) do
            local a, b = rnd({4, 5}, dt, 0, 4), rnd({5}, dt, 0, 4)
            local ga, gb = gpu(a), gpu(b)
            for _, op in ipairs({"eq", "ne", "lt", "le", "gt", "ge"}) do
                local w = dt .. " " .. op
                check(ga[op](ga, gb), a[op](a, b), w .. " tensor")
                check(gb[op](gb, ga), b[op](b, a), w .. " tensor, swapped")
                check(ga[op](ga, 2), a[op](a, 2), w .. " number")
                check(ga[op](ga, 2.5), a[op](a, 2.5), w .. " fractional number")
            end
        end
        local f, i = rnd({6}, "float32", -2, 2), rnd({6}, "int64", -2, 2)
        check(gpu(f):lt(gpu(i)), f:lt(i), "float32 < int64")
    end)

    it("erf, erfc, erfinv match the cpu (erfinv: +-inf at +-1, NaN beyond), in and out of place", function()
        need_gpu()
        math.randomseed(6)
        for _, dt in ipairs({"float32", "float64"}) do
            local a = rnd({3, 7}, dt, -3, 3)
            local u = rnd({4, 9}, dt, -0.999, 0.999)
            local special = ordo.tensor({-1, 1, 1.5, -2, 0 / 0, 0, 1 - 2 ^ -20, -(1 - 2 ^ -20), 1e-30}, dt)
            local ga, gu, gs = gpu(a), gpu(u), gpu(special)
            check(ga:erf(), a:erf(), dt .. " erf")
            check(ga:erfc(), a:erfc(), dt .. " erfc")
            check(gu:erfinv(), u:erfinv(), dt .. " erfinv")
            check(gs:erfinv(), special:erfinv(), dt .. " erfinv at its edges")
            check(gu:clone():erfinv_(), u:clone():erfinv_(), dt .. " erfinv_")
            check(gu:t():erfinv(), u:t():erfinv(), dt .. " erfinv of a transposed view")
        end
        check(gpu(ordo.tensor({0.5, -1}, "int32")):erfinv(), ordo.tensor({0.5, -1}, "int32"):erfinv(), "int32 erfinv")
    end)

    it("unary ops match the cpu", function()
        need_gpu()
        math.randomseed(5)
        for _, dt in ipairs(DTYPES) do
            local a = rnd({3, 7}, dt, -3, 3)
            local pos = rnd({3, 7}, dt, 0.1, 5)
            if not FLOAT[dt] then pos = pos + 1 end
            local ga, gpos = gpu(a), gpu(pos)
            local ops = {"abs", "relu", "exp", "tanh", "sigmoid", "sign", "square", "sin", "cos", "expm1",
                         "floor", "ceil", "round", "trunc"}
            if dt ~= "uint8" then ops[#ops + 1] = "neg" end
            for _, op in ipairs(ops) do check(ga[op](ga), a[op](a), dt .. " " .. op) end
            for _, op in ipairs({"log", "sqrt", "log1p", "rsqrt", "reciprocal"}) do
                check(gpos[op](gpos), pos[op](pos), dt .. " " .. op)
            end
            if FLOAT[dt] then
                for _, op in ipairs({"neg_", "abs_", "relu_", "exp_", "tanh_", "sigmoid_", "sign_", "square_", "sin_",
                                     "cos_", "expm1_", "floor_", "ceil_", "round_", "trunc_"}) do
                    local g, c = ga:clone(), a:clone()
                    check(g[op](g), c[op](c), dt .. " " .. op)
                end
                check(gpos:clone():log_(), pos:clone():log_(), dt .. " log_")
                check(gpos:clone():sqrt_(), pos:clone():sqrt_(), dt .. " sqrt_")
                -- on a view, in place: the rest of the storage stays
                local g, c = ga:clone(), a:clone()
                g:narrow(2, 2, 3):exp_()
                c:narrow(2, 2, 3):exp_()
                check(g, c, dt .. " exp_ on a view")
            end
        end
    end)

    it("ops made of other ops (einsum, median, unique, nonzero, scatter, pad, distances) match the cpu", function()
        need_gpu()
        math.randomseed(19)
        local F = ordo.nn.functional
        for _, dt in ipairs({"float32", "float64"}) do
            local a, b = rnd({3, 4}, dt, -2, 2), rnd({4, 5}, dt, -2, 2)
            local ga, gb = gpu(a), gpu(b)
            check(ordo.einsum("ij,jk->ki", ga, gb), ordo.einsum("ij,jk->ki", a, b), dt .. " einsum", RED)
            local gv, gi = ga:median(2)
            local cv, ci = a:median(2)
            check(gv, cv, dt .. " median values")
            check(gi, ci, dt .. " median indices")
            check(ga:kthvalue(2, 1), a:kthvalue(2, 1), dt .. " kthvalue")
            local r = rnd({12}, dt, 0, 3):round()
            local gu, ginv, gcnt = gpu(r):unique({return_inverse = true, return_counts = true})
            local cu, cinv, ccnt = r:unique({return_inverse = true, return_counts = true})
            check(gu, cu, dt .. " unique")
            check(ginv, cinv, dt .. " unique inverse")
            check(gcnt, ccnt, dt .. " unique counts")
            check(gpu(r):view(3, 4):nonzero(), r:view(3, 4):nonzero(), dt .. " nonzero")
            local idx = ordo.tensor({{2, 4}, {1, 3}, {4, 1}}, "int64")
            local src = rnd({3, 2}, dt, -1, 1)
            check(ga:scatter(2, gpu(idx), gpu(src)), a:scatter(2, idx, src), dt .. " scatter")
            for _, mode in ipairs({"constant", "reflect", "replicate", "circular"}) do
                check(F.pad(ga, {2, 1, 1, 0}, {mode = mode}), F.pad(a, {2, 1, 1, 0}, {mode = mode}), dt .. " pad " .. mode)
            end
            check(F.cdist(ga, gpu(a:flip(1))), F.cdist(a, a:flip(1)), dt .. " cdist", RED)
            check(F.cosine_similarity(ga, gpu(a * 2 + 1)), F.cosine_similarity(a, a * 2 + 1), dt .. " cosine", RED)
            -- tensordot, logcumsumexp, cdist through a matrix product (more than 25 rows), an N-dim
            -- searchsorted, kron past 4 dims, unique_consecutive, addbmm
            check(ordo.tensordot(ga, gb, 1), ordo.tensordot(a, b, 1), dt .. " tensordot", RED)
            check(ordo.tensordot(ga, ga, {{1, 2}, {1, 2}}), ordo.tensordot(a, a, {{1, 2}, {1, 2}}), dt .. " tensordot 2",
                  RED)
            check(ga:logcumsumexp(2), a:logcumsumexp(2), dt .. " logcumsumexp", RED)
            local p, q = rnd({30, 4}, dt, -2, 2), rnd({27, 4}, dt, -2, 2)
            check(F.cdist(gpu(p), gpu(q)), F.cdist(p, q), dt .. " cdist (matrix product)", RED)
            local seq = r:view(3, 4):sort(2)
            local vals = rnd({3, 5}, dt, -1, 4)
            check(ordo.searchsorted(gpu(seq), gpu(vals)), ordo.searchsorted(seq, vals), dt .. " searchsorted N-dim")
            check(ordo.searchsorted(gpu(seq), gpu(vals), {side = "right"}), ordo.searchsorted(seq, vals, {right = true}),
                  dt .. " searchsorted right")
            local k1, k2 = rnd({2, 1, 2, 1, 2}, dt, -2, 2), rnd({1, 2, 1, 2, 2}, dt, -2, 2)
            check(ordo.kron(gpu(k1), gpu(k2)), ordo.kron(k1, k2), dt .. " kron 5 dims")
            local gc, gci, gcc = gpu(r):unique_consecutive({return_inverse = true, return_counts = true})
            local cc, cci, ccc = r:unique_consecutive({return_inverse = true, return_counts = true})
            check(gc, cc, dt .. " unique_consecutive")
            check(gci, cci, dt .. " unique_consecutive inverse")
            check(gcc, ccc, dt .. " unique_consecutive counts")
            local ba, bb = rnd({3, 3, 4}, dt, -1, 1), rnd({3, 4, 5}, dt, -1, 1)
            check(ga:addbmm(gpu(ba), gpu(bb):narrow(3, 1, 4)), a:addbmm(ba, bb:narrow(3, 1, 4)), dt .. " addbmm", RED)
        end
    end)

    it("scatter and scatter_ (their own kernel) match the cpu; repeated indices store one of their sources; "
       .. "a bad index writes nothing", function()
        need_gpu()
        math.randomseed(23)
        for trial, dt in ipairs({"float32", "float64", "int32", "int64", "uint8", "float32", "int64", "uint8"}) do
            local int = not FLOAT[dt]
            local lo, hi = int and 0 or -2, int and 200 or 2
            local x = ordo.tensor(rand_data({4, 6, 5}, int, lo, hi), dt)
            local dim = trial % 3 + 1
            local ishape = {3, 4, 5}
            ishape[dim] = 4
            -- distinct indices along dim (a permutation's first entries) in every line
            local index = ordo.rand(ishape):argsort(dim):narrow(dim, 1, math.min(4, x:size(dim)))
            local src = ordo.tensor(rand_data({4, 5, 6}, int, lo, hi), dt)
            local gx, gi, gs = x:to(G), index:to(G), src:to(G)
            check(gx:scatter(dim, gi, gs), x:scatter(dim, index, src), dt .. " scatter dim " .. dim)
            local c = gx:clone()
            assert.equals(c, c:scatter_(dim, gi:int(), 3))
            check(c, x:scatter(dim, index, 3), dt .. " scatter_ number dim " .. dim)
            check(gx, x, dt .. " scatter left its input")
            -- every line's indices all the same place: it gets one of the sources written there
            local same = ordo.ones(ishape, "int64"):to(G)
            local got = gx:scatter(dim, same, gs):totable()
            local S, X = src:totable(), x:totable()
            for i = 1, 4 do
                for j = 1, 6 do
                    for k = 1, 5 do
                        local at = {i, j, k}
                        local v = got[i][j][k]
                        local written = at[dim] == 1
                        for d = 1, 3 do
                            if d ~= dim and at[d] > ishape[d] then written = false end
                        end
                        if written then
                            local ok = false
                            for r = 1, ishape[dim] do
                                local p = {i, j, k}
                                p[dim] = r
                                if S[p[1]][p[2]][p[3]] == v then ok = true end
                            end
                            assert.is_true(ok, fmt("%s repeated index: %s is none of its sources", dt, tostring(v)))
                        else
                            assert.equals(X[i][j][k], v, dt .. " unwritten place")
                        end
                    end
                end
            end
        end
        -- an index out of range: the op fails on the device and the tensor keeps its values
        local keep = ordo.tensor({{1, 2, 3}, {4, 5, 6}}, {device = G}):clone()
        keep:scatter_(2, ordo.tensor({{1, 4}}, {dtype = "int64", device = G}), ordo.tensor({{9, 9}}, {device = G}))
        raises(function() return keep:totable() end, "scatter", "index 4 out of range", "size 3", "gpu(0)")
        ordo.engine.wait_for_all()
        assert.same({{1, 2, 3}, {4, 5, 6}}, keep:totable())
        keep:scatter_(1, ordo.tensor({{0, 1, 1}}, {dtype = "int64", device = G}), -1)
        raises(function() return keep:totable() end, "scatter", "index 0 out of range", "gpu(0)")
        ordo.engine.wait_for_all()
        assert.same({{1, 2, 3}, {4, 5, 6}}, keep:totable())
    end)

    it("cumsum, cumprod, prod, sort, argsort and topk match the cpu", function()
        need_gpu()
        math.randomseed(9)
        for _, dt in ipairs(DTYPES) do
            local a = rnd({4, 9}, dt, -3, 3)
            local ga = gpu(a)
            for d = 1, 2 do
                check(ga:cumsum(d), a:cumsum(d), dt .. " cumsum " .. d)
                check(ga:t():cumsum(d), a:t():cumsum(d), dt .. " cumsum of a transposed view " .. d)
                check(ga:cumprod(d), a:cumprod(d), dt .. " cumprod " .. d)
                check(ga:t():cumprod(d), a:t():cumprod(d), dt .. " cumprod of a transposed view " .. d)
                check(ga:prod(d), a:prod(d), dt .. " prod " .. d)
                for _, desc in ipairs({false, true}) do
                    local gv, gi = ga:sort(d, desc)
                    local cv, ci = a:sort(d, desc)
                    check(gv, cv, dt .. " sort values " .. d)
                    check(gi, ci, dt .. " sort indices " .. d)
                end
            end
            local gv, gi = ga:topk(3)
            local cv, ci = a:topk(3)
            check(gv, cv, dt .. " topk values")
            check(gi, ci, dt .. " topk indices")
        end
    end)

    it("where and masked_fill match the cpu", function()
        need_gpu()
        math.randomseed(6)
        for _, dt in ipairs(DTYPES) do
            local cond = rnd({3, 1, 5}, "uint8", 0, 1)
            local x, y = rnd({4, 5}, dt, -20, 20), rnd({5}, dt, -20, 20)
            local gc, gx, gy = gpu(cond), gpu(x), gpu(y)
            check(ordo.where(gc, gx, gy), ordo.where(cond, x, y), dt .. " where")
            check(gx:where(gc, 7), x:where(cond, 7), dt .. " where number")
            check(ordo.where(gc, 1.5, gy), ordo.where(cond, 1.5, y), dt .. " where number first")
            local mask = gpu(x):gt(0)
            check(gx:masked_fill(mask, 3), x:masked_fill(x:gt(0), 3), dt .. " masked_fill")
            local m2 = rnd({5}, "uint8", 0, 1)
            check(gx:clone():masked_fill_(gpu(m2), 7), x:clone():masked_fill_(m2, 7), dt .. " masked_fill_ broadcast")
        end
        check(ordo.where(gpu(ordo.tensor({1, 0, 1}, "uint8")), 2, 3.5), ordo.where(ordo.tensor({1, 0, 1}, "uint8"), 2, 3.5),
              "where of two numbers")
    end)

    it("casts: to(dtype) on the gpu, and to(device, dtype) in both directions", function()
        need_gpu()
        math.randomseed(7)
        for _, from in ipairs(DTYPES) do
            local c = rnd({3, 5}, from, 0, 200)
            local g = gpu(c)
            for _, to in ipairs(DTYPES) do
                local w = from .. " -> " .. to
                check(g:to(to), c:to(to), w .. " on the gpu")
                check(c:to(G, to), c:to(to), w .. " to(gpu, dtype)")
                check(c:t():to(G, to), c:t():to(to), w .. " to(gpu, dtype) of a transposed view")
                local back = g:to(CPU, to)
                assert.equals(CPU, back:device())
                assert.equals(to, back:dtype())
                assert.same(c:to(to):totable(), back:totable(), w .. " to(cpu, dtype)")
            end
            check(g:float(), c:float(), from .. " float()")
            check(g:long(), c:long(), from .. " long()")
        end
        -- negative floats to signed integers truncate toward zero on both
        local n = ordo.tensor({-2.7, -0.5, 0.5, 2.7}, "float64")
        check(gpu(n):int(), n:int(), "negative float64 -> int32")
        check(gpu(n):long(), n:long(), "negative float64 -> int64")
    end)
end)

-- ---------------------------------------------------------------- reductions

describe("gpu tensors: reductions, softmax, matmul", function()
    it("sum, mean, max, min, argmax, argmin over each dim and all match the cpu", function()
        need_gpu()
        math.randomseed(8)
        local shape = {4, 5, 6}
        for _, dt in ipairs(DTYPES) do
            local c = rnd(shape, dt, -30, 30)
            local d = distinct(shape, dt) -- distinct values: max/argmax indices are unique
            local g, gd = gpu(c), gpu(d)
            for _, dim in ipairs({1, 2, 3, -1}) do
                for _, keep in ipairs({false, true}) do
                    local w = fmt("%s dim %d%s", dt, dim, keep and " keepdim" or "")
                    check(g:sum(dim, keep), c:sum(dim, keep), w .. " sum", RED)
                    check(g:mean(dim, keep), c:mean(dim, keep), w .. " mean", RED)
                    local gv, gi = gd:max(dim, keep)
                    local cv, ci = d:max(dim, keep)
                    check(gv, cv, w .. " max values", RED)
                    check(gi, ci, w .. " max indices")
                    gv, gi = gd:min(dim, keep)
                    cv, ci = d:min(dim, keep)
                    check(gv, cv, w .. " min values", RED)
                    check(gi, ci, w .. " min indices")
                    check(gd:argmax(dim, keep), d:argmax(dim, keep), w .. " argmax")
                    check(gd:argmin(dim, keep), d:argmin(dim, keep), w .. " argmin")
                end
            end
            check(g:sum(), c:sum(), dt .. " sum of all", RED)
            check(g:mean(), c:mean(), dt .. " mean of all", RED)
            check(g:max(), c:max(), dt .. " max of all", RED)
            check(g:min(), c:min(), dt .. " min of all", RED)
            check(gd:argmax(), d:argmax(), dt .. " argmax of all")
            check(gd:argmin(), d:argmin(), dt .. " argmin of all")
            -- of a non-contiguous view
            check(g:transpose(1, 3):sum(2), c:transpose(1, 3):sum(2), dt .. " sum of a transposed view", RED)
            check(gd:narrow(3, 2, 4):argmax(3), d:narrow(3, 2, 4):argmax(3), dt .. " argmax of a narrowed view")
        end
        -- a larger float32 sum, where a GPU's summation order differs
        local big = rnd({300, 200}, "float32", -1, 1)
        check(gpu(big):sum(), big:sum(), "float32 sum of 60000", RED)
        check(gpu(big):sum(1), big:sum(1), "float32 sum over dim 1 of 300x200", RED)
        check(gpu(big):mean(2), big:mean(2), "float32 mean over dim 2 of 300x200", RED)
    end)

    it("softmax and log_softmax over each dim match the cpu", function()
        need_gpu()
        math.randomseed(9)
        for _, dt in ipairs({"float32", "float64", "int32"}) do
            local c = rnd({3, 4, 5}, dt, -5, 5)
            local g = gpu(c)
            for _, dim in ipairs({1, 2, 3, -1}) do
                check(g:softmax(dim), c:softmax(dim), fmt("%s softmax dim %d", dt, dim), RED)
                check(g:log_softmax(dim), c:log_softmax(dim), fmt("%s log_softmax dim %d", dt, dim), RED)
            end
            check(g:softmax(), c:softmax(), dt .. " softmax default dim", RED)
        end
        -- large logits stay finite
        local c = ordo.tensor({{1000, 1001, 999}, {-1000, 0, 1000}})
        check(gpu(c):softmax(2), c:softmax(2), "softmax of large logits", RED)
        check(gpu(c):log_softmax(2), c:log_softmax(2), "log_softmax of large logits", RED)
    end)

    it("matmul 2-D, batched, broadcast batch, 1-D and transposed inputs match the cpu", function()
        need_gpu()
        math.randomseed(10)
        for _, dt in ipairs({"float32", "float64"}) do
            local function r(shape) return rnd(shape, dt, -1, 1) end
            local cases = {
                {"2-D", r({7, 5}), r({5, 3})},
                {"batched", r({4, 7, 5}), r({4, 5, 3})},
                {"2-D times batched", r({7, 5}), r({4, 5, 3})},
                {"batched times 2-D", r({4, 7, 5}), r({5, 3})},
                {"batch 1 broadcast", r({1, 7, 5}), r({4, 5, 3})},
                {"vector . vector", r({6}), r({6})},
                {"matrix . vector", r({4, 6}), r({6})},
                {"vector . matrix", r({4}), r({4, 6})},
                {"larger", r({64, 48}), r({48, 40})},
            }
            for _, cs in ipairs(cases) do
                local w, a, b = dt .. " " .. cs[1], cs[2], cs[3]
                check(gpu(a):matmul(gpu(b)), a:matmul(b), w, RED)
            end
            -- transposed (non-contiguous) operands
            local a, b = r({5, 7}), r({3, 5})
            check(gpu(a):t():matmul(gpu(b):t()), a:t():matmul(b:t()), dt .. " aT . bT", RED)
            check(gpu(a):t():matmul(gpu(a)), a:t():matmul(a), dt .. " aT . a", RED)
            local ba, bb = r({4, 5, 7}), r({4, 3, 5})
            check(gpu(ba):transpose(2, 3):matmul(gpu(bb):transpose(2, 3)),
                  ba:transpose(2, 3):matmul(bb:transpose(2, 3)), dt .. " batched transposed", RED)
            check(ordo.matmul(gpu(a), gpu(a):t()), ordo.matmul(a, a:t()), dt .. " ordo.matmul", RED)
            -- empty batches: a 2-D operand or a batch of 1 broadcasts to 0
            local e3, a2 = ordo.zeros({0, 5, 7}, dt), r({3, 5})
            check(gpu(a2):matmul(gpu(e3)), a2:matmul(e3), dt .. " 2-D . empty batch", RED)
            check(gpu(r({1, 3, 5})):matmul(gpu(e3)), r({1, 3, 5}):matmul(e3), dt .. " batch 1 . empty batch", RED)
        end
    end)

    -- kernels/cuda/linalg.cu (the CPU kernel on the simulated device): both
    -- dtypes are computed in double, each step rounded as on the cpu (no
    -- fused multiply-adds), so that a singular matrix is singular on both:
    -- {{1, 2, 3}, {4, 5, 6}, {7, 8, 9}} below has rank 2 on the cpu, and had
    -- full rank on a GPU with fused eliminations (slogdet's gradient finite)
    it("linalg solve, inv, det and slogdet match the cpu: batches, views, singular matrices named", function()
        need_gpu()
        ordo.manual_seed(11)
        for _, dt in ipairs({"float64", "float32"}) do
            local o = {dtype = dt}
            -- one matrix, batches, a size past the kernel's 128 threads, empty ones
            for _, sh in ipairs({{1, 1}, {4, 4}, {3, 6, 6}, {2, 3, 5, 5}, {1, 150, 150}, {0, 3, 3}, {2, 0, 0}}) do
                local n, w = sh[#sh], dt .. " " .. shape_str(sh)
                local A = ordo.randn(sh, o) + ordo.eye(n, o) * 2
                local bs = {unpack(sh)}
                bs[#bs] = 3
                local B = ordo.randn(bs, o)
                check(ordo.linalg.solve(gpu(A), gpu(B)), ordo.linalg.solve(A, B), w .. " solve", RED)
                check(ordo.linalg.inv(gpu(A)), ordo.linalg.inv(A), w .. " inv", RED)
                check(ordo.linalg.det(gpu(A)), ordo.linalg.det(A), w .. " det", RED)
                local s, l = ordo.linalg.slogdet(A)
                local sg, lg = ordo.linalg.slogdet(gpu(A))
                check(sg, s, w .. " slogdet sign", RED)
                check(lg, l, w .. " slogdet logabs", RED)
            end
            -- row swaps (a zero on the diagonal), a negative determinant
            local P = ordo.tensor({{0, 1, 2}, {3, 0, 1}, {1, 1, 0}}, o)
            assert.are.equal(7, ordo.linalg.det(gpu(P)):item())
            assert.are.equal(-7, ordo.linalg.det(-gpu(P)):item())
            -- a NaN below the diagonal is never the pivot, as in the cpu's
            -- scan: the 5 further down is (a NaN taken first by one of the
            -- pivot reduction's threads hid it: a zero pivot, "singular")
            local nan = 0 / 0
            local N = ordo.tensor({{0, 1, 0, 0}, {nan, 0, 1, 0}, {0, 0, 0, 1}, {5, 0, 0, 0}}, o)
            local d = ordo.linalg.det(gpu(N)):item()
            assert(d ~= d, dt .. " det with a NaN under the diagonal: " .. tostring(d) .. ", the cpu's is nan")
            local x = ordo.linalg.solve(gpu(N), gpu(ordo.eye(4, o))):totable()
            assert(x[1][1] ~= x[1][1], dt .. " solve with a NaN under the diagonal: not nan")
            -- a NaN alone under a zero: it is the pivot (was "singular", det 0)
            local Z = gpu(ordo.tensor({{0, 1}, {nan, 0}}, o))
            d = ordo.linalg.det(Z):item()
            assert(d ~= d, dt .. " det with a NaN alone under a zero: " .. tostring(d))
            assert(ordo.linalg.inv(Z):sum():item() ~= ordo.linalg.inv(Z):sum():item(), dt .. " inv: not nan")
            -- strided views: transposed, expanded over the batch; vectors B
            local A = ordo.randn({5, 5}, o) + ordo.eye(5, o) * 2
            check(ordo.linalg.inv(gpu(A):t()), ordo.linalg.inv(A:t()), dt .. " inv of a transposed view", RED)
            local Ae, Aeg = A:unsqueeze(1):expand({4, 5, 5}), gpu(A):unsqueeze(1):expand({4, 5, 5})
            local b = ordo.randn({4, 5}, o)
            check(ordo.linalg.solve(Aeg, gpu(b)), ordo.linalg.solve(Ae, b), dt .. " solve, expanded A", RED)
            check(ordo.linalg.det(Aeg), ordo.linalg.det(Ae), dt .. " det of an expanded batch", RED)
        end
        -- singular matrices: solve and inv fail naming the first of the batch
        -- (the blocks meet them in any order); det gives 0, slogdet (0, -inf)
        local o = {dtype = "float64"}
        local S, I2 = ordo.tensor({{1, 2}, {2, 4}}, o), ordo.eye(2, o)
        local batch = gpu(ordo.stack({I2, I2, S, I2, S}))
        raises(function() return ordo.linalg.inv(gpu(S)):totable() end,
               "linalg.inv: the matrix is singular (a zero pivot in column 2)", "gpu(0)")
        raises(function() return ordo.linalg.solve(batch, batch):totable() end,
               "linalg.solve: matrix 3 of the batch (of 5, counting from 1) is singular", "gpu(0)")
        assert.are.same({1, 1, 0, 1, 0}, ordo.linalg.det(batch):totable())
        local sgn, la = ordo.linalg.slogdet(batch)
        assert.are.same({1, 1, 0, 1, 0}, sgn:totable())
        assert.are.same({0, 0, -huge, 0, -huge}, la:totable())
        -- the input is intact, the device goes on
        assert.are.same({{1, 2}, {2, 4}}, batch[3]:totable())
        assert.are.equal(-2, ordo.linalg.det(gpu(ordo.tensor({{1, 2}, {3, 4}}, o))):item())
        -- gradients (which solve against A) are the cpu's
        local X = ordo.randn({3, 3}, o) + ordo.eye(3, o) * 2
        local xg, xc = gpu(X):requires_grad_(), X:clone():requires_grad_()
        ordo.linalg.det(xg):backward()
        ordo.linalg.det(xc):backward()
        check(xg.grad, xc.grad, "det's gradient", RED)
        ordo.linalg.inv(xg):sum():backward()
        ordo.linalg.inv(xc):sum():backward()
        check(xg.grad, xc.grad, "inv's gradient, accumulated", RED)
        -- det's gradient is the cofactor matrix at singular matrices too
        -- (rank 2 of 3, a shift matrix, rank 1), slogdet's inf and NaN there
        local Z = ordo.tensor({{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}, {{0, 1, 0}, {0, 0, 1}, {0, 0, 0}},
                               {{1, 2, 3}, {2, 4, 6}, {1, 2, 3}}, {{2, 0, 1}, {0, 1, 0}, {1, 0, 3}}}, o)
        local zg, zc = gpu(Z):requires_grad_(), Z:clone():requires_grad_()
        ordo.linalg.det(zg):sum():backward()
        ordo.linalg.det(zc):sum():backward()
        check(zg.grad, zc.grad, "det's gradient at singular matrices", RED)
        assert.are.same({{0, 0, 0}, {0, 0, 0}, {1, 0, 0}}, zg.grad[2]:totable())
        local sg, sc = gpu(Z):requires_grad_(), Z:clone():requires_grad_()
        select(2, ordo.linalg.slogdet(sg)):sum():backward()
        select(2, ordo.linalg.slogdet(sc)):sum():backward()
        check(sg.grad, sc.grad, "slogdet's gradient at singular matrices", RED)
        -- infinities make NaNs on the way (inf - inf): a NaN on the diagonal
        -- stays the pivot, as the cpu's scan; a trailing block all NaN was
        -- taken as a pivot at the reduction's "no candidate" index (-1), and
        -- its row swap gave finite gradients where the cpu's are NaN
        local inf = huge
        for _, m in ipairs({{{2, -inf}, {1, inf}}, {{2, inf, 1}, {inf, inf, -1}, {1, 1, 2}}}) do
            local M = ordo.tensor(m, o)
            for _, f in ipairs({ordo.linalg.det, function(x) return select(2, ordo.linalg.slogdet(x)) end}) do
                local mg, mc = gpu(M):requires_grad_(), M:clone():requires_grad_()
                f(mg):backward()
                f(mc):backward()
                check(mg.grad, mc.grad, "a gradient of a matrix with infinities", RED)
            end
        end
    end)
end)

-- ---------------------------------------------------------------- indexing

-- Sizes of many blocks: grid-stride loops, several blocks per row or
-- column, split reductions, tiled copies (the shapes above fit one block).
describe("gpu tensors: many blocks", function()
    it("ops on large tensors (long rows and columns, views, broadcasting) match the cpu", function()
        need_gpu()
        math.randomseed(23)
        local a = rnd({300, 257}, "float32", -1, 1) -- 77,100 elements
        local b = rnd({257}, "float32", -1, 1)
        local ga, gb = gpu(a), gpu(b)
        check(ga + gb, a + b, "broadcast add")
        check(ga:t():contiguous(), a:t():contiguous(), "transposed copy")
        check(ga:t() * 3 - 1, a:t() * 3 - 1, "scalar ops on a transposed view")
        check(ga:exp(), a:exp(), "exp")
        check(ga:gt(gb), a:gt(b), "comparison")
        check(ordo.where(ga:gt(0), ga, gb), ordo.where(a:gt(0), a, b), "where")
        check(ga:to("float64"), a:to("float64"), "cast")
        for dim = 1, 2 do
            local w = " over dim " .. dim
            check(ga:softmax(dim), a:softmax(dim), "softmax" .. w, RED)
            check(ga:log_softmax(dim), a:log_softmax(dim), "log_softmax" .. w, RED)
            check(ga:sum(dim), a:sum(dim), "sum" .. w, RED)
            check(ga:max(dim), a:max(dim), "max" .. w, RED)
            check(ga:argmin(dim), a:argmin(dim), "argmin" .. w)
            check(ga:cumsum(dim), a:cumsum(dim), "cumsum" .. w, RED)
            local gv, gi = ga:sort(dim)
            local cv, ci = a:sort(dim)
            check(gv, cv, "sort values" .. w)
            check(gi, ci, "sort indices" .. w)
        end
        local long = rnd({2, 100000}, "float64", 0, 1)
        local gl = gpu(long)
        check(gl:sum(2), long:sum(2), "sum of rows of 100000", RED)
        check(gl:softmax(2), long:softmax(2), "softmax of rows of 100000", RED)
        check(gl:t():sum(1), long:t():sum(1), "sum of columns of 100000", RED)
        local rows = ordo.randint(1, 301, {5000})
        local picked = a:index_select(1, rows)
        check(ga:index_select(1, gpu(rows)), picked, "index_select of 5000 rows")
        local base = rnd({300, 257}, "float32", 0, 1)
        check(gpu(base):index_add(1, gpu(rows), gpu(picked)), base:index_add(1, rows, picked), "index_add of 5000 rows",
              RED)
        local m1, m2 = rnd({130, 70}, "float32", -1, 1), rnd({70, 90}, "float32", -1, 1)
        check(gpu(m1):matmul(gpu(m2)), m1:matmul(m2), "matmul 130x70 by 70x90", RED)
    end)

    -- The tiled transpose (kernels/cuda/copy.cu) loops over batches beyond
    -- gridDim.z's 65,535, so its blocks take two tiles each here: the tile
    -- in shared memory must not be refilled before every thread has read
    -- the last one (on the CUDA emulation, a missing barrier there fails).
    it("a transpose copy of more batches than a grid dim holds matches the cpu", function()
        need_gpu()
        local nb = 65535 + 2
        -- uint8 (the simulated device's 64 MB hold it), each batch its own values
        local x = (ordo.arange(0, nb * 256, {dtype = "int32"}):view(nb, 16, 16) +
                   ordo.arange(0, nb, {dtype = "int32"}):view(nb, 1, 1) * 37):to("uint8")
        local want = x:transpose(2, 3):contiguous()
        local got = gpu(x):transpose(2, 3):contiguous()
        assert.equals(G, got:device())
        assert.is_true(ordo.equal(got:cpu(), want), "the transposed batches differ from the cpu's")
        assert.is_true(ordo.equal(got:narrow(1, nb - 1, 2):cpu(), want:narrow(1, nb - 1, 2)))
    end)
end)

describe("gpu tensors: indexing", function()
    it("t[{...}] with index tensors, t[mask] of the leading dims and t[mask] = values match the cpu", function()
        need_gpu()
        local x = ordo.arange(24):view(2, 3, 4)
        local gx = gpu(x)
        local i, j = ordo.tensor({1, 3}, "int64"), ordo.tensor({2, 4}, "int64")
        check(gx[{{}, gpu(i), gpu(j)}], x[{{}, i, j}], "adjacent index tensors")
        check(gx[{gpu(i:narrow(1, 1, 1)), {}, gpu(j)}], x[{i:narrow(1, 1, 1), {}, j}], "separated index tensors")
        local m = ordo.tensor({{1, 0, 1}, {0, 1, 0}}, "uint8")
        check(gx[gpu(m)], x[m], "a mask of the leading dims")
        local gy, y = gpu(x), x:clone()
        gy[{{}, gpu(i), gpu(j)}] = gpu(ordo.tensor({{-1, -2}, {-3, -4}}))
        y[{{}, i, j}] = ordo.tensor({{-1, -2}, {-3, -4}})
        gy[gpu(m)] = gpu(ordo.tensor({7, 8, 9}):view(3, 1))
        y[m] = ordo.tensor({7, 8, 9}):view(3, 1)
        check(gy, y, "writes")
    end)

    it("gather, index_select, scatter_add and index_add match the cpu", function()
        need_gpu()
        math.randomseed(11)
        for _, dt in ipairs(DTYPES) do
            local x = rnd({5, 6}, dt, -50, 50)
            local gx = gpu(x)
            -- gather along each dim (indices from 1)
            local i1 = rnd({3, 6}, "int64", 1, 5)
            local i2 = rnd({5, 4}, "int64", 1, 6)
            check(gx:gather(1, gpu(i1)), x:gather(1, i1), dt .. " gather dim 1")
            check(gx:gather(2, gpu(i2)), x:gather(2, i2), dt .. " gather dim 2")
            check(gx:gather(2, gpu(i2:int())), x:gather(2, i2:int()), dt .. " gather int32 index")
            -- index_select with a tensor, an int32 tensor and a Lua table
            local sel = rnd({7}, "int64", 1, 5)
            check(gx:index_select(1, gpu(sel)), x:index_select(1, sel), dt .. " index_select dim 1")
            check(gx:index_select(2, {6, 1, 1, 3}), x:index_select(2, {6, 1, 1, 3}), dt .. " index_select table")
            check(gx:index_select(2, gpu(ordo.tensor({2, 2}, "int32"))), x:index_select(2, ordo.tensor({2, 2}, "int32")),
                  dt .. " index_select int32")
            check(gx:t():index_select(1, {2, 4}), x:t():index_select(1, {2, 4}), dt .. " index_select of a view")
            -- scatter_add / index_add with repeated indices (they add up)
            local src = rnd({3, 6}, dt, 0, 20)
            local base = rnd({5, 6}, dt, 0, 20)
            local tol = FLOAT[dt] and RED or nil
            check(gpu(base):scatter_add(1, gpu(i1), gpu(src)), base:scatter_add(1, i1, src), dt .. " scatter_add", tol)
            local s2 = rnd({5, 4}, dt, 0, 20)
            local gb, cb = gpu(base), base:clone()
            gb:scatter_add_(2, gpu(i2), gpu(s2))
            cb:scatter_add_(2, i2, s2)
            check(gb, cb, dt .. " scatter_add_ dim 2", tol)
            local idx = ordo.tensor({2, 5, 2}, "int64")
            local s3 = rnd({3, 6}, dt, 0, 20)
            check(gpu(base):index_add(1, gpu(idx), gpu(s3)), base:index_add(1, idx, s3), dt .. " index_add", tol)
            local s4 = rnd({5, 2}, dt, 0, 20)
            gb, cb = gpu(base), base:clone()
            gb:index_add_(2, {6, 6}, gpu(s4))
            cb:index_add_(2, {6, 6}, s4)
            check(gb, cb, dt .. " index_add_ table index", tol)
        end
    end)

    it("cat, stack, views and in-place ops through views on gpu storage match the cpu", function()
        need_gpu()
        math.randomseed(12)
        local a, b = rnd({2, 3}, "float32", -1, 1), rnd({4, 3}, "float32", -1, 1)
        check(ordo.cat({gpu(a), gpu(b)}, 1), ordo.cat({a, b}, 1), "cat dim 1")
        check(ordo.stack({gpu(a), gpu(a)}, 2), ordo.stack({a, a}, 2), "stack dim 2")
        local x = ordo.zeros({6, 6}, {device = G})
        local y = ordo.zeros({6, 6})
        for _, t in ipairs({x, y}) do
            t:narrow(1, 2, 3):fill_(1)
            t:narrow(2, 4, 2):add_(2)
            t:add_(t:t())                -- aliasing operand: read from a copy
            t:select(1, 6):mul_(-1)
            t:view(36):narrow(1, 30, 5):sub_(0.5)
        end
        check(x, y, "views writing into one storage")
        check(x:reshape({3, 12}), y:reshape({3, 12}), "reshape")
        check(x:t():contiguous(), y:t():contiguous(), "contiguous of a transposed view")
        check(x:t():reshape({36}), y:t():reshape({36}), "reshape that copies")
        check(x:unsqueeze(1):expand({2, 6, 6}):sum(1), y:unsqueeze(1):expand({2, 6, 6}):sum(1), "expand", RED)
    end)

    it("ops made of ops (lua/ordo/derived.lua) match the cpu", function()
        need_gpu()
        math.randomseed(13)
        local m, v = rnd({3, 4}, "float32", -2, 2), rnd({4}, "float32", -2, 2)
        local sq, b3 = rnd({4, 4}, "float64", -1, 1), rnd({2, 3, 4}, "float32", -1, 1)
        local odd = ordo.tensor({1, 0 / 0, huge, -huge, -0.5})
        local ints = rnd({5}, "int64", -9, 9)
        local cases = {
            {"mm", function(x, y) return x:mm(y) end, m, m:t():contiguous(), RED},
            {"bmm", function(x, y) return x:bmm(y) end, b3, b3:transpose(2, 3):contiguous(), RED},
            {"mv", function(x, y) return x:mv(y) end, m, v, RED},
            {"trace", function(x) return x:trace() end, sq, nil, RED},
            {"log2", function(x) return x:abs():log2() end, m},
            {"log10", function(x) return x:abs():log10() end, m},
            {"isnan", function(x) return x:isnan() end, odd},
            {"isinf", function(x) return x:isinf() end, odd},
            {"isfinite", function(x) return x:isfinite() end, odd},
            {"nan_to_num", function(x) return x:nan_to_num(0, 9, -9) end, odd},
            {"lerp", function(x, y) return x:lerp(y, 0.25) end, m, m:t():contiguous():t()},
            {"fmod", function(x) return x:fmod(0.75) end, m},
            {"remainder", function(x) return x:remainder(-0.75) end, m},
            {"remainder int64", function(x) return x:remainder(4) end, ints},
            {"roll", function(x) return x:roll({1, -2}, {1, 2}) end, m},
            {"tile", function(x) return x:tile(2, 1, 2) end, m},
            {"one_hot", function(x) return ordo.nn.functional.one_hot(x:abs() + 1) end, ints},
        }
        for _, c in ipairs(cases) do
            local name, fn, x, y, tol = c[1], c[2], c[3], c[4], c[5]
            check(fn(gpu(x), y and gpu(y)), fn(x, y), name, tol)
        end
    end)
end)

-- ---------------------------------------------------------------- autograd, nn, optim

describe("gpu tensors: autograd, nn and optimisers", function()
    -- The same computation on device dev from the same inputs: its loss and
    -- the gradients of the leaves.
    local function graph(dev, inputs)
        local a = inputs.a:to(dev):requires_grad()
        local b = inputs.b:to(dev):requires_grad()
        local m = inputs.m:to(dev):requires_grad()
        local idx = inputs.idx:to(dev)
        local h = (a * b + 0.5):tanh()                    -- broadcast b over rows
        local s = h:softmax(2):log_softmax(1)
        local p = a:matmul(m):relu()
        local g = a:gather(2, idx):sigmoid()
        local q = a:index_select(1, {3, 1, 3}):exp():mean()
        local r = b:cumprod(1):sum() + a:prod(2):mean()
        local loss = s:sum() * 0.1 + p:pow(2):mean() + (g * g):sum() + q + (a - b):abs():max() + a:sum(1):mean() + r
        loss:backward()
        return loss, a.grad, b.grad, m.grad
    end

    it("backward through a graph of gpu tensors matches the cpu", function()
        need_gpu()
        math.randomseed(13)
        for _, dt in ipairs({"float32", "float64"}) do
            local inputs = {a = rnd({4, 5}, dt, -1, 1), b = rnd({5}, dt, -1, 1), m = rnd({5, 3}, dt, -1, 1),
                            idx = rnd({4, 2}, "int64", 1, 5)}
            local gl, ga, gb, gm = graph(G, inputs)
            local cl, ca, cb, cm = graph(CPU, inputs)
            check(gl, cl, dt .. " loss", RED)
            check(ga, ca, dt .. " grad a", RED)
            check(gb, cb, dt .. " grad b", RED)
            check(gm, cm, dt .. " grad m", RED)
        end
    end)

    it("conv2d and max_pool2d forward and backward match the cpu", function()
        need_gpu()
        math.randomseed(14)
        local F = ordo.nn.functional
        for _, dt in ipairs({"float32", "float64"}) do
            for _, o in ipairs({{stride = 1, padding = 1}, {stride = 2, padding = 0}, {stride = 1, padding = 2, dilation = 2}}) do
                local x, w, b = rnd({2, 3, 9, 9}, dt, -1, 1), rnd({4, 3, 3, 3}, dt, -1, 1), rnd({4}, dt, -1, 1)
                local out = {}
                for _, dev in ipairs({G, CPU}) do
                    local xd, wd, bd = x:to(dev):requires_grad(), w:to(dev):requires_grad(), b:to(dev):requires_grad()
                    local y = F.conv2d(xd, wd, bd, o)
                    local p, idx = F.max_pool2d(y, 2, {return_indices = true})
                    local loss = (p * p):sum() + y:mean()
                    loss:backward()
                    out[#out + 1] = {y = y, p = p, idx = idx, loss = loss, gx = xd.grad, gw = wd.grad, gb = bd.grad}
                end
                local g, c = out[1], out[2]
                local w_ = fmt("%s stride %d padding %d", dt, o.stride, o.padding)
                check(g.y, c.y, w_ .. " conv2d", RED)
                check(g.p, c.p, w_ .. " max_pool2d", RED)
                check(g.idx, c.idx, w_ .. " max_pool2d indices")
                check(g.loss, c.loss, w_ .. " loss", RED)
                check(g.gx, c.gx, w_ .. " grad x", RED)
                check(g.gw, c.gw, w_ .. " grad weight", RED)
                check(g.gb, c.gb, w_ .. " grad bias", RED)
            end
            -- max_pool2d's dilation and ceil_mode (windows clipped at the end), forward and backward
            for ci, po in ipairs({{3, {stride = 2, ceil_mode = true}}, {2, {dilation = 2, padding = 1}},
                                 {{3, 2}, {stride = {2, 3}, dilation = {2, 3}, ceil_mode = true, padding = 1}}}) do
                local x = rnd({2, 3, 10, 11}, dt, -1, 1)
                local got = {}
                for _, dev in ipairs({G, CPU}) do
                    local xd = x:to(dev):requires_grad()
                    local o = {return_indices = true}
                    for k, v in pairs(po[2]) do o[k] = v end
                    local p, idx = F.max_pool2d(xd, po[1], o)
                    ;(p * p):sum():backward()
                    got[#got + 1] = {p = p, idx = idx, gx = xd.grad}
                end
                local w_ = fmt("%s max_pool2d case %d", dt, ci)
                check(got[1].p, got[2].p, w_, RED)
                check(got[1].idx, got[2].idx, w_ .. " indices")
                check(got[1].gx, got[2].gx, w_ .. " grad", RED)
            end
            -- the 1-D ops, the 2-D ones over a height of 1
            local x, w = rnd({2, 3, 12}, dt, -1, 1), rnd({4, 3, 3}, dt, -1, 1)
            local y1 = {}
            for _, dev in ipairs({G, CPU}) do
                local y = F.conv1d(x:to(dev), w:to(dev), {padding = 1, dilation = 2})
                y1[#y1 + 1] = {y = y, m = F.max_pool1d(y, 2), a = F.avg_pool1d(y, 3, {stride = 1})}
            end
            check(y1[1].y, y1[2].y, dt .. " conv1d", RED)
            check(y1[1].m, y1[2].m, dt .. " max_pool1d", RED)
            check(y1[1].a, y1[2].a, dt .. " avg_pool1d", RED)
            -- conv_transpose2d, forward and backward
            local xt, wt, bt = rnd({2, 3, 4, 4}, dt, -1, 1), rnd({3, 2, 3, 3}, dt, -1, 1), rnd({2}, dt, -1, 1)
            local tr = {}
            for _, dev in ipairs({G, CPU}) do
                local xd, wd, bd = xt:to(dev):requires_grad(), wt:to(dev):requires_grad(), bt:to(dev):requires_grad()
                local y = F.conv_transpose2d(xd, wd, bd, {stride = 2, padding = 1, output_padding = 1})
                ;(y * y):sum():backward()
                tr[#tr + 1] = {y = y, gx = xd.grad, gw = wd.grad, gb = bd.grad}
            end
            for _, k in ipairs({"y", "gx", "gw", "gb"}) do check(tr[1][k], tr[2][k], dt .. " conv_transpose2d " .. k, RED) end
            -- interpolate and group_norm (made of index_select and reductions), with gradients
            local xi = rnd({2, 4, 3, 5}, dt, -1, 1)
            local rs = {}
            for _, dev in ipairs({G, CPU}) do
                local xd = xi:to(dev):requires_grad()
                local y = F.interpolate(F.group_norm(xd, 2), {size = {5, 8}, mode = "bilinear"})
                ;(y * y):sum():backward()
                rs[#rs + 1] = {y = y, n = F.interpolate(xd, {scale_factor = 2}), gx = xd.grad}
            end
            for _, k in ipairs({"y", "n", "gx"}) do check(rs[1][k], rs[2][k], dt .. " interpolate/group_norm " .. k, RED) end
            -- avg_pool2d's ceil_mode and divisor_override, adaptive max pooling, max_unpool2d,
            -- InstanceNorm2d with running statistics, a circular-padded Conv2d, conv_transpose1d
            local xa = rnd({2, 4, 7, 6}, dt, -1, 1)
            local w1 = rnd({4, 3, 3}, dt, -1, 1)
            local conv = ordo.nn.Conv2d(4, 2, 3, {padding = 1, padding_mode = "circular", dtype = dt})
            local more = {}
            for _, dev in ipairs({G, CPU}) do
                local xd = xa:to(dev):requires_grad()
                local inorm = ordo.nn.InstanceNorm2d(4, {affine = true, track_running_stats = true, dtype = dt,
                                                         device = dev})
                conv:to(dev)
                local p, idx = F.max_pool2d(xd, 2, {return_indices = true})
                local r = {a = F.avg_pool2d(xd, 3, {stride = 2, padding = 1, ceil_mode = true,
                                                    count_include_pad = false}),
                           d = F.avg_pool2d(xd, 3, {stride = 2, ceil_mode = true, divisor_override = 4}),
                           m = F.adaptive_max_pool2d(xd, {3, 4}), u = F.max_unpool2d(p, idx, 2, {output_size = {7, 6}}),
                           i = inorm(xd), c = conv(xd), t = F.conv_transpose1d(xd[1]:reshape(4, 42), w1:to(dev), nil,
                                                                              {stride = 2, dilation = 3,
                                                                               output_padding = 2})}
                r.f = F.fold(F.unfold(xd, {3, 2}, {padding = 1, stride = {2, 1}}), {7, 6}, {3, 2},
                             {padding = 1, stride = {2, 1}})
                local total = r.a:sum() + r.d:sum() + (r.m * r.m):sum() + (r.u * r.u):sum() + (r.i * r.i):sum()
                    + (r.c * r.c):sum() + (r.t * r.t):sum() + (r.f * r.f):sum()
                total:backward()
                r.gx, r.rv = xd.grad, inorm.running_var
                more[#more + 1] = r
            end
            for _, k in ipairs({"a", "d", "m", "u", "i", "c", "t", "f", "gx", "rv"}) do
                check(more[1][k], more[2][k], dt .. " pooling/instance_norm/padding_mode " .. k, RED)
            end
        end
    end)

    local function make_model(dev)
        local nn = ordo.nn
        local m = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
        if dev then m:to(dev) end
        return m
    end

    it("SGD, Adam, Adamax, NAdam, RAdam, Adadelta and Rprop steps of a small model on the gpu equal the cpu's", function()
        need_gpu()
        math.randomseed(15)
        local x = rnd({16, 6}, "float32", -1, 1)
        local y = rnd({16}, "int64", 1, 3)
        local configs = {
            {"SGD", {lr = 0.1}},
            {"SGD", {lr = 0.05, momentum = 0.9, weight_decay = 1e-3, nesterov = true}},
            {"Adam", {lr = 0.01}},
            {"Adam", {lr = 0.02, weight_decay = 1e-2}},
            {"Adamax", {lr = 0.01}}, {"NAdam", {lr = 0.01}}, {"RAdam", {lr = 0.01, beta2 = 0.9}},
            {"Adadelta", {}}, {"Rprop", {lr = 0.01}},
        }
        for _, cfg in ipairs(configs) do
            local runs = {}
            for k, dev in ipairs({G, CPU}) do
                ordo.manual_seed(21) -- the same initial weights (drawn on the cpu)
                local m = make_model(dev)
                local opt = ordo.optim[cfg[1]](m:parameters(), cfg[2])
                local crit = ordo.nn.CrossEntropyLoss()
                local xd, yd = x:to(dev), y:to(dev)
                local losses = {}
                for step = 1, 5 do
                    opt:zero_grad()
                    local loss = crit(m(xd), yd)
                    loss:backward()
                    opt:step()
                    losses[step] = loss
                end
                runs[k] = {m = m, losses = losses}
            end
            local name = cfg[1] .. (cfg[2].momentum and " with momentum" or "") .. (cfg[2].weight_decay and " with weight decay" or "")
            for step = 1, 5 do check(runs[1].losses[step], runs[2].losses[step], fmt("%s loss at step %d", name, step), RED) end
            local gp, cp = runs[1].m:named_parameters(), runs[2].m:named_parameters()
            for i, e in ipairs(gp) do
                assert.equals(G, e.tensor:device())
                check(e.tensor, cp[i].tensor, name .. " " .. e.name .. " after 5 steps", RED)
            end
        end
    end)

    -- The spec above passes with the elementwise fallback too; this one
    -- checks that a contiguous gpu parameter is updated by the fused kernel
    -- (one op per parameter), and that it agrees with the fallback.
    it("SGD and Adam on gpu parameters run the fused update kernels, equal to the elementwise form", function()
        need_gpu()
        assert.is_true(ordo.engine.has_kernel("adam_step", "gpu"))
        assert.is_true(ordo.engine.has_kernel("sgd_step", "gpu"))
        math.randomseed(16)
        for _, cfg in ipairs({{"Adam", {lr = 0.02, weight_decay = 1e-2}, "adam_step"},
                              {"SGD", {lr = 0.05, momentum = 0.9, nesterov = true}, "sgd_step"}}) do
            local base = rnd({6, 4}, "float32", -1, 1)
            local fused = base:to(G):requires_grad()                  -- contiguous: the fused kernel
            local plain = base:t():contiguous():to(G):t():requires_grad() -- a transposed view: elementwise
            local of = ordo.optim[cfg[1]]({fused}, cfg[2])
            local op = ordo.optim[cfg[1]]({plain}, cfg[2])
            ordo.engine.wait_for_all()
            ordo.profiler.clear()
            ordo.profiler.start()
            for step = 1, 3 do
                for _, pair in ipairs({{of, fused}, {op, plain}}) do
                    pair[1]:zero_grad()
                    local loss = (pair[2] * pair[2]):sum() + pair[2]:sum() * step
                    loss:backward()
                    pair[1]:step()
                end
            end
            ordo.engine.wait_for_all()
            ordo.profiler.stop()
            local summary = ordo.profiler.summary()
            ordo.profiler.clear()
            local count = tonumber(summary:match("\n" .. cfg[3] .. "%s+(%d+)"))
            assert.equals(3, count, cfg[3] .. " ops in the profile:\n" .. summary)
            check(fused, plain, cfg[1] .. ": fused and elementwise updates", RED)
        end
    end)

    it("random ops on the gpu: shapes, ranges, moments; the same seed gives the same numbers", function()
        need_gpu()
        local n = 20000
        ordo.manual_seed(5)
        local u = ordo.rand({100, n / 100}, {device = G})
        assert.equals(G, u:device())
        assert.same({100, n / 100}, u:shape())
        assert.is_true(u:min():item() >= 0 and u:max():item() < 1)
        assert.is_true(abs(u:mean():item() - 0.5) < 0.02)
        local z = ordo.randn({n}, {device = G, dtype = "float64"})
        assert.equals("float64", z:dtype())
        local mean = z:mean():item()
        local std = math.sqrt(((z - mean) ^ 2):mean():item())
        assert.is_true(abs(mean) < 0.05, "randn mean " .. mean)
        assert.is_true(abs(std - 1) < 0.05, "randn std " .. std)
        local v = ordo.empty({n}, {device = G}):uniform_(-2, 3)
        assert.is_true(v:min():item() >= -2 and v:max():item() < 3)
        assert.is_true(abs(v:mean():item() - 0.5) < 0.1)
        local nm = ordo.empty({n}, {device = G}):normal_(5, 2)
        assert.is_true(abs(nm:mean():item() - 5) < 0.1)
        local bern = ordo.bernoulli({n}, 0.3, {device = G, dtype = "int32"})
        assert.equals("int32", bern:dtype())
        assert.is_true(bern:eq(0):add(bern:eq(1)):int():sum():item() == n, "bernoulli gives 0 or 1")
        assert.is_true(abs(bern:float():mean():item() - 0.3) < 0.02)
        -- the same seed, the same gpu numbers; another seed, others
        local function draw(seed)
            ordo.manual_seed(seed)
            local a = ordo.randn({64}, {device = G})
            local b = ordo.rand({3, 5}, {device = G, dtype = "float64"})
            local c = ordo.empty({32}, {device = G}):bernoulli_(0.5)
            return {a:totable(), b:totable(), c:totable()}
        end
        local d1 = draw(42)
        assert.same(d1, draw(42))
        assert.are_not.same(d1[1], draw(43)[1])
        ordo.manual_seed(5489) -- back to the default seed
    end)

    it("get_rng_state / set_rng_state of the gpu's generator replay its draws (dropout too)", function()
        need_gpu()
        ordo.manual_seed(9)
        ordo.rand({3}, {device = G})
        local st = ordo.get_rng_state(G)
        assert.equals(CPU, st:device())
        local a = ordo.randn({33}, {device = G}):totable()
        local d = ordo.nn.Dropout(0.5)(ordo.ones({40}, {device = G})):totable()
        ordo.rand({50}, {device = G})
        ordo.set_rng_state(st, G)
        assert.same(a, ordo.randn({33}, {device = G}):totable())
        assert.same(d, ordo.nn.Dropout(0.5)(ordo.ones({40}, {device = G})):totable())
        -- the generators are one format (Philox): the cpu's state replays on the gpu
        ordo.set_rng_state(st)
        assert.same(a, ordo.randn({33}):totable())
        -- multinomial: the cpu's draws, and its checks on the device
        local w = ordo.tensor({{1, 0, 2, 5}, {3, 3, 0, 1}})
        ordo.manual_seed(12)
        local on_cpu = {w:multinomial(3):totable(), w:multinomial(9, true):totable()}
        ordo.manual_seed(12)
        local wg = w:to(G)
        local d1, d2 = wg:multinomial(3), wg:multinomial(9, true)
        assert.equals(G, d1:device())
        assert.same(on_cpu, {d1:totable(), d2:totable()})
        H.raises(function() return ordo.tensor({1, -2}):to(G):multinomial(1):totable() end, "check_range",
                 "value -2 at element 2")
        H.raises(function() return ordo.tensor({1, 0}):to(G):multinomial(2):totable() end, "check_range",
                 "value 1 at element 1 is outside")
        ordo.manual_seed(5489) -- back to the default seed
    end)

    it("multi-head attention forward and backward match the cpu", function()
        need_gpu()
        for _, dt in ipairs({"float32", "float64"}) do
            ordo.manual_seed(17)
            local mc = ordo.nn.MultiheadAttention(8, 2, {dtype = dt})
            local mg = ordo.nn.MultiheadAttention(8, 2, {dtype = dt})
            for i, p in ipairs(mg:parameters()) do ordo.no_grad(function() p:copy_(mc:parameters()[i]) end) end
            mg:to(G)
            local x = rnd({5, 2, 8}, dt, -1, 1)
            local out = {}
            for _, c in ipairs({{mg, G}, {mc, CPU}}) do
                local xd = x:to(c[2]):requires_grad()
                local y, w = c[1](xd, xd, xd, {is_causal = true})
                ;(y * y):sum():backward()
                out[#out + 1] = {y = y, w = w, gx = xd.grad, gw = c[1].in_proj_weight.grad}
            end
            for _, k in ipairs({"y", "w", "gx", "gw"}) do check(out[1][k], out[2][k], dt .. " attention " .. k, RED) end
        end
    end)

    it("a Transformer (kdim/vdim, add_bias_kv, add_zero_attn attention inside) matches the cpu", function()
        need_gpu()
        local nn = ordo.nn
        ordo.manual_seed(19)
        local tf = nn.Transformer({d_model = 8, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1,
                                   dim_feedforward = 6, dropout = 0, batch_first = true, dtype = "float64"})
        local tg = nn.Transformer({d_model = 8, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1,
                                   dim_feedforward = 6, dropout = 0, batch_first = true, dtype = "float64"})
        tg:load_state_dict(tf:state_dict())
        tg:to(G)
        local src, tgt = rnd({2, 5, 8}, "float64", -1, 1), rnd({2, 3, 8}, "float64", -1, 1)
        local pad = ordo.tensor({{0, 0, 0, 1, 1}, {0, 0, 0, 0, 0}}, "uint8")
        local mask = nn.Transformer.generate_square_subsequent_mask(3, {dtype = "float64"})
        local yc = tf(src, tgt, {tgt_mask = mask, src_key_padding_mask = pad, memory_key_padding_mask = pad})
        local yg = tg(src:to(G), tgt:to(G), {tgt_mask = mask:to(G), src_key_padding_mask = pad:to(G),
                                             memory_key_padding_mask = pad:to(G)})
        check(yg, yc, "transformer", RED)
        local mc = nn.MultiheadAttention(4, 2, {kdim = 3, vdim = 5, add_bias_kv = true, add_zero_attn = true,
                                                dtype = "float64"})
        local mg = nn.MultiheadAttention(4, 2, {kdim = 3, vdim = 5, add_bias_kv = true, add_zero_attn = true,
                                                dtype = "float64"})
        mg:load_state_dict(mc:state_dict())
        mg:to(G)
        local q, k, v = rnd({3, 4}, "float64", -1, 1), rnd({2, 3}, "float64", -1, 1), rnd({2, 5}, "float64", -1, 1)
        local y1, w1 = mc(q, k, v)
        local y2, w2 = mg(q:to(G), k:to(G), v:to(G))
        check(y2, y1, "unbatched attention", RED)
        check(w2, w1, "unbatched attention weights", RED)
        -- a mask left on the cpu is named
        H.raises(function() return mg(q:to(G), k:to(G), v:to(G), {key_padding_mask = ordo.zeros({2}, "uint8")}) end,
                 "MultiheadAttention: expected all tensors on one device", "(key_padding_mask)")
    end)

    it("recurrent layers (LSTM, GRU, RNN) forward and backward match the cpu", function()
        need_gpu()
        local nn = ordo.nn
        math.randomseed(17)
        local x = rnd({5, 3, 4}, "float32", -1, 1)
        for _, make in ipairs({
            function() return nn.LSTM(4, 6, {num_layers = 2}) end,
            function() return nn.GRU(4, 6) end,
            function() return nn.RNN(4, 6, {nonlinearity = "relu"}) end,
        }) do
            ordo.manual_seed(32)
            local mc = make()
            ordo.manual_seed(32)
            local mg = make():to(G)
            local oc, hc = mc(x)
            local og, hg = mg(gpu(x))
            check(og, oc, tostring(mc) .. " output", RED)
            check(hg, hc, tostring(mc) .. " h_n", RED)
            oc:sum():backward()
            og:sum():backward()
            local pc, pg = mc:parameters(), mg:parameters()
            for i = 1, #pc do check(pg[i].grad, pc[i].grad, "gradient " .. i, RED) end
        end
    end)

    it("Module:to(gpu) moves parameters and buffers; forward, save and load match the cpu", function()
        need_gpu()
        local nn = ordo.nn
        math.randomseed(16)
        local function build()
            ordo.manual_seed(31)
            return nn.Sequential(nn.Conv2d(2, 3, 3, {padding = 1}), nn.BatchNorm2d(3), nn.ReLU(), nn.MaxPool2d(2),
                                 nn.Flatten(), nn.Linear(3 * 4 * 4, 5), nn.BatchNorm1d(5), nn.LogSoftmax())
        end
        local mc, mg = build(), build():to(G)
        for _, e in ipairs(mg:state_dict()) do
            assert.equals(G, e.tensor:device(), e.name .. " is not on the gpu")
        end
        for _, e in ipairs(mg:named_parameters()) do assert.is_true(e.tensor:needs_grad(), e.name) end
        local x = rnd({4, 2, 8, 8}, "float32", -1, 1)
        check(mg(gpu(x)), mc(x), "forward in training mode", RED)
        -- the batch-norm running statistics moved the same way
        local gs, cs = mg:state_dict(), mc:state_dict()
        for i, e in ipairs(gs) do check(e.tensor, cs[i].tensor, e.name .. " after one forward", RED) end
        mg:eval()
        mc:eval()
        check(mg(gpu(x)), mc(x), "forward in eval mode", RED)
        -- save from the gpu; load into a cpu model and into another gpu model
        local path = os.tmpname()
        mg:save(path)
        local back_c = build()
        back_c:load(path)
        local back_g = build():to(G)
        back_g:load(path)
        os.remove(path)
        for i, e in ipairs(gs) do
            assert.same(e.tensor:totable(), back_c:state_dict()[i].tensor:totable(), e.name .. " loaded on the cpu")
            check(back_g:state_dict()[i].tensor, e.tensor:to(CPU), e.name .. " loaded on the gpu", {float32 = {0, 0}})
        end
        -- to(dtype) on a gpu model
        mg:to("float64")
        assert.equals("float64", mg:parameters()[1]:dtype())
        assert.equals(G, mg:parameters()[1]:device())
    end)

    it("batch_norm, layer_norm and group_norm statistics of float32 features far from 0 (the mean's rounding)",
       function()
        need_gpu()
        local nn, F = ordo.nn, ordo.nn.functional
        -- 1e7 and 1e7 + 1 alternating: the mean 1e7 + 0.5 is no float32; about the rounded one alone, the
        -- variance came out 0.5 and the outputs 0 and 2 (the float64 reference: 0.25, -1 and 1)
        local x = gpu(ordo.tensor({1e7, 1e7 + 1, 1e7, 1e7 + 1}))
        local bn = nn.BatchNorm1d(1, {momentum = 1, affine = false}):to(G)
        local want = ordo.tensor({-1, 1, -1, 1})
        check(bn(x:view(4, 1)):view(4), want, "batch_norm", {float32 = {1e-4, 1e-4}})
        check(bn.running_var, ordo.tensor({0.25 * 4 / 3}), "running_var", RED)
        check(F.layer_norm(x:view(1, 4), {4}):view(4), want, "layer_norm", {float32 = {1e-4, 1e-4}})
        check(F.group_norm(x:view(1, 1, 4), 1):view(4), want, "group_norm", {float32 = {1e-4, 1e-4}})
    end)

    it("a loss module moved to the gpu takes its weight and pos_weight along (they stayed on the cpu)", function()
        need_gpu()
        local nn = ordo.nn
        local x = ordo.tensor({{1, 2, 0.5}, {-1, 0.3, 3}})
        local y = ordo.tensor({1, 3}, "int64")
        local ce = nn.CrossEntropyLoss({weight = ordo.tensor({0.3, 1, 2.5}), label_smoothing = 0.1})
        local want = ce(x, y)
        ce:to(G)
        assert.equals(G, ce.weight:device())
        check(ce(gpu(x), gpu(y)), want, "CrossEntropyLoss with a weight", RED)
        local t = ordo.tensor({{1, 0, 1}, {0, 1, 1}})
        local b = nn.BCEWithLogitsLoss({pos_weight = ordo.tensor({2, 3, 4}), weight = ordo.tensor({1, 0.5, 2})})
        local bw = b(x, t)
        b:cuda()
        check(b(gpu(x), gpu(t)), bw, "BCEWithLogitsLoss with weight and pos_weight", RED)
        b:cpu()
        assert.equals(CPU, b.pos_weight:device())
        assert.equals(bw:item(), b(x, t):item())
    end)

    it("Module:to(gpu) keeps tied parameters tied and shared buffers shared; a gpu model's to(dtype) too", function()
        need_gpu()
        local nn = ordo.nn
        local Stats = nn.Module:extend("GpuSharedStats")
        function Stats:init(buf) self:register_buffer("running", buf) end
        function Stats:forward(x) return x end
        ordo.manual_seed(5)
        local a, b = nn.Linear(4, 4), nn.Linear(4, 4)
        b.weight = a.weight -- tied
        local buf = ordo.zeros({4})
        local s1, s2 = Stats(buf), Stats(buf)
        local m = nn.Sequential(a, b, s1, s2)
        local want = a.weight:totable()
        m:to(G)
        assert.equals(3, #m:parameters())
        assert.equals(a.weight, b.weight)
        assert.equals(G, a.weight:device())
        assert.is_true(a.weight:needs_grad() and a.weight:is_leaf())
        assert.equals(s1.running, s2.running)
        assert.equals(G, s1.running:device())
        assert.same(want, a.weight:totable())
        m:to("float64")
        assert.equals(3, #m:parameters())
        assert.equals(a.weight, b.weight)
        assert.equals(s1.running, s2.running)
        assert.equals("float64", b.weight:dtype())
        assert.equals(G, b.weight:device())
        m:to(CPU)
        assert.equals(3, #m:parameters())
        assert.equals(a.weight, b.weight)
        assert.equals(CPU, a.weight:device())
    end)

    it("gradcheck runs on gpu inputs (its weights made on the output's device)", function()
        need_gpu()
        local ag = ordo.autograd
        ordo.manual_seed(6)
        local x = ordo.randn({3}, {dtype = "float64", device = G}):requires_grad()
        assert.is_true(ag.gradcheck(function(v) return (v * v):sum() end, {x}))
        local u = ordo.randn({2, 3}, {dtype = "float64", device = G}):requires_grad()
        local w = ordo.randn({3, 2}, {dtype = "float64", device = G}):requires_grad()
        assert.is_true(ag.gradcheck(function(p, q) return p:matmul(q):tanh() end, {u, w}))
        -- and it still finds a wrong gradient there (half of it detached)
        local ok, err = pcall(ag.gradcheck, function(v) return (v * v):detach() + v end, {x})
        assert.is_false(ok)
        assert.truthy(tostring(err):find("gradcheck: input 1", 1, true), tostring(err))
    end)

    it("an MLP trains on gpu(0): the loss falls", function()
        need_gpu()
        local nn, optim, data = ordo.nn, ordo.optim, ordo.data
        math.randomseed(17)
        -- three blobs in 2-D
        local n = 240
        local xs, ys = {}, {}
        local centres = {{-2, 0}, {2, 0}, {0, 2.5}}
        for i = 1, n do
            local k = (i - 1) % 3 + 1
            xs[i] = {centres[k][1] + (math.random() - 0.5) * 2, centres[k][2] + (math.random() - 0.5) * 2}
            ys[i] = k
        end
        local x = ordo.tensor(xs, {device = G})
        local y = ordo.tensor(ys, {dtype = "int64", device = G})
        ordo.manual_seed(3)
        local model = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 3)):to(G)
        local opt = optim.Adam(model:parameters(), {lr = 0.02})
        local crit = nn.CrossEntropyLoss()
        local first = crit(model(x), y):item()
        local loader = data.loader(x, y, {batch_size = 40, shuffle = true})
        local last
        for _ = 1, 15 do
            for _, xb, yb in loader:iter() do
                assert.equals(G, xb:device())
                opt:zero_grad()
                local loss = crit(model(xb), yb)
                loss:backward()
                opt:step()
                last = loss
            end
        end
        local final = crit(model(x), y):item()
        assert.is_true(final < 0.3 * first, fmt("loss %.4f -> %.4f", first, final))
        assert.is_true(last:item() < first)
        assert.is_true(nn.accuracy(model, x, y) > 0.9)
    end)

    -- The examples as a user runs them with --device gpu, each in a process
    -- of its own with this one's environment (so on the same device).
    it("the training examples run with --device gpu: an LSTM learns a text, the MLP Fashion-MNIST", function()
        need_gpu()
        local function run(args)
            local f = assert(io.popen(fmt("cd %s && LUA_PATH='lua/?.lua;lua/?/init.lua;;' luajit examples/%s "
                                          .. "--device gpu 2>&1; echo \"exit=$?\"", os.getenv("PWD") or ".", args)))
            local out = f:read("*a")
            f:close()
            return out, tonumber(out:match("exit=(%d+)%s*$"))
        end
        local out, code = run("char_lm.lua --steps 40 --hidden 32 --seq 16 --batch 16 --sample 20")
        assert.are.equal(0, code, out)
        assert.is_truthy(out:find("on gpu(0)", 1, true), out)
        local first, last = out:match("loss ([%d.]+) %-> ([%d.]+) nats per character")
        assert.is_truthy(first and last, out)
        assert.is_true(tonumber(last) < tonumber(first) - 0.3, "the loss fell:\n" .. out)
        if not ordo.data.fashion_mnist_available() then return end -- (examples_spec says so, pending)
        out, code = run("fashion_mlp.lua --epochs 1 --limit 2000 --test-limit 500 --hidden 128,64")
        assert.are.equal(0, code, out)
        assert.is_truthy(out:find("on gpu(0)", 1, true), out)
        local acc = tonumber(out:match("final test accuracy ([%d.]+)%%"))
        assert.is_not_nil(acc, out)
        assert.is_true(acc > 60, out)
    end)

    it("a DataLoader over gpu tensors gives the cpu loader's batches, on the gpu", function()
        need_gpu()
        local x = ordo.arange(30, {dtype = "float32"}):view(10, 3)
        local y = ordo.arange(10, {dtype = "int64"})
        local function batches(xd, yd)
            ordo.manual_seed(8)
            local out = {}
            for _, xb, yb in ordo.data.loader(xd, yd, {batch_size = 4, shuffle = true}):iter() do
                out[#out + 1] = {xb, yb}
            end
            return out
        end
        local gb, cb = batches(gpu(x), gpu(y)), batches(x, y)
        assert.equals(#cb, #gb)
        for i = 1, #cb do
            check(gb[i][1], cb[i][1], "x batch " .. i)
            check(gb[i][2], cb[i][2], "y batch " .. i)
        end
    end)

    it("a DataLoader over a dataset of gpu tensors (a Subset, a ConcatDataset) gives the cpu loader's batches",
       function()
        need_gpu()
        local data = ordo.data
        local x = ordo.arange(30, {dtype = "float32"}):view(10, 3)
        local y = ordo.arange(10, {dtype = "int64"})
        local function batches(ds)
            ordo.manual_seed(8)
            local out = {}
            for _, xb, yb in data.loader(ds, {batch_size = 4, shuffle = true}):iter() do out[#out + 1] = {xb, yb} end
            return out
        end
        local pick = {9, 2, 4, 7, 1, 10, 3}
        local cpu_sub = data.Subset(data.TensorDataset(x, y), pick)
        local gpu_sub = data.Subset(data.TensorDataset(gpu(x), gpu(y)), pick)
        for _, make in ipairs({function(d) return d end, function(d) return data.ConcatDataset({d}) end}) do
            local cb, gb = batches(make(cpu_sub)), batches(make(gpu_sub))
            assert.equals(#cb, #gb)
            for i = 1, #cb do
                assert.equals(G, gb[i][1]:device())
                check(gb[i][1], cb[i][1], "x batch " .. i)
                check(gb[i][2], cb[i][2], "y batch " .. i)
            end
        end
    end)

    it("a DataLoader over gpu tensors of an engine of their own gives the same batches", function()
        need_gpu()
        -- its order was made on the default engine: "the tensors belong to different engines"
        local eng = ordo.engine.new{}
        local x = ordo.arange(30, {dtype = "float32"}):view(10, 3)
        local y = ordo.arange(10, {dtype = "int64"})
        local xd = ordo.arange(30, {dtype = "float32", engine = eng, device = ordo.gpu(0)}):view(10, 3)
        local yd = ordo.arange(10, {dtype = "int64", engine = eng, device = ordo.gpu(0)})
        for _, shuffle in ipairs({false, true}) do
            ordo.manual_seed(8)
            local cb = {}
            for _, xb, yb in ordo.data.loader(x, y, {batch_size = 4, shuffle = shuffle}):iter() do
                cb[#cb + 1] = {xb, yb}
            end
            ordo.manual_seed(8)
            local n = 0
            for i, xb, yb in ordo.data.loader(xd, yd, {batch_size = 4, shuffle = shuffle}):iter() do
                n = i
                assert.equals(ordo.gpu(0), xb:device())
                check(xb, cb[i][1], "x batch " .. i)
                check(yb, cb[i][2], "y batch " .. i)
            end
            assert.equals(#cb, n)
        end
        eng:close()
    end)
end)

-- ---------------------------------------------------------------- asynchrony

describe("gpu tensors: asynchrony", function()
    it("a long chain of gpu ops interleaved with copies to the cpu and cpu ops gives the right values", function()
        need_gpu()
        local n = 1000
        local x = ordo.arange(n, {dtype = "float64"}):to(G) -- x[k] = k - 1 + shift
        local acc = ordo.zeros({n}, {dtype = "float64"})      -- on the cpu
        local shift, acc_shift, reads = 0, 0, 0
        local snaps, snap_shift = {}, {}
        for i = 1, 400 do
            x = x * 2 - x + 1 -- three gpu ops: x + 1
            shift = shift + 1
            x:mul_(1):add_(i % 3)
            shift = shift + i % 3
            if i % 7 == 0 then
                local h = x:to(CPU)         -- a copy from the gpu...
                x:add_(1000):sub_(999)      -- ...then gpu writes the copy must not see
                shift = shift + 1
                acc:add_(h):sub_(1)         -- cpu ops on the copy
                reads = reads + 1
                acc_shift = acc_shift + (shift - 1) - 1
                snaps[#snaps + 1] = h
                snap_shift[#snap_shift + 1] = shift - 1
                x = x:to(CPU):to(G)         -- a round trip in the middle of the chain
            end
        end
        local xt, at = x:totable(), acc:totable()
        for k = 1, n do
            assert.equals(k - 1 + shift, xt[k])
            assert.equals(reads * (k - 1) + acc_shift, at[k])
        end
        for j, h in ipairs(snaps) do
            local t = h:totable()
            assert.equals(snap_shift[j], t[1])
            assert.equals(n - 1 + snap_shift[j], t[n])
        end
    end)

    -- The random program of spec/support/helpers.lua on dev, with reads
    -- copied to the cpu as it goes (and cpu ops on them); sync: wait for
    -- everything after each op.
    local function program(seed, nops, dev, sync)
        return H.random_program(ordo, seed, nops, {device = dev, sync = sync, with_host = true})
    end

    it("a random program through views on gpu storages equals the same program on the cpu", function()
        need_gpu()
        local g = program(1, 1500, G, false)
        local c = program(1, 1500, ordo.cpu(0), true)
        for _, k in ipairs({"A", "B", "D", "E", "host"}) do check_tables(g[k], c[k], k, 1e-9, 1e-9) end
        assert.equals(#c.reads, #g.reads)
        check_tables(g.reads, c.reads, "reads", 1e-9, 1e-9)
    end)

    it("two gpu worker streams run independent chains; joins across them see both", function()
        need_gpu()
        local e = ordo.engine.new({kind = "perdevice", gpu_workers = 2, gpu_copy_workers = 1})
        assert.equals(2, e:gpu_workers())
        local opts = {dtype = "float64", device = G, engine = e}
        local a, b = ordo.zeros({5000}, opts), ordo.ones({5000}, opts)
        local joins = {}
        for i = 1, 300 do
            a:add_(1)                 -- two chains with nothing in common:
            b:mul_(1.01):add_(-0.01)  -- (b - 1) * 1.01 + 1 = b stays 1
            if i % 50 == 0 then joins[#joins + 1] = a + b end -- reads both chains' latest writes
        end
        for j, t in ipairs(joins) do
            local v = t:totable()
            assert.is_true(abs(v[1] - (50 * j + 1)) < 1e-9 and abs(v[5000] - (50 * j + 1)) < 1e-9,
                           fmt("join %d: %s, expected %d", j, tostring(v[1]), 50 * j + 1))
        end
        assert.equals(300, a:max():item())
        assert.is_true(abs(b:min():item() - 1) < 1e-9)
        e:wait_for_all()
        a, b, joins = nil, nil, nil
        e:close()
        -- the default engine's gpu pool too
        assert.is_true(ordo.engine.gpu_workers() >= 1)
    end)

    it("copies to and from the gpu overlap compute and keep every value", function()
        need_gpu()
        ordo.profiler.start()
        local n = 2 ^ 20
        local big = ordo.arange(n, {dtype = "float32"}) -- 4 MiB
        local work = ordo.zeros({256, 256}, {device = G})
        local ups, downs = {}, {}
        for i = 1, 12 do
            work:add_(1)                     -- compute on the compute streams...
            local twice = work * 2
            work:mul_(3):sub_(twice)         -- (3w - 2w = w)
            ups[i] = big:to(G)               -- ...copies on the copy streams meanwhile
            downs[i] = ups[i]:add_(i):to(CPU)
        end
        ordo.engine.wait_for_all()
        ordo.profiler.stop()
        local summary = ordo.profiler.summary()
        ordo.profiler.clear()
        assert.equals(12, work:max():item())
        assert.equals(12, work:min():item())
        for i = 1, 12 do
            assert.equals(i, downs[i]:narrow(1, 1, 1):item())
            assert.equals(n - 1 + i, downs[i]:narrow(1, n, 1):item())
        end
        assert.truthy(summary:find("copy_to_gpu", 1, true), "no copy_to_gpu op in the profile")
        assert.truthy(summary:find("copy_from_gpu", 1, true), "no copy_from_gpu op in the profile")
    end)

    -- A GPU op's host side is its launch; the dump also has its GPU side,
    -- timed by events on its stream, on a track of that stream on the
    -- device's row (cat "gpu", args.launch_us = the launch's ts).
    it("the profiler dump has GPU-side rows for gpu ops, timed on their streams", function()
        need_gpu()
        local trace = require "ordo.trace"
        local x = ordo.randn({128, 128}, {device = G})
        ordo.engine.wait_for_all()
        ordo.profiler.clear()
        ordo.profiler.start()
        local y = x:matmul(x):relu()
        local back = y:to(CPU)
        ordo.engine.wait_for_all()
        ordo.profiler.stop()
        local path = os.tmpname()
        ordo.profiler.dump(path)
        local summary = ordo.profiler.summary()
        ordo.profiler.clear()
        local f = assert(io.open(path, "rb"))
        local doc = trace.decode(f:read("*a"))
        f:close()
        os.remove(path)
        assert.equals(128, back:shape()[1])
        local tracks, launches, gpu = {}, {}, {}
        for _, ev in ipairs(doc.traceEvents) do
            if ev.ph == "M" and ev.name == "thread_name" then tracks[ev.pid .. ":" .. ev.tid] = ev.args.name end
            if ev.ph == "X" and ev.cat == "op" then launches[#launches + 1] = ev end
            if ev.ph == "X" and ev.cat == "gpu" then gpu[ev.name] = gpu[ev.name] or ev end
        end
        for _, name in ipairs({"matmul", "relu", "copy_from_gpu"}) do
            local ev = gpu[name]
            assert.truthy(ev, "no GPU-side " .. name .. " in the trace")
            assert.equals(1000, ev.pid) -- gpu(0)'s row
            local track = tracks[ev.pid .. ":" .. ev.tid] or "?"
            assert.truthy(track:find("^gpu%(0%) stream of "), name .. " on track " .. track)
            assert.is_true(ev.dur > 0, name .. ": GPU-side duration " .. ev.dur)
            assert.is_true(ev.ts >= ev.args.launch_us - 0.01,
                           fmt("%s: starts on the GPU at %.3f us, launched at %.3f us", name, ev.ts, ev.args.launch_us))
            local launched = false
            for _, l in ipairs(launches) do
                if l.name == name and l.pid == ev.pid and abs(l.ts - ev.args.launch_us) < 0.002 then launched = true end
            end
            assert.is_true(launched, name .. ": no host-side launch at launch_us")
        end
        -- ordo.trace tells the two sides apart
        local ops = trace.ops(doc)
        local sides = {}
        for _, op in ipairs(ops) do
            if op.name == "matmul" then sides[op.gpu and "gpu" or "host"] = op end
        end
        assert.truthy(sides.host and sides.gpu, "trace.ops: matmul's launch and GPU side")
        assert.is_nil(sides.host.launch)
        assert.equals(sides.host.start, sides.gpu.launch)
        local gpu_block = summary:match("\nGPU%-side[^\n]*\n(.*)$")
        assert.truthy(gpu_block, "no GPU-side table in the summary:\n" .. summary)
        assert.truthy(gpu_block:find("\nmatmul ", 1, true), "matmul not in the GPU-side table:\n" .. summary)
    end)
end)

-- ---------------------------------------------------------------- errors

describe("gpu tensors: errors", function()
    it("an op on a gpu tensor and a cpu tensor raises a clear one-device error", function()
        need_gpu()
        local g, c = ordo.zeros({2}, {device = G}), ordo.zeros({2})
        raises(function() return g + c end, "add", "one device", "gpu(0)", "cpu(0)")
        raises(function() return c * g end, "mul", "one device")
        raises(function() return g:matmul(ordo.zeros({2, 2})) end, "matmul", "one device")
        raises(function() return ordo.where(g:gt(0), g, c) end, "where", "one device")
        raises(function() return g:add_(c) end, "add_", "one device")
        -- copies are the way across
        assert.same({0, 0}, (g + c:to(G)):totable())
        g:copy_(ordo.tensor({1, 2}))
        assert.same({1, 2}, g:totable())
    end)

    it("a copy across devices into an expanded view or overlapping unfold windows raises, as on one device", function()
        need_gpu()
        local c, g = ordo.zeros(3, 1), ordo.zeros({3, 1}, {device = G})
        raises(function() c:expand(3, 4):copy_(ordo.ones({3, 4}, {device = G})) end, "copy_", "expanded view", "3x4")
        raises(function() g:expand(3, 4):copy_(ordo.ones(3, 4)) end, "copy_", "expanded view", "3x4")
        local cu, gu = ordo.arange(7):float(), ordo.arange(7, {device = G}):float()
        raises(function() cu:unfold(1, 3, 2):copy_(ordo.ones({3, 3}, {device = G})) end, "copy_", "overlap in memory")
        raises(function() gu:unfold(1, 3, 2):copy_(ordo.ones(3, 3)) end, "copy_", "overlap in memory")
        assert.same({{0}, {0}, {0}}, c:totable())
        assert.same({{0}, {0}, {0}}, g:totable())
        assert.same({0, 1, 2, 3, 4, 5, 6}, cu:totable())
        assert.same({0, 1, 2, 3, 4, 5, 6}, gu:totable())
    end)

    it("an op made of other ops names itself in a one-device error, not one of its parts", function()
        need_gpu()
        local nn, F = ordo.nn, ordo.nn.functional
        local c, v = ordo.rand({3, 3}), ordo.rand({3})
        local g, vg = c:to(G), v:to(G)
        local cases = {
            {"clamp", function() return g:clamp(c, 1) end},
            {"clamp_", function() return g:clone():clamp_(c) end},
            {"lerp", function() return g:lerp(c, 0.5) end},
            {"lerp", function() return g:lerp(g, c) end},
            {"allclose", function() return ordo.allclose(g, c) end},
            {"equal", function() return ordo.equal(g, c) end},
            {"dot", function() return vg:dot(v) end},
            {"outer", function() return vg:outer(v) end},
            {"t[mask]", function() return g[ordo.tensor({1, 0, 1}, "uint8")] end}, -- (a mask of the rows)
            {"t[mask]", function() return g[c:gt(0.5)] end},
            {"mv", function() return g:mv(v) end},
            {"mm", function() return g:mm(c) end},
            {"bmm", function() return g:view(1, 3, 3):bmm(c:view(1, 3, 3)) end},
            {"addmm", function() return g:addmm(c, g) end},
            {"baddbmm", function() return g:view(1, 3, 3):baddbmm(g:view(1, 3, 3), c:view(1, 3, 3)) end},
            {"einsum", function() return ordo.einsum("ij,jk->ik", g, c) end},
            {"stack", function() return ordo.stack({g, c}) end},
            {"meshgrid", function() return ordo.meshgrid(vg, v) end},
            {"remainder", function() return g:remainder(c) end},
            {"masked_select", function() return g:masked_select(c:gt(0.5)) end},
            {"repeat_interleave", function() return vg:repeat_interleave(ordo.tensor({1, 2, 1}, "int64")) end},
            {"cdist", function() return F.cdist(g, c) end},
            {"cosine_similarity", function() return F.cosine_similarity(g, c) end},
            {"pairwise_distance", function() return F.pairwise_distance(g, c) end},
            {"MSELoss", function() return nn.MSELoss()(g, c) end},
            {"L1Loss", function() return nn.L1Loss()(g, c) end},
            {"BCELoss", function() return nn.BCELoss()(g, c) end},
            {"BCEWithLogitsLoss", function() return nn.BCEWithLogitsLoss({pos_weight = v})(g, g) end},
            {"CrossEntropyLoss", function() return nn.CrossEntropyLoss({weight = v})(g, ordo.tensor({1, 2, 3}, "int64"):to(G)) end},
            {"KLDivLoss", function() return nn.KLDivLoss()(g, c) end},
            {"MarginRankingLoss", function() return nn.MarginRankingLoss()(vg, v, vg) end},
            {"CosineEmbeddingLoss", function() return nn.CosineEmbeddingLoss()(g, c, vg) end},
            {"TripletMarginLoss", function() return nn.TripletMarginLoss()(g, c, g) end},
            {"GaussianNLLLoss", function() return nn.GaussianNLLLoss()(g, c, g) end},
            {"PoissonNLLLoss", function() return nn.PoissonNLLLoss()(g, c) end},
            {"HingeEmbeddingLoss", function() return nn.HingeEmbeddingLoss()(g, c) end},
            {"SoftMarginLoss", function() return nn.SoftMarginLoss()(g, c) end},
            {"MultiLabelSoftMarginLoss", function() return nn.MultiLabelSoftMarginLoss({weight = v})(g, g) end},
            {"MultiMarginLoss", function() return nn.MultiMarginLoss()(g, ordo.tensor({1, 2, 3}, "int64")) end},
            {"MultiLabelMarginLoss", function() return nn.MultiLabelMarginLoss()(g, ordo.ones({3, 3}, "int64")) end},
            {"TripletMarginWithDistanceLoss", function() return nn.TripletMarginWithDistanceLoss()(g, c, g) end},
            {"Linear", function() return nn.Linear(3, 2):to(G)(c) end},
            {"Conv2d", function() return nn.Conv2d(1, 1, 2):to(G)(ordo.rand({1, 1, 3, 3})) end},
            {"conv2d", function() return F.conv2d(ordo.rand({1, 1, 3, 3}), g:view(1, 1, 3, 3)) end},
            {"Conv1d", function() return nn.Conv1d(1, 1, 2):to(G)(ordo.rand({1, 1, 3})) end},
            {"ConvTranspose2d", function() return nn.ConvTranspose2d(1, 1, 2):to(G)(ordo.rand({1, 1, 3, 3})) end},
            {"BatchNorm1d", function() return nn.BatchNorm1d(3):to(G)(c) end},
            {"LayerNorm", function() return nn.LayerNorm(3):to(G)(c) end},
            {"GroupNorm", function() return nn.GroupNorm(1, 3):to(G)(c:view(1, 3, 3)) end},
            {"PReLU", function() return nn.PReLU(3):to(G)(c) end},
            {"scaled_dot_product_attention", function() return F.scaled_dot_product_attention(g, c, g) end},
            {"scaled_dot_product_attention", function()
                return F.scaled_dot_product_attention(g, g, g, {attn_mask = ordo.zeros({3, 3}, "uint8")})
            end},
            {"MultiheadAttention", function() return nn.MultiheadAttention(4, 2):to(G)(ordo.rand({2, 1, 4})) end},
            {"MultiheadAttention", function()
                local x = ordo.rand({2, 1, 4}, {device = G})
                return nn.MultiheadAttention(4, 2):to(G)(x, x, x, {attn_mask = ordo.zeros({2, 2}, "uint8")})
            end},
        }
        for _, case in ipairs(cases) do
            local err = raises(case[2], case[1] .. ": expected all tensors on one device", "gpu(0)", "cpu(0)")
            assert(err:find(": " .. case[1] .. ": ", 1, true), err)
        end
        -- on one device they work
        assert.is_true(ordo.allclose(g:clamp(g * 0, 1), g))
        assert.same(3, F.cdist(g, g):size(1))
    end)

    it("a gradient on another device: backward's grad and a step's p.grad raise naming both, changing nothing", function()
        need_gpu()
        local x = ordo.ones({3}, {device = G}):requires_grad()
        raises(function() (x * 2):backward(ordo.ones({3})) end, "backward", "grad is on cpu(0)", "gpu(0)")
        assert.is_nil(x.grad)
        raises(function() ordo.autograd.grad(x * 2, {x}, ordo.ones({3})) end, "grad", "cpu(0)", "gpu(0)")
        local y = ordo.ones({3}):requires_grad()
        raises(function() (y * 2):backward(ordo.ones({3}, {device = G})) end, "backward", "gpu(0)", "cpu(0)")
        assert.is_nil(y.grad)
        for _, kind in ipairs({"SGD", "Adam", "AdamW", "RMSprop", "Adagrad"}) do
            local p1 = ordo.ones({2}, {device = G}):requires_grad()
            local p2 = ordo.ones({2}, {device = G}):requires_grad()
            local opt = ordo.optim[kind]({p1, p2}, {lr = 0.1, weight_decay = 0.1})
            p1.grad, p2.grad = ordo.ones({2}, {device = G}), ordo.ones({2})
            raises(function() opt:step() end, "step", "parameter 2", "cpu(0)", "gpu(0)")
            -- nothing changed: p1 was not stepped before p2's gradient was found
            assert.same({1, 1}, p1:totable())
            assert.same({1, 1}, p2:totable())
            p2.grad = p2.grad:to(G)
            opt:step()
            assert.is_true(p1:totable()[1] < 1 and p2:totable()[1] < 1)
        end
    end)

    it("a device that does not exist raises 'does not exist'", function()
        need_gpu()
        local n = ordo.cuda.device_count()
        local bad = fmt("gpu(%d)", n + 4)
        raises(function() return ordo.gpu(n + 4) end, bad, "does not exist")
        raises(function() return ordo.zeros({2}, {device = "gpu:" .. (n + 4)}) end, "does not exist")
        raises(function() return ordo.zeros({2}):to("gpu:" .. (n + 4)) end, "does not exist")
        raises(function() return ordo.cuda.memory_stats(n + 4) end, "memory_stats: gpu(" .. (n + 4) .. ") does not exist")
        raises(function() return ordo.cuda.memory_stats(ordo.cpu(0)) end, "memory_stats", "GPU")
    end)

    it("wait_for_all right after kernels that fail on the gpu returns their error, not a deadlock", function()
        need_gpu()
        -- (a device sync held the simulated device's stream list while a stream thread,
        -- raising the kernel's failure, waited for that lock: a hang; so in a child with a timeout)
        local f = assert(io.popen("LUA_PATH='lua/?.lua;lua/?/init.lua;;' timeout 120 luajit -e '" ..
            "local ordo = require(\"ordo\") local n = 0 " ..
            "for i = 1, 200 do local a = ordo.tensor({1}, {dtype = \"int64\", device = ordo.gpu(0)}) " ..
            "local x = a:div(ordo.zeros_like(a), \"trunc\") " ..
            "local ok, e = pcall(ordo.engine.wait_for_all) if not ok and tostring(e):find(\"division by zero\") " ..
            "then n = n + 1 end end print(\"errors \" .. n)' 2>&1; echo \"exit=$?\""))
        local out = f:read("*a")
        f:close()
        assert.truthy(out:find("errors 200", 1, true), out)
        assert.truthy(out:find("exit=0", 1, true), out)
    end)

    it("a kernel failing on the gpu raises at the wait that reads its result, once; the device keeps working", function()
        need_gpu()
        -- whatever happens here, leave no failure behind for a later test's wait
        finally(function() pcall(ordo.engine.wait_for_all) end)
        local a = ordo.tensor({4, 5, 6}, {dtype = "int32", device = G})
        local b = ordo.tensor({1, 0, 2}, {dtype = "int32", device = G})
        local c = a:div(b, "trunc")
        local err = raises(function() return c:totable() end, "div: integer division by zero", "gpu(0)")
        assert.is_nil(err:find("division by zero.*division by zero"))
        assert.is_nil(err:find("gpu(0): gpu(0)", 1, true), err)
        assert.is_nil(err:find("div:.*div:"), err)
        ordo.engine.wait_for_all() -- reported once: nothing left to report
        assert.same({5, 6, 7}, (a + 1):totable())
        local x = ordo.tensor({1, 2, 3}, {device = G})
        local bad = x:gather(1, ordo.tensor({5}, {dtype = "int64", device = G}))
        raises(function() return bad:item() end, "out of range")
        ordo.engine.wait_for_all()
        assert.equals(6, x:sum():item())
    end)

    it("a gpu failure raised at a wait names the device and the op, not the C function that waited", function()
        need_gpu()
        finally(function() pcall(ordo.engine.wait_for_all) end)
        local a = ordo.tensor({4, 5, 6}, {dtype = "int32", device = G})
        local b = ordo.tensor({1, 0, 2}, {dtype = "int32", device = G})
        for _, read in ipairs({function(t) return t:totable() end, function(t) return t:sum():item() end,
                               function(t) ordo.engine.wait_for_var(t) end,
                               function(t) ordo.engine.wait_to_write(t) end}) do
            local err = raises(function() return read(a:div(b, "trunc")) end, "div: integer division by zero",
                               "gpu(0)")
            -- (was "ordo_wait_for_var: gpu(0): div: ..." on the simulated device)
            assert.is_nil(err:find("ordo_", 1, true), err)
        end
        -- the naive engine waits for each op: the failure is the op's own,
        -- named once (it was "div: gpu(0): div: ...")
        local e = ordo.engine.new{kind = "naive"}
        local an = ordo.tensor({4, 5, 6}, {dtype = "int32", device = G, engine = e})
        local q = an:div(an * 0, "trunc")
        local err = raises(function() return q:totable() end, "div: integer division by zero", "gpu(0)")
        assert.is_nil(err:find("div:.*div:"), err)
        e:wait_for_all()
    end)

    it("a gpu failure is not taken by freeing an unrelated host tensor: the failed tensor's read raises it", function()
        need_gpu()
        finally(function() pcall(ordo.engine.wait_for_all) end)
        local x = ordo.tensor({1, 2, 3}, {device = G})
        local idx = ordo.tensor({5}, {dtype = "int64", device = G})
        ordo.engine.wait_for_all()
        for _ = 1, 5 do
            local bad = x:gather(1, idx)
            -- host tensors copied to the gpu and dropped: freeing each one
            -- waits (on the host) for the copy that read it; that wait took
            -- the device's failure, so the read below gave the gather's
            -- garbage without an error and the failure came up later, at
            -- wait_for_all, as "delete_variable: gpu(0): gather: ..."
            for _ = 1, 20 do
                local junk = ordo.tensor({1, 2, 3}):to(G)
                junk = nil
                collectgarbage()
            end
            raises(function() return bad:totable() end, "gather", "index 5 out of range", "gpu(0)")
            local ok, err = pcall(ordo.engine.wait_for_all)
            assert.is_true(ok, tostring(err))
        end
        -- the same for a failure the device keeps, not an op's own (a generator
        -- never seeded, pushed through the raw kernel API): the next wait raises it
        local T = require "ordo.tensor"
        local u = ordo.empty({4}, {device = G})
        local g = ordo.zeros({32}, {dtype = "uint8", device = G})
        ordo.engine.wait_for_all()
        T.push(T.kernel_ids.uniform, "uniform_", 0, {}, {u, g}, {0, 1})
        for _ = 1, 20 do
            local junk = ordo.tensor({1, 2, 3}):to(G)
            junk = nil
            collectgarbage()
        end
        raises(function() return u:totable() end, "uniform: generator state was never seeded", "gpu(0)")
        ordo.engine.wait_for_all()
    end)

    it("a gpu failure is not taken by closing another engine that used the gpu: the failed tensor raises it", function()
        need_gpu()
        finally(function() pcall(ordo.engine.wait_for_all) end)
        local x = ordo.tensor({1, 2, 3}, {device = G})
        local idx = ordo.tensor({5}, {dtype = "int64", device = G})
        ordo.engine.wait_for_all()
        for _, kind in ipairs({"naive", "perdevice"}) do
            local e = ordo.engine.new{kind = kind}
            local y = ordo.ones({3}, {device = G, engine = e}) * 2
            assert.same({2, 2, 2}, y:totable())
            local bad = x:gather(1, idx)
            os.execute("sleep 0.1") -- (its kernel has failed on the device by now)
            -- the engine is destroyed once its tensors go: it waited for
            -- the device's work, taking the device's failure, which was lost
            y = nil
            e:close()
            collectgarbage()
            collectgarbage()
            raises(function() return bad:totable() end, "gather", "index 5 out of range", "gpu(0)")
        end
    end)

    it("wait_for_all reports every failure nobody waited for: a cpu op's and each gpu's", function()
        need_gpu()
        finally(function() pcall(ordo.engine.wait_for_all) end)
        local devs = {G}
        if ordo.cuda.device_count() >= 2 then devs[2] = ordo.gpu(1) end
        local ins = {}
        for i, d in ipairs(devs) do ins[i] = ordo.tensor({1}, {dtype = "int32", device = d}) end
        ordo.engine.wait_for_all()
        local outs = {} -- (kept: none of them is read, nor freed)
        for i, a in ipairs(ins) do outs[i] = a:div(a * 0, "trunc") end
        outs.cpu = ordo.arange(3):gather(1, ordo.tensor({9}, {dtype = "int64"}))
        -- the cpu op's failure (its op's own) and the gpus' ones, their ops'
        -- own (per-op checks: the oldest in full, the others counted); these
        -- were once taken from the devices and dropped after the first failure
        local err = raises(ordo.engine.wait_for_all)
        local _, ngather = err:gsub("gather: index 9 out of range", "")
        local _, ndiv = err:gsub("division by zero", "")
        local more = tonumber(err:match("%(and (%d+) more failures?%)")) or 0
        assert.is_true(ngather + ndiv > 0, err)
        assert.equals(1 + #devs, ngather + ndiv + more, err)
        ordo.engine.wait_for_all() -- all of them reported: nothing left
    end)

    -- Per-op checks are the CUDA kernels' (kernels/cuda/error_slots.cu): on
    -- a GPU and on the CUDA emulation; the plain simulated device checks the
    -- ops of the same kernels (run_kernel_sim_checked in src/tensor_push.c).

    it("a failed op's result raises its own error at every read, not a later op's, and its gradient its own", function()
        need_gpu()
        finally(function() pcall(ordo.engine.wait_for_all) end)
        -- (the simulated device kept one failure per device: the first read
        -- raised the backward's scatter_add error, which had run first on
        -- another stream, the second read gave values and x.grad read 0)
        for _ = 1, 3 do
            local x = ordo.tensor({1, 2, 3}, {device = G}):requires_grad()
            local y = x:gather(1, ordo.tensor({-100}, {dtype = "int64", device = G}))
            y:sum():backward()
            local err = raises(function() return y:totable() end, "gather: index -100 out of range", "gpu(0)")
            assert.is_nil(err:find("scatter_add", 1, true), err)
            raises(function() return y:totable() end, "gather: index -100 out of range", "reported before")
            err = raises(function() return x.grad:totable() end, "scatter_add: index -100 out of range", "gpu(0)")
            assert.truthy(err:find("gather backward", 1, true), err)
            ordo.engine.wait_for_all() -- each failure was reported by its own tensor: nothing left
            assert.same({2, 3, 4}, (x:detach() + 1):totable())
        end
    end)

    it("a kernel's data-dependent failure is its op's own: what was built on it raises, other work does not", function()
        need_gpu()
        finally(function() pcall(ordo.engine.wait_for_all) end)
        local x = ordo.tensor({1, 2, 3}, {device = G})
        local bad = x:gather(1, ordo.tensor({5}, {dtype = "int64", device = G}))
        local built = bad * 2 + 1 -- skipped (rule 5): it would be built on garbage
        local other = (x * 10):sum() -- independent, pushed after the failing op
        -- the wait on other work does not take the gather's failure
        assert.equals(60, other:item())
        assert.same({2, 3, 4}, (x + 1):totable())
        local err = raises(function() return built:item() end, "gather: index 5 out of range", "on gpu(0)")
        assert.is_nil(err:find("gather:.*gather:"), err)
        -- reported once (rule 5), and the device keeps working
        ordo.engine.wait_for_all()
        assert.equals(6, x:sum():item())

        -- its result itself raises at its wait; an in-place op on it is skipped
        local y = ordo.tensor({10, 20}, {device = G})
        local z = y:index_select(1, ordo.tensor({1, 3}, {dtype = "int64", device = G}))
        z:add_(1)
        raises(function() return z:totable() end, "index_select", "index 3 out of range", "gpu(0)")
        ordo.engine.wait_for_all()

        -- an op pushed under another name is named too: Embedding's lookup
        local emb = ordo.nn.Embedding(4, 2):to(G)
        local e = emb(ordo.tensor({1, 9}, {dtype = "int64", device = G}))
        err = raises(function() return e:sum():item() end, "Embedding", "out of range", "gpu(0)")
        ordo.engine.wait_for_all()

        -- integer division by zero is its op's too, and a scatter_add whose
        -- index is bad writes nothing
        local n = ordo.tensor({4, 5, 6}, {dtype = "int32", device = G})
        local q = n:div(ordo.tensor({1, 0, 2}, {dtype = "int32", device = G}), "trunc")
        local fine = (n * 2):sum()
        assert.equals(30, fine:item())
        raises(function() return q:totable() end, "div: integer division by zero on gpu(0)")
        local acc = ordo.zeros({3}, {device = G})
        local s = acc:scatter_add(1, ordo.tensor({1, 7}, {dtype = "int64", device = G}), ordo.ones({2}, {device = G}))
        raises(function() return s:totable() end, "scatter_add", "index 7 out of range")
        ordo.engine.wait_for_all()
        assert.same({0, 0, 0}, acc:totable())

        -- values out of an op's domain, checked on the device (check_range): BCE's probabilities, and
        -- bernoulli_'s, which leaves its tensor as it was
        local F = ordo.nn.functional
        local l = F.binary_cross_entropy(ordo.tensor({0.5, 2}, {device = G}), ordo.tensor({0, 1}, {device = G}))
        raises(function() return l:item() end, "binary_cross_entropy", "value 2 at element 2 is outside", "gpu(0)")
        local keep = ordo.full({3}, 7, {device = G})
        keep:bernoulli_(ordo.tensor({0.5, 0.5, -1}, {device = G}))
        raises(function() return keep:totable() end, "bernoulli_", "value -1 at element 3")
        assert.same({7, 7, 7}, keep:totable())
        assert.is_true(F.binary_cross_entropy(ordo.tensor({0.5, 1}, {device = G}),
                                              ordo.tensor({0, 1}, {device = G})):item() > 0)
    end)

    it("checked ops keep the order of their vars and many in flight come back right", function()
        need_gpu()
        finally(function() pcall(ordo.engine.wait_for_all) end)
        -- a chain of gathers, each reading the last one's result: each is
        -- held until its check, and the next must see its write (rule 1)
        local v = ordo.arange(1, 9, {dtype = "float32"}):to(G)
        local rot = ordo.tensor({2, 3, 4, 5, 6, 7, 8, 1}, {dtype = "int64", device = G})
        local want = {1, 2, 3, 4, 5, 6, 7, 8}
        for _ = 1, 50 do
            v = v:gather(1, rot)
            local w = {}
            for i = 1, 8 do w[i] = want[i % 8 + 1] end
            want = w
        end
        assert.same(want, v:totable())
        -- independent checked ops, one failing among them: only its result raises
        local src = ordo.arange(1, 101, {dtype = "float32"}):to(G)
        local outs = {}
        for i = 1, 40 do
            local idx = ordo.tensor({i, i == 17 and 500 or i + 1}, {dtype = "int64", device = G})
            outs[i] = src:index_select(1, idx)
        end
        for i = 1, 40 do
            if i == 17 then
                raises(function() return outs[i]:totable() end, "index 500 out of range")
            else
                assert.same({i, i + 1}, outs[i]:totable())
            end
        end
        ordo.engine.wait_for_all()
    end)

    it("with two gpus: ops run on gpu(1), copies go between gpus, and gpu(1)'s kernel errors are its own", function()
        need_gpu()
        if ordo.cuda.device_count() < 2 then
            pending("one CUDA device: this test needs two")
            return
        end
        finally(function() pcall(ordo.engine.wait_for_all) end)
        math.randomseed(31)
        local G1 = ordo.gpu(1)
        local a = rnd({40, 30}, "float32", -1, 1)
        local g0, g1 = gpu(a), a:to(G1)
        assert.equals(G1, g1:device())
        local r = (g1 * 2 + 1):sum(2)
        assert.equals(G1, r:device())
        check(r:to(G), (a * 2 + 1):sum(2), "a result computed on gpu(1)", RED)
        check(g0:to(G1):to(G), a, "gpu(0) -> gpu(1) -> gpu(0)")
        raises(function() return g0 + g1 end, "one device", "gpu(0)", "gpu(1)")
        local n = ordo.tensor({4, 5, 6}, {dtype = "int32", device = G1})
        local q = n:div(ordo.tensor({1, 0, 2}, {dtype = "int32", device = G1}), "trunc")
        raises(function() return q:totable() end, "gpu(1)", "division by zero")
        assert.same({5, 6, 7}, (n + 1):totable())
        assert.same({2, 3}, (ordo.tensor({1, 2}, {device = G}) + 1):totable())
    end)

    it("the host never touches gpu memory: the guard raises on a direct access", function()
        need_gpu()
        local util = require "ordo.util"
        local g = ordo.zeros({2}, {device = G})
        raises(function() return util.host_ptr(g) end, "internal: host access to a gpu tensor")
        assert.is_not_nil(util.host_ptr(ordo.zeros({2})))
    end)
end)

-- ---------------------------------------------------------------- memory

describe("gpu tensors: memory", function()

    it("memory_stats: allocated rises while tensors live and falls once they are collected", function()
        need_gpu()
        settle()
        local s0 = ordo.cuda.memory_stats()
        for _, k in ipairs({"allocated_bytes", "reserved_bytes", "peak_allocated_bytes", "peak_reserved_bytes",
                            "num_device_allocs", "num_device_frees", "cache_hits", "cache_misses", "oom_retries"}) do
            assert.equals("number", type(s0[k]), k)
        end
        assert.same(s0, ordo.cuda.memory_stats(0))
        assert.same(s0, ordo.cuda.memory_stats(G))
        assert.same(s0, ordo.cuda.memory_stats("gpu:0"))
        assert.is_true(s0.reserved_bytes >= s0.allocated_bytes)
        local t = {}
        for i = 1, 4 do t[i] = ordo.zeros({MiB / 4}, {device = G}) end -- 4 x 1 MiB
        local s1 = ordo.cuda.memory_stats()
        assert.is_true(s1.allocated_bytes >= s0.allocated_bytes + 4 * MiB,
                       fmt("allocated %d -> %d", s0.allocated_bytes, s1.allocated_bytes))
        assert.is_true(s1.peak_allocated_bytes >= s1.allocated_bytes)
        assert.is_true(s1.reserved_bytes >= s1.allocated_bytes)
        t = nil
        settle()
        local s2 = ordo.cuda.memory_stats()
        assert.is_true(s2.allocated_bytes <= s0.allocated_bytes,
                       fmt("allocated %d after the tensors were collected, %d before", s2.allocated_bytes, s0.allocated_bytes))
        assert.is_true(s2.reserved_bytes >= s2.allocated_bytes + 4 * MiB, "the freed blocks stay cached")
    end)

    it("memory_stats: a tensor's block is its size rounded to a class, less than 12.5% over from 1 MiB", function()
        need_gpu()
        settle()
        ordo.cuda.empty_cache()
        -- elements (float32) -> bytes of the block
        for _, c in ipairs({{262143, MiB}, {262144, MiB}, {262145, MiB + 128 * 1024}, {524289, 2.25 * MiB},
                            {4 * MiB + 1, 18 * MiB}, {1000, 4096}}) do
            local s0 = ordo.cuda.memory_stats()
            local t = ordo.zeros({c[1]}, {device = G})
            local s1 = ordo.cuda.memory_stats()
            assert.equals(c[2], s1.allocated_bytes - s0.allocated_bytes, fmt("a tensor of %d floats", c[1]))
            t = nil
            settle()
        end
        ordo.cuda.empty_cache()
    end)

    it("reusing a size hits the cache; empty_cache gives cached blocks back", function()
        need_gpu()
        settle()
        local s0 = ordo.cuda.memory_stats()
        for i = 1, 5 do
            local t = ordo.full({3 * MiB / 4}, i, {device = G}) -- 3 MiB each time
            assert.equals(i, t:narrow(1, 1, 1):item())
            t = nil
            settle()
        end
        local s1 = ordo.cuda.memory_stats()
        assert.is_true(s1.cache_hits - s0.cache_hits >= 4, fmt("%d cache hits", s1.cache_hits - s0.cache_hits))
        assert.is_true(s1.num_device_allocs - s0.num_device_allocs <= 1)
        assert.is_true(s1.reserved_bytes > s1.allocated_bytes)
        local keep = ordo.ones({MiB / 8}, {device = G}) -- a small block: the 4 MiB one stays cached
        ordo.cuda.empty_cache()
        local s2 = ordo.cuda.memory_stats()
        assert.equals(s2.allocated_bytes, s2.reserved_bytes)
        assert.is_true(s2.num_device_frees > s1.num_device_frees)
        assert.equals(MiB / 8, keep:sum():item()) -- live tensors keep their memory
        ordo.cuda.empty_cache(G)
        ordo.cuda.empty_cache(0)
    end)

    it("a gpu failure is not taken by an allocation that empties the cache to retry: the failed tensor raises it", function()
        need_gpu()
        if not (SIM_ENV and SIM_MEM_MB and SIM_MEM_MB <= 128) then
            pending("needs the simulated device with a memory limit (ORDO_SIMULATED_GPUS=1 ORDO_SIMULATED_GPU_MEM_MB=64)")
        end
        finally(function() pcall(ordo.engine.wait_for_all) end)
        settle()
        ordo.cuda.empty_cache()
        do -- 40 MiB of freed 1 MiB blocks in the cache
            local t = {}
            for i = 1, 40 do t[i] = ordo.empty({MiB / 4}, {device = G}) end
        end
        settle()
        local retries0 = ordo.cuda.memory_stats().oom_retries
        local a = ordo.tensor({1}, {dtype = "int32", device = G})
        local q = a:div(a * 0, "trunc")
        os.execute("sleep 0.2") -- (its kernel has failed on the device by now)
        -- misses the cache and does not fit beside it: the cache is given
        -- back, waiting for each block's last use, and the allocation retried;
        -- those waits took the device's failure, which was then lost
        local big = ordo.empty({40 * MiB / 4}, {device = G})
        assert.is_true(ordo.cuda.memory_stats().oom_retries > retries0)
        raises(function() return q:totable() end, "div: integer division by zero", "gpu(0)")
        big = nil
    end)

    -- The same for a kernel's scratch memory (cu_scratch_alloc) on a device
    -- full of cached blocks: its retry gave the cache back with waits that
    -- took the device's pending failure (here a generator never seeded, a
    -- failure the device reports at its next wait, as on a GPU).  Shown by
    -- the CUDA emulation, where the split sum takes scratch memory.
    it("a gpu failure is not taken by a kernel's scratch retry on a full device: the next wait raises it", function()
        need_gpu()
        if not (SIM_ENV and SIM_MEM_MB and SIM_MEM_MB <= 128) then
            pending("needs the simulated device with a memory limit (ORDO_SIMULATED_GPUS=1 ORDO_SIMULATED_GPU_MEM_MB=64)")
        end
        finally(function() pcall(ordo.engine.wait_for_all); ordo.cuda.empty_cache() end)
        settle()
        ordo.cuda.empty_cache()
        local x = ordo.rand({2, 2 ^ 19}, {device = G}) -- two long rows: the sum splits them
        local want = x:cpu():sum(2)
        local u = ordo.empty({MiB / 4}, {device = G})
        local g = ordo.zeros({32}, {dtype = "uint8", device = G}) -- no generator state: never seeded
        do -- fills the device with blocks of every size, then frees them: all cached
            local held = hold_device_memory() -- luacheck: ignore
        end
        settle()
        assert.is_true(ordo.cuda.memory_stats().reserved_bytes > (SIM_MEM_MB - 1) * MiB, "the device is full")
        local T = require "ordo.tensor"
        T.push(T.kernel_ids.uniform, "uniform_", 0, {}, {u, g}, {0, 1})
        os.execute("sleep 0.2") -- (its kernel has failed on the device by now)
        -- the sum's scratch misses: the cache is given back (waiting for each
        -- block's last use) and the allocation retried; those waits took the
        -- device's failure, which no wait then reported.  It is the next
        -- host wait's on the device (CUDA's rule), here the sum's read.
        local s = x:sum(2)
        raises(function() return s:totable() end, "uniform: generator state was never seeded", "gpu(0)")
        if os.getenv("ORDO_EMU_THREAD_ORDER") then -- (the plain simulated device's sum takes no scratch)
            assert.is_true(ordo.cuda.memory_stats().reserved_bytes < (SIM_MEM_MB - 8) * MiB, "the cache was given back")
        end
        check(s, want, "sum of long rows on a full device", RED)
        u, g = nil, nil
    end)

    it("out of memory: garbage is collected and the allocation retried; a tensor too big raises naming sizes", function()
        need_gpu()
        if not (SIM_ENV and SIM_MEM_MB and SIM_MEM_MB <= 128) then
            pending("needs the simulated device with a memory limit (ORDO_SIMULATED_GPUS=1 ORDO_SIMULATED_GPU_MEM_MB=64)")
        end
        settle()
        ordo.cuda.empty_cache()
        local retries0 = ordo.cuda.memory_stats().oom_retries
        -- no collection by the byte count: only running out of device memory frees the garbage
        ordo.memory.set_gc_threshold(2 ^ 40)
        local ok, err = pcall(function()
            local sizes = {3, 5, 2.5, 4} -- MiB x 4 = 12, 20, 10, 16 MiB
            local total = 0
            for i = 1, 40 do
                local mb = sizes[(i - 1) % #sizes + 1] * 4
                local t = ordo.full({mb * MiB / 4}, i, {device = G})
                total = total + mb
                if i % 5 == 0 then assert.equals(i, t:narrow(1, 1, 1):item()) end
            end
            assert.is_true(total > 8 * SIM_MEM_MB)
            -- an op's output that does not fit at first
            local a = ordo.full({10 * MiB / 4}, 1, {device = G}) -- 10 MiB
            local sum = a
            for _ = 1, 20 do sum = sum + a end -- 20 outputs of 10 MiB, most of them garbage
            assert.equals(21, sum:narrow(1, 1, 1):item())
        end)
        ordo.memory.set_gc_threshold((tonumber(os.getenv("ORDO_GC_THRESHOLD_MB") or "") or 64) * MiB)
        assert(ok, err)
        local s = ordo.cuda.memory_stats()
        assert.is_true(s.peak_reserved_bytes <= SIM_MEM_MB * MiB)
        assert.is_true(s.oom_retries > retries0, "each refusal by the device counts in oom_retries")
        -- one tensor larger than the device
        local e = raises(function() return ordo.empty({50 * MiB}, {device = G}) end, "out of memory", "200.0 MiB")
        assert.truthy(e:find("gpu(0)", 1, true))
        raises(function() return ordo.zeros({200 * MiB / 8}, {dtype = "float64", device = G}) end, "zeros", "out of memory")
        raises(function() return ordo.zeros({4}):to(G):expand({50 * MiB, 4}):contiguous() end, "out of memory")
        -- and the device keeps working
        assert.equals(10, ordo.full({4}, 2.5, {device = G}):sum():item())
    end)

    -- The Lua GC sees a tensor as a few bytes: device memory counts too (per
    -- device, paced by its size and its live bytes), and an allocation waits
    -- while much of it is waiting to be freed, so a training loop holds a
    -- small multiple of what its model needs rather than the whole device.
    it("a training loop on the GPU holds a small multiple of its model's memory, not the whole device", function()
        need_gpu()
        if not (SIM_ENV and SIM_MEM_MB and SIM_MEM_MB <= 256) then
            pending("needs the simulated device with a memory limit (ORDO_SIMULATED_GPUS=1 ORDO_SIMULATED_GPU_MEM_MB=64)")
        end
        settle()
        ordo.cuda.empty_cache()
        local nn, optim = ordo.nn, ordo.optim
        local model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
        model:to(G)
        local opt = optim.SGD(model:parameters(), {lr = 1e-3})
        local crit = nn.CrossEntropyLoss()
        -- (a small batch, few steps: under ThreadSanitizer on the CUDA
        -- emulation, 200 steps of a batch of 64 took six minutes.  Each step
        -- still makes ~2 MiB of garbage: with the device not counted on its
        -- own, 40 steps of this loop held 63 of the 64 MiB)
        local x = ordo.randn({16, 256}):to(G)
        local y = ((ordo.rand({16}) * 10):floor() + 1):to("int64"):to(G)
        settle()
        local peak = 0
        for _ = 1, 50 do
            opt:zero_grad()
            crit(model(x), y):backward()
            opt:step()
            peak = math.max(peak, ordo.cuda.memory_stats().reserved_bytes)
        end
        settle()
        local held = ordo.cuda.memory_stats().allocated_bytes -- the model, its grads, x, y
        assert.is_true(held < 4 * MiB)
        -- (the bound leaves room for a loaded machine or a ThreadSanitizer
        -- build, whose frees lag: 40 MiB was seen under TSan; the loop held
        -- the whole device before the device counted its memory)
        assert.is_true(peak < math.max(12 * held, SIM_MEM_MB * MiB * 3 / 4),
            ("the loop held %.1f MiB of a %d MiB device for a model of %.1f MiB"):format(peak / MiB, SIM_MEM_MB, held / MiB))
        ordo.cuda.empty_cache()
    end)

    -- A kernel's stream-ordered scratch (a split reduction's partial
    -- results, matmul's packed operands) comes from the device memory the
    -- cache holds: on a device full of cached blocks, they go back first.
    it("a kernel's scratch memory on a device full of cached blocks: the cache is given back, the op runs", function()
        need_gpu()
        if not (SIM_ENV and SIM_MEM_MB and SIM_MEM_MB <= 128) then
            pending("needs the simulated device with a memory limit (ORDO_SIMULATED_GPUS=1 ORDO_SIMULATED_GPU_MEM_MB=64)")
        end
        -- fills the device with blocks of every size, then frees them: all cached
        local function fill()
            settle()
            local held = hold_device_memory()
            held = nil
            settle()
            assert.is_true(ordo.cuda.memory_stats().reserved_bytes > (SIM_MEM_MB - 1) * MiB, "the device is full")
        end
        settle()
        ordo.cuda.empty_cache()
        local x = ordo.rand({2, 2 ^ 19}, {device = G}) -- two long rows: the sum splits them
        local want_sum = x:cpu():sum(2)
        check(x:sum(2), want_sum, "sum of long rows", RED)
        fill()
        check(x:sum(2), want_sum, "sum of long rows on a full device", RED)
        x = nil
        local a = ordo.rand({3, 40, 30}, {device = G})
        local b = ordo.rand({30, 20}, {device = G}):expand({3, 30, 20}) -- stride 0: packed for the gemm
        local want_mm = a:cpu():matmul(b:contiguous():cpu())
        check(a:matmul(b), want_mm, "matmul of an expanded operand", RED)
        fill()
        check(a:matmul(b), want_mm, "matmul of an expanded operand on a full device", RED)
        ordo.cuda.empty_cache()
    end)

    -- linalg's kernels factorise up to 1024 matrices at once, each block in
    -- scratch of its own (up to 64 MiB): with less free, fewer blocks do
    -- (kernels/cuda/linalg.cu); the op failed 'out of GPU memory for the
    -- scratch of 8 matrices' though one matrix's fitted
    it("linalg on a device with little memory free: its scratch for fewer matrices at once, the op runs", function()
        need_gpu()
        if not (SIM_ENV and SIM_MEM_MB and SIM_MEM_MB <= 128) then
            pending("needs the simulated device with a memory limit (ORDO_SIMULATED_GPUS=1 ORDO_SIMULATED_GPU_MEM_MB=64)")
        end
        settle()
        ordo.cuda.empty_cache()
        local o = {dtype = "float64"}
        local A = ordo.randn({8, 32, 32}, o) + ordo.eye(32, o) * 3 -- 8 x 8 KiB of scratch wanted
        local Ag = gpu(A)
        local want_det = ordo.linalg.det(A)
        local spare = ordo.empty({10 * 1024}, {device = G}) -- 40 KiB, given back below
        local held = hold_device_memory()
        spare = nil
        settle()
        ordo.cuda.empty_cache()
        check(ordo.linalg.det(Ag), want_det, "det with 40 KiB free", RED)
        held = nil
        settle()
        ordo.cuda.empty_cache()
    end)

    local function make_params(n, numel)
        local ps = {}
        for i = 1, n do
            ps[i] = ordo.zeros({numel}, {device = G}):requires_grad()
            ps[i].grad = ordo.ones({numel}, {device = G})
        end
        return ps
    end
    local function drop_grads(ps, from, to)
        for i = from, to do ps[i].grad = nil end
    end

    it("out of memory for an optimiser's new state changes no parameter, count or state; the next step runs", function()
        need_gpu()
        if not (SIM_ENV and SIM_MEM_MB and SIM_MEM_MB <= 64) then
            pending("needs the simulated device with a memory limit (ORDO_SIMULATED_GPUS=1 ORDO_SIMULATED_GPU_MEM_MB=64)")
        end
        for _, kind in ipairs({"Adam", "RMSprop", "SGD"}) do
            settle()
            ordo.cuda.empty_cache()
            -- 4 parameters and their gradients of 6 MiB: 48 MiB, and the state of one
            -- parameter fits, not of two (Adam, RMSprop with momentum: 12 MiB each); SGD's
            -- momentum buffer: 10 parameters and gradients of 3 MiB, then 3 MiB each
            local n = kind == "SGD" and 10 or 4
            local numel = (kind == "SGD" and 3 or 6) * MiB / 4
            -- made (and later dropped) in functions of their own: a register
            -- of this function's frame left holding a tensor would keep it
            -- alive through the collections, and its memory with it
            local ps = make_params(n, numel)
            local opts = {lr = 0.5, momentum = kind ~= "Adam" and 0.9 or nil}
            local opt = ordo.optim[kind](ps, opts)
            raises(function() opt:step() end, "out of memory")
            for i = 1, n do
                assert.equals(0, ps[i]:narrow(1, 1, 1):item(), kind .. " parameter " .. i .. " was not stepped")
                assert.is_nil(opt.steps and opt.steps[i], kind .. " count " .. i)
            end
            if opt.state then assert.is_nil(next(opt.state), kind) end
            if opt.buf then assert.is_nil(next(opt.buf), kind) end
            -- with fewer gradients the step fits and runs
            drop_grads(ps, 2, n)
            settle()
            local ok, err = pcall(opt.step, opt)
            assert(ok, kind .. ": " .. tostring(err))
            assert.is_true(ps[1]:narrow(1, 1, 1):item() < 0, kind)
            assert.equals(0, ps[2]:narrow(1, 1, 1):item(), kind)
            ps, opt = nil, nil
        end
        settle()
        ordo.cuda.empty_cache()
    end)

    it("out of memory in any op names the op: tensor-tensor ops, temporaries of pushes, copies", function()
        need_gpu()
        if not (SIM_ENV and SIM_MEM_MB and SIM_MEM_MB <= 128) then
            pending("needs the simulated device with a memory limit (ORDO_SIMULATED_GPUS=1 ORDO_SIMULATED_GPU_MEM_MB=64)")
        end
        settle()
        ordo.cuda.empty_cache()
        -- a square tensor of more than half the device: one more of its size does not fit
        local side = floor(math.sqrt(0.55 * SIM_MEM_MB * MiB / 4))
        local a = ordo.zeros({side, side}, {device = G})
        local function oom(fn, op)
            local err = raises(fn, "out of memory", "after freeing unreferenced tensors")
            assert(err:find(": " .. op .. ": gpu(0): out of memory", 1, true), fmt("%q does not name %s", err, op))
            assert.is_nil(err:find(op .. ": " .. op .. ":", 1, true), err)
        end
        oom(function() return a + a end, "add")           -- a new output of the broadcast shape
        oom(function() return a * a end, "mul")
        oom(function() return a:maximum(a) end, "maximum")
        oom(function() return a + 1 end, "add")
        oom(function() return a:add_(a:t()) end, "add_")  -- the aliasing input is read from a copy
        oom(function() return a:copy_(a:t()) end, "copy_")
        oom(function() return a:matmul(a) end, "matmul")
        oom(function() return ordo.zeros({4}, {device = G}):expand({side * side, 4}):to(CPU) end, "to")
        a = nil
        settle()
        assert.same({2, 2}, (ordo.ones({2}, {device = G}) * 2):totable())
    end)

    it("a shape too large to address fails at once: no collection, no emptied cache, no out-of-memory note", function()
        need_gpu()
        settle()
        local t = ordo.zeros({MiB / 4}, {device = G}) -- 1 MiB, then cached
        t = nil
        settle()
        local s0 = ordo.cuda.memory_stats()
        assert.is_true(s0.reserved_bytes >= s0.allocated_bytes + MiB)
        for _, c in ipairs({{"float32", 2 ^ 31, "2147483648"}, {"uint8", 2 ^ 40, "1099511627776"}}) do
            local err = raises(function() return ordo.zeros({c[2], c[2]}, {dtype = c[1], device = G}) end,
                               fmt("zeros: shape %sx%s is too large", c[3], c[3]))
            assert.is_nil(err:find("after freeing", 1, true), err)
        end
        local b = ordo.zeros({1, 1}, {device = G})
        local err = raises(function() return b:expand({2 ^ 40, 1}) + b:expand({1, 2 ^ 40}) end,
                           "add: shape 1099511627776x1099511627776 is too large")
        assert.is_nil(err:find("after freeing", 1, true), err)
        -- the relief (collections, empty_cache) did not run: the cached block is still there
        local s1 = ordo.cuda.memory_stats()
        assert.equals(s0.reserved_bytes, s1.reserved_bytes)
        assert.equals(s0.num_device_frees, s1.num_device_frees)
        -- as on the cpu
        raises(function() return ordo.zeros({2 ^ 31, 2 ^ 31}) end, "zeros: shape 2147483648x2147483648 is too large")
    end)
end)

-- ---------------------------------------------------------------- the CUDA emulation

-- spec/run_tests.sh --cuda-emu runs this file on the emulation
-- (kernels/cuda/emu) with ORDO_EMU_THREAD_ORDER set: forward, reverse, and
-- shuffled under the sanitizers.  Elsewhere this test is pending.
describe("gpu tensors: the CUDA emulation", function()
    local ORDER = os.getenv("ORDO_EMU_THREAD_ORDER")

    it("runs a block's threads in the order ORDO_EMU_THREAD_ORDER names; a bad order fails every kernel, naming it", function()
        need_gpu()
        if not ORDER then pending("runs on the CUDA emulation (spec/run_tests.sh --cuda-emu sets ORDO_EMU_THREAD_ORDER)") end
        -- One thread per element adds into one float32 slot, where 1e8 + 1
        -- rounds to 1e8: 1e8, 1, -1e8, 1 sum to 1 in this order, 0 in reverse.
        local src = ordo.tensor({1e8, 1, -1e8, 1}, {dtype = "float32"})
        local idx = ordo.ones({4}, {dtype = "int64"}) -- (indices count from 1)
        local y = ordo.zeros({1}, {dtype = "float32"})
        local sum = gpu(y):scatter_add(1, gpu(idx), gpu(src)):to(CPU):item()
        local want = ({forward = 1, reverse = 0})[ORDER]
        if want then
            assert.equals(want, sum)
        else -- shuffled: some permutation of the four additions
            assert.is_true(sum == 0 or sum == 1 or sum == 2, tostring(sum))
        end

        local f = assert(io.popen(fmt("cd %s && ORDO_EMU_THREAD_ORDER=sideways LUA_PATH='lua/?.lua;lua/?/init.lua;;' "
                                      .. "luajit -e \"local o = require 'ordo'; "
                                      .. "print(pcall(function() return (o.ones({3}, {device = o.gpu(0)}) + 1):sum():item() end))\" 2>&1",
                                      os.getenv("PWD") or ".")))
        local out = f:read("*a")
        f:close()
        assert.is_truthy(out:find("false", 1, true), out)
        assert.is_truthy(out:find("ORDO_EMU_THREAD_ORDER must be forward, reverse or shuffle", 1, true), out)
    end)

    -- A cuBLAS handle takes its workspace from CUDA, not from ordo's cache,
    -- when a worker's first matmul creates it: on a device the cache has
    -- filled, the cache goes back and the handle is made (it failed:
    -- "cannot create a cuBLAS handle ... CUBLAS_STATUS_ALLOC_FAILED").
    it("a worker's first matmul on a device full of cached blocks: its cuBLAS handle is made, the matmul runs", function()
        need_gpu()
        if not ORDER then pending("runs on the CUDA emulation (spec/run_tests.sh --cuda-emu sets ORDO_EMU_THREAD_ORDER)") end
        if not (SIM_MEM_MB and SIM_MEM_MB <= 128) then
            pending("needs the simulated device with a memory limit (ORDO_SIMULATED_GPU_MEM_MB=64)")
        end
        -- a fresh process: no worker has a handle yet
        local script = os.tmpname()
        local f = assert(io.open(script, "wb"))
        f:write([[
local o = require "ordo"
local G = o.gpu(0)
local a = o.ones({8, 16}, {device = G})
-- 512-byte blocks, cached below, for the matmul's and the sum's results: an
-- allocation the cache cannot serve would give the cache back itself
local held = {o.empty({64}, {device = G}), o.empty({64}, {device = G}), o.empty({1}, {device = G})}
for _, n in ipairs({2 ^ 18, 16384, 1024, 128}) do
    while true do
        local ok, t = pcall(o.empty, {n}, {device = G})
        if not ok then break end
        held[#held + 1] = t
    end
end
held = nil
collectgarbage("collect")
collectgarbage("collect")
o.engine.wait_for_all()
local full = o.cuda.memory_stats().reserved_bytes
print("full", full)
print("matmul", pcall(function() return a:matmul(a:t()):sum():item() end))
]])
        f:close()
        local p = assert(io.popen(fmt("cd %s && ORDO_EMU_CUBLAS_WORKSPACE_MB=4 LUA_PATH='lua/?.lua;lua/?/init.lua;;' "
                                      .. "luajit %s 2>&1", os.getenv("PWD") or ".", script)))
        local out = p:read("*a")
        p:close()
        os.remove(script)
        local full = tonumber(out:match("full%s+(%d+)"))
        assert.is_not_nil(full, out)
        assert.is_true(full > (SIM_MEM_MB - 1) * 2 ^ 20, "the device is full of cached blocks: " .. out)
        assert.is_truthy(out:find("matmul\ttrue\t1024", 1, true), out) -- 8 x 8 results of 16 each
    end)
end)
