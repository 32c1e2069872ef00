"""Owning objects: one Python object per ggml C handle (see handle.py for the rules)."""
from .array_buffer import ArrayBuffer
from .backend import Backend, Buffer, Device, default_n_threads, devices, find_device
from .context import Context
from .dataset import Dataset
from .gguf import GGUFFile
from .handle import ClosedError, Handle
from .opt_context import OptContext, OptLoss
from .result import Result
from .scheduler import GRAPH_SIZE, Scheduler
from .threadpool import POLLING_S

__all__ = ["ArrayBuffer", "Backend", "Buffer", "ClosedError", "Context", "Dataset", "Device", "GGUFFile", "GRAPH_SIZE", "Handle",
           "POLLING_S", "OptContext", "OptLoss", "Result", "Scheduler", "default_n_threads", "devices",
           "find_device"]
