"""ACES-C: backends vs baseline (a), rankdata LOO-AUC plus the weight formula.

The ``distinct 24x100`` one-thread cell is the end-to-end latency of a small call.
"""

OPS = ("aces-c",)


def test_aces_c(case, run_case):
    run_case(case)
