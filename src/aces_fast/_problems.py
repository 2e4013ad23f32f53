"""The data model of pass-matrix datasets: :class:`Problem` and :class:`Dataset`.

Both check their fields on construction (``ValueError``/``TypeError`` naming the
problem and the field), so a problem is usable as is whether a reader built it
or the caller did. The readers and writers build on this module:
:mod:`aces_fast.datasets` (npz, JSON lines, CSV, npy) and
:mod:`aces_fast.parquet` (Parquet, needs pyarrow). It imports neither, so that
each format module depends on the model alone; the public names are
``aces_fast.datasets.Problem`` and ``aces_fast.datasets.Dataset``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Dataset", "Problem", "binary_matrix", "binary_vector", "check_extra"]

# Extras whose length is tied to the matrix: name -> (axis length it must match, kind)
# kind "binary" = 0/1 values, "int" = integers.
_KNOWN_EXTRAS = {
    "t_ok": ("m", "binary"),
    "test_count": ("m", "int"),
    "cand_uid": ("n", "int"),
}


@dataclass(eq=False)
class Problem:
    """One problem: the pass matrix of its candidates on its tests.

    Attributes
    ----------
    task_id : str
    B : numpy.ndarray, uint8, shape (n, m)
        ``B[i, j] = 1`` iff candidate ``i`` passes test ``j``; n >= 1, m >= 0.
    labels : numpy.ndarray, uint8, shape (n,), or None
        1 for a candidate that is really correct (evaluation data only).
    extras : dict
        Other per-problem fields, e.g. ``t_ok`` (m,), ``test_count`` (m,),
        ``cand_uid`` (n,) as NumPy arrays.
    """

    task_id: str
    B: np.ndarray
    labels: np.ndarray | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Validate once here so every Problem in a Dataset is usable as is,
        # whether it came from a file or was built in Python.
        where = f"problem {self.task_id!r}"
        self.task_id = str(self.task_id)
        self.B = binary_matrix(self.B, f"{where}: field 'B'")
        if self.labels is not None:
            self.labels = binary_vector(self.labels, self.n, f"{where}: field 'labels'")
        extras = {}
        for name, value in dict(self.extras).items():
            extras[name] = check_extra(name, value, self.n, self.m, f"{where}: field {name!r}")
        self.extras = extras

    @property
    def n(self) -> int:
        """Number of candidates (rows)."""
        return int(self.B.shape[0])

    @property
    def m(self) -> int:
        """Number of tests (columns)."""
        return int(self.B.shape[1])

    @property
    def n_correct(self) -> int | None:
        """Number of correct candidates, or ``None`` without labels."""
        return None if self.labels is None else int(self.labels.sum())

    @property
    def is_mixed(self) -> bool:
        """True when labels exist and some but not all candidates are correct."""
        c = self.n_correct
        return c is not None and 0 < c < self.n

    def __repr__(self) -> str:
        lab = "no labels" if self.labels is None else f"{self.n_correct} correct"
        return f"Problem({self.task_id!r}, n={self.n}, m={self.m}, {lab})"


@dataclass(eq=False)
class Dataset:
    """An ordered collection of :class:`Problem` (unique task ids).

    Attributes
    ----------
    name : str
        Bundled name, or the file name without its suffix.
    problems : list of Problem
    source : str
        Where it was read from (a path, or ``"bundled:<file>"``).
    meta : dict
        Dataset-level fields of the file (e.g. the npz ``config`` string).
    """

    name: str
    problems: list[Problem]
    source: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.problems = list(self.problems)
        seen: dict[str, int] = {}
        for i, p in enumerate(self.problems):
            if not isinstance(p, Problem):
                raise TypeError(
                    f"dataset {self.name!r}: item {i} is {type(p).__name__}, not a Problem"
                )
            if p.task_id in seen:
                raise ValueError(
                    f"dataset {self.name!r}: duplicate task_id {p.task_id!r} "
                    f"(problems {seen[p.task_id]} and {i})"
                )
            seen[p.task_id] = i
        self._index = seen

    def __len__(self) -> int:
        return len(self.problems)

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.problems)

    def __getitem__(self, key: int | str) -> Problem:
        """A problem by position or by ``task_id``."""
        if isinstance(key, str):
            if key not in self._index:
                raise KeyError(f"no problem with task_id {key!r} in dataset {self.name!r}")
            return self.problems[self._index[key]]
        try:
            return self.problems[key]
        except IndexError:
            raise IndexError(
                f"problem {key} is out of range: dataset {self.name!r} holds "
                f"{len(self.problems)} problems (0 to {len(self.problems) - 1}, "
                "or negative from the end)"
            ) from None

    @property
    def task_ids(self) -> list[str]:
        return [p.task_id for p in self.problems]

    def __repr__(self) -> str:
        return f"Dataset({self.name!r}, {len(self)} problems, source={self.source!r})"


# ---------------------------------------------------------------------------
# validation helpers (raise ValueError/TypeError with the caller's location)


def _as_array(value: Any, where: str) -> np.ndarray:
    """``np.asarray`` whose failures (ragged nesting, absurd objects) name ``where``."""
    if isinstance(value, np.ndarray):
        return value
    try:
        return np.asarray(value)
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        detail = " ".join(str(exc).split())
        raise ValueError(
            f"{where}: cannot be read as an array: rows have different "
            f"lengths or entries are not numbers ({detail})"
        ) from None


def binary_matrix(value: Any, where: str) -> np.ndarray:
    """``value`` as a C-contiguous uint8 (n, m) 0/1 matrix with n >= 1; ``ValueError``
    starting with ``where`` otherwise."""
    if isinstance(value, np.ndarray):
        arr = value
    else:
        try:
            arr = np.asarray(value)
        except ValueError:
            raise ValueError(f"{where}: rows have different lengths (ragged matrix)") from None
        except (TypeError, OverflowError, RecursionError) as exc:
            raise ValueError(f"{where}: cannot be read as a 0/1 matrix ({exc})") from None
    if arr.dtype == object:
        raise ValueError(f"{where}: rows have different lengths or non-numeric entries")
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{where}: must hold 0/1 numbers, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(
            f"{where}: must be a 2-D (n candidates, m tests) matrix, got shape {arr.shape}"
        )
    if arr.shape[0] == 0:
        raise ValueError(f"{where}: has no candidates (shape {arr.shape}); need n >= 1")
    _check_binary_values(arr, where)
    return np.ascontiguousarray(arr, dtype=np.uint8)


def _check_binary_values(arr: np.ndarray, where: str) -> None:
    if arr.size == 0 or arr.dtype == np.bool_:
        return
    # Integers: min/max need no temporary the size of the matrix (a 10**6 x 64
    # file would otherwise need two more boolean copies); locate only on failure.
    if arr.dtype.kind in "iu" and arr.min() >= 0 and arr.max() <= 1:
        return
    bad = ~((arr == 0) | (arr == 1))
    if bad.any():
        pos = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(
            f"{where}: must contain only 0 and 1, found {arr[pos].item()!r} at "
            f"index {pos if len(pos) > 1 else pos[0]}"
        )


def binary_vector(value: Any, length: int, where: str) -> np.ndarray:
    """``value`` as a uint8 0/1 vector of ``length``; ``ValueError`` starting with
    ``where`` otherwise."""
    arr = _as_array(value, where)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise ValueError(f"{where}: must hold 0/1 numbers, got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.shape[0] != length:
        raise ValueError(f"{where}: must have length {length}, got shape {arr.shape}")
    _check_binary_values(arr, where)
    return np.ascontiguousarray(arr, dtype=np.uint8)


def check_extra(name: str, value: Any, n: int, m: int, where: str) -> Any:
    """Known extras become checked arrays; other extras are kept unchanged."""
    if name not in _KNOWN_EXTRAS:
        return value
    axis, kind = _KNOWN_EXTRAS[name]
    length = n if axis == "n" else m
    if kind == "binary":
        return binary_vector(value, length, where)
    arr = _as_array(value, where)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
        # Whole floats become int64; only those int64 holds exactly (|x| < 2**63), so
        # a huge float is refused rather than wrapped around.
        if (
            arr.dtype.kind == "f"
            and arr.size
            and np.all(np.isfinite(arr))
            and np.all(arr == np.round(arr))
            and np.all(np.abs(arr) < 2.0**63)
        ):
            arr = arr.astype(np.int64)
        elif arr.size or arr.dtype == object:
            raise ValueError(f"{where}: must hold integers, got dtype {arr.dtype}")
        else:
            arr = arr.astype(np.int64)
    if arr.ndim != 1 or arr.shape[0] != length:
        raise ValueError(
            f"{where}: must have length {length} (the number of "
            f"{'candidates' if axis == 'n' else 'tests'}), got shape {arr.shape}"
        )
    return arr
