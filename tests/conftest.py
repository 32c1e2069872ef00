"""Shared pytest configuration.

Marker ``slow``: tests that take minutes (the 30-epoch CNN accuracy target). They run by default
(scripts/test.sh and CI run everything); deselect them while developing with ``pytest -m "not slow"``.
"""


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes minutes; runs by default, deselect with -m 'not slow'")
