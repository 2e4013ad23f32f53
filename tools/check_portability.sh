#!/usr/bin/env bash
# Portability checks of csrc/ that run on a Linux host (CONTRIBUTING.md):
#   pedantic  every source with g++ and clang++, -std=c++17 -pedantic -Wall -Wextra -Werror
#   as-msvc   every source as MSVC would take it: after the system headers,
#             __GNUC__/__clang__ undefined and _MSC_VER defined, so simd/vec.hpp
#             uses its struct lanes, portable.hpp its MSVC branch (intrinsics
#             declared here) and dispatch.hpp no x86 variants; syntax only
#   builds    clang++ (with libomp), no OpenMP, and GCC with the struct lanes
#             (-DACES_FAST_NO_VECTOR_EXTENSIONS), each running tests/test_simd.py
#             and the cpp golden digests: the same bits as the GCC build
# A real MSVC or clang-cl build needs Windows (the wheels workflow). Clang's
# x86_64-pc-windows-msvc target cannot stand in here: without MSVC's STL and
# UCRT, glibc's LP64 typedefs clash with Windows' LLP64 long.
# Usage: PYTHON=.venv/bin/python tools/check_portability.sh [pedantic|as-msvc|builds]...
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(pedantic as-msvc builds)
pyinc=$("$py" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
pbinc=$("$py" -c "import pybind11; print(pybind11.get_include())")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
srcs=(csrc/*/*.cpp)
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' src/aces_fast/__init__.py)

pedantic() {
  for cxx in g++ clang++; do
    for f in "${srcs[@]}"; do
      "$cxx" -std=c++17 -pedantic -Wall -Wextra -Werror -fsyntax-only -fopenmp -fvisibility=hidden -Icsrc \
        -isystem "$pbinc" -isystem "$pyinc" "$f"
    done
    echo "pedantic: $cxx, ${#srcs[@]} files clean"
  done
}

as_msvc() {
  {
    grep -rhoE '#include <[^>]+>' csrc | sort -u | grep -v 'cpuid.h\|sys/\|omp.h'
    echo '#include <pybind11/pybind11.h>'
    echo '#include <pybind11/numpy.h>'
    echo '#undef __GNUC__'
    echo '#undef __clang__'
    echo '#define _MSC_VER 1930'
    echo '#define _M_X64 100'
    echo '#undef __x86_64__'
    # <intrin.h> of MSVC, as far as portable.hpp uses it
    echo 'unsigned char _BitScanReverse64(unsigned long*, unsigned long long);'
    echo 'unsigned char _BitScanForward64(unsigned long*, unsigned long long);'
    echo 'unsigned int __popcnt(unsigned int);'
    echo 'unsigned long long __popcnt64(unsigned long long);'
  } > "$tmp/as_msvc.h"
  touch "$tmp/intrin.h"
  for f in "${srcs[@]}"; do
    g++ -std=c++17 -Wall -Wextra -Werror -Wno-unknown-pragmas -Wno-attributes -fsyntax-only -Icsrc -I"$tmp" \
      -isystem "$pbinc" -isystem "$pyinc" -include "$tmp/as_msvc.h" "$f"
  done
  echo "as-msvc: ${#srcs[@]} files clean"
}

build_and_test() {  # name, cmake args...
  local name=$1
  shift
  cmake -S . -B "build/$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSKBUILD_PROJECT_NAME=aces_fast \
    -DSKBUILD_PROJECT_VERSION="${version%%[!0-9.]*}" -DSKBUILD_PROJECT_VERSION_FULL="$version" \
    -Dpybind11_DIR="$("$py" -m pybind11 --cmakedir)" \
    -DPython_EXECUTABLE="$(command -v "$py")" "$@" >/dev/null
  cmake --build "build/$name" >/dev/null
  rm -rf "$tmp/$name" && mkdir -p "$tmp/$name" && cp -r src/aces_fast "$tmp/$name/"
  rm -f "$tmp/$name"/aces_fast/_core*.so && cp "build/$name"/_core*.so "$tmp/$name/aces_fast/"
  PYTHONPATH="$tmp/$name" "$py" -m pytest -q -p no:cacheprovider tests/test_simd.py \
    tests/test_golden.py tests/test_core_kernels.py -k "cpp or simd or module_info or no_openmp" |
    tail -1 | sed "s/^/builds: $name: /"
}

builds() {
  build_and_test clang -DCMAKE_CXX_COMPILER=clang++
  build_and_test no-openmp -DACES_FAST_USE_OPENMP=OFF
  build_and_test struct-lanes -DCMAKE_CXX_FLAGS=-DACES_FAST_NO_VECTOR_EXTENSIONS
}

for s in "${steps[@]}"; do
  case $s in
    pedantic) pedantic ;;
    as-msvc) as_msvc ;;
    builds) builds ;;
    *) echo "unknown step $s" >&2; exit 2 ;;
  esac
done
