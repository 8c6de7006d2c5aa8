#!/usr/bin/env bash
# spec/run_tests.sh - run ordo's tests and print one summary line.
#
#   bash spec/run_tests.sh [--native] [--valgrind] [--cuda-emu EMU_BUILD_DIR] BUILD_TESTS_DIR
#
# Runs every test binary (test_*) in BUILD_TESTS_DIR, shows its output and
# adds up the "N passed, N failed, N skipped" line each one prints.  A binary
# that crashes, hangs past the per-binary limit, or exits nonzero without
# reporting a failure (a sanitizer report, a leak found by LeakSanitizer or
# valgrind) counts as one failure, named at the end.  Without --native the
# Lua specs (spec/*_spec.lua, run by busted) are added to the same total,
# and then spec/gpu_spec.lua and spec/pinned_spec.lua run once more on the simulated GPU
# (ORDO_SIMULATED_GPUS=2 ORDO_SIMULATED_GPU_MEM_MB=64
# ORDO_SIMULATED_GPU_DELAY_NS=2000), its counts added too and shown on a
# line of their own ("gpu specs on the simulated device: ...").  Without a
# real GPU the first run reports the GPU specs as skipped (pending).
#
#   --native     native tests only
#   --valgrind   run each binary under valgrind's leak checker
#   --cuda-emu EMU_BUILD_DIR
#                after the simulated-device run, the same GPU specs on the
#                CUDA emulation library in EMU_BUILD_DIR (make CUDA=emu:
#                the CUDA kernels themselves, compiled for the host, run on
#                the simulated device; kernels/cuda/emu/README.md), counted
#                and shown the same way, once with each block's threads in
#                forward and once in reverse order (with --lua-asan: once,
#                shuffled with seed ORDO_EMU_SEED, default 1); without
#                BUILD_TESTS_DIR, only that
#   --lua-asan   the Lua specs only, on the library in BUILD_DIR (an
#                ASan+UBSan build: make check-lua-asan), with the sanitizer
#                runtimes preloaded into luajit and the processes it starts;
#                the launcher specs are left out (they check the release
#                launcher's own library lookup); with --cuda-emu and no
#                BUILD_DIR, only the GPU specs on that (ASan+UBSan) emulation
#                library (make check-cuda-emu)
#   --lua-tsan   with --cuda-emu and no BUILD_DIR: the GPU specs on a
#                ThreadSanitizer build of the emulation (make
#                check-cuda-emu-tsan), every GPU thread a TSan fiber, with
#                TSan and EMU_BUILD_DIR/no_dlclose.so preloaded into luajit;
#                five specs are left out: three start processes (the shell
#                does not run under a preloaded TSan), one fills 600 MB, one
#                runs 16.8 million GPU threads (each a fiber)
#
# Environment: ORDO_TEST_SCALE shrinks op counts (default 1; 0.2 when the
# directory is a tsan/asan build, 0.05 under valgrind); ORDO_TEST_TIMEOUT is
# each test's watchdog limit in seconds; ORDO_TEST_BINARY_TIMEOUT bounds a
# whole binary (default 900 s, 3600 s under valgrind); ORDO_TEST_GPU_SIM_TIMEOUT
# bounds the simulated-GPU run of the GPU specs (default 600 s; 900 s under
# --lua-tsan, which ran for 4 to 10 minutes).
#
# Exits 0 only if nothing failed.  The last line of output is always exactly
# "N passed, N failed, N skipped".

set -u

native=0
use_valgrind=0
lua_asan=0
lua_tsan=0
cuda_emu=""
dir=""
want_emu_dir=0
for arg in "$@"; do
    if [ "$want_emu_dir" = 1 ]; then cuda_emu="$arg"; want_emu_dir=0; continue; fi
    case "$arg" in
        --cuda-emu) want_emu_dir=1 ;;
        --native) native=1 ;;
        --valgrind) use_valgrind=1 ;;
        --lua-asan) lua_asan=1 ;;
        --lua-tsan) lua_tsan=1 ;;
        -h|--help) sed -n '2,46p' "$0"; exit 0 ;;
        -*) echo "run_tests.sh: unknown option $arg" >&2; exit 2 ;;
        *) dir="$arg" ;;
    esac
done
emu_only=0
[ -z "$dir" ] && [ -n "$cuda_emu" ] && emu_only=1
if [ "$emu_only" = 0 ] && { [ -z "$dir" ] || [ "$lua_tsan" = 1 ]; }; then
    echo "usage: bash spec/run_tests.sh [--native] [--valgrind] [--cuda-emu EMU_BUILD_DIR] BUILD_TESTS_DIR | --lua-asan BUILD_DIR | --lua-tsan --cuda-emu EMU_BUILD_DIR" >&2
    exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Sanitizers and valgrind are 5-50x slower: shrink the workloads (the tests
# read ORDO_TEST_SCALE); an explicit ORDO_TEST_SCALE from the caller wins.
if [ "$use_valgrind" = 1 ]; then
    export ORDO_TEST_SCALE="${ORDO_TEST_SCALE:-0.05}"
    export ORDO_TEST_VALGRIND=1
    binary_timeout="${ORDO_TEST_BINARY_TIMEOUT:-3600}"
else
    case "$dir" in
        *tsan*|*asan*) export ORDO_TEST_SCALE="${ORDO_TEST_SCALE:-0.2}" ;;
    esac
    binary_timeout="${ORDO_TEST_BINARY_TIMEOUT:-900}"
fi
# Make sanitizer reports fail the binary even where the defaults would not
# (UBSan without -fno-sanitize-recover), and keep TSan reports readable.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export TSAN_OPTIONS="${TSAN_OPTIONS:-second_deadlock_stack=1}"

total_pass=0
total_fail=0
total_skip=0
failed_names=()
log="$(mktemp "${TMPDIR:-/tmp}/ordo_test_log.XXXXXX")"
trap 'rm -f "$log"' EXIT

have_timeout=0
command -v timeout >/dev/null 2>&1 && have_timeout=1

# Adds the counts of the last summary line in $log; returns 1 if none.
add_counts() {
    local line
    line="$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$log" | tail -n 1)"
    [ -n "$line" ] || return 1
    local p f s
    read -r p _ f _ s _ <<<"${line//,/}"
    total_pass=$((total_pass + p))
    total_fail=$((total_fail + f))
    total_skip=$((total_skip + s))
    last_failed=$f
    return 0
}

# Under --lua-asan: what luajit runs with, and the spec files left out.
lua_env=()
busted_extra=()
if [ "$lua_asan" = 1 ]; then
    lua_env=("LD_PRELOAD=$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
             ORDO_HOST_CACHE_MB=0 "ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1")
    [ -n "$dir" ] && lua_env+=("ORDO_LIB=$(cd "$dir" && pwd)/libordo.so")
    busted_extra=(--exclude-pattern=launcher)
fi
# Under --lua-tsan (GPU specs only): --ignore-lua, or busted would start
# itself again through the shell (.busted names luajit); left out: the three
# specs that start processes, and the out-of-memory one, whose 150 million
# GPU threads filling tensors would take most of an hour as TSan fibers
# (it tests the allocator, which the other runs cover).
gpu_spec_extra=()
if [ "$lua_tsan" = 1 ]; then
    lua_env=("LD_PRELOAD=$(gcc -print-file-name=libtsan.so) $(cd "$cuda_emu" && pwd)/no_dlclose.so"
             ORDO_HOST_CACHE_MB=0)
    gpu_spec_extra=(--ignore-lua "--filter-out=training examples run with" "--filter-out=the CUDA emulation"
                    "--filter-out=returns their error, not a deadlock"
                    "--filter-out=out of memory: garbage is collected"
                    "--filter-out=transpose copy of more batches than a grid dim")
fi

# Adds the counts of busted's TAP output in $log ("ok N - name", "not ok N -
# name", "ok N - # SKIP ...") and shows them on a line headed by $1; $2 is
# busted's exit status (nonzero with no failing test: a spec file that does
# not load, a crash, a timeout - one failure).
add_tap_counts() {
    local label="$1" rc="$2" p s f
    p=$(grep -cE '^ok [0-9]+ - ' "$log")
    s=$(grep -cE '^ok [0-9]+ - # SKIP' "$log")
    f=$(grep -cE '^not ok [0-9]+ ' "$log")
    p=$((p - s))
    total_pass=$((total_pass + p))
    total_skip=$((total_skip + s))
    total_fail=$((total_fail + f))
    [ "$f" -gt 0 ] && failed_names+=("$label ($f failed)")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        total_fail=$((total_fail + 1))
        local why="exit status $rc with no failing test reported"
        [ "$rc" = 124 ] && why="timed out"
        failed_names+=("$label ($why)")
    fi
    echo "=== $label: $p passed, $f failed, $s skipped (exit status $rc)"
}

# Runs spec/gpu_spec.lua and spec/pinned_spec.lua on two simulated GPUs and
# adds their counts, shown on a line of their own headed by $1; the other
# arguments are extra environment (the library to load).  A 64 MiB device
# makes the out-of-memory specs run; a random delay per stream item shakes
# out ordering bugs.
run_gpu_specs() {
    local label="$1"
    shift
    local sim_env=(ORDO_SIMULATED_GPUS=2 ORDO_SIMULATED_GPU_MEM_MB=64 ORDO_SIMULATED_GPU_DELAY_NS=2000 "$@")
    local sim_specs=(spec/gpu_spec.lua spec/pinned_spec.lua)
    echo "=== busted: ${sim_specs[*]}, $label (${sim_env[*]})"
    local cmd=()
    local limit=600
    [ "$lua_tsan" = 1 ] && limit=900
    [ "$have_timeout" = 1 ] && cmd+=(timeout -k 10 "${ORDO_TEST_GPU_SIM_TIMEOUT:-$limit}")
    (cd "$root" && env "${lua_env[@]}" "${sim_env[@]}" "${cmd[@]}" luajit /usr/bin/busted -o TAP "${gpu_spec_extra[@]}" "${sim_specs[@]}") 2>&1 | tee "$log"
    add_tap_counts "$label" "${PIPESTATUS[0]}"
}

# ---------------------------------------------------------------- native
shopt -s nullglob
bins=()
if [ "$lua_asan" = 0 ] && [ "$emu_only" = 0 ]; then
    for b in "$dir"/test_*; do
        [ -f "$b" ] && [ -x "$b" ] && bins+=("$b")
    done
fi
if [ ${#bins[@]} -eq 0 ] && [ "$lua_asan" = 0 ] && [ "$emu_only" = 0 ]; then
    echo "run_tests.sh: no test binaries in $dir" >&2
    total_fail=$((total_fail + 1))
    failed_names+=("(no native test binaries in $dir)")
fi

for b in "${bins[@]}"; do
    name="$(basename "$b")"
    echo "=== $name${ORDO_TEST_SCALE:+ (ORDO_TEST_SCALE=$ORDO_TEST_SCALE)}"
    cmd=()
    [ "$have_timeout" = 1 ] && cmd+=(timeout -k 10 "$binary_timeout")
    if [ "$use_valgrind" = 1 ]; then
        # shellcheck disable=SC2054  # the commas are inside one argument
        cmd+=(valgrind -q --leak-check=full --errors-for-leak-kinds=definite,indirect
              --error-exitcode=99 --fair-sched=yes)
    fi
    t0=$(date +%s.%N)
    "${cmd[@]}" "$b" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    t1=$(date +%s.%N)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    last_failed=0
    if ! add_counts; then
        total_fail=$((total_fail + 1))
        failed_names+=("$name (no summary line; exit status $rc)")
        echo "=== $name: no summary line, exit status $rc (${secs} s)"
    elif [ "$rc" -ne 0 ] && [ "$last_failed" -eq 0 ]; then
        # All tests passed but the process failed: a sanitizer or valgrind
        # error, a leak found at exit, or a crash during teardown.
        total_fail=$((total_fail + 1))
        why="exit status $rc"
        [ "$rc" = 99 ] && why="valgrind errors (exit 99)"
        [ "$rc" = 124 ] && why="timed out after ${binary_timeout} s"
        failed_names+=("$name ($why after all its tests passed)")
        echo "=== $name: $why after all tests passed (${secs} s)"
    else
        [ "$last_failed" -gt 0 ] && failed_names+=("$name ($last_failed failed)")
        echo "=== $name: exit status $rc (${secs} s)"
    fi
done

# ---------------------------------------------------------------- Lua specs
# Hook for the busted specs: runs only without --native, only when specs
# exist and luajit + busted are installed; silent otherwise.
if [ "$native" = 0 ] && [ "$emu_only" = 0 ]; then
    specs=("$root"/spec/*_spec.lua)
    if [ ${#specs[@]} -gt 0 ] && command -v luajit >/dev/null 2>&1 && [ -e /usr/bin/busted ]; then
        echo "=== busted (${#specs[@]} spec files)"
        (cd "$root" && env "${lua_env[@]}" luajit /usr/bin/busted -o TAP "${busted_extra[@]}" spec/) 2>&1 | tee "$log"
        add_tap_counts busted "${PIPESTATUS[0]}"

        # The GPU specs again, on the simulated device (src/device_sim.c):
        # GPU scheduling, copies, the caching allocator and out-of-memory
        # handling get tested on machines without a GPU.
        [ -f "$root/spec/gpu_spec.lua" ] && run_gpu_specs "gpu specs on the simulated device"
    fi
fi

# The GPU specs on the CUDA emulation: the CUDA kernels' own code (host
# side, launches, device code) on the simulated device.  A block's threads
# run one after another there, so a missing __syncthreads shows only in
# some orders: the specs run with the threads in forward and in reverse
# order, and (sanitizer builds, which run once) in shuffled order.
if [ -n "$cuda_emu" ] && [ "$native" = 0 ]; then
    if [ -f "$cuda_emu/libordo.so" ]; then
        emu_lib="ORDO_LIB=$(cd "$cuda_emu" && pwd)/libordo.so"
        if [ "$lua_tsan" = 1 ]; then
            run_gpu_specs "gpu specs on the CUDA emulation under ThreadSanitizer" "$emu_lib" ORDO_EMU_THREAD_ORDER=forward
        elif [ "$lua_asan" = 1 ]; then
            run_gpu_specs "gpu specs on the CUDA emulation, threads shuffled" "$emu_lib" \
                ORDO_EMU_THREAD_ORDER=shuffle "ORDO_EMU_SEED=${ORDO_EMU_SEED:-1}"
        else
            run_gpu_specs "gpu specs on the CUDA emulation" "$emu_lib" ORDO_EMU_THREAD_ORDER=forward
            run_gpu_specs "gpu specs on the CUDA emulation, threads reversed" "$emu_lib" ORDO_EMU_THREAD_ORDER=reverse
        fi
    else
        total_fail=$((total_fail + 1))
        failed_names+=("(no CUDA emulation library in $cuda_emu: make BUILD=$cuda_emu CUDA=emu)")
    fi
fi

if [ ${#failed_names[@]} -gt 0 ]; then
    echo "FAILED:"
    for n in "${failed_names[@]}"; do echo "  $n"; done
fi
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ "$total_fail" -eq 0 ]
