#!/usr/bin/env bash
# Developer build: compile aces_fast._core in build/dev and drop the module next to
# the Python sources, so `PYTHONPATH=. pytest` works without reinstalling.
# CI and users install with `pip install .` instead (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
pyexe=${PYTHON:-python3}
pybind_dir=$("$pyexe" -m pybind11 --cmakedir)
cmake -S . -B build/dev -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSKBUILD_PROJECT_NAME=aces_fast -DSKBUILD_PROJECT_VERSION=0.1.0 \
  -Dpybind11_DIR="$pybind_dir" -DPython_EXECUTABLE="$(command -v "$pyexe")" "$@" >/dev/null
cmake --build build/dev
# copy then rename: overwriting a loaded .so in place crashes running processes
for f in build/dev/_core*.so; do cp "$f" "aces_fast/.$(basename "$f").tmp" && mv "aces_fast/.$(basename "$f").tmp" "aces_fast/$(basename "$f")"; done
echo "built $(ls aces_fast/_core*.so)"
