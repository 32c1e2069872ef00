"""Shared pytest configuration.

Marker ``slow``: tests that take minutes (30-epoch CNN training, CNN cross-evaluation with ggml's C++
tools). They run by default (CI runs everything); deselect them while developing with
``pytest -m "not slow"``.
"""


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes minutes; runs by default, deselect with -m 'not slow'")
