"""Shared small types."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Union

import numpy as np

#: An array as returned to the user: a NumPy array, or a ``torch.Tensor`` when
#: the torch backend ran (on the input's device).
Array = Any
ArrayLike = Union[np.ndarray, "list[Any]", Any]
#: A file or directory path as the API takes it.
PathLike = str | Path
