"""ggml_opt_context: the training graphs (forward, gradients, optimizer step) of one model."""
from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field
from types import TracebackType
from typing import Iterable, Mapping, Protocol, Sequence

import numpy as np

from .._lib import CData, ffi, lib
from ..checks import check_int
from . import tensor_data
from .context import Context
from .handle import Handle
from .result import Result
from .scheduler import Scheduler, check_status

class OptLoss(enum.IntEnum):
    """ggml-opt's loss types (``enum ggml_opt_loss_type``): what ggml-opt appends to the outputs."""

    MEAN = lib.GGML_OPT_LOSS_TYPE_MEAN
    SUM = lib.GGML_OPT_LOSS_TYPE_SUM
    CROSS_ENTROPY = lib.GGML_OPT_LOSS_TYPE_CROSS_ENTROPY
    MEAN_SQUARED_ERROR = lib.GGML_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR


# the nodes of a static training graph per tensor of its forward graph: that tensor, its gradient, the
# backward pass's intermediate nodes, the optimizer's, gradient clipping's (vendor patch 0044). Measured
# with sample weights, metrics and global_clipnorm on llamas and gpts of 24 blocks and a 300-layer MLP: 4
# held the llamas only; at 8 the MLP's nodes and leaves outgrew ggml_opt_alloc's copy of the graph (room
# for graph_size tensors); 12 held all. 16 leaves a third more. Metadata only: ~6 KB per forward tensor.
GRAPH_NODES_PER_TENSOR = 16


def static_graph_size(ctx_compute: Context, backward: bool = True) -> int:
    """The nodes each of ggml-opt's static graphs holds, for a forward graph built in ``ctx_compute``:
    ``ggml_opt_params.graph_size``, at least ggml's default. With the ``backward`` pass
    ``GRAPH_NODES_PER_TENSOR`` per tensor there; without, the forward graph and the loss (two per
    tensor). A scheduler that runs them needs room for twice as many (nodes and leaves)."""
    per_tensor = GRAPH_NODES_PER_TENSOR if backward else 2
    return max(lib.GGML_DEFAULT_GRAPH_SIZE, per_tensor * ctx_compute.n_tensors())


def build_context(graph_size: int, backward: bool, forward_graph: bool) -> Context:
    """A context for what ggml-opt builds beside a forward graph of ``graph_size`` nodes, so that it
    never runs out of room in a caller's context (ggml aborts then, or crashes: its graph-building
    calls cannot report an error). ``forward_graph``: ggml-opt makes the forward graph itself (static
    graphs). Without ``backward`` ggml-opt adds the loss: at most 6 tensors (cross-entropy: the labels,
    the loss, its 1/opt_period scale, the predictions, the labels' argmax, the count of correct ones).
    With it, two copies of the forward graph with gradients (for the gradients, and with the optimizer
    step) and the tensors of the loss, gradients and optimizer steps: each is a node or a leaf of the
    optimizer graph, which holds at most ``graph_size`` of each (ggml asserts before a graph overflows),
    so 2 * graph_size tensors hold them. Metadata only, and what ggml-opt does not use is never touched."""
    n_graphs = int(forward_graph) + (2 if backward else 0)
    n_tensors = 2 * graph_size if backward else 6
    return Context(n_tensors, graph_size=graph_size, grads=True, n_graphs=n_graphs)


class OptOptimizer(enum.IntEnum):
    """ggml-opt's optimizers (``enum ggml_opt_optimizer_type``)."""

    ADAMW = lib.GGML_OPT_OPTIMIZER_TYPE_ADAMW
    SGD = lib.GGML_OPT_OPTIMIZER_TYPE_SGD


def adamw_params(alpha: float, beta1: float, beta2: float, eps: float, wd: float) -> CData:
    """``struct ggml_opt_optimizer_params`` for an AdamW step (by value, as ggml-opt's callback returns it)."""
    p = ffi.new("struct ggml_opt_optimizer_params *")
    p.adamw.alpha, p.adamw.beta1, p.adamw.beta2, p.adamw.eps, p.adamw.wd = alpha, beta1, beta2, eps, wd
    return p[0]


def sgd_params(alpha: float, wd: float) -> CData:
    """``struct ggml_opt_optimizer_params`` for an SGD step (by value)."""
    p = ffi.new("struct ggml_opt_optimizer_params *")
    p.sgd.alpha, p.sgd.wd = alpha, wd
    return p[0]


@dataclass
class OptimizerState:
    """What ggml-opt holds between optimizer steps: its iteration (1 + the steps taken: AdamW's bias
    correction, and the learning-rate schedule's clock) and AdamW's moments by parameter name (read and
    written through ``OptContext``; vendor/patches/0002 adds the accessors). ``optimizer``: the name of
    the optimizer it belongs to ("adamw", "sgd")."""

    optimizer: str
    iter: int
    m: dict[str, np.ndarray] = field(default_factory=dict)
    v: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def step(self) -> int:
        """Optimizer steps taken: the step a learning-rate schedule is at."""
        return self.iter - 1

    def check_fits(self, optimizer: str) -> None:
        """ValueError unless this state can continue training with ``optimizer`` (its name)."""
        if self.optimizer != optimizer:
            raise ValueError(f"the checkpoint was trained with {self.optimizer!r}, this fit uses {optimizer!r}")
        if self.iter < 1:
            raise ValueError(f"corrupt checkpoint: optimizer iteration {self.iter}")


# A parameter as the optimizer state names it: the tensor and its numpy-order shape.
NamedParams = Mapping[str, tuple[CData, tuple[int, ...]]]


class OptimizerCallbacks(Protocol):
    """What an ``OptContext`` asks of its optimizer (``training.optimizers.Optimizer``)."""

    type: OptOptimizer
    name: str  # the name an OptimizerState records
    global_clipnorm: float | None  # ggml_opt_params.grad_clip_norm (None: no clipping)

    def c_params(self, step: int) -> CData: ...
    def fallback_params(self) -> CData: ...
    def record_error(self, exc: BaseException) -> None: ...
    def raise_pending(self) -> None: ...


# The optimizer whose ggml_opt_eval is running in this thread (for _on_params_error).
_evaluating = threading.local()


def _on_params_error(exc_type: type[BaseException],  # noqa: ARG001 - cffi's onerror signature
                     exc_value: BaseException, traceback: TracebackType) -> CData | None:  # noqa: ARG001
    # An exception escaped the callback anyway: a KeyboardInterrupt (Ctrl+C) is raised at whatever
    # bytecode runs when the signal arrives, also outside c_params' try. cffi would hand ggml-opt a
    # zeroed struct and ggml-opt would abort on alpha == 0: return the last valid parameters instead
    # and raise the exception once ggml_opt_eval returns.
    opt = getattr(_evaluating, "optimizer", None)
    if opt is None:
        return None  # the `error` value below: ggml's defaults, which pass its checks
    opt.record_error(exc_value)
    return opt.fallback_params()


class _StepParams:
    """The userdata of ggml-opt's optimizer callback: the optimizer, asked for the parameters of the
    step the context is at (its iteration - 1: the clock of the learning-rate schedule is ggml-opt's
    own, so moments and schedule never disagree). Holds the context's pointer, not the context (no
    reference cycle through the handle)."""

    def __init__(self, optimizer: OptimizerCallbacks) -> None:
        self.optimizer = optimizer
        self.ctx: CData = ffi.NULL  # set once ggml_opt_init returns; the callback runs only in its evaluations

    def c_params(self) -> CData:
        return self.optimizer.c_params(int(lib.ggml_opt_get_iter(self.ctx)) - 1)


@ffi.def_extern(error=lib.ggml_opt_get_default_optimizer_params(ffi.NULL), onerror=_on_params_error)
def pyggml_get_optimizer_params(userdata: CData) -> CData:
    # ggml-opt calls this once per optimizer step and asserts on the values it gets back, so the
    # optimizer object never raises here: it keeps any error and returns its last valid values.
    return ffi.from_handle(userdata).c_params()


class OptContext(Handle):
    """Owns a ``ggml_opt_context_t``, in either of ggml-opt's two graph modes.

    Steps, as in ggml-opt.h:
      1. Static graphs (``static=(ctx_compute, inputs, outputs)``): ``inputs`` are allocated in a
         backend buffer and ``outputs`` built from them in ``ctx_compute`` before this object is
         made; ggml-opt adds the loss, gradients and optimizer step once. Allocation-based graphs
         (``static=None``): before each ``alloc``, ``prepare_alloc`` hands over a forward graph built
         for that batch (any shape) in a fresh compute context; ggml-opt allocates its inputs. In both
         modes ggml-opt builds its own tensors and graphs in a context this object makes for them
         (``build_context``), so a caller's context needs room for the caller's tensors only.
      2. Per physical batch: ``alloc(backward)``, write inputs (and ``labels``), ``eval(result)``.
      3. Every ``opt_period`` backward passes the optimizer ``optimizer`` steps once.
    ``optimizer`` (``training.optimizers.Optimizer``) has ``type`` (ggml_opt_optimizer_type),
    ``global_clipnorm`` (fixed in the graph at init: vendor patch 0012) and ``c_params(step)`` (returns
    ``struct ggml_opt_optimizer_params`` for the step the context is at, its iteration - 1), called back
    through ``pyggml_get_optimizer_params``; errors
    it cannot raise in C are kept by ``record_error`` and raised by ``raise_pending`` once
    ``ggml_opt_eval`` returns.
    ``side_effects`` (static graphs): nodes in ``ctx_compute`` that every evaluation computes besides
    the outputs, such as the ggml_cpy nodes that update BatchNorm's running statistics (vendor patch 0014).
    The context keeps the scheduler, compute context(s), inputs' owner and optimizer alive.
    """

    _kind = "ggml-opt context"

    def __init__(self, scheduler: Scheduler, loss: OptLoss, optimizer: OptimizerCallbacks | None = None, *,
                 static: tuple[Context, CData, CData] | None = None, opt_period: int = 1,
                 forward_only: bool = False, keep_alive: Iterable[object] = (),
                 side_effects: Sequence[CData] = ()) -> None:
        opt_period = check_int("opt_period", opt_period)
        if not isinstance(loss, OptLoss):
            raise TypeError(f"loss must be an OptLoss (ggml-opt's loss type), got {loss!r}")
        params = lib.ggml_opt_default_params(scheduler.ptr, int(loss))
        ctx_compute = None
        self._built: Context | None = None  # static graphs: where ggml-opt builds its graphs
        if static is not None:
            ctx_compute, inputs, outputs = static
            if inputs.data == ffi.NULL:
                raise ValueError("inputs must be allocated in a backend buffer before ggml_opt_init (static graphs)")
            # ggml_opt_init builds its graphs in a context of their own, of a size for the forward graph built
            # in ctx_compute (vendor patch 0044)
            graph_size = static_graph_size(ctx_compute, backward=not forward_only)
            if 2 * graph_size > scheduler.graph_size:
                raise ValueError(f"a scheduler for graphs of {scheduler.graph_size} nodes and leaves cannot run "
                                 f"this training graph's {2 * graph_size}: make it with Scheduler(..., graph_size="
                                 f"2 * static_graph_size(ctx_compute, backward))")
            self._built = build_context(graph_size, backward=not forward_only, forward_graph=True)
            params.ctx_compute, params.inputs, params.outputs = self._built.ptr, inputs, outputs
            params.graph_size = graph_size
        elif side_effects:
            raise ValueError("side_effects are for static graphs (allocation-based ones take them in their graph)")
        # read by ggml_opt_init only
        side_effect_array = ffi.new("struct ggml_tensor *[]", list(side_effects)) if side_effects else ffi.NULL
        params.side_effects, params.n_side_effects = side_effect_array, len(side_effects)
        params.opt_period = opt_period
        params.build_type = lib.GGML_OPT_BUILD_TYPE_FORWARD if forward_only else lib.GGML_OPT_BUILD_TYPE_OPT
        self._userdata: CData | None = None
        step_params = _StepParams(optimizer) if optimizer is not None else None
        if optimizer is not None:
            self._userdata = ffi.new_handle(step_params)
            params.optimizer = optimizer.type
            params.get_opt_pars = lib.pyggml_get_optimizer_params
            params.get_opt_pars_ud = self._userdata
            params.grad_clip_norm = optimizer.global_clipnorm or 0.0
        super().__init__(lib.ggml_opt_init(params), lib.ggml_opt_free,
                         scheduler, ctx_compute, self._built, self._userdata, step_params, optimizer, *keep_alive)
        if step_params is not None:
            step_params.ctx = self.ptr
        self.scheduler, self.optimizer = scheduler, optimizer
        self.static = static is not None
        self.forward_only = forward_only
        # allocation-based graphs: the caller's context, ggml-opt's own one and keep_alive, until the next
        # prepare_alloc; ggml-opt holds the graph until the next evaluation
        self._prepared: tuple[Context, Context, object] | None = None
        self._graph_handed = False

    def prepare_alloc(self, ctx_compute: Context, graph: CData, inputs: CData, outputs: CData,
                      keep_alive: object = None) -> None:
        """Allocation-based graphs: the forward ``graph`` (a ``struct ggml_cgraph *`` in ``ctx_compute``,
        ``inputs`` not yet allocated) to allocate next; ``ctx_compute`` needs room for ``graph`` alone:
        ggml-opt builds the loss, gradient and optimizer graphs in a context of its own
        (``build_context``). ``ctx_compute`` and ``keep_alive`` are held until the next call."""
        if self.static:
            raise ValueError("prepare_alloc is for allocation-based graphs; this context has static graphs")
        # a training context's first build makes every graph, whatever alloc's `backward` says
        built = build_context(lib.ggml_graph_size(graph), backward=not self.forward_only, forward_graph=False)
        lib.ggml_opt_prepare_alloc(self.ptr, built.ptr, graph, inputs, outputs)
        self._prepared = (ctx_compute, built, keep_alive)
        self._graph_handed = True

    def alloc(self, backward: bool) -> None:
        """Build (allocation-based graphs) and allocate the graph of the next evaluation: the forward
        pass, or with ``backward`` the gradients (and every ``opt_period``-th time the optimizer step)."""
        if not self.static:
            if not self._graph_handed:
                raise ValueError("allocation-based graphs: call prepare_alloc before each alloc")
        lib.ggml_opt_alloc(self.ptr, backward)
        self._graph_handed = self.static
        # ggml_opt_alloc returns nothing: a compute buffer the backend could not allocate leaves the
        # graph's inputs without memory (static graphs report it at eval). The evaluation tries the
        # allocation again, fails as cleanly (vendor patch 0041) and leaves the context ready for the
        # next prepare_alloc.
        if not self.static and lib.ggml_opt_inputs(self.ptr).data == ffi.NULL:
            self.eval()  # raises MemoryError (GGML_STATUS_ALLOC_FAILED)
            raise MemoryError("ggml could not allocate memory to compute the graph")  # it ran, on no inputs

    def eval(self, result: Result | None = None) -> None:
        """Compute the allocated graph (GIL released); accumulate into ``result`` if given.

        A computation that fails raises (``check_status``: ValueError for an index outside its table)
        and counts for nothing: ggml-opt leaves ``result``, the iteration count and the gradient
        accumulation step as they were (vendor patch 0037); the context takes the next ``alloc``."""
        _evaluating.optimizer = self.optimizer
        try:
            with self.scheduler.compute_lock:
                status = lib.ggml_opt_eval(self.ptr, result.ptr if result is not None else ffi.NULL)
        finally:
            _evaluating.optimizer = None
        for backend in self.scheduler.backends:
            backend.computed()
        if self.optimizer is not None:
            self.optimizer.raise_pending()
        check_status(status)

    @property
    def iteration(self) -> int:
        """ggml-opt's optimizer iteration: 1 + the optimizer steps taken (1 in a fresh context)."""
        return int(lib.ggml_opt_get_iter(self.ptr))

    def moments(self, param: CData) -> tuple[CData, CData] | None:
        """AdamW's first and second moments of parameter ``param``; None without them (SGD, forward only)."""
        m, v = lib.ggml_opt_grad_m(self.ptr, param), lib.ggml_opt_grad_v(self.ptr, param)
        return None if m == ffi.NULL or v == ffi.NULL else (m, v)

    def read_state(self, params: NamedParams, copy: bool = True) -> OptimizerState:
        """The optimizer state between steps, its moments named by ``params``. ``copy=False``: the moments as read-only
        views of ggml-opt's memory where that is the host's, valid until the next training step (for
        writing them out at once: a checkpoint then adds no copy of twice the parameters to fit's memory)."""
        assert self.optimizer is not None  # a training context
        state = OptimizerState(self.optimizer.name, self.iteration)
        for name, (t, shape) in params.items():
            moments = self.moments(t)
            if moments is not None:
                state.m[name], state.v[name] = (_moment(moment, shape, copy) for moment in moments)
        return state

    def write_state(self, state: OptimizerState, params: NamedParams) -> None:
        """Put ``state`` into this context before its first step (ValueError, changing nothing, for a
        state of another optimizer or other parameters)."""
        assert self.optimizer is not None  # a training context
        state.check_fits(self.optimizer.name)
        pairs = []
        for name, (t, shape) in params.items():
            moments = self.moments(t)
            if moments is None:
                continue
            if name not in state.m or name not in state.v:
                raise ValueError(f"the checkpoint has no AdamW moments for parameter {name!r}")
            for value in (state.m[name], state.v[name]):
                if np.shape(value) != shape:
                    raise ValueError(f"the optimizer state's moments of {name!r} have shape {np.shape(value)}, "
                                     f"the parameter {shape}")
            pairs += [(moments[0], state.m[name]), (moments[1], state.v[name])]
        for t, value in pairs:
            tensor_data.set(t, value)
        lib.ggml_opt_set_iter(self.ptr, state.iter)

    @property
    def labels(self) -> CData:
        """The labels tensor (cross-entropy and mse losses), else NULL."""
        return lib.ggml_opt_labels(self.ptr)

    def close(self) -> None:
        super().close()
        self._prepared = None


def _moment(t: CData, shape: tuple[int, ...], copy: bool) -> np.ndarray:
    """An optimizer tensor as numpy: a copy, or without ``copy`` a read-only view of host memory."""
    view = None if copy else tensor_data.host_view(t, shape)
    if view is None:
        return tensor_data.get(t, len(shape))
    view.flags.writeable = False
    return view
