-- Asynchrony: ops return at once and run by their data dependencies.  A long
-- random chain of in-place updates and reads (through overlapping views of
-- shared storages) pushed without any wait must give exactly what the same
-- program gives with a wait after every op.
local ordo = require "ordo"

-- Runs a random program of n ops (seeded) on engine eng (nil = default);
-- sync = wait for everything after every op.  Returns the final values of
-- the base tensors and every value read along the way.
local function program(seed, n, sync, eng)
    math.randomseed(seed)
    local opts = {dtype = "float64", engine = eng}
    local A = ordo.arange(16, opts):view(4, 4)
    local B = ordo.full({4, 4}, 0.5, opts)
    local D = ordo.arange(32, opts):view(8, 4):mul_(0.1)
    local E = ordo.zeros({4}, opts)
    -- 4x4 slots: bases, a transposed view, two overlapping windows of D
    local slots = {A, B, A:t(), D:narrow(1, 1, 4), D:narrow(1, 3, 4), D:narrow(1, 5, 4):t()}
    local reads = {}
    local function settle()
        if sync then
            if eng then eng:wait_for_all() else ordo.engine.wait_for_all() end
        end
    end
    for _ = 1, n do
        local dst = slots[math.random(#slots)]
        local src = slots[math.random(#slots)]
        local op = math.random(9)
        if op == 1 then dst:add_(src):mul_(0.5)
        elseif op == 2 then dst:copy_(src)
        elseif op == 3 then dst:sub_(src:tanh())
        elseif op == 4 then dst:mul_(0.75):add_(math.random())
        elseif op == 5 then dst:copy_(src:t())
        elseif op == 6 then reads[#reads + 1] = src:sum()
        elseif op == 7 then E:copy_(src:sum(1)):div_(4)
        elseif op == 8 then dst:add_(E):mul_(0.5)
        else reads[#reads + 1] = (src:matmul(dst) * 0.01):max(2) end
        settle()
    end
    local out = {A = A:totable(), B = B:totable(), D = D:totable(), E = E:totable(), reads = {}}
    for i, r in ipairs(reads) do out.reads[i] = r:totable() end
    return out
end

describe("asynchrony", function()
    it("a long chain pushed without waits equals the same with a wait after every op", function()
        local async = program(1, 3000, false)
        local sync = program(1, 3000, true)
        assert.same(sync, async)
    end)

    it("the same on a pooled engine and on the naive engine", function()
        local pooled = ordo.engine.new({kind = "pooled", cpu_workers = 2})
        local naive = ordo.engine.new({kind = "naive"})
        local ref = program(2, 1500, true)
        assert.same(ref, program(2, 1500, false, pooled))
        assert.same(ref, program(2, 1500, false, naive))
        pooled:close()
        naive:close()
    end)

    it("ops return before they run: a push is far cheaper than the work", function()
        local a = ordo.ones({512, 512})
        local b = ordo.ones({512, 512})
        local t0 = os.clock()
        local c
        for _ = 1, 20 do c = a:matmul(b) end
        local pushed = os.clock() - t0
        ordo.engine.wait_for_var(c)
        assert.equals(512, c:narrow(1, 1, 1):narrow(2, 1, 1):item())
        assert.is_true(pushed < 1.0)
    end)

    it("views writing into their base storage are ordered with every op on the base", function()
        local base = ordo.zeros({1000})
        local expect = {}
        for i = 1, 1000 do expect[i] = 0 end
        math.randomseed(3)
        for _ = 1, 2000 do
            local s = math.random(1, 991)
            local len = math.random(1, 10)
            local v = base:narrow(1, s, len)
            if math.random() < 0.5 then
                v:add_(1)
                for i = s, s + len - 1 do expect[i] = expect[i] + 1 end
            else
                v:mul_(2)
                for i = s, s + len - 1 do expect[i] = expect[i] * 2 end
            end
            if math.random() < 0.1 then base:add_(-1) for i = 1, 1000 do expect[i] = expect[i] - 1 end end
        end
        assert.same(expect, base:totable())
    end)

    it("reads taken between writes see exactly the writes pushed before them", function()
        local t = ordo.zeros({8})
        local snaps = {}
        for i = 1, 200 do
            t:add_(1)
            snaps[i] = t:clone()
        end
        for i = 1, 200 do assert.equals(8 * i, snaps[i]:sum():item()) end
    end)

    it("independent ops run in parallel on 2 workers", function()
        local e = ordo.engine.new({kind = "perdevice", cpu_workers = 2})
        local a = ordo.rand({256, 256}, {engine = e})
        local b = ordo.rand({256, 256}, {engine = e})
        local outs = {}
        for i = 1, 8 do outs[i] = (i % 2 == 0 and a or b):matmul(a) end
        e:wait_for_all()
        assert.same(outs[2]:totable(), outs[4]:totable())
        e:close()
    end)
end)
