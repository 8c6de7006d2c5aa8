-- The engine for macro tasks: a Makefile-like build.
--
-- Every file is an engine variable; every rule is one shell command pushed
-- as an async op (ordo.engine.shell) that reads its prerequisites' vars and
-- writes its target's var.  The engine then orders the commands exactly as
-- make would -- a command starts once the commands making its inputs are
-- done -- and runs independent commands at the same time.  A command runs
-- in a child process started and waited for in C: it holds no worker, and
-- no Lua runs off the main thread.
--
-- The script builds a small C program in a temporary directory (generated
-- header, two compiles in parallel, link, run) next to two slow `sleep 1`
-- rules, and reads the profiler's trace to show that independent commands
-- overlapped (the two sleeps take about 1 s together, not 2).  Then it
-- rebuilds: nothing is out of date; after touching a source, only what
-- depends on it runs again (make's mtime rule).  Last, a rule whose command
-- fails: its dependents are skipped, an independent rule still runs, and
-- the wait reports the failure once, naming the command and exit status.
--
-- usage: build/ordo examples/build_graph.lua [dir]
--   (or LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit examples/build_graph.lua ...)
--   dir: where to build, a new or empty directory, kept afterwards
--   (default: a temporary directory, removed at the end)
local ordo = require "ordo"
local trace = require "ordo.trace"
local engine, profiler = ordo.engine, ordo.profiler

local fmt = string.format

local here = debug.getinfo(1, "S").source:sub(2):match("^(.*[/\\])") or "./"
local cli = dofile(here .. "cli.lua")
-- (before any work: --help, or any other option, is not a directory name)
local opt = cli.parse(arg, {name = "build_graph", script = here .. "build_graph.lua",
                            positional = {{"dir", "path"}}})

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function run(cmd)
    local f = assert(io.popen(cmd))
    local out = f:read("*a")
    f:close()
    return out
end

-- ---------------------------------------------------------------- a tiny make

local Make = {}
Make.__index = Make

local function new_make(dir)
    return setmetatable({dir = dir, rules = {}, vars = {}}, Make)
end

-- rule(target, prerequisites, command): as in a Makefile; the command runs
-- in the build directory.  A rule without a command is phony (a name for
-- its prerequisites, like `all`).
function Make:rule(target, deps, cmd)
    self.rules[target] = {target = target, deps = deps or {}, cmd = cmd}
end

-- The engine var of a file, the same one across builds.
function Make:var(file)
    local v = self.vars[file]
    if not v then
        v = engine.new_variable()
        self.vars[file] = v
    end
    return v
end

-- Modification times of files, {sec, nsec} or nil when missing (one stat call).
function Make:mtimes(files)
    local quoted = {}
    for i, f in ipairs(files) do quoted[i] = sh_quote(f) end
    local out = run(fmt("cd %s && stat -c '%%n|%%.9Y' -- %s 2>/dev/null", sh_quote(self.dir),
                        table.concat(quoted, " ")))
    local t = {}
    for name, sec, nsec in out:gmatch("([^\n|]+)|(%d+)%.?(%d*)\n") do
        t[name] = {tonumber(sec), tonumber(nsec ~= "" and nsec or "0")}
    end
    return t
end

local function newer(a, b) return a[1] > b[1] or (a[1] == b[1] and a[2] > b[2]) end

-- The rules to run for goal, prerequisites first (a topological order: a
-- command is pushed after the commands that make its inputs, which is all
-- the engine needs to order them, rule 1).  A target is out of date when it
-- is missing, older than a prerequisite, or a prerequisite is remade.
function Make:plan(goal)
    local files, seen = {}, {}
    local function collect(t)
        if seen[t] then return end
        seen[t] = true
        files[#files + 1] = t
        local r = self.rules[t]
        if r then for _, d in ipairs(r.deps) do collect(d) end end
    end
    collect(goal)
    local mt = self:mtimes(files)
    local plan, state = {}, {} -- state[t]: "visiting", "stale", "fresh"
    local function visit(t, from)
        if state[t] == "visiting" then error(fmt("make: circular dependency %s <- %s", t, from), 0) end
        if state[t] then return state[t] == "stale" end
        local r = self.rules[t]
        if not r then
            if not mt[t] then error(fmt("make: no rule to make '%s' (needed by '%s')", t, from or "the goal"), 0) end
            state[t] = "fresh"
            return false
        end
        state[t] = "visiting"
        local stale = r.cmd ~= nil and mt[t] == nil
        for _, d in ipairs(r.deps) do
            if visit(d, t) then stale = true
            elseif r.cmd and mt[t] and mt[d] and newer(mt[d], mt[t]) then stale = true end
        end
        state[t] = stale and "stale" or "fresh"
        if stale and r.cmd then plan[#plan + 1] = r end
        return stale
    end
    visit(goal)
    return plan
end

-- Ctrl-C's error: "interrupted" under the launcher, "interrupted!" under
-- plain luajit, at the end of the message.
local function interrupted(err) return tostring(err):find("interrupted!?$") ~= nil end

-- Pushes the out-of-date rules of goal and waits for them with the profiler
-- on.  Returns the trace's ops, the wait's error (nil if none) and the plan.
function Make:build(goal)
    local plan = self:plan(goal)
    if #plan == 0 then
        print(fmt("make: '%s' is up to date", goal))
        return {}, nil, plan
    end
    profiler.clear()
    profiler.start()
    for _, r in ipairs(plan) do
        local reads = {}
        for i, d in ipairs(r.deps) do reads[i] = self:var(d) end
        print(fmt("  push %-10s <- %-28s $ %s", r.target, table.concat(r.deps, " "), r.cmd))
        engine.shell(fmt("cd %s && %s", sh_quote(self.dir), r.cmd),
                     {reads = reads, writes = {self:var(r.target)}, name = r.target})
    end
    -- Pushing returned at once; this is the only wait.  It raises the first
    -- failure not yet reported (rule 5).
    local ok, err = pcall(engine.wait_for_all)
    profiler.stop()
    -- Ctrl-C in the wait is not a failed build: it stops the script
    if not ok and interrupted(err) then error(err, 0) end
    -- (the message without the "file:line:" of the pcall'ed call)
    return trace.capture(), (not ok) and (tostring(err):gsub("^[^\n]-:%d+: ", "")) or nil, plan
end

-- ---------------------------------------------------------------- reporting

-- One line per command: start and end, a bar on a shared time axis.
local function timeline(ops)
    local s = trace.stats(ops)
    if s.count == 0 then return s end
    local width = 40
    local scale = s.wall > 0 and width / s.wall or 0
    for _, op in ipairs(ops) do
        local a = math.floor((op.start - s.first) * scale + 0.5)
        local b = math.max(a + 1, math.floor((op.stop - s.first) * scale + 0.5))
        local bar = op.status == "skipped" and "(skipped: a prerequisite failed)"
                    or ("|" .. string.rep(" ", a) .. string.rep("#", b - a) .. string.rep(" ", width - b) .. "|")
        print(fmt("  %-10s %7.3f s .. %7.3f s  %-7s %s", op.name, (op.start - s.first) / 1e6,
                  (op.stop - s.first) / 1e6, op.status, bar))
    end
    print(fmt("  %d commands: wall %.3f s, sum of command times %.3f s (parallelism %.2f, at most %d at once)",
              s.count, s.wall / 1e6, s.busy / 1e6, s.parallelism, s.peak))
    return s
end

local function show_overlap(ops, a, b)
    local oa, ob = trace.select(ops, a), trace.select(ops, b)
    if #oa == 0 or #ob == 0 then return end
    local o = trace.overlap(oa, ob)
    print(fmt("  %s and %s overlapped for %.3f s%s", a, b, o / 1e6, o > 0 and "" or " (they ran one after the other)"))
    return o
end

local function ran(plan)
    local t = {}
    for _, r in ipairs(plan) do t[#t + 1] = r.target end
    return table.concat(t, " ")
end

-- ---------------------------------------------------------------- the project

local keep = opt.dir ~= nil
-- (a name that starts with '-', given after `--`, as a path: `cd -x` is an option)
if keep and opt.dir:sub(1, 1) == "-" then opt.dir = "./" .. opt.dir end
local dir = keep and opt.dir or run("mktemp -d \"${TMPDIR:-/tmp}/ordo_build.XXXXXX\""):gsub("%s+$", "")
if dir == "" then cli.die("build_graph", "cannot make a temporary directory") end
if keep then
    -- `--` ends mkdir's options: a name that starts with '-' is a name
    -- (mkdir's own message, on one line with ours, says why it could not)
    local why = run("mkdir -p -- " .. sh_quote(dir) .. " 2>&1 || echo FAILED")
    if why:find("FAILED%s*$") then
        why = why:gsub("%s*FAILED%s*$", ""):gsub("^mkdir: ", ""):gsub("\n.*", "")
        cli.die("build_graph", fmt("dir: cannot make the directory %s (%s)", dir, why))
    end
    -- The checks below expect a first build: old targets would be up to date.
    if run("ls -A -- " .. sh_quote(dir) .. " 2>&1") ~= "" then
        cli.die("build_graph", fmt("dir must be a new or empty directory, got %s, which holds files", dir))
    end
end

local function write(name, text)
    local path = dir .. "/" .. name
    local f, err = io.open(path, "w")
    if not f then cli.die("build_graph", "cannot write " .. tostring(err)) end
    f:write(text)
    f:close()
end
local function read(name)
    local f = io.open(dir .. "/" .. name, "r")
    if not f then return nil end
    local s = f:read("*a")
    f:close()
    return s
end
local function exists(name) return read(name) ~= nil end

-- The sources (what a checkout holds).
write("VERSION", "1.0\n")
write("greet.h", "const char *greet(const char *who);\n")
write("greet.c", [[
#include <stdio.h>
#include "greet.h"
const char *greet(const char *who) {
    static char buf[64];
    snprintf(buf, sizeof buf, "Hello, %s!", who);
    return buf;
}
]])
write("main.c", [[
#include <stdio.h>
#include "greet.h"
#include "version.h"
int main(void) {
    printf("app %s: %s\n", VERSION, greet("ordo"));
    return 0;
}
]])
write("broken.c", "int broken(void) { return 1 }  /* missing ';' on purpose */\n")

local make = new_make(dir)
make:rule("version.h", {"VERSION"}, [[printf '#define VERSION "%s"\n' "$(cat VERSION)" > version.h]])
make:rule("main.o", {"main.c", "greet.h", "version.h"}, "cc -c main.c -o main.o")
make:rule("greet.o", {"greet.c", "greet.h"}, "cc -c greet.c -o greet.o")
make:rule("app", {"main.o", "greet.o"}, "cc -o app main.o greet.o")
make:rule("out.txt", {"app"}, "./app > out.txt")
make:rule("docs.txt", {"greet.h"}, "sleep 1 && echo 'greet(who): a greeting' > docs.txt")
make:rule("lint.txt", {"main.c", "greet.c"}, "sleep 1 && echo 'lint: 0 warnings' > lint.txt")
make:rule("all", {"out.txt", "docs.txt", "lint.txt"})
-- a rule whose command fails, one that needs it, and one that does not
make:rule("broken.o", {"broken.c"}, "cc -c broken.c -o broken.o")
make:rule("broken", {"broken.o"}, "cc -o broken broken.o")
make:rule("notes.txt", {}, "echo 'independent of broken.o' > notes.txt")
make:rule("failing", {"broken", "notes.txt"})

print("build directory: " .. dir)
local cfg = engine.config()
print(fmt("engine: %s, %d cpu workers%s", cfg.kind, cfg.cpu_workers,
          cfg.kind == "naive" and " (naive: each command runs inside its push, one at a time)" or ""))
local status = 0
-- The four builds; a Ctrl-C stops them (below: the temporary directory
-- goes, then the interruption goes on to the launcher, exit status 130).
local function builds()
    local function expect(cond, what)
        if not cond then
            io.stderr:write("build_graph: " .. what .. "\n")
            status = 1
        end
    end

    -- ---- 1. a full build
    print()
    print("== build 1: make all (nothing built yet)")
    local ops, err, plan = make:build("all")
    expect(err == nil, "build 1 failed: " .. tostring(err))
    timeline(ops)
    local o_sleep = show_overlap(ops, "docs.txt", "lint.txt")
    show_overlap(ops, "main.o", "greet.o")
    local s_sleep = trace.stats(trace.select(ops, {["docs.txt"] = true, ["lint.txt"] = true}))
    print(fmt("  the two 1 s commands finished %.3f s after the first started: %s", s_sleep.wall / 1e6,
              o_sleep and o_sleep > 0.5e6 and "they ran in parallel" or "they did NOT run in parallel"))
    print("  out.txt: " .. (read("out.txt") or "(missing)"):gsub("\n$", ""))
    expect(read("out.txt") == "app 1.0: Hello, ordo!\n", "out.txt is wrong: " .. tostring(read("out.txt")))
    expect(#plan == 7, "build 1 ran " .. #plan .. " commands, expected 7")

    -- ---- 2. nothing changed
    print()
    print("== build 2: make all again (nothing changed)")
    ops, err, plan = make:build("all")
    print("  commands run: " .. (#plan > 0 and ran(plan) or "none"))
    expect(#plan == 0 and err == nil, "build 2 ran " .. ran(plan))

    -- ---- 3. one source changed
    print()
    print("== build 3: touch greet.c; make all (only what depends on greet.c)")
    run(fmt("touch %s/greet.c", sh_quote(dir)))
    ops, err, plan = make:build("all")
    expect(err == nil, "build 3 failed: " .. tostring(err))
    timeline(ops)
    print("  commands run: " .. ran(plan))
    expect(ran(plan) == "greet.o app out.txt lint.txt", "build 3 ran " .. ran(plan))

    -- ---- 4. a failing command
    print()
    print("== build 4: make failing (broken.c does not compile; the compiler's message is expected)")
    ops, err, plan = make:build("failing")
    print("  the wait raised: " .. tostring(err))
    timeline(ops)
    local skipped = trace.select(ops, function(op) return op.status == "skipped" end)
    for _, op in ipairs(skipped) do print("  skipped: " .. op.name) end
    print(fmt("  broken exists: %s; notes.txt exists: %s", tostring(exists("broken")), tostring(exists("notes.txt"))))
    local again_ok, again_err = pcall(engine.wait_for_all)
    if not again_ok and interrupted(again_err) then error(again_err, 0) end
    print("  a second wait: " .. (again_ok and "no error (a failure is reported once)" or tostring(again_err)))
    expect(err and err:find("broken.o: command failed with exit status 1", 1, true),
           "build 4: unexpected error " .. tostring(err))
    expect(#skipped == 1 and skipped[1].name == "broken", "build 4: 'broken' was not skipped")
    expect(not exists("broken") and exists("notes.txt"), "build 4: wrong files")
    expect(again_ok, "build 4: the failure was reported twice")
end
local done, stopped = pcall(builds)
if not done then
    if not keep then run("rm -rf " .. sh_quote(dir)) end
    error(stopped, 0)
end

print()
if keep then
    print("kept " .. dir)
else
    run("rm -rf " .. sh_quote(dir))
end
print(status == 0 and "build_graph: all checks passed" or "build_graph: SOME CHECKS FAILED")
os.exit(status)
