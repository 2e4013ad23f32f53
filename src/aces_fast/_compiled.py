"""The one place that imports the compiled extension :mod:`aces_fast._core`.

Everything else does ``from ._compiled import core`` so that a broken or missing
build produces one helpful message instead of an ``ImportError`` deep inside a
backend. ``core`` is ``None`` when the extension cannot be imported; the ``cpp``
backend then reports :data:`import_error` as the reason it is unavailable, and
:func:`warn_fallback` tells the user once when ``auto`` runs something slower
instead.
"""

from __future__ import annotations

import importlib
import os
import threading
import warnings
from types import ModuleType

core: ModuleType | None
#: Why ``core`` is ``None`` and what to do about it (``None`` when it imported).
import_error: str | None
_remedy = ""  # import_error without the alternatives, for the fallback warning

# The build needs what the README lists; said in every piece of advice because the
# usual reader has just run a `pip install .` that did not build it.
_BUILD = (
    "`pip install .` from a checkout of the repository (needs a C++17 compiler; "
    "pip fetches CMake >= 3.15 if it is missing)"
)


def _source_checkout(package_dir: str) -> str | None:
    """The checkout root when this package is the ``src/aces_fast`` folder of a
    source checkout (it has a ``pyproject.toml`` two levels up), else ``None``."""
    parent = os.path.dirname(package_dir)
    root = os.path.dirname(parent)
    if os.path.basename(parent) == "src" and os.path.isfile(os.path.join(root, "pyproject.toml")):
        return root
    return None


def _advice(exc: ImportError) -> str:
    """The reason ``_core`` did not import, with the remedy for that situation."""
    package_dir = os.path.dirname(os.path.abspath(__file__))
    missing = isinstance(exc, ModuleNotFoundError) and exc.name == f"{__package__}._core"
    if not missing:
        # present but unloadable (built for another Python or CPU, a missing shared
        # library, ...): the error itself is the useful part
        return (
            f"the compiled extension aces_fast._core in {package_dir} failed to import: "
            f"{type(exc).__name__}: {exc}. Rebuild it for this Python with {_BUILD}."
        )
    root = _source_checkout(package_dir)
    if root is not None:
        return (
            f"aces_fast was imported from the source folder {package_dir}, which holds no "
            f"compiled extension aces_fast._core. Run `pip install .` in {root} (needs a "
            "C++17 compiler; pip fetches CMake >= 3.15 if it is missing) and take src/ "
            "off PYTHONPATH so the installed package is imported, or build the extension "
            "into the source folder with tools/dev_build.sh."
        )
    return (
        f"the compiled extension aces_fast._core is missing from {package_dir}. "
        f"Install the package with {_BUILD}."
    )


try:
    # import_module, not `from . import _core`: only it raises ModuleNotFoundError
    # naming aces_fast._core when the file is absent, which _advice tells apart
    core = importlib.import_module(f"{__package__}._core")

    import_error = None
except ImportError as exc:
    core = None
    _remedy = _advice(exc)
    import_error = f"{_remedy} Meanwhile backend='numpy' (or 'numba', 'torch') works without it."

_warned = False
_warn_lock = threading.Lock()


def warn_fallback(chosen: str, reason: str | None = None) -> None:
    """Warn, once per process, that ``auto`` skipped the compiled backend.

    Parameters
    ----------
    chosen : str
        The backend ``auto`` picked instead (``"numba"`` or ``"numpy"``).
    reason : str, optional
        Why ``cpp`` is unavailable; default :data:`import_error`.

    Passing ``backend=`` or setting ``ACES_FAST_BACKEND`` chooses explicitly and
    never warns. O(1) after the first call.
    """
    global _warned
    if _warned:
        return
    with _warn_lock:
        if _warned:
            return
        _warned = True
    if reason is None or reason == import_error:
        reason = _remedy if core is None else "aces_fast._core is missing"
    slower = "up to 1000x slower" if chosen == "numpy" else "slower"
    warnings.warn(
        f"aces_fast runs on the {chosen} backend ({slower} than the compiled cpp backend), "
        f"because cpp is unavailable: {reason} To choose {chosen} knowingly and silence "
        f"this warning, pass backend={chosen!r} or set ACES_FAST_BACKEND={chosen}.",
        RuntimeWarning,
        stacklevel=2,
    )
