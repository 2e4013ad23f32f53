"""Every backend is the ``nx`` the method semantics are written against.

:class:`aces_fast._ops.ArrayOps` states the kernels and primitives
``aces_fast._semantics`` calls; mypy checks the calls, and these tests check
that each backend really provides them, callable as the semantics call them.
"""

from __future__ import annotations

import numpy as np
import pytest

from aces_fast import _semantics
from aces_fast._ops import ArrayOps, missing_ops
from aces_fast.backends import BackendUnavailableError, get_backend
from aces_fast.backends.base import ArrayBackend


@pytest.mark.parametrize("name", ["numpy", "cpp", "numba", "torch"])
def test_each_backend_provides_every_op(name):
    try:
        be = get_backend(name)
    except BackendUnavailableError as exc:
        pytest.skip(f"{name} not installed: {exc}")
    assert isinstance(be, ArrayOps)
    assert missing_ops(be) == []


def test_a_backend_lacking_or_misnaming_an_op_is_named():
    class Partial(ArrayBackend):
        cummax = None  # type: ignore[assignment]

        @staticmethod
        def take(x, where):  # another name: a keyword call would fail
            return x[where]

        @staticmethod
        def where(cond, a, b, /):  # positional-only, as NumPy's ufuncs: fine
            return np.where(cond, a, b)

        @staticmethod
        def arange(start, stop):  # no ``like``: torch needs it for the device
            return np.arange(start, stop)

        @staticmethod
        def scatter(idx, values, out):  # an extra required argument
            return out

    wrong = missing_ops(Partial())
    assert "cummax" in wrong
    assert "arange(start, stop, like)" in wrong
    assert "scatter(idx, values)" in wrong
    assert "take(x, idx)" in wrong
    assert not any(w.startswith("where") for w in wrong)
    assert len(wrong) == 4, wrong
    assert not isinstance(object(), ArrayOps)


def test_the_semantics_run_on_the_protocol_alone():
    """descending_order needs nothing beyond ArrayOps (a plain ArrayBackend)."""
    s = np.array([0.5, 2.0, 2.0, -1.0])
    assert _semantics.descending_order(ArrayBackend(), s).tolist() == [1, 2, 0, 3]
