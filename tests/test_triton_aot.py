"""The torch backend's Triton kernels compiled for Hopper (sm_90) without a GPU
(tools/triton_aot.py): every launch configuration the package uses compiles
and keeps its values in registers.

Needs Triton (CI installs the GPU machine's version, README's test command);
the compile needs no GPU and no CUDA driver, only Triton's own ``ptxas`` and
``cuobjdump``. Skipped where Triton is not installed (a CPU-only torch does not
bring it).
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
triton = pytest.importorskip("triton")

from aces_fast.backends.torch import count_kernels
from helpers import load_tool


@pytest.fixture(scope="module")
def tool():
    return load_tool("triton_aot")


def test_every_launch_configuration_compiles_without_spills(tool, capsys):
    assert tool.main([]) == 0
    out = capsys.readouterr().out
    # the extremes of every tile height up to MAX_ROWS were compiled
    rows = 1
    while rows <= count_kernels.MAX_ROWS:
        assert f"loo rows={rows} tests=1 " in out
        rows *= 2
    assert out.count("pair fp64") == 4 and out.count("pair fp32") == 4
    assert "row scores" in out


def test_a_taller_tile_would_spill(tool):
    """Why MAX_ROWS is 512: the 1024-row tile keeps part of each thread's state in
    local memory, which the check reports (and would fail on)."""
    config = dict(count_kernels.loo_config(count_kernels.MAX_ROWS, 1), ROWS=1024)
    (case,) = [c for c in tool._cases(False) if c[0] == "loo rows=1 tests=1"]
    _, fn, sig, _ = case
    res = tool._resources(tool._compile(fn, sig, config, 90), tool._cuobjdump())
    assert res["stack"] > 0
    small = tool._resources(
        tool._compile(fn, sig, count_kernels.loo_config(count_kernels.MAX_ROWS, 1), 90),
        tool._cuobjdump(),
    )
    assert small["stack"] == 0 and 0 < small["regs"] <= 255


def test_the_tilings_the_sweep_times_compile_without_spills(tool, capsys):
    """tools/triton_sweep.py times other tilings on the next GPU: each of them
    compiles for sm_90 and keeps its values in registers, so no GPU time goes
    to a tiling that cannot win."""
    assert tool.main(["--sweep"]) == 0
    out = capsys.readouterr().out
    sweep = tool._sweep_cases()
    assert len(sweep) == out.count("\n") - 3  # the header lines and the verdict
    assert {label.split()[0] for label, *_ in sweep} == {"pair", "loo", "row"}
