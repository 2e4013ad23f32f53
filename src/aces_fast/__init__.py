"""aces_fast: exact, fast ACES reranking of LLM code candidates with LLM tests.

Given a pass matrix ``B`` (n candidates x m tests, ``B[i, j] = 1`` iff candidate
``i`` passes test ``j``), rank the candidates so a correct one comes first:

>>> import aces_fast as af
>>> res = af.aces_c(B)  # doctest: +SKIP
>>> res.order[0], res.weights  # doctest: +SKIP

The methods of ``docs/contract.rst``: :func:`majority_vote`, :func:`aces_c`,
:func:`aces_o`, :func:`codet`, :func:`b4`, :func:`mbr_exec`, :func:`combine`,
:func:`rerank`; kernels :func:`loo_auc`, :func:`surrogate_loo_auc`; metrics
:func:`pass_at_k`, :func:`pass_at_k_unbiased`, :func:`diagnostics`; backends
:func:`available_backends`, :func:`show_config`, :func:`warmup`.
"""

from __future__ import annotations

__version__ = "0.1.0"

import sys as _sys

if _sys.argv[:1] and (
    _sys.argv[0] == "-m"
    or _sys.argv[0].replace("\\", "/").rsplit("/", 1)[-1].startswith("aces-fast")
):
    # Started as the command line: a Ctrl-C during the imports below (a few
    # hundred ms) exits as one during a command does, without a traceback.
    # aces_fast.cli.main puts Python's own handler back.
    from ._startup import exit_on_interrupt as _exit_on_interrupt

    _exit_on_interrupt()

from ._cost import CostWarning
from .backends import BackendUnavailableError, available_backends, backend_status
from .batch import rerank_batch
from .batch_result import BatchResult
from .config import config, show_config, warmup
from .methods import (
    METHODS,
    aces_c,
    aces_o,
    b4,
    codet,
    combine,
    loo_auc,
    majority_vote,
    mbr_exec,
    rerank,
    surrogate_loo_auc,
)
from .metrics import Diagnostics, diagnostics, pass_at_k, pass_at_k_unbiased
from .result import RerankResult, SurrogateResult

__all__ = [
    "METHODS",
    "BackendUnavailableError",
    "BatchResult",
    "CostWarning",
    "Diagnostics",
    "RerankResult",
    "SurrogateResult",
    "__version__",
    "aces_c",
    "aces_o",
    "available_backends",
    "b4",
    "backend_status",
    "codet",
    "combine",
    "config",
    "diagnostics",
    "loo_auc",
    "majority_vote",
    "mbr_exec",
    "pass_at_k",
    "pass_at_k_unbiased",
    "rerank",
    "rerank_batch",
    "show_config",
    "surrogate_loo_auc",
    "warmup",
]

# Names a star import or dir() would show but that are not the API: the
# ``from __future__`` import binds ``annotations`` here.
del annotations, _sys
