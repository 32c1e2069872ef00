"""ggml_context: a pool of tensor metadata (and, unless ``no_alloc``, tensor data)."""
from __future__ import annotations

from .._lib import ffi, lib
from .handle import Handle


class Context(Handle):
    """Owns a ``struct ggml_context *`` (``ggml_init`` / ``ggml_free``).

    ``n_tensors`` sizes the metadata pool; with ``graph_size`` room for ``n_graphs`` graphs of that many
    nodes (with gradients when ``grads``) is added. Contexts made here never hold tensor data
    (``no_alloc=True``): data lives in backend buffers (see ``Buffer``).
    """

    _kind = "ggml context"

    def __init__(self, n_tensors: int, graph_size: int = 0, grads: bool = False, n_graphs: int = 1) -> None:
        size = n_tensors * lib.ggml_tensor_overhead()
        if graph_size:
            size += n_graphs * lib.ggml_graph_overhead_custom(graph_size, grads)
        params = ffi.new("struct ggml_init_params *", {"mem_size": size, "mem_buffer": ffi.NULL, "no_alloc": True})
        super().__init__(lib.ggml_init(params[0]), lib.ggml_free)

    def n_tensors(self) -> int:
        """The tensors made in this context so far (a graph's nodes and leaves, when it holds one)."""
        count, t = 0, lib.ggml_get_first_tensor(self.ptr)
        while t != ffi.NULL:
            count += 1
            t = lib.ggml_get_next_tensor(self.ptr, t)
        return count
