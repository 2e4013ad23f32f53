"""LOO-AUC with uniform weights: backends vs baseline (a), vectorized NumPy rankdata."""

OPS = ("loo-auc",)


def test_loo_auc(case, run_case):
    run_case(case)
