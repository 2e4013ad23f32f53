#!/usr/bin/env bash
# Everything a lent device machine (one GPU, 16 cores, minutes of time) is for,
# in one call: the many-core measurements of issue #23 (tools/cores_check.py,
# about 2 minutes) and then the GPU checks of issue #22 (tools/gpu_check.sh,
# within what is left of DEVICE_CHECK_BUDGET), both on one build of the package.
# Logs and JSON go to $OUT (the device tool brings that folder back).
#
#   bash tools/device_check.sh       # carry .gpu_deps (see tools/gpu_check.sh)
#
# Environment: PYTHON (default python3), DEVICE_CHECK_BUDGET (seconds for both,
# default 600), OUT (default a temporary folder).
# Exit status: 0 when both passed, 1 otherwise.
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
BUDGET=${DEVICE_CHECK_BUDGET:-600}
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/device-check.XXXXXX")}
START=$(date +%s)
SITE="$OUT/site"
mkdir -p "$OUT"

echo "== build into $SITE"
if ! timeout 240 "$PYTHON" -m pip install --no-build-isolation --no-deps --no-index \
    --target "$SITE" --upgrade . >"$OUT/build.log" 2>&1; then
    tail -20 "$OUT/build.log"
    echo "device_check: the build failed (log: $OUT/build.log)"
    exit 1
fi

echo "== cores_check (issue #23)"
PYTHONPATH="$SITE:$PWD" timeout 200 "$PYTHON" tools/cores_check.py \
    --json "$OUT/cores.json" 2>&1 | tee "$OUT/cores.log"
cores=${PIPESTATUS[0]}

left=$((BUDGET - ($(date +%s) - START)))
echo "== gpu_check (issue #22), ${left} s left"
GPU_CHECK_DIR="$SITE" GPU_CHECK_PREBUILT=1 GPU_CHECK_BUDGET="$left" PYTHON="$PYTHON" \
    bash tools/gpu_check.sh 2>&1 | tee "$OUT/gpu_check.log"
gpu=${PIPESTATUS[0]}

echo "device_check: cores_check exit $cores, gpu_check exit $gpu; logs in $OUT"
[ "$cores" = 0 ] && [ "$gpu" = 0 ]
