#!/usr/bin/env bash
# bench/run.sh BUILD_DIR - runs the engine benchmark programs that
# bench/Makefile built into BUILD_DIR/bench, one process per runtime and
# configuration, and prints one table: ordo beside OpenMP and StarPU.
# The table is also written as Markdown to BUILD_DIR/bench/engine.md.
#
# Environment:
#   BENCH_QUICK=1        smoke run: tiny task counts, 1 repetition (tests the bench build)
#   BENCH_TASKS=N        empty-task count (default 1000000; busy workloads scale with it)
#   BENCH_REPS=N         repetitions per measurement, median reported (default 5)
#   BENCH_ONLY=a,b       only these workloads (indep,chain,chain_op,dag,dag_1us,dag_10us)
#   BENCH_MAX_INFLIGHT=N ordo's max_inflight (default 2^21: backpressure never blocks)
#   BENCH_TIMEOUT=S      per-program time limit (default 300 s, 60 s when quick)
#   STARPU_SCHED=name    StarPU scheduler (default eager)
set -u

BUILD=${1:?usage: bench/run.sh BUILD_DIR}
B=$BUILD/bench
RES=$B/results.tsv
MD=$B/engine.md
mkdir -p "$B"
: >"$RES"

if [ "${BENCH_QUICK:-0}" != 0 ]; then TMO=${BENCH_TIMEOUT:-60}; else TMO=${BENCH_TIMEOUT:-300}; fi
START=$(date +%s)

# Runs one benchmark program and appends its R/NA/# lines to $RES.  A program
# that is missing, crashes or hangs becomes an NA line, never a failed bench:
# the other columns are still worth printing.
run_prog() {
    local label=$1 bin=$2
    shift 2
    local err=$B/$label.stderr t0 rc
    t0=$(date +%s.%N)
    if [ ! -x "$bin" ]; then
        printf 'NA\t%s\tnot built (%s missing)\n' "$label" "$bin" >>"$RES"
        return
    fi
    # Each program prints only complete lines and flushes them, so what a
    # killed program measured before it hung is kept.
    timeout -k 10 "$TMO" env "$@" "$bin" "${ARGS[@]}" >>"$RES" 2>"$err"
    rc=$?
    if [ $rc = 124 ] || [ $rc = 137 ]; then
        printf 'NA\t%s\ttimed out after %s s\n' "$label" "$TMO" >>"$RES"
    elif [ $rc != 0 ]; then
        printf 'NA\t%s\texit status %s: %s\n' "$label" "$rc" \
            "$(tail -n 1 "$err" | tr '\t' ' ')" >>"$RES"
    fi
    printf 'bench: %-20s %6.1f s\n' "$label" "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')" >&2
}

echo "bench: engine benchmarks, one process per runtime (progress below, table at the end)" >&2

# OpenMP: 2 threads, one of them creating the tasks.
ARGS=()
run_prog openmp "$B/peer_openmp" OMP_NUM_THREADS=2

# StarPU: 2 CPU workers plus the submitting main thread.  STARPU_HOME keeps
# its scratch files (it writes some even without performance models) in the
# build folder.
mkdir -p "$B/starpu_home"
run_prog starpu "$B/peer_starpu" STARPU_NCPU=2 STARPU_SCHED="${STARPU_SCHED:-eager}" \
    STARPU_CALIBRATE=0 STARPU_SILENT=1 STARPU_NCUDA=0 STARPU_NOPENCL=0 \
    STARPU_HOME="$B/starpu_home"

# ordo, every engine kind; w=1 is 2 threads in all (pusher + 1 worker).
for cfg in "naive 1" "pooled 1" "pooled 2" "perdevice 1" "perdevice 2"; do
    read -r kind w <<<"$cfg"
    ARGS=("$kind" "$w")
    label="ordo-$kind-w$w"
    [ "$kind" = naive ] && label=ordo-naive
    run_prog "$label" "$B/engine_bench" ORDO_PROFILER_AUTOSTART=0
done

ELAPSED=$(($(date +%s) - START))

CPU=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
[ -n "$CPU" ] || CPU=$(uname -m)
GCCV=$(${CC:-cc} --version 2>/dev/null | head -n 1)
SPUV=$(pkg-config --modversion starpu-1.3 2>/dev/null || echo "not installed")
REV=$(git -C "$(dirname "$0")/.." rev-parse --short HEAD 2>/dev/null || echo "uncommitted")

# Build the Markdown table; it is what gets printed, too, with the columns
# padded so it reads as well in a terminal as it renders on GitHub.
awk -F'\t' -v date="$(date -u '+%Y-%m-%d %H:%M UTC')" -v nproc="$(nproc)" -v cpu="$CPU" \
    -v gccv="$GCCV" -v spuv="$SPUV" -v rev="$REV" -v elapsed="$ELAPSED" '
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
$1 == "R"  { ns[$2 SUBSEP $3] = $6; eff[$2 SUBSEP $3] = $7; tasks[$3] = $4; reps[$3] = $5 }
$1 == "NA" { na[++nna] = "- " $2 ": " $3 }
$1 == "#"  { note[++nnote] = "- " $2 }
END {
    nrow = 0
    # row label | workload key for ordo | workload key for the peers
    row[++nrow] = "independent, empty tasks (ns/task)|indep|indep"
    row[++nrow] = "chain, each task RW one var (ns/task)|chain|chain"
    row[++nrow] = "chain via ordo operator + ordo_push (ns/task) [1]|chain_op|chain"
    row[++nrow] = "random DAG, 2 R + 1 W of 1000 vars (ns/task)|dag|dag"
    row[++nrow] = "random DAG, 1 us tasks (efficiency) [2]|dag_1us|dag_1us"
    row[++nrow] = "random DAG, 10 us tasks (efficiency) [2]|dag_10us|dag_10us"

    nc = split("workload|OpenMP 2t|StarPU 2w+1|ordo naive 1t|pooled w=1|pooled w=2|perdevice w=1|perdevice w=2|OpenMP/pd1|StarPU/pd1|OpenMP/pd2|StarPU/pd2", hdr, "|")
    for (c = 1; c <= nc; c++) { t[0, c] = hdr[c]; width[c] = length(hdr[c]) }
    for (r = 1; r <= nrow; r++) {
        split(row[r], f, "|"); ow = f[2]; pw = f[3]
        t[r, 1] = f[1]
        t[r, 2] = cell("openmp", pw);            t[r, 3] = cell("starpu", pw)
        t[r, 4] = cell("ordo-naive", ow)
        t[r, 5] = cell("ordo-pooled-w1", ow);    t[r, 6] = cell("ordo-pooled-w2", ow)
        t[r, 7] = cell("ordo-perdevice-w1", ow); t[r, 8] = cell("ordo-perdevice-w2", ow)
        t[r, 9]  = ratio("openmp", "ordo-perdevice-w1", pw, ow)
        t[r, 10] = ratio("starpu", "ordo-perdevice-w1", pw, ow)
        t[r, 11] = ratio("openmp", "ordo-perdevice-w2", pw, ow)
        t[r, 12] = ratio("starpu", "ordo-perdevice-w2", pw, ow)
        for (c = 1; c <= nc; c++) if (length(t[r, c]) > width[c]) width[c] = length(t[r, c])
    }

    printf "## Engine benchmark\n\n"
    printf "%s; %s cores: %s; %s; StarPU %s; ordo %s. `make bench` took %d s.\n\n", \
        date, nproc, cpu, gccv, spuv, rev, elapsed
    printf "Tasks per run: %s empty, %s x 1 us, %s x 10 us; median of %s runs.\n\n", \
        tasks["dag"] ? tasks["dag"] : "?", tasks["dag_1us"] ? tasks["dag_1us"] : "?", \
        tasks["dag_10us"] ? tasks["dag_10us"] : "?", reps["dag"] ? reps["dag"] : "?"
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
    printf "Columns: ns per task (lower is better) or efficiency (higher is better). "
    printf "OpenMP 2t = libgomp, 2 threads, one creating the tasks; "
    printf "StarPU 2w+1 = 2 CPU workers + the submitting thread (eager scheduler); "
    printf "ordo w=N = the pushing thread + N CPU workers, so w=1 is the 2-thread match for OpenMP "
    printf "and w=2 the 3-thread match for StarPU; naive runs every task inline in push. "
    printf "X/pdN = X time / ordo perdevice w=N time: how many times faster ordo is (< 1: slower).\n\n"
    printf "[1] The peers have no reusable operator; their plain chain is shown and compared.\n"
    printf "[2] Efficiency = ideal time (tasks x task time / 2 cores) / measured time. "
    printf "Tasks spin on clock_gettime for their duration.\n"
    if (nna) { printf "\nNot measured:\n"; for (i = 1; i <= nna; i++) print na[i] }
    if (nnote) { printf "\nRuntimes:\n"; for (i = 1; i <= nnote; i++) print note[i] }
}' "$RES" >"$MD"

cat "$MD"
echo
echo "(also written to $MD; raw lines in $RES)"
