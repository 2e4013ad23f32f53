"""Type stub of the compiled extension ``aces_fast._core`` (csrc/module.cpp).

``B`` is always a 2-D C-contiguous ``uint8`` or ``bool`` array (used in place, no
copy); any other dtype or layout raises ``TypeError``. ``n_threads=0`` means the
OpenMP default. Every function validates its arguments first, then releases the
GIL for the kernel.
"""

from typing import Dict, List, Literal, Optional, Tuple

import numpy as np
import numpy.typing as npt

__version__: str

#: rerank method name -> code accepted by :func:`rerank` / :func:`rerank_batch`
METHOD_CODES: Dict[str, int]

_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]
_RerankTuple = Tuple[_F64, _F64, _I64, Optional[_F64], bool, Optional[_F64], Optional[_I64]]

def has_openmp() -> bool: ...
def simd_level() -> str: ...
def max_byte(B: npt.NDArray[np.uint8] | npt.NDArray[np.bool_]) -> int: ...
def max_threads() -> int: ...
def loo_auc(
    B: npt.NDArray[np.uint8] | npt.NDArray[np.bool_],
    weights: Optional[npt.ArrayLike] = None,
    counts: Optional[npt.ArrayLike] = None,
    tie_tol: float = 1e-9,
    n_threads: int = 0,
    dedup: Optional[bool] = None,
) -> _F64: ...
def surrogate_loo_auc(
    B: npt.NDArray[np.uint8] | npt.NDArray[np.bool_],
    weights: npt.ArrayLike,
    gamma: float,
    counts: Optional[npt.ArrayLike] = None,
    n_threads: int = 0,
    dedup: Optional[bool] = None,
) -> Tuple[_F64, float, _F64]: ...
def aces_o_fit(
    B: npt.NDArray[np.uint8] | npt.NDArray[np.bool_],
    logits0: npt.ArrayLike,
    active: npt.ArrayLike,
    gamma: float,
    lr: float,
    steps: int,
    counts: Optional[npt.ArrayLike] = None,
    n_threads: int = 0,
    dedup: Optional[bool] = None,
) -> Tuple[_F64, _F64]: ...
def rerank(
    B: npt.NDArray[np.uint8] | npt.NDArray[np.bool_],
    method: int,
    tie_tol: float = 1e-9,
    gamma: float = 10.0,
    lr: float = 0.01,
    steps: int = 90,
    top_k: Optional[int] = 24,
    warm: bool = False,
    dedup: Optional[bool] = None,
    n_threads: int = 0,
) -> _RerankTuple: ...
def rerank_batch(
    tasks: List[npt.NDArray[np.uint8]],
    method: int,
    tie_tol: float = 1e-9,
    gamma: float = 10.0,
    lr: float = 0.01,
    steps: int = 90,
    top_k: Optional[int] = 24,
    warm: bool = False,
    dedup: Optional[bool] = None,
    n_threads: int = 0,
) -> List[_RerankTuple]: ...
def surrogate_loo_auc_binned(
    B: npt.NDArray[np.uint8] | npt.NDArray[np.bool_],
    weights: npt.ArrayLike,
    gamma: float,
    bins: int = 2048,
    counts: Optional[npt.ArrayLike] = None,
    n_threads: int = 0,
    path: Literal["auto", "fft", "direct"] = "auto",
) -> Tuple[_F64, float, _F64]: ...
def aces_o_fit_binned(
    B: npt.NDArray[np.uint8] | npt.NDArray[np.bool_],
    logits0: npt.ArrayLike,
    active: npt.ArrayLike,
    gamma: float,
    lr: float,
    steps: int,
    bins: int = 2048,
    counts: Optional[npt.ArrayLike] = None,
    n_threads: int = 0,
    path: Literal["auto", "fft", "direct"] = "auto",
) -> Tuple[_F64, _F64]: ...
def binned_grid_spacing(
    B: npt.NDArray[np.uint8] | npt.NDArray[np.bool_],
    weights: npt.ArrayLike,
    bins: int = 2048,
    counts: Optional[npt.ArrayLike] = None,
) -> float: ...
def binned_error_bound(gamma: float, h: float, weight_sum: float = 1.0) -> Tuple[float, float, float]: ...
