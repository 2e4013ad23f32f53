"""Reading and writing collections of pass matrices (one per problem).

Two on-disk layouts are supported, both validated on read with errors that
name the file, the problem and the field (``ValueError``):

**npz** (the layout of the bundled HumanEval data and of the shared data
README): ``task_ids`` (str (P,)); per problem ``k`` (suffix ``%04d``)
``B_kkkk`` uint8 (n, m) pass matrix, optional ``y_kkkk`` (n,) 0/1 labels, and
optional extras ``t_ok_kkkk`` (m,) 0/1, ``test_count_kkkk`` (m,) int,
``cand_uid_kkkk`` (n,) int, or any other ``name_kkkk`` array. Keys without a
problem suffix (e.g. ``config``) are kept in :attr:`Dataset.meta`.

**JSONL** (one problem per line)::

    {"task_id": "p1", "B": [[1, 0, 1], [0, 0, 1]], "labels": [1, 0]}
    {"task_id": "p2", "m": 3, "passed": [[0, 2], []], "labels": [1, 0]}

``"B"`` gives the rows of 0/1 (ints or booleans); ``"passed"`` gives, per
candidate, the indices of the tests it passes, with ``"m"`` the number of
tests. ``"labels"`` is optional. Other keys are kept as extras (``t_ok``,
``test_count`` and ``cand_uid`` are checked and turned into arrays).
Blank lines are skipped; ``.jsonl.gz`` is read and written through gzip.

Bundled datasets (:data:`BUNDLED`): ``"humaneval-codegen16b"`` (the default;
CodeGen-Mono-16B candidates and tests, n = 100) and ``"humaneval-gpt35"``
(gpt-3.5-turbo-1106 with AgentCoder's prompts, n = 5). Any other name passed to
:func:`load_dataset` is a path.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np

__all__ = [
    "BUNDLED",
    "DEFAULT_DATASET",
    "Dataset",
    "Problem",
    "bundled_path",
    "load_dataset",
    "load_jsonl",
    "load_npz",
    "load_pass_matrix",
    "save_jsonl",
    "save_npz",
]

#: bundled dataset name -> file in ``aces_fast/data``
BUNDLED: Dict[str, str] = {
    "humaneval-codegen16b": "humaneval_codet_codegen16b.npz",
    "humaneval-gpt35": "humaneval_agentcoder_gpt35turbo1106.npz",
}
DEFAULT_DATASET = "humaneval-codegen16b"

PathLike = Union[str, Path]

# Extras whose length is tied to the matrix: name -> (axis length it must match, kind)
# kind "binary" = 0/1 values, "int" = integers.
_KNOWN_EXTRAS = {
    "t_ok": ("m", "binary"),
    "test_count": ("m", "int"),
    "cand_uid": ("n", "int"),
}
_SUFFIX = re.compile(r"^(?P<field>.+)_(?P<index>\d{4,})$")


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
    labels: Optional[np.ndarray] = None
    extras: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Validate once here so every Problem in a Dataset is usable as is,
        # whether it came from a file or was built in Python.
        where = f"problem {self.task_id!r}"
        self.task_id = str(self.task_id)
        self.B = _binary_matrix(self.B, f"{where}: field 'B'")
        if self.labels is not None:
            self.labels = _binary_vector(self.labels, self.n, f"{where}: field 'labels'")
        extras = {}
        for name, value in dict(self.extras).items():
            extras[name] = _check_extra(name, value, self.n, self.m, f"{where}: field {name!r}")
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
    def n_correct(self) -> Optional[int]:
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
    problems: List[Problem]
    source: str = ""
    meta: Dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.problems = list(self.problems)
        seen: Dict[str, int] = {}
        for i, p in enumerate(self.problems):
            if not isinstance(p, Problem):
                raise TypeError(f"dataset {self.name!r}: item {i} is {type(p).__name__}, "
                                "not a Problem")
            if p.task_id in seen:
                raise ValueError(f"dataset {self.name!r}: duplicate task_id {p.task_id!r} "
                                 f"(problems {seen[p.task_id]} and {i})")
            seen[p.task_id] = i
        self._index = seen

    def __len__(self) -> int:
        return len(self.problems)

    def __iter__(self) -> Iterator[Problem]:
        return iter(self.problems)

    def __getitem__(self, key: Union[int, str]) -> Problem:
        """A problem by position or by ``task_id``."""
        if isinstance(key, str):
            if key not in self._index:
                raise KeyError(f"no problem with task_id {key!r} in dataset {self.name!r}")
            return self.problems[self._index[key]]
        return self.problems[key]

    @property
    def task_ids(self) -> List[str]:
        return [p.task_id for p in self.problems]

    def __repr__(self) -> str:
        return f"Dataset({self.name!r}, {len(self)} problems, source={self.source!r})"


# ---------------------------------------------------------------------------
# validation helpers (raise ValueError/TypeError with the caller's location)


def _binary_matrix(value: Any, where: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        arr = value
    else:
        try:
            arr = np.asarray(value)
        except ValueError:
            raise ValueError(f"{where}: rows have different lengths (ragged matrix)") from None
    if arr.dtype == object:
        raise ValueError(f"{where}: rows have different lengths or non-numeric entries")
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{where}: must hold 0/1 numbers, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(f"{where}: must be a 2-D (n candidates, m tests) matrix, "
                         f"got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{where}: has no candidates (shape {arr.shape}); need n >= 1")
    _check_binary_values(arr, where)
    return np.ascontiguousarray(arr, dtype=np.uint8)


def _check_binary_values(arr: np.ndarray, where: str) -> None:
    if arr.size == 0 or arr.dtype == np.bool_:
        return
    bad = ~((arr == 0) | (arr == 1))
    if bad.any():
        pos = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{where}: must contain only 0 and 1, found {arr[pos].item()!r} at "
                         f"index {pos if len(pos) > 1 else pos[0]}")


def _binary_vector(value: Any, length: int, where: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise ValueError(f"{where}: must hold 0/1 numbers, got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.shape[0] != length:
        raise ValueError(f"{where}: must have length {length}, got shape {arr.shape}")
    _check_binary_values(arr, where)
    return np.ascontiguousarray(arr, dtype=np.uint8)


def _check_extra(name: str, value: Any, n: int, m: int, where: str) -> Any:
    """Known extras become checked arrays; other extras are kept unchanged."""
    if name not in _KNOWN_EXTRAS:
        return value
    axis, kind = _KNOWN_EXTRAS[name]
    length = n if axis == "n" else m
    if kind == "binary":
        return _binary_vector(value, length, where)
    arr = np.asarray(value)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
        if arr.dtype.kind == "f" and arr.size and np.all(np.isfinite(arr)) \
                and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        elif arr.size or arr.dtype == object:
            raise ValueError(f"{where}: must hold integers, got dtype {arr.dtype}")
        else:
            arr = arr.astype(np.int64)
    if arr.ndim != 1 or arr.shape[0] != length:
        raise ValueError(f"{where}: must have length {length} (the number of "
                         f"{'candidates' if axis == 'n' else 'tests'}), got shape {arr.shape}")
    return arr


# ---------------------------------------------------------------------------
# npz


def load_npz(path: Any, name: Optional[str] = None, *, source: Optional[str] = None) -> Dataset:
    """Read the npz layout (see the module docstring).

    Parameters
    ----------
    path : str, Path or binary file object
    name : str, optional
        Dataset name (default: the file name without ``.npz``).
    source : str, optional
        How to name the file in messages and in :attr:`Dataset.source`
        (default: its path).

    Raises
    ------
    ValueError
        For a missing ``task_ids`` or ``B_kkkk``, a key that points past the
        last problem, a matrix that is not 2-D 0/1, or a vector of the wrong
        length; the message names the file, the problem and the key.

    Cost: reads every array once, O(total size).
    """
    if source is not None:
        label = source
    elif isinstance(path, (str, Path)):
        label = str(path)
    else:  # a file object
        label = str(getattr(path, "name", "<npz stream>"))
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise ValueError(f"{label}: cannot read as .npz: {exc}") from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise ValueError(f"{label}: is a single .npy array, not an .npz archive")
    with z:
        keys = list(z.files)
        if "task_ids" not in keys:
            shown = ", ".join(keys[:8]) + (" ..." if len(keys) > 8 else "")
            raise ValueError(f"{label}: missing key 'task_ids' (the list of problem ids); "
                             f"keys present: {shown or '(none)'}")
        ids = z["task_ids"]
        if ids.ndim != 1 or ids.dtype.kind not in "USiu":
            raise ValueError(f"{label}: key 'task_ids' must be a 1-D array of strings, "
                             f"got dtype {ids.dtype} shape {ids.shape}")
        task_ids = [str(t) for t in ids.tolist()]
        per: List[Dict[str, np.ndarray]] = [{} for _ in task_ids]
        meta: Dict[str, Any] = {}
        for key in keys:
            if key == "task_ids":
                continue
            mt = _SUFFIX.match(key)
            if mt is None:
                arr = z[key]
                meta[key] = arr.item() if arr.ndim == 0 else arr
                continue
            k = int(mt.group("index"))
            if k >= len(task_ids):
                raise ValueError(f"{label}: key {key!r} refers to problem {k}, but "
                                 f"'task_ids' lists only {len(task_ids)} problems")
            per[k][mt.group("field")] = z[key]
        problems = []
        for k, (tid, fields) in enumerate(zip(task_ids, per)):
            where = f"{label}: problem {k} ({tid!r})"
            if "B" not in fields:
                raise ValueError(f"{where}: missing key 'B_{k:04d}' (the pass matrix)")
            B = _binary_matrix(fields.pop("B"), f"{where}: key 'B_{k:04d}'")
            y = fields.pop("y", None)
            labels = None if y is None else _binary_vector(y, B.shape[0],
                                                           f"{where}: key 'y_{k:04d}'")
            extras = {f: _check_extra(f, v, B.shape[0], B.shape[1], f"{where}: key '{f}_{k:04d}'")
                      for f, v in fields.items()}
            problems.append(Problem(tid, B, labels, extras))
    if name is None:
        name = Path(label).name
        name = name[:-4] if name.endswith(".npz") else name
    try:
        return Dataset(name, problems, source=label, meta=meta)
    except ValueError as exc:
        raise ValueError(f"{label}: {exc}") from None


def save_npz(dataset: Union[Dataset, Sequence[Problem]], path: PathLike,
             compressed: bool = True) -> None:
    """Write problems in the npz layout that :func:`load_npz` reads.

    Extras that are NumPy-convertible (numbers, strings) are written as
    ``name_kkkk``; ``Dataset.meta`` entries as top-level keys. No pickles.
    """
    problems = list(dataset)
    arrays: Dict[str, Any] = {"task_ids": np.array([p.task_id for p in problems], dtype=str)}
    if isinstance(dataset, Dataset):
        for key, value in dataset.meta.items():
            arrays[key] = np.asarray(value)
    for k, p in enumerate(problems):
        arrays[f"B_{k:04d}"] = p.B
        if p.labels is not None:
            arrays[f"y_{k:04d}"] = p.labels
        for fname, value in p.extras.items():
            arr = np.asarray(value)
            if arr.dtype == object:
                raise ValueError(f"problem {p.task_id!r}: extra {fname!r} cannot be stored "
                                 "in an npz without pickling")
            arrays[f"{fname}_{k:04d}"] = arr
    (np.savez_compressed if compressed else np.savez)(path, **arrays)


# ---------------------------------------------------------------------------
# JSONL


def _open_text(path: PathLike, mode: str):
    if str(path).endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def _is_json_bit(v: Any) -> bool:
    # JSON numbers 0/1 (or 0.0/1.0) and booleans; strings like "1" are rejected.
    return isinstance(v, bool) or (type(v) in (int, float) and v in (0, 1))


def _problem_from_json(obj: Any, where: str) -> Problem:
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if "task_id" not in obj:
        raise ValueError(f"{where}: missing field 'task_id'")
    tid = obj["task_id"]
    if not isinstance(tid, (str, int)) or isinstance(tid, bool):
        raise ValueError(f"{where}: field 'task_id' must be a string, got {type(tid).__name__}")
    where = f"{where} ({str(tid)!r})"
    has_B, has_passed = "B" in obj, "passed" in obj
    if has_B == has_passed:
        raise ValueError(f"{where}: need exactly one of the fields 'B' (rows of 0/1) or "
                         f"'passed' (indices of passed tests per candidate, with 'm')")
    m_given = obj.get("m")
    if m_given is not None and (isinstance(m_given, bool) or not isinstance(m_given, int)
                                or m_given < 0):
        raise ValueError(f"{where}: field 'm' must be a non-negative integer, got {m_given!r}")
    if has_B:
        rows = obj["B"]
        if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
            raise ValueError(f"{where}: field 'B' must be a list of rows (lists of 0/1)")
        if not rows:
            raise ValueError(f"{where}: field 'B' has no rows; need n >= 1 candidates")
        lengths = {len(r) for r in rows}
        if len(lengths) > 1:
            bad = next(i for i, r in enumerate(rows) if len(r) != len(rows[0]))
            raise ValueError(f"{where}: field 'B' is ragged: row 0 has {len(rows[0])} "
                             f"entries, row {bad} has {len(rows[bad])}")
        for i, r in enumerate(rows):
            for j, v in enumerate(r):
                if not _is_json_bit(v):
                    raise ValueError(f"{where}: field 'B' row {i} entry {j} is {v!r}; "
                                     "only 0 and 1 are allowed")
        B = np.array(rows, dtype=np.uint8).reshape(len(rows), lengths.pop())
        if m_given is not None and m_given != B.shape[1]:
            raise ValueError(f"{where}: field 'm' is {m_given} but the rows of 'B' have "
                             f"{B.shape[1]} entries")
    else:
        if m_given is None:
            raise ValueError(f"{where}: field 'passed' needs the field 'm' (number of tests)")
        passed = obj["passed"]
        if not isinstance(passed, list) or not all(isinstance(r, list) for r in passed):
            raise ValueError(f"{where}: field 'passed' must be a list (one per candidate) of "
                             "lists of test indices")
        if not passed:
            raise ValueError(f"{where}: field 'passed' is empty; need n >= 1 candidates")
        B = np.zeros((len(passed), m_given), dtype=np.uint8)
        for i, r in enumerate(passed):
            for j in r:
                if isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < m_given:
                    raise ValueError(f"{where}: field 'passed' candidate {i} lists {j!r}, "
                                     f"not a test index in [0, {m_given})")
                B[i, j] = 1
    labels = obj.get("labels")
    extras = {k: v for k, v in obj.items() if k not in ("task_id", "B", "passed", "m", "labels")}
    n, m = B.shape
    if labels is not None:
        if not isinstance(labels, list):
            raise ValueError(f"{where}: field 'labels' must be a list of 0/1")
        for i, v in enumerate(labels):
            if not _is_json_bit(v):
                raise ValueError(f"{where}: field 'labels' entry {i} is {v!r}; "
                                 "only 0 and 1 are allowed")
        labels = _binary_vector(np.array(labels, dtype=np.uint8).reshape(len(labels)), n,
                                f"{where}: field 'labels'")
    checked = {k: _check_extra(k, v, n, m, f"{where}: field {k!r}") for k, v in extras.items()}
    return Problem(str(tid), B, labels, checked)


def load_jsonl(path: PathLike, name: Optional[str] = None) -> Dataset:
    """Read the JSONL layout (see the module docstring); ``.gz`` files are gunzipped.

    Raises ``ValueError`` naming the file, line number, task id and field for
    bad JSON, a missing ``task_id``, both or neither of ``B``/``passed``, ragged
    rows, values other than 0/1, out-of-range test indices, labels of the wrong
    length, or a duplicate task id. O(total size).
    """
    label = str(path)
    problems: List[Problem] = []
    seen: Dict[str, int] = {}
    try:
        fh = _open_text(path, "r")
    except OSError as exc:
        raise ValueError(f"{label}: cannot open: {exc.strerror or exc}") from None
    with fh:
        try:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                where = f"{label}: line {lineno}"
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{where}: invalid JSON ({exc.msg} at column "
                                     f"{exc.colno})") from None
                p = _problem_from_json(obj, where)
                if p.task_id in seen:
                    raise ValueError(f"{where}: field 'task_id' {p.task_id!r} repeats the "
                                     f"problem on line {seen[p.task_id]}")
                seen[p.task_id] = lineno
                problems.append(p)
        except (UnicodeDecodeError, OSError, EOFError) as exc:
            raise ValueError(f"{label}: cannot read as UTF-8 JSON lines: {exc}") from None
    if name is None:
        name = Path(label).name
        for suffix in (".gz", ".jsonl", ".json"):
            name = name[: -len(suffix)] if name.endswith(suffix) else name
    return Dataset(name, problems, source=label)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def save_jsonl(dataset: Union[Dataset, Sequence[Problem]], path: PathLike,
               matrix_format: str = "B") -> None:
    """Write problems in the JSONL layout that :func:`load_jsonl` reads.

    ``matrix_format="B"`` writes rows of 0/1; ``"passed"`` writes the passed
    test indices per candidate plus ``"m"`` (compact for sparse matrices).
    ``path`` ending in ``.gz`` is gzipped.
    """
    if matrix_format not in ("B", "passed"):
        raise ValueError(f"matrix_format must be 'B' or 'passed'; got {matrix_format!r}")
    with _open_text(path, "w") as fh:
        for p in dataset:
            obj: Dict[str, Any] = {"task_id": p.task_id}
            if matrix_format == "B":
                obj["B"] = p.B.tolist()
            else:
                obj["m"] = p.m
                obj["passed"] = [np.flatnonzero(row).tolist() for row in p.B]
            if p.labels is not None:
                obj["labels"] = p.labels.tolist()
            for k, v in p.extras.items():
                obj[k] = _jsonable(v)
            fh.write(json.dumps(obj, separators=(",", ":")) + "\n")


# ---------------------------------------------------------------------------
# names and paths


def bundled_path(name: str):
    """The packaged file of bundled dataset ``name`` (an importlib.resources Traversable)."""
    if name not in BUNDLED:
        raise ValueError(f"unknown bundled dataset {name!r}; choose one of {', '.join(BUNDLED)}")
    return resources.files("aces_fast.data") / BUNDLED[name]


def load_dataset(name_or_path: Optional[PathLike] = None) -> Dataset:
    """Load a bundled dataset by name, or a dataset file by path.

    Parameters
    ----------
    name_or_path : str or Path, optional
        ``None`` -> :data:`DEFAULT_DATASET`; a key of :data:`BUNDLED`; otherwise a
        path to an ``.npz``, ``.jsonl`` / ``.jsonl.gz`` or ``.parquet`` file
        (:mod:`aces_fast.parquet`, needs pyarrow).

    Returns
    -------
    Dataset
    """
    if name_or_path is None:
        name_or_path = DEFAULT_DATASET
    if isinstance(name_or_path, str) and name_or_path in BUNDLED:
        res = bundled_path(name_or_path)
        # Read through the resource API so a zipped install works too.
        return load_npz(io.BytesIO(res.read_bytes()), name=name_or_path,
                        source=f"bundled:{BUNDLED[name_or_path]}")
    path = Path(name_or_path)
    if not path.exists():
        raise ValueError(f"no dataset {str(name_or_path)!r}: not a bundled name "
                         f"({', '.join(BUNDLED)}) and no such file")
    suffixes = "".join(path.suffixes[-2:]).lower()
    if path.suffix.lower() == ".npz":
        return load_npz(path)
    if path.suffix.lower() == ".jsonl" or suffixes == ".jsonl.gz":
        return load_jsonl(path)
    if path.suffix.lower() == ".parquet":  # file or directory; needs pyarrow
        from .parquet import load_parquet
        return load_parquet(path)
    raise ValueError(f"{path}: unknown dataset format; expected .npz, .jsonl, .jsonl.gz "
                     "or .parquet")


# ---------------------------------------------------------------------------
# a single user matrix (``aces-fast rerank``)


def _read_csv_matrix(path: Path) -> np.ndarray:
    """Parse a comma-separated 0/1 matrix; blank lines are skipped, headers rejected."""
    import csv

    rows: List[List[int]] = []
    first_line = None
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            for lineno, cells in enumerate(csv.reader(fh), start=1):
                if not cells or all(not c.strip() for c in cells):
                    continue
                row = []
                for col, cell in enumerate(cells, start=1):
                    text = cell.strip()
                    try:
                        value = float(text)
                    except ValueError:
                        hint = (" (a header row is not supported: delete it)"
                                if not rows else "")
                        raise ValueError(f"{path}: line {lineno}, column {col}: {text!r} is "
                                         f"not a number{hint}") from None
                    if value not in (0.0, 1.0):
                        raise ValueError(f"{path}: line {lineno}, column {col}: value {text!r}; "
                                         "only 0 and 1 are allowed")
                    row.append(int(value))
                if rows and len(row) != len(rows[0]):
                    raise ValueError(f"{path}: line {lineno} has {len(row)} columns but line "
                                     f"{first_line} has {len(rows[0])} (ragged rows)")
                if not rows:
                    first_line = lineno
                rows.append(row)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not a UTF-8 text file: {exc}") from None
    if not rows:
        raise ValueError(f"{path}: no rows; need at least one candidate")
    return np.array(rows, dtype=np.uint8)


def load_pass_matrix(path: PathLike, task: Optional[str] = None) -> Problem:
    """Read one pass matrix from a file, as a :class:`Problem`.

    Formats, by suffix:

    * ``.npy``: a 2-D 0/1 array;
    * ``.npz``: a single array, or the key ``B`` (with optional ``labels``/``y``),
      or the dataset layout (``task_ids``, ``B_kkkk``...);
    * ``.csv``: comma-separated 0/1, one candidate per line (no header row);
    * ``.jsonl`` / ``.jsonl.gz``: the dataset layout.

    For the dataset layouts the first problem is taken, or the one whose
    ``task_id`` is ``task``. ``task`` with a single-matrix file is an error.

    Raises ``ValueError`` naming the file (and line/column for CSV) when the
    content is not a 0/1 matrix with at least one row.
    """
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path}: no such file")
    name = path.name.lower()
    if name.endswith(".jsonl") or name.endswith(".jsonl.gz") or (
            name.endswith(".npz") and _npz_has_task_ids(path)):
        ds = load_jsonl(path) if ".jsonl" in name else load_npz(path)
        if not len(ds):
            raise ValueError(f"{path}: holds no problems")
        if task is None:
            return ds[0]
        if task not in ds.task_ids:
            shown = ", ".join(ds.task_ids[:5]) + (" ..." if len(ds) > 5 else "")
            raise ValueError(f"{path}: no problem with task_id {task!r} (have {shown})")
        return ds[task]
    if task is not None:
        raise ValueError(f"{path}: holds a single matrix; --task/task applies only to "
                         ".jsonl files and dataset .npz files")
    labels = None
    if name.endswith(".npy"):
        try:
            B = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(f"{path}: cannot read as .npy: {exc}") from None
    elif name.endswith(".npz"):
        try:
            z = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(f"{path}: cannot read as .npz: {exc}") from None
        if not isinstance(z, np.lib.npyio.NpzFile):
            B = z  # a .npy payload under an .npz name
        else:
            with z:
                keys = list(z.files)
                if len(keys) == 1:
                    B = z[keys[0]]
                elif "B" in keys:
                    B = z["B"]
                    labels = next((z[k] for k in ("labels", "y") if k in keys), None)
                else:
                    raise ValueError(f"{path}: holds {len(keys)} arrays ({', '.join(keys[:8])}); "
                                     "expected a single array, a key 'B', or the dataset "
                                     "layout with 'task_ids'")
    elif name.endswith(".csv"):
        B = _read_csv_matrix(path)
    else:
        raise ValueError(f"{path}: unknown format; expected .npy, .npz, .csv, .jsonl or "
                         ".jsonl.gz")
    B = _binary_matrix(B, f"{path}: pass matrix")
    if labels is not None:
        labels = _binary_vector(labels, B.shape[0], f"{path}: labels")
    return Problem(path.stem, B, labels)


def _npz_has_task_ids(path: Path) -> bool:
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError):
        return False  # load_pass_matrix reports the read error itself
    if not isinstance(z, np.lib.npyio.NpzFile):
        return False
    with z:
        return "task_ids" in z.files
