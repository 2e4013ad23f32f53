"""Throughput: one ``aces_fast.rerank_batch`` call on 200 different 200x500
tasks (ACES-C and ACES-O, distinct and dup-heavy), 1 and 2 threads, for every
backend with a batch path; the report shows tasks per second."""

OPS = ("batch-aces-c", "batch-aces-o")


def test_batch(case, run_case):
    run_case(case)
