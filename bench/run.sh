#!/usr/bin/env bash
# bench/run.sh BUILD_DIR - runs the engine benchmark programs that
# bench/Makefile built into BUILD_DIR/bench, one process per runtime and
# configuration, and prints one table: ordo beside OpenMP and StarPU.
# The table is also written as Markdown to BUILD_DIR/bench/engine.md.
# Then it runs the GPU benchmarks, bench/gpu_bench.lua (a skip line without
# a CUDA device; their table goes to BUILD_DIR/bench/gpu.md).
#
# Each runtime/configuration runs in its own process, BENCH_ROUNDS times,
# the rounds interleaved (round 1 of every runtime, then round 2...), and each
# process times BENCH_REPS runs of every workload; the table shows the median
# of all rounds x reps runs.  Why rounds: on this 2-core VM the spread between
# processes (thread placement, a neighbour's burst) is larger than within
# one, and interleaving keeps a slow minute from landing on one runtime only.
#
# Environment:
#   BENCH_QUICK=1        smoke run for testing the bench build: tiny task
#                        counts, 1 round of 1 run
#   BENCH_ROUNDS=N       processes per runtime (default 3)
#   BENCH_REPS=N         timed runs per process (default 3; 3 x 3 = 9 runs per cell)
#   BENCH_TASKS=N        empty-task count (default 1000000; busy workloads scale with it)
#   BENCH_ONLY=a,b       only these workloads (indep,chain,chain_op,dag,dag_1us,dag_10us)
#   BENCH_MAX_INFLIGHT=N ordo's max_inflight (default: the engine's own default)
#   BENCH_TIMEOUT=S      per-process time limit (default 300 s, 60 s when quick)
#   STARPU_SCHED=name    StarPU scheduler (default eager)
#   BENCH_GPU_TIMEOUT=S  time limit of the GPU benchmarks (default 600 s), run
#                        last: BUILD_DIR/ordo bench/gpu_bench.lua
#
# Exit status: 1 when an ordo configuration failed (crash, hang, error, lost
# writes) or the GPU benchmarks failed, else 0 - a peer that cannot run here
# only shows as n/a, and no GPU is a skip.
set -u

BUILD=${1:?usage: bench/run.sh BUILD_DIR}
B=$BUILD/bench
RES=$B/results.tsv
MD=$B/engine.md
mkdir -p "$B"
: >"$RES"

if [ "${BENCH_QUICK:-0}" != 0 ]; then
    TMO=${BENCH_TIMEOUT:-60}
    ROUNDS=${BENCH_ROUNDS:-1}
    export BENCH_REPS=${BENCH_REPS:-1}
else
    TMO=${BENCH_TIMEOUT:-300}
    ROUNDS=${BENCH_ROUNDS:-3}
    export BENCH_REPS=${BENCH_REPS:-3}
fi
START=$(date +%s.%N)

# Busy CPU time of the whole machine, in seconds (user+nice+system+irq+softirq+steal).
machine_busy() {
    awk -v hz="$(getconf CLK_TCK)" '/^cpu / { print ($2 + $3 + $4 + $7 + $8 + $9) / hz; exit }' /proc/stat
}
BUSY0=$(machine_busy)

# Labels that crashed or hung: not run again in later rounds, so one broken
# configuration cannot eat the time budget three times over.
declare -A BROKEN=()

# Runs one benchmark program and appends its R/NA/# lines to $RES.  A program
# that is missing, crashes or hangs becomes an NA line, never a failed bench:
# the other columns are still worth printing.
run_prog() {
    local label=$1 bin=$2
    shift 2
    local err=$B/$label.stderr t0 rc
    [ -n "${BROKEN[$label]:-}" ] && return
    t0=$(date +%s.%N)
    if [ ! -x "$bin" ]; then
        printf 'NA\t%s\tnot built (%s missing)\n' "$label" "$bin" >>"$RES"
        BROKEN[$label]=1
        return
    fi
    # Each program prints only complete lines and flushes them, so what a
    # killed program measured before it hung is kept.
    timeout -k 10 "$TMO" env "$@" "$bin" "${ARGS[@]}" >>"$RES" 2>"$err"
    rc=$?
    if [ $rc = 124 ] || [ $rc = 137 ]; then
        printf 'NA\t%s\ttimed out after %s s\n' "$label" "$TMO" >>"$RES"
        BROKEN[$label]=1
    elif [ $rc != 0 ]; then
        printf 'NA\t%s\texit status %s: %s\n' "$label" "$rc" \
            "$(tail -n 1 "$err" | tr '\t' ' ')" >>"$RES"
        BROKEN[$label]=1
    fi
    printf 'bench: round %d/%d %-20s %6.1f s\n' "$round" "$ROUNDS" "$label" \
        "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')" >&2
}

echo "bench: engine benchmarks, $ROUNDS round(s) of one process per runtime (table at the end)" >&2
mkdir -p "$B/starpu_home"

for round in $(seq 1 "$ROUNDS"); do
    # OpenMP: 2 threads, one of them creating the tasks.
    ARGS=()
    run_prog openmp "$B/peer_openmp" OMP_NUM_THREADS=2

    # StarPU: 2 CPU workers plus the submitting main thread.  STARPU_HOME
    # keeps its scratch files (it writes some even without performance
    # models) in the build folder.
    run_prog starpu "$B/peer_starpu" STARPU_NCPU=2 STARPU_SCHED="${STARPU_SCHED:-eager}" \
        STARPU_CALIBRATE=0 STARPU_SILENT=1 STARPU_NCUDA=0 STARPU_NOPENCL=0 \
        STARPU_HOME="$B/starpu_home"

    # ordo, every engine kind; w=1 is 2 threads in all (pusher + 1 worker).
    # "perdevice 1 16": the pushing thread bulks 16 tasks an engine op (the
    # Lua package's default); "perdevice 1 64": the largest bulk.
    for cfg in "naive 1" "pooled 1" "pooled 2" "perdevice 1" "perdevice 2" "perdevice 1 16" "perdevice 1 64"; do
        read -r kind w bulk <<<"$cfg"
        ARGS=("$kind" "$w" ${bulk:+"$bulk"})
        label="ordo-$kind-w$w${bulk:+-b$bulk}"
        [ "$kind" = naive ] && label=ordo-naive
        run_prog "$label" "$B/engine_bench" ORDO_PROFILER_AUTOSTART=0
    done
done

ELAPSED=$(awk -v a="$START" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
# What else ran meanwhile: the machine's busy time minus our children's CPU
# time (bash's `times`, second line), as a share of all cores.  On a shared
# 2-core box this says how far to trust the run.
# (`times` into a file, not a pipe: in a subshell it would count nothing.)
times >"$B/times.txt"
OURS=$(awk 'NR == 2 { split($0, f, /[ ms]+/); print f[1] * 60 + f[2] + f[3] * 60 + f[4] }' "$B/times.txt")
OTHER=$(awk -v b0="$BUSY0" -v b1="$(machine_busy)" -v ours="$OURS" -v el="$ELAPSED" -v n="$(nproc)" \
    'BEGIN { x = el > 0 ? 100 * (b1 - b0 - ours) / (el * n) : 0; printf "%.0f", x < 0 ? 0 : x }')

CPU=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
[ -n "$CPU" ] || CPU=$(uname -m)
GCCV=$(${CC:-cc} --version 2>/dev/null | head -n 1)
SPUV=$(pkg-config --modversion starpu-1.3 2>/dev/null || echo "not installed")
# The engine revision measured; "+dirty" when src/ differs from that commit.
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "uncommitted")
if [ "$REV" != uncommitted ] && [ -n "$(git -C "$ROOT" status --porcelain -- src 2>/dev/null)" ]; then
    REV="$REV+dirty"
fi

# Build the Markdown table; it is what gets printed, too, with the columns
# padded so it reads as well in a terminal as it renders on GitHub.
awk -F'\t' -v date="$(date -u '+%Y-%m-%d %H:%M UTC')" -v nproc="$(nproc)" -v cpu="$CPU" \
    -v gccv="$GCCV" -v spuv="$SPUV" -v rev="$REV" -v elapsed="$ELAPSED" \
    -v rounds="$ROUNDS" -v reps_env="$BENCH_REPS" -v other="$OTHER" '
function cell(rt, wl,    k) {
    k = rt SUBSEP wl
    if (!(k in ns)) return "n/a"
    if (eff[k] != "-") return sprintf("%.1f%%", eff[k])
    return (ns[k] >= 100) ? sprintf("%.0f", ns[k]) : sprintf("%.1f", ns[k])
}
# peer time / ordo time for the same work: > 1 means ordo is that many times faster.
function ratio(peer, rt, wl, owl,    kp, ko) {
    kp = peer SUBSEP wl; ko = rt SUBSEP owl
    if (!(kp in ns) || !(ko in ns) || ns[ko] <= 0) return "n/a"
    return sprintf("%.2fx", ns[kp] / ns[ko])
}
# Pool every run of every round: samples[k] is a comma list of ns/task.
$1 == "R" {
    k = $2 SUBSEP $3
    # Not "k in samples ? ... : ...": mawk creates samples[k] before it
    # evaluates the right-hand side.
    if (nsamp[k]++) samples[k] = samples[k] "," $9
    else samples[k] = $9
    busy[k] = $8; tasks[$3] = $4
}
$1 == "NA" && !seen["NA" $2 $3]++ { na[++nna] = "- " $2 ": " $3 }
$1 == "#"  && !seen["#" $2]++      { note[++nnote] = "- " $2 }
END {
    for (k in samples) {
        n = split(samples[k], v, ",")
        for (i = 2; i <= n; i++) {   # insertion sort: mawk has no asort
            x = v[i] + 0
            for (j = i - 1; j >= 1 && v[j] + 0 > x; j--) v[j + 1] = v[j]
            v[j + 1] = x
        }
        ns[k] = (n % 2) ? v[(n + 1) / 2] + 0 : (v[n / 2] + v[n / 2 + 1]) / 2
        if (n > maxruns) maxruns = n
        # Efficiency of the median run: ideal (busy / 2 cores per task) / measured.
        eff[k] = busy[k] > 0 ? 100 * busy[k] / 2 / ns[k] : "-"
    }
    nrow = 0
    # row label | workload key for ordo | workload key for the peers
    row[++nrow] = "independent (ns/task)|indep|indep"
    row[++nrow] = "chain (ns/task)|chain|chain"
    row[++nrow] = "chain, ordo operator [1]|chain_op|chain"
    row[++nrow] = "random DAG (ns/task)|dag|dag"
    row[++nrow] = "random DAG, 1 us tasks [2]|dag_1us|dag_1us"
    row[++nrow] = "random DAG, 10 us tasks [2]|dag_10us|dag_10us"

    nc = split("workload|OpenMP 2t|StarPU 2w+1|ordo naive 1t|pooled w=1|pooled w=2|perdevice w=1|perdevice w=2|pd w=1 bulk 16 [3]|pd w=1 bulk 64 [3]|OpenMP/pd1|StarPU/pd1|OpenMP/pd2|StarPU/pd2|OpenMP/pd1b|StarPU/pd1b|OpenMP/pd1B|StarPU/pd1B", hdr, "|")
    for (c = 1; c <= nc; c++) { t[0, c] = hdr[c]; width[c] = length(hdr[c]) }
    for (r = 1; r <= nrow; r++) {
        split(row[r], f, "|"); ow = f[2]; pw = f[3]
        t[r, 1] = f[1]
        t[r, 2] = cell("openmp", pw);            t[r, 3] = cell("starpu", pw)
        t[r, 4] = cell("ordo-naive", ow)
        t[r, 5] = cell("ordo-pooled-w1", ow);    t[r, 6] = cell("ordo-pooled-w2", ow)
        t[r, 7] = cell("ordo-perdevice-w1", ow); t[r, 8] = cell("ordo-perdevice-w2", ow)
        t[r, 9]  = cell("ordo-perdevice-w1-b16", ow)
        t[r, 10] = cell("ordo-perdevice-w1-b64", ow)
        t[r, 11] = ratio("openmp", "ordo-perdevice-w1", pw, ow)
        t[r, 12] = ratio("starpu", "ordo-perdevice-w1", pw, ow)
        t[r, 13] = ratio("openmp", "ordo-perdevice-w2", pw, ow)
        t[r, 14] = ratio("starpu", "ordo-perdevice-w2", pw, ow)
        t[r, 15] = ratio("openmp", "ordo-perdevice-w1-b16", pw, ow)
        t[r, 16] = ratio("starpu", "ordo-perdevice-w1-b16", pw, ow)
        t[r, 17] = ratio("openmp", "ordo-perdevice-w1-b64", pw, ow)
        t[r, 18] = ratio("starpu", "ordo-perdevice-w1-b64", pw, ow)
        for (c = 1; c <= nc; c++) if (length(t[r, c]) > width[c]) width[c] = length(t[r, c])
    }

    printf "## Engine benchmark\n\n"
    printf "%s; %s cores: %s; %s; StarPU %s; ordo %s. The run took %.0f s; "\
        "other processes used %s%% of the cores meanwhile.\n\n", \
        date, nproc, cpu, gccv, spuv, rev, elapsed, other
    printf "Tasks per run: %s empty, %s x 1 us, %s x 10 us. Each cell: the median of %d runs "\
        "(%d processes x %d runs, interleaved with the other runtimes).\n\n", \
        tasks["dag"] ? tasks["dag"] : "?", tasks["dag_1us"] ? tasks["dag_1us"] : "?", \
        tasks["dag_10us"] ? tasks["dag_10us"] : "?", maxruns, rounds, reps_env
    for (r = 0; r <= nrow; r++) {
        line = "|"
        for (c = 1; c <= nc; c++)
            line = line sprintf(c == 1 ? " %-*s |" : " %*s |", width[c], t[r, c])
        print line
        if (r == 0) {
            line = "|"
            for (c = 1; c <= nc; c++) {
                dash = sprintf("%*s", width[c], ""); gsub(/ /, "-", dash)
                line = line (c == 1 ? " " dash " |" : " " substr(dash, 2) ": |")
            }
            print line
        }
    }
    printf "\n"
    printf "Workloads: independent = tasks with no vars; chain = every task reads and writes "
    printf "the same var; random DAG = each task reads 2 and writes 1 of 1000 vars, the three "
    printf "distinct, drawn from one seeded sequence shared by all runtimes. Tasks are empty "
    printf "unless a duration is given.\n\n"
    printf "Columns: ns per task (lower is better) or efficiency (higher is better). "
    printf "OpenMP 2t = libgomp, 2 threads, one creating the tasks; "
    printf "StarPU 2w+1 = 2 CPU workers + the submitting thread (eager scheduler); "
    printf "ordo w=N = the pushing thread + N CPU workers, so w=1 is the 2-thread match for OpenMP "
    printf "and w=2 the 3-thread match for StarPU; naive runs every task inline in push. "
    printf "X/pdN = X time / ordo perdevice w=N time: how many times faster ordo is (< 1: slower); "
    printf "X/pd1b and X/pd1B the same against pd w=1 bulk 16 and bulk 64.\n\n"
    printf "Task windows, each runtime at its default: ordo blocks the pusher past max_inflight "
    printf "pending ops (value under Runtimes); libgomp runs a new task at once in the creating "
    printf "thread when more than 64 x threads are queued, which is why its independent row is "
    printf "close to a plain function call; StarPU does not limit submission.\n\n"
    printf "[1] The chain pushed as one reusable operator (ordo_new_operator + ordo_push); "
    printf "the peers have no such thing, so their plain chain is shown and compared.\n"
    printf "[2] Efficiency in %%, higher is better: ideal time (tasks x task time / 2 cores) / measured time. "
    printf "Tasks spin on clock_gettime for their duration.\n"
    printf "[3] perdevice w=1 with the pushing thread bulking (ordo_set_bulk_size(16) or (64), tasks pushed "
    printf "with ORDO_PROP_BULK): up to 16 or 64 consecutive tasks become one engine op, run in push order on one "
    printf "worker. Tasks that take longer than bulk_op_max_ns (default 500 ns) by the engine'"'"'s running mean "
    printf "are pushed alone instead, so that they run in parallel (the busy rows); the reusable operator is never bulked.\n"
    if (nna) { printf "\nNot measured:\n"; for (i = 1; i <= nna; i++) print na[i] }
    if (nnote) { printf "\nRuntimes:\n"; for (i = 1; i <= nnote; i++) print note[i] }
}' "$RES" >"$MD"

cat "$MD"
echo
echo "(also written to $MD; raw lines in $RES)"

# The GPU benchmarks (bench/gpu_bench.lua beside the plain-CUDA bench/gpu_peer):
# without a CUDA device they print one line saying so and succeed.
GPU_FAILED=
echo
if [ -x "$BUILD/ordo" ]; then
    timeout -k 10 "${BENCH_GPU_TIMEOUT:-600}" env ORDO_BUILD="$BUILD" "$BUILD/ordo" "$ROOT/bench/gpu_bench.lua"
    rc=$?
    if [ $rc != 0 ]; then
        echo "bench: the GPU benchmarks failed (exit status $rc)" >&2
        GPU_FAILED=1
    fi
else
    echo "bench: $BUILD/ordo is not built; GPU benchmarks not run" >&2
fi

# A peer that cannot run here (no StarPU, say) is the machine's business; an
# ordo configuration that crashed, hung or lost work is a bug, so the run
# fails - after printing everything, so the reason is on screen.
if grep -q '^NA	ordo' "$RES"; then
    echo "bench: ordo failed in at least one configuration (see 'Not measured' above)" >&2
    exit 1
fi
[ -z "$GPU_FAILED" ] || exit 1
