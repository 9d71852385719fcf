#!/usr/bin/env bash
# Issue 17, item 4: the CPU backend's loop order against numpy, side by side
# in one run. Alternates the two programs ROUNDS times and prints every
# round, then the medians of their best-of-RUNS times.
#
#   scripts/numpy_side_by_side.sh [ROUNDS] [RUNS]
#
# numpy is taken from a virtual environment under target/numpy-venv,
# created (and numpy installed into it) when missing.
set -euo pipefail
ROUNDS=${1:-5}
RUNS=${2:-5}
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/target/numpy-venv"
if ! "$venv/bin/python" -c 'import numpy' 2>/dev/null; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet numpy
fi
cargo build --quiet --release -p backend-cpu --example loop_order
ours="$root/target/release/examples/loop_order"
cat > "$root/target/numpy_side_by_side.py" <<'PY'
import sys, time
import numpy as np
runs = int(sys.argv[1])
def timed(f):
    ms = []
    for _ in range(runs):
        t = time.perf_counter(); f(); ms.append((time.perf_counter() - t) * 1e3)
    ms.sort()
    return ms[0], ms[len(ms) // 2]
a = (np.arange(512 * 512) % 97).astype(np.float32).reshape(512, 512) * np.float32(0.01)
b = (np.arange(512 * 512) % 89).astype(np.float32).reshape(512, 512) * np.float32(0.02)
best, med = timed(lambda: np.einsum("ik,kj->ij", a, b, optimize=False))
print(f"contraction_512 best_ms={best:.2f} median_ms={med:.2f}")
x = (np.arange(4096 * 4096) % 1000).astype(np.float32).reshape(4096, 4096)
best, med = timed(lambda: np.ascontiguousarray(x.T))
print(f"transpose_4096 best_ms={best:.2f} median_ms={med:.2f}")
PY
echo "numpy $("$venv/bin/python" -c 'import numpy; print(numpy.__version__)'); $RUNS runs per round, best of each"
declare -a oc ot nc nt
for r in $(seq 1 "$ROUNDS"); do
    o=$("$ours" "$RUNS")
    n=$("$venv/bin/python" "$root/target/numpy_side_by_side.py" "$RUNS")
    oc+=($(echo "$o" | sed -n 's/^contraction_512 best_ms=\([0-9.]*\).*/\1/p'))
    ot+=($(echo "$o" | sed -n 's/^transpose_4096 best_ms=\([0-9.]*\).*/\1/p'))
    nc+=($(echo "$n" | sed -n 's/^contraction_512 best_ms=\([0-9.]*\).*/\1/p'))
    nt+=($(echo "$n" | sed -n 's/^transpose_4096 best_ms=\([0-9.]*\).*/\1/p'))
    echo "round $r: contraction ours ${oc[-1]} ms numpy ${nc[-1]} ms; transpose ours ${ot[-1]} ms numpy ${nt[-1]} ms"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
mc=$(median "${oc[@]}"); mnc=$(median "${nc[@]}"); mt=$(median "${ot[@]}"); mnt=$(median "${nt[@]}")
echo "median contraction_512: ours $mc ms, numpy.einsum $mnc ms, numpy/ours $(awk "BEGIN {printf \"%.2f\", $mnc / $mc}")"
echo "median transpose_4096:  ours $mt ms, numpy $mnt ms, numpy/ours $(awk "BEGIN {printf \"%.2f\", $mnt / $mt}")"
