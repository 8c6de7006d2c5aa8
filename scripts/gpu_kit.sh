#!/usr/bin/env bash
# scripts/gpu_kit.sh - runs ordo's GPU checks on a machine that has a GPU and
# CUDA but none of ordo's Debian packages and no network (the GPU machines
# this project borrows: nvcc, gcc and the driver, no LuaJIT, busted or
# OpenBLAS, nothing to fetch them from).
#
#   scripts/gpu_kit.sh fetch [DIR]   on a Debian machine with apt: downloads
#                                    the packages below into DIR (default
#                                    .gpukit, ignored by git) - about 15 MB
#   scripts/gpu_kit.sh env [DIR]     on the GPU machine: unpacks them under
#                                    /tmp/gpukit (dpkg -x, nothing installed
#                                    system-wide) and prints the exports that
#                                    make them found: eval "$(... env)"
#   scripts/gpu_kit.sh check [DIR]   on the GPU machine: env, then builds with
#                                    CUDA=1 and runs the native tests, the GPU
#                                    and pinned specs on the real device, and
#                                    the GPU benchmarks; logs go to $OUT (or
#                                    build/gpu_check), the summary is printed
#
# Only what ordo needs beyond a C compiler and CUDA: LuaJIT (interpreter and
# headers), busted and its Lua modules, OpenBLAS (the pthread build, reached
# without Debian's alternatives), readline, make.  libc, libgcc and libstdc++
# are the machine's own: never put other copies of them on LD_LIBRARY_PATH.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:-}
kit=${2:-$root/.gpukit}
prefix=/tmp/gpukit

PACKAGES=(
    luajit libluajit-5.1-2 libluajit-5.1-common libluajit-5.1-dev
    lua-busted lua-cliargs lua-dkjson lua-filesystem lua-inifile lua-luassert
    lua-mediator lua-penlight lua-say lua-system lua-term lua-yaml libyaml-0-2
    libopenblas0 libopenblas0-pthread libopenblas-dev libopenblas-pthread-dev
    libgfortran5 libquadmath0
    libreadline8 libreadline-dev readline-common libncurses-dev libncurses6
    make
)

fetch() {
    mkdir -p "$kit"
    (cd "$kit" && apt-get download "${PACKAGES[@]}")
    echo "gpu_kit: $(ls "$kit"/*.deb | wc -l) packages, $(du -sh "$kit" | cut -f1), in $kit"
}

unpack() {
    [ -d "$kit" ] && kit=$(cd "$kit" && pwd) # absolute: the ar fallback unpacks from another directory
    local debs=("$kit"/*.deb)
    if [ ! -e "${debs[0]}" ]; then
        echo "gpu_kit: no packages in $kit (run 'scripts/gpu_kit.sh fetch' where apt works, and carry $kit)" >&2
        exit 1
    fi
    mkdir -p "$prefix"
    for d in "${debs[@]}"; do
        if command -v dpkg-deb >/dev/null 2>&1; then
            dpkg-deb -x "$d" "$prefix"
        else # a .deb is an ar archive holding data.tar.*
            local tmp
            tmp=$(mktemp -d)
            (cd "$tmp" && ar x "$d" && tar -xf data.tar.* -C "$prefix")
            rm -rf "$tmp"
        fi
    done
    # Debian reaches OpenBLAS through alternatives that dpkg -x does not set up.
    local lib=$prefix/usr/lib/x86_64-linux-gnu
    ln -sf openblas-pthread/libopenblas.so.0 "$lib/libopenblas.so.0"
    ln -sf openblas-pthread/libopenblas.so "$lib/libopenblas.so"
    ln -sf openblas-pthread/cblas.h "$prefix/usr/include/x86_64-linux-gnu/cblas.h"
    ln -sf openblas-pthread/openblas_config.h "$prefix/usr/include/x86_64-linux-gnu/openblas_config.h"
    # luajit is a symlink to the versioned binary in the package
    [ -e "$prefix/usr/bin/luajit" ] || ln -sf "$(cd "$prefix/usr/bin" && ls luajit-* | head -1)" "$prefix/usr/bin/luajit"
}

exports() {
    local lib=$prefix/usr/lib/x86_64-linux-gnu inc=$prefix/usr/include
    local cuda_bin=
    command -v nvcc >/dev/null 2>&1 || { [ -x /usr/local/cuda/bin/nvcc ] && cuda_bin=/usr/local/cuda/bin:; }
    cat <<EOF
export PATH="$cuda_bin$prefix/usr/bin:\$PATH"
export LD_LIBRARY_PATH="$lib:$lib/openblas-pthread\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export LIBRARY_PATH="$lib:$lib/openblas-pthread\${LIBRARY_PATH:+:\$LIBRARY_PATH}"
export C_INCLUDE_PATH="$inc/luajit-2.1:$inc/x86_64-linux-gnu:$inc\${C_INCLUDE_PATH:+:\$C_INCLUDE_PATH}"
export LUA_PATH="$prefix/usr/share/lua/5.1/?.lua;$prefix/usr/share/lua/5.1/?/init.lua;;"
export LUA_CPATH="$lib/lua/5.1/?.so;;"
export ORDO_BUSTED="$prefix/usr/bin/busted"
EOF
}

check() {
    unpack
    eval "$(exports)"
    local out=${OUT:-$root/build/gpu_check}
    mkdir -p "$out"
    cd "$root"
    local busted=(luajit "$ORDO_BUSTED" -o TAP)
    {
        echo "== machine"
        nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
        nvcc --version | tail -1
        luajit -v
    } 2>&1 | tee "$out/machine.txt"
    local status=0 step
    run_step() { # name, command...
        step=$1
        shift
        echo "== $step"
        if "$@" >"$out/$step.log" 2>&1; then echo "   ok"; else echo "   FAILED (exit $?): $out/$step.log"; status=1; fi
        tail -3 "$out/$step.log" | sed 's/^/   /'
    }
    run_step build make -j"$(nproc)" CUDA=1 all
    # A GPU the build cannot use (a driver older than this toolkit, an HGX
    # board whose fabric manager is not running...) leaves every GPU spec
    # pending, which busted counts as a pass: say so, with ordo's reason
    # (on stderr), and fail the run.
    local ndev
    ndev=$(luajit -e 'package.path = "lua/?.lua;lua/?/init.lua;" .. package.path
                      io.write(require("ordo").cuda.device_count())' 2>"$out/device_count.log") || ndev="?"
    echo "== ordo sees ${ndev:-?} CUDA device(s)" | tee -a "$out/machine.txt"
    if ! [ "${ndev:-0}" -gt 0 ] 2>/dev/null; then
        sed 's/^/   /' "$out/device_count.log"
        echo "   FAILED: no usable CUDA device for ordo: the GPU specs below run on none (pending)"
        status=1
    fi
    run_step native make CUDA=1 test-native
    run_step gpu_spec "${busted[@]}" spec/gpu_spec.lua
    run_step pinned_spec "${busted[@]}" spec/pinned_spec.lua
    run_step gpu_bench build/ordo bench/gpu_bench.lua # builds its CUDA peer itself
    for f in gpu_spec pinned_spec; do # a spec that ran on no device reads as pending, not passed
        local ok skip bad
        ok=$(grep -cE '^ok [0-9]+ - ' "$out/$f.log" || true)
        skip=$(grep -cE '^ok [0-9]+ - # SKIP' "$out/$f.log" || true)
        bad=$(grep -cE '^not ok ' "$out/$f.log" || true)
        echo "$f: $((ok - skip)) passed, $bad failed, $skip pending"
    done
    grep -hE '^not ok' "$out"/gpu_spec.log "$out"/pinned_spec.log 2>/dev/null | head -40 || true
    echo "gpu_kit: $([ $status = 0 ] && echo all steps passed || echo some steps FAILED); logs in $out"
    return $status
}

case "$cmd" in
fetch) fetch ;;
env) unpack && exports ;;
check) check ;;
*)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
