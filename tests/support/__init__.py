"""What the tests of every folder share (``from support import ...``; pytest fixtures live in
conftest.py, which puts tests/ on ``sys.path``): small generated data and models, the finite-difference
checker and the one-op graph runner (support/numerics.py), skips for optional packages and data, and the
environment of child processes. support/llama_numpy.py is the float64 numpy reference of the language
models' files."""
from __future__ import annotations

import importlib
import os
from pathlib import Path

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L

from .numerics import (OpGraph, check_gradients, check_op_gradients, finite_differences,  # noqa: F401
                       run_graph)

TESTS = Path(__file__).resolve().parents[1]   # tests/, where ``import support`` finds this package
FAST = dict(verbose=0, n_threads=1)  # one thread: the test machine's two cores are shared


def blobs(n=240, n_features=6, n_classes=3, seed=0, spread=0.6):
    """Gaussian blobs around well-separated centres: learnable to ~100 % by a small MLP."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(n_classes, n_features)) * 2.0
    y = rng.integers(0, n_classes, n)
    x = centres[y] + spread * rng.normal(size=(n, n_features))
    return x.astype(np.float32), y


def mlp(n_in=6, n_hidden=16, n_out=3, seed=1, build=True):
    m = pgo.Sequential([L.Linear(n_in, n_hidden), L.ReLU(), L.Linear(n_hidden, n_out)])
    if build:
        m.build((n_in,), seed=seed)
    return m


def same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float(np.abs(a[k] - b[k]).max()) for k in a)


X, Y = blobs(n=32)


def import_or_skip(name: str, why: str):
    """The module ``name`` (from the test extra), or a skip where it is not installed; with
    PYGGML_OPT_REQUIRE_C_TESTS=1 (CI, which installs the test extra) its absence fails instead."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        msg = f"{name} is not installed ({why}; pip install '.[test]'): {exc}"
        if os.environ.get("PYGGML_OPT_REQUIRE_C_TESTS") == "1":
            pytest.fail(msg + " (PYGGML_OPT_REQUIRE_C_TESTS=1)")
        pytest.skip(msg, allow_module_level=True)  # also from a module's top level


def fortunes_or_skip() -> list[str]:
    """Every fortune of Debian's fortunes package, or a skip where it is not installed (a failure with
    PYGGML_OPT_REQUIRE_C_TESTS=1, as in CI)."""
    try:
        texts, _, _ = pgo.data.load_fortunes()
    except FileNotFoundError as exc:
        if os.environ.get("PYGGML_OPT_REQUIRE_C_TESTS") == "1":
            pytest.fail(f"{exc} (PYGGML_OPT_REQUIRE_C_TESTS=1)")
        pytest.skip(str(exc))
    return texts


def child_env() -> dict[str, str]:
    """``os.environ`` for a child Python process that imports the pyggml_opt these tests import (an
    install, or a source tree on a relative PYTHONPATH: the child may run in another folder) and
    ``support``."""
    package = str(Path(pgo.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package, str(TESTS),
                                                                      os.environ.get("PYTHONPATH")]))}


def greedy_by_predict(m, prompt, n_new):
    """Greedy decoding of language model ``m`` with one predict call per token on the left-aligned,
    zero-padded window of the last ``context`` ids (what generate computes without a cache)."""
    context = m.input_shape[0]
    seq = list(prompt)
    for _ in range(n_new):
        ctx = seq[-context:]
        window = np.zeros((1, context), np.int32)
        window[0, :len(ctx)] = ctx
        seq.append(int(np.argmax(m.predict(window, logits=True)[0, len(ctx) - 1])))
    return np.array(seq)
