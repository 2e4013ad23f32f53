"""aces_fast's benchmark suite and harness (not part of the installed package).

A package so its conftest does not shadow tests/conftest.py when both
directories are collected, and so ``harness`` is importable from a checkout:
``python -m benchmarks`` is ``aces-fast bench``.
"""
