"""ACES-O with the paper's defaults (top_k=24, 90 Adam steps): backends vs
baseline (b), PyTorch autograd on the dense pair tensor."""

OPS = ("aces-o",)


def test_aces_o(case, run_case):
    run_case(case)
