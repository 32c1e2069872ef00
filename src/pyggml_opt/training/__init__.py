"""Training: argument checks, sessions (ggml-opt context, graphs, buffers), batching, the fit loop,
callbacks, progress, metrics, optimizers, and predict / evaluate."""
from .callbacks import (Callback, CallbackList, EarlyStopping, LambdaCallback, ModelCheckpoint, MonitorCallback,
                        ReduceLROnPlateau)
from .generation import generate
from .history import History
from .inference import evaluate, predict
from .loop import FitLoop, fit
from .optimizers import SGD, AdamW, Optimizer
from .schedules import ExponentialDecay, StepDecay, WarmupCosine

__all__ = ["AdamW", "Callback", "CallbackList", "EarlyStopping", "ExponentialDecay", "FitLoop", "History",
           "LambdaCallback", "ModelCheckpoint", "MonitorCallback", "Optimizer", "ReduceLROnPlateau", "SGD", "StepDecay",
           "WarmupCosine", "evaluate", "fit", "generate", "predict"]
