"""Owning objects: one Python object per ggml C handle (see handle.py for the rules)."""
from .._lib import CData
from .array_buffer import ArrayBuffer, HostBuffer
from .backend import Backend, Buffer, Device, default_n_threads, device_name, devices, find_device
from .context import Context
from .dataset import Dataset
from .gguf import GGUFFile
from .handle import ClosedError, Handle
from .opt_context import (OptContext, OptimizerState, OptLoss, OptOptimizer, NamedParams, adamw_params,
                          sgd_params, static_graph_size)
from .result import Result
from .scheduler import GRAPH_SIZE, Scheduler
from .threadpool import POLLING_S

__all__ = ["ArrayBuffer", "Backend", "Buffer", "CData", "ClosedError", "Context", "Dataset", "Device", "GGUFFile", "GRAPH_SIZE", "Handle",
           "HostBuffer",
           "NamedParams", "POLLING_S", "OptContext", "OptLoss", "OptOptimizer", "OptimizerState", "Result",
           "adamw_params", "sgd_params", "Scheduler", "default_n_threads", "devices", "static_graph_size",
           "device_name", "find_device"]
