"""``auto``'s host route for small calls on device tensors (issue 22, item 3;
docs/contract.rst §4): cpp ranks (or, for the kernels, computes on) a copy in
host memory and the results come back as tensors on the input's device.

CI has no GPU, so the route is driven with CPU tensors standing in for device
ones (``host_route.applies`` patched to accept them); the device-only parts
(the copies) are the same calls on any device. A cuda-marked test runs the real
thing on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

from aces_fast import METHODS, rerank
from aces_fast.backends import ENV_VAR, call_backend, host_route
from helpers import random_matrix, require_backend

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.filterwarnings("ignore::aces_fast.CostWarning")

RNG = np.random.default_rng(2211)


@pytest.fixture
def cpu_as_device(monkeypatch):
    """CPU tensors take the host route, as small device tensors do."""
    require_backend("cpp")
    monkeypatch.setattr(
        host_route,
        "applies",
        lambda data: (
            isinstance(data, torch.Tensor) and data.numel() <= host_route.HOST_ROUTE_MAX_CELLS
        ),
    )
    monkeypatch.delenv(ENV_VAR, raising=False)


def test_applies_reads_only_where_the_tensor_lives_and_its_size():
    B = random_matrix(RNG, 20, 30)
    assert not host_route.applies(B)  # NumPy
    assert not host_route.applies(torch.from_numpy(B))  # CPU tensors stay on torch/cpp
    assert host_route.applies(torch.empty((2, 3), device="meta")) is False  # no data
    assert host_route.HOST_ROUTE_MAX_CELLS == 1 << 21


@pytest.mark.parametrize("method", list(METHODS))
def test_auto_host_route_equals_cpp_with_tensors_out(cpu_as_device, method):
    B = random_matrix(RNG, 37, 23)
    want = rerank(B, method, backend="cpp")
    on_torch = rerank(torch.from_numpy(B), method, backend="torch")
    for backend in (None, "auto", " AUTO "):
        got = rerank(torch.from_numpy(B), method, backend=backend)
        assert got.backend == "cpp" and got.method == want.method
        assert got.fallback == want.fallback
        for name in ("scores", "weights", "order", "loo_auc", "objective"):
            g, w, t = getattr(got, name), getattr(want, name), getattr(on_torch, name)
            assert (g is None) == (w is None) == (t is None), name
            if g is None:
                continue
            assert isinstance(g, torch.Tensor) and g.dtype == t.dtype, name
            np.testing.assert_array_equal(g.numpy(), w, err_msg=name)
        assert set(got.info) == set(want.info)
        if "rows" in want.info:
            assert isinstance(got.info["rows"], torch.Tensor)
            np.testing.assert_array_equal(got.info["rows"].numpy(), want.info["rows"])


@pytest.mark.parametrize("weighted", [False, True])
def test_auto_host_route_for_the_kernels(cpu_as_device, weighted):
    """loo_auc and surrogate_loo_auc take the route too: cpp's values, as tensors
    (the surrogate's objective 0-d, as the torch backend gives it)."""
    from aces_fast import loo_auc, surrogate_loo_auc

    B = random_matrix(RNG, 25, 14)
    w = RNG.random(14)
    w /= w.sum()
    wt = torch.from_numpy(w) if weighted else w
    got = loo_auc(torch.from_numpy(B), wt if weighted else None)
    want = loo_auc(B, w if weighted else None, backend="cpp")
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float64
    np.testing.assert_array_equal(got.numpy(), want)
    sur = surrogate_loo_auc(torch.from_numpy(B), wt, 7.0)
    ref = surrogate_loo_auc(B, w, 7.0, backend="cpp")
    on_torch = surrogate_loo_auc(torch.from_numpy(B), torch.from_numpy(w), 7.0, backend="torch")
    for g, r, t in zip(sur, ref, on_torch):
        assert isinstance(g, torch.Tensor) and g.shape == t.shape and g.dtype == t.dtype
        np.testing.assert_array_equal(g.numpy(), r)


def test_explicit_torch_and_the_environment_keep_the_device(cpu_as_device, monkeypatch):
    """backend="torch" always computes on the device; ACES_FAST_BACKEND picks like
    an argument (auto takes the route, torch does not)."""
    require_backend("torch")
    Bt = torch.from_numpy(random_matrix(RNG, 12, 9))
    assert call_backend("torch", Bt)[1] is False
    assert rerank(Bt, "aces-c", backend="torch").backend == "torch"
    monkeypatch.setenv(ENV_VAR, "torch")
    assert call_backend(None, Bt)[1] is False
    monkeypatch.setenv(ENV_VAR, "auto")
    be, on_host = call_backend(None, Bt)
    assert on_host and be.name == "cpp"
    assert call_backend("cpp", Bt)[1] is False  # an explicit cpp takes tensors as it always did


def test_large_calls_stay_on_the_device(cpu_as_device, monkeypatch):
    monkeypatch.setattr(host_route, "HOST_ROUTE_MAX_CELLS", 50)
    Bt = torch.from_numpy(random_matrix(RNG, 10, 6))  # 60 cells
    assert call_backend(None, Bt)[1] is False
    assert call_backend(None, Bt[:, :5])[1] is True


def test_results_share_one_copy():
    """Every array field is a view of one copy: the float64 ones' bits reinterpreted,
    the same values and dtypes as the NumPy result's."""
    require_backend("cpp")
    res = rerank(random_matrix(RNG, 30, 20), "aces-o", backend="cpp")
    moved = host_route.on_device(res, torch.device("cpu"))
    fields = [moved.scores, moved.weights, moved.objective, moved.order, moved.info["rows"]]
    assert len({t.untyped_storage().data_ptr() for t in fields}) == 1
    for got, want in zip(fields, [res.scores, res.weights, res.objective, res.order]):
        assert got.dtype == torch.from_numpy(want).dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want)  # bit for bit, nan and -0.0 too
    np.testing.assert_array_equal(moved.info["rows"].numpy(), res.info["rows"])
    assert moved.info["rows"].dtype == torch.int64
    assert res.info["rows"] is not moved.info["rows"]  # the NumPy result is left as it was
    special = np.array([np.nan, -0.0, np.inf, 5e-324])
    res.scores[:4] = special
    again = host_route.on_device(res, torch.device("cpu")).scores[:4].numpy()
    assert again.tobytes() == special.tobytes()


def test_bad_input_is_reported_by_the_host_validation(cpu_as_device):
    bad = torch.tensor([[0, 2], [1, 0]], dtype=torch.int64)
    with pytest.raises(ValueError, match="0 and 1|0/1|binary"):
        rerank(bad, "aces-c")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_small_call_takes_the_host_route():
    require_backend("cpp")
    B = random_matrix(RNG, 200, 50)
    Bt = torch.from_numpy(B).cuda()
    got = rerank(Bt, "aces-c")
    want = rerank(B, "aces-c", backend="cpp")
    assert got.backend == "cpp" and got.scores.device == Bt.device
    np.testing.assert_array_equal(got.order.cpu().numpy(), want.order)
    np.testing.assert_array_equal(got.weights.cpu().numpy(), want.weights)
    assert rerank(Bt, "aces-c", backend="torch").backend == "torch"
    from aces_fast import loo_auc

    L = loo_auc(Bt)
    assert L.device == Bt.device
    np.testing.assert_array_equal(L.cpu().numpy(), loo_auc(B, backend="cpp"))
