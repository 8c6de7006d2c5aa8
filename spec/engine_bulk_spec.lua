-- Bulking (ordo.engine.set_bulk_size, src/bulk.c): small ops from this Lua
-- thread go to the engine in bulks.  Nothing a program computes, reads or
-- raises may change with the bulk size.
local ordo = require "ordo"

local H = require "support.helpers"

local function with_bulk(n, fn)
    local old = ordo.engine.set_bulk_size(n)
    local ok, err = pcall(fn)
    ordo.engine.set_bulk_size(old)
    if not ok then error(err, 0) end
end

describe("bulking", function()
    it("is on by default for the Lua thread (16 ops), and can be changed", function()
        local default = tonumber(os.getenv("ORDO_BULK_SIZE") or "16")
        assert.equals(default, ordo.engine.bulk_size())
        with_bulk(3, function() assert.equals(3, ordo.engine.bulk_size()) end)
        assert.equals(default, ordo.engine.bulk_size())
    end)

    it("a random program gives the same values with bulks of any size as without", function()
        local ref
        with_bulk(0, function() ref = H.random_program(ordo, 5, 1500, {}) end)
        for _, n in ipairs({1, 2, 7, 64}) do
            with_bulk(n, function() assert.same(ref, H.random_program(ordo, 5, 1500, {})) end)
        end
    end)

    it("the same on a pooled engine", function()
        local pooled = ordo.engine.new({kind = "pooled", cpu_workers = 2})
        local ref
        with_bulk(0, function() ref = H.random_program(ordo, 6, 800, {engine = pooled}) end)
        with_bulk(64, function() assert.same(ref, H.random_program(ordo, 6, 800, {engine = pooled})) end)
        pooled:close()
    end)

    it("a failing op inside a bulk fails alone: its dependents raise, the others keep their values", function()
        with_bulk(64, function()
            local good = ordo.arange(5)
            local x = ordo.tensor({1, 2, 3}, {dtype = "int32"})
            local r = x:div(ordo.tensor({1, 0, 1}, {dtype = "int32"}), "trunc") -- fails when it runs
            good:add_(1)                  -- same bulk, independent
            local s = (r + 1):mul(2)      -- same bulk, depends on r: skipped
            local t = good * 2            -- independent again
            local ok, err = pcall(function() return s:totable() end)
            assert.is_false(ok)
            assert.truthy(tostring(err):find("div") and tostring(err):find("zero"), err)
            assert.same({1, 2, 3, 4, 5}, good:totable())
            assert.same({2, 4, 6, 8, 10}, t:totable())
            -- reported once; r is usable again once overwritten
            assert.same({0, 0, 0}, r:fill_(0):totable())
            ordo.engine.wait_for_all()
        end)
    end)

    it("ops are handed over before a wait, a read or a delete on this thread", function()
        with_bulk(64, function()
            local c = ordo.zeros({8})
            for _ = 1, 10 do c:add_(1) end
            ordo.engine.wait_for_var(c)
            assert.same({10, 10, 10, 10, 10, 10, 10, 10}, c:totable())
            for _ = 1, 5 do c:add_(1) end
            assert.equals(15, c:narrow(1, 1, 1):item())
            -- a pending count includes the collected ops (handed over first)
            for _ = 1, 5 do c:add_(1) end
            assert.is_true(ordo.engine.pending() >= 0)
            ordo.engine.flush()
            ordo.engine.wait_for_all()
            assert.equals(20, c:narrow(1, 8, 1):item())
        end)
    end)

    it("bad sizes are refused with the range", function()
        for _, bad in ipairs({-1, 65, 2.5, "8", {}}) do
            local ok, err = pcall(ordo.engine.set_bulk_size, bad)
            assert.is_false(ok)
            assert.truthy(tostring(err):find("set_bulk_size: expected an integer from 0 %(off%) to 64"), err)
        end
    end)

    it("ORDO_BULK_SIZE sets the default, and a bad value is refused at load", function()
        local function run(env)
            local p = io.popen(env .. " LUA_PATH='lua/?.lua;lua/?/init.lua;;' luajit -e " ..
                               "'print(require(\"ordo\").engine.bulk_size())' 2>&1")
            local out = p:read("*a")
            p:close()
            return out
        end
        assert.equals("0\n", run("ORDO_BULK_SIZE=0"))
        assert.equals("40\n", run("ORDO_BULK_SIZE=40"))
        assert.truthy(run("ORDO_BULK_SIZE=lots"):find("ORDO_BULK_SIZE=lots: expected an integer from 0 %(off%) to 64"))
    end)
end)
