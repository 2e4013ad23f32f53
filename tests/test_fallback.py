"""Without the compiled extension: ``auto`` warns once, naming the reason, and the
advice (the error message, ``show_config``, ``aces-fast config``) fits the case.

Each case runs in a fresh interpreter in which ``aces_fast._core`` is made missing
(``sys.modules`` entry ``None``: the import raises ``ModuleNotFoundError``) or
broken (an import hook whose loader raises the ``ImportError`` a mismatched build
gives), because the extension is imported once per process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import aces_fast

MISSING = "import sys; sys.modules['aces_fast._core'] = None\n"
NO_NUMBA = "sys.modules['numba'] = None\n"
BROKEN = textwrap.dedent("""\
    import importlib.abc, importlib.machinery, sys

    class Broken(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):
            if name == "aces_fast._core":
                return importlib.machinery.ModuleSpec(name, self)
            return None
        def create_module(self, spec):
            raise ImportError("_core.so: undefined symbol: _ZN9aces_fast4kernE")
        def exec_module(self, module):
            pass

    sys.meta_path.insert(0, Broken())
    """)

CALLS = textwrap.dedent("""\
    import json, warnings
    import numpy as np
    import aces_fast as af
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backends = [af.aces_c(np.eye(4, dtype=np.uint8)).backend,
                    af.rerank(np.eye(4, dtype=np.uint8), "majority").backend,
                    af.loo_auc(np.eye(4, dtype=np.uint8)).shape[0]]
    try:
        af.aces_c(np.eye(4, dtype=np.uint8), backend="cpp")
        cpp_error = None
    except af.BackendUnavailableError as exc:
        cpp_error = str(exc)
    print(json.dumps({"backends": backends,
                      "warnings": [(w.category.__name__, str(w.message)) for w in caught],
                      "cpp_error": cpp_error, "available": af.available_backends()}))
    """)


def _python(code: str, cwd: Path, env_extra=None, args=()) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("ACES_FAST_BACKEND", None)
    env.pop("PYTHONWARNINGS", None)
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _run(code: str, cwd: Path, env_extra=None) -> dict:
    proc = _python(code, cwd, env_extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


INSTALLED = Path(aces_fast.__file__).resolve().parent


def test_missing_extension_warns_once_naming_the_reason_and_the_build(tmp_path):
    out = _run(MISSING + NO_NUMBA + CALLS, tmp_path)
    assert out["backends"][:2] == ["numpy", "numpy"]
    assert "cpp" not in out["available"]
    assert len(out["warnings"]) == 1, out["warnings"]  # three calls, one warning
    category, text = out["warnings"][0]
    assert category == "RuntimeWarning"
    assert text.startswith(
        "aces_fast runs on the numpy backend (up to 1000x slower than the "
        "compiled cpp backend), because cpp is unavailable: "
    )
    assert f"aces_fast._core is missing from {INSTALLED}" in text
    assert "`pip install .` from a checkout" in text and "C++17 compiler" in text
    assert "CMake >= 3.15" in text
    assert "pass backend='numpy' or set ACES_FAST_BACKEND=numpy" in text
    # asking for cpp by name: an error with the same remedy, no warning needed
    assert out["cpp_error"].startswith(
        "backend 'cpp' is unavailable: the compiled extension aces_fast._core is missing from"
    )
    assert "`pip install .`" in out["cpp_error"] and "backend='numpy'" in out["cpp_error"]


def test_fallback_to_numba_is_named_too(tmp_path):
    pytest.importorskip("numba")
    # the backend auto picks, without calling a kernel (numba's JIT takes tens of seconds)
    code = MISSING + textwrap.dedent("""\
        import json, warnings
        from aces_fast.backends import resolve_backend
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            names = [resolve_backend(None).name, resolve_backend("auto").name]
        print(json.dumps({"backends": names, "warnings": [str(w.message) for w in caught]}))
        """)
    out = _run(code, tmp_path)
    assert out["backends"] == ["numba", "numba"]
    assert len(out["warnings"]) == 1
    assert out["warnings"][0].startswith(
        "aces_fast runs on the numba backend (slower than the "
        "compiled cpp backend), because cpp is unavailable"
    )


def test_an_explicit_choice_does_not_warn(tmp_path):
    out = _run(MISSING + NO_NUMBA + CALLS, tmp_path, {"ACES_FAST_BACKEND": "numpy"})
    assert out["backends"][:2] == ["numpy", "numpy"] and out["warnings"] == []


def test_broken_extension_shows_its_import_error(tmp_path):
    out = _run(BROKEN + NO_NUMBA + CALLS, tmp_path)
    assert len(out["warnings"]) == 1
    text = out["warnings"][0][1]
    assert (
        f"the compiled extension aces_fast._core in {INSTALLED} failed to import: "
        "ImportError: _core.so: undefined symbol: _ZN9aces_fast4kernE"
    ) in text
    assert "Rebuild it for this Python with `pip install .`" in text
    assert "_core is missing" not in text


def test_show_config_and_cli_give_the_advice(tmp_path):
    code = MISSING + NO_NUMBA + "import aces_fast as af; af.show_config()"
    proc = _python(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    cpp = next(line for line in lines if line.lstrip().startswith("cpp"))
    assert "no   the compiled extension aces_fast._core is missing" in cpp
    assert "`pip install .`" in cpp
    assert lines[-1] == (
        "auto (CPU input) runs on: numpy -- slower than cpp; see the cpp line above for the remedy"
    )
    assert proc.stderr == ""  # show_config explains; it does not also warn

    # the command line: one 'aces-fast: warning:' line, the result on stdout
    np_file = tmp_path / "m.csv"
    np_file.write_text("1,0\n0,1\n1,1\n")
    code = MISSING + NO_NUMBA + "from aces_fast.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = _python(code, tmp_path, args=("rerank", str(np_file), "--json"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["backend"] == "numpy"
    err = proc.stderr.splitlines()
    assert len(err) == 1 and err[0].startswith(
        "aces-fast: warning: aces_fast runs on the numpy backend"
    ), proc.stderr
    assert "pip install ." in err[0]


def test_a_source_folder_without_the_extension_says_so(tmp_path):
    # a checkout whose src/ is put on the path instead of the installed package
    checkout = tmp_path / "checkout"
    shutil.copytree(
        INSTALLED,
        checkout / "src" / "aces_fast",
        ignore=shutil.ignore_patterns("_core*", "__pycache__", "data"),
    )
    (checkout / "pyproject.toml").write_text("[project]\nname = 'aces_fast'\n")
    out = _run("import sys\n" + NO_NUMBA + CALLS, checkout, {"PYTHONPATH": str(checkout / "src")})
    assert out["backends"][:2] == ["numpy", "numpy"]
    ((_, text),) = out["warnings"]
    package = checkout / "src" / "aces_fast"
    assert (
        f"aces_fast was imported from the source folder {package}, which holds no compiled "
        f"extension aces_fast._core. Run `pip install .` in {checkout}"
    ) in text
    assert "take src/ off PYTHONPATH" in text and "tools/dev_build.sh" in text
