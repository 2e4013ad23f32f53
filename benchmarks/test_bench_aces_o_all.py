"""ACES-O on every candidate (top_k=None, 90 steps): backends vs baseline (b).

O(n^2 m) per step: the large sizes are skipped as infeasible, with the estimate.
"""

OPS = ("aces-o-all",)


def test_aces_o_all(case, run_case):
    run_case(case)
