-- ordo.engine.shell (shell commands as async ops, src/shell_op.c) and
-- ordo.trace (reading the profiler's Chrome trace).  The native side of
-- shell ops is tested in spec/native/test_shell.c; the examples that use
-- both are run by spec/examples_spec.lua.
local ordo = require "ordo"
local trace = require "ordo.trace"
local E = ordo.engine

local function tmpdir()
    local f = assert(io.popen("mktemp -d \"${TMPDIR:-/tmp}/ordo_shell_spec.XXXXXX\""))
    local d = f:read("*a"):gsub("%s+$", "")
    f:close()
    return d
end

local function slurp(path)
    local f = io.open(path, "r")
    if not f then return nil end
    local s = f:read("*a")
    f:close()
    return s
end

describe("ordo.engine.shell", function()
    local dir
    before_each(function() dir = tmpdir() end)
    after_each(function() os.execute("rm -rf '" .. dir .. "'") end)

    it("runs commands in var order (rule 1) and bumps the written var's version", function()
        local v = E.new_variable()
        for i = 1, 5 do
            E.shell(("sleep 0.01; echo %d >> %s/log"):format(i, dir), {writes = {v}, name = "append"})
        end
        E.wait_for_var(v)
        assert.equals(5, v:version())
        assert.equals("1\n2\n3\n4\n5\n", slurp(dir .. "/log"))
    end)

    it("a failing command raises once at the wait and skips its dependents (rule 5)", function()
        local a, b, c = E.new_variable(), E.new_variable(), E.new_variable()
        E.shell("exit 7", {writes = {a}, name = "seven"})
        E.shell("touch " .. dir .. "/dependent", {reads = {a}, writes = {b}, name = "dep"})
        E.shell("touch " .. dir .. "/independent", {writes = {c}, name = "indep"})
        local ok, err = pcall(E.wait_for_var, b)
        assert.is_false(ok)
        assert.truthy(tostring(err):find("seven: command failed with exit status 7: exit 7", 1, true), err)
        assert.has_no.errors(function() E.wait_for_all() end) -- reported once
        assert.is_nil(slurp(dir .. "/dependent"))
        assert.equals("", slurp(dir .. "/independent"))
    end)

    it("a step pushed before a failure is reported stays skipped after the report (rule 5)", function()
        -- link needs a (fails at once) and b (slow): the wait that reports
        -- a's failure returns before link can run.  link used to run then,
        -- on the failed input, on the threaded engines (not on naive).
        local a, b, out = E.new_variable(), E.new_variable(), E.new_variable()
        E.shell("exit 1", {writes = {a}, name = "compile_a"})
        E.shell("sleep 0.3", {writes = {b}, name = "compile_b"})
        E.shell("touch " .. dir .. "/linked", {reads = {a, b}, writes = {out}, name = "link"})
        local ok, err = pcall(E.wait_for_var, a)
        assert.is_false(ok)
        assert.truthy(tostring(err):find("compile_a: command failed with exit status 1", 1, true), err)
        assert.has_no.errors(function() E.wait_for_var(out) end) -- reported once
        assert.has_no.errors(function() E.wait_for_all() end)
        assert.is_nil(slurp(dir .. "/linked"))
        -- pushed after the report: a was never made (its only step failed), so a step that reads it is
        -- still skipped; once a step has made a, the vars are usable again
        E.shell("touch " .. dir .. "/relinked", {reads = {a, b}, writes = {out}, name = "link"})
        assert.has_no.errors(function() E.wait_for_var(out) end) -- (the same failure, reported before)
        assert.is_nil(slurp(dir .. "/relinked"))
        E.shell("true", {writes = {a}, name = "compile_a"})
        E.shell("touch " .. dir .. "/relinked", {reads = {a, b}, writes = {out}, name = "link"})
        E.wait_for_var(out)
        assert.equals("", slurp(dir .. "/relinked"))
    end)

    it("independent commands overlap; shell_running counts them", function()
        local a, b = E.new_variable(), E.new_variable()
        ordo.profiler.clear()
        ordo.profiler.start()
        E.shell("sleep 0.4", {writes = {a}, name = "sleep_a"})
        E.shell("sleep 0.4", {writes = {b}, name = "sleep_b"})
        if E.kind() ~= "naive" then assert.equals(2, E.shell_running()) end
        E.wait_for_all()
        ordo.profiler.stop()
        assert.equals(0, E.shell_running())
        local ops = trace.capture()
        local sa, sb = trace.select(ops, "sleep_a"), trace.select(ops, "sleep_b")
        assert.equals(1, #sa)
        assert.equals(1, #sb)
        assert.is_true(sa[1].dur > 0.35e6, "the op lasts as long as its command")
        if E.kind() ~= "naive" then -- (naive: each command runs inside its push)
            assert.is_true(trace.overlap(sa, sb) > 0.3e6, "the two commands overlapped")
            local s = trace.stats(trace.select(ops, {sleep_a = true, sleep_b = true}))
            assert.equals(2, s.peak)
            assert.is_true(s.wall < 0.75e6, "two 0.4 s commands took " .. s.wall / 1e6 .. " s")
        end
    end)

    it("orders commands against tensor ops through a tensor's var", function()
        local t = ordo.zeros({4})
        t:fill_(3)
        E.shell("touch " .. dir .. "/after_fill", {reads = {t}, name = "reader"})
        t:fill_(5) -- waits for the command (a later write of t, rule 1)
        E.wait_for_all()
        assert.equals("", slurp(dir .. "/after_fill"))
        assert.same({5, 5, 5, 5}, t:totable())
    end)

    it("works on other engines: naive runs the command inside the push", function()
        for _, kind in ipairs({"naive", "pooled"}) do
            local e = E.new{kind = kind, cpu_workers = 1}
            local v = e:new_variable()
            e:shell("echo " .. kind .. " > " .. dir .. "/" .. kind, {writes = {v}})
            if kind == "naive" then assert.equals(1, v:version()) end
            e:wait_for_var(v)
            assert.equals(kind .. "\n", slurp(dir .. "/" .. kind))
            -- module-level shell follows its vars' engine
            E.shell("exit 3", {writes = {v}, name = "on_" .. kind})
            local ok, err = pcall(e.wait_for_var, e, v)
            assert.is_false(ok)
            assert.truthy(tostring(err):find("on_" .. kind .. ": command failed with exit status 3", 1, true))
            e:close()
        end
    end)

    it("rejects bad arguments at the call", function()
        local v = E.new_variable()
        assert.has_error(function() E.shell(42) end, "shell: expected a command string, got number")
        assert.has_error(function() E.shell("true", "x") end, "shell: expected a table of options, got string")
        assert.has_error(function() E.shell("true", {read = {v}}) end,
                         "shell: unknown option 'read' (expected reads, writes or name)")
        assert.has_error(function() E.shell("true", {reads = {v, "x"}}) end,
                         "shell: reads[2] is not an engine variable or a tensor (string)")
        assert.has_error(function() E.shell("true", {writes = v}) end)
        assert.has_error(function() E.shell("true", {name = 3}) end, "shell: name must be a string, got number")
        local e = E.new{kind = "naive"}
        assert.has_error(function() e:shell("true", {writes = {v}}) end, "shell: writes[1] belongs to another engine")
        e:close()
    end)

    -- C reads the command and the name up to their first NUL: "echo one\0rm x"
    -- ran "echo one" and reported success
    it("refuses a command or a name holding a NUL byte instead of running what precedes it", function()
        local v = E.new_variable()
        local marker = dir .. "/ran"
        local ok, err = pcall(E.shell, "touch " .. marker .. "\0; exit 3", {writes = {v}})
        assert.is_false(ok)
        assert.truthy(tostring(err):find("shell: the command holds a NUL byte (at byte " .. (#marker + 7) .. ")", 1, true), err)
        ok, err = pcall(E.shell, "true", {writes = {v}, name = "a\0b"})
        assert.is_false(ok)
        assert.truthy(tostring(err):find("shell: the name holds a NUL byte (at byte 2)", 1, true), err)
        E.wait_for_var(v)
        assert.equals(0, v:version())
        assert.is_nil(slurp(marker))
    end)

    -- the engine keeps 31 bytes of a name and put them before a message that
    -- already began with the whole name: "xxx..x: xxx...xxx: command failed"
    it("a failure of a command with a long name names it once", function()
        local v = E.new_variable()
        local name = "build/" .. string.rep("long_target_", 6) .. ".o"
        E.shell("exit 6", {writes = {v}, name = name})
        local ok, err = pcall(E.wait_for_var, v)
        assert.is_false(ok)
        err = tostring(err)
        assert.truthy(err:find(name .. ": command failed with exit status 6: exit 6", 1, true), err)
        assert.equals(1, select(2, err:gsub("build/long", "")), err)
    end)
end)

describe("ordo.trace", function()
    it("decodes JSON", function()
        local v = trace.decode([==[ {"a": [1, -2.5e3, 0.125, "x\"\\\/\n\u00e9\ud83d\ude00", true, false, null, {}, []],
                                   "b": {"c": {}}} ]==])
        assert.same({1, -2500, 0.125, "x\"\\/\n\195\169\240\159\152\128", true, false}, {unpack(v.a, 1, 6)})
        assert.is_nil(v.a[7])
        assert.same({}, v.a[8])
        assert.same({c = {}}, v.b)
        for _, bad in ipairs({"{", "[1,]", "{\"a\" 1}", "\"abc", "[1] x", "{\"a\":tru}", "\"\\q\""}) do
            assert.has_error(function() trace.decode(bad) end)
        end
        -- \u takes four hex digits, nothing tonumber would also take; a
        -- bad one is named, not a raw Lua error
        for _, bad in ipairs({[["\u-001"]], [["\u 12a"]], [["\u+041"]], [["\u0x41"]], [["\u12"]]}) do
            local ok, e = pcall(trace.decode, bad)
            assert.is_false(ok, bad)
            assert.truthy(tostring(e):find("trace.decode: bad \\u escape at byte 2", 1, true), e)
        end
        -- a lone surrogate is U+FFFD (its bytes would not be UTF-8)
        assert.equals("a\239\191\189b", trace.decode([["a\ud800b"]]))
        assert.equals("\239\191\189", trace.decode([["\udc00"]]))
        local ok, err = pcall(trace.decode, "[1, ?]")
        assert.is_false(ok)
        assert.truthy(tostring(err):find("trace.decode: unexpected character at byte 5", 1, true), err)
    end)

    local function op(name, a, b, worker) return {name = name, start = a, stop = b, dur = b - a, worker = worker or "w"} end

    it("measures overlap, busy time, parallelism and peak concurrency", function()
        local ops = {op("a", 0, 10, "w1"), op("a", 20, 30, "w1"), op("b", 5, 25, "w2"), op("c", 30, 40, "w1")}
        assert.equals(10, trace.overlap(trace.select(ops, "a"), trace.select(ops, "b")))
        assert.equals(0, trace.overlap(trace.select(ops, "a"), trace.select(ops, "c"))) -- touching is not overlapping
        assert.equals(5, trace.overlap(ops[1], ops[3]))
        local s = trace.stats(ops)
        assert.equals(4, s.count)
        assert.equals(40, s.wall)
        assert.equals(50, s.busy)
        assert.equals(2, s.peak)
        assert.equals(2, s.rows)
        assert.near(1.25, s.parallelism, 1e-12)
        assert.same({ops[1], ops[2], ops[4]}, trace.select(ops, {a = true, c = true}))
        assert.same({ops[3]}, trace.select(ops, function(o) return o.dur == 20 end))
        assert.equals(0, trace.stats({}).count)
    end)

    it("bad arguments raise naming the function, not a raw Lua error", function()
        local function raises(want, fn, ...)
            local ok, err = pcall(fn, ...)
            assert.is_false(ok)
            assert.truthy(tostring(err):find(want, 1, true), err)
            assert.is_nil(tostring(err):find("attempt to", 1, true), err)
        end
        raises("trace.overlap: a must be a list of ops or an op, got nil", trace.overlap, nil, {})
        raises("trace.overlap: b[1] is not an op (a table with number start and stop), got number",
               trace.overlap, {}, {3})
        raises("trace.stats: ops must be a list of ops, got string", trace.stats, "x")
        raises("trace.stats: ops must be a list of ops, got nil", trace.stats)
        raises("trace.select: ops must be a list of ops, got nil", trace.select, nil, "x")
        -- an "X" event without its duration (a hand-made or cut trace)
        raises("trace.ops: event 2 (a) has no number 'dur'", trace.ops,
               {traceEvents = {{ph = "M", name = "process_name", pid = 1, args = {name = "p"}},
                               {ph = "X", name = "a", ts = 1, pid = 1, tid = 1}}})
        -- events without pid or tid (the format allows it), or not objects at all
        local ops = trace.ops({traceEvents = {{ph = "X", name = "a", ts = 1, dur = 2}}})
        assert.equals(1, #ops)
        assert.equals("pid nil tid nil", ops[1].worker)
        ops = trace.ops({traceEvents = {{ph = "M", name = "process_name", args = {name = "p"}},
                                        {ph = "X", name = "b", ts = 1, dur = 2, tid = 3}}})
        assert.equals("p tid 3", ops[1].worker)
        raises("trace.ops: event 2 is not an object, got number", trace.ops, {traceEvents = {{ph = "M"}, 7}})
        -- hand-made ops without a worker row count as one row
        assert.equals(1, trace.stats({{start = 1, stop = 2, dur = 1}, {start = 2, stop = 3, dur = 1}}).rows)
        -- a path that is not a readable file: the reason, not the JSON reader's complaint about nil
        raises("trace.load: cannot read /tmp: it is a directory", trace.load, "/tmp")
        raises("trace.load: cannot read /nonexistent/t.json: No such file or directory", trace.load, "/nonexistent/t.json")
        -- deep nesting: Lua's "stack overflow" named nothing
        raises("trace.decode: nesting deeper than 1000", trace.decode, string.rep("[", 100000) .. string.rep("]", 100000))
        assert.equals(1, #trace.decode(string.rep("[", 1000) .. string.rep("]", 1000)))
    end)

    it("reads a profiler dump: names, intervals and worker rows", function()
        local x = ordo.rand({256, 256})
        E.wait_for_all()
        ordo.profiler.clear()
        ordo.profiler.start()
        local y = x:matmul(x):tanh()
        E.wait_for_all()
        ordo.profiler.stop()
        local path = os.tmpname()
        local ops = trace.capture(path)
        local again = trace.load(path)
        os.remove(path)
        assert.equals(#ops, #again)
        local mm, th = trace.select(ops, "matmul"), trace.select(ops, "tanh")
        assert.equals(1, #mm)
        assert.equals(1, #th)
        assert.is_true(th[1].start >= mm[1].stop, "tanh starts after the matmul it reads")
        assert.equals("ok", mm[1].status)
        assert.truthy(mm[1].worker:find("cpu(0)", 1, true), mm[1].worker)
        assert.is_true(mm[1].dur > 0)
        assert.same({256, 256}, y:shape())
    end)
end)
