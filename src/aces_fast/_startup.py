"""What the command line needs before the package's imports run."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Any

__all__ = ["CompileInterrupts", "exit_on_interrupt", "restore_interrupt"]


def _interrupted(signum: int, frame: Any) -> None:
    print("aces-fast: interrupted", file=sys.stderr, flush=True)
    raise SystemExit(130)


def exit_on_interrupt() -> None:
    """Until :func:`restore_interrupt`: Ctrl-C prints one line and exits 130."""
    try:
        signal.signal(signal.SIGINT, _interrupted)
    except ValueError:  # not the main thread: leave the handler alone
        pass


def restore_interrupt() -> None:
    """Python's own Ctrl-C handler (KeyboardInterrupt) again, if ours is set."""
    try:
        if signal.getsignal(signal.SIGINT) is _interrupted:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:
        pass


# ---------------------------------------------------------------------------
# Ctrl-C while numba compiles
#
# numba compiles (and loads cached code) through llvmlite, which calls back into
# Python; a KeyboardInterrupt raised inside such a callback is printed as
# "Exception ignored ..." and dropped, and the compiler's state is left half
# built (a later "RuntimeError: no compiled object yet"). A single kernel's
# compilation can take seconds, so deferring the interrupt to the next kernel
# is too slow too. While a command runs, a Ctrl-C that finds numba's compiler
# lock held (a compile or a cache load under way) therefore ends the process at
# once: one line, exit status 130. The disk cache and results directories are
# written by atomic renames, so such an exit leaves them as a kill would:
# consistent. Outside compilation Ctrl-C stays a KeyboardInterrupt.
#
# Python runs signal handlers only on the main thread between bytecodes, and
# not at all while the main thread is inside one long LLVM call (ctypes,
# GIL released). So the handler is backed by a watcher thread woken through
# signal.set_wakeup_fd: it checks the lock and exits within milliseconds.

_INTERRUPTED = b"aces-fast: interrupted\n"


def _compiler_lock() -> Any:
    """numba's global compiler lock, if numba has been imported (never imports it)."""
    module = sys.modules.get("numba.core.compiler_lock")
    return getattr(module, "global_compiler_lock", None)


def _lock_held_by_any_thread() -> bool:
    lock = _compiler_lock()
    if lock is None:
        return False
    inner = getattr(lock, "_lock", None)
    if inner is None or not inner.acquire(False):
        return inner is not None
    inner.release()
    return False


def _exit_now() -> None:
    """One line on stderr and exit 130, without unwinding (nothing may run in between)."""
    global _exiting
    with _exiting_guard:
        first = not _exiting
        _exiting = True
    if not first:  # the other thread is exiting already
        while True:
            time.sleep(1.0)
    try:
        os.write(2, _INTERRUPTED)
    finally:
        os._exit(130)


def _on_sigint(signum: int, frame: Any) -> None:
    lock = _compiler_lock()
    if lock is not None and (lock.is_locked() or _lock_held_by_any_thread()):
        _exit_now()
    raise KeyboardInterrupt


_exiting_guard = threading.Lock()
_exiting = False


class CompileInterrupts:
    """Context manager for a command: Ctrl-C during numba compilation exits 130 at once.

    Outside compilation Ctrl-C raises ``KeyboardInterrupt`` as usual. Does
    nothing off the main thread (handlers can only be set there).
    """

    def __init__(self) -> None:
        self._active = False

    def __enter__(self) -> CompileInterrupts:
        import socket

        if threading.current_thread() is not threading.main_thread():
            return self
        try:
            self._read, self._write = socket.socketpair()
            self._write.setblocking(False)
            self._old_handler = signal.signal(signal.SIGINT, _on_sigint)
            self._old_fd = signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        except (ValueError, OSError):  # no socket pair, or a handler we may not replace
            return self
        self._active = True
        self._thread = threading.Thread(target=self._watch, name="aces-fast-ctrl-c", daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while True:
            try:
                data = self._read.recv(64)
            except OSError:
                return
            if not data:
                return  # closed by __exit__
            if signal.SIGINT in data and _lock_held_by_any_thread():
                _exit_now()

    def __exit__(self, *exc: Any) -> None:
        if not self._active:
            return
        self._active = False
        signal.set_wakeup_fd(self._old_fd)
        signal.signal(signal.SIGINT, self._old_handler)
        self._write.close()
        self._thread.join(1.0)
        self._read.close()
