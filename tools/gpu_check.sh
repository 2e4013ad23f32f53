#!/usr/bin/env bash
# One command for a GPU machine (issue 22, item 6): build the package, run the
# cuda-marked tests, the Triton kernels (ACES_FAST_TORCH_TRITON=1:
# tools/triton_check.py, the ACES-C and ACES-O cells through them, ACES-O in
# float64 and float32, their parity, other tilings timed by
# tools/triton_sweep.py), the goal cells timed and profiled
# (tools/gpu_profile.py: cpp vs CUDA, kernels, syncs, device busy time), the
# parity check (tools/gpu_parity.py: every method, torch on CUDA vs cpp),
# ACES-O with and without CUDA graphs
# (tools/gpu_graphs.py), `aces-fast bench --device cuda --quick`, then the
# float32 mode and the fused pair sums (ACES_FAST_TORCH_FUSED=1) with their
# parity, within a total budget of 8 minutes, newest first (a step past the
# budget is not run), then print one summary table (step, status, seconds).
#
# The machine needs torch (CUDA), numba, pybind11, scikit-build-core, cmake,
# ninja, pytest and pyarrow; no network (the build uses no isolation, no deps).
#
#   bash tools/gpu_check.sh            # on the GPU machine
#   GPU_CHECK_CPU=1 bash tools/gpu_check.sh
#       degraded mode for a machine without CUDA: says so per step, skips the
#       build (uses src/ with its compiled extension) unless GPU_CHECK_BUILD=1,
#       and runs the parity check on CPU tensors with few cases
#
# Environment: PYTHON (default python3), GPU_CHECK_BUDGET (seconds, default 480),
# GPU_CHECK_DIR (build target, default a temporary folder), GPU_CHECK_PREBUILT=1
# (GPU_CHECK_DIR already holds the build: skip it), GPU_CHECK_LOGDIR (logs and
# JSON, default a temporary folder), GPU_CHECK_PARITY_ARGS and GPU_CHECK_BENCH_ARGS
# (replace the parity check's and the bench's selection, e.g. a shorter run).
# Exit status: 0 when every step that ran passed, 1 otherwise.
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
BUDGET=${GPU_CHECK_BUDGET:-480}
CPU_MODE=${GPU_CHECK_CPU:-0}
START=$(date +%s)
LOGDIR=${GPU_CHECK_LOGDIR:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")}
mkdir -p "$LOGDIR"
# word-split on purpose: each holds command-line arguments
read -r -a PARITY_ARGS <<<"${GPU_CHECK_PARITY_ARGS:-}"
read -r -a BENCH_ARGS <<<"${GPU_CHECK_BENCH_ARGS:---quick}"
DIR=${GPU_CHECK_DIR:-$LOGDIR/site}
STEPS=()
FAILED=0

left() { echo $((BUDGET - ($(date +%s) - START))); }

# record NAME STATUS SECONDS
record() { STEPS+=("$1|$2|$3"); }

# step NAME LIMIT CMD...: run CMD under `timeout` (at most LIMIT s and what is
# left of the budget), echo its output, record pass / FAIL (rc) / timeout
step() {
    local name=$1 limit=$2
    shift 2
    local avail
    avail=$(left)
    if [ "$avail" -le 5 ]; then
        record "$name" "FAIL: not run (budget spent)" 0
        return 1
    fi
    [ "$limit" -gt "$avail" ] && limit=$avail
    echo "== $name (limit ${limit}s): $*"
    local t0 rc
    t0=$(date +%s)
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$LOGDIR/$name.log"
    rc=${PIPESTATUS[0]}
    local secs=$(($(date +%s) - t0))
    case $rc in
        0) record "$name" pass "$secs" ;;
        124 | 137) record "$name" "FAIL: timeout after ${limit}s" "$secs" ;;
        *) record "$name" "FAIL (exit $rc)" "$secs" ;;
    esac
    return "$rc"
}

HAS_CUDA=$("$PYTHON" -c 'import torch; print(int(torch.cuda.is_available()))' 2>/dev/null || echo 0)
if [ "$HAS_CUDA" != 1 ] && [ "$CPU_MODE" != 1 ]; then
    echo "gpu_check: no CUDA device is available to torch here;" \
        "GPU_CHECK_CPU=1 runs the degraded CPU check" >&2
    exit 2
fi
if [ "$HAS_CUDA" = 1 ]; then
    "$PYTHON" -c 'import torch; p = torch.cuda.get_device_properties(0); print(f"gpu_check: {p.name}, {p.total_memory / 2**30:.0f} GiB, torch {torch.__version__}, CUDA {torch.version.cuda}")'
else
    echo "gpu_check: CPU mode, no CUDA device: the cuda steps say so; parity runs on CPU tensors"
fi

# 1. build
if [ "${GPU_CHECK_PREBUILT:-0}" = 1 ] && [ -d "$DIR/aces_fast" ]; then
    echo "== build: prebuilt in $DIR (tools/device_check.sh)"
    record build "prebuilt" 0
    SITE=$DIR
elif [ "$CPU_MODE" = 1 ] && [ "${GPU_CHECK_BUILD:-0}" != 1 ]; then
    echo "== build: skipped in CPU mode (GPU_CHECK_BUILD=1 builds); using src/"
    record build "skipped (CPU mode: src/)" 0
    SITE=$PWD/src
else
    if step build 240 "$PYTHON" -m pip install --no-build-isolation --no-deps --no-index \
        --target "$DIR" --upgrade .; then
        SITE=$DIR
    else
        SITE=""
    fi
fi

# Pure-Python test tools the GPU machine may lack (pytest-benchmark, which the
# bench needs, and hypothesis, which some test modules import): prepared here
# with `pip install --target .gpu_deps pytest-benchmark py-cpuinfo hypothesis`
# and carried along (the device tool's `carry`), they go on the path.
DEPS=""
if [ -d .gpu_deps ]; then DEPS="$PWD/.gpu_deps"; fi

if [ -n "$SITE" ]; then
    export PYTHONPATH="$SITE:$PWD${DEPS:+:$DEPS}${PYTHONPATH:+:$PYTHONPATH}"
    "$PYTHON" -c 'import aces_fast, sys; print("gpu_check: aces_fast", aces_fast.__version__, "from", aces_fast.__file__)'

    # 2. the cuda-marked tests (they skip without CUDA)
    if [ "$HAS_CUDA" != 1 ]; then
        echo "== cuda-tests: no CUDA device: the cuda tests skip; running them to show it"
    fi
    step cuda-tests 120 "$PYTHON" -m pytest -m cuda -p no:cacheprovider -q -rs tests
    rc=$?
    if [ "$rc" = 5 ]; then  # pytest: nothing selected
        STEPS[-1]="cuda-tests|FAIL: no test carries the cuda marker|${STEPS[-1]##*|}"
    elif [ "$rc" = 4 ] && grep -q "Unknown marker" "$LOGDIR/cuda-tests.log"; then
        STEPS[-1]="cuda-tests|FAIL: the cuda marker is not registered|${STEPS[-1]##*|}"
    elif [ "$rc" = 0 ] && [ "$HAS_CUDA" != 1 ]; then
        STEPS[-1]="cuda-tests|pass (skipped: no CUDA)|${STEPS[-1]##*|}"
    fi

    # 3. the Triton kernels (ACES_FAST_TORCH_TRITON=1, opt-in until measured here:
    # the surrogate's pair sums, ACES-C's LOO-AUC and row scores): their
    # arithmetic against the torch paths and cpp, then the goal cells through
    # them (ACES-O also in float32), then parity through them
    if [ "$HAS_CUDA" = 1 ]; then
        step triton-check 90 "$PYTHON" tools/triton_check.py --device cuda
        step kernel 150 env ACES_FAST_TORCH_TRITON=1 "$PYTHON" tools/gpu_profile.py \
            --only aces-c,batch-aces-c,aces-o,batch-aces-o,aces-o-all --cell-budget 3 \
            --json "$LOGDIR/profile-kernel.json" --tables "$LOGDIR/profile-kernel-tables.txt"
        step kernel-f32 90 env ACES_FAST_TORCH_TRITON=1 ACES_FAST_TORCH_DTYPE=float32 \
            "$PYTHON" tools/gpu_profile.py --only aces-o,batch-aces-o,aces-o-all --cell-budget 2 \
            --json "$LOGDIR/profile-kernel-f32.json" --tables "$LOGDIR/profile-kernel-f32-tables.txt"
        step parity-kernel 90 env ACES_FAST_TORCH_TRITON=1 "$PYTHON" tools/gpu_parity.py \
            --device cuda --quick
        # other tilings of the three kernels, checked and timed (sets no default)
        step triton-sweep 150 "$PYTHON" tools/triton_sweep.py --json "$LOGDIR/triton-sweep.json"
    elif "$PYTHON" -c 'import triton' 2>/dev/null; then
        echo "== triton-check: no CUDA device: the kernel under Triton's CPU interpreter"
        step triton-check 240 "$PYTHON" tools/triton_check.py --device cpu
        case $? in  # 2: the interpreter cannot run here (its log says why)
            0) STEPS[-1]="triton-check|pass (CPU interpreter)|${STEPS[-1]##*|}" ;;
            2) STEPS[-1]="triton-check|not run: see triton-check.log|${STEPS[-1]##*|}" ;;
        esac
    else
        record triton-check "not run: no CUDA device, no Triton" 0
    fi

    # 4. the goal cells, timed and profiled on the device (where the time goes)
    if [ "$HAS_CUDA" = 1 ]; then
        step profile 150 "$PYTHON" tools/gpu_profile.py --cell-budget 3 --json "$LOGDIR/profile.json" \
            --tables "$LOGDIR/profile-tables.txt"
    else
        echo "== profile: no CUDA device: the small cells on CPU tensors"
        step profile 90 "$PYTHON" tools/gpu_profile.py --device cpu --quick --cell-budget 1
        [ $? = 0 ] && STEPS[-1]="profile|pass (CPU tensors)|${STEPS[-1]##*|}"
    fi

    # 5. parity: every method, torch on the device vs cpp
    if [ "$HAS_CUDA" = 1 ]; then
        step parity 150 "$PYTHON" tools/gpu_parity.py --device cuda "${PARITY_ARGS[@]}"
    else
        echo "== parity: no CUDA device: torch on CPU tensors, quick case list"
        step parity 150 "$PYTHON" tools/gpu_parity.py --device cpu --quick
        [ $? = 0 ] && STEPS[-1]="parity|pass (CPU tensors)|${STEPS[-1]##*|}"
    fi

    # 6. CUDA graphs for ACES-O's Adam loop: eager against replayed, same bits
    if [ "$HAS_CUDA" = 1 ]; then
        step graphs 90 "$PYTHON" tools/gpu_graphs.py
    else
        record graphs "not run: no CUDA device" 0
    fi

    # 7. the device benchmark
    if [ "$HAS_CUDA" = 1 ]; then
        step bench 330 "$PYTHON" -m benchmarks --device cuda "${BENCH_ARGS[@]}" --no-import-time \
            --json "$LOGDIR/bench.json"
    else
        echo "== bench: no CUDA device: checking that --device cuda refuses with one line"
        step bench 60 "$PYTHON" -m benchmarks --device cuda --quick
        if grep -q "error: --device cuda: no CUDA device" "$LOGDIR/bench.log" \
            && [ "$(wc -l <"$LOGDIR/bench.log")" = 1 ]; then
            STEPS[-1]="bench|not run: no CUDA device (refused as expected)|${STEPS[-1]##*|}"
        fi
    fi

    # 8. ACES-O in the float32 mode (ACES_FAST_TORCH_DTYPE), and the fused pair
    # sums (ACES_FAST_TORCH_FUSED=1: torch.compile; measured on 2026-11-30,
    # benchmarks/results/2026-11-30-h200.txt) and their parity; the warm-up
    # column holds the compile time
    if [ "$HAS_CUDA" = 1 ]; then
        step profile-f32 90 env ACES_FAST_TORCH_DTYPE=float32 "$PYTHON" tools/gpu_profile.py \
            --only aces-o,batch-aces-o,aces-o-all --cell-budget 2 \
            --json "$LOGDIR/profile-f32.json" --tables "$LOGDIR/profile-f32-tables.txt"
        step fused 150 env ACES_FAST_TORCH_FUSED=1 "$PYTHON" tools/gpu_profile.py \
            --only aces-o,batch-aces-o,aces-o-all --cell-budget 3 \
            --json "$LOGDIR/profile-fused.json" --tables "$LOGDIR/profile-fused-tables.txt"
        step parity-fused 120 env ACES_FAST_TORCH_FUSED=1 "$PYTHON" tools/gpu_parity.py \
            --device cuda --quick
    else
        echo "== fused: no CUDA device: the fused ACES-O cells on CPU tensors"
        step fused 150 env ACES_FAST_TORCH_FUSED=1 "$PYTHON" tools/gpu_profile.py --device cpu \
            --quick --only aces-o-all,batch-aces-o --cell-budget 1
        [ $? = 0 ] && STEPS[-1]="fused|pass (CPU tensors)|${STEPS[-1]##*|}"
    fi
fi

echo
echo "gpu_check summary ($(($(date +%s) - START)) s of ${BUDGET} s; logs in $LOGDIR)"
printf '%-12s  %-50s  %7s\n' step status seconds
printf '%-12s  %-50s  %7s\n' ------------ -------------------------------------------------- -------
for s in "${STEPS[@]}"; do
    IFS='|' read -r name status secs <<<"$s"
    printf '%-12s  %-50s  %7s\n' "$name" "$status" "$secs"
    case $status in FAIL*) FAILED=1 ;; esac
done
exit "$FAILED"
