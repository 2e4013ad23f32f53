#!/usr/bin/env bash
# Developer build: compile aces_fast._core in build/dev and drop the module next to
# the Python sources, so `PYTHONPATH=src pytest` works without reinstalling.
# CI and users install with `pip install .` instead (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
pyexe=${PYTHON:-python3}
pybind_dir=$("$pyexe" -m pybind11 --cmakedir)
# the version is defined once, in src/aces_fast/__init__.py
# (as scikit-build-core passes it: the numeric release for project(), the full
# string, pre-release suffix included, for aces_fast._core.__version__)
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' src/aces_fast/__init__.py)
release=$(printf '%s\n' "$version" | sed 's/^\([0-9][0-9.]*[0-9]\).*/\1/')
cmake -S . -B build/dev -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSKBUILD_PROJECT_NAME=aces_fast -DSKBUILD_PROJECT_VERSION="$release" \
  -DSKBUILD_PROJECT_VERSION_FULL="$version" \
  -Dpybind11_DIR="$pybind_dir" -DPython_EXECUTABLE="$(command -v "$pyexe")" "$@" >/dev/null
cmake --build build/dev
# copy then rename: overwriting a loaded .so in place crashes running processes
for f in build/dev/_core*.so; do cp "$f" "src/aces_fast/.$(basename "$f").tmp" && mv "src/aces_fast/.$(basename "$f").tmp" "src/aces_fast/$(basename "$f")"; done
echo "built $(ls src/aces_fast/_core*.so)"
