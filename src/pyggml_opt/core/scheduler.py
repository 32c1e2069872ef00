"""ggml_backend_sched: runs a graph over several backends, each op on the first one that supports it."""
from __future__ import annotations

from .._lib import CData, ffi, lib
from .backend import Backend
from .handle import Handle

GRAPH_SIZE = 16384

# The CPU backend fails a graph (GGML_STATUS_FAILED, vendor patch 0037) only where an op that picks rows
# by index met an index outside its table; it stops the graph after that node, so a training step's
# optimizer update never runs on those rows.
INDEX_ERROR = ("an index op (embedding / gather) got an index outside its table: ids that only the graph sees "
               "(computed in it, such as ops.to_int32 of input values, or tokens that generate sampled) must lie in "
               "[0, rows of the table). Nothing was computed past that op: a training step left the weights as "
               "they were")


def check_status(status: int) -> None:
    """Raise for a ``ggml_status`` other than success: ValueError for an index outside its table
    (``INDEX_ERROR``), MemoryError for an allocation that failed, RuntimeError otherwise."""
    if status == lib.GGML_STATUS_SUCCESS:
        return
    if status == lib.GGML_STATUS_FAILED:
        raise ValueError(f"ggml could not compute the graph: {INDEX_ERROR}")
    if status == lib.GGML_STATUS_ALLOC_FAILED:
        raise MemoryError("ggml could not allocate memory to compute the graph")
    raise RuntimeError(f"ggml graph computation failed: {ffi.string(lib.ggml_status_to_string(status)).decode()}")


class Scheduler(Handle):
    """Owns a ``ggml_backend_sched_t`` over ``backends`` (in priority order).

    The CPU backend must come last: ops a device lacks (CUDA: CONV_2D's backward passes, POOL_2D_BACK; Metal:
    cross-entropy, OUT_PROD) fall back to it. The scheduler keeps its backends alive.
    """

    _kind = "backend scheduler"

    def __init__(self, backends: list[Backend], graph_size: int = GRAPH_SIZE) -> None:
        if not backends:
            raise ValueError("a scheduler needs at least one backend")
        arr = ffi.new("ggml_backend_t[]", [b.ptr for b in backends])
        ptr = lib.ggml_backend_sched_new(arr, ffi.NULL, len(backends), graph_size, False, True)
        super().__init__(ptr, lib.ggml_backend_sched_free, *backends)
        self.backends = list(backends)
        self.graph_size = graph_size  # the nodes and leaves a graph it runs may have
        # held around every graph computed here, so a fork waits for the graph to end (core/threadpool.py);
        # ggml_backend_sched_new asserts that the last backend is the CPU's
        self.compute_lock = backends[-1].compute_lock

    @classmethod
    def for_device(cls, name: str = "cpu", n_threads: int | None = None) -> "Scheduler":
        """A scheduler for device ``name`` with the CPU as fallback."""
        main = Backend(name, n_threads)
        backends = [main] if main.is_cpu else [main, Backend("cpu", n_threads)]
        return cls(backends)

    @property
    def main(self) -> Backend:
        """The backend that holds parameters and inputs."""
        return self.backends[0]

    def compute(self, graph: CData) -> None:
        """Allocate and compute ``graph`` (a ``struct ggml_cgraph *``); releases the GIL while computing.
        A failed computation raises (``check_status``)."""
        lib.ggml_backend_sched_reset(self.ptr)
        if not lib.ggml_backend_sched_alloc_graph(self.ptr, graph):
            raise MemoryError("ggml could not allocate the compute graph")
        with self.compute_lock:
            status = lib.ggml_backend_sched_graph_compute(self.ptr, graph)
        check_status(status)
