#!/usr/bin/env bash
# tools/sanitize.sh [pytest arguments ...]
#
# Builds aces_fast._core with AddressSanitizer + UndefinedBehaviorSanitizer
# (build/sanitize/) and runs the test suite against it: an out-of-bounds read or
# write, a use after free, a signed overflow or any other undefined behaviour in
# the C++ layer aborts the run with the sanitizer's report. Default pytest
# arguments: -q -m "not slow" (the README's test selection).
#
# Needs the test dependencies of the README's test command in the current
# Python (numba, torch, pytest, ...). The instrumented module goes into a copy
# of src/aces_fast in a temporary folder put first on PYTHONPATH, so neither the
# checkout nor the installed package is touched; subprocesses started by the
# tests inherit PYTHONPATH and the preloaded runtimes.
#
# Leak detection is off: CPython and its extension modules keep allocations
# alive until exit by design, which LeakSanitizer reports by the thousand. The
# peak-memory bounds of tests/test_large_pools.py are deselected: ASan's
# allocator adds redzones and quarantine to every block, so the bounds
# (fractions of the input size) measure the sanitizer, not the library.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
root=$(pwd)
build="$root/build/sanitize"
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
pybind_dir=$("$py" -m pybind11 --cmakedir)
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' src/aces_fast/__init__.py)
generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_MODULE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DSKBUILD_PROJECT_NAME=aces_fast -DSKBUILD_PROJECT_VERSION="$version" \
  -Dpybind11_DIR="$pybind_dir" -DPython_EXECUTABLE="$(command -v "$py")" >/dev/null
cmake --build "$build"

pkg=$(mktemp -d)
trap 'rm -rf "$pkg"' EXIT
cp -r src/aces_fast "$pkg/aces_fast"
rm -f "$pkg"/aces_fast/_core*.so
cp "$build"/_core*.so "$pkg/aces_fast/"

# libstdc++ is preloaded with libasan: ASan's __cxa_throw interceptor must find
# the real one already loaded, or the first C++ exception aborts the process.
export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so)"
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export PYTHONPATH="$pkg${PYTHONPATH:+:$PYTHONPATH}"

"$py" -c "import aces_fast, sys; assert aces_fast.__file__.startswith('$pkg'), aces_fast.__file__; print('sanitized build:', aces_fast.__file__)"
if [ $# -eq 0 ]; then
  set -- -q -m "not slow"
fi
exec "$py" -m pytest -p no:cacheprovider -p no:faulthandler \
  --deselect tests/test_large_pools.py::test_million_candidates \
  --deselect tests/test_large_pools.py::test_many_tests "$@"
