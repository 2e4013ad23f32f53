"""Backend registry and the selection rule of docs/contract.rst §4.

Each backend lives in the module (or package) of its name -- ``backends/cpp.py``,
``backends/numpy.py`` (the readable reference), ``backends/numba/``,
``backends/torch/`` -- exposing ``load() -> Backend``, which raises
:class:`BackendUnavailableError` (with the reason) when its dependency is
absent. Modules are imported lazily, on first use, so ``import aces_fast``
imports neither torch nor numba. A backend is the ``nx`` the method semantics
(:mod:`aces_fast._semantics`) run against: see :class:`.base.Backend`.

Selection: an explicit ``backend=`` argument, else the ``ACES_FAST_BACKEND``
environment variable, else ``"auto"``: torch when the input is a CUDA tensor,
otherwise the first available of cpp, numba, numpy. A call's ``auto``
ranks a small device tensor with cpp in host memory instead
(:func:`call_backend`, :mod:`.host_route`).
"""

from __future__ import annotations

import importlib
import os
import threading
from typing import Any, cast

from .. import _env
from .._validation import tensor_device
from . import host_route as _host_route
from .base import Backend, BackendUnavailableError

__all__ = [
    "BACKEND_NAMES",
    "ENV_VAR",
    "Backend",
    "BackendUnavailableError",
    "available_backends",
    "backend_status",
    "call_backend",
    "check_backend_choice",
    "get_backend",
    "resolve_backend",
]

ENV_VAR = _env.BACKEND

#: name -> module implementing it, in ``auto`` preference order for CPU input.
_MODULES: dict[str, str] = {
    name: f"{__name__}.{name}" for name in ("cpp", "numba", "torch", "numpy")
}
BACKEND_NAMES: tuple[str, ...] = tuple(_MODULES)
_AUTO_CPU_ORDER = ("cpp", "numba", "numpy")

_lock = threading.Lock()
_loaded: dict[str, Backend] = {}
_failed: dict[str, str] = {}


def _load(name: str) -> Backend:
    """Import and instantiate backend ``name`` once; remember why it failed."""
    backend = _loaded.get(name)
    if backend is not None:
        return backend
    with _lock:
        if name in _loaded:
            return _loaded[name]
        if name in _failed:
            raise BackendUnavailableError(name, _failed[name])
        try:
            module = importlib.import_module(_MODULES[name])
            backend = cast(Backend, module.load())
        except BackendUnavailableError as exc:
            _failed[name] = exc.reason
            raise
        except ImportError as exc:
            _failed[name] = f"import failed: {exc}"
            raise BackendUnavailableError(name, _failed[name]) from exc
        _loaded[name] = backend
        return backend


def get_backend(name: str) -> Backend:
    """Return the backend object called ``name``.

    Raises ``ValueError`` for an unknown name and :class:`BackendUnavailableError`
    (saying why) when it cannot be loaded here.
    """
    if not isinstance(name, str):
        raise TypeError(f"backend must be a string or None; got {type(name).__name__}")
    key = name.strip().lower()
    if key not in _MODULES:
        raise ValueError(
            f"unknown backend {name!r}; choose one of {', '.join(BACKEND_NAMES)} or 'auto'"
        )
    return _load(key)


def backend_status() -> dict[str, str | None]:
    """Map every known backend to ``None`` if usable here, else the reason it is not.

    Loading a backend may import its dependency (numba, torch); call this only
    when you want to know.

    Returns
    -------
    dict of str to str or None
        Every backend name (``"cpp"``, ``"numba"``, ``"torch"``, ``"numpy"``,
        in ``auto`` preference order) -> ``None`` or the reason, e.g. what to
        install.

    Examples
    --------
    >>> import aces_fast as af
    >>> status = af.backend_status()
    >>> list(status)
    ['cpp', 'numba', 'torch', 'numpy']
    >>> status["numpy"] is None  # the reference backend always works
    True
    """
    status: dict[str, str | None] = {}
    for name in BACKEND_NAMES:
        try:
            _load(name)
            status[name] = None
        except BackendUnavailableError as exc:
            status[name] = exc.reason
    return status


def available_backends() -> list[str]:
    """Names of the backends usable on this machine, in ``auto`` preference order.

    Returns
    -------
    list of str
        The names :func:`backend_status` maps to ``None``.

    Examples
    --------
    >>> import aces_fast as af
    >>> names = af.available_backends()
    >>> "numpy" in names, names == [n for n, why in af.backend_status().items() if why is None]
    (True, True)
    """
    return [name for name, reason in backend_status().items() if reason is None]


def call_backend(backend: str | None, data: Any) -> tuple[Backend, bool]:
    """The backend of one method or kernel call, and whether it takes :mod:`.host_route`.

    :func:`resolve_backend`'s choice, except that ``auto`` on a small tensor on
    a device (:func:`.host_route.applies`) gives ``cpp`` and ``True`` when cpp
    is available here: the caller copies the input to the host and the results
    back (docs/contract.rst §4).
    """
    be = resolve_backend(backend, data)
    if not _host_route.applies(data):
        return be, False
    choice = backend if backend is not None else _env_choice() or "auto"
    if not (isinstance(choice, str) and choice.strip().lower() == "auto"):
        return be, False
    try:
        return _load("cpp"), True
    except BackendUnavailableError:
        return be, False


def check_backend_choice(backend: str | None) -> str:
    """For functions computed in NumPy whatever the backend (metrics, MBR-exec,
    combine): validate an explicit ``backend`` choice so a typo or an unavailable
    backend is reported, and return ``"numpy"``, the code that actually runs."""
    if backend is not None:
        resolve_backend(backend)
    return "numpy"


try:  # os.environ's own key for ENV_VAR (bytes on POSIX, upper case on Windows)
    _ENV_KEY: Any = os.environ.encodekey(ENV_VAR)
except AttributeError:  # pragma: no cover - not CPython's os._Environ
    _ENV_KEY = None


def _env_choice() -> str | None:
    """``ACES_FAST_BACKEND``, read on every call (users and tests change it).

    Through ``os.environ``'s own mapping, which ``os.environ[...] = ...`` and
    ``del`` keep in step with the process environment: a tenth of
    ``os.environ.get``'s cost, which matters for microsecond-scale calls.
    """
    data = getattr(os.environ, "_data", None)
    if data is None or _ENV_KEY is None:
        return os.environ.get(ENV_VAR)
    raw = data.get(_ENV_KEY)
    return None if raw is None else os.environ.decodevalue(raw)


def resolve_backend(backend: str | None, data: Any = None) -> Backend:
    """Apply the selection rule to an explicit choice and an input array.

    Parameters
    ----------
    backend : str or None
        Explicit backend name, ``"auto"`` or ``None`` (then ``ACES_FAST_BACKEND``,
        then ``"auto"``).
    data : array-like, optional
        The input; a CUDA tensor makes ``auto`` choose torch.
    """
    choice = backend if backend is not None else _env_choice() or "auto"
    # the exact name of a loaded backend: nothing to normalize
    loaded = _loaded.get(choice) if type(choice) is str else None
    if loaded is not None:
        return loaded
    if choice != "auto":  # the common spelling skips the normalization
        if not isinstance(choice, str):
            raise TypeError(f"backend must be a string or None; got {type(choice).__name__}")
        if choice.strip().lower() != "auto":
            return get_backend(choice)
    device = tensor_device(data)
    if device is not None and device != "cpu":
        return get_backend("torch")
    reasons = []
    for name in _AUTO_CPU_ORDER:
        try:
            chosen = _load(name)
        except BackendUnavailableError as exc:
            reasons.append(f"{name}: {exc.reason}")
            continue
        if reasons:  # the compiled backend is missing: say so once, not silently run slower
            from .._compiled import warn_fallback

            warn_fallback(name, _failed.get("cpp"))
        return chosen
    raise BackendUnavailableError("auto", "; ".join(reasons))  # pragma: no cover
