-- bench/train_bench.lua - training throughput of examples/fashion_mlp.lua's
-- MLP, ordo beside a plain C peer, in one run.
--
--   luajit bench/train_bench.lua              (after `make`; builds its C peer itself)
--   BENCH_QUICK=1 luajit bench/train_bench.lua     a few steps, for a smoke run (CI)
--   luajit bench/train_bench.lua --profile    then one profiled ordo process per configuration
--
-- The model: Linear 784-512, ReLU, Linear 512-256, ReLU, Linear 256-10
-- (fashion_mlp.lua's, without its Dropout(0.2) layers), softmax
-- cross-entropy, Adam lr 1e-3 (no schedule), float32, batch 128.  One
-- training step = zero_grad, forward, loss, backward, Adam step; ordo's is
-- the example's loop body, pushed onto the engine with no wait in between.
--
-- The data: synthetic, of Fashion-MNIST's shape - 16 batches of 128 images
-- of 784 pixels uniform in [0, 1) and labels uniform in 1..10, drawn with
-- ordo's RNG (seed 1), so no dataset is needed; step i trains on batch
-- (i - 1) mod 16.  Loading and shuffling are not measured: the bench is
-- about the step.
--
-- The peer: bench/train_peer.c, the same step in C with cblas_sgemm and
-- plain loops, one fused loop per Adam update, no engine.
--
-- Every measurement runs in its own process, BENCH_ROUNDS times, the rounds
-- interleaved (like bench/run.sh): a process trains CHECK steps (20; quick
-- 5) from the shared initial weights, printing the loss of the first and
-- the last, then WARMUP steps (20; quick 5), then BENCH_REPS timed runs of
-- BENCH_STEPS steps each.  A run's
-- clock starts after a wait_for_all and stops after the next one.  The
-- table shows the median images/s of all runs of all rounds, and the time
-- one 60,000-image epoch takes at that rate.
--
-- Configurations (the machine's cores are shared by all threads):
--   peer 1t      train_peer with OpenBLAS on 1 thread
--   peer 2t      train_peer with OpenBLAS on 2 threads
--   ordo naive   ORDO_ENGINE_TYPE=naive: every op runs inline in push, so
--                one thread does everything, like peer 1t
--   ordo 1w      ORDO_CPU_WORKER_NTHREADS=1 ORDO_BLAS_THREADS=1: one engine
--                worker runs the ops while the Lua thread pushes (a pusher
--                far ahead runs ready ops itself: ORDO_PUSH_INLINE_AFTER)
--   ordo default no ORDO_* setting: the engine's default workers (one per
--                core) and BLAS on one thread per call
-- The initial weights and the batches are written once (Module:save) to
-- BUILD/bench/train_params.bin and train_data.bin, and every process,
-- ordo's and the peer's, starts from them: so the losses must agree (to
-- 1e-4; in practice they agree to float32 rounding - the sgemm calls are
-- the same, and so is the order of the elementwise arithmetic).
--
-- Environment: BENCH_QUICK=1, BENCH_ROUNDS (default 3; quick 1),
-- BENCH_REPS (timed runs per process, default 5; quick 3), BENCH_STEPS
-- (steps per run, default 100; quick 20), BENCH_TIMEOUT (seconds per
-- process, default 300; quick 60), ORDO_BUILD (default <checkout>/build),
-- ORDO_LIB (the libordo.so the Lua package loads).
-- Exit status 1 when an ordo process failed or the losses disagree.
local function script_dir()
    local src = debug.getinfo(1, "S").source:sub(2)
    local dir = src:match("^(.*)/[^/]*$") or "."
    if dir:sub(1, 1) ~= "/" then dir = (os.getenv("PWD") or ".") .. "/" .. dir end
    return dir
end
local here = script_dir()
local root = here:match("^(.*)/bench$") or (here .. "/..")
local self_path = here .. "/train_bench.lua"
package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. package.path

local SIZES = {784, 512, 256, 10}
local BATCH, NBATCHES, SEED, LR = 128, 16, 1, 1e-3
local EPOCH_IMAGES = 60000

local fmt = string.format

-- ================================================================ child processes
-- luajit train_bench.lua --child prep PARAMS DATA
-- luajit train_bench.lua --child run PARAMS DATA CHECK WARMUP STEPS RUNS [profile]

local function child(argv)
    local ordo = require "ordo"
    local nn, optim = ordo.nn, ordo.optim
    local mode, params_path, data_path = argv[2], argv[3], argv[4]

    local function make_model()
        local layers = {}
        for i = 1, #SIZES - 1 do
            layers[#layers + 1] = nn.Linear(SIZES[i], SIZES[i + 1])
            if i < #SIZES - 1 then layers[#layers + 1] = nn.ReLU() end
        end
        return nn.Sequential(layers)
    end

    -- The batches as module buffers, so that Module:save/load write and read them.
    local Batches = nn.Module:extend("Batches")
    function Batches:init(x, y)
        self:register_buffer("x", x)
        self:register_buffer("y", y)
    end

    if mode == "prep" then
        ordo.manual_seed(SEED)
        make_model():save(params_path)
        local x = ordo.rand({NBATCHES, BATCH, SIZES[1]})
        local y = (ordo.rand({NBATCHES * BATCH}) * SIZES[#SIZES]):to("int64") + 1 -- 1..10
        Batches(x, y):save(data_path)
        return
    end
    assert(mode == "run", "train_bench: unknown child mode " .. tostring(mode))
    local check, warmup, steps, runs = tonumber(argv[5]), tonumber(argv[6]), tonumber(argv[7]), tonumber(argv[8])
    local profile = argv[9] == "profile"

    local model = make_model()
    model:load(params_path)
    local batches = Batches(ordo.empty({NBATCHES, BATCH, SIZES[1]}), ordo.empty({NBATCHES * BATCH}, {dtype = "int64"}))
    batches:load(data_path)
    local xs, ys = {}, {}
    for i = 1, NBATCHES do
        xs[i] = batches.x:select(1, i):contiguous()
        ys[i] = batches.y:narrow(1, (i - 1) * BATCH + 1, BATCH):contiguous()
    end
    local adam = optim.Adam(model:parameters(), {lr = LR})
    local criterion = nn.CrossEntropyLoss()

    -- fashion_mlp.lua's loop body
    local it = 0
    local function step()
        it = it + 1
        local b = (it - 1) % NBATCHES + 1
        adam:zero_grad()
        local loss = criterion(model(xs[b]), ys[b])
        loss:backward()
        adam:step()
        return loss
    end

    local first
    for s = 1, check do
        local loss = step()
        if s == 1 then first = loss end
        if s == check then
            io.write(fmt("L 1 %.9g\nL %d %.9g\n", first:item(), s, loss:item()))
            io.flush()
        end
    end
    for _ = 1, warmup do step() end
    ordo.engine.wait_for_all()
    if profile then ordo.profiler.start() end
    local now = ordo.progress.now
    local total = 0
    for _ = 1, runs do
        ordo.engine.wait_for_all()
        local t0 = now()
        for _ = 1, steps do step() end
        ordo.engine.wait_for_all()
        local t = now() - t0
        total = total + t
        io.write(fmt("R %.1f\n", steps * BATCH / t))
        io.flush()
    end
    if profile then
        ordo.profiler.stop()
        io.stderr:write(fmt("profile of %d steps (%.1f ms/step wall):\n%s\n", runs * steps, total / (runs * steps) * 1e3,
                            ordo.profiler.summary()))
    end
end

if arg and arg[1] == "--child" then
    child(arg)
    os.exit(0)
end

-- ================================================================ the driver
-- Plain Lua: it does not load ordo, so no engine threads of its own run
-- beside the measured processes.

local quick = (os.getenv("BENCH_QUICK") or "0") ~= "0"
local profile = arg and arg[1] == "--profile"
local function env_num(name, default)
    local v = tonumber(os.getenv(name) or "")
    return v and v > 0 and v or default
end
local ROUNDS = env_num("BENCH_ROUNDS", quick and 1 or 3)
local REPS = env_num("BENCH_REPS", quick and 3 or 5)
local STEPS = env_num("BENCH_STEPS", quick and 20 or 100)
local WARMUP = quick and 5 or 20
local CHECK = quick and 5 or 20
local TMO = env_num("BENCH_TIMEOUT", quick and 60 or 300)
local build = os.getenv("ORDO_BUILD") or (root .. "/build")
local B = build .. "/bench"
local peer = B .. "/train_peer"
local params_path, data_path = B .. "/train_params.bin", B .. "/train_data.bin"
local luajit = os.getenv("LUAJIT") or "luajit"

local function sh(cmd)
    local ok = os.execute(cmd)
    return ok == 0 or ok == true
end
local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local function clock()
    local f = io.popen("date +%s.%N")
    local t = tonumber(f:read("*l"))
    f:close()
    return t
end

-- Runs a command with a time limit; returns its stdout, the exit status and
-- the last line of its stderr.
local function run(envs, argv, errfile)
    local cmd = fmt("timeout -k 10 %d env %s %s 2>%s; echo \"#rc $?\"", TMO, envs, table.concat(argv, " "), q(errfile))
    local f = assert(io.popen(cmd))
    local out = f:read("*a")
    f:close()
    local rc = tonumber(out:match("#rc (%d+)%s*$")) or -1
    -- the error of a Lua child is its first line (a traceback follows), a
    -- C program's its last
    local last, lua_err = "", nil
    local ef = io.open(errfile)
    if ef then
        for l in ef:lines() do
            if l:match("%S") then last = l end
            if not lua_err and l:match("^luajit: ") then lua_err = l end
        end
        ef:close()
    end
    last = lua_err or last
    if rc == 124 or rc == 137 then last = fmt("timed out after %d s", TMO) end
    return out, rc, last
end

-- Busy CPU seconds of the whole machine (user+nice+system+irq+softirq+steal),
-- and those of this process and its waited-for children: their difference
-- says how much else ran meanwhile (as in bench/run.sh).
local HZ = tonumber(io.popen("getconf CLK_TCK"):read("*l")) or 100
local function machine_busy()
    local f = io.open("/proc/stat")
    local l = f and f:read("*l") or ""
    if f then f:close() end
    local v = {}
    for n in l:gmatch("%d+") do v[#v + 1] = tonumber(n) end
    if #v < 8 then return nil end
    return (v[1] + v[2] + v[3] + v[6] + v[7] + v[8]) / HZ
end
local function own_busy()
    local f = io.open("/proc/self/stat")
    local l = f and f:read("*a") or ""
    if f then f:close() end
    local v = {}
    for n in l:match("%) (.*)$"):gmatch("%S+") do v[#v + 1] = n end
    -- after "(comm) ": state is field 3, utime..cstime are fields 14..17
    return (tonumber(v[12]) + tonumber(v[13]) + tonumber(v[14]) + tonumber(v[15])) / HZ
end

local START = clock()
local BUSY0, OWN0 = machine_busy(), own_busy()
if not sh(fmt("make -s -C %s BUILD=%s %s >&2", q(here), q(build), q(peer))) then
    io.stderr:write("train_bench: cannot build the C peer " .. peer .. "\n")
    os.exit(1)
end

-- Threads: OPENBLAS_NUM_THREADS is set per process; ordo's own settings
-- are cleared for the default configuration so the user's shell cannot
-- change what "default" means.
local CLEAN = "-u OPENBLAS_NUM_THREADS -u ORDO_BLAS_THREADS -u ORDO_CPU_WORKER_NTHREADS -u ORDO_ENGINE_TYPE " ..
              "-u ORDO_MAX_INFLIGHT -u ORDO_SPIN_US -u ORDO_PUSH_INLINE_AFTER ORDO_PROFILER_AUTOSTART=0"
local ORDO_RUN = {luajit, q(self_path), "--child", "run", q(params_path), q(data_path), CHECK, WARMUP, STEPS, REPS}
local CONFIGS = {
    {label = "peer-1t", peer = true, env = CLEAN .. " OPENBLAS_NUM_THREADS=1",
     argv = {q(peer), q(params_path), q(data_path), CHECK, WARMUP, STEPS, REPS, 1}},
    {label = "peer-2t", peer = true, env = CLEAN .. " OPENBLAS_NUM_THREADS=2",
     argv = {q(peer), q(params_path), q(data_path), CHECK, WARMUP, STEPS, REPS, 2}},
    {label = "ordo-naive", env = CLEAN .. " ORDO_ENGINE_TYPE=naive ORDO_BLAS_THREADS=1", argv = ORDO_RUN},
    {label = "ordo-1w", env = CLEAN .. " ORDO_CPU_WORKER_NTHREADS=1 ORDO_BLAS_THREADS=1", argv = ORDO_RUN},
    {label = "ordo-default", env = CLEAN, argv = ORDO_RUN},
}

io.stderr:write(fmt("train_bench: MLP training, %d round(s) of one process per configuration%s\n", ROUNDS,
                    quick and " (BENCH_QUICK)" or ""))
do
    local _, rc, last = run(CLEAN, {luajit, q(self_path), "--child", "prep", q(params_path), q(data_path)},
                            B .. "/train_prep.stderr")
    if rc ~= 0 then
        io.stderr:write("train_bench: writing the initial weights and batches failed: " .. last .. "\n")
        os.exit(1)
    end
end

local samples, losses, failed = {}, {}, {}
for round = 1, ROUNDS do
    for _, c in ipairs(CONFIGS) do
        if not failed[c.label] then
            local t0 = clock()
            local out, rc, last = run(c.env, c.argv, B .. "/train_" .. c.label .. ".stderr")
            for v in out:gmatch("R ([%d.]+)") do
                samples[c.label] = samples[c.label] or {}
                table.insert(samples[c.label], tonumber(v))
            end
            for s, v in out:gmatch("L (%d+) ([-%d.eE+naif]+)") do
                losses[c.label] = losses[c.label] or {}
                losses[c.label][tonumber(s)] = tonumber(v)
            end
            if rc ~= 0 then failed[c.label] = fmt("exit status %d: %s", rc, last) end
            io.stderr:write(fmt("train_bench: round %d/%d %-14s %6.1f s\n", round, ROUNDS, c.label, clock() - t0))
        end
    end
end

-- ---------------------------------------------------------------- the table

local function stats(label)
    local v = samples[label]
    if not v or #v == 0 then return nil end
    table.sort(v)
    local n = #v
    local med = n % 2 == 1 and v[(n + 1) / 2] or (v[n / 2] + v[n / 2 + 1]) / 2
    return {median = med, min = v[1], max = v[n], n = n}
end
local S = {}
for _, c in ipairs(CONFIGS) do S[c.label] = stats(c.label) end

local function ips(s) return s and fmt("%.0f", s.median) or "n/a" end
local function epoch(s) return s and fmt("%.2f", EPOCH_IMAGES / s.median) or "n/a" end
local function ratio(o, p) return (o and p) and fmt("%.2fx", o.median / p.median) or "n/a" end

local ROWS = {
    {"ordo naive (1 thread) vs peer 1 thread", "ordo-naive", "peer-1t"},
    {"ordo 1 worker vs peer 1 thread", "ordo-1w", "peer-1t"},
    {"ordo default vs peer 1 thread", "ordo-default", "peer-1t"},
    {"ordo default vs peer 2 threads", "ordo-default", "peer-2t"},
}
local t = {{"configuration", "ordo images/s", "peer images/s", "ordo/peer", "ordo s/epoch", "peer s/epoch"}}
for _, r in ipairs(ROWS) do
    local o, p = S[r[2]], S[r[3]]
    t[#t + 1] = {r[1], ips(o), ips(p), ratio(o, p), epoch(o), epoch(p)}
end
local width = {}
for _, row in ipairs(t) do
    for c, s in ipairs(row) do width[c] = math.max(width[c] or 0, #s) end
end
local lines = {}
local function out(s) lines[#lines + 1] = s or "" end

local cpu = io.popen("grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//'"):read("*l") or "?"
local nproc = io.popen("nproc"):read("*l") or "?"
local date = io.popen("date -u '+%Y-%m-%d %H:%M UTC'"):read("*l") or "?"
out("## Training benchmark: fashion_mlp's MLP")
out()
local elapsed = clock() - START
local busy1, own1 = machine_busy(), own_busy()
local other = "?"
if BUSY0 and busy1 and tonumber(nproc) then
    other = fmt("%.0f", math.max(0, 100 * ((busy1 - BUSY0) - (own1 - OWN0)) / (elapsed * tonumber(nproc))))
end
out(fmt("%s; %s cores: %s. The run took %.0f s; other processes used %s%% of the cores meanwhile.", date, nproc, cpu,
        elapsed, other))
out()
out(fmt("MLP %s (ReLU, no dropout), softmax cross-entropy, Adam lr %g, float32, batch %d, synthetic data of " ..
        "Fashion-MNIST's shape. Each cell: the median of %d runs of %d steps (%d processes x %d runs, interleaved " ..
        "with the other configurations). s/epoch = 60,000 images at that rate.", table.concat(SIZES, "-"), LR, BATCH,
        ROUNDS * REPS, STEPS, ROUNDS, REPS))
out()
for i, row in ipairs(t) do
    local cells = {}
    for c, s in ipairs(row) do cells[c] = c == 1 and fmt("%-" .. width[c] .. "s", s) or fmt("%" .. width[c] .. "s", s) end
    out("| " .. table.concat(cells, " | ") .. " |")
    if i == 1 then
        local d = {}
        for c = 1, #row do d[c] = c == 1 and string.rep("-", width[c]) or string.rep("-", width[c] - 1) .. ":" end
        out("| " .. table.concat(d, " | ") .. " |")
    end
end
out()
out("ordo/peer = ordo images/s / peer images/s (< 1: ordo is slower). ordo naive: ORDO_ENGINE_TYPE=naive, every op " ..
    "runs inline in the Lua thread that pushes it (one thread, like the 1-thread peer); ordo 1 worker: " ..
    "ORDO_CPU_WORKER_NTHREADS=1, one engine worker runs the ops while the Lua thread pushes them (and runs some " ..
    "itself when it is far ahead, see ORDO_PUSH_INLINE_AFTER); ordo default: no ORDO_* setting (a worker per core, " ..
    "BLAS on one thread per call). Peer = bench/train_peer.c: the same step with cblas_sgemm and plain loops " ..
    "(one fused loop per Adam update), OpenBLAS on 1 or 2 threads, no engine.")
out()
local spread = {}
for _, c in ipairs(CONFIGS) do
    local s = S[c.label]
    if s then spread[#spread + 1] = fmt("%s %.0f..%.0f", c.label, s.min, s.max) end
end
out("Range of runs (images/s): " .. table.concat(spread, "; ") .. ".")

-- Same weights, same batches: the losses of ordo and the peer must agree.
local bad = false
do
    local ref = losses["peer-1t"]
    local steps_seen, cols = {}, {}
    for _, c in ipairs(CONFIGS) do
        if losses[c.label] then
            cols[#cols + 1] = c.label
            for k in pairs(losses[c.label]) do steps_seen[k] = true end
        end
    end
    local ks = {}
    for k in pairs(steps_seen) do ks[#ks + 1] = k end
    table.sort(ks)
    local lt = {{"loss after step"}}
    for _, l in ipairs(cols) do lt[1][#lt[1] + 1] = l end
    local maxd = 0
    for _, k in ipairs(ks) do
        local row = {tostring(k)}
        for _, l in ipairs(cols) do
            local v = losses[l][k]
            row[#row + 1] = v and fmt("%.7f", v) or "n/a"
            local d = v and ref and ref[k] and math.abs(v - ref[k])
            if d then
                maxd = math.max(maxd, d)
                if not (d <= 1e-4 * math.max(1, math.abs(ref[k]))) then bad = true end
            end
        end
        lt[#lt + 1] = row
    end
    out()
    out(fmt("Loss check: every process trains %d steps from the same initial weights on the same batches before " ..
            "it is timed; the largest difference from peer-1t is %.1e (tolerance 1e-4).", CHECK, maxd))
    out()
    local w = {}
    for _, row in ipairs(lt) do for c, v in ipairs(row) do w[c] = math.max(w[c] or 0, #v) end end
    for i, row in ipairs(lt) do
        local cells = {}
        for c, v in ipairs(row) do cells[c] = fmt(c == 1 and "%-" .. w[c] .. "s" or "%" .. w[c] .. "s", v) end
        out("| " .. table.concat(cells, " | ") .. " |")
        if i == 1 then
            local d = {}
            for c = 1, #row do d[c] = c == 1 and string.rep("-", w[c]) or string.rep("-", w[c] - 1) .. ":" end
            out("| " .. table.concat(d, " | ") .. " |")
        end
    end
    if bad then
        out()
        out("**The losses disagree: ordo and the peer do not compute the same thing.**")
    end
end

local na = {}
for _, c in ipairs(CONFIGS) do
    if failed[c.label] then na[#na + 1] = "- " .. c.label .. ": " .. failed[c.label] end
end
if #na > 0 then
    out()
    out("Failed:")
    for _, l in ipairs(na) do out(l) end
end

local md = table.concat(lines, "\n") .. "\n"
io.write(md)
io.stdout:flush()
local f = io.open(B .. "/train.md", "w")
if f then
    f:write(md)
    f:close()
    print(fmt("\n(also written to %s/train.md)", B))
end
io.stdout:flush()

if profile then
    for _, c in ipairs(CONFIGS) do
        if not c.peer then
            local argv = {luajit, q(self_path), "--child", "run", q(params_path), q(data_path), 1, WARMUP, STEPS, REPS,
                          "profile"}
            local errf = B .. "/train_" .. c.label .. ".profile"
            run(c.env, argv, errf)
            local pf = io.open(errf)
            print(fmt("\n### ordo profile: %s\n", c.label))
            print(pf and pf:read("*a") or "(no profile)")
            if pf then pf:close() end
        end
    end
end

local ordo_failed = false
for _, c in ipairs(CONFIGS) do
    if not c.peer and (failed[c.label] or not S[c.label]) then ordo_failed = true end
end
if ordo_failed then io.stderr:write("train_bench: ordo failed in at least one configuration (see above)\n") end
if bad then io.stderr:write("train_bench: the losses of ordo and the peer disagree\n") end
os.exit((ordo_failed or bad) and 1 or 0)
