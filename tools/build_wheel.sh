#!/usr/bin/env bash
# Build, repair and test a Linux wheel of the committed HEAD on this machine:
#   1. a clean clone of HEAD (uncommitted changes are not in it);
#   2. `pip wheel` with the running Python ($PYTHON; needs scikit-build-core,
#      pybind11, cmake and ninja installed: --no-build-isolation, no network);
#   3. `auditwheel repair` (bundles libgomp) to the most compatible manylinux tag
#      this host's glibc allows -- on a glibc 2.36 host that is not
#      manylinux_2_28; release wheels come from cibuildwheel's manylinux_2_28
#      images (.github/workflows/wheels.yml);
#   4. a fresh venv where no compiler is reachable (PATH holds only the venv,
#      CC/CXX are /bin/false), the repaired wheel installed from binaries only,
#      then tests/wheel_smoke.py and the golden tests (not slow) run against it.
# Usage: PYTHON=.venv/bin/python AUDITWHEEL=auditwheel tools/build_wheel.sh [OUTDIR]
# The repaired wheel is left in OUTDIR (default: wheelhouse/). Pip needs an index
# (or PIP_FIND_LINKS) for numpy, pytest, pytest-benchmark and hypothesis.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
py=$(command -v "${PYTHON:-python3}")
auditwheel=${AUDITWHEEL:-auditwheel}
out=$(mkdir -p "${1:-$root/wheelhouse}" && cd "${1:-$root/wheelhouse}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

git clone -q --no-hardlinks "$root" "$work/src"
echo "== building $(git -C "$work/src" log --oneline -1)"
"$py" -m pip wheel -q --no-deps --no-build-isolation -w "$work/dist" "$work/src"
wheel=$(ls "$work"/dist/*.whl)

echo "== repairing $(basename "$wheel")"
"$auditwheel" show "$wheel" | sed -n '1,6p'
"$auditwheel" repair -w "$work/repaired" "$wheel"
repaired=$(ls "$work"/repaired/*.whl)
case $(basename "$repaired") in
  *manylinux*) ;;
  *) echo "auditwheel gave no manylinux tag: $(basename "$repaired")" >&2; exit 1 ;;
esac
unzip -l "$repaired" | grep -q 'aces_fast.libs/libgomp' || { echo "libgomp not bundled" >&2; exit 1; }
unzip -l "$repaired" | grep -q 'licenses/LICENSES/GCC-exception-3.1.txt' ||
  { echo "license notices missing from the wheel" >&2; exit 1; }

echo "== testing in a fresh venv without a compiler"
"$py" -m venv "$work/venv"
cd "$work"  # not the checkout: the installed wheel must be what imports
# only the venv on PATH, CC/CXX false; pip's own settings (PIP_*) pass through
mapfile -t pipenv < <(env | grep '^PIP_' || true)
nocc=(env -i HOME="$work" PATH="$work/venv/bin" CC=/bin/false CXX=/bin/false LANG=C.UTF-8
      "${pipenv[@]}")
for c in cc c++ gcc g++ clang clang++; do
  if "${nocc[@]}" "$work/venv/bin/python" -c "import shutil, sys; sys.exit(shutil.which('$c') is None)"; then
    echo "compiler $c reachable in the test environment" >&2
    exit 1
  fi
done
"${nocc[@]}" "$work/venv/bin/python" -m pip install -q --only-binary=:all: "$repaired" \
  pytest pytest-benchmark hypothesis
"${nocc[@]}" "$work/venv/bin/python" "$work/src/tests/wheel_smoke.py"
"${nocc[@]}" "$work/venv/bin/python" -m pytest -q -p no:cacheprovider -m "not slow" \
  "$work/src/tests/test_golden.py"
cp "$repaired" "$out/"
echo "== $out/$(basename "$repaired")"
