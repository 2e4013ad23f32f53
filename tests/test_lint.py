"""The tree is linted and formatted as configured (issue #25, "habits").

ruff (lint and format, ``[tool.ruff]`` in pyproject.toml) over every Python
file, clang-format (``.clang-format``) over ``csrc/``; the same checks run as
pre-commit hooks (``.pre-commit-config.yaml``), at the versions the ``test``
extra pins. Fix a failure with ``ruff check --fix . && ruff format .`` and
``clang-format -i csrc/*/*.[ch]pp``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[test]' brings it")
    return found


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)


def _pins() -> dict:
    text = (ROOT / "pyproject.toml").read_text()
    return dict(re.findall(r'"(ruff|clang-format)==([0-9.]+)"', text))


def test_ruff_lint_is_clean():
    proc = _run(_tool("ruff"), "check", "--no-cache", "--output-format", "concise", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_is_applied():
    proc = _run(_tool("ruff"), "format", "--no-cache", "--check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_clang_format_is_applied():
    files = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "csrc").rglob("*")
        if p.suffix in (".cpp", ".hpp", ".h")
    )
    assert len(files) > 20
    proc = _run(_tool("clang-format"), "--dry-run", "--Werror", *files)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_tools_are_the_pinned_versions():
    """A newer formatter formats differently: the suite and the hooks agree."""
    pins = _pins()
    assert set(pins) == {"ruff", "clang-format"}
    assert _run(_tool("ruff"), "--version").stdout.split()[1] == pins["ruff"]
    assert pins["clang-format"] in _run(_tool("clang-format"), "--version").stdout
    hooks = (ROOT / ".pre-commit-config.yaml").read_text()
    assert f"rev: v{pins['ruff']}\n" in hooks
    assert f"rev: v{pins['clang-format']}\n" in hooks
