"""LOO-AUC with float weights: backends vs baseline (a), vectorized NumPy rankdata."""

OPS = ("loo-auc-weighted",)


def test_loo_auc_weighted(case, run_case):
    run_case(case)
