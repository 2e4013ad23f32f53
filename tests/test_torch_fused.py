"""The torch backend's fused mode (``TorchBackend(fused=True)``, ``ACES_FAST_TORCH_FUSED``):
the surrogate's pair sums compiled (``torch.compile``) with no pair tensor.

The fused computation must give what the eager, chunked one gives up to
summation order -- the surrogate kernel and ACES-O per task and in a batch --
and what the NumPy reference gives; the Adam loop must stay graph-ready (the
same step, replayed, gives the same bits). On CUDA the same runs without a
host synchronization in the loop.

Compiling costs seconds per shape rank, dtype and branch, so the cases here
share a few of them: tasks of one and of many, float64 and float32, the
exp-trick and the sigmoid branch.
"""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import aces_fast as af
from aces_fast import _registry
from aces_fast.backends import BackendUnavailableError
from aces_fast.backends import numpy as ref
from aces_fast.backends import torch as torch_backend
from aces_fast.backends.torch import FLOAT32_RTOL, FLOAT32_WEIGHT_ATOL, TorchBackend
from aces_fast.backends.torch import aces_o as torch_aces_o
from aces_fast.backends.torch import fused as torch_fused
from helpers import (
    EXAMPLE,
    INTERRUPT_CHILD_HEAD,
    INTERRUPT_CHILD_TAIL,
    assert_sigint_interrupts,
    npy,
    random_matrix,
    require_backend,
    strict_adam_loop,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread", "fused_small")
CPU = torch.device("cpu")


@pytest.fixture
def fused_small(monkeypatch):
    """The fused mode for every size: on CPU tensors it computes only from
    ``CPU_MIN_ROWS`` distinct rows (faster there), larger than these tests' tasks
    (and on one thread, which ``one_torch_thread`` gives)."""
    monkeypatch.setattr(torch_fused, "CPU_MIN_ROWS", 2)


RNG = np.random.default_rng(2026)
EAGER = TorchBackend()


@pytest.fixture(scope="module")
def fused():
    try:
        return TorchBackend(fused=True)
    except RuntimeError as exc:  # pragma: no cover - torch.compile unsupported here
        pytest.fail(f"torch.compile should run on this machine: {exc}")


def _matrices():
    """Duplicate rows, constant columns, a test without failers, ties."""
    with_const = random_matrix(RNG, 30, 14, 0.5, dup_rows=8)
    with_const[:, 3] = 1
    with_const[:, 9] = 0
    return [
        EXAMPLE,
        with_const,
        random_matrix(RNG, 45, 25, 0.3, dup_rows=10),
        random_matrix(RNG, 12, 40, 0.7),
    ]


MATRICES = _matrices()


def _weights(m: int) -> np.ndarray:
    w = RNG.random(m)
    return w / w.sum()


# 5 000 times the largest weight is beyond the exp trick's range: torch.sigmoid
@pytest.mark.parametrize("gamma", [10.0, 5000.0])
def test_fused_surrogate_equals_eager_and_reference(fused, gamma):
    for B in MATRICES:
        w = _weights(B.shape[1])
        counts = RNG.integers(0, 4, B.shape[0])
        for c in (None, counts):
            L, J, g = fused.surrogate(B, w, gamma, c)
            L0, J0, g0 = EAGER.surrogate(B, w, gamma, c)
            Lr, Jr, gr = ref.surrogate(B, w, gamma, c)
            np.testing.assert_array_equal(np.isnan(L), np.isnan(Lr))
            for got in ((L, J, g), (L0, J0, g0)):
                np.testing.assert_allclose(got[0], Lr, rtol=1e-12, atol=1e-14)
                np.testing.assert_allclose(got[1], Jr, rtol=1e-12, atol=1e-14)
                np.testing.assert_allclose(got[2], gr, rtol=1e-12, atol=1e-12)


def test_fused_surrogate_on_tensors_stays_on_their_device(fused):
    B = torch.from_numpy(MATRICES[1])
    w = torch.from_numpy(_weights(B.shape[1]))
    L, J, g = fused.surrogate(B, w, 10.0)
    L0, J0, g0 = EAGER.surrogate(B, w, 10.0)
    assert isinstance(J, torch.Tensor) and J.dim() == 0
    for a, b in ((L, L0), (J, J0), (g, g0)):
        assert a.device == b.device and a.dtype == b.dtype == torch.float64
        np.testing.assert_allclose(npy(a), npy(b), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    ("method", "gamma"), [("aces-o", 10.0), ("aces-o-warm", 10.0), ("aces-o", 750.0)]
)
def test_fused_aces_o_equals_eager_per_task_and_in_a_batch(fused, method, gamma):
    """gamma 750: the Adam loop's weights are only known to be <= 1, and 750 is
    beyond the exp trick's range, so the sigmoid branch runs."""
    params = _registry.method_params(method, {"steps": 30, "top_k": None, "gamma": gamma})
    tasks = [EAGER.prepare(B) for B in MATRICES]
    eager = [EAGER.rerank(B, method, params) for B in tasks]
    single = [fused.rerank(B, method, params) for B in tasks]
    batch = fused.rerank_batch(tasks, method, params, None)
    for want, got_single, got_batch in zip(eager, single, batch):
        for got in (got_single, got_batch):
            np.testing.assert_allclose(npy(got.weights), npy(want.weights), rtol=0, atol=1e-12)
            np.testing.assert_allclose(npy(got.objective), npy(want.objective), rtol=0, atol=1e-12)
            np.testing.assert_array_equal(npy(got.order), npy(want.order))
            assert got.method == want.method


def test_fused_aces_o_matches_the_reference_backend(fused):
    require_backend("cpp")
    for B in MATRICES:
        want = af.aces_o(B, steps=40, top_k=None, backend="numpy")
        params = _registry.method_params("aces-o", {"steps": 40, "top_k": None})
        got = fused.rerank(fused.prepare(B), "aces-o", params)
        np.testing.assert_allclose(got.weights, want.weights, rtol=0, atol=1e-9)
        np.testing.assert_array_equal(got.order, want.order)


def test_fused_float32_mode_within_its_documented_bounds():
    be = TorchBackend(dtype="float32", fused=True)
    for B in MATRICES[1:3]:
        w = _weights(B.shape[1])
        L, J, g = be.surrogate(B, w, 10.0)
        Lr, Jr, gr = ref.surrogate(B, w, 10.0)
        ok = ~np.isnan(Lr)
        np.testing.assert_allclose(L[ok], Lr[ok], rtol=FLOAT32_RTOL)
        assert abs(J - Jr) <= FLOAT32_RTOL * w.sum()
        assert np.max(np.abs(g - gr)) <= FLOAT32_RTOL * np.max(np.abs(gr))
        params = _registry.method_params("aces-o", {"steps": 30, "top_k": None})
        got = be.rerank(be.prepare(B), "aces-o", params)
        want = EAGER.rerank(EAGER.prepare(B), "aces-o", params)
        np.testing.assert_allclose(got.weights, want.weights, rtol=0, atol=FLOAT32_WEIGHT_ATOL)


def test_fused_adam_loop_replayed_as_a_graph_gives_the_same_bits(fused, monkeypatch):
    """The fused step keeps the CUDA graph protocol (warm-up, capture, replays) on
    CPU tensors: replaying gives the eager loop's bits."""
    calls = []

    class Replay:
        def __init__(self):
            self.step = None

        def warm_up(self, step):
            step()

        def capture(self, step):
            self.step = step

        def replay(self):
            calls.append(1)
            self.step()

    steps = 12
    params = _registry.method_params("aces-o", {"steps": steps, "top_k": None})
    tasks = [fused.prepare(torch.from_numpy(B)) for B in MATRICES[1:3]]
    eager = [fused.rerank(B, "aces-o", params) for B in tasks]
    monkeypatch.setattr(torch_aces_o, "step_graph", lambda device: Replay)
    replayed = [fused.rerank(B, "aces-o", params) for B in tasks]
    assert len(calls) == len(tasks) * (steps - 2)
    for a, b in zip(eager, replayed):
        np.testing.assert_array_equal(npy(a.weights), npy(b.weights))
        np.testing.assert_array_equal(npy(a.objective), npy(b.objective))


def test_fused_mode_allocates_no_pair_workspace(fused, monkeypatch):
    """No (k, T, U, U) pair tensor: the workspace the eager path sizes by the pair
    budget is empty in fused mode."""
    from aces_fast.backends.torch import surrogate as torch_surrogate

    sizes = []
    real = torch_surrogate.Workspace

    def recording(entries, dtype, device):
        sizes.append(entries)
        return real(entries, dtype, device)

    monkeypatch.setattr(torch_aces_o, "Workspace", recording)
    params = _registry.method_params("aces-o", {"steps": 3, "top_k": None})
    B = fused.prepare(MATRICES[2])
    fused.rerank(B, "aces-o", params)
    EAGER.rerank(B, "aces-o", params)
    assert sizes[0] == 0 and sizes[1] > 0


def _step_events(be, B, steps=(6, 10)):
    """Profiler events per Adam step (ops and compiled regions): the counts of a fit
    of ``steps[1]`` steps minus one of ``steps[0]``, per step."""
    from collections import Counter

    from torch.profiler import ProfilerActivity, profile

    counts = []
    for k in steps:
        params = _registry.method_params("aces-o", {"steps": k, "top_k": None})
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            be.rerank(B, "aces-o", params)
        counts.append(Counter(e.name for e in prof.events()))
    diff = counts[1]
    diff.subtract(counts[0])
    return {name: v / (steps[1] - steps[0]) for name, v in diff.items() if v}


def test_a_fused_step_runs_one_compiled_region_and_no_pair_ops(fused):
    """Each Adam step calls the compiled pair sums once; the eager path's per-pair
    ops (the sigmoid's reciprocal, sigma' by addcmul, the pair mat-vecs) are gone."""
    B = fused.prepare(torch.from_numpy(MATRICES[2]))
    per_step = _step_events(fused, B)
    eager = _step_events(EAGER, B)
    regions = {k: v for k, v in per_step.items() if k.startswith("Torch-Compiled Region")}
    assert sum(regions.values()) == 1, per_step
    assert not any(k.startswith("Torch-Compiled Region") for k in eager)
    assert eager.get("aten::reciprocal_") == 1 and "aten::reciprocal_" not in per_step
    assert eager.get("aten::addcmul", 0) >= 1 and "aten::addcmul" not in per_step
    assert per_step["aten::bmm"] < eager["aten::bmm"]  # only s = B w, <w, g> and J


def test_fused_mode_falls_back_where_nothing_would_compile(fused):
    """Under a TorchDispatchMode or with Dynamo disabled, torch.compile runs nothing
    compiled; the fused backend then takes the chunked eager path (never the
    uncompiled pair_terms, which would hold every pair at once) and gives its bits."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    B = fused.prepare(MATRICES[1])
    params = _registry.method_params("aces-o", {"steps": 5, "top_k": None})
    want = EAGER.rerank(B, "aces-o", params)
    with Passthrough():
        assert not torch_fused.fused_usable()
        got = fused.rerank(B, "aces-o", params)
    np.testing.assert_array_equal(got.weights, want.weights)
    import torch._dynamo

    with torch._dynamo.config.patch(disable=True):
        assert not torch_fused.fused_usable()
        got = fused.rerank(B, "aces-o", params)
    np.testing.assert_array_equal(got.weights, want.weights)
    assert torch_fused.fused_usable()


def test_warmup_compiles_what_later_calls_run(fused):
    """``warmup`` compiles both branches for a batch of one and of many; afterwards
    no call compiles again, whatever its sizes: single calls, batches, the public
    surrogate on both branches, and the shapes that run chunked (one distinct row,
    one test)."""
    import torch._dynamo.utils

    facts = af.warmup("numpy")  # nothing to do elsewhere: unchanged
    assert set(facts) == {"backend", "seconds"}
    facts = fused.warmup()
    assert facts["fused"] is True and facts["compiled"] >= 4 and "cpu" in facts["steps"]
    assert EAGER.warmup() == {}
    stats = torch._dynamo.utils.counters["stats"]
    graphs = stats["unique_graphs"]
    params = _registry.method_params("aces-o", {"steps": 4, "top_k": None})
    one_row = np.repeat(MATRICES[1][:1], 6, axis=0)
    one_test = MATRICES[2][:, :1]
    for B in [*MATRICES, one_row, one_test]:
        prepared = fused.prepare(B)
        fused.rerank(prepared, "aces-o", params)
        fused.rerank_batch([prepared, fused.prepare(MATRICES[0])], "aces-o", params, None)
        for gamma in (10.0, 5000.0):
            fused.surrogate(B, np.full(B.shape[1], 1 / B.shape[1]), gamma)
    assert stats["unique_graphs"] == graphs


def test_one_row_or_one_test_runs_chunked(fused, monkeypatch):
    """Shapes with a size of 1 (which would compile graphs of their own) take the
    eager path: pair tensors in a workspace, the eager bits."""
    from aces_fast.backends.torch import surrogate as torch_surrogate

    assert torch_fused.runs_fused(True, 2, 2, CPU) and not torch_fused.runs_fused(False, 9, 9, CPU)
    assert not torch_fused.runs_fused(True, 1, 9, CPU)
    assert not torch_fused.runs_fused(True, 9, 1, CPU)
    sizes = []
    real = torch_surrogate.Workspace
    monkeypatch.setattr(torch_aces_o, "Workspace", lambda e, d, v: sizes.append(e) or real(e, d, v))
    params = _registry.method_params("aces-o", {"steps": 6, "top_k": None})
    B = MATRICES[2][:, :1].copy()
    got = fused.rerank(fused.prepare(B), "aces-o", params)
    want = EAGER.rerank(EAGER.prepare(B), "aces-o", params)
    assert sizes[0] > 0
    np.testing.assert_array_equal(got.weights, want.weights)


def test_on_the_cpu_few_rows_or_several_threads_run_eagerly(fused, monkeypatch):
    """Below ``CPU_MIN_ROWS`` distinct rows the eager pair tensors, in cache, are
    faster on the CPU, and so is the eager path on more than one thread: the
    fused mode leaves those cases alone (the same bits as the default mode), and
    computes from that many rows on one thread."""
    from aces_fast.backends.torch import surrogate as torch_surrogate

    monkeypatch.setattr(torch_fused, "CPU_MIN_ROWS", 64)
    assert not torch_fused.runs_fused(True, 63, 50, CPU)
    assert torch_fused.runs_fused(True, 64, 50, CPU)
    # a GPU: every size (the rule only; no device needed)
    assert torch_fused.runs_fused(True, 2, 50, torch.device("cuda"))
    calls = []
    real = torch_surrogate.compiled_pair_terms

    def counting(exp_trick):
        fn = real(exp_trick)
        return lambda *a: calls.append(1) or fn(*a)

    monkeypatch.setattr(torch_surrogate, "compiled_pair_terms", counting)
    params = _registry.method_params("aces-o", {"steps": 5, "top_k": None})
    small = fused.prepare(MATRICES[2])  # 45 rows, 35 of them distinct
    got = fused.rerank(small, "aces-o", params)
    assert not calls
    np.testing.assert_array_equal(got.weights, EAGER.rerank(small, "aces-o", params).weights)
    big = fused.prepare(random_matrix(RNG, 80, 12, 0.5))
    got = fused.rerank(big, "aces-o", params)
    assert len(calls) == 6  # the first J, then one per step
    want = EAGER.rerank(big, "aces-o", params)
    np.testing.assert_allclose(got.weights, want.weights, rtol=0, atol=1e-12)
    threads = torch.get_num_threads()
    try:  # with more intra-op threads the eager path scaled and the compiled did not
        torch.set_num_threads(2)
        assert not torch_fused.runs_fused(True, 4000, 50, CPU)
        got = fused.rerank(big, "aces-o", params)
        want = EAGER.rerank(big, "aces-o", params)
    finally:
        torch.set_num_threads(threads)
    assert len(calls) == 6
    np.testing.assert_array_equal(got.weights, want.weights)


@pytest.mark.parametrize(
    ("value", "on"),
    [(None, False), ("", False), ("0", False), ("1", True), (" TRUE ", True), ("on", True)],
)
def test_the_environment_variable_turns_fused_mode_on(monkeypatch, value, on):
    if value is None:
        monkeypatch.delenv(torch_fused.FUSED_ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(torch_fused.FUSED_ENV_VAR, value)
    assert torch_fused.env_fused() is on
    be = torch_backend.load()
    assert be.fused is on and be.info()["fused"] is on


def test_a_misspelt_switch_makes_the_backend_unavailable(monkeypatch):
    monkeypatch.setenv(torch_fused.FUSED_ENV_VAR, "maybe")
    with pytest.raises(
        BackendUnavailableError, match="ACES_FAST_TORCH_FUSED='maybe' is not a switch"
    ):
        torch_backend.load()


def test_fused_must_be_a_bool():
    with pytest.raises(TypeError, match="fused must be a bool"):
        TorchBackend(fused="yes")


def test_fused_mode_without_torch_compile_is_a_clear_error(monkeypatch):
    import torch._dynamo

    monkeypatch.setattr(torch._dynamo, "is_dynamo_supported", lambda: False)
    with pytest.raises(RuntimeError, match="fused mode needs torch.compile"):
        TorchBackend(fused=True)
    monkeypatch.setenv(torch_fused.FUSED_ENV_VAR, "1")
    with pytest.raises(BackendUnavailableError, match=torch_fused.FUSED_ENV_VAR):
        torch_backend.load()
    TorchBackend()  # the default needs no compiler


# ---------------------------------------------------------------------------
# CUDA: the fused Adam loop without a host synchronization, against cpp

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.cuda
@cuda
@pytest.mark.parametrize("method", ["aces-o", "aces-o-warm"])
def test_cuda_fused_aces_o_loop_without_syncs(fused, method, monkeypatch):
    require_backend("cpp")
    strict_adam_loop(monkeypatch)
    monkeypatch.delenv("ACES_FAST_TORCH_TRITON", raising=False)  # else the Triton kernel runs
    params = _registry.method_params(method, {"top_k": None})
    tasks = [fused.prepare(torch.from_numpy(B).cuda()) for B in MATRICES]
    single = [fused.rerank(B, method, params) for B in tasks]
    batch = fused.rerank_batch(tasks, method, params, None)
    for k, B in enumerate(MATRICES):
        want = af.rerank(B, method, backend="cpp", top_k=None)
        for got in (single[k], batch[k]):
            assert got.weights.device.type == "cuda"
            np.testing.assert_allclose(npy(got.weights), want.weights, rtol=0, atol=1e-9)
            np.testing.assert_array_equal(npy(got.order), want.order)


def test_cli_warmup_reports_the_fused_compilation():
    """``aces-fast warmup --backend torch``: one line, whichever the mode."""
    import os
    import subprocess

    def warmup(**env):
        return subprocess.run(
            [sys.executable, "-m", "aces_fast", "warmup", "--backend", "torch", "-q"],
            env=dict({k: v for k, v in os.environ.items() if k != "ACES_FAST_TORCH_FUSED"}, **env),
            capture_output=True,
            text=True,
            timeout=600,
        )

    out = warmup(ACES_FAST_TORCH_FUSED="1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("torch: fused pair sums ready in ")
    want = 8 if torch.cuda.is_available() else 4  # per device: two branches, two ranks
    assert f"{want} variants compiled: cpu " in out.stdout and out.stdout.count("\n") == 1
    out = warmup()
    assert out.returncode == 0 and out.stdout == "torch: nothing to compile\n", out


@pytest.mark.parametrize("m", [2, 3, 5, 7, 40, 41])
@pytest.mark.parametrize("per_test", [1, 3, 10, 1 << 30])
def test_fused_call_ranges_cover_the_tests_in_calls_of_two_or_more(monkeypatch, m, per_test):
    monkeypatch.setitem(torch_fused.FUSED_CALL_TERMS, "cpu", 12)
    ranges = torch_fused.fused_call_ranges(per_test, m, CPU)
    assert ranges[0][0] == 0 and ranges[-1][1] == m
    assert all(b == c for (_, b), (c, _) in itertools.pairwise(ranges))
    sizes = [b - a for a, b in ranges]
    assert min(sizes) >= 2 and max(sizes) - min(sizes) <= 3
    assert all(a % 2 == 0 for a, _ in ranges)  # float64 slices stay 16-byte aligned
    k = max(1, 12 // per_test // 2)  # pairs of tests a call may take
    assert all(size <= 2 * k for size in sizes[:-1]) and sizes[-1] <= 2 * k + 1
    assert len(ranges) == max(1, -(-(m // 2) // k))  # as few calls as the cap allows


def test_fused_calls_split_over_tests_give_the_same_fit(fused, monkeypatch):
    """A step split into several compiled calls (a small call budget: what keeps a
    long CPU fit interruptible) agrees with one call, and compiles no new graph."""
    import torch._dynamo.utils

    params = _registry.method_params("aces-o", {"steps": 8, "top_k": None})
    B = fused.prepare(MATRICES[2])
    whole = fused.rerank(B, "aces-o", params)
    stats = torch._dynamo.utils.counters["stats"]
    graphs = stats["unique_graphs"]
    calls = []
    real = torch_fused.fused_call_ranges

    def recording(*args):
        calls.append(real(*args))
        return calls[-1]

    from aces_fast.backends.torch import surrogate as torch_surrogate

    monkeypatch.setitem(torch_fused.FUSED_CALL_TERMS, "cpu", 3 * 35 * 35)
    monkeypatch.setattr(torch_surrogate, "fused_call_ranges", recording)
    split = fused.rerank(B, "aces-o", params)
    assert calls and len(calls[0]) > 3
    assert stats["unique_graphs"] == graphs
    np.testing.assert_allclose(split.weights, whole.weights, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(split.order, whole.order)


FUSED_CHILD = (
    INTERRUPT_CHILD_HEAD
    + r"""
import torch
from aces_fast import _registry
from aces_fast.backends.torch import TorchBackend

torch.set_num_threads(1)  # the fused mode computes on one CPU thread only
be = TorchBackend(fused=True)
Bt = torch.from_numpy(B)
params = _registry.method_params("aces-o", {"top_k": None, "steps": 100_000})
calls = {"rerank": lambda: be.rerank(Bt, "aces-o", params)}
few = _registry.method_params("aces-o", {"top_k": None, "steps": 5})
small_t = torch.from_numpy(np.ascontiguousarray(B[:120]))  # fused on the CPU: >= 64 rows
before = be.rerank(small_t, "aces-o", few)


def same_results():
    after = be.rerank(small_t, "aces-o", few)
    return all(torch.equal(getattr(before, k), getattr(after, k))
               for k in ("weights", "scores", "order", "objective"))
"""
    + INTERRUPT_CHILD_TAIL
)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_interrupts_a_long_fused_fit():
    """4 000 distinct rows x 300 tests, ``top_k=None``: about 5e9 pair terms a step,
    which the fused mode computes in calls of ``FUSED_CALL_TERMS`` (a fraction of
    a second each on the CPU), so Ctrl-C stops the fit promptly."""
    assert_sigint_interrupts(FUSED_CHILD, "rerank", wait=2.0, timeout=120, max_took=10)


def test_a_compile_failure_names_the_fused_mode(fused, monkeypatch):
    """No C++ compiler or Triton surfaces at the first compiled call: the error
    says which option failed and how to turn it off, the compiler's own chained."""
    import torch._dynamo.exc

    def broken(*args):
        raise torch._dynamo.exc.BackendCompilerFailed(
            broken, RuntimeError("no working C++ compiler found"), None
        )

    monkeypatch.setattr(torch_fused, "_compiled", {})
    real_compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: broken)
    try:
        params = _registry.method_params("aces-o", {"steps": 3, "top_k": None})
        with pytest.raises(RuntimeError, match="fused mode could not compile") as info:
            fused.rerank(fused.prepare(MATRICES[2]), "aces-o", params)
    finally:
        monkeypatch.setattr(torch, "compile", real_compile)
    assert torch_fused.FUSED_ENV_VAR in str(info.value)
    assert "(RuntimeError: no working C++ compiler found)" in str(info.value)
    assert isinstance(info.value.__cause__, torch._dynamo.exc.BackendCompilerFailed)
