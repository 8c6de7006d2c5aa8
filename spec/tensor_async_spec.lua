-- Asynchrony: ops return at once and run by their data dependencies.  A long
-- random chain of in-place updates and reads (through overlapping views of
-- shared storages) pushed without any wait must give exactly what the same
-- program gives with a wait after every op.
local ordo = require "ordo"
local ffi = require "ffi"

local H = require "support.helpers"

-- The random program of spec/support/helpers.lua on engine eng (nil = the
-- default); sync = wait for everything after every op.
local function program(seed, n, sync, eng)
    return H.random_program(ordo, seed, n, {sync = sync, engine = eng})
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

    it("small ops run at their push when nothing uses their tensors, and wait when something does", function()
        -- run_now.c: the same program with run-now on (default), off, and
        -- with every small op allowed, against a wait after every op
        local ref = program(7, 2000, true)
        for _, limit in ipairs({-1, 16, 16384}) do
            local e = ordo.engine.new({cpu_workers = 2, run_now_max_elements = limit})
            assert.same(ref, program(7, 2000, false, e))
            e:close()
        end
        -- on this thread: the value is there before any wait (no worker ran it)
        local e = ordo.engine.new({cpu_workers = 1})
        local a = ordo.zeros({4}, {engine = e})
        e:wait_for_all()
        a:add_(1)
        local p = ffi.cast("float *", a._c.storage.data) -- read without a wait
        assert.equals(1, p[0])
        assert.equals(0, e:pending())
        e:close()
    end)

    it("a repeated op on tensors freed and made again uses the new tensors' shapes", function()
        -- tensor_push.c remembers the arguments of repeated ops by the
        -- descriptors' ids; descriptors freed by the GC and made again
        -- (often at the same addresses) must never reuse them
        local rng = 12345
        local function rand(n) rng = (rng * 1103515245 + 12345) % 2147483648; return rng % n + 1 end
        for round = 1, 200 do
            local n, reps = rand(40), rand(4)
            local shape = rand(3) == 1 and {n} or {rand(4), n}
            local c, a = ordo.zeros(shape), ordo.full(shape, round)
            for _ = 1, reps do c:add_(a) end
            local b = a:transpose(1, a:dim()) -- another view, same storage
            if b:dim() == 1 then c:mul_(b) else c:copy_(c:contiguous()) end
            local want = b:dim() == 1 and reps * round * round or reps * round
            local got = c:totable()
            local flat = type(got[1]) == "table" and got[#got] or got
            assert.equals(want, flat[#flat])
            assert.equals(want, flat[1])
            c, a, b = nil, nil, nil
            if round % 7 == 0 then collectgarbage() end
        end
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
