"""Reading untrusted files: size limits checked before allocating, no pickles.

The dataset loaders (:mod:`aces_fast.datasets`) read files that may be
truncated, corrupt or hostile. Everything here fails with a ``ValueError`` that
names the file and the problem, and never allocates memory a file merely
*declares*:

* :func:`resolve_limits` / :func:`check_size` -- the two limits, ``max_cells``
  (cells of one pass matrix, n x m) and ``max_bytes`` (bytes of data one file
  may hold after decompression), from a keyword argument, else the environment
  variables ``ACES_FAST_MAX_CELLS`` / ``ACES_FAST_MAX_BYTES``, else the defaults;
* :func:`open_regular` -- opens a path only if it is a regular file (a FIFO
  would block, a device never ends);
* :func:`read_stdin` -- ``-``: standard input, read up to the byte limit;
* :class:`LimitedReader` -- a stream wrapper that refuses more than a number of
  bytes (decompressed gzip, text formats);
* :func:`read_npy` -- one ``.npy`` array: header parsed alone (bounded), shape and
  dtype checked against the limits and against the bytes that really follow,
  object (pickled) dtypes refused, then exactly the declared bytes read;
* :class:`NpzArchive` -- the members of an ``.npz`` zip, their declared sizes
  checked from the central directory before any is decompressed.
"""

from __future__ import annotations

import io
import math
import os
import stat
import struct
import sys
import warnings
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, NamedTuple

import numpy as np

from . import _env

#: Default cells (n x m) of one pass matrix: 2**28 = 268,435,456 (256 MiB as
#: uint8). Four times a 10**6 x 64 pool, 10**4 times the largest bundled problem.
DEFAULT_MAX_CELLS = 1 << 28
#: Default bytes of data in one file after decompression: 2**30 (1 GiB), the sum
#: of an npz's member sizes or the decompressed text of a JSONL/CSV file.
DEFAULT_MAX_BYTES = 1 << 30
ENV_MAX_CELLS = _env.MAX_CELLS
ENV_MAX_BYTES = _env.MAX_BYTES

# np.load refuses headers longer than this without allow_pickle; so do we.
_MAX_HEADER = 10_000
_CHUNK = 1 << 20
# The compression methods numpy writes (np.savez, np.savez_compressed). bzip2 and
# LZMA decompress a read chunk without an output bound, so a bomb could inflate
# far beyond a member's declared size before zipfile truncates it.
_ZIP_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}


class Limits(NamedTuple):
    """Resolved size limits (see :func:`resolve_limits`)."""

    max_cells: int
    max_bytes: int


def parse_limit(text: str, what: str) -> int:
    """A positive integer from text: ``"268435456"``, ``"1_000_000"`` or ``"1e9"``."""
    s = str(text).strip()
    try:
        value = int(s)
    except ValueError:
        try:
            f = float(s)
        except ValueError:
            f = math.nan
        value = int(f) if math.isfinite(f) and f == int(f) else 0
    if value < 1:
        raise ValueError(f"{what} must be a positive integer, got {text!r}")
    return value


def _one_limit(value: int | None, env: str, default: int, what: str) -> int:
    if value is None:
        text = os.environ.get(env, "").strip()
        return parse_limit(text, f"the environment variable {env}") if text else default
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be a positive integer or None, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{what} must be a positive integer, got {value}")
    return int(value)


def resolve_limits(max_cells: int | None = None, max_bytes: int | None = None) -> Limits:
    """The limits in force: each argument, else its environment variable, else the default.

    Parameters
    ----------
    max_cells : int, optional
        Most cells (n x m) one pass matrix may have; default
        ``$ACES_FAST_MAX_CELLS``, else :data:`DEFAULT_MAX_CELLS` (2**28).
    max_bytes : int, optional
        Most bytes of data one file may hold after decompression; default
        ``$ACES_FAST_MAX_BYTES``, else :data:`DEFAULT_MAX_BYTES` (2**30).

    Raises
    ------
    ValueError, TypeError
        For a limit (or an environment variable) that is not a positive integer.
    """
    return Limits(
        _one_limit(max_cells, ENV_MAX_CELLS, DEFAULT_MAX_CELLS, "max_cells"),
        _one_limit(max_bytes, ENV_MAX_BYTES, DEFAULT_MAX_BYTES, "max_bytes"),
    )


def _cells_hint() -> str:
    return (
        f"raise it with max_cells= (Python), the environment variable {ENV_MAX_CELLS} "
        "or --max-cells (command line)"
    )


def _bytes_hint() -> str:
    return (
        f"raise it with max_bytes= (Python), the environment variable {ENV_MAX_BYTES} "
        "or --max-bytes (command line)"
    )


def check_size(
    where: str,
    *,
    shape: Sequence[int] | None = None,
    nbytes: int | None = None,
    max_cells: int | None = None,
    max_bytes: int | None = None,
) -> None:
    """Refuse a pass matrix or a file's data beyond the limits, before allocating it.

    Parameters
    ----------
    where : str
        Names what is measured, e.g. ``"data.npz: key 'B_0003': declared pass matrix"``;
        the message reads ``"<where>: 10 x 20 = 200 cells is more than the limit ..."``.
    shape : sequence of int, optional
        The (declared) shape of a pass matrix; its product is compared with
        ``max_cells``. Python integers, so declared shapes cannot overflow.
    nbytes : int, optional
        The (declared) number of bytes of a file's data, compared with ``max_bytes``.
    max_cells, max_bytes : int, optional
        The limits; ``None`` resolves as in :func:`resolve_limits`.

    Raises
    ------
    ValueError
        Naming ``where``, the size, the limit and how to raise it.

    O(len(shape)).
    """
    lim = resolve_limits(max_cells, max_bytes)
    if shape is not None:
        dims = [int(d) for d in shape]
        cells = math.prod(dims)
        if cells > lim.max_cells:
            shown = " x ".join(f"{d:,}" for d in dims)
            raise ValueError(
                f"{where}: {shown} = {cells:,} cells is more than the limit of "
                f"{lim.max_cells:,} cells per pass matrix; {_cells_hint()}"
            )
    if nbytes is not None and int(nbytes) > lim.max_bytes:
        raise ValueError(
            f"{where}: {int(nbytes):,} bytes is more than the limit of "
            f"{lim.max_bytes:,} bytes per file; {_bytes_hint()}"
        )


# ---------------------------------------------------------------------------
# opening files


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _refuse_special(label: str, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise ValueError(
            f"{label}: is {_kind(mode)}, not a regular file; only regular files "
            "are read (use '-' to read standard input)"
        )


def open_regular(path: os.PathLike[str] | str, label: str) -> tuple[IO[bytes], int]:
    """Open ``path`` for binary reading if it is a regular file; return (file, size).

    Directories, FIFOs, devices and sockets are refused before opening (a FIFO
    would block, a device may never end). The file is opened non-blocking and
    checked again with ``fstat``, so a path swapped for a FIFO in between is
    refused too instead of blocking.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ValueError(f"{label}: no such file") from None
    except (OSError, ValueError) as exc:  # ValueError: embedded NUL in the path
        raise ValueError(
            f"{label}: cannot access: {getattr(exc, 'strerror', None) or exc}"
        ) from None
    _refuse_special(label, st.st_mode)
    flags = (
        os.O_RDONLY
        | getattr(os, "O_NONBLOCK", 0)
        | getattr(os, "O_NOCTTY", 0)
        | getattr(os, "O_BINARY", 0)
    )
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise ValueError(f"{label}: cannot open: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        _refuse_special(label, st.st_mode)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return fh, int(st.st_size)


def read_stdin(label: str, max_bytes: int) -> bytes:
    """All of standard input (binary), refused beyond ``max_bytes`` or from a terminal."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise ValueError(f"{label}: there is no standard input to read")
    try:
        if stream.isatty():
            raise ValueError(
                f"{label}: standard input is a terminal; pipe or redirect a "
                "file into it (e.g. 'aces-fast rerank - < matrix.csv')"
            )
    except (AttributeError, OSError):
        pass
    data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(
            f"{label}: standard input holds more than {max_bytes:,} bytes, the "
            f"limit per file; {_bytes_hint()}"
        )
    return data


def sniff_format(head: bytes) -> str:
    """The format of a stream from its first bytes: npy, npz, gzip, jsonl or csv."""
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "npz"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return "jsonl" if text.startswith(b"{") else "csv"


class LimitedReader(io.RawIOBase):
    """A read-only stream that raises ``ValueError`` once more than ``limit`` bytes
    came out of ``raw`` (for decompressed and text data, whose size is not known
    up front). Use it under ``io.BufferedReader``/``io.TextIOWrapper``."""

    def __init__(self, raw: IO[bytes], limit: int, label: str):
        super().__init__()
        self._raw, self._limit, self._label, self.count = raw, limit, label, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:  # type: ignore[override]
        view = memoryview(buf).cast("B")
        data = self._raw.read(min(len(view), self._limit + 1 - self.count))
        n = len(data)
        view[:n] = data
        self.count += n
        if self.count > self._limit:
            raise ValueError(
                f"{self._label}: holds more than {self._limit:,} bytes of data "
                f"(after decompression), the limit per file; {_bytes_hint()}"
            )
        return n


# ---------------------------------------------------------------------------
# npy arrays


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass(frozen=True)
class NpyHeader:
    """What an ``.npy`` header declares; ``offset`` = bytes before the data."""

    shape: tuple[int, ...]
    fortran_order: bool
    dtype: np.dtype
    offset: int

    @property
    def count(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize


def _read_up_to(fp: IO[bytes], n: int) -> bytes:
    parts, left = [], n
    while left > 0:
        chunk = fp.read(min(left, _CHUNK))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_npy_header(fp: IO[bytes], where: str) -> NpyHeader:
    """Parse an ``.npy`` header from ``fp`` (positioned at the magic), reading only it.

    Raises ``ValueError`` for a wrong magic, an unknown version, a header longer
    than 10,000 bytes (numpy's own limit without ``allow_pickle``), one numpy
    cannot parse, negative dimensions, and dtypes holding Python objects (they
    would need unpickling, which is never done).
    """
    from numpy.lib import format as npformat

    magic = _read_up_to(fp, 8)
    if len(magic) < 8 or not magic.startswith(b"\x93NUMPY"):
        if len(magic) < 8 and b"\x93NUMPY".startswith(magic[:6]):
            raise ValueError(f"{where}: truncated .npy header ({len(magic)} bytes)")
        if magic[:1] == b"\x80":
            raise ValueError(
                f"{where}: is a Python pickle, not a .npy array; pickles are "
                "refused (loading one can run arbitrary code)"
            )
        raise ValueError(
            f"{where}: not a .npy array (the file does not start with the NumPy magic string)"
        )
    version = (magic[6], magic[7])
    if version not in ((1, 0), (2, 0)):
        raise ValueError(
            f"{where}: unsupported .npy format version {version[0]}.{version[1]} "
            "(a pass matrix is written as version 1.0 or 2.0)"
        )
    size_fmt = "<H" if version == (1, 0) else "<I"
    raw_len = _read_up_to(fp, struct.calcsize(size_fmt))
    if len(raw_len) < struct.calcsize(size_fmt):
        raise ValueError(f"{where}: truncated .npy header")
    hlen = struct.unpack(size_fmt, raw_len)[0]
    if hlen > _MAX_HEADER:
        raise ValueError(
            f"{where}: .npy header of {hlen:,} bytes is longer than the "
            f"{_MAX_HEADER:,} bytes numpy accepts without unpickling"
        )
    header = _read_up_to(fp, hlen)
    if len(header) < hlen:
        raise ValueError(f"{where}: truncated .npy header ({len(header)} of {hlen} bytes)")
    # numpy parses the (bounded) header from memory; everything it raises on a
    # bad header is reported as such, whatever its type (ast/tokenize errors too).
    buf = io.BytesIO(magic + raw_len + header)
    npformat.read_magic(buf)
    reader = npformat.read_array_header_1_0 if version == (1, 0) else npformat.read_array_header_2_0
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # numpy warns on Python-2 headers
            shape, fortran, dtype = reader(buf)
    except Exception as exc:
        raise ValueError(f"{where}: corrupt .npy header ({_describe(exc)})") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"{where}: .npy header declares negative dimensions {shape}")
    if dtype.hasobject:
        raise ValueError(
            f"{where}: holds Python objects (dtype {dtype}); such arrays are "
            "stored as pickles and are refused (loading one can run arbitrary "
            "code)"
        )
    return NpyHeader(tuple(int(d) for d in shape), bool(fortran), dtype, 8 + len(raw_len) + hlen)


def read_npy(
    fp: IO[bytes], where: str, available: int | None, limits: Limits, matrix: bool = False
) -> np.ndarray:
    """Read one ``.npy`` array from ``fp``, checking what it declares before allocating.

    Parameters
    ----------
    fp : binary file object at the start of the array
    where : str
        Names the array in messages.
    available : int or None
        Bytes from the start of the array to the end of its file or zip member
        (None: unknown, then only the limits bound the allocation).
    limits : Limits
    matrix : bool
        True for a pass matrix: its declared cells must fit ``limits.max_cells``.

    Returns
    -------
    numpy.ndarray
        Writable, C or Fortran order as stored, same dtype and values as ``np.load``.
    """
    head = read_npy_header(fp, where)
    shown = "x".join(str(d) for d in head.shape) or "scalar"
    if matrix:
        check_size(
            f"{where}: pass matrix declared by the .npy header",
            shape=head.shape,
            max_cells=limits.max_cells,
        )
    check_size(
        f"{where}: data declared by the .npy header (shape {head.shape}, {head.dtype})",
        nbytes=head.nbytes,
        max_bytes=limits.max_bytes,
    )
    if available is not None and head.nbytes > available - head.offset:
        raise ValueError(
            f"{where}: truncated or corrupt: the header declares shape {shown} "
            f"of {head.dtype} ({head.nbytes:,} bytes) but only "
            f"{max(available - head.offset, 0):,} bytes follow it"
        )
    if head.nbytes == 0:
        try:
            return np.empty(head.shape, head.dtype, order="F" if head.fortran_order else "C")
        except (ValueError, TypeError, OverflowError, MemoryError) as exc:
            raise ValueError(
                f"{where}: unusable shape {head.shape} of {head.dtype} ({_describe(exc)})"
            ) from None
    buf = bytearray(head.nbytes)
    view = memoryview(buf)
    got = 0
    while got < head.nbytes:
        n = fp.readinto(view[got : got + _CHUNK])  # type: ignore[attr-defined]
        if not n:
            break
        got += n
    if got < head.nbytes:
        raise ValueError(
            f"{where}: truncated: the header declares {head.nbytes:,} bytes of "
            f"data ({shown} of {head.dtype}) but the data ends after {got:,}"
        )
    arr = np.frombuffer(buf, dtype=head.dtype, count=head.count)
    if head.fortran_order:
        return arr.reshape(head.shape[::-1]).transpose()
    return arr.reshape(head.shape)


# ---------------------------------------------------------------------------
# npz archives

# What zipfile and its decompressors raise on a truncated or corrupt archive.
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    EOFError,
    OSError,
    struct.error,
    NotImplementedError,
    UnicodeDecodeError,
)


@contextmanager
def _zip_errors(where: str) -> Iterator[None]:
    try:
        yield
    except ValueError:
        raise
    except _ZIP_ERRORS as exc:
        raise ValueError(
            f"{where}: cannot read as .npz: corrupt or truncated zip archive ({_describe(exc)})"
        ) from None


class NpzArchive:
    """The arrays of an ``.npz`` file, read one at a time with every size checked.

    Opening reads only the zip central directory: member names (``x.npy`` gives
    key ``x``, as ``np.load``), declared sizes (their sum must fit
    ``limits.max_bytes``), encryption and compression method (stored or
    deflate, what numpy writes). :meth:`read` then reads one member's header,
    checks it, and decompresses exactly the bytes it declares.
    """

    def __init__(self, fileobj: IO[bytes], label: str, limits: Limits):
        self.label, self.limits = label, limits
        with _zip_errors(label):
            self._zip = zipfile.ZipFile(fileobj)
            infos = self._zip.infolist()
        try:
            self._members = self._index(infos)
        except BaseException:
            self._zip.close()
            raise

    def _index(self, infos: list[zipfile.ZipInfo]) -> dict[str, zipfile.ZipInfo]:
        label = self.label
        total = sum(i.file_size for i in infos)
        check_size(
            f"{label}: uncompressed size of its members",
            nbytes=total,
            max_bytes=self.limits.max_bytes,
        )
        members: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            if info.flag_bits & 0x1:
                raise ValueError(f"{label}: member {info.filename!r} is encrypted")
            if info.compress_type not in _ZIP_METHODS:
                raise ValueError(
                    f"{label}: member {info.filename!r} uses zip compression "
                    f"method {info.compress_type}; only stored and deflate (what "
                    "numpy writes) are read"
                )
            if key in members:
                raise ValueError(f"{label}: the key {key!r} appears twice in the archive")
            members[key] = info
        return members

    @property
    def files(self) -> list[str]:
        """Keys in archive order (member names without ``.npy``)."""
        return list(self._members)

    def __contains__(self, key: str) -> bool:
        return key in self._members

    def header(self, key: str) -> NpyHeader:
        """What member ``key`` declares (reads its header only)."""
        where = f"{self.label}: key {key!r}"
        with _zip_errors(where), self._zip.open(self._members[key]) as fp:
            return read_npy_header(fp, where)

    def read(self, key: str, matrix: bool = False) -> np.ndarray:
        """Member ``key`` as an array (see :func:`read_npy`; ``matrix`` checks cells)."""
        info = self._members[key]
        where = f"{self.label}: key {key!r}"
        with _zip_errors(where), self._zip.open(info) as fp:
            return read_npy(fp, where, info.file_size, self.limits, matrix=matrix)

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> NpzArchive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
