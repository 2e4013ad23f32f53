"""Type stub of the compiled extension ``aces_fast._core`` (csrc/bindings/).

Private: the package validates every parameter's meaning at its Python boundary
and then calls in with every argument by keyword (no function here has a
default; the defaults live in the package). The extension itself checks only
what keeps it memory-safe: types, dtypes, layouts, lengths, the kernels'
numeric preconditions and sizes that would overflow (``steps``, ``bins``,
``n_threads``, ``top_k``), raising ``TypeError``/``ValueError``.

``B`` is always a 2-D C-contiguous ``uint8`` or ``bool`` array (used in place, no
copy) holding only 0 and 1: every call checks the values inside the same call,
after releasing the GIL (``ValueError: B must contain only 0 and 1; found value
v``, ``v`` the largest byte; ``rerank_batch`` and ``rerank_batch_flat`` name the first bad task,
``"task k: ..."``). ``n_threads`` > 0 is exactly that many threads; 0 or < 0 lets each call
choose by its work (``threads_for_work``), at most the OpenMP default or ``-n_threads``
(|n_threads| <= 4096); work below 2^18 cells runs on one thread either way. Every function
releases the GIL for the kernel.
"""

from collections.abc import Sequence
from typing import Literal

import numpy as np
import numpy.typing as npt

__version__: str

#: rerank method name -> code accepted by :func:`rerank` / :func:`rerank_batch`
METHOD_CODES: dict[str, int]

_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]
_Pass = npt.NDArray[np.uint8] | npt.NDArray[np.bool_]
#: (scores, weights (None for CodeT), order, loo_auc, fallback, objective, rows)
_RerankTuple = tuple[_F64, _F64 | None, _I64, _F64 | None, bool, _F64 | None, _I64 | None]
#: (n_offsets, m_offsets, scores, weights, order, loo_auc, fallback (T,) bool,
#: objective, objective_offsets, rows, rows_offsets): every task's outputs in
#: slices of flat arrays; offsets are int64 (T + 1,); weights None for CodeT
_FlatTuple = tuple[
    _I64,
    _I64,
    _F64,
    _F64 | None,
    _I64,
    _F64 | None,
    npt.NDArray[np.bool_],
    _F64 | None,
    _I64 | None,
    _I64 | None,
    _I64 | None,
]
# _FlatTuple + the padding flags (bool (T,))
_PackedTuple = tuple[
    _I64,
    _I64,
    _F64,
    _F64 | None,
    _I64,
    _F64 | None,
    npt.NDArray[np.bool_],
    _F64 | None,
    _I64 | None,
    _I64 | None,
    _I64 | None,
    npt.NDArray[np.bool_],
]

def has_openmp() -> bool: ...
def simd_level() -> str: ...
def output_pool_bytes() -> int: ...
def output_pool_clear() -> None: ...
def max_threads() -> int: ...
def threads_for_work(work: int, n_threads: int) -> int: ...
def loo_auc(
    *,
    B: _Pass,
    weights: npt.ArrayLike | None,
    counts: npt.ArrayLike | None,
    tie_tol: float,
    dedup: bool | None,
    n_threads: int,
) -> _F64: ...
def surrogate_loo_auc(
    *,
    B: _Pass,
    weights: npt.ArrayLike,
    gamma: float,
    counts: npt.ArrayLike | None,
    dedup: bool | None,
    n_threads: int,
) -> tuple[_F64, float, _F64]: ...
def aces_o_fit(
    *,
    B: _Pass,
    logits0: npt.ArrayLike,
    active: npt.ArrayLike,
    gamma: float,
    lr: float,
    steps: int,
    counts: npt.ArrayLike | None,
    dedup: bool | None,
    n_threads: int,
) -> tuple[_F64, _F64]: ...
def rerank(
    *,
    B: _Pass,
    method: int,
    tie_tol: float,
    gamma: float,
    lr: float,
    steps: int,
    top_k: int | None,
    warm: bool,
    dedup: bool | None,
    power: _F64 | None,
    n_threads: int,
) -> _RerankTuple: ...
def rerank_batch(
    *,
    tasks: Sequence[_Pass],
    method: int,
    tie_tol: float,
    gamma: float,
    lr: float,
    steps: int,
    top_k: int | None,
    warm: bool,
    dedup: bool | None,
    power: _F64 | None,
    n_threads: int,
) -> list[_RerankTuple]: ...
def prepared_prefix(*, tasks: Sequence[object]) -> int: ...
def rerank_batch_flat(
    *,
    tasks: Sequence[_Pass],
    method: int,
    tie_tol: float,
    gamma: float,
    lr: float,
    steps: int,
    top_k: int | None,
    warm: bool,
    dedup: bool | None,
    power: _F64 | None,
    n_threads: int,
) -> _FlatTuple: ...
def rerank_packed(
    *,
    data: npt.NDArray[np.uint8],
    offsets: _I64,
    n: _I64,
    m: _I64,
    method: int,
    tie_tol: float,
    gamma: float,
    lr: float,
    steps: int,
    top_k: int | None,
    warm: bool,
    dedup: bool | None,
    power: _F64 | None,
    n_threads: int,
) -> _PackedTuple: ...
def pass_at_ks(
    *,
    scores: _F64,
    offsets: _I64,
    labels: npt.NDArray[np.uint8],
    has_labels: npt.NDArray[np.bool_],
    ks: _I64,
    order: _I64 | None,
) -> _F64: ...
def surrogate_loo_auc_binned(
    *,
    B: _Pass,
    weights: npt.ArrayLike,
    gamma: float,
    bins: int,
    counts: npt.ArrayLike | None,
    path: Literal["auto", "fft", "direct"],
    n_threads: int,
) -> tuple[_F64, float, _F64]: ...
def aces_o_fit_binned(
    *,
    B: _Pass,
    logits0: npt.ArrayLike,
    active: npt.ArrayLike,
    gamma: float,
    lr: float,
    steps: int,
    bins: int,
    counts: npt.ArrayLike | None,
    path: Literal["auto", "fft", "direct"],
    n_threads: int,
) -> tuple[_F64, _F64]: ...
def binned_grid_spacing(
    *,
    B: _Pass,
    weights: npt.ArrayLike,
    bins: int,
    counts: npt.ArrayLike | None,
) -> float: ...
def binned_error_bound(
    *, gamma: float, h: float, weight_sum: float
) -> tuple[float, float, float]: ...

# the part writer (csrc/io/, aces_fast._parts): a column is (name, kind, valid
# uint8 (rows,) or None, offsets int64 (rows + 1,) or None, values)
_Column = tuple[
    str,
    Literal["string", "bool", "float64", "list<int32>", "list<float64>"],
    npt.NDArray[np.uint8] | None,
    npt.NDArray[np.int64] | None,
    npt.NDArray[np.generic],
]

def encode_part(
    *,
    rows: int,
    columns: list[_Column],
    metadata: list[tuple[bytes, bytes]],
    created_by: str,
) -> npt.NDArray[np.uint8]: ...
def crc32(*, data: bytes, crc: int) -> int: ...
def snappy_compress(*, data: bytes) -> bytes: ...
def repeated_ids(
    *,
    offsets: _I64,
    data: npt.NDArray[np.uint8],
    valid: npt.NDArray[np.uint8] | None,
    hash_bits: int,
) -> tuple[_I64, _I64]: ...
