"""A network's forward graph for one batch size in each of ggml-opt's two graph modes, over one shared
builder: ``StaticGraph`` (inputs in a buffer of their own: built once, evaluated many times) and
``AllocGraph`` (allocation-based: ggml-opt's scheduler allocates the inputs for each evaluation of a
graph built for it, so any batch size works); and the shape inference that builds a graph without data."""
from __future__ import annotations

import numpy as np

from .._lib import CData, ffi, lib
from ..core import GRAPH_SIZE, Buffer, Context
from ..core import tensor_data
from .network import Network
from .ops import Tensor, contiguous, new_input
from .params import ParamStore


class Graph:
    """What both graph modes share: ``network``'s forward graph for ``batch`` samples over the
    parameters in ``store``, built in ``ctx_compute`` by ``_build`` (the shared builder) from the input
    a subclass makes: ``inputs`` (the input tensor), ``out`` / ``outputs`` (the network's outputs, a
    Tensor and its pointer), ``step_inputs`` (training graphs: the network's step inputs, dropout
    masks, by name) and ``side_effects`` (training graphs: the nodes that update the network's buffers,
    BatchNorm's running statistics, which every evaluation computes besides the outputs)."""

    inputs: CData   # set by the subclass
    out: Tensor     # set by _set_outputs
    outputs: CData

    def __init__(self, network: Network, store: ParamStore, batch: int, grads: bool,
                 sample_shape: tuple[int, ...] | None) -> None:
        assert network.input_shape is not None  # built by the caller
        self.batch = batch
        self.sample_shape = network.input_shape if sample_shape is None else sample_shape
        self.store = store
        self.ctx_compute = Context(GRAPH_SIZE, graph_size=GRAPH_SIZE, grads=grads)
        self.step_inputs: dict[str, Tensor] = {}
        self.side_effects: list[CData] = []
        # numpy views of the input and the outputs where a static buffer in host memory holds them: a
        # batch of one sample spends more time in tensor_data's checks than in the copy
        self._input_view: np.ndarray | None = None
        self._output_view: np.ndarray | None = None

    def _build(self, network: Network, x: Tensor, training: bool) -> Tensor:
        """The network's outputs for ``x`` (checked: shape, float32; contiguous): its training form
        (``forward_train``, with ``step_inputs`` among the parameters) when ``training``."""
        updates: list[Tensor] = []
        if training:
            out = network.forward_train(x, {**self.store.tensors, **self.step_inputs}, updates)
        else:
            out = network.forward(x, dict(self.store.tensors))
        self.side_effects = [u.ptr for u in updates]
        expected = (self.batch, *network.output_shape_for(self.sample_shape))
        if out.shape != expected:
            raise ValueError(f"the model produced outputs of shape {out.shape}, expected {expected}")
        if out.ptr.type != lib.GGML_TYPE_F32:
            raise ValueError("the model's output must be float32")
        return contiguous(out)

    def _new_step_inputs(self, network: Network, ctx: Context) -> None:
        """The network's step inputs for ``batch`` samples, held by ``ctx``, built on in ``ctx_compute``."""
        for key, sample_shape in network.step_inputs(self.sample_shape).items():
            t = new_input(ctx, (self.batch, *sample_shape), key, graph=self.ctx_compute)
            lib.ggml_set_input(t.ptr)
            self.step_inputs[key] = t

    def _set_outputs(self, out: Tensor, kept: bool = True) -> None:
        """``out`` as the graph's outputs; ``kept``: a graph output, which ggml-alloc neither frees nor
        lets another node overwrite (else the gradient of the loss may take their memory)."""
        self.out = out
        self.outputs = out.ptr
        lib.ggml_set_name(self.outputs, b"outputs")
        if kept:
            lib.ggml_set_output(self.outputs)

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
        self._input_view = self._output_view = None  # views of a static buffer freed by a subclass
        self.ctx_compute.close()


class StaticGraph(Graph):
    """A static graph (ggml-opt's static graphs; fit's training graph, the forward graphs cached per
    batch size): the input lives in a buffer of its own on the store's backend (``buf_static``), so the
    graph is built once and evaluated many times. ggml-opt adds its loss (and, for training, the
    gradients and the optimizer step) to ``ctx_compute`` at ``ggml_opt_init``.

    With ``rows_of`` (a host tensor ``[ne_datapoint, ndata]``: fit's samples) the input is ``batch``
    row numbers (int32) and the graph starts by gathering those rows (GET_ROWS): the batch is copied
    inside ggml's compute instead of by numpy. With ``labels_width`` a second input, ``labels``
    (batch, labels_width), is allocated beside the first, for graphs that go on past the network's
    outputs (a loss of their own). With ``training`` the graph is the network's ``forward_train``,
    with its step inputs in the static buffer (``step_inputs``) and the nodes that update its buffers
    in ``side_effects``. ``constants`` (name -> array) become tensors of that value in the static
    buffer, for graph code after the network (a loss's one-hot table). ``readable`` copies the outputs
    into the static buffer, where ``output()`` reads them after each evaluation (ggml-opt computes a
    copy of a static graph, whose other nodes' memory it reuses): only graphs whose outputs are read
    pay for that copy (a language model's logits are hundreds of MB)."""

    def __init__(self, network: Network, store: ParamStore, batch: int, *, rows_of: CData | None = None,
                 labels_width: int | None = None, training: bool = False,
                 constants: dict[str, np.ndarray] | None = None, readable: bool = False,
                 sample_shape: tuple[int, ...] | None = None) -> None:
        super().__init__(network, store, batch, True, sample_shape)
        shape = (batch, *self.sample_shape)
        constants = constants or {}
        self.ctx_static = Context(3 + (len(network.step_inputs(self.sample_shape)) if training else 0) + len(constants))
        self.buf_static: Buffer | None = None
        self.labels: Tensor | None = None
        self.constants = {key: new_input(self.ctx_static, value.shape, key, graph=self.ctx_compute)
                          for key, value in constants.items()}
        if training:
            self._new_step_inputs(network, self.ctx_static)
        if rows_of is None:
            x = new_input(self.ctx_static, shape, "input", network.input_dtype, graph=self.ctx_compute)
            self.inputs = x.ptr
            lib.ggml_set_input(self.inputs)
        else:
            self.inputs = lib.ggml_new_tensor_1d(self.ctx_static.ptr, lib.GGML_TYPE_I32, batch)
            lib.ggml_set_name(self.inputs, b"batch_rows")
            lib.ggml_set_input(self.inputs)
            rows = lib.ggml_get_rows(self.ctx_compute.ptr, rows_of, self.inputs)
            x = Tensor(lib.ggml_reshape_4d(self.ctx_compute.ptr, rows, *tensor_data.ne_of(shape)),
                       self.ctx_compute, self.ctx_compute, len(shape))
        if labels_width is not None:
            self.labels = new_input(self.ctx_static, (batch, labels_width), "labels", graph=self.ctx_compute)
            lib.ggml_set_input(self.labels.ptr)
        out = self._build(network, x, training)
        self.readable = readable
        if readable:
            out = Tensor(lib.ggml_cont(self.ctx_static.ptr, out.ptr), self.ctx_compute, self.ctx_static, out.ndim)
        self.buf_static = Buffer(self.ctx_static, store.backend)
        for key, value in constants.items():
            tensor_data.set(self.constants[key].ptr, value)
        self._set_outputs(out, kept=readable)
        if rows_of is None:
            self._input_view = tensor_data.host_view(self.inputs, shape)
        if readable:
            self._output_view = tensor_data.host_view(self.outputs, out.shape)

    def close(self) -> None:
        super().close()
        for owner in (self.buf_static, self.ctx_static):
            if owner is not None:
                owner.close()


class AllocGraph(Graph):
    """An allocation-based graph (``ggml_opt_prepare_alloc``): ``gf``, built for one evaluation of
    exactly ``batch`` samples, whose input (and step inputs) ggml-opt's scheduler allocates at
    ``ggml_opt_alloc``: any batch size works, with nothing padded.

    With ``training`` it is the network's training form: ``forward_train`` with its step inputs
    (``step_inputs``, allocated with the input), the nodes that update its buffers part of ``gf``, in a
    context with room for gradients, so that ggml-opt builds the backward pass over the parameters the
    store flags when it makes them (``ParamStore``; ``ggml_build_backward_expand``) and the optimizer
    step when ``alloc`` asks for it. Each graph serves one evaluation: a training run builds one per
    batch, of whatever shape the batch has."""

    def __init__(self, network: Network, store: ParamStore, batch: int, *, training: bool = False,
                 sample_shape: tuple[int, ...] | None = None) -> None:
        super().__init__(network, store, batch, training, sample_shape)
        if training:
            self._new_step_inputs(network, self.ctx_compute)
        x = new_input(self.ctx_compute, (batch, *self.sample_shape), "input", network.input_dtype)
        self.inputs = x.ptr
        lib.ggml_set_input(self.inputs)
        self._set_outputs(self._build(network, x, training))
        self.gf: CData = lib.ggml_new_graph_custom(self.ctx_compute.ptr, GRAPH_SIZE, training)
        lib.ggml_build_forward_expand(self.gf, self.outputs)
        for node in self.side_effects:
            lib.ggml_build_forward_expand(self.gf, node)

    def new_input(self, shape: tuple[int, ...], name: str) -> Tensor:
        """One more float input of the graph (``shape``, batch axis first), allocated with the others
        (label rows for a loss computed in the graph); write it after ``ggml_opt_alloc``."""
        t = new_input(self.ctx_compute, shape, name)
        lib.ggml_set_input(t.ptr)
        return t

    def add_output(self, t: Tensor) -> Tensor:
        """Compute ``t`` (built in this graph's context) besides the outputs, kept readable after the
        evaluation (a loss per sample)."""
        lib.ggml_set_output(t.ptr)
        lib.ggml_build_forward_expand(self.gf, t.ptr)
        return t


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
