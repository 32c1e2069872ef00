"""Shared pytest configuration and fixtures (``data``, ``trained``, ``sched``; plain helpers are in support/).

The tests live in folders by level: kernels/ (ops, kernels and layers against float64 numpy and finite
differences), ggml/ (the raw binding, ports of ggml's own tests, the C-level tests of ggml/c/),
api/ (the public API's behaviour) and integration/ (real data sets, examples, documentation, llama.cpp,
fuzzing, fault injection, files of earlier versions). Each imports ``support`` from tests/, which this
file puts on ``sys.path``.

Marker ``slow``: tests that take minutes (the 30-epoch CNN accuracy target). They run by default
(scripts/test.sh and CI run everything); deselect them while developing with ``pytest -m "not slow"``.
"""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `import support` from every folder, any import mode

import pyggml_opt as pgo  # noqa: E402
from pyggml_opt.core import Scheduler  # noqa: E402
from support import FAST, blobs, mlp  # noqa: E402


# scikit-learn's estimator checks test numpy through the array API only when this is set before scipy
# is imported (tests/api/test_sklearn.py); without it those checks are skipped
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


@pytest.fixture(scope="module")
def sched():
    """A CPU scheduler of one thread, for graphs built by the op and kernel tests."""
    s = Scheduler.for_device("cpu", n_threads=1)
    yield s
    s.close()
