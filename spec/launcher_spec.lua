-- The ordo launcher (build/ordo, src/launcher/) driven as a user drives it:
-- scripts, -e/-l/-i/-v/-h, exit statuses, the REPL on a pipe, Ctrl-C
-- (SIGINT) during a wait, make install.  The REPL on a real terminal is in
-- launcher_tmux_spec.lua; the REPL's Lua half is also tested directly here.
local root = os.getenv("PWD") or "."
-- ORDO_BUILD=dir runs these against another build (make BUILD=dir); the
-- default is the checkout's build/.
local BUILD = os.getenv("ORDO_BUILD") or "build"
if BUILD:sub(1, 1) ~= "/" then BUILD = root .. "/" .. BUILD end
local ORDO = BUILD .. "/ordo"

local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local slurp = require("support.helpers").slurp

local function write(path, text)
    local f = assert(io.open(path, "wb"))
    f:write(text)
    f:close()
end

-- Runs a shell command line with `input` on stdin; returns stdout, stderr
-- and the exit status.
local function sh(cmd, input)
    local inp, out, err = os.tmpname(), os.tmpname(), os.tmpname()
    write(inp, input or "")
    local f = assert(io.popen(("(%s) < %s > %s 2> %s; echo $?"):format(cmd, inp, out, err)))
    local code = tonumber(f:read("*a"):match("(%d+)%s*$"))
    f:close()
    local o, e = slurp(out), slurp(err)
    os.remove(inp)
    os.remove(out)
    os.remove(err)
    return o, e, code
end

-- build/ordo with these arguments (already quoted as needed)
local function ordo(args, input) return sh(ORDO .. " " .. (args or ""), input) end

describe("ordo launcher", function()
    it("is built", function()
        assert.is_truthy(io.open(ORDO, "rb"), ORDO .. " is missing: run make")
    end)

    it("runs a script with arg and ... set as luajit does", function()
        local script = os.tmpname()
        write(script, [[
print(arg[0], arg[-1], arg[1], arg[2], select("#", ...), ...)
local ordo = require "ordo"
print(ordo.tensor({1, 2, 3}):sum():item())
]])
        local out, err, code = ordo(q(script) .. " a 'b c'")
        assert.are.equal(0, code, err)
        assert.are.equal(("%s\t%s\ta\tb c\t2\ta\tb c\n6\n"):format(script, ORDO), out)
        assert.are.equal("", err)
        -- options before the script get negative indices
        out, err, code = ordo("-e 'x = 1' " .. q(script) .. " z")
        assert.are.equal(0, code, err)
        assert.are.equal(("%s\tx = 1\tz\tnil\t1\tz\n6\n"):format(script), out)
        os.remove(script)
    end)

    it("runs -e code and finds the package and library from any directory", function()
        local out, err, code = sh("cd / && " .. ORDO .. " -e " ..
            q('local o = require "ordo"; print(o.ones({2, 2}):sum():item()); print(o.lib_path)'))
        assert.are.equal(0, code, err)
        local sum, lib = out:match("^(%S+)\n(%S+)\n$")
        assert.are.equal("4", sum, out)
        assert.are.equal(BUILD .. "/libordo.so", lib)
    end)

    it("honours ORDO_LIB set by the user", function()
        local out, err, code = sh("ORDO_LIB=/nonexistent/libordo.so " .. ORDO .. " -e 'require \"ordo\"'")
        assert.are_not.equal(0, code)
        assert.is_truthy(err:find("/nonexistent/libordo.so", 1, true), err)
        assert.is_truthy(err:find("^ordo: cannot load the native library"), err) -- one prefix, not "ordo: ordo:"
        assert.are.equal("", out)
    end)

    it("-l requires a module and sets a plain name as a global", function()
        local out, err, code = ordo("-l ordo -e 'print(ordo.zeros({3}):numel())'")
        assert.are.equal(0, code, err)
        assert.are.equal("3\n", out)
    end)

    it("a failing script exits nonzero with the message and a traceback on stderr", function()
        local script = os.tmpname()
        write(script, "local function f() error('boom') end\nprint('before')\nf()\nprint('after')\n")
        local out, err, code = ordo(q(script))
        assert.are.equal(1, code)
        assert.are.equal("before\n", out)
        assert.is_truthy(err:find("ordo: .-:1: boom"), err)
        assert.is_truthy(err:find("stack traceback:", 1, true), err)
        assert.is_truthy(err:find(":3: in main chunk", 1, true), err)
        os.remove(script)
    end)

    it("exits nonzero on a syntax error, a missing script and a failing -e", function()
        local script = os.tmpname()
        write(script, "x x\n")
        local _, err, code = ordo(q(script))
        assert.are.equal(1, code)
        assert.is_truthy(err:find("'=' expected near 'x'", 1, true), err)
        os.remove(script)
        _, err, code = ordo("/nonexistent/script.lua")
        assert.are.equal(1, code)
        assert.is_truthy(err:find("cannot open", 1, true), err)
        _, err, code = ordo("-e 'error(\"bad\")'")
        assert.are.equal(1, code)
        assert.is_truthy(err:find("(command line):1: bad", 1, true), err)
    end)

    it("a script that raises a value that is not a string says so, with a traceback, instead of nothing", function()
        for _, c in ipairs({{"error()", "nil"}, {"error({code = 2})", "table"}, {"error(true)", "boolean"}}) do
            local script = os.tmpname()
            write(script, "print('before')\n" .. c[1] .. "\n")
            local out, err, code = ordo(q(script))
            assert.are.equal(1, code, c[1])
            assert.are.equal("before\n", out)
            assert.is_truthy(err:find("ordo: (error object is a " .. c[2] .. " value)\nstack traceback:", 1, true), err)
            assert.is_truthy(err:find(":2: in main chunk", 1, true), err)
            os.remove(script)
        end
        local _, err = ordo("-e 'error(setmetatable({}, {__tostring = function() return \"mine\" end}))'")
        assert.is_truthy(err:find("ordo: mine\nstack traceback:", 1, true), err)
    end)

    it("a script that ends while its shell command still runs exits once the command is done (no hang)", function()
        -- lua_close unloads libordo (dlclose): the shell reaper's destructor
        -- used to stop before the default engine waited for the command
        local script = os.tmpname()
        write(script, "local o = require 'ordo'\no.engine.shell('sleep 0.3; echo ran', {name = 'late'})\n")
        local out, err, code = sh("timeout 20 " .. ORDO .. " " .. q(script))
        assert.are.equal(0, code, err)
        assert.are.equal("ran\n", out)
        -- plain luajit, the package found through package.path
        out, err, code = sh("timeout 20 luajit -e " ..
                            q("package.path = '" .. root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;' .. package.path") ..
                            " " .. q(script))
        assert.are.equal(0, code, err)
        assert.are.equal("ran\n", out)
        os.remove(script)
    end)

    it("a script or -e that ends well still reports a failure nobody waited for, and exits 1", function()
        local script = os.tmpname()
        write(script, "local o = require 'ordo'\n" ..
                      "x = o.tensor({7}, 'int32'):div(o.zeros({1}, 'int32'), 'trunc')\nprint('end')\n")
        local out, err, code = ordo(q(script))
        assert.are.equal("end\n", out)
        assert.is_truthy(err:find("^ordo: at exit: .*integer division by zero\n$"), err)
        assert.are.equal(1, code)
        _, err, code = ordo("-e " .. q("require('ordo').engine.shell('exit 3', {name = 'late'})"))
        assert.are.equal("ordo: at exit: late: command failed with exit status 3: exit 3\n", err)
        assert.are.equal(1, code)
        _, err, code = ordo("-e " .. q("require('ordo.engine').shell('exit 4', {name = 'alone'})")) -- without ordo itself
        assert.are.equal("ordo: at exit: alone: command failed with exit status 4: exit 4\n", err)
        assert.are.equal(1, code)
        -- reported already (the script waited): nothing more, exit 0
        write(script, "local o = require 'ordo'\no.engine.shell('exit 3')\nprint(pcall(o.engine.wait_for_all))\n")
        out, err, code = ordo(q(script))
        assert.are.equal(0, code, err)
        assert.are.equal("", err)
        assert.is_truthy(out:find("^false\t"), out)
        os.remove(script)
    end)

    it("runs LUA_INIT (code or @file) first, as luajit does; -E ignores it and LUA_PATH", function()
        local out, err, code = sh("LUA_INIT='init_x = 5' " .. ORDO .. " -e 'print(init_x)'")
        assert.are.equal(0, code, err)
        assert.are.equal("5\n", out)
        local file = os.tmpname()
        write(file, "init_y = 'from file'\n")
        out = sh("LUA_INIT=@" .. q(file) .. " " .. ORDO, "init_y\n") -- the REPL too
        assert.are.equal("from file\n", out)
        os.remove(file)
        out, err, code = sh("LUA_INIT='error(\"bad init\")' " .. ORDO .. " -e 'print(1)'")
        assert.are.equal(1, code)
        assert.are.equal("", out)
        assert.is_truthy(err:find("ordo: LUA_INIT:1: bad init", 1, true), err)
        out, err, code = sh("LUA_INIT='init_x = 5' LUA_PATH='/nowhere/?.lua' " .. ORDO ..
                            " -E -e 'print(init_x, package.path:find(\"nowhere\", 1, true))'")
        assert.are.equal(0, code, err)
        assert.are.equal("nil\tnil\n", out)
    end)

    it("a tensor error names the user's line", function()
        local _, err, code = ordo("-e 'local o = require \"ordo\"\nlocal x = o.ones({2}) + o.ones({3})'")
        assert.are.equal(1, code)
        assert.is_truthy(err:find("(command line):2: add: shapes 2 and 3 cannot be broadcast", 1, true), err)
    end)

    it("the traceback of an error the package raised at the user's line shows the user's frames only", function()
        local script = os.tmpname()
        write(script, "local o = require 'ordo'\nlocal function f() return o.ones({2}) + o.ones({3}) end\nf()\n")
        local _, err, code = ordo(q(script))
        assert.are.equal(1, code)
        local name = script:match("[^/]*$")
        assert.is_truthy(err:find("^ordo: [^\n]*" .. name .. ":2: add: shapes 2 and 3 cannot be broadcast[^\n]*\n" ..
                                  "stack traceback:\n\t[^\n]*" .. name .. ":2: in function 'f'\n" ..
                                  "\t[^\n]*" .. name .. ":3: in main chunk\n$"), err)
        -- an error raised inside the package (a chunk named as one of its files) keeps its frames
        _, err = ordo("-e " .. q("local dir = package.loaded['ordo.launcher'].lua_dir\n" ..
                                 "local inner = loadstring('local x = nil; return x.y', '@' .. dir .. '/ordo/fake.lua')\n" ..
                                 "inner()"))
        assert.is_truthy(err:find("ordo/fake.lua:1: attempt to index local 'x'", 1, true), err)
        assert.is_truthy(err:find("\n\t[^\n]*ordo/fake.lua:1: in function 'inner'\n"), err)
        os.remove(script)
    end)

    it("-v prints the version, -h the usage, a bad option fails", function()
        local out, _, code = ordo("-v")
        assert.are.equal(0, code)
        assert.is_truthy(out:match("^ordo %d+%.%d+%.%d+ %(LuaJIT [^)]+%)\n$"), out)
        local out2
        out2, _, code = ordo("--version")
        assert.are.equal(0, code)
        assert.are.equal(out, out2)
        out, _, code = ordo("-h")
        assert.are.equal(0, code)
        assert.is_truthy(out:find("usage: ordo", 1, true), out)
        local err
        out, err, code = ordo("-Z")
        assert.are.equal(1, code)
        assert.is_truthy(err:find("usage: ordo", 1, true), err)
        assert.are.equal("", out)
    end)

    it("a bad option is named, and so is an option missing its argument", function()
        for args, want in pairs({["--foo"] = "ordo: unrecognized option '--foo'\n",
                                 ["-Z"] = "ordo: unrecognized option '-Z'\n",
                                 ["-ix"] = "ordo: unrecognized option '-ix'\n",
                                 ["-e"] = "ordo: option '-e' needs an argument\n",
                                 ["-i -l"] = "ordo: option '-l' needs an argument\n",
                                 ["-j"] = "ordo: option '-j' needs an argument\n"}) do
            local out, err, code = ordo(args)
            assert.are.equal(1, code, args)
            assert.are.equal(want, err:sub(1, #want), args .. ": " .. err)
            assert.is_truthy(err:find("usage: ordo", 1, true), err)
            assert.are.equal("", out)
        end
    end)

    it("without a script, arg holds every argument below 0 and arg[0] is nil, as luajit sets it", function()
        local show = 'print(arg[0], arg[-1], arg[-2], arg[-3], arg[-4], #arg)'
        local out, err, code = ordo("-e " .. q(show))
        assert.are.equal(0, code, err)
        assert.are.equal(("nil\t%s\t-e\t%s\tnil\t0\n"):format(show, ORDO), out)
        -- the REPL
        out, err, code = ordo("", show .. "\n")
        assert.are.equal(0, code, err)
        assert.are.equal(("nil\t%s\tnil\tnil\tnil\t0\n"):format(ORDO), out)
        -- luajit itself, when it is there to compare with
        local f = io.popen("luajit -e " .. q(show) .. " 2>/dev/null")
        local lj = f and f:read("*a") or ""
        if f then f:close() end
        if lj ~= "" then assert.are.equal(("nil\t%s\t-e\tluajit\tnil\t0\n"):format(show), lj) end
    end)

    it("a bad ORDO_* setting fails with a message naming it, its value and the accepted range", function()
        for env, want in pairs({
            ["ORDO_ENGINE_TYPE=bogus"] = "ORDO_ENGINE_TYPE=bogus: expected naive, pooled or perdevice",
            ["ORDO_CPU_WORKER_NTHREADS=abc"] = "ORDO_CPU_WORKER_NTHREADS=abc: expected an integer from 1 to 1024",
            ["ORDO_CPU_WORKER_NTHREADS=5000"] = "ORDO_CPU_WORKER_NTHREADS=5000: expected an integer from 1 to 1024",
            ["ORDO_MAX_INFLIGHT=1"] = "ORDO_MAX_INFLIGHT=1: expected an integer from 16 to",
            ["ORDO_PROFILER_AUTOSTART=yes"] = "ORDO_PROFILER_AUTOSTART=yes: expected 0 or 1",
            ["ORDO_SIMULATED_GPUS=100"] = "ORDO_SIMULATED_GPUS=100: expected an integer from 0 to 16",
            ["ORDO_GC_THRESHOLD_MB=abc"] = "ORDO_GC_THRESHOLD_MB=abc: expected an integer from 1 to",
        }) do
            local out, err, code = sh(env .. " " .. ORDO .. " -e 'print(require(\"ordo\").ones({2}):sum():item())'")
            assert.are.equal(1, code, env)
            assert.are.equal("", out, env)
            assert.is_truthy(err:find("cannot start the default engine: ordo_engine_create: " .. want, 1, true),
                             env .. ": " .. err)
        end
    end)

    it("- runs stdin as a script; -i runs the REPL after -e", function()
        local out, err, code = ordo("- x y", "print(...)\n")
        assert.are.equal(0, code, err)
        assert.are.equal("x\ty\n", out)
        out, err, code = ordo("-e 'n = 41' -i", "n + 1\n")
        assert.are.equal(0, code, err)
        assert.are.equal("42\n", out)
    end)
end)

describe("waits under the launcher (interruptible: marker op + semaphore)", function()
    it("keep the engine's semantics: values, failures reported once, every engine kind", function()
        local script = os.tmpname()
        write(script, [[
local ordo = require "ordo"
assert(require("ordo.util").wait_ready, "the launcher's waits are not installed")
local function check(eng)
    local opts = {engine = eng, dtype = "float64"}
    local x = ordo.zeros({256}, opts)
    for _ = 1, 200 do x:add_(1) end
    assert(x:sum():item() == 256 * 200)
    assert(#x:totable() == 256)
    local e = eng or ordo.engine.default()
    e:wait_to_write(x)
    e:wait_for_var(x)
    local v = e:new_variable()
    e:wait_for_var(v)
    -- a failing kernel: raised at the first wait that meets it; its tensor,
    -- never computed, raises again at every read until it is written
    local bad = ordo.tensor({1}, {engine = eng, dtype = "int32"}):div(ordo.zeros({1}, {engine = eng, dtype = "int32"}), "trunc")
    local ok, err = pcall(bad.item, bad)
    assert(not ok and err:find("integer division by zero"), tostring(err))
    assert(not err:find("reported before"), err)
    ok, err = pcall(bad.item, bad)
    assert(not ok and err:find("reported before: its value was never computed"), tostring(err))
    bad:fill_(3)
    assert(bad:item() == 3)
    local bad2 = ordo.tensor({1}, {engine = eng, dtype = "int32"}):div(ordo.zeros({1}, {engine = eng, dtype = "int32"}), "trunc")
    ok, err = pcall(e.wait_for_all, e)
    assert(not ok and err:find("integer division by zero"), tostring(err))
    e:wait_for_all()
    assert(bad2:numel() == 1)
end
check(nil)
for _, kind in ipairs({"naive", "pooled", "perdevice"}) do
    local eng = ordo.engine.new{kind = kind, cpu_workers = 2}
    check(eng)
end
print("ok")
]])
        local out, err, code = ordo(q(script))
        assert.are.equal(0, code, err)
        assert.are.equal("ok\n", out)
        os.remove(script)
    end)
end)

describe("ordo REPL on a pipe", function()
    it("prints exactly the values: the README example", function()
        local out, err, code = ordo("", "x = 1 + 1\nx\n")
        assert.are.equal("2\n", out)
        assert.are.equal("", err)
        assert.are.equal(0, code)
    end)

    it("continues incomplete chunks over several lines", function()
        local out, err, code = ordo("", "function f(a)\n  return a * 2\nend\nf(21)\nt = {\n1,\n2}\n#t\n" ..
                                        "s = [[a\nb]]\ns\nprint(1,\n2)\n")
        assert.are.equal(0, code, err)
        assert.are.equal("42\n2\na\nb\n1\t2\n", out)
        -- an expression left open on its first line goes on too (it was
        -- "unexpected symbol near '{'"), and at the end of input says why
        out, err, code = ordo("", "{1,\n2}\n(1 +\n2)\n{shape = {1,\n2}}\n{1,\n")
        assert.are.equal(1, code, err)
        assert.are.equal("{1, 2}\n3\n{shape = {1, 2}}\n", out)
        assert.are.equal("stdin:1: unexpected symbol near '<eof>'\n", err)
    end)

    it("a trailing ; keeps a value quiet; _ holds the last value", function()
        local out, err, code = ordo("", "1 + 1;\n_\n10\n_ * 2\nx = 5;\nx\n")
        assert.are.equal(0, code, err)
        assert.are.equal("2\n10\n20\n5\n", out)
    end)

    it("prints several values, nil, tensors, strings and tables (with a depth limit)", function()
        local out, err, code = ordo("", table.concat({
            "1, 'a', nil",
            "nil",
            "print('p')",
            "'str'",
            "ordo.tensor({{1, 2}, {3, 4}})",
            "{1, 'two', {a = 1}, ordo.ones({3})}",
            "{{{{{{1}}}}}}",
            "t = {}; t.self = t; return t",
            "ordo.tensor({{1, 5}, {7, 2}}):max(2)",
        }, "\n") .. "\n")
        assert.are.equal(0, code, err)
        assert.are.equal(table.concat({
            "1\ta\tnil",
            "nil",
            "p",
            "str",
            " 1  2\n 3  4\n[ordo.FloatTensor of size 2x2 on cpu(0)]",
            '{1, "two", {a = 1}, [ordo.FloatTensor of size 3 on cpu(0)]}',
            "{{{{{...}}}}}",
            "{self = {<cycle>}}",
            -- values spanning lines go one below the other (the second began after a tab)
            " 5\n 7\n[ordo.FloatTensor of size 2 on cpu(0)]\n 2\n 1\n[ordo.LongTensor of size 2 on cpu(0)]",
        }, "\n") .. "\n", out)
    end)

    it("errors print a message and a traceback on stderr, and the session goes on", function()
        local out, err, code = ordo("", "error('boom')\n3\nnil + 1\nordo.ones({2}) + ordo.ones({3})\nx x\n4\n")
        assert.are.equal("3\n4\n", out)
        assert.is_truthy(err:find("stdin:1: boom\nstack traceback:\n\t[C]: in function 'error'\n" ..
                                  "\tstdin:1: in main chunk\n", 1, true), err)
        assert.is_truthy(err:find("stdin:1: attempt to perform arithmetic on a nil value", 1, true), err)
        -- a package error names the user's line, without the package's frames
        assert.is_truthy(err:find("stdin:1: add: shapes 2 and 3 cannot be broadcast", 1, true), err)
        assert.is_falsy(err:find("util.lua", 1, true), err)
        assert.is_truthy(err:find("stdin:1: '=' expected near 'x'", 1, true), err)
        assert.are.equal(1, code) -- on a pipe, a session with errors exits 1
    end)

    it("a kernel failure raises at the wait that meets it, once", function()
        local out, err, code = ordo("", "x = ordo.tensor({7}, 'int32'):div(ordo.zeros({1}, 'int32'), 'trunc')\n" ..
                                        "x:item()\nx:numel()\n")
        assert.are.equal("1\n", out)
        assert.is_truthy(err:find("div: integer division by zero", 1, true), err)
        assert.are.equal(1, code)
    end)

    it("at the end of input waits for the engine and reports a failure nobody saw", function()
        local out, err, code = ordo("", "x = ordo.tensor({7}, 'int32'):div(ordo.zeros({1}, 'int32'), 'trunc')\n")
        assert.are.equal("", out)
        assert.is_truthy(err:find("ordo: at exit: .*integer division by zero"), err)
        assert.are.equal(1, code)
        _, err, code = ordo("", "function f()\n")
        assert.are.equal(1, code)
        assert.is_truthy(err:find("'end' expected", 1, true), err)
    end)

    it(":help, help(), help(x), :time and :quit", function()
        local out, err, code = ordo("", ":help\n")
        assert.are.equal(0, code, err)
        assert.is_truthy(out:find("ordo.tensor(data", 1, true), out)
        assert.is_truthy(out:find(":time on|off", 1, true), out)
        local out2 = ordo("", "help()\n")
        assert.are.equal(out, out2)
        out = ordo("", "help(ordo.ones({2}))\n")
        assert.is_truthy(out:find("reshape", 1, true), out)
        assert.is_truthy(out:find("matmul", 1, true), out)
        assert.is_falsy(out:find("__index", 1, true), out) -- metamethods and internals are left out
        assert.is_falsy(out:find("_c ", 1, true), out)
        -- Sequential and ModuleList index with a function (seq[i]): their methods are listed still
        out = ordo("", "help(ordo.nn.Sequential(ordo.nn.Linear(1, 1)))\n")
        assert.is_truthy(out:find("load_state_dict", 1, true), out)
        assert.is_truthy(out:find("forward", 1, true), out)
        out = ordo("", "help(ordo.nn.ModuleList({}))\n")
        assert.is_truthy(out:find("append", 1, true), out)
        out, err, code = ordo("", ":time on\n1 + 1\n:time off\n2 + 2\n:quit\n3 + 3\n")
        assert.are.equal(0, code, err)
        assert.is_truthy(out:match("^time on\n2\ntime: [%d.]+ [um]?s\ntime off\n4\n$"), out)
        _, err, code = ordo("", ":nope\n")
        assert.are.equal(1, code)
        assert.is_truthy(err:find("unknown command :nope", 1, true), err)
    end)

    it("os.exit and arg work as in a script", function()
        local _, _, code = ordo("", "os.exit(3)\n")
        assert.are.equal(3, code)
    end)

    it("at the end waits only for a default engine that runs: a bad setting nobody needed is no error", function()
        -- the wait at the end started the default engine itself, and failed
        -- with "at exit: ... cannot start the default engine", exit status 1
        local out, err, code = sh("ORDO_CPU_WORKER_NTHREADS=5000 " .. ORDO, "1+1\n")
        assert.are.equal("2\n", out)
        assert.are.equal("", err)
        assert.are.equal(0, code)
        -- a command that needed it says so, once, and the session fails
        out, err, code = sh("ORDO_CPU_WORKER_NTHREADS=5000 " .. ORDO, "ordo.ones({2})\n1+1\n")
        assert.are.equal("2\n", out)
        assert.is_truthy(err:find("ORDO_CPU_WORKER_NTHREADS=5000", 1, true), err)
        assert.is_falsy(err:find("at exit", 1, true), err)
        assert.are.equal(1, code)
    end)
end)

describe("ordo launcher and Ctrl-C", function()
    -- A chain of 1000 1000x1000 matmuls (seconds of work on any CPU) and a
    -- wait on its end; SIGINT once the wait has started.
    local CHAIN = [[
local ordo = require "ordo"
local a = ordo.rand({1000, 1000}):mul_(0.001)
local x, y = ordo.rand({1000, 1000}), ordo.empty({1000, 1000})
for i = 1, 500 do
    ordo.engine.push("matmul", {x, a}, {y})
    ordo.engine.push("matmul", {y, a}, {x})
end
print("waiting") io.stdout:flush()
]]

    -- Runs build/ordo with these arguments (quoted as needed) as a job of
    -- its own (set -m: its own process group, as a terminal's foreground
    -- job, and SIGINT not ignored as it is for a script's background job:
    -- ordo leaves an ignored SIGINT alone), stdin from `input`; once its
    -- output holds "waiting" (and 0.3 s more), sends SIGINT to it, or with
    -- `group` to its whole process group as a Ctrl-C at the terminal does.
    -- Returns the exit status, the milliseconds it took and its output
    -- (stdout and stderr together).
    local function interrupt_job(args, input, group)
        local inp, out = os.tmpname(), os.tmpname()
        write(inp, input or "")
        local cmd = ([[bash -c 'set -m; start=$(date +%%s%%N); %s %s < %s > %s 2>&1 & p=$!;
            for i in $(seq 200); do grep -q waiting %s && break; sleep 0.05; done; sleep 0.3;
            kill -INT %s$p; wait $p; rc=$?; echo "rc=$rc ms=$(( ($(date +%%s%%N) - start) / 1000000 ))"' 2>/dev/null]])
            :format(ORDO, args, inp, out, out, group and "-" or "")
        local f = assert(io.popen(cmd))
        local status = f:read("*a")
        f:close()
        local text = slurp(out)
        os.remove(inp)
        os.remove(out)
        return tonumber(status:match("rc=(%d+)")), tonumber(status:match("ms=(%d+)")), text
    end

    local function interrupt(tail)
        local script = os.tmpname()
        write(script, CHAIN .. tail)
        local rc, ms, text = interrupt_job(script)
        os.remove(script)
        return rc, ms, text
    end

    it("stops a script blocked in item() at once (exit status 130)", function()
        local rc, ms, text = interrupt("print(x:sum():item())\n")
        assert.are.equal(130, rc, text)
        assert.is_truthy(text:find(":9: interrupted", 1, true), text)
        assert.is_true(ms < 5000, "took " .. tostring(ms) .. " ms")
    end)

    it("stops a script blocked in wait_for_all", function()
        local rc, _, text = interrupt("ordo.engine.wait_for_all()\n")
        assert.are.equal(130, rc, text)
        assert.is_truthy(text:find("interrupted", 1, true), text)
    end)

    -- Shell ops run in process groups of their own: a Ctrl-C (SIGINT to the
    -- terminal's foreground group) stops the REPL's wait, and the command
    -- it waited for keeps running, as the README says of every op.  They
    -- shared ordo's group and died: "shell: command killed by signal 2".
    it("leaves a shell op running when Ctrl-C stops a wait in the REPL", function()
        local rc, _, text = interrupt_job("", table.concat({
            'v = ordo.engine.new_variable(); ordo.engine.shell("sleep 1", {writes = {v}})',
            'print("waiting") io.stdout:flush()',
            'ordo.engine.wait_for_var(v)',
            'ordo.engine.wait_for_var(v); print("second wait", v:version())',
        }, "\n") .. "\n", true)
        assert.is_truthy(text:find("stdin:1: interrupted", 1, true), text)
        assert.is_falsy(text:find("killed by signal", 1, true), text)
        assert.is_truthy(text:find("second wait\t1\n", 1, true), text)
        assert.are.equal(1, rc, text) -- on a pipe, a session with a failed command exits 1
    end)

    it("a REPL on a pipe that waits for its next line ends at Ctrl-C (exit 130) instead of ignoring it", function()
        local dir = os.tmpname()
        os.remove(dir)
        assert.is_true(os.execute("mkdir " .. q(dir)) == 0)
        local fifo, out = dir .. "/in", dir .. "/out"
        -- the writer says one line and then keeps the pipe open, silent
        local cmd = ([[bash -c 'set -m; mkfifo %s; (printf "print(\"ready\")\n"; exec sleep 20) > %s & w=$!;
            start=$(date +%%s%%N); %s < %s > %s 2>&1 & p=$!;
            for i in $(seq 200); do grep -q ready %s && break; sleep 0.05; done; sleep 0.2;
            kill -INT $p; wait $p; rc=$?; kill $w; echo "rc=$rc ms=$(( ($(date +%%s%%N) - start) / 1000000 ))"' 2>/dev/null]])
            :format(q(fifo), q(fifo), ORDO, q(fifo), q(out), q(out))
        local f = assert(io.popen(cmd))
        local status = f:read("*a")
        f:close()
        local text = slurp(out)
        os.execute("rm -rf " .. q(dir))
        assert.are.equal(130, tonumber(status:match("rc=(%d+)")), status .. text)
        assert.are.equal("ready\nordo: interrupted\n", text)
        assert.is_true(tonumber(status:match("ms=(%d+)")) < 10000, status)
    end)

    -- The REPL loads the package first (a few tenths of a second): a Ctrl-C
    -- then was taken for a broken package ("the ordo package did not load;
    -- plain LuaJIT from here: interrupted") and the session went on without
    -- it, exit status 0.  A slow package (a preload that spins, interpreted)
    -- holds the load open for the Ctrl-C.
    it("a Ctrl-C while the REPL loads the package quits (exit 130), not a session without it", function()
        local script = os.tmpname()
        write(script, [[
jit.off()
package.loaded.ordo = nil
package.preload.ordo = function()
    print("waiting") io.stdout:flush()
    local t0 = os.clock()
    while os.clock() - t0 < 20 do end
    return {}
end
]])
        local rc, ms, text = interrupt_job("-i " .. script, 'print("the session went on")\n')
        assert.are.equal(130, rc, text)
        assert.are.equal("waiting\nordo: interrupted\n", text)
        assert.is_true(ms < 10000, "took " .. tostring(ms) .. " ms")
        -- the same while it loads its own half, ordo.repl (exit status 1 before)
        local src = slurp(script)
        write(script, (src:gsub("preload%.ordo", 'preload["ordo.repl"]')))
        rc, ms, text = interrupt_job("-i " .. script, 'print("the session went on")\n')
        os.remove(script)
        assert.are.equal(130, rc, text)
        assert.is_truthy(text:match("^waiting\nordo: [^\n]*interrupted\n"), text)
        assert.is_falsy(text:find("the session went on", 1, true), text)
    end)

    it("and when a script takes Ctrl-C in a pcall", function()
        local script = os.tmpname()
        write(script, [[
local ordo = require "ordo"
local v = ordo.engine.new_variable()
ordo.engine.shell("sleep 1", {writes = {v}})
print("waiting") io.stdout:flush()
print(pcall(ordo.engine.wait_for_var, v))
ordo.engine.wait_for_var(v)
print("done", v:version())
]])
        local rc, _, text = interrupt_job(q(script), nil, true)
        os.remove(script)
        assert.is_truthy(text:find("false\t" .. script .. ":5: interrupted\n", 1, true), text)
        assert.is_falsy(text:find("killed by signal", 1, true), text)
        assert.is_truthy(text:find("done\t1\n", 1, true), text)
        assert.are.equal(0, rc, text)
    end)

    -- Leaving at Ctrl-C (exit status 130, pending ops abandoned), ordo
    -- passes the SIGINT on to the shell commands still running, as the
    -- terminal did when they shared its group.
    it("a script stopped by Ctrl-C stops its running shell commands too", function()
        local script, marker = os.tmpname(), os.tmpname()
        os.remove(marker)
        write(script, ([[
local ordo = require "ordo"
local v = ordo.engine.new_variable()
ordo.engine.shell("sleep 1.5 && echo finished > %s", {writes = {v}})
print("waiting") io.stdout:flush()
ordo.engine.wait_for_var(v)
]]):format(marker))
        local rc, _, text = interrupt_job(q(script)) -- SIGINT to ordo alone
        os.remove(script)
        assert.are.equal(130, rc, text)
        os.execute("sleep 2")
        local f = io.open(marker, "rb")
        if f then f:close() os.remove(marker) end
        assert.is_nil(f, "the command ran on after ordo was interrupted")
    end)

    -- The interrupt fires at the next Lua instruction, wherever it is:
    -- often inside the package (a tensor op in a loop).  The message names
    -- the user's line, not "lua/ordo/tensor.lua:551", and the REPL leaves
    -- out the package's frames.  (-joff: the interpreter runs the loop, so
    -- the hook fires there at once.)
    it("an interrupt names the user's line, not the package's", function()
        local rc, _, text = interrupt_job("-joff", table.concat({
            -- rows: most of the time goes to the package's recursive walk
            "t = {} for i = 1, 2000 do local r = {} for j = 1, 100 do r[j] = j end t[i] = r end",
            'print("waiting") io.stdout:flush()',
            "while true do local x = ordo.tensor(t) end",
            "print('after')",
        }, "\n") .. "\n")
        assert.is_truthy(text:find("\nstdin:1: interrupted\n", 1, true), text)
        assert.is_falsy(text:find("ordo/tensor.lua", 1, true), text)
        assert.is_truthy(text:find("after\n", 1, true), text)
        assert.are.equal(1, rc, text)
    end)
end)

describe("ordo REPL history", function()
    -- readline runs only on a terminal: script(1) gives it one
    local have_script = os.execute("command -v script > /dev/null 2>&1")
    have_script = have_script == true or have_script == 0

    it("keeps the last 1000 lines even when the session ends with os.exit", function()
        if not have_script then
            pending("script(1) is missing")
            return
        end
        local hist = os.tmpname()
        local lines = {}
        for i = 1, 1500 do lines[i] = "old " .. i end
        write(hist, table.concat(lines, "\n") .. "\n")
        -- os.exit skips the truncation at the end of the session; the file
        -- grew past the limit by every such session
        local _, _, code = sh(("ORDO_HISTORY=%s script -qec %s /dev/null"):format(q(hist), q(ORDO)),
                              "x = 1\nos.exit(0)\n")
        assert.are.equal(0, code)
        local text = slurp(hist)
        os.remove(hist)
        local n = select(2, text:gsub("\n", ""))
        assert.are.equal(1000, n, text:sub(1, 200))
        assert.are.equal("old 503\n", text:sub(1, 8))
        assert.are.equal("old 1500\nx = 1\nos.exit(0)\n", text:sub(-26))
    end)
end)

describe("make install", function()
    it("installs bin/ordo that finds share/ordo/lua and lib/libordo.so", function()
        local prefix = os.tmpname()
        os.remove(prefix)
        -- another build: installed as it was built (the CUDA setting read
        -- back from its flags), or make would rebuild it with the defaults
        local build = ""
        if os.getenv("ORDO_BUILD") then
            local flags = slurp(BUILD .. "/.flags") or ""
            build = (" BUILD=%s CUDA=%s"):format(q(BUILD), flags:find("ORDO_CUDA_EMU", 1, true) and "emu" or
                                                 flags:find("ORDO_WITH_CUDA", 1, true) and "1" or "0")
        end
        local out, err, code = sh(("make -s --no-print-directory install PREFIX=%s%s"):format(q(prefix), build))
        assert.are.equal(0, code, out .. err)
        for _, f in ipairs({"bin/ordo", "lib/libordo.so", "lib/libordo.a", "include/ordo.h",
                            "include/ordo_tensor.h", "include/ordo_kernel.h", "share/ordo/lua/ordo/init.lua",
                            "share/ordo/lua/ordo/repl.lua"}) do
            assert.is_truthy(io.open(prefix .. "/" .. f, "rb"), f .. " was not installed")
        end
        out, err, code = sh(("cd / && %s/bin/ordo -e %s"):format(q(prefix),
            q('local o = require "ordo"; print(o.lib_path, o.arange(4):sum():item())')))
        assert.are.equal(0, code, err)
        assert.are.equal(prefix .. "/lib/libordo.so\t6\n", out)
        -- the installed package alone, from plain luajit, finds its library too
        out, err, code = sh(("cd / && LUA_PATH=%s luajit -e %s"):format(
            q(prefix .. "/share/ordo/lua/?.lua;" .. prefix .. "/share/ordo/lua/?/init.lua;;"),
            q('print(require("ordo").ones({2}):sum():item())')))
        assert.are.equal(0, code, err)
        assert.are.equal("2\n", out)
        -- and the REPL runs there
        out, err, code = sh(prefix .. "/bin/ordo", "ordo.ones({5}):sum():item()\n")
        assert.are.equal(0, code, err)
        assert.are.equal("5\n", out)
        os.execute("rm -rf " .. q(prefix))
    end)
end)

describe("ordo.repl (the REPL's Lua half)", function()
    local repl = require "ordo.repl"
    local ordo = require "ordo"

    it("completes globals, keywords, fields and methods through metatables", function()
        local saved = rawget(_G, "ordo")
        rawset(_G, "ordo", ordo)
        rawset(_G, "spec_tensor", ordo.zeros({2, 2}))
        rawset(_G, "spec_tab", {alpha = 1, beta = {gamma = 2}, _hidden = 3,
                                fn = function() end})
        local c = repl.complete("spec_tensor:resh")
        assert.same({"spec_tensor:reshape", "spec_tensor:reshape_as"}, c)
        c = repl.complete("spec_tensor:")
        assert.is_true(#c > 50)
        for _, m in ipairs(c) do assert.is_falsy(m:find(":_", 1, true), m) end
        assert.same({"spec_tab.alpha"}, repl.complete("spec_tab.al"))
        assert.same({"spec_tab.beta.gamma"}, repl.complete("spec_tab.beta.g"))
        assert.same({"spec_tab._hidden"}, repl.complete("spec_tab._"))
        assert.same({"spec_tab:fn"}, repl.complete("spec_tab:"))
        assert.same({"spec_tab", "spec_tensor"}, repl.complete("spec_t"))
        assert.same({"ordo.zeros", "ordo.zeros_like"}, repl.complete("ordo.zeros"))
        assert.same({"ordo.engine.wait_for_all", "ordo.engine.wait_for_var"}, repl.complete("ordo.engine.wait_for"))
        assert.same({"function"}, repl.complete("functio"))
        assert.same({}, repl.complete("nosuchname.x"))
        assert.same({}, repl.complete("spec_tab.alpha.x"))
        rawset(_G, "spec_tensor", nil)
        rawset(_G, "spec_tab", nil)
        rawset(_G, "ordo", saved)
    end)

    it("never runs code to complete (an __index function is not called)", function()
        local called = false
        rawset(_G, "spec_proxy", setmetatable({}, {__index = function() called = true end}))
        assert.same({}, repl.complete("spec_proxy.x"))
        assert.same({}, repl.complete("spec_proxy.a.b"))
        assert.is_false(called)
        rawset(_G, "spec_proxy", nil)
    end)

    it("tells an unfinished chunk from a syntax error", function()
        for _, src in ipairs({"function f()", "x = {", "print(1,", "s = [[abc", "if x then",
                              "{", "{1,", "{shape = 1,", "(1 +", "ordo.tensor({1,"}) do
            local fn, how = repl.compile(src)
            assert.is_nil(fn, src)
            assert.are.equal("more", how, src)
        end
        for _, src in ipairs({"x x", "s = 'abc\n", "1 +* 2", "{1,, 2", "{1}}", "(1))"}) do
            local fn, how = repl.compile(src)
            assert.is_nil(fn, src)
            assert.are_not.equal("more", how, src)
        end
        local fn, silent = repl.compile("1 + 2;")
        assert.is_true(silent)
        assert.are.equal(3, fn()[1])
    end)

    it("formats long tables over several lines and elides past 40 entries", function()
        local t = {}
        for i = 1, 45 do t[i] = i * 1000 end
        local s = repl.format(t)
        assert.is_truthy(s:find("\n", 1, true))
        assert.is_truthy(s:find("... (5 more)", 1, true), s)
        assert.are.equal('{[true] = 2, ["a b"] = 1}', repl.format({["a b"] = 1, [true] = 2}))
        assert.are.equal("{}", repl.format({}))
        -- whole numbers with all their digits: an int64 sum showed as 1.2345678901235e+14
        assert.are.equal("123456789012345", repl.format(ordo.tensor({123456789012345}, "int64"):sum():item()))
        assert.are.equal("{4611686018427387904, -1000000000000000, 5, 0.5}", repl.format({2 ^ 62, -1e15, 5, 0.5}))
        assert.are.equal("1e+20", repl.format(1e20)) -- (past 2^63: no int64)
    end)

    it("shows a value whose tostring spans lines on one line inside a table, named by what it is", function()
        local nn = ordo.nn
        local m = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
        assert.are.equal("{model = Sequential {...}, t = [ordo.FloatTensor of size 2 on cpu(0)]}",
                         repl.format({model = m, t = ordo.ones({2})}))
        local multi = setmetatable({}, {__tostring = function() return "Head\n  part 1\n  part 2" end})
        assert.are.equal("{Head {...}}", repl.format({multi}))
        assert.are.equal("Head\n  part 1\n  part 2", repl.format(multi)) -- at the top: all of it
    end)

    it("shows a tensor inside a table by its summary without reading it: a failed op's tensor too", function()
        local a = ordo.tensor({1, 2, 3})
        local bad = a:gather(1, ordo.tensor({5}, "int64")) -- fails in its kernel
        -- (the whole table raised the gather's failure)
        assert.are.equal("{[ordo.FloatTensor of size 1 on cpu(0)], n = 1}", repl.format({bad, n = 1}))
        assert.are.equal("{[ordo.LongTensor of size () on cpu(0)]}", repl.format({ordo.tensor(2, "int64")}))
        -- a key too: a tensor key printed its values over several lines, and
        -- sorting the keys read them (the gather's failure instead of the table)
        assert.are.equal("{[[ordo.FloatTensor of size 1 on cpu(0)]] = 1}", repl.format({[bad] = 1}))
        assert.are.equal("{x = 1, [Sequential {...}] = 2, [[ordo.FloatTensor of size 3 on cpu(0)]] = 3}",
                         repl.format({x = 1, [ordo.nn.Sequential(ordo.nn.ReLU())] = 2, [a] = 3}))
        local cyc = {}
        cyc[cyc] = 1
        assert.are.equal("{[{<cycle>}] = 1}", repl.format(cyc))
        -- alone, it is printed, so read: its failure shows
        local ok, e = pcall(repl.format, bad)
        assert.is_false(ok)
        assert.is_truthy(tostring(e):find("gather: index 5 out of range", 1, true), e)
    end)
end)
