"""The environment variables, declared once (``aces_fast._env``): every on/off switch
read the same way, every variable the docs describe listed by ``config()``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import aces_fast as af
from aces_fast import _env

DOCS = Path(__file__).resolve().parents[1] / "docs" / "backends.rst"


@pytest.mark.parametrize("word", [*_env.ON, " TRUE ", "On", "YES"])
def test_on_words(monkeypatch, word):
    monkeypatch.setenv("ACES_FAST_TEST_SWITCH", word)
    assert _env.flag("ACES_FAST_TEST_SWITCH", False) is True


@pytest.mark.parametrize("word", [*_env.OFF, " FALSE", "Off", "NO "])
def test_off_words(monkeypatch, word):
    monkeypatch.setenv("ACES_FAST_TEST_SWITCH", word)
    assert _env.flag("ACES_FAST_TEST_SWITCH", True) is False


@pytest.mark.parametrize("value", [None, "", "   "])
@pytest.mark.parametrize("default", [True, False])
def test_unset_or_blank_is_the_default(monkeypatch, value, default):
    if value is None:
        monkeypatch.delenv("ACES_FAST_TEST_SWITCH", raising=False)
    else:
        monkeypatch.setenv("ACES_FAST_TEST_SWITCH", value)
    assert _env.flag("ACES_FAST_TEST_SWITCH", default) is default


@pytest.mark.parametrize("value", ["2", "maybe", "onn", "-1", "enable"])
def test_anything_else_is_an_error_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("ACES_FAST_TEST_SWITCH", value)
    with pytest.raises(ValueError, match=rf"^ACES_FAST_TEST_SWITCH={value!r} is not a switch: use"):
        _env.flag("ACES_FAST_TEST_SWITCH", True)


def _documented() -> list[str]:
    """The variables docs/backends.rst's "Environment variables" section describes."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("Environment variables\n---------------------\n", 1)[1]
    section = re.split(r"\n[^\n]+\n-{4,}\n", section, maxsplit=1)[0]
    return re.findall(r"^``([A-Z][A-Z0-9_]+)``$", section, flags=re.M)


def test_config_lists_every_documented_variable(monkeypatch):
    documented = _documented()
    assert "ACES_FAST_TORCH_TRITON" in documented and "ACES_FAST_SIMD" in documented
    assert sorted(documented) == sorted(_env.VARIABLES)
    monkeypatch.setenv("ACES_FAST_TORCH_TRITON", "1")
    env = af.config()["env"]
    assert list(env) == list(_env.VARIABLES) and env["ACES_FAST_TORCH_TRITON"] == "1"
