-- spec/pinned_spec.lua: pinned (page-locked) host tensors, cpu_pinned(n).
--
-- Pinned memory comes from the GPU backend, so most of this file needs a
-- CUDA device or the simulated one; without either those specs are pending,
-- never passed.  spec/run_tests.sh runs this file a second time on the
-- simulated device, with gpu_spec.lua.  The first block checks the errors
-- a machine without a device must give.
local ordo = require "ordo"
local H = require "support.helpers"

local function need_gpu()
    if not ordo.cuda.is_available() then pending("no CUDA device available") end
end

local function values(t)
    return t:totable()
end

describe("pinned tensors without a device", function()
    it("cpu_pinned, pin_memory and DataLoader{pin_memory} raise naming the missing device", function()
        if ordo.cuda.is_available() then pending("a device is present: the no-device errors cannot be seen") end
        local ok, err = pcall(ordo.cpu_pinned)
        assert.is_false(ok)
        assert.matches("cpu_pinned%(0%): pinned memory needs a CUDA device", err)
        ok, err = pcall(function() return ordo.tensor({1, 2}):pin_memory() end)
        assert.is_false(ok)
        -- named after the call (it said only "cpu_pinned(0): ...")
        assert.matches("pin_memory: cpu_pinned%(0%): pinned memory needs a CUDA device", err)
        ok, err = pcall(function() return ordo.tensor({1, 2}, {device = "cpu_pinned"}) end)
        assert.is_false(ok)
        -- a device given as a string: the error names the call too (it said only "cpu_pinned(0): ...")
        assert.matches("tensor: cpu_pinned%(0%): pinned memory needs a CUDA device", err)
        H.raises(function() return ordo.zeros({2}, "cpu_pinned:1") end, "zeros: cpu_pinned(1): pinned memory needs")
        H.raises(function() return ordo.get_rng_state("cpu_pinned") end, "get_rng_state: cpu_pinned(0)")
        ok, err = pcall(ordo.data.DataLoader, ordo.zeros({4, 2}), {batch_size = 2, pin_memory = true})
        assert.is_false(ok)
        -- (it said "cpu_pinned(0): ...", not which call nor which option)
        assert.matches("pinned_spec.lua:%d+: DataLoader: pin_memory = true: pinned memory needs a CUDA device", err)
        assert.is_false(ordo.tensor({1}):is_pinned())
    end)
end)

describe("pinned tensors", function()

    it("hold values written from Lua, print their device, and are CPU tensors for ops", function()
        need_gpu()
        local p = ordo.tensor({{1, 2}, {3, 4}}, {device = ordo.cpu_pinned()})
        assert.is_true(p:is_pinned())
        assert.are.equal("cpu_pinned(0)", tostring(p:device()))
        assert.are.same({{1, 2}, {3, 4}}, values(p))
        assert.matches("on cpu_pinned%(0%)", tostring(p))
        -- results of ops on pinned tensors are ordinary CPU tensors
        local q = p + ordo.tensor({{10, 20}, {30, 40}})
        assert.is_false(q:is_pinned())
        assert.are.equal("cpu(0)", tostring(q:device()))
        assert.are.same({{11, 22}, {33, 44}}, values(q))
        -- in place on the pinned tensor itself
        p:mul_(2)
        assert.are.same({{2, 4}, {6, 8}}, values(p))
        assert.are.equal(p, p:to("cpu_pinned:0")) -- already there: itself
        assert.are.equal(ordo.cpu_pinned(0), ordo.tensor({1}):to("cpu_pinned"):device())
    end)

    it("a cast alone of a pinned tensor gives a cpu(n) tensor, as other ops; naming the pinned device keeps it pinned", function()
        need_gpu()
        for _, id in ipairs({0, 1}) do
            local p = ordo.tensor({1.5, 2, 3}, {device = ordo.cpu_pinned(id)})
            local cpu = ordo.cpu(id)
            for _, r in ipairs({p:to("float64"), p:double(), p:int(), p:type_as(ordo.zeros({1}, {dtype = "int64"})),
                                p:to("float64"):to("float32")}) do
                assert.is_false(r:is_pinned())
                assert.are.equal(cpu, r:device())
            end
            assert.are.same({1.5, 2, 3}, values(p:double()))
            assert.are.same({1, 2, 3}, values(p:int()))
            -- the same dtype: p itself, pinned
            assert.are.equal(p, p:to("float32"))
            assert.are.equal(p, p:float())
            -- asked for by device: pinned
            local q = p:to(ordo.cpu_pinned(id), "float64")
            assert.is_true(q:is_pinned())
            assert.are.equal("float64", q:dtype())
            assert.is_true(p:to("float64", ordo.cpu_pinned(id)):is_pinned())
            assert.is_true(p:to(q):is_pinned()) -- a pinned tensor's device and dtype
            assert.is_true(ordo.tensor({1, 2}):to(ordo.cpu_pinned(id), "int64"):is_pinned())
            assert.are.same({1.5, 2, 3}, values(q))
        end
    end)

    it("DataLoader over pinned data on cpu_pinned(1): batches on cpu(1), pinned when asked", function()
        need_gpu()
        local x = ordo.arange(1, 13):reshape({6, 2}):to(ordo.cpu_pinned(1))
        local y = ordo.arange(1, 7):long():to(ordo.cpu_pinned(1))
        for _, pin in ipairs({false, true}) do
            ordo.manual_seed(2)
            local seen = 0
            for _, xb, yb in ordo.data.DataLoader(x, y, {batch_size = 4, shuffle = true, pin_memory = pin}):iter() do
                local want = pin and ordo.cpu_pinned(1) or ordo.cpu(1)
                assert.are.equal(want, xb:device())
                assert.are.equal(want, yb:device())
                for r, row in ipairs(values(xb)) do
                    local k = values(yb)[r]
                    assert.are.same({2 * k - 1, 2 * k}, row)
                    seen = seen + 1
                end
            end
            assert.are.equal(6, seen)
        end
    end)

    it("pin_memory copies a CPU tensor once, returns a pinned one as is, and refuses a GPU tensor", function()
        need_gpu()
        local c = ordo.arange(1, 7):reshape({2, 3})
        local p = c:pin_memory()
        assert.is_true(p:is_pinned())
        assert.is_false(c:is_pinned())
        assert.are.same(values(c), values(p))
        c:fill_(0) -- a copy: the pinned one keeps its values
        assert.are.same({{1, 2, 3}, {4, 5, 6}}, values(p))
        assert.are.equal(p, p:pin_memory())
        local g = p:to(ordo.gpu(0))
        local ok, err = pcall(function() return g:pin_memory() end)
        assert.is_false(ok)
        assert.matches("pin_memory: the tensor is on gpu%(0%); only host tensors can be pinned", err)
    end)

    it("round-trips through a GPU in every dtype", function()
        need_gpu()
        for _, dt in ipairs({"float32", "float64", "int32", "int64", "uint8"}) do
            local p = ordo.arange(0, 100, 1, {dtype = dt}):reshape({10, 10}):pin_memory()
            local g = p:to(ordo.gpu(0))
            local back = (g + 1):to(ordo.cpu_pinned(0))
            assert.is_true(back:is_pinned(), dt)
            assert.are.equal(dt, back:dtype())
            assert.are.same(values(p + 1), values(back), dt)
        end
    end)

    it("a pinned block is reused only after the copies queued on it are done", function()
        need_gpu()
        -- Many large copies in flight on the simulated device's delayed
        -- streams; each source is dropped at once and a new pinned tensor of
        -- the same size (the cached block) is overwritten.  A block freed
        -- before its copy ran would show the overwrite in the GPU copy.
        local n = 65536
        local gs = {}
        for i = 1, 8 do
            local p = ordo.full({n}, i, {device = ordo.cpu_pinned()})
            gs[i] = p:to(ordo.gpu(0))
            p = nil -- luacheck: ignore
            collectgarbage()
            ordo.full({n}, -1, {device = ordo.cpu_pinned()}):fill_(-2)
        end
        for i = 1, 8 do
            assert.are.equal(i * n, gs[i]:sum():item())
        end
    end)

    it("count their bytes, cache freed blocks and give the cache back", function()
        need_gpu()
        ordo.engine.wait_for_all()
        collectgarbage()
        collectgarbage()
        ordo.engine.wait_for_all()
        local before = ordo.cuda.pinned_memory()
        local p = ordo.zeros({1000, 100}, {device = ordo.cpu_pinned()})
        local during = ordo.cuda.pinned_memory()
        assert.is_true(during.live_bytes >= before.live_bytes + 400000)
        p = nil -- luacheck: ignore
        collectgarbage()
        collectgarbage()
        ordo.engine.wait_for_all()
        local after = ordo.cuda.pinned_memory()
        assert.are.equal(before.live_bytes, after.live_bytes)
        assert.is_true(after.cached_bytes >= 400000)
        ordo.cuda.empty_pinned_cache()
        assert.are.equal(0, ordo.cuda.pinned_memory().cached_bytes)
    end)

    it("DataLoader{pin_memory = true} gives pinned batches with the right rows", function()
        need_gpu()
        local x = ordo.arange(1, 21):reshape({10, 2})
        local y = ordo.arange(1, 11)
        local loader = ordo.data.DataLoader(x, y, {batch_size = 4, pin_memory = true})
        assert.matches("pin_memory", tostring(loader))
        local rows = 0
        for i, xb, yb in loader:iter() do
            assert.is_true(xb:is_pinned())
            assert.is_true(yb:is_pinned())
            local xg = xb:to(ordo.gpu(0))
            local first = (i - 1) * 4 + 1
            assert.are.same({2 * first - 1, 2 * first}, values(xg)[1])
            assert.are.equal(first, yb:totable()[1])
            rows = rows + xb:size(1)
        end
        assert.are.equal(10, rows)
    end)

    it("a loader over a dataset with pin_memory pins its batches, collated ones and records too", function()
        need_gpu()
        local data = ordo.data
        local ds = data.TensorDataset(ordo.arange(1, 21):reshape({10, 2}), ordo.arange(1, 11))
        local records = setmetatable({}, {
            __len = function() return 3 end,
            __index = function(_, i) if type(i) == "number" then return {x = ordo.full({2}, i), n = i} end end,
        })
        for _, loader in ipairs({data.loader(data.Subset(ds, {3, 1, 2}), {batch_size = 2, pin_memory = true}),
                                 data.loader(data.ConcatDataset({ds}), {batch_size = 4, pin_memory = true})}) do
            for _, xb, yb in loader do
                assert.is_true(xb:is_pinned())
                assert.is_true(yb:is_pinned())
            end
        end
        local firsts = {}
        for i, b in data.loader(records, {batch_size = 2, pin_memory = true}) do
            assert.is_true(b.x:is_pinned())
            assert.is_true(b.n:is_pinned())
            firsts[i] = b.n:totable()[1]
        end
        assert.are.same({1, 3}, firsts)
    end)
end)
