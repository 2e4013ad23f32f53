"""The surrogate's pair sums fused into one compiled computation (``torch.compile``):
the opt-in ``fused`` mode of the torch backend (docs/backends.rst, "torch: fused
pair sums").

Why: an evaluation of the surrogate (docs/contract.rst §3.3) costs O(T U^2 m)
for T tasks of U distinct rows and m tests, and the eager path
(:class:`.surrogate.Surrogate`) materializes two (k, T, U, U) pair tensors per
column chunk of k tests and reduces them with batched mat-vecs: about eight
passes over memory per pair. Those passes are the whole cost of ACES-O with
large pools: ``top_k=None`` at 2 000 x 1 000 took 7.7 s on an H200 and a batch
of 200 ACES-O tasks of 200 x 500 ran 0.43x the CPU
(benchmarks/results/2026-11-29-h200-third.txt). Compiled, the sigmoid is
computed inside the reductions and no pair tensor exists; one step's three
pair reductions then took 26.5 ms instead of 141 (float64) and 6.3 instead of
83 (float32) on that GPU (``tools/gpu_fusion_probe.py``,
benchmarks/results/2026-11-29-h200-fusion-probe.txt). On CPU tensors the
compiled reductions run as generated C++ (OpenMP).

Where torch.compile would not compile (disabled, or under a
``TorchDispatchMode``), for a single distinct row or test, and on CPU tensors
below ``CPU_MIN_ROWS`` distinct rows or with more than one intra-op thread the
eager path runs instead
(:func:`runs_fused`). A step makes one call per range of tests, each of at most
``FUSED_CALL_TERMS`` pair terms (:func:`fused_call_ranges`), so that a long
fit stays interruptible.

The cost is compiling: seconds on the first evaluation of a process (and for
a new rank of shapes: a batch of one and a batch of many compile apart), less
once torch's on-disk cache holds the kernels; shapes are dynamic, so new sizes
do not recompile. It needs what ``torch.compile`` needs (a C++ compiler on the
CPU, Triton on CUDA). Hence opt-in: ``TorchBackend(fused=True)`` or
``ACES_FAST_TORCH_FUSED=1`` read when the backend is first loaded.

The values equal the eager path's up to summation order (the pair sums are
reduced in a different order): tests/test_torch_fused.py compares both, and
the NumPy reference, to 1e-12 relative.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

import torch

from ... import _env
from ..._env import flag

#: Environment variable turning the fused mode on ("1") when the backend is loaded.
FUSED_ENV_VAR = _env.TORCH_FUSED

_lock = threading.Lock()
_compiled: dict[bool, Any] = {}


def env_fused() -> bool:
    """Whether ``ACES_FAST_TORCH_FUSED`` asks for the fused mode ("1", "true", "yes",
    "on"; anything else, or unset, is off)."""
    return flag(FUSED_ENV_VAR, False)


def pair_terms(
    P: torch.Tensor,
    x: torch.Tensor,
    ft: torch.Tensor,
    pt: torch.Tensor,
    ptl: torch.Tensor,
    neg_half: torch.Tensor,
    wip: torch.Tensor,
    *,
    exp_trick: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One evaluation's pair sums of T tasks, everything that depends on the pairs.

    Parameters
    ----------
    P : tensor (T, U, U)
        ``exp(s_f - s_p)`` when ``exp_trick``, else ``s_p - s_f``, at ``[t, p, f]``
        (``s = gamma B w``).
    x : tensor (m, T)
        ``exp(gamma w_j)`` when ``exp_trick``, else ``gamma w_j``.
    ft, pt : tensor (m, T, U)
        Failer and passer multiplicities of each test (0 outside ``F_j`` / ``P_j``).
    ptl : tensor (m, T, U)
        ``pt / (|P_j| |F_j|)`` (0 for tests without pairs).
    neg_half : tensor (m, T)
        -1/2 on tests with pairs, else 0.
    wip : tensor (m, T)
        ``gamma w_j / (|P_j| |F_j|)`` (0 for tests without pairs).
    exp_trick : bool
        ``sigma = 1 / (1 + P x)`` (one multiply per pair) instead of a sigmoid.

    Returns
    -------
    excess : tensor (m, T)
        ``L_j - 1/2`` on tests with pairs, else 0.
    grad0 : tensor (m, T)
        ``dJ/dw_j`` without its ``B``-term: ``excess - wip D_j`` with
        ``D_j = sum_pf c_p c_f sigma'_pf``.
    cv : tensor (T, U)
        ``sum_j wip_j c_i u^j_i`` per distinct row (docs/contract.rst §3 and
        :class:`.surrogate.Surrogate`).

    The same arithmetic as :meth:`.surrogate.Surrogate.evaluate`; O(T U^2 m)
    time, O(T U m) memory: compiled, no (m, T, U, U) tensor is formed.
    """
    if exp_trick:
        sig = (P[None] * x[:, :, None, None] + 1.0).reciprocal()
    else:
        sig = (P[None] - x[:, :, None, None]).sigmoid()
    dsig = sig - sig * sig  # sigma (1 - sigma)
    sig_f = (sig * ft[:, :, None, :]).sum(-1)  # sum_f c_f sigma_pf
    dsig_f = (dsig * ft[:, :, None, :]).sum(-1)  # sum_f c_f sigma'_pf
    dsig_p = (dsig * pt[:, :, :, None]).sum(-2)  # sum_p c_p sigma'_pf
    excess = (ptl * sig_f).sum(-1) + neg_half
    D = (pt * dsig_f).sum(-1)
    u = pt * dsig_f - ft * dsig_p  # c_i u^j_i
    cv = (u * wip[:, :, None]).sum(0)
    return excess, excess - wip * D, cv


_Terms = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


# One function per branch, not one closure: Dynamo keeps its compiled graphs
# (and its limit on recompiling) per code object.
def _exp_terms(*args: torch.Tensor) -> _Terms:
    return pair_terms(*args, exp_trick=True)


def _sigmoid_terms(*args: torch.Tensor) -> _Terms:
    return pair_terms(*args, exp_trick=False)


def compiled_pair_terms(exp_trick: bool) -> Any:
    """:func:`pair_terms` of one branch (``exp_trick`` fixed) compiled once per
    process (``torch.compile``, dynamic shapes, one graph). Each branch is its own
    function, with its own budget of recompilations: it compiles once per
    device, dtype, and batch of one or of many (Dynamo specializes sizes 0 and
    1; :func:`runs_fused` keeps U and m at 2 or more)."""
    with _lock:
        fn = _compiled.get(exp_trick)
        if fn is None:
            # The compiler's first import warns of torch's own deprecated APIs
            # (torch.utils.mkldnn uses torch.jit.script_method): noise to a user,
            # an error under -W error. Imported here, once, with it silenced.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                import torch._inductor.compile_fx
            fn = _named_failures(
                torch.compile(
                    _exp_terms if exp_trick else _sigmoid_terms, dynamic=True, fullgraph=True
                )
            )
            _compiled[exp_trick] = fn
        return fn


def _named_failures(fn: Any) -> Any:
    """``fn`` whose compile failures (no C++ compiler, no Triton, a torch bug) raise
    a ``RuntimeError`` that names the fused mode and how to turn it off, the
    compiler's own error chained, instead of Dynamo's page of internals."""

    def call(*args: torch.Tensor) -> _Terms:
        try:
            return fn(*args)  # type: ignore[no-any-return]
        except torch._dynamo.exc.TorchDynamoException as exc:
            inner = getattr(exc, "inner_exception", None)  # the compiler's own error
            cause = inner if isinstance(inner, BaseException) else exc
            lines = str(cause).strip().splitlines()
            raise RuntimeError(
                "the torch backend's fused mode could not compile its pair sums "
                f"({type(cause).__name__}: {lines[0] if lines else ''}); pass "
                f"fused=False or unset {FUSED_ENV_VAR} to use the default path"
            ) from exc

    return call


def fused_usable() -> bool:
    """Whether a compiled call would really compile now: not when torch.compile is
    disabled (``TORCHDYNAMO_DISABLE=1``) or a ``TorchDispatchMode`` is active (a
    profiler of ops, a flop counter), under which Dynamo runs nothing compiled.
    Then the caller takes the eager, chunked path: :func:`pair_terms` run
    eagerly would hold every (test, task, pair) at once."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode

    return not torch._dynamo.config.disable and _get_current_dispatch_mode() is None


#: Distinct rows from which the fused mode computes on CPU tensors, and only with
#: one torch intra-op thread. Below it the eager pair tensors are small enough
#: to stay in cache and win; with more threads the eager path scales and the
#: compiled one did not. ACES-O on this project's 2-core machine, default /
#: fused, s (tools/fused_check.py, benchmarks/results/2026-11-29-fused-cpu.txt):
#: one thread, 30 steps: 24 rows (top_k 24) 0.069 / 0.147, 48 x 500 0.191 /
#: 0.269, 96 x 500 1.043 / 0.687, 300 x 200 2.770 / 1.365; two threads: 0.041 /
#: 0.123, 0.098 / 0.234, 0.311 / 0.521, 1.340 / 1.345, and 600 x 200 5.65 /
#: 5.69, 1 000 x 100 6.67 / 7.20.
CPU_MIN_ROWS = 64
#: and at most this many intra-op threads
CPU_MAX_THREADS = 1


def runs_fused(fused: bool, U: int, m: int, device: torch.device) -> bool:
    """Whether a surrogate of ``U`` distinct rows and ``m`` tests on ``device`` runs
    compiled: the fused mode is on, :func:`fused_usable`, ``U, m >= 2`` (a single
    row has no pairs worth compiling for, and sizes 1 would compile another
    graph), and on the CPU ``U >= CPU_MIN_ROWS`` with at most ``CPU_MAX_THREADS``
    intra-op threads (``torch.get_num_threads()``, read at the call)."""
    if not fused or min(U, m) < 2:
        return False
    if device.type == "cpu" and (U < CPU_MIN_ROWS or torch.get_num_threads() > CPU_MAX_THREADS):
        return False
    return fused_usable()


#: Pair terms (test, task, passer, failer) one compiled call computes at most, per
#: device type: on the CPU under a second (3 ns a term measured at 300 x 200, 12
#: at 4 000 x 300, where the U x U table leaves the cache), so that Ctrl-C, seen
#: between calls, stays prompt (unsplit, one 4 000 x 300 step took 57 s to
#: interrupt); on a GPU a whole step (4e9 terms took 26.5 ms on an H200).
FUSED_CALL_TERMS = {"cpu": 1 << 26, "cuda": 1 << 34}


def fused_call_ranges(terms_per_test: int, m: int, device: torch.device) -> list[tuple[int, int]]:
    """Ranges ``[a, b)`` of the ``m`` tests computed by one compiled call each: as
    few as keep a call within ``FUSED_CALL_TERMS`` (``terms_per_test`` = T U^2),
    of near-equal sizes, at least 2 tests each (sizes 1 compile apart), every
    one starting at an even test (so that its slices stay 16-byte aligned for
    float64, as the compiled code assumes of a whole tensor: unaligned ones
    compile apart too)."""
    budget = FUSED_CALL_TERMS.get(device.type, FUSED_CALL_TERMS["cuda"])
    k = max(1, budget // max(1, terms_per_test) // 2)  # pairs of tests a call may take
    pairs = m // 2
    calls = max(1, -(-pairs // k))  # each then gets 1..k pairs
    base, extra = divmod(pairs, calls)
    ranges, a = [], 0
    for i in range(calls):
        b = a + 2 * (base + (1 if i < extra else 0))
        ranges.append((a, b))
        a = b
    return [*ranges[:-1], (ranges[-1][0], m)]  # the last one takes an odd test


def warm_up(dtype: torch.dtype, device: torch.device) -> int:
    """Compile both branches for a batch of one and of many on ``device``, on tiny
    inputs; returns the number of (branch, rank) variants run."""
    done = 0
    for exp_trick in (True, False):
        fn = compiled_pair_terms(exp_trick)
        for T in (1, 2):
            # distinct sizes: Dynamo would otherwise assume equal ones stay equal
            U, m = 3, 5
            # separate tensors: Dynamo guards on arguments that alias
            P = torch.ones((T, U, U), dtype=dtype, device=device)
            x, neg_half, wip = (torch.ones((m, T), dtype=dtype, device=device) for _ in "123")
            ft, pt, ptl = (torch.ones((m, T, U), dtype=dtype, device=device) for _ in "123")
            fn(P, x, ft, pt, ptl, neg_half, wip)
            done += 1
    return done


def check_compiler() -> None:
    """Raise ``RuntimeError`` saying why when this Python or torch does not support
    ``torch.compile`` at all: called where the fused mode is chosen, so that the
    failure names the option. A missing compiler (C++ on the CPU, Triton on CUDA)
    shows only when compiling, at the first call (:func:`_named_failures`)."""
    try:
        from torch._dynamo import is_dynamo_supported

        supported = is_dynamo_supported()
    except Exception as exc:  # an old or partial torch
        raise RuntimeError(f"the torch backend's fused mode needs torch.compile: {exc}") from None
    if not supported:
        raise RuntimeError(
            "the torch backend's fused mode needs torch.compile, which this Python "
            f"or torch {torch.__version__} does not support; unset {FUSED_ENV_VAR} "
            "or pass fused=False"
        )
