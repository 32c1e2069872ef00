"""Backends by the names people use, and models that remember theirs."""
from __future__ import annotations

import copy

import numpy as np
import pytest
from support import FAST, X, Y, mlp

import pyggml_opt as pgo
from pyggml_opt._lib import c_str, lib
from pyggml_opt.core import Backend, find_device


def _name(dev) -> str:
    return c_str(lib.ggml_backend_dev_name(dev))


@pytest.mark.parametrize("name", ["cpu", "CPU", " Cpu ", "cpu:0"])
def test_cpu_by_any_spelling(name):
    assert _name(find_device(name)) == "CPU"
    with Backend(name, 1) as b:
        assert b.is_cpu and b.device_name == "CPU"


@pytest.mark.parametrize("name,hint", [
    ("cuda", "cmake.define.GGML_CUDA=ON"), ("CUDA:1", "cmake.define.GGML_CUDA=ON"),
    ("metal", "cmake.define.GGML_METAL=ON"), ("Metal:0", "cmake.define.GGML_METAL=ON"),
    ("gpu", "cmake.define.GGML_CUDA=ON` (NVIDIA) or `pip install . -C cmake.define.GGML_METAL=ON` (macOS)"),
    ("rpc", "cmake.define.GGML_RPC=ON"),
    ("vulkan", None),  # not vendored: no build option could add it
    ("cpu:1", None), ("tpu", None),
])
def test_unavailable_backend_lists_this_build_and_how_to_add_it(name, hint):
    if any(d.type != "cpu" for d in pgo.devices()):
        pytest.skip("this build has a GPU backend; the message below is for CPU-only builds")
    with pytest.raises(ValueError) as err:
        find_device(name)
    msg = str(err.value)
    assert f"backend {name!r} is not available in this build, which has: CPU (cpu)" in msg
    if hint:
        assert hint in msg
    else:
        assert "cmake.define" not in msg


def test_backend_name_errors():
    with pytest.raises(TypeError, match="backend must be a str"):
        find_device(3)
    with pytest.raises(ValueError, match="index after ':' must be a non-negative int"):
        find_device("cuda:x")


def test_predict_and_evaluate_default_to_the_models_backend():
    m = mlp()
    m.fit(X, Y, epochs=1, batch_size=8, backend="CPU", **FAST)
    assert m.attachment("session").device == "CPU"
    p = m.predict(X)  # no backend given: the model's, not a new session
    session = m.attachment("session")
    m.evaluate(X, Y)
    assert m.attachment("session") is session
    np.testing.assert_array_equal(m.predict(X, backend="cpu"), p)
    assert m.attachment("session") is session  # the same device in another spelling keeps the session


def test_the_backend_is_remembered_across_close_and_copies():
    m = mlp()
    assert m.backend is None  # never run: predict would use the CPU
    m.fit(X, Y, epochs=1, batch_size=8, backend="cpu", **FAST)
    assert m.backend == "CPU"
    m.close()
    assert m.backend == "CPU" and m.attachment("session") is None
    assert copy.deepcopy(m).backend == "CPU"
    m.predict(X)
    assert m.attachment("session").device == "CPU"
