"""Stopping long numba work between bounded kernel calls.

Jitted code never sees Python's signals: a kernel that runs for minutes runs to
its end. Long work is therefore cut into kernel calls of bounded cost (ACES-O's
Adam steps, a batch's tasks) and control returns to Python between them. On the
main thread that is enough for Ctrl-C: the interpreter runs the SIGINT handler
(``KeyboardInterrupt``) at the next bytecode. Helper threads of a batch cannot
receive signals; they stop at their next boundary once the batch's stop event is
set (:func:`stop_on`), which the batch does as soon as any task fails or is
interrupted.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

_local = threading.local()


class Stopped(Exception):
    """Raised in a helper thread whose batch was stopped (never reaches the caller:
    the batch re-raises the error that stopped it)."""


@contextmanager
def stop_on(event: threading.Event) -> Iterator[None]:
    """While active, :func:`check` in this thread raises :class:`Stopped` once
    ``event`` is set."""
    previous = getattr(_local, "event", None)
    _local.event = event
    try:
        yield
    finally:
        _local.event = previous


def check() -> None:
    """Raise :class:`Stopped` if this thread's batch was stopped. O(1)."""
    event = getattr(_local, "event", None)
    if event is not None and event.is_set():
        raise Stopped("stopped: another task of the batch failed or was interrupted")


def _interrupt_in(exc: BaseException) -> KeyboardInterrupt | None:
    """The ``KeyboardInterrupt`` in ``exc``'s chain of causes, if any."""
    seen = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def reraise(exc: SystemError) -> NoReturn:
    """Raise ``exc`` again -- or, when a ``KeyboardInterrupt`` caused it, that
    interrupt (see :func:`ctrl_c_stays_keyboard_interrupt`)."""
    interrupt = _interrupt_in(exc)
    if interrupt is None:
        raise exc
    raise KeyboardInterrupt(*interrupt.args) from exc


F = TypeVar("F", bound=Callable[..., Any])


def ctrl_c_stays_keyboard_interrupt(fn: F) -> F:
    """Decorate a backend entry point so that Ctrl-C always raises ``KeyboardInterrupt``.

    Compiled code returning an array to Python calls back into Python while it
    boxes it (numba's ``_numba_unpickle``). A SIGINT landing in that call raises
    ``KeyboardInterrupt`` there, which numba's boxing reports as a ``SystemError``
    caused by it; the caller asked to stop, so the interrupt is raised again as
    such (the ``SystemError`` attached as its cause).
    """

    @functools.wraps(fn)
    def entry(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SystemError as exc:
            reraise(exc)

    return entry  # type: ignore[return-value]
