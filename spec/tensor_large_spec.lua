-- Large elementwise ops are split among the pool's idle workers
-- (ordo_parallel_for, src/help.c; kernels/cpu/iter.c splits iterations of
-- 131,072 elements or more).  Every element is computed exactly as a single
-- worker computes it, so the results must be identical -- bit for bit --
-- with 1, 2 and 4 CPU workers, on contiguous tensors, broadcasts,
-- transposed views and in-place updates; and a failure inside a chunk is
-- raised at the wait as before.
local ordo = require "ordo"

local ROWS, COLS = 600, 500 -- 300,000 elements: split into ~10 chunks

-- The same program on an engine with `workers` CPU workers; returns the
-- results as Lua tables.
local function program(workers)
    local e = ordo.engine.new({kind = "perdevice", cpu_workers = workers})
    local opts = {engine = e}
    local n = ROWS * COLS
    local x = ordo.arange(n, opts):reshape(ROWS, COLS):mul(0.001):tanh()
    local y = ordo.arange(n, opts):reshape(ROWS, COLS):mul(-0.0007):sigmoid()
    local row = ordo.arange(COLS, opts):mul(0.01)
    local col = ordo.arange(ROWS, opts):reshape(ROWS, 1):mul(-0.02)
    local out = {}
    out.add = x + y
    out.bcast = x * row + col
    out.transposed = x:t() - y:t() -- views with strides (1, COLS)
    local z = x:clone()
    z:sub_(y)
    z:mul_(3)
    out.inplace = z
    out.exp = y:exp()
    out.gt = x:gt(y)
    out.where = x:where(x:gt(0.2), y)
    out.masked = x:masked_fill(x:lt(-0.1), 5)
    out.double = x:double()
    out.int = (x * 1000):int()
    local f = ordo.zeros({ROWS, COLS}, opts)
    f:fill_(2.5)
    out.fill = f
    out.copy_t = x:t():contiguous()
    -- the fused optimiser updates (kernels/cpu/optim.c) split the same way
    local optim = require "ordo.optim"
    for name, make in pairs({
        adam = function(ps) return optim.Adam(ps, {lr = 0.01, weight_decay = 0.1}) end,
        sgd = function(ps) return optim.SGD(ps, {lr = 0.05, momentum = 0.9, nesterov = true}) end,
    }) do
        local w = x:clone():requires_grad()
        local opt = make({w})
        for _ = 1, 3 do
            opt:zero_grad()
            ;(w * w * y):sum():backward()
            opt:step()
        end
        out[name] = w:detach()
    end
    local t = {}
    for k, v in pairs(out) do t[k] = v:totable() end
    e:close()
    return t
end

local function same(a, b, path)
    if type(a) ~= "table" then
        if a ~= b and not (a ~= a and b ~= b) then
            error(("%s: %s ~= %s"):format(path, tostring(a), tostring(b)), 0)
        end
        return
    end
    assert(#a == #b, path .. ": lengths differ")
    for i = 1, #a do same(a[i], b[i], path .. "[" .. i .. "]") end
end

describe("large elementwise ops split among idle workers", function()
    it("give the single worker's results bit for bit with 2 and 4 workers", function()
        local one = program(1)
        for _, w in ipairs({2, 4}) do
            local many = program(w)
            for k, v in pairs(one) do same(v, many[k], ("workers=%d %s"):format(w, k)) end
        end
    end)

    it("match a plain-Lua reference", function()
        local r = program(2)
        local function x(i, j) return math.tanh(((i - 1) * COLS + (j - 1)) * 0.001) end
        local function y(i, j) return 1 / (1 + math.exp(((i - 1) * COLS + (j - 1)) * 0.0007)) end
        for _, p in ipairs({{1, 1}, {1, COLS}, {ROWS, 1}, {ROWS, COLS}, {317, 229}, {444, 1}}) do
            local i, j = p[1], p[2]
            assert.is_near(x(i, j) + y(i, j), r.add[i][j], 1e-6)
            assert.is_near(x(i, j) * (j - 1) * 0.01 + (i - 1) * -0.02, r.bcast[i][j], 1e-5)
            assert.is_near(x(i, j) - y(i, j), r.transposed[j][i], 1e-6)
            assert.is_near((x(i, j) - y(i, j)) * 3, r.inplace[i][j], 1e-5)
            assert.are.equal(x(i, j) > y(i, j) and 1 or 0, r.gt[i][j])
            assert.are.equal(2.5, r.fill[i][j])
            assert.is_near(x(i, j), r.copy_t[j][i], 1e-6)
        end
    end)

    it("raise a failure inside a chunk at the wait, and the engine goes on", function()
        local e = ordo.engine.new({kind = "perdevice", cpu_workers = 2})
        local a = ordo.ones({ROWS * COLS}, {engine = e, dtype = "int32"})
        local b = ordo.ones({ROWS * COLS}, {engine = e, dtype = "int32"})
        b:narrow(1, 200000, 1):fill_(0) -- one zero, in one chunk
        local q = a:div(b, "trunc")
        local ok, err = pcall(function() q:wait() end)
        assert.is_false(ok)
        assert.matches("integer division by zero", err)
        local c = a + b
        assert.are.equal(ROWS * COLS * 2 - 1, c:sum():item())
        e:close()
    end)
end)
