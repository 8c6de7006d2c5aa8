#!/usr/bin/env bash
# Installs what ordo needs to build, test and benchmark, when it is missing.
# Debian packages only; a no-op (and silent) when everything is present.
#   scripts/deps.sh          build + test dependencies
#   scripts/deps.sh bench    also the benchmark peers (StarPU)
set -euo pipefail

need=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
want_pkg() { have_pkg "$1" || need+=("$1"); }

have_cmd cc || need+=(build-essential)
have_cmd g++ || need+=(g++) # the CUDA emulation library (kernels/cuda/emu) is C++
have_cmd make || need+=(make)
want_pkg luajit
want_pkg libluajit-5.1-dev
want_pkg lua-busted
want_pkg libopenblas-dev
want_pkg zlib1g-dev
want_pkg libreadline-dev
want_pkg valgrind
want_pkg tmux
want_pkg dataset-fashion-mnist # the examples' data (/usr/share/datasets/fashion-mnist)
if [ "${1:-}" = bench ]; then
    want_pkg libstarpu-dev
    want_pkg pkg-config
fi

[ ${#need[@]} -eq 0 ] && exit 0

echo "ordo: installing missing packages: ${need[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
    if have_cmd sudo; then SUDO=sudo; else
        echo "ordo: run as root, or install them yourself: apt-get install -y ${need[*]}" >&2
        exit 1
    fi
else
    SUDO=
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${need[@]}" >/dev/null
