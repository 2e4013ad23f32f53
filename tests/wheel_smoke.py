"""Smoke check of an installed aces_fast (a wheel): run as ``python tests/wheel_smoke.py``.

Imports the package and its compiled extension (not a source checkout's),
checks the extension's version and OpenMP against the platform's wheel build
(pyproject.toml [tool.cibuildwheel]: OpenMP on Linux and Windows, none on
macOS), and ranks real problems with the compiled backend, one by one and as a
batch, against the pure-NumPy reference. Exits non-zero on any mismatch.
Used by the wheel builds' test command and tools/build_wheel.sh.
"""

from __future__ import annotations

import os
import sys

import numpy as np


def main() -> int:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    import aces_fast as af
    from aces_fast import _core
    from aces_fast.datasets import load_dataset

    src = os.path.join(os.path.dirname(here), "src")
    assert not os.path.abspath(af.__file__).startswith(src), f"imported the checkout: {af.__file__}"
    assert _core.__version__ == af.__version__, (_core.__version__, af.__version__)
    assert "cpp" in af.available_backends(), af.backend_status()
    want_openmp = not sys.platform.startswith("darwin")
    assert _core.has_openmp() is want_openmp, f"OpenMP in this wheel: {_core.has_openmp()}"

    problems = [p.B for p in load_dataset("humaneval-gpt35")][:40]
    for method in ("majority", "aces-c", "aces-o"):
        one = [af.rerank(B, method, backend="cpp") for B in problems]
        batch = af.rerank_batch(problems, method, backend="cpp", n_threads=2)
        for B, a, b in zip(problems, one, batch):
            np.testing.assert_array_equal(a.scores, b.scores)
            ref = af.rerank(B, method, backend="numpy")
            np.testing.assert_array_equal(a.order, ref.order)
            np.testing.assert_allclose(a.scores, ref.scores, rtol=1e-9, atol=1e-12)
    cfg = af.config()["backends"]["cpp"]
    print(
        f"aces_fast {af.__version__} from {os.path.dirname(af.__file__)}: "
        f"simd={cfg['simd']} openmp={cfg['openmp']} threads={cfg['max_threads']}; "
        f"{len(problems)} problems ranked, cpp == numpy reference"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
