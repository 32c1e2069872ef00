"""Where a network runs: its ``Session`` (the scheduler of one backend, kept on the network between
calls) and, while ``fit`` runs, a ``TrainingSession`` (the ggml-opt context, the training graph, the
training samples and their buffers)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..core import (GRAPH_SIZE, ArrayBuffer, NamedParams, OptContext, OptimizerState, OptLoss, Result, Scheduler,
                    device_name, static_graph_size)
from ..nn import Network, ParamStore, StaticGraph, check_backward
from ..nn.losses import Loss
from .batching import BatchWriter
from .forward_cache import ForwardCache
from .loss_graph import weighted_loss
from .optimizers import Optimizer
from .plan import FitPlan
from .trainable import Trainable


class CachedInference(Protocol):
    """What a session keeps for predict / evaluate (``inference.Inference``, which imports this module)."""

    def run(self, network: Network, store: ParamStore, xb: np.ndarray, yb: np.ndarray | None = None,
            loss: Loss | None = None) -> tuple[np.ndarray, np.ndarray | None]: ...
    def close(self) -> None: ...


class Session:
    """The scheduler that runs a network's graphs on one backend (the CPU as fallback), the inference
    context cached for it (evaluate with a loss function) and the forward graphs cached by batch size
    (predict, evaluate without a loss function, generate; each on a scheduler of its own over the same
    backends). Kept as the model's ``session``: freed by ``close()`` or with it."""

    def __init__(self, device: str, n_threads: int | None) -> None:
        self.scheduler = Scheduler.for_device(device, n_threads)
        self.device = self.scheduler.main.device_name
        self.inference: CachedInference | None = None  # made on first use
        self.forwards = ForwardCache(self.scheduler.backends)

    def set_n_threads(self, n_threads: int) -> None:
        for b in self.scheduler.backends:
            b.set_n_threads(n_threads)

    def close(self) -> None:
        if self.inference is not None:
            self.inference.close()
            self.inference = None
        self.forwards.close()
        self.scheduler.close()


def device_of(network: Network, backend: str | None) -> str:
    """The ggml device name for ``backend``; None means the backend the network last ran on, or the CPU."""
    if backend is None:
        return network.backend or "CPU"
    return device_name(backend)


def session_for(network: Trainable, backend: str | None, n_threads: int | None) -> Session:
    """The model's session on ``backend`` (made, replacing one on another backend, if needed)."""
    device = device_of(network, backend)
    s = network.session
    if not isinstance(s, Session) or s.device != device:
        if s is not None:
            s.close()
        s = Session(device, n_threads)
        network.session = s
    elif n_threads is not None:
        s.set_n_threads(n_threads)
    network.backend = device
    return s


class exclusive_use:  # noqa: N801 - used as a function: ``with exclusive_use(model):``
    """Hold the network's lock (``nn.use_lock.UseLock``) for one call: a call of another thread waits
    for its turn (ggml's contexts are not thread-safe), a callback inside fit's thread goes on
    (re-entrant). A class, not a generator-based context manager: predict at batch 1 takes tens of
    microseconds, and a generator's setup is a measurable part of that (benchmarks/CPU_SPEED.md)."""

    def __init__(self, network: Network) -> None:
        self.network = network

    def __enter__(self) -> Network:
        self.network.lock.acquire()
        return self.network

    def __exit__(self, *exc_info: object) -> None:
        self.network.lock.release()


@dataclass
class TrainingSession:
    """Everything ``fit`` allocates for one run, freed together by ``close()``.

    ``x`` holds the training samples, one row each (the user's array itself when it is C-contiguous
    with the input's dtype, else the one copy); ``targets`` their targets (the plan's: token ids as
    given), from which each batch's label rows are made (``label_batch``). ``graph`` is the static
    training graph for one physical batch; on a host backend it gathers its batch from ``x`` itself,
    in place (its input is the batch's row numbers; ``rows`` is the tensor over x's memory).
    ``scheduler`` is dedicated: ggml-opt tracks which graph is allocated on it, and predict /
    evaluate called from a callback must not disturb that."""

    x: np.ndarray
    targets: np.ndarray | None
    rows: ArrayBuffer | None
    graph: StaticGraph
    scheduler: Scheduler
    opt_ctx: OptContext
    result: Result
    x_writer: BatchWriter
    y_writer: BatchWriter | None
    gathers_in_graph: bool   # the graph's input is row numbers, gathered by GET_ROWS
    own_loss_graph: bool     # the label rows end with the sample's weight; the loss is fit's own (loss_graph.py)
    # the graph's step inputs (dropout masks), filled anew for every physical batch
    step_writers: dict[str, BatchWriter] = field(default_factory=dict)
    # one batch of label rows for fit's own loss graph: the targets, then the weight column
    label_rows: np.ndarray | None = None

    @classmethod
    def create(cls, network: Trainable, session: Session, plan: FitPlan, optimizer: Optimizer) -> "TrainingSession":
        """Build the training graph and the ggml-opt context for ``plan``'s physical batch over its
        training samples, read in place where they are C-contiguous with the input's dtype (else copied
        once, as rows)."""
        sample_shape = tuple(plan.x.shape[1:])
        n, ne_x = plan.x.shape[0], int(np.prod(sample_shape))
        x = np.ascontiguousarray(plan.x.reshape(n, ne_x), dtype=network.input_dtype)
        width = plan.label_width
        main = session.scheduler.main
        gather, physical = plan.batching.gather, plan.batching.physical
        if gather == "graph" and not main.is_cpu:
            raise ValueError(f"gather='graph' needs the CPU backend (the graph reads the samples' host memory), "
                             f"got {main.device_name}")
        in_graph = gather != "host" and main.is_cpu and n < 2**31  # row numbers are int32
        rows = ArrayBuffer(x) if in_graph else None
        store = network.params_on(main)
        own = plan.own_loss_graph
        graph = StaticGraph(network, store, physical, rows_of=rows.tensor if rows is not None else None,
                            labels_width=width if own else None, training=True, sample_shape=sample_shape,
                            readable=own and bool(plan.metrics),  # fit's metrics read them on the host
                            constants=plan.loss.graph_constants(network.output_shape_for(sample_shape))
                            if own else None)
        outputs = graph.outputs
        if own:
            assert graph.labels is not None  # made for labels_width
            outputs = weighted_loss(graph.out, graph.labels, plan.loss, graph.constants).ptr
        check_backward(outputs)
        # room for the nodes and leaves of ggml-opt's graphs, whatever the model's depth (vendor patch 0044)
        scheduler = Scheduler(session.scheduler.backends, max(GRAPH_SIZE, 2 * static_graph_size(graph.ctx_compute)))
        opt_loss = OptLoss.SUM if own else plan.loss.opt_loss
        assert opt_loss is not None  # a loss without ggml-opt's type takes fit's own loss graph (plan_fit)
        opt_ctx = OptContext(scheduler, opt_loss, optimizer, static=(graph.ctx_compute, graph.inputs, outputs),
                             opt_period=plan.batching.batch_size // physical, keep_alive=(graph, rows),
                             side_effects=graph.side_effects)
        if own:
            assert graph.labels is not None  # made for labels_width
            labels = graph.labels.ptr
        else:
            labels = opt_ctx.labels if plan.targets is not None else None
        return cls(x, plan.targets, rows, graph, scheduler, opt_ctx, Result(),
                   BatchWriter(graph.inputs, (physical,) if in_graph else (physical, ne_x)),
                   BatchWriter(labels, (physical, width)) if labels is not None else None, in_graph, own,
                   {key: BatchWriter(t.ptr, t.shape) for key, t in graph.step_inputs.items()},
                   np.empty((physical, width), np.float32) if own else None)

    def label_batch(self, idx: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """The label rows of fit's own loss graph for the samples ``idx``: their targets (converted to
        float32 here, a batch at a time: token ids stay as given, in place) and their ``weights``."""
        assert self.label_rows is not None and self.targets is not None  # made for the own loss graph
        self.label_rows[:, :-1] = self.targets[idx]
        self.label_rows[:, -1] = weights
        return self.label_rows

    def read_state(self, copy: bool = True) -> OptimizerState:
        """The optimizer state between steps (``OptContext.read_state``; ``copy=False``: read-only views
        valid until the next training step)."""
        return self.opt_ctx.read_state(self._params(), copy)

    def write_state(self, state: OptimizerState) -> None:
        """Continue from ``state``: put it into this fresh ggml-opt context (before its first step)."""
        self.opt_ctx.write_state(state, self._params())

    def _params(self) -> NamedParams:
        return {name: (t.ptr, t.shape) for name, t in self.graph.store.tensors.items()}

    def finish(self) -> OptimizerState:
        """Free everything, returning the optimizer state read on the way: after the training graph's
        compute buffers are freed (the ggml-opt context is not evaluated again), so that its copy (twice
        the parameters' size, with AdamW) never adds to them at the end of fit."""
        try:
            self.scheduler.close()
            return self.read_state()
        finally:
            self.close()

    def close(self) -> None:
        for owner in (self.result, self.opt_ctx, self.scheduler, self.graph, self.rows):
            if owner is not None:
                owner.close()
