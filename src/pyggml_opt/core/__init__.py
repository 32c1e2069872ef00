"""Owning objects: one Python object per ggml C handle (see handle.py for the rules)."""
from .backend import Backend, Buffer, Device, devices
from .context import Context
from .dataset import Dataset
from .handle import ClosedError, Handle
from .opt_context import LOSS_TYPES, OptContext
from .result import Result
from .scheduler import Scheduler

__all__ = ["Backend", "Buffer", "ClosedError", "Context", "Dataset", "Device", "Handle", "LOSS_TYPES",
           "OptContext", "Result", "Scheduler", "devices"]
