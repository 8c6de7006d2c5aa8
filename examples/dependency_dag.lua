-- Dependency scheduling, shown and measured.
--
-- 1. The example program of the engine's design notes, one push per line:
--        A = 2;  B = A + 1;  C = A + 2;  D = B * C
--    B and C only read A, so the engine may run them at the same time; D
--    waits for both.  The script prints D and which lines were free to run
--    in parallel, derived from what each line reads and writes (the same
--    information the engine schedules by).
-- 2. A wider DAG: four independent branches of heavy tensor work on n x n
--    tensors (a matmul, and chains of tanh, sigmoid and sqrt), joined by a
--    sum at the end.  It runs with the profiler on, writes a Chrome trace,
--    prints the profiler summary, then reads the trace back (ordo.trace) to
--    tell, for every pair of branches, whether they really ran at the same
--    time, and the wall time against the sum of the op times.  The result
--    is checked against the naive engine, which runs every op in turn.
--
-- usage: build/ordo examples/dependency_dag.lua [trace.json] [n]
--   (or LUA_PATH="lua/?.lua;lua/?/init.lua;;" luajit examples/dependency_dag.lua ...)
--   trace.json  where the trace goes (default /tmp/ordo_dag_trace.json)
--   n           the tensors' side (default 1024: 1M-element tensors)
--
-- Parallelism needs at least two CPU workers (the default is one per core;
-- ORDO_CPU_WORKER_NTHREADS sets it, ORDO_ENGINE_TYPE=naive runs serially).
local ordo = require "ordo"
local trace = require "ordo.trace"

local here = debug.getinfo(1, "S").source:sub(2):match("^(.*[/\\])") or "./"
local cli = dofile(here .. "cli.lua")

-- Checked before any work (examples/cli.lua): --help and other options
-- are not trace paths, and n must be a size.
local opt = cli.parse(arg, {
    name = "dependency_dag", script = here .. "dependency_dag.lua",
    positional = {{"trace.json", "outfile", "/tmp/ordo_dag_trace.json"}, {"n", "count", 1024}},
})
local trace_path, n = opt["trace.json"], opt.n
local fmt = string.format
-- the trace is read back at the end: a FIFO or a device (/dev/null) would
-- give back nothing (or hang), after all the work
if ordo.file_kind(trace_path) == "other" then
    cli.die("dependency_dag", fmt("trace.json: %s is not a regular file (the script reads its trace back)",
                                  trace_path))
end

local function ms(us) return us / 1000 end

-- ---------------------------------------------------------------- 1. A, B, C, D

print("== 1. The program  A = 2; B = A + 1; C = A + 2; D = B * C")

-- Each line: its text, the vars it reads, the var it writes, and the push.
local lines = {
    {text = "A = 2",     reads = {},         writes = "A", run = function() return ordo.full({}, 2) end},
    {text = "B = A + 1", reads = {"A"},      writes = "B", run = function(v) return v.A + 1 end},
    {text = "C = A + 2", reads = {"A"},      writes = "C", run = function(v) return v.A + 2 end},
    {text = "D = B * C", reads = {"B", "C"}, writes = "D", run = function(v) return v.B * v.C end},
}

local vals = {}
for _, l in ipairs(lines) do vals[l.writes] = l.run(vals) end -- four pushes; nothing waits
local D = vals.D:item()                                       -- the only wait
print(fmt("D = %g", D))

-- Line j depends on an earlier line i when they share a var that at least
-- one of them writes (rule 1); everything else may run concurrently (rule 2).
local function conflicts(a, b)
    local function touches(l, var)
        if l.writes == var then return "w" end
        for _, r in ipairs(l.reads) do if r == var then return "r" end end
    end
    for _, var in ipairs({a.writes, b.writes}) do
        if touches(a, var) and touches(b, var) then return true end
    end
    return false
end
local step, after = {}, {}  -- after[j][i]: line j must wait for line i (directly or not)
for j, lj in ipairs(lines) do
    step[j], after[j] = 1, {}
    for i = 1, j - 1 do
        if conflicts(lines[i], lj) then
            step[j] = math.max(step[j], step[i] + 1)
            after[j][i] = true
            for k in pairs(after[i]) do after[j][k] = true end
        end
    end
end
local nsteps = 0
for j = 1, #lines do nsteps = math.max(nsteps, step[j]) end
for s = 1, nsteps do
    local here = {}
    for j, l in ipairs(lines) do if step[j] == s then here[#here + 1] = l.text end end
    print(fmt("  step %d: %s", s, table.concat(here, "   ||   ")))
end
local pairs_found = 0
for j = 1, #lines do
    for i = 1, j - 1 do
        if not after[j][i] then
            pairs_found = pairs_found + 1
            local shared = {}
            for _, r in ipairs(lines[i].reads) do shared[#shared + 1] = r end
            print(fmt("  can run in parallel: %s  and  %s  (both only read %s; neither writes what the other uses)",
                      lines[i].text, lines[j].text, table.concat(shared, ", ")))
        end
    end
end
if pairs_found == 0 then print("  no two lines can run in parallel") end
if D ~= 12 then
    io.stderr:write(fmt("dependency_dag: expected D = 12, got %g\n", D))
    os.exit(1)
end

-- ---------------------------------------------------------------- 2. a wider DAG

local cfg = ordo.engine.config()
print()
print(fmt("== 2. A wider DAG: 4 independent branches on %dx%d tensors, joined by a sum", n, n))
print(fmt("engine: %s, %d cpu workers", cfg.kind, cfg.cpu_workers))

-- Each branch uses its own kernels, so its ops are told apart in the trace.
local branches = {
    {name = "matmul",  desc = "x @ w",           run = function(x, w) return x:matmul(w) end},
    {name = "tanh",    desc = "tanh(tanh(x))",   run = function(x) return x:tanh():tanh() end},
    {name = "sigmoid", desc = "sigmoid x6 of x", run = function(x)
        local t = x
        for _ = 1, 6 do t = t:sigmoid() end
        return t
    end},
    {name = "sqrt",    desc = "sqrt x8 of x",    run = function(x)
        local t = x
        for _ = 1, 8 do t = t:sqrt() end
        return t
    end},
}

-- Deterministic inputs (no random generator), so two engines see the same data.
local function inputs(e)
    local x = ordo.arange(0, n * n, {engine = e}):reshape({n, n}) * (1 / (n * n))
    local w = x * (2 / n)
    return x, w
end

-- The DAG: each branch then its sum, then the sums added up.  Pushes only.
local function dag(x, w)
    local total
    for _, b in ipairs(branches) do
        local s = b.run(x, w):sum()
        total = total and total + s or s
    end
    return total
end

local x, w = inputs()
ordo.engine.wait_for_all()        -- inputs ready: only the DAG is profiled
ordo.profiler.clear()
ordo.profiler.start()
local result = dag(x, w):item()
ordo.engine.wait_for_all()
ordo.profiler.stop()
ordo.profiler.dump(trace_path)

print(fmt("result = %.6g", result))
print()
print(ordo.profiler.summary())
print("trace: " .. trace_path .. " (chrome://tracing or ui.perfetto.dev)")

-- ---- what the trace says
local ops = trace.load(trace_path)
local all = trace.stats(ops)
local t0 = all.first or 0
print()
print("Branches (times in ms from the first op):")
print(fmt("  %-8s %-16s %4s %9s %9s %9s  %s", "branch", "work", "ops", "busy", "start", "end", "worker rows"))
local per = {}
for i, b in ipairs(branches) do
    local bops = trace.select(ops, b.name)
    local s = trace.stats(bops)
    per[i] = bops
    local rows, seen = {}, {}
    for _, op in ipairs(bops) do
        if not seen[op.worker] then
            seen[op.worker] = true
            rows[#rows + 1] = op.worker
        end
    end
    print(fmt("  %-8s %-16s %4d %9.2f %9.2f %9.2f  %s", b.name, b.desc, s.count, ms(s.busy),
              ms((s.first or t0) - t0), ms((s.last or t0) - t0), table.concat(rows, ", ")))
end

print()
print("Overlap between branches (time both were running):")
local overlapped, npairs = 0, 0
for i = 1, #branches do
    for j = i + 1, #branches do
        npairs = npairs + 1
        local o = trace.overlap(per[i], per[j])
        if o > 0 then overlapped = overlapped + 1 end
        print(fmt("  %-8s x %-8s %9.2f ms  %s", branches[i].name, branches[j].name, ms(o),
                  o > 0 and "overlapped" or "no overlap (one ran after the other)"))
    end
end

print()
print(fmt("wall time %.2f ms, sum of op times %.2f ms: parallelism %.2f (peak %d ops at once, %d cpu workers)",
          ms(all.wall), ms(all.busy), all.parallelism, all.peak, cfg.cpu_workers))
print(fmt("parallel: %s (%d of %d branch pairs overlapped)", overlapped > 0 and "yes" or "no", overlapped, npairs))
if overlapped == 0 then
    if cfg.cpu_workers < 2 or cfg.kind == "naive" then
        print("(one op at a time: this engine has a single CPU worker or is the naive engine)")
    else
        print("(no overlap although the engine has several workers: the machine may be busy)")
    end
end

-- ---- the same DAG on the naive engine (each op runs inside its push, in turn)
local naive = ordo.engine.new{kind = "naive"}
local serial = dag(inputs(naive)):item()
local same = math.abs(serial - result) <= 1e-6 * math.max(1, math.abs(result))
print(fmt("naive (serial) engine: result = %.6g: %s", serial, same and "same result" or "DIFFERENT"))
naive:close()
if not same then os.exit(1) end
