"""The benchmark harness: cells, workloads, baselines, memory, runtime pinning,
the pytest-benchmark glue (``suite``), reports, speed goals and the
``aces-fast bench`` command. Lives in the checkout only; the package ships none
of it.
"""
