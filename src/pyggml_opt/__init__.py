"""pyggml_opt: train small neural networks from Python with ggml's training API (ggml-opt).

    import pyggml_opt as pgo
    model = pgo.Sequential([pgo.layers.Linear(784, 500), pgo.layers.ReLU(), pgo.layers.Linear(500, 10)])
    history = model.fit(x_train, y_train, epochs=30, batch_size=1000, physical_batch_size=500,
                        validation_split=0.05, optimizer=pgo.AdamW(lr=1e-3), seed=0)
    loss, accuracy = model.evaluate(x_test, y_test)
    model.save("fc.gguf"); same = pgo.load("fc.gguf")

Layers, outside in: this module (high level) -> ``train`` (fit / evaluate / predict) and ``io``
(GGUF) -> ``nn`` (ops, layers, models) -> ``core`` (one owning object per C handle) -> ``_lib``
(the raw cffi binding, 1:1 with ggml's headers: ``pyggml_opt.ffi``, ``pyggml_opt.lib``).
"""
from ._lib import ffi, lib  # noqa: F401
from .core import devices
from . import models
from .nn import FunctionModel, Model, Sequential, Tensor, layers, ops
from .optim import SGD, AdamW, Optimizer
from .train import (Callback, EarlyStopping, History, LambdaCallback, ModelCheckpoint, evaluate, fit,
                    predict)

__version__ = "0.1.0"


def load(path) -> Model:
    """Load a model saved with ``Model.save`` (or by ggml's mnist-train): see ``pyggml_opt.io``."""
    from .io import load as _load
    return _load(path)


__all__ = ["AdamW", "Callback", "EarlyStopping", "FunctionModel", "History", "LambdaCallback", "Model",
           "ModelCheckpoint", "Optimizer", "SGD", "Sequential", "Tensor", "devices", "evaluate", "fit",
           "layers", "load", "models", "ops", "predict"]
