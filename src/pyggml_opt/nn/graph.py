"""A network's forward graph for one batch size, in either of ggml-opt's graph modes, and the shape
inference that builds a graph without data."""
from __future__ import annotations

import numpy as np

from .._lib import CData, ffi, lib
from ..core import GRAPH_SIZE, Buffer, Context
from ..core import tensor_data
from .network import Network
from .ops import Tensor, contiguous, new_input
from .params import ParamStore


class ForwardGraph:
    """The forward graph of ``network`` for ``batch`` samples, over the parameters in ``store``.

    Static (``static=True``, ggml-opt's static graphs and fit's training graph): the input lives in a
    buffer of its own on the store's backend, so the graph is built once and evaluated many times.
    With ``rows_of`` (a host tensor ``[ne_datapoint, ndata]``: fit's samples) the input is instead
    ``batch`` row numbers (int32) and the graph starts by gathering those rows (GET_ROWS): the batch
    is copied inside ggml's compute instead of by numpy.
    With ``labels_width`` (static graphs only) a second input, ``labels`` (batch, labels_width), is
    allocated beside the first, for graphs that go on past the network's outputs (a loss of their own);
    their outputs are then copied into the static buffer too, where ``output()`` reads them after each
    evaluation (ggml-opt computes a copy of a static graph, whose other nodes' memory it reuses).
    With ``training`` (static graphs only) the network's step inputs (``Network.step_inputs``: dropout
    masks) are allocated there too, as ``step_inputs``, and the graph is the network's
    ``forward_train``: ``side_effects`` then holds the nodes that update its buffers (BatchNorm's
    running statistics), which the training graph must compute besides its outputs. ``constants``
    (name -> array; static graphs only) become tensors of that value in the static buffer, for graph
    code after the network (a loss's one-hot table). ``readable`` (static graphs only) also keeps the
    outputs in the static buffer, for ``output()`` after ggml-opt evaluated the graph (without
    labels, for a forward-only context: generation).
    Allocation-based (``static=False``): the input is left for ggml-opt's scheduler to allocate; the
    graph is built for one evaluation (``ggml_opt_prepare_alloc``), so any batch size works.
    """

    def __init__(self, network: Network, store: ParamStore, batch: int, *, static: bool = True,
                 rows_of: CData | None = None, labels_width: int | None = None, training: bool = False,
                 constants: dict[str, np.ndarray] | None = None, readable: bool = False) -> None:
        self.batch = batch
        self.store = store
        self.ctx_compute = Context(GRAPH_SIZE, graph_size=GRAPH_SIZE, grads=static)
        self.ctx_static: Context | None = None
        self.buf_static: Buffer | None = None
        self.labels: Tensor | None = None
        assert network.input_shape is not None and network.output_shape is not None  # built by the caller
        shape = (batch, *network.input_shape)
        if (labels_width is not None or training or constants or readable) and not static:
            raise ValueError("labels_width, training, constants and readable need a static graph")
        # the network's step inputs (dropout masks) exist in the training graph only
        step_shapes = network.step_inputs() if training else {}
        self.step_inputs: dict[str, Tensor] = {}
        constants = constants or {}
        self.constants: dict[str, Tensor] = {}
        if static:
            self.ctx_static = Context(3 + len(step_shapes) + len(constants))
            for key, value in constants.items():
                t = new_input(self.ctx_static, value.shape, key)
                t.ctx = self.ctx_compute
                self.constants[key] = t
            for key, sample_shape in step_shapes.items():
                t = new_input(self.ctx_static, (batch, *sample_shape), key)
                lib.ggml_set_input(t.ptr)
                t.ctx = self.ctx_compute
                self.step_inputs[key] = t
            if rows_of is None:
                inp = new_input(self.ctx_static, shape, "input", network.input_dtype).ptr
            else:
                inp = lib.ggml_new_tensor_1d(self.ctx_static.ptr, lib.GGML_TYPE_I32, batch)
                lib.ggml_set_name(inp, b"batch_rows")
            if labels_width is not None:
                self.labels = new_input(self.ctx_static, (batch, labels_width), "labels")
                lib.ggml_set_input(self.labels.ptr)
                self.labels.ctx = self.ctx_compute  # ops on the labels build in the graph's context
        else:
            inp = new_input(self.ctx_compute, shape, "input", network.input_dtype).ptr
        self.inputs = inp
        lib.ggml_set_input(inp)
        if rows_of is None:
            x_ptr = inp
        else:
            rows = lib.ggml_get_rows(self.ctx_compute.ptr, rows_of, inp)
            x_ptr = lib.ggml_reshape_4d(self.ctx_compute.ptr, rows, *tensor_data.ne_of(shape))
        x = Tensor(x_ptr, self.ctx_compute, self.ctx_compute, len(shape))
        updates: list[Tensor] = []
        if training:
            out = network.forward_train(x, {**store.tensors, **self.step_inputs}, updates)
        else:
            out = network.forward(x, dict(store.tensors))
        self.side_effects: list[CData] = [u.ptr for u in updates]
        if out.shape != (batch, *network.output_shape):
            raise ValueError(f"the model produced outputs of shape {out.shape}, expected {(batch, *network.output_shape)}")
        if out.ptr.type != lib.GGML_TYPE_F32:
            raise ValueError("the model's output must be float32")
        out = contiguous(out)
        out_static = self.labels is not None or readable
        if out_static:
            assert self.ctx_static is not None  # static (checked above)
            out = Tensor(lib.ggml_cont(self.ctx_static.ptr, out.ptr), self.ctx_compute, self.ctx_static, out.ndim)
        if self.ctx_static is not None:
            self.buf_static = Buffer(self.ctx_static, store.backend)
            for key, value in constants.items():
                tensor_data.set(self.constants[key].ptr, value)
        self.out = out
        self.outputs = out.ptr
        lib.ggml_set_name(self.outputs, b"outputs")
        lib.ggml_set_output(self.outputs)
        # numpy views of the input and the outputs where they live in a static buffer in host memory:
        # a batch of one sample spends more time in tensor_data's checks than in the copy
        self._input_view = self._output_view = None
        if self.buf_static is not None:
            if rows_of is None:
                self._input_view = tensor_data.host_view(inp, shape)
            if out_static:
                self._output_view = tensor_data.host_view(self.outputs, out.shape)
        self.gf: CData | None = None
        if not static:
            self.gf = lib.ggml_new_graph_custom(self.ctx_compute.ptr, GRAPH_SIZE, False)
            lib.ggml_build_forward_expand(self.gf, self.outputs)

    def set_input(self, xb: np.ndarray) -> None:
        """Write one batch (``batch`` rows) into the input, once it is allocated."""
        if self._input_view is not None:
            self._input_view[...] = xb.reshape(self._input_view.shape)
        else:
            tensor_data.set(self.inputs, xb)

    def output(self) -> np.ndarray:
        """The outputs of the last evaluation, (batch, *output_shape): a copy."""
        if self._output_view is not None:
            return self._output_view.copy()
        return tensor_data.get(self.outputs, self.out.ndim)

    def flop(self) -> int:
        """An estimate of the floating-point operations of one evaluation: 2 per multiply-add of every
        matrix product and convolution and 1 per element of every other node."""
        ctx = self.ctx_compute.ptr
        total = 0
        t = lib.ggml_get_first_tensor(ctx)
        while t != ffi.NULL:
            n = lib.ggml_nelements(t)
            if t.op == lib.GGML_OP_MUL_MAT:
                n *= 2 * t.src[0].ne[0]
            elif t.op == lib.GGML_OP_CONV_2D:     # src[0]: the kernel (kw, kh, c_in, c_out)
                n *= 2 * t.src[0].ne[0] * t.src[0].ne[1] * t.src[0].ne[2]
            total += n
            t = lib.ggml_get_next_tensor(ctx, t)
        return total

    def close(self) -> None:
        self._input_view = self._output_view = None  # views of the static buffer freed here
        for owner in (self.buf_static, self.ctx_static, self.ctx_compute):
            if owner is not None:
                owner.close()


def output_shape_of(network: Network, param_shapes: dict[str, tuple[int, ...]],
                    input_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Build ``network``'s graph for one sample (no data, no backend) to learn its output shape."""
    ctx = Context(GRAPH_SIZE)
    ctx_p = Context(max(1, len(param_shapes)))
    try:
        params: dict[str, Tensor] = {}
        for name, shape in param_shapes.items():
            params[name] = new_input(ctx_p, shape, name)
            params[name].ctx = None
        out = network.forward(new_input(ctx, (1, *input_shape), "input", network.input_dtype), params)
        return out.shape[1:]
    finally:
        ctx.close()
        ctx_p.close()
