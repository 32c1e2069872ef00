"""Shared pytest configuration and fixtures (``data``, ``trained``; plain helpers are in support.py).

Marker ``slow``: tests that take minutes (the 30-epoch CNN accuracy target). They run by default
(scripts/test.sh and CI run everything); deselect them while developing with ``pytest -m "not slow"``.
"""
import os

import pytest

import pyggml_opt as pgo
from support import FAST, blobs, mlp


# scikit-learn's estimator checks test numpy through the array API only when this is set before scipy
# is imported (tests/test_sklearn.py); without it those checks are skipped
os.environ.setdefault("SCIPY_ARRAY_API", "1")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes minutes; runs by default, deselect with -m 'not slow'")


@pytest.fixture(scope="module")
def data():
    """240 samples of 6 features in 3 well-separated classes."""
    return blobs()


@pytest.fixture(scope="module")
def trained(data):
    """A small MLP trained on ``data`` for 5 epochs."""
    x, y = data
    m = mlp()
    m.fit(x, y, epochs=5, batch_size=16, optimizer=pgo.AdamW(lr=1e-2), **FAST)
    return m
