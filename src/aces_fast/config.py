"""What is installed and how it is configured: :func:`show_config`."""

from __future__ import annotations

import os
import platform
import sys
from typing import Any, Dict

import numpy as np

from .backends import BACKEND_NAMES, ENV_VAR, backend_status, get_backend


def config() -> Dict[str, Any]:
    """A dict describing the installation: versions, backends and why any is absent.

    Loads every backend (importing numba/torch if installed) to find out.
    """
    status = backend_status()
    backends: Dict[str, Any] = {}
    for name in BACKEND_NAMES:
        reason = status[name]
        entry: Dict[str, Any] = {"available": reason is None}
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
        "env": {ENV_VAR: os.environ.get(ENV_VAR), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS")},
        "backends": backends,
    }


def show_config(file: Any = None) -> None:
    """Print :func:`config` in a readable form (to ``file``, default stdout)."""
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
