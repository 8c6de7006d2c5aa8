-- ordo.profiler from Lua: the errors of its calls (engine_lua_spec.lua
-- checks what it records).
local ordo = require "ordo"
local profiler = ordo.profiler

local function err(fn, ...)
    local ok, e = pcall(fn, ...)
    assert.is_false(ok)
    return tostring(e)
end

local function tmpdir()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir '" .. dir .. "'") == 0)
    return dir
end

local function quote(s) return (s:gsub("%p", "%%%0")) end

describe("ordo.profiler errors", function()
    it("dump: an empty path is called empty, not 'got string'", function()
        local e = err(profiler.dump, "")
        assert.matches("profiler.dump: the file path is empty", e, 1, true)
        assert.is_nil(e:find("got string", 1, true))
        assert.matches("profiler.dump: expected a file path, got nil", err(profiler.dump), 1, true)
        assert.matches("profiler.dump: expected a file path, got number", err(profiler.dump, 3), 1, true)
    end)

    it("dump: a path it cannot write says why, once, naming profiler.dump and not the C function", function()
        local dir = tmpdir()
        local e = err(profiler.dump, dir)
        assert.matches("profiler.dump: cannot write " .. quote(dir) .. ": it is a directory$", e)
        local missing = dir .. "/no/such/dir/trace.json"
        e = err(profiler.dump, missing)
        assert.matches("profiler.dump: cannot write " .. quote(missing) .. ": No such file or directory$", e)
        assert.is_nil(e:find("ordo_profiler_dump", 1, true))
        -- the probe that found the reason left nothing behind
        local f = io.popen("ls -A '" .. dir .. "'")
        assert.are.equal("", f:read("*a"))
        f:close()
        os.remove(dir)
        -- a path that works still does, after those failures
        local path = os.tmpname()
        profiler.dump(path)
        local t = io.open(path, "rb")
        assert.is_truthy(t:read("*a"):find("traceEvents", 1, true))
        t:close()
        os.remove(path)
    end)

    it("names the caller's line and the function for a bad engine", function()
        assert.matches("profiler_lua_spec.lua:%d+: profiler.dump: the file path is empty",
                       err(function() profiler.dump("") end))
        assert.matches("profiler.summary: expected an ordo engine, got string", err(profiler.summary, "x"), 1, true)
        assert.matches("profiler.clear: expected an ordo engine, got table", err(profiler.clear, {}), 1, true)
        assert.matches("profiler.start: expected an ordo engine, got number", err(profiler.start, 1), 1, true)
        assert.matches("profiler.dump: expected an ordo engine, got number", err(profiler.dump, "x.json", 3), 1, true)
        local e = ordo.engine.new{kind = "naive"}
        e:close()
        assert.matches("profiler.stop: the engine was closed", err(profiler.stop, e), 1, true)
    end)
end)

describe("ordo.profiler memory", function()
    local function rss_mb()
        local f = io.open("/proc/self/statm")
        if not f then return nil end
        local resident = tonumber(f:read("*l"):match("^%d+%s+(%d+)"))
        f:close()
        return resident * 4096 / 2 ^ 20
    end

    it("clear gives a long session's records back to the system", function()
        if not rss_mb() then return end
        local preload = os.getenv("LD_PRELOAD") or ""
        if preload:find("asan") or preload:find("tsan") then
            pending("a sanitizer's allocator keeps freed memory for a while: the RSS cannot show it")
        end
        local x = ordo.zeros({4})
        ordo.engine.wait_for_all()
        profiler.clear()
        profiler.start()
        for _ = 1, 400000 do x:add_(1) end -- about 80 bytes a record
        ordo.engine.wait_for_all()
        profiler.stop()
        assert.equal(400000, x[1])
        local held = rss_mb()
        profiler.clear()
        local freed = held - rss_mb()
        assert.is_true(freed > 16, ("clear gave back %.1f MB"):format(freed))
        -- and it records again afterwards
        profiler.start()
        x:add_(1):wait()
        profiler.stop()
        assert.truthy(profiler.summary():find("add", 1, true))
        profiler.clear()
    end)
end)
