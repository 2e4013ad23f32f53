"""The commit protocol of a results directory (``rerank-dataset``'s output).

A run writes many part files over minutes or hours; operators kill it, start a
second one by mistake, copy files in, change the input, fill the disk. The
directory therefore follows the discipline of table formats with a commit log
(Delta Lake, Iceberg, Spark's output committers), small enough to read in one
sitting. Guarantees and their limits are stated in ``docs/parquet.md``.

Layout::

    OUT.parquet/
        part-000000-1f2e3d4c.parquet   committed results (what readers see)
        _aces_fast/                    hidden from Parquet readers (leading "_")
            lock                       advisory lock for the whole run; the holder's pid
            manifest.json              the run's identity and every committed part
            log/000000000007.json      commits made since manifest.json was written
            staging/                   this run's temporaries (unique names)
            unknown/                   foreign or damaged files moved aside
    OUT.errors.jsonl                   bad input rows (``--skip-invalid``)

**One writer.** :class:`DirLock` holds ``fcntl.flock`` (``msvcrt.locking`` on
Windows) on ``_aces_fast/lock`` from before anything is read until the run
ends; the kernel drops it when the process dies, however it dies. A second run
fails at once, naming the holder's pid, having touched nothing.

**A commit** (:meth:`ResultsDir.commit`), for one batch of input rows:

1. the part is written to ``staging/`` under a name unique to the run, fsynced
   (:meth:`ResultsDir.stage`, by a few threads, several parts at once; the
   commit renames it to the part's name in ``staging/``);
2. the batch's bad rows are appended to the errors file, fsynced;
3. the commit record -- part name, rows, bytes, SHA-256, first and last task
   id, the input rows the batch covered (results and errors), the errors
   file's length and SHA-256 after the append -- is written to a temporary
   file, fsynced, renamed into ``log/`` and the directory fsynced. **This
   rename is the commit point.**
4. the part is renamed from ``staging/`` into the directory (fsynced).

A kill before step 3 leaves nothing committed: the next run deletes the
staging files and cuts the errors file back to its committed length. A kill
between 3 and 4 leaves a committed part in ``staging/``; the next run checks
its checksum and finishes the rename (roll forward).

**Resume** trusts only the log: each committed part must exist with its size
and SHA-256 (a missing or damaged part is moved aside and its rows are redone);
files the log does not list are moved to ``unknown/`` and reported, never read
as results; the input's identity (each file's size and SHA-256), the method,
parameters, backend and library version must be those of the run that began
the directory. The rows still to do are known from the committed row ranges
(:class:`Intervals`), so skipping the finished ones is a range check, not a
re-read of the output.

The log is compacted into ``manifest.json`` (atomically) when a run opens the
directory and when it ends, so its size stays proportional to the parts since.
A fresh run's manifest records its input's identity before the first commit,
not before the ranking (:meth:`ResultsDir.begin`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import shutil
import sys
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "META_DIR",
    "DirLock",
    "DiskFullError",
    "Intervals",
    "OutputBusyError",
    "ResultsDir",
    "StagedPart",
    "file_identity",
    "write_fully",
]

META_DIR = "_aces_fast"
MANIFEST_FORMAT = "aces-fast-results-manifest"
MANIFEST_VERSION = 1
_PART = "part-{:06d}-{}.parquet"
_HASH_CHUNK = 8 << 20


@dataclass(frozen=True)
class StagedPart:
    """A part file's bytes already in ``staging/``, fsynced (:meth:`ResultsDir.stage`)."""

    path: Path
    size: int


class OutputBusyError(OSError):
    """Another run holds the output directory's lock."""


# ---------------------------------------------------------------------------
# small file-system helpers


def _fsync_dir(path: Path) -> None:
    """Make a rename or a new file in ``path`` durable (a no-op where directories
    cannot be opened, as on Windows)."""
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


#: Files of at least this many bytes whose buffer starts on a page boundary
#: (the compiled part writer's) are written past the page cache where the
#: system can (``O_DIRECT``, Linux): copying a 2.4 MB part into the page cache
#: cost 4-5 ms of system time on a 2-core host, writing it direct about 1 ms
#: (most of it creating the file), and the output of a long run no longer
#: crowds the cache. Durability is the same: the file is fsynced either way.
DIRECT_MIN_BYTES = 1 << 20

#: the alignment O_DIRECT is given (buffer address, length and file offset): a
#: page, a multiple of every common logical block size (512, 4096)
_DIRECT_ALIGN = 4096


def write_fully(path: Path, data: Any, *, mode: int = 0o644) -> None:
    """Write ``data`` (bytes-like) to a new file at ``path`` and fsync it.

    A large page-aligned buffer goes to the disk past the page cache
    (:data:`DIRECT_MIN_BYTES`): its whole pages with ``O_DIRECT``, the rest
    buffered. A file system that refuses ``O_DIRECT`` (``EINVAL``, at the open
    or at a write) gets the rest buffered; the file's bytes are the same.
    """
    view = memoryview(data).cast("B")
    direct = _direct_bytes(view)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = -1
    if direct:
        try:
            fd = os.open(str(path), flags | os.O_DIRECT, mode)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            direct = 0
    if fd < 0:
        fd = os.open(str(path), flags, mode)
    try:
        if direct:
            view = view[_write_direct(fd, view[:direct]) :]
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _direct_bytes(view: memoryview) -> int:
    """How many leading bytes of ``view`` :func:`write_fully` writes with
    ``O_DIRECT``: its whole pages when the system has the flag and the buffer
    is large and page-aligned, else 0."""
    if not hasattr(os, "O_DIRECT") or view.nbytes < DIRECT_MIN_BYTES:
        return 0
    if np.frombuffer(view, np.uint8).ctypes.data % _DIRECT_ALIGN:
        return 0
    return view.nbytes // _DIRECT_ALIGN * _DIRECT_ALIGN


def _write_direct(fd: int, view: memoryview) -> int:
    """Write ``view`` (page-aligned, whole pages) to ``fd`` (opened ``O_DIRECT``,
    at offset 0) and clear the flag. Returns the bytes written: all, or fewer
    when the file system refused a write (``EINVAL``) or wrote part of a page;
    the caller writes the rest buffered from there."""
    import fcntl

    done = 0
    try:
        while done < len(view):
            done += os.write(fd, view[done:])
            if done % _DIRECT_ALIGN:
                break  # an unaligned offset: O_DIRECT cannot go on from it
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_DIRECT)
    return done


def _atomic_json(path: Path, obj: Any, tmp_suffix: str) -> None:
    """``path`` holds ``obj`` as JSON, all or nothing (temporary, fsync, rename, fsync)."""
    tmp = path.with_name(f".{path.name}.{tmp_suffix}.tmp")
    try:
        write_fully(tmp, json.dumps(obj, separators=(",", ":")).encode())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    _fsync_dir(path.parent)


def sha256_file(path: Path, limit: int | None = None) -> str:
    """SHA-256 of a file (of its first ``limit`` bytes); hashlib releases the GIL,
    so several files hash in parallel on threads."""
    return _sha256_prefix(path, limit).hexdigest()


def _sha256_prefix(path: Path, limit: int | None = None) -> Any:
    """The running hash object of a file's first ``limit`` bytes (all: ``None``),
    to check and then go on appending to."""
    h = hashlib.sha256()
    left = limit
    with open(path, "rb") as fh:
        while left is None or left > 0:
            chunk = fh.read(_HASH_CHUNK if left is None else min(_HASH_CHUNK, left))
            if not chunk:
                break
            h.update(chunk)
            if left is not None:
                left -= len(chunk)
    return h


def file_identity(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """What identifies an input: each file's name, size and SHA-256 (hashed on
    threads, about 1.4 GB/s per core with SHA extensions). The path is recorded
    for the reader but not compared: a moved dataset is the same dataset."""
    with ThreadPoolExecutor(max_workers=max(1, min(len(paths), os.cpu_count() or 1))) as pool:
        digests = list(pool.map(sha256_file, paths))
    return [
        {
            "path": str(Path(p).resolve()),
            "name": Path(p).name,
            "size": os.path.getsize(p),
            "sha256": d,
        }
        for p, d in zip(paths, digests)
    ]


class DiskFullError(OSError):
    """The disk (or quota) filled up while committing; the message names the path."""


def disk_full_hint(exc: OSError, path: Any) -> OSError:
    """An ``ENOSPC``/``EDQUOT`` error as one sentence naming ``path`` and the way on."""
    if isinstance(exc, DiskFullError):
        return exc
    out = DiskFullError(
        f"{path}: no space left on the device ({os.strerror(exc.errno or 0)}); "
        "the committed results are intact: free some space and rerun with "
        "--resume (resume=True)"
    )
    out.errno = exc.errno
    return out


def _is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


# ---------------------------------------------------------------------------
# the lock


class DirLock:
    """An advisory, exclusive lock on a file, held until :meth:`release` or the
    process ends. Fails at once (no waiting) with :class:`OutputBusyError`
    naming the holder's pid."""

    def __init__(self, path: Path, what: str):
        self.path = path
        try:
            fd = os.open(str(path), os.O_RDWR | os.O_CREAT, 0o644)
        except FileNotFoundError:
            raise _StaleLock() from None
        try:
            if not _try_lock(fd):
                holder = _read_pid(fd)
                raise OutputBusyError(
                    f"{what}: another run (pid {holder or 'unknown'}) is writing there; wait for "
                    "it to finish or stop it, then rerun (with --resume to continue its work)"
                )
            if not _same_file(fd, path):  # unlinked by the holder we waited behind
                raise _StaleLock()
        except BaseException:
            os.close(fd)
            raise
        self._fd: int | None = fd
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())  # a new descriptor: at offset 0

    def release(self) -> None:
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, 0)
            except OSError:
                pass
            os.close(self._fd)  # closing drops the lock
            self._fd = None


_LOCK_TRIES = 20


class _StaleLock(Exception):
    """The lock file was removed between opening and locking it: try again."""


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(str(path))
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _try_lock(fd: int) -> bool:
    if sys.platform == "win32":  # pragma: no cover - no Windows runner here
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 64, 0).decode(errors="replace") if hasattr(os, "pread") else ""
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return None


# ---------------------------------------------------------------------------
# row ranges


class Intervals:
    """A set of input row numbers as sorted, disjoint half-open ranges
    ``[starts[i], ends[i])``; membership is a binary search (O(log k))."""

    def __init__(self, pairs: Iterable[Sequence[int]] = ()):
        merged: list[list[int]] = []
        for a, b in sorted((int(a), int(b)) for a, b in pairs if b > a):
            if merged and a <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        self.starts = np.array([a for a, _ in merged], dtype=np.int64)
        self.ends = np.array([b for _, b in merged], dtype=np.int64)

    @staticmethod
    def of_rows(rows: np.ndarray) -> list[list[int]]:
        """The ranges of a set of row numbers (any order, duplicates allowed)."""
        # sorted, then deduplicated: np.unique hashes integers (NumPy >= 2.3),
        # 0.26 ms for a batch's 2 048 consecutive rows against 0.02 ms here
        r = np.sort(np.asarray(rows, dtype=np.int64), kind="stable")
        if r.size == 0:
            return []
        r = r[np.concatenate(([True], r[1:] != r[:-1]))]
        cut = np.flatnonzero(np.diff(r) != 1) + 1
        starts = np.concatenate([r[:1], r[cut]])
        ends = np.concatenate([r[cut - 1], r[-1:]]) + 1
        return [[int(a), int(b)] for a, b in zip(starts, ends)]

    def __len__(self) -> int:
        return int((self.ends - self.starts).sum())

    def contains(self, rows: np.ndarray) -> np.ndarray:
        """Boolean mask: which of ``rows`` are in the set."""
        rows = np.asarray(rows, dtype=np.int64)
        i = np.searchsorted(self.ends, rows, side="right")
        ok = i < self.starts.size
        hit = np.zeros(rows.shape, dtype=bool)
        hit[ok] = self.starts[i[ok]] <= rows[ok]
        return hit

    def covers(self, lo: int, hi: int) -> bool:
        """Whether every row of ``[lo, hi)`` is in the set."""
        if hi <= lo:
            return True
        i = int(np.searchsorted(self.ends, lo, side="right"))
        return i < self.starts.size and self.starts[i] <= lo and self.ends[i] >= hi

    def count(self, lo: int, hi: int) -> int:
        """How many rows of ``[lo, hi)`` are in the set."""
        a = np.clip(self.starts, lo, hi)
        b = np.clip(self.ends, lo, hi)
        return int((b - a).sum())


# ---------------------------------------------------------------------------
# the directory


@dataclass
class Commit:
    """One committed batch (a record of the log / an entry of the manifest)."""

    seq: int
    part: str | None  # None: the batch had only bad rows
    rows: int = 0
    bytes: int = 0
    sha256: str = ""
    first_task_id: str | None = None
    last_task_id: str | None = None
    covers: list[list[int]] = field(default_factory=list)  # input rows with results here
    error_covers: list[list[int]] = field(default_factory=list)  # ... in the errors file
    errors: int = 0
    errors_end: int = 0  # the errors file's length after this commit
    errors_sha256: str = ""  # ... and the SHA-256 of that prefix


def _describe_input(identity: list[dict[str, Any]]) -> str:
    return ", ".join(f"{i['name']} ({i['size']} bytes)" for i in identity)


class ResultsDir:
    """An output directory under the commit protocol (see the module docstring).

    Creating it takes the lock (and creates the directory when missing);
    :meth:`begin` then reads the commit record; :meth:`commit` adds a batch;
    :meth:`close` releases the lock.

    Parameters
    ----------
    path : Path
        The directory.
    errors_path : Path
        The errors file (JSON Lines).

    Attributes
    ----------
    done : Intervals
        Input rows committed by earlier runs (results and errors).
    written, invalid : int
        Result rows and error rows committed by this run.
    """

    def __init__(self, path: Path, errors_path: Path):
        self.dir = Path(path)
        self.meta = self.dir / META_DIR
        self.errors_path = Path(errors_path)
        self.header: dict[str, Any] = {}
        self.run = secrets.token_hex(4)
        self.commits: list[Commit] = []
        self.written = self.invalid = 0
        self.warnings: list[str] = []
        self._lock: DirLock | None = None
        self._errors_fh: Any = None
        self._errors_hash = hashlib.sha256()
        self._errors_end = 0
        self._identity: Future[list[dict[str, Any]]] | None = None
        if self.dir.exists() and not self.dir.is_dir():
            raise ValueError(
                f"{self.dir}: exists and is not a directory; rerank-dataset writes "
                "a directory of part files there"
            )
        # Only the lock holder may ever remove the directory: a run that loses
        # the lock leaves everything alone, even a directory it saw created.
        # The holder re-checks that its lock file is still the one at the path
        # (another run may have removed an unused directory in between).
        for _ in range(_LOCK_TRIES):
            self.created = not self.dir.exists()
            self.dir.mkdir(parents=True, exist_ok=True)
            try:
                self.meta.mkdir(exist_ok=True)
                self._lock = DirLock(self.meta / "lock", str(self.dir))
                break
            except (_StaleLock, FileNotFoundError):
                continue
        else:  # pragma: no cover - needs a directory removed 20 times in a row
            raise OutputBusyError(
                f"{self.dir}: another process keeps removing this directory; choose another one"
            )

    def begin(
        self,
        header: dict[str, Any],
        *,
        resume: bool,
        restart: bool,
        identity: Future[list[dict[str, Any]]] | None = None,
    ) -> None:
        """Start or continue the run described by ``header`` (see the class
        docstring); on any error the lock is released.

        ``identity``: the input's identity (:func:`file_identity`, the header's
        ``"input"``) while it is still being hashed. A run that starts fresh
        needs it only in its first commit's manifest, so it is awaited there
        and the ranking overlaps the hashing (0.6 s of SHA-256 for 625 MB on
        one core); until then the manifest records no input (``null``) and no
        commit, which any later run reads as a new directory. A run that
        resumes commits compares it with the record's, so waits for it here.
        """
        self.header = dict(
            header,
            format=MANIFEST_FORMAT,
            version=MANIFEST_VERSION,
            errors_path=str(self.errors_path.resolve()),
        )
        self._identity = identity
        if identity is not None:
            self.header["input"] = None
        try:
            self._open(resume, restart)
        except BaseException:
            self.close(complete=False)
            raise

    # -- opening ---------------------------------------------------------------

    def _open(self, resume: bool, restart: bool) -> None:
        for sub in ("log", "staging"):
            (self.meta / sub).mkdir(exist_ok=True)
        if restart:  # whatever the record says, even when it cannot be read
            try:
                commits = self._read_log()[1]
            except ValueError:
                commits = []
            self._discard(commits, self._visible())
            self._start_fresh()
            return
        old_header, commits = self._read_log()
        if old_header is not None and old_header.get("input") is None and not commits:
            old_header = None  # a run that ended before its input was hashed
        visible = self._visible()
        if not commits and not visible:  # new, or a run that committed nothing
            self._start_fresh()
            return
        if not resume:
            what = (
                f"{len(commits)} committed batches"
                if old_header is not None
                else f"{len(visible)} files not written by this version of aces-fast"
            )
            raise ValueError(
                f"{self.dir}: already holds results ({what}); pass --resume "
                "(resume=True) to continue that run, --restart (restart=True) to "
                "discard it and start over, or choose another directory"
            )
        if old_header is None:
            raise ValueError(
                f"{self.dir}: holds files but no commit record of aces-fast "
                f"({', '.join(p.name for p in visible[:3])}"
                f"{', ...' if len(visible) > 3 else ''}); nothing to resume: "
                "pass --restart (restart=True) to move them aside and start over"
            )
        self._settle(write=False)  # the record's manifest stays as it is
        self._check_same_run(old_header)
        self.commits = self._verify(commits)
        ours = {self.dir / c.part for c in self.commits if c.part}
        self._move_aside(
            [p for p in self._visible() if p not in ours], "not a committed part of this run"
        )
        self._resume_errors_file()
        self._compact()
        self._clear_staging()

    def _visible(self) -> list[Path]:
        """What a Parquet reader of the directory would look at."""
        return [p for p in sorted(self.dir.iterdir()) if not p.name.startswith((".", "_"))]

    def _start_fresh(self) -> None:
        self.commits = []
        self._clear_staging()
        for f in (self.meta / "log").iterdir():
            f.unlink()
        if self.errors_path.exists():
            self.errors_path.unlink()  # it belongs to an earlier run of this output
        self._compact()

    def _read_log(self) -> tuple[dict[str, Any] | None, list[Commit]]:
        """The manifest and the commits after it, in order (a torn or unreadable
        record ends the log: nothing after it was committed)."""
        manifest = self.meta / "manifest.json"
        header: dict[str, Any] | None = None
        commits: list[Commit] = []
        if manifest.exists():
            try:
                obj = json.loads(manifest.read_bytes())
                header = obj["header"]
                commits = [Commit(**c) for c in obj["commits"]]
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise ValueError(
                    f"{manifest}: unreadable commit record ({exc}); the directory "
                    "cannot be resumed: pass --restart (restart=True) to start "
                    "over"
                ) from None
            if (
                header.get("format") != MANIFEST_FORMAT
                or not isinstance(header.get("version"), int)
                or header["version"] > MANIFEST_VERSION
            ):
                raise ValueError(
                    f"{manifest}: written by a newer aces-fast (manifest version "
                    f"{header.get('version')!r}); upgrade aces_fast to resume it"
                )
        seq = commits[-1].seq if commits else -1
        for f in sorted((self.meta / "log").glob("*.json")):
            try:
                c = Commit(**json.loads(f.read_bytes()))
            except (OSError, ValueError, TypeError):
                break
            if c.seq <= seq:
                continue  # already in the manifest (a kill during compaction)
            if c.seq != seq + 1:
                break
            commits.append(c)
            seq = c.seq
        return header, commits

    def _check_same_run(self, old: dict[str, Any]) -> None:
        new = self.header
        for key, what in (
            ("method", "method"),
            ("params", "params"),
            ("backend", "backend"),
            ("aces_fast", "aces_fast version"),
        ):
            if old.get(key) != new[key]:
                raise ValueError(
                    f"{self.dir}: was written with {what} {old.get(key)!r}, this "
                    f"run has {new[key]!r}; --resume needs the same method, "
                    "parameters, backend and aces_fast version (or --restart to "
                    "start over, or write to a new directory)"
                )
        same = [(i["name"], i["size"], i["sha256"]) for i in old.get("input") or []]
        now = [(i["name"], i["size"], i["sha256"]) for i in new["input"]]
        if same != now:
            raise ValueError(
                f"{self.dir}: the input changed since this run began (then: "
                f"{_describe_input(old.get('input') or [])}; now: "
                f"{_describe_input(new['input'])}, or the same sizes with other "
                "content); its results would mix two inputs: pass --restart "
                "(restart=True) to start over"
            )
        if old.get("errors_path") != new["errors_path"]:
            raise ValueError(
                f"{self.dir}: this run's bad rows are in {old.get('errors_path')}; "
                f"resume with --errors {old.get('errors_path')} (this run has "
                f"{new['errors_path']})"
            )

    def _verify(self, commits: list[Commit]) -> list[Commit]:
        """The commits whose part is whole (size and SHA-256); a part left in
        staging by a kill after its commit is renamed into place first."""
        for c in commits:
            if c.part and not (self.dir / c.part).exists():
                staged = self.meta / "staging" / c.part
                if (
                    staged.exists()
                    and staged.stat().st_size == c.bytes
                    and sha256_file(staged) == c.sha256
                ):
                    os.replace(staged, self.dir / c.part)
                    _fsync_dir(self.dir)
        with_part = [c for c in commits if c.part]

        def whole(c: Commit) -> bool:
            p = self.dir / c.part  # type: ignore[operator]
            try:
                return p.stat().st_size == c.bytes and sha256_file(p) == c.sha256
            except OSError:
                return False

        workers = max(1, min(len(with_part), os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=workers) as pool:
            ok = dict(zip((c.seq for c in with_part), pool.map(whole, with_part)))
        kept: list[Commit] = []
        for c in commits:
            if c.part and not ok[c.seq]:
                if (self.dir / c.part).exists():
                    self._move_aside(
                        [self.dir / c.part],
                        "damaged (size or checksum differs "
                        "from its commit record); its rows are ranked again",
                    )
                else:
                    self.warnings.append(
                        f"{self.dir / c.part}: committed part is missing; its rows are ranked again"
                    )
                # Its bad rows stay committed in the errors file; only its ranked
                # rows are redone.
                kept.append(
                    Commit(
                        c.seq,
                        None,
                        error_covers=c.error_covers,
                        errors=c.errors,
                        errors_end=c.errors_end,
                        errors_sha256=c.errors_sha256,
                    )
                )
                continue
            kept.append(c)
        return kept

    def _move_aside(self, paths: Iterable[Path], why: str) -> None:
        paths = sorted(paths)
        if not paths:
            return
        dest = self.meta / "unknown"
        dest.mkdir(exist_ok=True)
        for p in paths:
            target = dest / p.name
            k = 1
            while target.exists():
                target = dest / f"{p.name}.{k}"
                k += 1
            os.replace(p, target)
            self.warnings.append(f"{p}: {why}; moved to {target}")
        _fsync_dir(self.dir)

    def _discard(self, commits: list[Commit], visible: list[Path]) -> None:
        """--restart: our parts go, anything else is moved aside."""
        ours = {self.dir / c.part for c in commits if c.part}
        for p in visible:
            if p in ours:
                p.unlink()
        self._move_aside([p for p in visible if p not in ours], "not a part of this output")

    def _resume_errors_file(self) -> None:
        end = self.commits[-1].errors_end if self.commits else 0
        digest = self.commits[-1].errors_sha256 if self.commits else ""
        if end == 0:
            if self.errors_path.exists():
                self.errors_path.unlink()  # only uncommitted lines
            return
        path = self.errors_path
        prefix = _sha256_prefix(path, end) if path.exists() and path.stat().st_size >= end else None
        if prefix is None or prefix.hexdigest() != digest:
            raise ValueError(
                f"{path}: the errors file does not hold what this run committed "
                "(changed, truncated or missing); the bad rows it recorded would "
                "be lost: restore it, or pass --restart (restart=True) to start "
                "over"
            )
        with open(path, "r+b") as fh:  # cut what a kill left after the last commit
            fh.truncate(end)
            os.fsync(fh.fileno())
        self._errors_end = end
        self._errors_hash = prefix  # appends go on from the verified prefix

    def _clear_staging(self) -> None:
        for f in (self.meta / "staging").iterdir():
            if f.is_dir():
                shutil.rmtree(f)
            else:
                f.unlink()

    def _settle(self, *, write: bool = True) -> None:
        """The input's identity into the header once it is hashed (see
        :meth:`begin`), when it is still awaited; ``write``: into the manifest
        too (a fresh run's said ``"input": null``), before its first commit.
        Marked done only after: a commit that fails here leaves it to redo."""
        if self._identity is not None:
            self.header["input"] = self._identity.result()
            if write:
                self._compact()
            self._identity = None

    def _compact(self) -> None:
        """Write every commit into ``manifest.json`` and empty the log."""
        _atomic_json(
            self.meta / "manifest.json",
            {"header": self.header, "commits": [asdict(c) for c in self.commits]},
            self.run,
        )
        for f in (self.meta / "log").glob("*.json"):
            f.unlink()

    # -- state ----------------------------------------------------------------

    @property
    def done(self) -> Intervals:
        return Intervals(r for c in self.commits for r in c.covers + c.error_covers)

    @property
    def has_part(self) -> bool:
        return any(c.part for c in self.commits)

    # -- writing ----------------------------------------------------------------

    def stage(self, data: Any) -> StagedPart:
        """Write a part file's bytes (bytes-like) to ``staging/`` under a name unique
        to this run and fsync them: the slow half of a commit, which a few threads
        do for several batches at once (thread-safe). Nothing is committed
        until :meth:`commit` takes the result; a part never committed is deleted
        by the next run that opens the directory."""
        path = self.meta / "staging" / f".{self.run}-{secrets.token_hex(8)}.pending"
        try:
            write_fully(path, data)
        except OSError as exc:
            path.unlink(missing_ok=True)
            if _is_disk_full(exc):
                raise disk_full_hint(exc, self.dir) from None
            raise
        return StagedPart(path, memoryview(data).nbytes)

    def commit(
        self,
        data: bytes | StagedPart | None,
        rows: int,
        task_ids: tuple[str | None, ...],
        covers: np.ndarray,
        error_lines: Sequence[str],
        error_rows: np.ndarray,
        sha256: str | None = None,
    ) -> None:
        """Commit one batch: ``data`` (a whole Parquet file, as bytes or staged by
        :meth:`stage`, or ``None`` when the batch has no result rows) holding
        ``rows`` results of the input rows ``covers`` (first and last task id in
        ``task_ids``), and the bad input rows ``error_rows`` as JSON lines
        ``error_lines``. ``sha256``: the hex
        digest of ``data`` when the caller has it (computed on its own thread);
        it is what the manifest records and resume verifies the part against."""
        seq = self.commits[-1].seq + 1 if self.commits else 0
        name = _PART.format(seq, self.run) if data is not None else None
        staged = self.meta / "staging" / name if name else None
        size, digest = 0, ""
        try:
            self._settle()  # a full disk here is reported as at any step of a commit
            if isinstance(data, StagedPart):
                os.replace(data.path, staged)  # type: ignore[arg-type]
                size = data.size
                digest = sha256 or sha256_file(staged)  # type: ignore[arg-type]
            elif data is not None:
                write_fully(staged, data)  # type: ignore[arg-type]
                size = len(data)
                digest = sha256 or hashlib.sha256(data).hexdigest()
            if error_lines:
                self._append_errors(error_lines)
            c = Commit(
                seq,
                name,
                rows=rows,
                bytes=size,
                sha256=digest,
                first_task_id=task_ids[0],
                last_task_id=task_ids[1],
                covers=Intervals.of_rows(covers),
                error_covers=Intervals.of_rows(error_rows),
                errors=len(error_lines),
                errors_end=self._errors_end,
                errors_sha256=self._errors_hash.hexdigest(),
            )
            _atomic_json(self.meta / "log" / f"{seq:012d}.json", asdict(c), self.run)
        except OSError as exc:
            if staged is not None and staged.exists():
                staged.unlink()
            if isinstance(data, StagedPart):
                data.path.unlink(missing_ok=True)
            self._cut_errors()
            if _is_disk_full(exc):
                raise disk_full_hint(exc, self.dir) from None
            raise
        self.commits.append(c)
        if staged is not None:
            # No fsync of the directory here: should a power cut lose this rename,
            # the committed part is still in staging/ and the next run moves it.
            os.replace(staged, self.dir / name)  # type: ignore[operator]
        self.written += rows
        self.invalid += len(error_lines)

    def _append_errors(self, lines: Sequence[str]) -> None:
        # Unbuffered: after a failed write nothing is left in a buffer to be
        # flushed later, so _cut_errors leaves exactly the committed bytes.
        if self._errors_fh is None:
            self.errors_path.parent.mkdir(parents=True, exist_ok=True)
            self._errors_fh = os.open(
                str(self.errors_path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644
            )
        data = "".join(line + "\n" for line in lines).encode()
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._errors_fh, view) :]
            os.fsync(self._errors_fh)
        except OSError as exc:
            if _is_disk_full(exc):
                raise disk_full_hint(exc, self.errors_path) from None
            raise
        self._errors_hash.update(data)
        self._errors_end += len(data)

    def _cut_errors(self) -> None:
        """After a failed commit: the errors file back to its committed length
        (a full disk may have cut a line, or the commit record failed after the
        lines were written)."""
        committed = self.commits[-1].errors_end if self.commits else 0
        try:
            if self.errors_path.exists() and self.errors_path.stat().st_size > committed:
                with open(self.errors_path, "r+b") as fh:
                    fh.truncate(committed)
                    os.fsync(fh.fileno())
        except OSError:
            pass  # the next run cuts it
        if self._errors_end != committed:
            self._errors_end = committed
            self._errors_hash = (
                _sha256_prefix(self.errors_path, committed) if committed else hashlib.sha256()
            )

    def close(self, complete: bool) -> None:
        """Release the lock; after a complete run, fold the log into the manifest."""
        if self._errors_fh is not None:
            os.close(self._errors_fh)
            self._errors_fh = None
        try:
            if complete:
                self._settle(write=False)  # written next
                self._compact()
            elif not self.commits:
                self._remove_if_unused()
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def _remove_if_unused(self) -> None:
        """A directory this run created and committed nothing to goes again, so a
        run that fails at once leaves no empty output behind. Called with the
        lock held: a run waiting on it finds its lock file unlinked and retries
        (see ``__init__``)."""
        if self._lock is not None and self.created and not self._visible():
            shutil.rmtree(self.dir, ignore_errors=True)

    def report(self) -> None:
        """Warn about what opening the directory moved aside or found missing."""
        for w in self.warnings:
            warnings.warn(w, stacklevel=3)
