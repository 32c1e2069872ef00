"""Backends by the names people use, and models that remember theirs."""
from __future__ import annotations

import copy

import numpy as np
import pytest
from support import FAST, X, Y, mlp

import pyggml_opt as pgo
from pyggml_opt._lib import c_str, ffi, lib
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
    assert m.session.device == "CPU"
    p = m.predict(X)  # no backend given: the model's, not a new session
    session = m.session
    m.evaluate(X, Y)
    assert m.session is session
    np.testing.assert_array_equal(m.predict(X, backend="cpu"), p)
    assert m.session is session  # the same device in another spelling keeps the session


def test_the_backend_is_remembered_across_close_and_copies():
    m = mlp()
    assert m.backend is None  # never run: predict would use the CPU
    m.fit(X, Y, epochs=1, batch_size=8, backend="cpu", **FAST)
    assert m.backend == "CPU"
    m.close()
    assert m.backend == "CPU" and m.session is None
    assert copy.deepcopy(m).backend == "CPU"
    m.predict(X)
    assert m.session.device == "CPU"


def _registries() -> dict[str, list[str]]:
    """ggml registry name ("CPU", "CUDA", "MTL", ...) -> the names of its devices, in order."""
    regs: dict[str, list[str]] = {}
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        regs.setdefault(c_str(lib.ggml_backend_reg_name(lib.ggml_backend_dev_backend_reg(dev))), []).append(_name(dev))
    return regs


@pytest.mark.parametrize("name,reg,option", [("metal", "MTL", "GGML_METAL=ON"), ("cuda", "CUDA", "GGML_CUDA=ON")])
def test_gpu_backend_name_resolves_when_the_build_has_it(name, reg, option):
    regs = _registries()
    if reg not in regs:
        # not built: a ValueError listing every device of this build and the option that adds it
        with pytest.raises(ValueError) as err:
            find_device(name)
        msg = str(err.value)
        assert f"backend {name!r} is not available in this build, which has: " in msg
        for d in pgo.devices():
            assert f"{d.name} ({d.type})" in msg
        assert f"cmake.define.{option}" in msg
        return
    first = regs[reg][0]  # "MTL0", "CUDA0"
    for spelling in (name, name.upper(), f" {name.capitalize()} ", f"{name}:0", first, first.lower()):
        assert _name(find_device(spelling)) == first, spelling
    for i, dev_name in enumerate(regs[reg]):
        assert _name(find_device(f"{name}:{i}")) == dev_name
    with pytest.raises(ValueError, match=f"which has: .*{first}"):
        find_device(f"{name}:{len(regs[reg])}")
    with Backend(name) as b:
        assert b.device_name == first and not b.is_cpu
    m = mlp()
    m.fit(X, Y, epochs=1, batch_size=8, backend=name, **FAST)
    assert m.backend == first
    assert np.isfinite(m.predict(X)).all()


def test_the_rpc_backend_is_built_and_registered():
    """ggml-rpc is built (GGML_RPC=ON) and loaded beside the CPU backend, not yet exposed: no devices
    until a server is added, its client and server entry points reachable through the registry."""
    reg = lib.ggml_backend_reg_by_name(b"RPC")
    assert reg != ffi.NULL
    assert lib.ggml_backend_reg_dev_count(reg) == 0
    for entry in (b"ggml_backend_rpc_add_server", b"ggml_backend_rpc_start_server"):
        assert lib.ggml_backend_reg_get_proc_address(reg, entry) != ffi.NULL, entry
