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

    it("dump and trace.load refuse a path holding a NUL byte instead of using what precedes it", function()
        local trace = require "ordo.trace"
        local base = os.tmpname()
        os.remove(base)
        assert.matches("profiler.dump: the file path holds a NUL byte (at byte " .. (#base + 1) .. ")",
                       err(profiler.dump, base .. "\0.json"), 1, true)
        assert.is_nil(io.open(base, "rb"), "the trace went to " .. base)
        assert.matches("trace.load: the file path holds a NUL byte (at byte " .. (#base + 1) .. ")",
                       err(trace.load, base .. "\0.json"), 1, true)
        assert.matches("profiler.dump: the file path holds a NUL byte",
                       err(trace.capture, base .. "\0.json"), 1, true)
        assert.is_nil(io.open(base, "rb"))
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

describe("ordo.profiler trace", function()
    local trace = require "ordo.trace"

    -- The "X" events of each (pid, tid) track must nest: viewers draw one
    -- row per track and misplace (Perfetto flags) events that overlap.
    local function check_nesting(doc)
        local tracks = {}
        for _, ev in ipairs(doc.traceEvents) do
            if ev.ph == "X" then
                local k = ev.pid .. ":" .. ev.tid
                tracks[k] = tracks[k] or {}
                table.insert(tracks[k], ev)
            end
        end
        for k, evs in pairs(tracks) do
            table.sort(evs, function(a, b)
                if a.ts ~= b.ts then return a.ts < b.ts end
                return a.dur > b.dur
            end)
            local open = {}
            for _, ev in ipairs(evs) do
                local s, t = ev.ts, ev.ts + ev.dur
                while #open > 0 and open[#open] <= s + 1e-9 do open[#open] = nil end
                assert.is_true(#open == 0 or t <= open[#open] + 1e-9,
                               ("track %s: %s [%g, %g] overlaps an open event ending at %g")
                                   :format(k, ev.name, s, t, open[#open] or 0))
                open[#open + 1] = t
            end
        end
    end

    it("ops that overlap on one row (async ops, several threads) go on lanes, so every track nests", function()
        local E = ordo.engine
        E.wait_for_all()
        profiler.clear()
        profiler.start()
        -- four commands at once, each started and ending after the one
        -- before (they overlap without nesting); their records share the
        -- "pushing threads" buffer
        for i = 1, 4 do E.shell("sleep 0." .. i, {name = "cmd" .. i}) end
        E.wait_for_all()
        profiler.stop()
        local path = os.tmpname()
        profiler.dump(path)
        local f = io.open(path, "rb")
        local doc = trace.decode(f:read("*a"))
        f:close()
        os.remove(path)
        profiler.clear()
        check_nesting(doc)
        local ops = trace.ops(doc)
        assert.equals(0, ops.dropped)
        local cmds = trace.select(ops, function(op) return op.name:match("^cmd%d$") ~= nil end)
        assert.equals(4, #cmds)
        local rows, nrows = {}, 0
        for _, op in ipairs(cmds) do
            assert.truthy(op.worker:find("pushing threads", 1, true), op.worker)
            if not rows[op.worker] then nrows = nrows + 1 end
            rows[op.worker] = true
        end
        -- as many lanes as ran at once (4, unless a command started late)
        local peak = trace.stats(cmds).peak
        assert.is_true(peak >= 2, "the commands did not overlap")
        assert.equals(peak, nrows)
        assert.truthy(rows["cpu(0) pushing threads, lane 2"])
    end)

    it("the summary says how many of its ops failed or were skipped", function()
        local E = ordo.engine
        E.wait_for_all()
        profiler.clear()
        local v = E.new_variable()
        profiler.start()
        E.shell("exit 2", {writes = {v}, name = "bad_step"})
        E.shell("true", {reads = {v}, name = "after_bad"})
        E.shell("true", {reads = {v}, name = "after_bad"})
        assert.is_false(pcall(E.wait_for_all))
        profiler.stop()
        local s = profiler.summary()
        profiler.clear()
        assert.truthy(s:find("\nafter_bad +2 ", 1) , s)
        assert.truthy(s:find("(failed: 1, skipped for a failed input: 2; counted in the rows above, " ..
                             "args.status in the trace names them)", 1, true), s)
        -- none: no such line
        profiler.start()
        E.shell("true", {name = "fine"})
        E.wait_for_all()
        profiler.stop()
        s = profiler.summary()
        profiler.clear()
        assert.is_nil(s:find("skipped", 1, true), s)
    end)

    it("an op already running when the profiler starts is not recorded (its time is not known)", function()
        local E = ordo.engine
        E.wait_for_all()
        profiler.clear()
        E.shell("sleep 0.2", {name = "straddling"}) -- runs from its push on
        profiler.start()
        local x = ordo.zeros({4}):add_(1)
        E.wait_for_all()
        profiler.stop()
        local s = profiler.summary()
        profiler.clear()
        -- before: "straddling 1 0.000 0.000 ...", a 0 us run
        assert.is_nil(s:find("straddling", 1, true), s)
        assert.truthy(s:find("add_scalar", 1, true), s)
        assert.equals(1, x[1])
    end)

    it("a full record buffer is marked in the trace and counted by trace.ops", function()
        local script = os.tmpname()
        local f = io.open(script, "w")
        f:write([[
            local ordo = require "ordo"
            local trace = require "ordo.trace"
            ordo.engine.set_bulk_size(0)
            local x = ordo.zeros({4})
            ordo.engine.wait_for_all()
            ordo.profiler.start()
            for _ = 1, 30 do x:add_(1) end
            ordo.engine.wait_for_all()
            ordo.profiler.stop()
            local ops = trace.capture()
            io.write(#trace.select(ops, "add_scalar"), " ", ops.dropped, "\n")
            print(ordo.profiler.summary())
        ]])
        f:close()
        local p = io.popen("ORDO_PROFILER_MAX_EVENTS=10 ORDO_ENGINE_TYPE=naive LUA_PATH='lua/?.lua;lua/?/init.lua;;' " ..
                           "timeout 60 luajit " .. script .. " 2>&1; echo rc=$?")
        local out = p:read("*a")
        p:close()
        os.remove(script)
        assert.truthy(out:find("rc=0", 1, true), out)
        local kept, dropped = out:match("^(%d+) (%d+)\n")
        assert.equals("10 20", tostring(kept) .. " " .. tostring(dropped), out)
        assert.truthy(out:find("(20 events dropped: profiler buffer full)", 1, true), out)
    end)
end)
