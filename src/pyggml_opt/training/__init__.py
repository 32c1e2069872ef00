"""Training: argument checks, sessions (ggml-opt context, graphs, buffers), batching, the fit loop,
callbacks, progress, metrics, optimizers, and predict / evaluate."""
from .callbacks import (Callback, CallbackList, EarlyStopping, LambdaCallback, ModelCheckpoint, MonitorCallback,
                        ReduceLROnPlateau)
from .generation import generate
from .history import History
from .inference import evaluate, predict
from .loop import FitLoop, fit
from .metrics import Accuracy, MeanAbsoluteError, MeanSquaredError, Metric, TopKAccuracy
from .optimizers import SGD, AdamW, Optimizer
from .schedules import ExponentialDecay, StepDecay, WarmupCosine

__all__ = ["Accuracy", "AdamW", "Callback", "CallbackList", "EarlyStopping", "ExponentialDecay", "FitLoop", "History",
           "LambdaCallback", "MeanAbsoluteError", "MeanSquaredError", "Metric", "ModelCheckpoint", "MonitorCallback",
           "Optimizer", "ReduceLROnPlateau", "SGD", "StepDecay", "TopKAccuracy", "WarmupCosine", "evaluate", "fit",
           "generate", "predict"]
