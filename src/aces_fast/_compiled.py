"""The one place that imports the compiled extension :mod:`aces_fast._core`.

Everything else does ``from ._compiled import core`` so that a broken or missing
build produces one helpful message instead of an ``ImportError`` deep inside a
backend. ``core`` is ``None`` when the extension cannot be imported; the ``cpp``
backend then reports :data:`import_error` as the reason it is unavailable.
"""

from __future__ import annotations

from types import ModuleType
from typing import Optional

core: Optional[ModuleType]
import_error: Optional[str]

try:
    from . import _core as core  # type: ignore[attr-defined]

    import_error = None
except ImportError as exc:  # pragma: no cover - exercised only on broken installs
    core = None
    import_error = (
        f"the compiled extension aces_fast._core could not be imported ({exc}). "
        "Reinstall with `pip install .` from a source checkout (needs a C++17 "
        "compiler and CMake), or use backend='numpy'."
    )
