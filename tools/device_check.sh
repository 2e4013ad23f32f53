#!/usr/bin/env bash
# Everything a lent device machine (one GPU, 16 cores, minutes of time) is for,
# in one call, on one build of the package: the GPU checks of issue #22
# (tools/gpu_check.sh: cuda tests, the goal cells timed and profiled, CUDA
# graphs, parity, the device bench) and then the many-core measurements of
# issue #23 (tools/cores_check.py), which keep DEVICE_CHECK_CORES_S seconds of
# the budget. Every step is cut at its share, so one slow step costs only its
# own numbers.
#
#   bash tools/device_check.sh 2>&1 | tee "$OUT/device.log"
#
# Environment: PYTHON (default python3), DEVICE_CHECK_BUDGET (seconds for all,
# default 600), DEVICE_CHECK_CORES_S (seconds kept for cores_check, default
# 120: it took about 95 s on 2026-11-30, a few more with the cache cell; 0
# skips it: the GPU checks get the whole budget), GPU_CHECK_PARITY_ARGS /
# GPU_CHECK_BENCH_ARGS (see tools/gpu_check.sh; by default a shorter parity
# list and the bench's goal cells at 200x500), OUT
# (default a temporary folder). Files in $OUT: cores.json (written as cells
# finish), logs.tar.gz (every log and JSON, after gpu_check and at the end),
# build.log on failure.
# Exit status: 0 when both passed, 1 otherwise.
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
BUDGET=${DEVICE_CHECK_BUDGET:-600}
CORES_S=${DEVICE_CHECK_CORES_S:-120}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/device-check.XXXXXX")}
START=$(date +%s)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/device-work.XXXXXX")
SITE="$WORK/site"
LOGS="$WORK/logs"
mkdir -p "$OUT" "$LOGS"
left() { echo $((BUDGET - ($(date +%s) - START))); }

echo "== build into $SITE ($(nproc) cores)"
if ! CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) timeout 240 "$PYTHON" -m pip install \
    --no-build-isolation --no-deps --no-index --target "$SITE" --upgrade . \
    >"$LOGS/build.log" 2>&1; then
    tail -20 "$LOGS/build.log"
    cp "$LOGS/build.log" "$OUT/build.log"
    echo "device_check: the build failed (log: $OUT/build.log)"
    exit 1
fi
echo "built in $(($(date +%s) - START)) s"

gpu_s=$(($(left) - CORES_S))
echo "== gpu_check (issue #22), ${gpu_s} s"
GPU_CHECK_DIR="$SITE" GPU_CHECK_PREBUILT=1 GPU_CHECK_BUDGET="$gpu_s" GPU_CHECK_LOGDIR="$LOGS" \
    GPU_CHECK_PARITY_ARGS="${GPU_CHECK_PARITY_ARGS:---per-family 3 --max-problems 60}" \
    GPU_CHECK_BENCH_ARGS="${GPU_CHECK_BENCH_ARGS:---ops aces-c,batch-aces-c,batch-aces-o --families distinct --sizes 200x500 --rounds 1 -q}" \
    PYTHON="$PYTHON" bash tools/gpu_check.sh
gpu=$?
tar -czf "$OUT/logs.tar.gz" -C "$WORK" logs  # again at the end: kept if cores_check is cut

cores_s=$(($(left) - 10))
if [ "$CORES_S" = 0 ]; then
    echo "== cores_check (issue #23): skipped (DEVICE_CHECK_CORES_S=0)"
    cores=0
else
    echo "== cores_check (issue #23), ${cores_s} s"
    PYTHONPATH="$SITE:$PWD" timeout "$cores_s" "$PYTHON" tools/cores_check.py --repeats 4 \
        --call-rounds 3 --problems 1000000 --stream-threads 8 --json "$OUT/cores.json"
    cores=$?
fi

tar -czf "$OUT/logs.tar.gz" -C "$WORK" logs
echo "device_check: gpu_check exit $gpu, cores_check exit $cores ($(($(date +%s) - START)) s)"
[ "$cores" = 0 ] && [ "$gpu" = 0 ]
