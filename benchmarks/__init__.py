"""pytest-benchmark suite of aces_fast (see conftest.py); a package so its
conftest does not shadow tests/conftest.py when both directories are collected."""
