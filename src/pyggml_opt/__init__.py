"""pyggml_opt: train small neural networks from Python with ggml's training API (ggml-opt).

    import pyggml_opt as pgo
    model = pgo.Sequential([pgo.layers.Linear(784, 500), pgo.layers.ReLU(), pgo.layers.Linear(500, 10)])
    history = model.fit(x_train, y_train, epochs=30, batch_size=1000, physical_batch_size=500,
                        validation_split=0.05, optimizer=pgo.AdamW(lr=1e-3), seed=0)
    loss, accuracy = model.evaluate(x_test, y_test)
    model.save("fc.gguf"); same = pgo.load("fc.gguf")

Layers, outside in (docs/architecture.md): this module -> ``models`` (Sequential, FunctionModel,
the zoo) -> ``training`` (fit / evaluate / predict, callbacks) -> ``saving`` (GGUF files,
checkpoints) -> ``nn`` (ops, layers, networks, graphs) -> ``core`` (one owning object per C handle)
-> ``_lib`` (the raw cffi binding, 1:1 with ggml's headers: ``pyggml_opt.ffi``, ``pyggml_opt.lib``).
"""
from ._lib import ffi, lib  # noqa: F401
from . import data, models
from .core import default_n_threads, devices
from .models import FunctionModel, Model, Sequential
from .nn import Tensor, layers, ops
from .nn.losses import FunctionLoss, Loss, register_loss
from .saving import load, save
from .training import (SGD, Accuracy, AdamW, Callback, CallbackList, EarlyStopping, ExponentialDecay, History,
                       LambdaCallback, MeanAbsoluteError, MeanSquaredError, Metric, ModelCheckpoint, MonitorCallback,
                       Optimizer, ReduceLROnPlateau, StepDecay, TopKAccuracy, WarmupCosine, evaluate, fit, generate,
                       predict)

__version__ = "0.1.0"

__all__ = ["Accuracy", "AdamW", "Callback", "CallbackList", "EarlyStopping", "ExponentialDecay", "FunctionLoss",
           "FunctionModel", "History", "LambdaCallback", "Loss", "MeanAbsoluteError", "MeanSquaredError", "Metric", "Model", "ModelCheckpoint",
           "MonitorCallback", "Optimizer", "ReduceLROnPlateau", "SGD", "Sequential", "StepDecay", "Tensor",
           "TopKAccuracy", "WarmupCosine", "default_n_threads", "devices", "evaluate", "fit", "generate", "layers",
           "load", "models", "ops", "predict", "register_loss", "save"]
