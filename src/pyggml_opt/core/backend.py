"""Backends (CPU, CUDA, Metal, ...), their devices, and backend buffers."""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

from .._lib import CData, c_str, cpu_proc, ffi, lib
from ..checks import check_int
from .context import Context
from .handle import Handle
from .threadpool import ComputeLock, PoolSlot

_DEVICE_TYPES = {
    lib.GGML_BACKEND_DEVICE_TYPE_CPU: "cpu",
    lib.GGML_BACKEND_DEVICE_TYPE_GPU: "gpu",
    lib.GGML_BACKEND_DEVICE_TYPE_IGPU: "igpu",
    lib.GGML_BACKEND_DEVICE_TYPE_ACCEL: "accel",
}


@dataclass(frozen=True)
class Device:
    """A ggml device as registered by the loaded backends."""

    name: str
    description: str
    type: str
    memory_free: int
    memory_total: int


def devices() -> list[Device]:
    """All devices ggml found (the CPU is always there; CUDA / Metal when built with them)."""
    out = []
    for i in range(lib.ggml_backend_dev_count()):
        dev = lib.ggml_backend_dev_get(i)
        free, total = ffi.new("size_t *"), ffi.new("size_t *")
        lib.ggml_backend_dev_memory(dev, free, total)
        out.append(Device(c_str(lib.ggml_backend_dev_name(dev)), c_str(lib.ggml_backend_dev_description(dev)),
                          _DEVICE_TYPES.get(lib.ggml_backend_dev_type(dev), "unknown"), free[0], total[0]))
    return out


# The names people use that differ from ggml's registry names (ggml registers Metal as "MTL").
_REGISTRY_ALIASES = {"metal": "mtl"}
# Backends whose sources are vendored (vendor/ggml/src), with the CMake options that build them; a
# backend that is not vendored gets no hint, since no option of this build could provide it.
_CUDA, _METAL = ("GGML_CUDA=ON", " (NVIDIA)"), ("GGML_METAL=ON", " (macOS)")
_BUILD_OPTIONS = {"cuda": [_CUDA], "metal": [_METAL], "gpu": [_CUDA, _METAL], "blas": [("GGML_BLAS=ON", "")],
                  "rpc": [("GGML_RPC=ON", "")]}


def device_name(name: str) -> str:
    """ggml's name of the device a backend name (``find_device``) stands for: "CPU", "CUDA0" ..."""
    return c_str(lib.ggml_backend_dev_name(find_device(name)))


def find_device(name: str) -> CData:
    """The ggml device for a backend name, case-insensitive.

    ``"cpu"``; ``"cuda"`` / ``"cuda:1"`` (the first / second CUDA device); ``"metal"``; ``"gpu"`` /
    ``"gpu:1"`` (discrete GPUs first, then integrated ones); or a ggml device name (``"CUDA0"``,
    ``"MTL0"``). Raises ValueError listing this build's devices when nothing matches.
    """
    if not isinstance(name, str):
        raise TypeError(f"backend must be a str such as 'cpu', 'cuda' or 'cuda:1', got {type(name).__name__}")
    key = name.strip().lower()
    kind, _, index = key.partition(":")
    if index and not index.isdigit():
        raise ValueError(f"backend {name!r}: the device index after ':' must be a non-negative int")
    devs = [lib.ggml_backend_dev_get(i) for i in range(lib.ggml_backend_dev_count())]
    if kind == "cpu":
        matches = [d for d in devs if lib.ggml_backend_dev_type(d) == lib.GGML_BACKEND_DEVICE_TYPE_CPU]
    elif kind == "gpu":
        matches = [d for t in (lib.GGML_BACKEND_DEVICE_TYPE_GPU, lib.GGML_BACKEND_DEVICE_TYPE_IGPU)
                   for d in devs if lib.ggml_backend_dev_type(d) == t]
    else:
        reg = _REGISTRY_ALIASES.get(kind, kind)
        matches = [d for d in devs if c_str(lib.ggml_backend_reg_name(lib.ggml_backend_dev_backend_reg(d))).lower() == reg]
        if not matches and not index:
            matches = [d for d in devs if c_str(lib.ggml_backend_dev_name(d)).lower() == key]
    i = int(index or 0)
    if i < len(matches):
        return matches[i]
    known = ", ".join(f"{d.name} ({d.type})" for d in devices())
    options = _BUILD_OPTIONS.get(kind, [])
    how = "; to add it, rebuild with " + " or ".join(
        f"`pip install . -C cmake.define.{option}`{note}" for option, note in options) if options else ""
    raise ValueError(f"backend {name!r} is not available in this build, which has: {known}{how}")


# Thread limits a process may be given, first found wins: ours, then the OpenMP convention that
# joblib's workers (loky), Dask's workers and batch schedulers set for their children.
THREAD_LIMIT_VARIABLES = ("PYGGML_OPT_NUM_THREADS", "OMP_NUM_THREADS")


def default_n_threads() -> int:
    """The CPU threads a backend uses when not told: the first positive integer among the
    environment variables PYGGML_OPT_NUM_THREADS and OMP_NUM_THREADS, else the cores this process may
    run on (``os.sched_getaffinity``), never more than those cores. ggml's workers spin at barriers,
    so a thread more than the cores granted costs far more than it brings (an order of magnitude on a
    small fit: benchmarks/CPU_SPEED.md, "Measurements behind design choices")."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS and Windows have no affinity API
        cores = os.cpu_count() or 1
    for var in THREAD_LIMIT_VARIABLES:
        value = os.environ.get(var, "").strip()
        if value.isdigit() and int(value) > 0:
            return min(int(value), cores)
    return cores


class Backend(Handle):
    """Owns a ``ggml_backend_t`` for one device.

    ``name``: a backend name as ``find_device`` reads it ("cpu", "cuda:1", "metal", "gpu", "CUDA0").
    ``n_threads`` applies to the CPU backend (default: ``default_n_threads()``).
    """

    _kind = "backend"

    def __init__(self, name: str = "cpu", n_threads: int | None = None) -> None:
        dev = find_device(name)
        super().__init__(lib.ggml_backend_dev_init(dev, ffi.NULL), lib.ggml_backend_free)
        self.device_name = c_str(lib.ggml_backend_dev_name(dev))
        self.is_cpu = lib.ggml_backend_dev_type(dev) == lib.GGML_BACKEND_DEVICE_TYPE_CPU
        self._pool = PoolSlot(self) if self.is_cpu else None
        self._last_graph = -math.inf  # time.perf_counter() at the end of the last graph computed here
        self.n_threads = 1            # the CPU backend's threads (set_n_threads)
        if self.is_cpu:
            self.set_n_threads(n_threads)

    def set_n_threads(self, n_threads: int | None) -> None:
        """Threads of the CPU backend (None: ``default_n_threads()``). Ignored on other backends."""
        if n_threads is None:
            n_threads = default_n_threads()
        n_threads = check_int("n_threads", n_threads, 1, lib.GGML_MAX_N_THREADS)
        fn = cpu_proc("ggml_backend_set_n_threads", "ggml_backend_set_n_threads_t")
        if self.is_cpu and fn is not None:
            fn(self.ptr, n_threads)
            assert self._pool is not None  # every CPU backend has one
            self._pool.use(n_threads)
            self.n_threads = n_threads

    def computed(self) -> None:
        """Note that a graph just ran on this backend (``idle_s``)."""
        self._last_graph = time.perf_counter()

    @property
    def idle_s(self) -> float:
        """Seconds since a graph last ran on this backend (through an ``OptContext``); inf if none did."""
        return time.perf_counter() - self._last_graph

    @property
    def compute_lock(self) -> ComputeLock:
        """Held around every graph computed on this CPU backend (``Scheduler.compute``,
        ``OptContext.eval``): a fork waits for it, so it never pauses the backend's thread pool in the
        middle of a graph (core/threadpool.py). ValueError for another device's backend."""
        if self._pool is None:
            raise ValueError(f"backend {self.device_name}: only CPU backends have a compute lock")
        return self._pool.lock

    @property
    def pooled(self) -> bool:
        """A CPU backend whose graphs run on a thread pool (more than one thread)."""
        return self._pool is not None and self._pool.pool is not None

    def close(self) -> None:
        """Free the backend (and its thread pool) now (idempotent)."""
        if self._pool is not None:
            self._pool.close()
        super().close()


class Buffer(Handle):
    """Owns a backend buffer holding the data of every tensor of a context (``ggml_backend_alloc_ctx_tensors``)."""

    _kind = "backend buffer"

    def __init__(self, context: Context, backend: Backend) -> None:
        ptr = lib.ggml_backend_alloc_ctx_tensors(context.ptr, backend.ptr)
        super().__init__(ptr, lib.ggml_backend_buffer_free, context, backend)
        self.context, self.backend = context, backend

    def clear(self, value: int = 0) -> None:
        """Set every byte of the buffer to ``value`` (``ggml_backend_buffer_clear``)."""
        lib.ggml_backend_buffer_clear(self.ptr, value)

    @property
    def nbytes(self) -> int:
        return lib.ggml_backend_buffer_get_size(self.ptr)
