-- bench/tensor_bench.lua - ordo's tensors beside their peers, in one run.
--
--   luajit bench/tensor_bench.lua            (after `make`; builds its C peer itself)
--   BENCH_QUICK=1 luajit bench/tensor_bench.lua   smaller sizes, for a smoke run
--
--  1. ns per op of 1,000,000 `c:add_(a)` on 16-element float32 tensors,
--     end to end (pushed, run, then one wait): on the default engine, where
--     such an op runs at its push when nothing else uses its tensors
--     (src/run_now.c), beside the add kernel called directly in C (no
--     engine: the floor) and the same pushes through the C tensor API; then
--     handed to a worker (an engine with run_now_max_elements = -1), with
--     the Lua thread's default bulking and with bulking off, beside the same
--     from C; and r = a + b, a new tensor each time (dropped: the GC frees
--     it), beside the same through the C tensor API and the in-place loop.
--  2. matmul 1024x1024 float32 (pushed, waited for) beside cblas_sgemm on
--     one thread (what the matmul kernel asks BLAS for: parallelism comes
--     from the engine) and on OpenBLAS's own threads; in a loop's steady
--     state, and cold (outputs in freshly mapped pages, on both sides).
--  3. elementwise add of 16M floats (c:add_(a): 3 x 64 MB moved) as memory
--     bandwidth, beside a plain C copy loop (2 x 64 MB moved) and a plain C
--     c[i] += a[i] loop (both on one thread); on the default engine, whose
--     idle worker takes half of the op's chunks, and on one worker.
--  4. on an engine with 2 CPU workers: two independent matmuls pushed
--     together beside the sum of their times alone (one op a worker), and
--     one large x:sigmoid_() split between the 2 workers beside 1 worker.
--
-- Environment: ORDO_BUILD (default <checkout>/build: libordo.a for the C
-- peer; the Lua package loads libordo.so, see ORDO_LIB), CC (default cc).
local function script_dir()
    local src = debug.getinfo(1, "S").source:sub(2)
    local dir = src:match("^(.*)/[^/]*$") or "."
    if dir:sub(1, 1) ~= "/" then dir = (os.getenv("PWD") or ".") .. "/" .. dir end
    return dir
end
local root = script_dir() .. "/.."
package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. package.path

local ordo = require "ordo"
local ffi = require "ffi"

ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } tb_timespec;
int clock_gettime(int clk, tb_timespec *ts);
]]
local ts = ffi.new("tb_timespec")
local function now()
    ffi.C.clock_gettime(1, ts)
    return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local quick = (os.getenv("BENCH_QUICK") or "0") ~= "0"
local build = os.getenv("ORDO_BUILD") or (root .. "/build")
local peer = build .. "/bench/tensor_bench_c"

-- ---------------------------------------------------------------- the C peer

local function sh(cmd)
    local ok = os.execute(cmd)
    return ok == 0 or ok == true
end

-- Built by bench/Makefile (it knows which libraries libordo.a needs).
local function build_peer()
    local cmd = ("make -s -C %s/bench BUILD=%s %s >&2"):format(root, build, peer)
    if not sh(cmd) then error("cannot build the C peer: " .. cmd) end
end

local function run_peer(...)
    local args = table.concat({...}, " ")
    -- ordo sized OpenBLAS's pool in this process's environment; the peer
    -- must get OpenBLAS's own default.
    local env = ""
    if args:match("^env ") then -- a setting for this run: env NAME=value mode ...
        env, args = args:match("^env (%S+) (.*)$")
    end
    local f = assert(io.popen("env -u OPENBLAS_NUM_THREADS " .. env .. " " .. peer .. " " .. args))
    local out = f:read("*a")
    f:close()
    return out
end

local function peer_number(out, pattern)
    local v = out:match(pattern)
    if not v then error("unexpected output from the C peer: " .. out) end
    return tonumber(v)
end

-- ---------------------------------------------------------------- table

local rows = {}
local function row(name, ordo_v, peer_name, peer_v, unit, higher_better)
    local ratio
    if higher_better then ratio = ordo_v / peer_v else ratio = peer_v / ordo_v end
    rows[#rows + 1] = {name, ordo_v, peer_name, peer_v, unit, ratio}
    io.write(("%-44s %10.2f %-6s | %-34s %10.2f %-6s | %.2fx\n"):format(
        name, ordo_v, unit, peer_name, peer_v, unit, ratio))
    io.flush()
end

local function best_of(n, fn)
    local best = math.huge
    for _ = 1, n do
        local t = fn()
        if t < best then best = t end
    end
    return best
end

-- The best of n runs of fn (which waits for its work), in ms.
local function best_ms(n, fn)
    return best_of(n, function()
        local t0 = now()
        fn()
        return (now() - t0) * 1e3
    end)
end

build_peer()
local cfg = ordo.engine.config()
print(("ordo tensor bench: engine %s, %d cpu workers%s"):format(cfg.kind, cfg.cpu_workers,
      quick and " (BENCH_QUICK)" or ""))
print(("%-44s %17s | %-34s %17s | %s"):format("benchmark", "ordo", "peer", "", "speed ordo/peer"))

-- 1. c:add_(a) on 16 elements: on the default engine, where an op whose
-- tensors nothing else uses runs at its push (run_now_max_elements), the
-- same op on the same tensors (its checked arguments remembered) and over
-- 64 pairs in turn (checked on every push); then
-- on an engine that hands every op to a worker, with this thread's default
-- bulking (16 ops a bulk, ORDO_BULK_SIZE) and with bulking off
do
    local N = quick and 100000 or 1000000
    local bulk = ordo.engine.bulk_size()
    local workers_only = ordo.engine.new({run_now_max_elements = -1})
    local function time_loop(size, eng)
        local a, c = ordo.ones({16}, {engine = eng}), ordo.zeros({16}, {engine = eng})
        local old = ordo.engine.set_bulk_size(size)
        for _ = 1, 10000 do c:add_(a) end
        c:wait()
        local ns = best_of(3, function()
            local t0 = now()
            for _ = 1, N do c:add_(a) end
            c:wait()
            return (now() - t0) / N * 1e9
        end)
        ordo.engine.set_bulk_size(old)
        return ns
    end
    -- the same over 64 pairs in turn: no push finds its arguments in the
    -- memo of repeated ops (tensor_push.c), which keeps 16
    local function time_turns()
        local as, cs = {}, {}
        for j = 1, 64 do as[j], cs[j] = ordo.ones({16}), ordo.zeros({16}) end
        for i = 1, 10000 do local j = i % 64 + 1; cs[j]:add_(as[j]) end
        ordo.engine.wait_for_all()
        return best_of(3, function()
            local t0 = now()
            for i = 1, N do local j = i % 64 + 1; cs[j]:add_(as[j]) end
            ordo.engine.wait_for_all()
            return (now() - t0) / N * 1e9
        end)
    end
    local now_ns = time_loop(bulk, nil)
    local turns_ns = time_turns()
    local on, off = time_loop(bulk, workers_only), time_loop(0, workers_only)
    local k = peer_number(run_peer("kernel_add16", N), "kernel_add16 ([%d.]+)")
    local p_now = peer_number(run_peer("push_add16", N, bulk), "push_add16 ([%d.]+)")
    local p_on = peer_number(run_peer("env ORDO_RUN_NOW_MAX_ELEMENTS=-1", "push_add16", N, bulk), "push_add16 ([%d.]+)")
    local p_off = peer_number(run_peer("env ORDO_RUN_NOW_MAX_ELEMENTS=-1", "push_add16", N, 0), "push_add16 ([%d.]+)")
    local name = "c:add_(a), 16 floats, Lua (run at the push)"
    row(name, now_ns, "add kernel called directly in C", k, "ns/op")
    row(name, now_ns, "same pushes from C", p_now, "ns/op")
    local p_turns = peer_number(run_peer("push_add16_turns", N), "push_add16_turns ([%d.]+)")
    local tname = "same, over 64 pairs in turn (memo misses)"
    row(tname, turns_ns, "add kernel called directly in C", k, "ns/op")
    row(tname, turns_ns, "same pushes from C", p_turns, "ns/op")
    local wname = ("c:add_(a), Lua, to a worker, bulks of %d"):format(bulk)
    row(wname, on, "same pushes from C", p_on, "ns/op")
    row(wname, on, "add kernel called directly in C", k, "ns/op")
    row("c:add_(a), Lua, to a worker, bulking off", off, "same pushes from C", p_off, "ns/op")
    workers_only:close()
    local a = ordo.ones({16})

    -- c = a + b: a new tensor every time, dropped (collected by the GC)
    local M = quick and 20000 or 200000
    local b = ordo.ones({16})
    for _ = 1, 10000 do local r = a + b end
    ordo.engine.wait_for_all()
    local new_ns = best_of(3, function()
        local t0 = now()
        for _ = 1, M do local r = a + b end
        ordo.engine.wait_for_all()
        return (now() - t0) / M * 1e9
    end)
    local p_new = peer_number(run_peer("binary_add16", M, bulk), "binary_add16 ([%d.]+)")
    row("r = a + b, 16 floats, Lua (a new tensor)", new_ns, "same from C, freed 1,000 ops later", p_new, "ns/op")
    row("r = a + b, 16 floats, Lua (a new tensor)", new_ns, "c:add_(a) from Lua, in place", now_ns, "ns/op")
end

-- 2. matmul 1024x1024 float32
--
-- Timed in the steady state of a loop such as a training step's: every
-- output is a fresh tensor, and its memory comes from the allocator's cache
-- (src/host_alloc.c) once the collector has given back the outputs already
-- dropped - as the peer reuses its one output buffer.  Before that (the
-- first ~64 MB of outputs, ORDO_GC_THRESHOLD_MB) each output is freshly
-- mapped memory whose ~1,000 pages fault on first touch inside sgemm; that
-- cold figure is printed too, beside the peer writing into fresh pages.
do
    local n = quick and 256 or 1024
    local a = ordo.rand({n, n})
    local b = ordo.rand({n, n})
    ordo.engine.wait_for_all()
    local function once() a:matmul(b):wait() end
    local cold = best_ms(3, once)
    -- Until the cache holds blocks of this size: outputs allocated past one
    -- collection's worth, then collected.
    local warmup_bytes = 2 * 64 * 2 ^ 20
    for _ = 1, math.ceil(warmup_bytes / (n * n * 4)) do once() end
    collectgarbage("collect")
    local ms = best_ms(10, once)
    local s = peer_number(run_peer("sgemm", n, 10), "sgemm ([%d.]+)")
    local s1 = peer_number(run_peer("sgemm1", n, 10), "sgemm1 ([%d.]+)")
    local s1cold = peer_number(run_peer("sgemm1_fresh_out", n, 3), "sgemm1_fresh_out ([%d.]+)")
    local name = ("matmul %dx%d float32"):format(n, n)
    row(name, ms, "cblas_sgemm direct, 1 thread", s1, "ms")
    row(name, ms, "cblas_sgemm direct, OpenBLAS threads", s, "ms")
    row(name .. ", cold output pages", cold, "sgemm, 1 thread, fresh output pages", s1cold, "ms")
    local gf = 2 * n ^ 3 / 1e9
    print(("%-44s %10.1f GFLOP/s beside %.1f (1 thread) and %.1f GFLOP/s"):format("", gf / (ms / 1e3),
          gf / (s1 / 1e3), gf / (s / 1e3)))
end

-- 3. elementwise add of 16M floats, as bandwidth: on the default engine,
-- whose idle worker takes half of the chunks (ordo_parallel_for), and on an
-- engine with one CPU worker (the op not split)
do
    local n = quick and 2 ^ 20 or 16 * 2 ^ 20
    local function add_gbs(e)
        local a = ordo.ones({n}, {engine = e})
        local c = ordo.zeros({n}, {engine = e})
        c:add_(a)
        c:wait()
        local ms = best_ms(5, function() c:add_(a):wait() end)
        return 3 * n * 4 / (ms / 1e3) / 1e9
    end
    local gbs = add_gbs(nil)
    local e1 = ordo.engine.new({kind = cfg.kind, cpu_workers = 1})
    local gbs1 = add_gbs(e1)
    e1:close()
    local out_copy = run_peer("copy", n, 5)
    local out_add = run_peer("add", n, 5)
    local copy_gbs = peer_number(out_copy, "([%d.]+) GB/s")
    local add_gbs_c = peer_number(out_add, "([%d.]+) GB/s")
    local name = ("c:add_(a), %dM floats (3 x %d MB moved)"):format(n / 2 ^ 20, n * 4 / 2 ^ 20)
    local name1 = ("c:add_(a), %dM floats, 1 worker (not split)"):format(n / 2 ^ 20)
    row(name, gbs, "plain C copy loop (2 x moved)", copy_gbs, "GB/s", true)
    row(name, gbs, "plain C c[i] += a[i] loop", add_gbs_c, "GB/s", true)
    row(name1, gbs1, "plain C copy loop (2 x moved)", copy_gbs, "GB/s", true)
end

-- 4. parallelism on 2 workers: two independent matmuls overlap (one op a
-- worker), and one large elementwise op is split between the workers
do
    local e = ordo.engine.new({kind = "perdevice", cpu_workers = 2})
    local function time(eng, fn) return best_ms(5, function()
        fn()
        eng:wait_for_all()
    end) end
    local n = quick and 2 ^ 20 or 8 * 2 ^ 20
    local e1 = ordo.engine.new({kind = "perdevice", cpu_workers = 1})
    local x2 = ordo.rand({n}, {engine = e})
    local x1 = ordo.rand({n}, {engine = e1})
    local split = time(e, function() x2:sigmoid_() end)
    local alone = time(e1, function() x1:sigmoid_() end)
    row(("x:sigmoid_(), %dM floats, 2 workers"):format(n / 2 ^ 20), split, "the same on 1 worker", alone, "ms")
    print(("%-44s speed-up %.2fx from splitting (ideal 2.00x)"):format("", alone / split))
    e1:close()

    local m = quick and 256 or 512
    local a, b = ordo.rand({m, m}, {engine = e}), ordo.rand({m, m}, {engine = e})
    local c, d = ordo.rand({m, m}, {engine = e}), ordo.rand({m, m}, {engine = e})
    e:wait_for_all()
    local t1 = time(e, function() return a:matmul(b) end)
    local t2 = time(e, function() return c:matmul(d) end)
    local both = time(e, function() return a:matmul(b), c:matmul(d) end)
    row(("two %dx%d matmuls pushed together"):format(m, m), both, "one after the other (sum)", t1 + t2, "ms")
    print(("%-44s speed-up %.2fx on 2 workers (ideal 2.00x)"):format("", (t1 + t2) / both))

    e:close()
end
