"""Saving and loading models as GGUF files.

A file holds:
  - ``general.architecture``: "mnist-fc" / "mnist-cnn" for ggml's example models (``pyggml_opt.models``),
    else "pyggml_opt";
  - ``pyggml_opt.config``: the architecture as JSON (layers and their arguments), ``pyggml_opt.input_shape``
    and ``pyggml_opt.loss``;
  - one float32 tensor per parameter, named as the model names it.
For "mnist-cnn" the dense weight is stored in ggml's flattening order (height, width, channel), the
C++ example's; pyggml_opt's Flatten uses (channel, height, width), so it is permuted on the way.
Loading validates every tensor's presence, type and shape before a model is built.
"""
from __future__ import annotations

import json
import os

import numpy as np

from .core.gguf import GGUFFile
from .models import ARCHITECTURES, MNIST_CNN_NCB, MNIST_HW
from .nn.model import FunctionModel, Model, Sequential

GENERIC_ARCH = "pyggml_opt"


def _mnist_arch(model: Model) -> str | None:
    if not isinstance(model, Sequential):
        return None
    for arch, factory in ARCHITECTURES.items():
        if model.config() == factory().config():
            return arch
    return None


def _dense_to_ggml(w: np.ndarray) -> np.ndarray:
    c, hw = 2 * MNIST_CNN_NCB, MNIST_HW // 4
    return w.reshape(-1, c, hw, hw).transpose(0, 2, 3, 1).reshape(w.shape[0], -1)


def _dense_from_ggml(w: np.ndarray) -> np.ndarray:
    c, hw = 2 * MNIST_CNN_NCB, MNIST_HW // 4
    return w.reshape(-1, hw, hw, c).transpose(0, 3, 1, 2).reshape(w.shape[0], -1)


def save(model: Model, path, extra: dict | None = None, extra_tensors: dict | None = None) -> None:
    """Write ``model`` to ``path`` (GGUF). The file is replaced atomically.

    ``extra`` (key -> str/int/float/bool) and ``extra_tensors`` (name -> array) are added as they are;
    ``pyggml_opt.checkpoint`` stores the optimizer state this way.
    """
    if not isinstance(model, Model):
        raise TypeError(f"model must be a pyggml_opt model, got {type(model).__name__}")
    model._require_built()
    weights = model.get_weights()
    arch = _mnist_arch(model)
    with GGUFFile() as f:
        f.set("general.architecture", arch or GENERIC_ARCH)
        f.set("pyggml_opt.config", json.dumps(model.config()))
        f.set("pyggml_opt.input_shape", json.dumps(list(model.input_shape)))
        f.set("pyggml_opt.loss", model.loss or "")
        for key, value in (extra or {}).items():
            f.set(key, value)
        for name, value in weights.items():
            if arch == "mnist-cnn" and name == "dense.weight":
                value = _dense_to_ggml(value)
            f.add_tensor(name, value)
        for name, value in (extra_tensors or {}).items():
            f.add_tensor(name, value)
        f.write(path)


def load_weights(path, model: Model | None = None) -> dict[str, np.ndarray]:
    """The tensors of a GGUF file as numpy arrays (shapes as ``model`` expects them, if given)."""
    with GGUFFile.read(path) as f:
        return _read_weights(f, model, f.get("general.architecture", ""))


def _read_weights(f: GGUFFile, model: Model | None, arch: str) -> dict[str, np.ndarray]:
    names = f.tensor_names()
    if model is None:
        return {n: f.tensor(n) for n in names}
    out = {}
    for name, shape in model.param_shapes.items():
        if name not in names:
            raise ValueError(f"the file has no tensor {name!r} (it has {names})")
        file_shape = f.tensor_shape(name, len(shape))
        value = f.tensor(name, len(shape))
        if arch == "mnist-cnn" and name == "dense.weight" and file_shape == shape:
            value = _dense_from_ggml(value)
        if value.shape != shape:
            raise ValueError(f"tensor {name!r} has shape {value.shape} in the file, the model needs {shape}")
        if value.dtype != np.float32:
            raise ValueError(f"tensor {name!r} has dtype {value.dtype}; float32 expected")
        if not np.isfinite(value).all():
            raise ValueError(f"tensor {name!r} contains NaN or inf")
        out[name] = value
    return out


def load(path) -> Model:
    """Rebuild a model saved by ``save``, or by ggml's C++ mnist-train ("mnist-fc" / "mnist-cnn")."""
    path = os.fspath(path)
    with GGUFFile.read(path) as f:
        arch = f.get("general.architecture")
        if not isinstance(arch, str):
            raise ValueError(f"{path!r} has no string 'general.architecture'; not a model file")
        config_json = f.get("pyggml_opt.config")
        if arch in ARCHITECTURES:
            model = ARCHITECTURES[arch]()
            loss = f.get("pyggml_opt.loss") or "cross_entropy"
        elif arch == GENERIC_ARCH and isinstance(config_json, str):
            try:
                config = json.loads(config_json)
                input_shape = tuple(json.loads(f.get("pyggml_opt.input_shape")))
            except (TypeError, ValueError) as exc:
                raise ValueError(f"{path!r}: corrupt pyggml_opt metadata ({exc})") from None
            if config.get("type") == "FunctionModel":
                raise ValueError(f"{path!r} holds the weights of a FunctionModel: rebuild the model in "
                                 "Python and call model.set_weights(pyggml_opt.io.load_weights(path, model))")
            if config.get("type") != "Sequential":
                raise ValueError(f"{path!r}: unknown model type {config.get('type')!r}")
            try:
                model = Sequential.from_config(config)
                model.build(input_shape)
            except (TypeError, KeyError) as exc:
                raise ValueError(f"{path!r}: corrupt model configuration ({exc!r})") from None
            loss = f.get("pyggml_opt.loss") or None
        else:
            raise ValueError(f"{path!r}: unknown architecture {arch!r} (known: {sorted(ARCHITECTURES)}, "
                             f"{GENERIC_ARCH!r})")
        model.set_weights(_read_weights(f, model, arch))
        model.loss = loss
        return model


__all__ = ["FunctionModel", "load", "load_weights", "save"]
