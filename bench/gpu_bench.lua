-- bench/gpu_bench.lua - ordo's GPU tensors beside plain CUDA, in one run.
--
--   build/ordo bench/gpu_bench.lua            (after `make`; `make bench` runs it too)
--   BENCH_QUICK=1 build/ordo bench/gpu_bench.lua   small sizes, a smoke run
--
-- Without a CUDA device it prints "GPU benchmarks skipped: no CUDA device
-- available" and exits 0.  Otherwise it runs the plain-CUDA peer
-- (bench/gpu_peer.cu, built by bench/Makefile; this script asks make for it
-- when it is missing), then the same work through ordo on gpu(0), and
-- prints one table (also written to <build>/bench/gpu.md):
--
--  1. matmul 4096x4096 float32 (a:matmul(b), pushed and waited for) beside
--     cublasSgemm called directly: one sgemm timed with events, one sgemm +
--     stream sync on the host clock (what ordo's push + wait is), and 10
--     back to back.  Target: >= 95% of cuBLAS.
--  2. c:add_(b) on 256M floats (c = c + b in place, 3 x 1 GiB moved) as
--     bandwidth, beside the device's cudaMemcpy device-to-device bandwidth
--     (target: >= 80% of it) and the peer's own c[i] += b[i] kernel.
--  3. ops per second of a chain of 100,000 c:add_(a) on 16-float GPU
--     tensors pushed from Lua (one wait at the end) beside a plain CUDA loop
--     launching the same kind of kernel 100,000 times on one stream.
--     Target: within 1.5x of the plain loop (>= 0.67x).
--  4. copy/compute overlap: to(gpu) copies of a large CPU tensor pushed
--     interleaved with independent GPU matmuls, timed alone and together
--     (the time saved is overlap on the device), then once more with the
--     profiler on: the Chrome trace goes to <build>/gpu_overlap_trace.json
--     and the overlap of copy and matmul ops is read back from it
--     (ordo.trace): of their launches (the workers' tracks) and of their
--     runs on the device (the streams' tracks, timed by events).
--
-- Every figure is the median of several timed runs after warm-up runs.
-- Timings end with a wait on the tensors written (t:wait()), not with
-- ordo.engine.wait_for_all(): under the ordo launcher wait_for_all polls
-- the engine with sleeps that grow to 10 ms (lua/ordo/util.lua,
-- wait_ready), which would round a 3 ms matmul up by milliseconds; a
-- tensor's wait wakes when the op is done.  wait_for_all still drains the
-- engine before each timed run.
--
-- Environment: BENCH_QUICK=1 (small sizes), ORDO_BUILD (default
-- <checkout>/build: the peer is <build>/bench/gpu_peer).  With
-- ORDO_SIMULATED_GPUS=n the ordo side runs on the simulated GPU (host
-- threads; the sizes are the quick ones and the figures mean nothing): a
-- test of this script on a machine without a GPU.
local function script_dir()
    local src = debug.getinfo(1, "S").source:sub(2)
    local dir = src:match("^(.*)/[^/]*$") or "."
    if dir:sub(1, 1) ~= "/" then dir = (os.getenv("PWD") or ".") .. "/" .. dir end
    return dir
end
local root = script_dir():match("^(.*)/bench$") or (script_dir() .. "/..")
package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. package.path

local ordo = require "ordo"
local trace = require "ordo.trace"

local now = ordo.progress.now
local fmt = string.format

local SKIP_LINE = "GPU benchmarks skipped: no CUDA device available"

local simulated = tonumber(os.getenv("ORDO_SIMULATED_GPUS") or "0") or 0
simulated = simulated > 0
local quick = (os.getenv("BENCH_QUICK") or "0") ~= "0" or simulated
local build = os.getenv("ORDO_BUILD") or (root .. "/build")
local peer_bin = build .. "/bench/gpu_peer"
local trace_path = build .. "/gpu_overlap_trace.json"

-- sizes: the issue's, or small ones for a smoke run
local S = quick and {
    matmul_n = 512, add_n = 4 * 2 ^ 20, chain_n = 10000, reps = 5, chain_reps = 3,
    copy_n = 4 * 2 ^ 20, overlap_rounds = 3, overlap_reps = 1,
} or {
    matmul_n = 4096, add_n = 256 * 2 ^ 20, chain_n = 100000, reps = 20, chain_reps = 5,
    copy_n = 64 * 2 ^ 20, overlap_rounds = 8, overlap_reps = 3,
}
-- runs of 10 matmuls back to back (the peer computes the same number)
S.x10_runs = math.max(3, math.floor((S.reps + 3) / 4))

-- ---------------------------------------------------------------- helpers

local function median(xs)
    local v = {}
    for i = 1, #xs do v[i] = xs[i] end
    table.sort(v)
    local n = #v
    if n % 2 == 1 then return v[(n + 1) / 2] end
    return (v[n / 2] + v[n / 2 + 1]) / 2
end

-- median over runs of fn(), each run after draining the engine
local function median_of(runs, fn)
    local xs = {}
    for i = 1, runs do
        ordo.engine.wait_for_all()
        xs[i] = fn()
    end
    return median(xs)
end

-- Waits for every tensor of ts, the last pushed first.  Under the launcher
-- a wait is a marker op run by the worker that finished the tensor's op,
-- and that worker then blocks until the GPU is done with it: waiting for
-- the first copy first would hold the copy worker, and every copy behind
-- it, until that copy is over.  Waited for last, nothing queues behind it.
local function wait_list(ts)
    for i = #ts, 1, -1 do ts[i]:wait() end
end

local function sh_ok(cmd)
    local ok = os.execute(cmd)
    return ok == 0 or ok == true
end

local function file_exists(path)
    local f = io.open(path, "rb")
    if f then f:close() end
    return f ~= nil
end

-- ---------------------------------------------------------------- the peer

-- Runs gpu_peer with this run's sizes: a table key -> number (and .device,
-- .device_info), or nil and why.
local function run_peer()
    if not file_exists(peer_bin) then
        -- bench/Makefile builds it when nvcc is found
        sh_ok(("make -s -C %s/bench BUILD=%s %s >&2"):format(root, build, peer_bin))
        if not file_exists(peer_bin) then return nil, "not built (no nvcc?): " .. peer_bin end
    end
    local cmd = ("%s %d %d %d %d %d"):format(peer_bin, S.matmul_n, S.add_n, S.chain_n, S.reps, S.chain_reps)
    local f = io.popen(cmd)
    if not f then return nil, "cannot run " .. cmd end
    local out = f:read("*a")
    f:close()
    if out:find(SKIP_LINE, 1, true) then return nil, "the peer sees no CUDA device" end
    local p = {}
    for line in out:gmatch("[^\n]+") do
        local k, v = line:match("^peer (%S+) (.*)$")
        if k then p[k] = tonumber(v) or v end
    end
    if not p.device then return nil, "no output from " .. cmd .. " (see its messages above)" end
    return p
end

-- ---------------------------------------------------------------- table

local rows = {}
-- ratio: ordo/peer as performance (> 1: ordo faster); target: the least
-- ratio the issue asks for, or nil
local function row(name, ordo_s, peer_name, peer_s, ratio, target)
    local met = ""
    if ratio and target then met = ratio >= target and "yes" or "no" end
    rows[#rows + 1] = {name, ordo_s, peer_name .. (peer_s and (": " .. peer_s) or ": n/a"),
                       ratio and fmt("%.2fx", ratio) or "n/a",
                       target and fmt(">= %.2fx", target) or "-", met}
end

local function print_table(out)
    local hdr = {"measurement", "ordo", "peer", "ordo/peer", "target", "met"}
    local width = {}
    for c = 1, #hdr do width[c] = #hdr[c] end
    for _, r in ipairs(rows) do
        for c = 1, #hdr do width[c] = math.max(width[c], #r[c]) end
    end
    local function line(cells)
        local parts = {}
        for c = 1, #hdr do
            local left = c == 1 or c == 3
            parts[c] = fmt("%" .. (left and "-" or "") .. width[c] .. "s", cells[c])
        end
        out("| " .. table.concat(parts, " | ") .. " |\n")
    end
    line(hdr)
    local dashes = {}
    for c = 1, #hdr do
        dashes[c] = (c == 1 or c == 3) and string.rep("-", width[c]) or string.rep("-", width[c] - 1) .. ":"
    end
    out("| " .. table.concat(dashes, " | ") .. " |\n")
    for _, r in ipairs(rows) do line(r) end
end

-- ---------------------------------------------------------------- measurements

-- 1. matmul: single (push + wait) and 10 back to back, ms per matmul
local function bench_matmul(g)
    local n = S.matmul_n
    local a = ordo.rand({n, n}, {device = g})
    local b = ordo.rand({n, n}, {device = g})
    -- warm-up, alone and several at once: every GPU worker creates its
    -- cuBLAS handle on its first matmul
    for _ = 1, 3 do a:matmul(b):wait() end
    for _ = 1, 2 do
        local cs = {}
        for i = 1, 4 * ordo.engine.config().gpu_workers do cs[i] = a:matmul(b) end
        wait_list(cs)
    end
    local single = median_of(S.reps, function()
        local t0 = now()
        local c = a:matmul(b)
        c:wait()
        return (now() - t0) * 1e3
    end)
    local x10 = median_of(S.x10_runs, function()
        local cs = {}
        local t0 = now()
        for i = 1, 10 do cs[i] = a:matmul(b) end
        wait_list(cs)
        return (now() - t0) * 1e3 / 10
    end)
    return single, x10
end

-- 2. c:add_(b) over add_n floats, GB/s (3 x the bytes: c and b read, c written)
local function bench_add(g)
    local n = S.add_n
    local b = ordo.rand({n}, {device = g})
    local c = ordo.rand({n}, {device = g})
    for _ = 1, 3 do c:add_(b):wait() end
    local ms = median_of(S.reps, function()
        local t0 = now()
        c:add_(b)
        c:wait()
        return (now() - t0) * 1e3
    end)
    return 3 * n * 4 / (ms / 1e3) / 1e9
end

-- 3. a chain of chain_n c:add_(a) on 16 floats, ops/s end to end
local function bench_chain(g)
    local n = S.chain_n
    local a = ordo.ones({16}, {device = g})
    local c = ordo.zeros({16}, {device = g})
    local warm = 10000
    for _ = 1, warm do c:add_(a) end
    c:wait()
    local ops = median_of(S.chain_reps, function()
        local t0 = now()
        for _ = 1, n do c:add_(a) end
        c:wait()
        return n / (now() - t0)
    end)
    -- every op ran: each added 1 (exact in float32 below 2^24)
    local want = warm + S.chain_reps * n
    local got = c:cpu():totable()[1]
    if got ~= want then error(fmt("chain: c[1] is %s after %d adds of 1", tostring(got), want)) end
    return ops
end

-- 4. copies to the GPU interleaved with independent matmuls
local function bench_overlap(g)
    local x = ordo.rand({S.copy_n})                  -- on the host (pageable memory)
    local n = S.matmul_n
    local a = ordo.rand({n, n}, {device = g})
    local b = ordo.rand({n, n}, {device = g})
    x:to(g):wait()
    a:matmul(b):wait()
    local t_copy1 = median_of(3, function()
        local t0 = now()
        x:to(g):wait()
        return now() - t0
    end)
    local t_mm1 = median_of(3, function()
        local t0 = now()
        a:matmul(b):wait()
        return now() - t0
    end)
    -- matmuls per copy: about as long on the GPU as the copy, so that each
    -- can hide the other (capped: their outputs are all held until the end)
    local m = math.max(1, math.min(16, math.floor(t_copy1 / t_mm1 + 0.5)))
    local rounds = S.overlap_rounds

    local function run(copies, matmuls)
        local outs = {}
        local t0 = now()
        for _ = 1, rounds do
            if copies then outs[#outs + 1] = x:to(g) end
            if matmuls then
                for _ = 1, m do outs[#outs + 1] = a:matmul(b) end
            end
        end
        wait_list(outs)
        return (now() - t0) * 1e3
    end
    run(true, true) -- warm-up: the allocator's blocks for every output (a new block may sync the device)
    local t_c = median_of(S.overlap_reps, function() return run(true, false) end)
    local t_m = median_of(S.overlap_reps, function() return run(false, true) end)
    local t_b = median_of(S.overlap_reps, function() return run(true, true) end)

    -- once more with the profiler on
    ordo.engine.wait_for_all()
    ordo.profiler.clear()
    ordo.profiler.start()
    local t_traced = run(true, true)
    ordo.engine.wait_for_all()
    ordo.profiler.stop()
    ordo.profiler.dump(trace_path)
    local ops = trace.load(trace_path)
    -- a GPU op is on its worker's track (the launch) and on its stream's
    -- track (its run on the device, timed by events: "gpu(0) stream of ...")
    local function on_stream(op) return op.worker:find(" stream of ", 1, true) ~= nil end
    local dev_ops = trace.select(ops, on_stream)
    ops = trace.select(ops, function(op) return not on_stream(op) end)
    local cps = trace.select(ops, "copy_to_gpu")
    local mms = trace.select(ops, "matmul")
    local dcps, dmms = trace.select(dev_ops, "copy_to_gpu"), trace.select(dev_ops, "matmul")
    -- matmuls whose launch began while a copy was running
    local during = 0
    for _, op in ipairs(mms) do
        for _, cp in ipairs(cps) do
            if op.start >= cp.start and op.start < cp.stop then
                during = during + 1
                break
            end
        end
    end
    local cs, ms = trace.stats(cps), trace.stats(mms)
    local dcs, dms = trace.stats(dcps), trace.stats(dmms)
    return {
        m = m, rounds = rounds, mb = S.copy_n * 4 / 2 ^ 20, n = n,
        t_c = t_c, t_m = t_m, t_b = t_b, t_traced = t_traced,
        ncopy = #cps, nmm = #mms, copy_busy = cs.busy / 1e3, mm_busy = ms.busy / 1e3,
        trace_overlap = trace.overlap(cps, mms) / 1e3, during = during,
        dev_ncopy = #dcps, dev_nmm = #dmms, dev_copy_busy = dcs.busy / 1e3, dev_mm_busy = dms.busy / 1e3,
        dev_overlap = trace.overlap(dcps, dmms) / 1e3,
    }
end

-- ---------------------------------------------------------------- main

local function main()
    if not ordo.cuda.is_available() then
        print(SKIP_LINE)
        return
    end
    local g = ordo.gpu(0)
    local cfg = ordo.engine.config()
    io.stderr:write("gpu bench: running the plain-CUDA peer...\n")
    local p, why = run_peer()
    if not p then io.stderr:write("gpu bench: peer n/a: " .. why .. "\n") end
    local function pv(key) return p and tonumber(p[key]) end

    io.stderr:write("gpu bench: ordo matmul...\n")
    local mm1, mm10 = bench_matmul(g)
    collectgarbage()
    io.stderr:write("gpu bench: ordo add...\n")
    local add_gbs = bench_add(g)
    collectgarbage()
    ordo.cuda.empty_cache(g)
    io.stderr:write("gpu bench: ordo chain of small ops...\n")
    local chain = bench_chain(g)
    io.stderr:write("gpu bench: copy/compute overlap...\n")
    local ov = bench_overlap(g)
    collectgarbage()

    local n = S.matmul_n
    local mmname = fmt("matmul %dx%d float32", n, n)
    local function ms(v) return v and fmt("%.3f ms", v) end
    local function ratio(a, b) return (a and b and b > 0) and a / b or nil end
    local pk = "matmul" .. n
    row(mmname .. ", push + wait", ms(mm1), "cublasSgemm, events", ms(pv(pk .. "_ms")),
        ratio(pv(pk .. "_ms"), mm1), 0.95)
    row(mmname .. ", push + wait", ms(mm1), "cublasSgemm + stream sync, host clock", ms(pv(pk .. "_host_ms")),
        ratio(pv(pk .. "_host_ms"), mm1), 0.95)
    row(mmname .. ", 10 back to back (per matmul)", ms(mm10), "10 cublasSgemm, events (per sgemm)",
        ms(pv(pk .. "_x10_ms")), ratio(pv(pk .. "_x10_ms"), mm10), 0.95)
    local addname = fmt("c:add_(b), %dM floats (3 x %d MiB moved)", S.add_n / 2 ^ 20, S.add_n * 4 / 2 ^ 20)
    local function gbs(v) return v and fmt("%.0f GB/s", v) end
    row(addname, gbs(add_gbs), "cudaMemcpy device to device (2 x moved)", gbs(pv("copy_gbs")),
        ratio(add_gbs, pv("copy_gbs")), 0.80)
    row(addname, gbs(add_gbs), "plain c[i] += b[i] kernel", gbs(pv("add_gbs")), ratio(add_gbs, pv("add_gbs")), nil)
    local function opss(v) return v and fmt("%.0f ops/s", v) end
    row(fmt("chain of %d c:add_(a), 16 floats, from Lua", S.chain_n), opss(chain),
        fmt("%d launches on one stream", S.chain_n), opss(pv("chain_ops_per_s")),
        ratio(chain, pv("chain_ops_per_s")), 1 / 1.5)

    local buf = {}
    local function out(s)
        io.write(s)
        buf[#buf + 1] = s
    end
    -- the revision measured, "+dirty" when the library or package differs from it
    local function git(args)
        local f = io.popen("git -C " .. root .. " " .. args .. " 2>/dev/null")
        if not f then return nil end
        local r = f:read("*a")
        f:close()
        return r
    end
    local revs = (git("rev-parse --short HEAD") or ""):match("%S+")
    if revs and (git("status --porcelain -- src kernels lua") or "") ~= "" then revs = revs .. "+dirty" end
    out("\n## GPU benchmark\n\n")
    out(fmt("%s; device: %s (%s); ordo %s; engine %s (GPU workers: %d, copy workers: %d)%s.\n",
            os.date("!%Y-%m-%d %H:%M UTC"), p and p.device or "n/a (the peer did not run)",
            p and p.device_info or (simulated and "simulated GPU" or "?"), revs or "uncommitted",
            cfg.kind, cfg.gpu_workers, cfg.gpu_copy_workers, quick and " (quick sizes)" or ""))
    if simulated then
        out("ORDO_SIMULATED_GPUS is set: ordo ran on the simulated GPU (host threads); its figures mean nothing.\n")
    end
    out(fmt("Each figure: the median of %d runs (the chain: %d runs; 10 back to back: %d), after warm-up.\n\n",
            S.reps, S.chain_reps, S.x10_runs))
    print_table(out)
    out("\nordo/peer is performance (> 1: ordo faster): peer time / ordo time, or ordo rate / peer rate.\n")
    if not p then out("Peer: n/a (" .. why .. ").\n") end
    out(fmt("\nCopy/compute overlap: %d rounds of one to(gpu) copy of a %d MiB CPU tensor and %d independent\n" ..
            "%dx%d matmuls (about as long as one copy), pushed interleaved; medians of %d runs.\n",
            ov.rounds, ov.mb, ov.m, ov.n, ov.n, S.overlap_reps))
    local saved = ov.t_c + ov.t_m - ov.t_b
    out(fmt("  copies alone %.1f ms, matmuls alone %.1f ms, together %.1f ms: %.1f ms hidden, %.0f%% of the shorter\n",
            ov.t_c, ov.t_m, ov.t_b, saved, 100 * saved / math.min(ov.t_c, ov.t_m)))
    out(fmt("  trace (%s), one more run of %.1f ms: %d copy_to_gpu ops (%.1f ms), %d matmul ops (%.1f ms);\n",
            trace_path, ov.t_traced, ov.ncopy, ov.copy_busy, ov.nmm, ov.mm_busy))
    out(fmt("  their intervals overlap for %.2f ms; %d of %d matmuls were launched while a copy was running.\n",
            ov.trace_overlap, ov.during, ov.nmm))
    out(fmt("  on the device (GPU-side times from events on the streams): %d copies (%.1f ms), %d matmuls\n" ..
            "  (%.1f ms), overlapping for %.2f ms.\n",
            ov.dev_ncopy, ov.dev_copy_busy, ov.dev_nmm, ov.dev_mm_busy, ov.dev_overlap))
    out("  (The first figures are the host side: launching each op and recording its events; a copy from\n" ..
        "  pageable memory holds its worker for about the transfer. The device side is each op's run on\n" ..
        "  its stream.)\n")
    local f = io.open(build .. "/bench/gpu.md", "w")
    if f then
        f:write(table.concat(buf))
        f:close()
        print("\n(also written to " .. build .. "/bench/gpu.md)")
    end
end

main()
