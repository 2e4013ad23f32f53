"""What is installed and how it is configured (:func:`show_config`), and getting a
backend ready before timing or serving (:func:`warmup`)."""

from __future__ import annotations

import os
import platform
import sys
import time
from typing import Any, TextIO

import numpy as np

from ._env import VARIABLES
from .backends import BACKEND_NAMES, backend_status, get_backend, resolve_backend


def config() -> dict[str, Any]:
    """A dict describing the installation: versions, backends and why any is absent.

    Loads every backend (importing numba/torch if installed) to find out.

    Returns
    -------
    dict
        ``aces_fast``, ``python``, ``numpy`` (versions), ``platform``, ``env``
        (the environment variables that steer aces_fast, ``None`` when unset)
        and ``backends``: per backend, whether it is available and its facts
        or the reason it is not.

    Examples
    --------
    >>> import aces_fast as af
    >>> cfg = af.config()
    >>> sorted(cfg)
    ['aces_fast', 'backends', 'env', 'numpy', 'platform', 'python']
    >>> cfg["aces_fast"] == af.__version__
    True
    """
    status = backend_status()
    backends: dict[str, Any] = {}
    for name in BACKEND_NAMES:
        reason = status[name]
        entry: dict[str, Any] = {"available": reason is None}
        if reason is None:
            entry.update(get_backend(name).info())
        else:
            entry["reason"] = reason
        backends[name] = entry
    from . import __version__

    return {
        "aces_fast": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "numpy": np.__version__,
        "env": {name: os.environ.get(name) for name in VARIABLES},
        "backends": backends,
    }


def show_config(file: Any = None) -> None:
    """Print :func:`config` in a readable form (to ``file``, default stdout).

    Parameters
    ----------
    file : file-like, optional
        Where to print (anything with ``write``); default ``sys.stdout``.

    Returns
    -------
    None

    Examples
    --------
    >>> import io
    >>> import aces_fast as af
    >>> out = io.StringIO()
    >>> af.show_config(out)
    >>> out.getvalue().startswith(f"aces_fast {af.__version__}  python ")
    True
    >>> "backends:" in out.getvalue()
    True
    """
    cfg = config()
    out = file or sys.stdout
    print(f"aces_fast {cfg['aces_fast']}  python {cfg['python']}  numpy {cfg['numpy']}", file=out)
    print(f"platform: {cfg['platform']}", file=out)
    for key, val in cfg["env"].items():
        print(f"{key}={val if val is not None else '(unset)'}", file=out)
    print("backends:", file=out)
    for name, entry in cfg["backends"].items():
        if entry["available"]:
            details = ", ".join(f"{k}={v}" for k, v in entry.items() if k != "available")
            print(f"  {name:6s} yes  {details}", file=out)
        else:
            print(f"  {name:6s} no   {entry['reason']}", file=out)
    auto = next(n for n in ("cpp", "numba", "numpy") if cfg["backends"][n]["available"])
    note = "" if auto == "cpp" else " -- slower than cpp; see the cpp line above for the remedy"
    print(f"auto (CPU input) runs on: {auto}{note}", file=out)
    if cfg["backends"].get("numba", {}).get("available"):
        print(
            "numba compiles each kernel on first use (tens of seconds on a new machine); "
            "aces_fast.warmup('numba') or `aces-fast warmup` does it ahead. Compiled code "
            "is kept in a per-user disk cache (cache= above), loaded by later processes in "
            "about a second; ACES_FAST_NUMBA_CACHE=0 turns it off, "
            "ACES_FAST_NUMBA_CACHE_DIR=path moves it.",
            file=out,
        )


class _Progress:
    """``progress(done, total, label)`` printing to ``out``: one line rewritten in
    place on a terminal, one line per step elsewhere."""

    def __init__(self, backend: str, out: TextIO):
        self.backend, self.out = backend, out
        self.tty = bool(getattr(out, "isatty", lambda: False)())
        self.start = time.perf_counter()
        self.width = 0

    def __call__(self, done: int, total: int, label: str) -> None:
        elapsed = time.perf_counter() - self.start
        text = f"aces_fast warmup ({self.backend}): [{done}/{total}] {label}  {elapsed:.1f} s"
        if self.tty:
            pad = " " * max(0, self.width - len(text))
            self.width = len(text)
            self.out.write("\r" + text + pad + ("\n" if done == total else ""))
        elif done < total:
            self.out.write(text + "\n")
        self.out.flush()


def warmup(backend: str | None = None, progress: bool | None = None) -> dict[str, Any]:
    """Get a backend ready: compile (or load) whatever its first calls would.

    The ``numba`` backend compiles its kernels on first use, tens of seconds on
    a fresh machine; this compiles every kernel signature its calls reach
    (every method, the batch path, serial and parallel builds, read-only
    inputs included) so that no later call pays it. Compiled code is kept in a
    per-user disk cache, so later processes load it in about a second (see
    the backends page, "numba: warm-up and disk cache"). The ``torch`` backend in
    its fused mode (``ACES_FAST_TORCH_FUSED=1``) compiles its pair sums, on the
    CPU and on CUDA when present (seconds; torch keeps them in its own disk
    cache). Backends that compile nothing (``cpp``, ``numpy``, ``torch``
    otherwise) return at once.

    Parameters
    ----------
    backend : str, optional
        The backend to warm up; ``None`` applies the usual selection rule
        (``ACES_FAST_BACKEND``, else ``auto``), so pass ``"numba"`` explicitly to
        prepare numba on a machine where ``auto`` picks ``cpp``.
    progress : bool, optional
        Print progress to stderr. Default: only when stderr is a terminal.

    Returns
    -------
    dict
        ``backend`` (the name), ``seconds`` (wall time of this call), and the
        backend's facts: for numba ``compiled`` / ``loaded`` (kernel signatures
        compiled / loaded from the disk cache by this call), ``steps`` (seconds
        per warm-up step: each kernel family, method and batch path, serial and
        parallel build), ``cache`` (the cache directory, or why it is off), the
        threading layer and thread count; for torch's fused mode ``fused``,
        ``compiled`` (variants) and ``steps`` (seconds per device).

    Raises
    ------
    BackendUnavailableError
        When the backend cannot run here (the message says why).

    Examples
    --------
    >>> import aces_fast as af
    >>> af.warmup("numpy")["backend"]  # nothing to compile: returns at once
    'numpy'
    """
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(f"progress must be True, False or None; got {type(progress).__name__}")
    be = resolve_backend(backend)
    show = sys.stderr.isatty() if progress is None else progress
    start = time.perf_counter()
    facts = be.warmup(_Progress(be.name, sys.stderr) if show else None)
    out: dict[str, Any] = {"backend": be.name, "seconds": round(time.perf_counter() - start, 3)}
    out.update(facts)
    return out
