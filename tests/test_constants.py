"""The contract's numeric constants are defined once (aces_fast._constants); the
C++ core's copies must agree with them, and every Python backend uses them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aces_fast import _constants as C

CSRC = Path(__file__).resolve().parents[1] / "csrc"


def _constexpr(path: Path, name: str) -> float:
    text = (CSRC / path).read_text()
    found = re.findall(rf"constexpr\s+\w+\s+{name}\s*=\s*([0-9.eE+-]+);", text)
    assert len(found) == 1, f"{path}: {name} defined {len(found)} times"
    return float(found[0])


@pytest.mark.parametrize(
    ("path", "name", "value"),
    [
        ("kernels/adam.hpp", "kBeta1", C.ADAM_BETA1),
        ("kernels/adam.hpp", "kBeta2", C.ADAM_BETA2),
        ("kernels/adam.hpp", "kEps", C.ADAM_EPS),
        ("kernels/adam.hpp", "kSnapRtol", C.SNAP_RTOL),
        ("methods/methods.cpp", "kWarmEps", C.WARM_EPS),
        ("simd/simd.cpp", "kMaxTot16", C.NARROW_MAX_TOTAL),
    ],
)
def test_the_cpp_constants_agree(path, name, value):
    assert _constexpr(Path(path), name) == value


def test_no_hand_copies_in_the_sources():
    """The values appear as numbers in the code (not in docs or comments) only
    where they are defined."""
    import io
    import tokenize

    src = Path(C.__file__).parent
    copies = {"0.999", "1e-10", "1e-3", "361"}
    for py in src.rglob("*.py"):
        if py.name == "_constants.py":
            continue
        tokens = tokenize.generate_tokens(io.StringIO(py.read_text()).readline)
        found = [t.string for t in tokens if t.type == tokenize.NUMBER and t.string in copies]
        assert not found, f"{py}: a copy of a contract constant: {found}"
    assert (CSRC / "methods" / "methods.cpp").read_text().count("1e-3") == 1


def test_the_backends_use_them():
    from aces_fast import _registry, _semantics
    from aces_fast.backends import numpy as np_backend

    assert _registry.DEFAULT_TIE_TOL == C.DEFAULT_TIE_TOL
    assert _semantics.WARM_EPS == C.WARM_EPS
    assert np_backend.SNAP_RTOL == C.SNAP_RTOL
    numba = pytest.importorskip("numba")  # noqa: F841
    from aces_fast.backends.numba import loo_auc

    assert loo_auc.NARROW_MAX_TOTAL == C.NARROW_MAX_TOTAL
