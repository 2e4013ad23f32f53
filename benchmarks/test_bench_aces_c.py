"""ACES-C: backends vs baseline (a), rankdata LOO-AUC plus the weight formula."""

OP = "aces-c"


def test_aces_c(case, run_case):
    run_case(case)
