"""The package type-checks: mypy over ``src/aces_fast`` with the settings in pyproject.toml.

The package ships ``py.typed`` and a ``_core.pyi`` stub, so users' type checkers read
these annotations; an annotation that contradicts the code would mislead them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_package_type_checks(tmp_path):
    pytest.importorskip("mypy")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success: no issues found" in proc.stdout


#: The modules behind ``aces_fast.__all__``: held to ``mypy --strict``.
PUBLIC_MODULES = [
    "__init__.py",
    "methods.py",
    "batch.py",
    "batch_result.py",
    "result.py",
    "metrics.py",
    "config.py",
    "_cost.py",
    "_types.py",
    "backends/__init__.py",
    "backends/base.py",
    "_ops.py",
]


def test_public_api_is_strictly_typed(tmp_path):
    pytest.importorskip("mypy")
    files = [str(ROOT / "src" / "aces_fast" / f) for f in PUBLIC_MODULES]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--follow-imports=silent",
            "--cache-dir",
            str(tmp_path / "cache"),
            *files,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
