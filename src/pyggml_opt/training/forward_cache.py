"""Forward graphs built once and evaluated many times: predict's (without a loss function) and generate's.

A ``StaticForward`` is a network's forward graph for one batch size as a static forward-only ggml-opt
context: per evaluation only the input is written, the graph computed and the outputs read (building
the graph layer by layer in Python took more time than computing it for small models at batch 1).
Each has a scheduler of its own over the session's backends (sharing their thread pools): ggml-opt
skips re-allocating a graph it allocated last on its scheduler (``allocated_graph``), so two contexts
on one scheduler would overwrite each other's allocations. A session keeps a few of them, by batch
size, in a ``ForwardCache``. A graph too small to be worth waking a pool's workers for
(``SMALL_GRAPH_FLOP``: mnist-fc or mnist-cnn at batch 1 or 2) runs on the session's thread pool only
while graphs come less than ``POLLING_S`` apart (a loop of predicts: the workers poll between them),
and else on a CPU backend of one thread without a pool, computing in the calling thread: waking
sleeping workers costs more than such a graph's work, and workers that wait for a core taken by other
processes cost far more (benchmarks/CPU_SPEED.md, "Measurements behind design choices"). Such a graph
is built a second time for the one thread when needed (``StaticForward.one_thread``). predict builds
one for a batch size only when that size comes again, in the same call (its next batch) or in a later
one (building a static graph costs several evaluations: a caller whose every call has a new number of
samples keeps ggml-opt's allocation-based graphs, built per batch, as before). A call of several full
batches runs them all on the cached graph: one compute buffer (fit's validation: the first batch on an
allocation-based graph kept a second buffer of the size of the cached one).
"""
from __future__ import annotations

from collections import OrderedDict, deque

import numpy as np

from ..core import GRAPH_SIZE, POLLING_S, Backend, OptContext, OptLoss, Scheduler, static_graph_size
from ..nn import Network, ParamStore, StaticGraph

CACHED_SIZES = 2  # batch sizes kept per session: a loop's full batches and its remainder
# ~25-50 us of one core's work, what waking a pool's sleeping workers costs on an idle machine
SMALL_GRAPH_FLOP = 2_000_000
SEEN_SIZES = 8    # the batch sizes last asked for without a cached graph (``get(first_use=False)``)


class StaticForward:
    """``network``'s forward graph for ``batch`` samples over the parameters in ``store``, as a static
    forward-only ggml-opt context on a scheduler of its own over ``backends`` (the store's first).
    It reads the parameters at every evaluation, so it sees weights changed in place (fit, set_weights)."""

    def __init__(self, network: Network, store: ParamStore, batch: int, backends: list[Backend],
                 sample_shape: tuple[int, ...] | None = None) -> None:
        self.batch, self.store = batch, store
        self._pending = False
        # the same graph on one thread without a pool (small graphs, built by ForwardCache when needed)
        self.one_thread: StaticForward | None = None
        self.graph = StaticGraph(network, store, batch, readable=True, sample_shape=sample_shape)
        try:
            # too small to be worth waking a pool's workers for (ForwardCache.get)
            self.small = backends[0].is_cpu and self.graph.flop() < SMALL_GRAPH_FLOP
            self.scheduler = Scheduler(backends, max(GRAPH_SIZE, 2 * static_graph_size(self.graph.ctx_compute,
                                                                                      backward=False)))
            # SUM: a loss that needs no labels; ggml-opt adds it to every graph, its value is unused
            self.opt_ctx = OptContext(self.scheduler, OptLoss.SUM, static=(self.graph.ctx_compute, self.graph.inputs,
                                                                     self.graph.outputs),
                                      forward_only=True, keep_alive=[self.graph])
        except BaseException:
            self.close()
            raise

    @property
    def usable(self) -> bool:
        """Open, and not left between ``ggml_opt_alloc`` and ``ggml_opt_eval`` (where ggml-opt's next
        alloc would abort: an interrupted or failed ``run``)."""
        return not self._pending and hasattr(self, "opt_ctx") and not self.opt_ctx.closed

    def run(self, xb: np.ndarray) -> np.ndarray:
        """The outputs (a copy) for the batch ``xb`` of exactly ``batch`` samples."""
        # set first: a KeyboardInterrupt (Ctrl+C) may land at any bytecode, the except clause included
        self._pending = True
        try:
            self.opt_ctx.alloc(backward=False)
            self.graph.set_input(xb)
            self.opt_ctx.eval()
        except BaseException:
            self.close()  # free it now; the cache builds a fresh one
            raise
        self._pending = False
        return self.graph.output()

    def close(self) -> None:
        """Free the context, its scheduler and the graph, and the one-thread copy (idempotent; not the
        parameters)."""
        for name in ("one_thread", "opt_ctx", "scheduler", "graph"):
            owner = getattr(self, name, None)
            if owner is not None:
                owner.close()


class ForwardCache:
    """The ``StaticForward`` graphs of one session's network, by batch size and sample shape (a language
    model's sequence length): the ``size`` most recently used, all over one parameter store (graphs over
    another one are dropped when asked for it)."""

    def __init__(self, backends: list[Backend], size: int = CACHED_SIZES) -> None:
        self.backends, self.size = backends, size
        self._graphs: OrderedDict[tuple[int, tuple[int, ...]], StaticForward] = OrderedDict()
        self._seen: deque[tuple[int, tuple[int, ...]]] = deque(maxlen=SEEN_SIZES)
        self._single: Backend | None = None  # the one-thread CPU backend of small graphs, made when needed

    def _single_thread(self) -> Backend:
        if self._single is None or self._single.closed:
            self._single = Backend("cpu", 1)
        return self._single

    def _graphs_come_often(self) -> bool:
        # a graph ran on the session's backend or the one-thread one less than POLLING_S ago: the
        # pool's workers still poll, or are worth waking once (they then poll between the calls)
        backends = [self.backends[0]] + ([self._single] if self._single is not None else [])
        return min(b.idle_s for b in backends) < POLLING_S

    def get(self, network: Network, store: ParamStore, batch: int, first_use: bool = True,
            sample_shape: tuple[int, ...] | None = None) -> StaticForward | None:
        """The graph of ``network`` for ``batch`` samples of ``sample_shape`` (default its input shape)
        over ``store``, built if not cached; with ``first_use=False`` None instead when that batch size
        and shape were not asked for lately (not worth building).
        A small graph comes on one thread unless the session's thread pool polls (graphs came less than
        ``POLLING_S`` ago); with pools off (``PYGGML_OPT_THREAD_POOL=0``) always."""
        if any(g.store is not store for g in self._graphs.values()):
            # the network's parameters were replaced (rebuilt, moved to another backend and back):
            # graphs over the old store would read freed memory
            self.close()
        assert network.input_shape is not None  # built by the caller
        key = (batch, network.input_shape if sample_shape is None else sample_shape)
        graph = self._graphs.get(key)
        if graph is not None and not graph.usable:  # interrupted during a run
            graph.close()
            del self._graphs[key]
            graph = None
        if graph is None:
            if not first_use and key not in self._seen:
                self._seen.append(key)
                return None
            while len(self._graphs) >= self.size:
                self._graphs.popitem(last=False)[1].close()
            graph = self._graphs[key] = StaticForward(network, store, batch, self.backends, key[1])
        self._graphs.move_to_end(key)
        main = self.backends[0]
        if not graph.small or main.n_threads == 1 or (main.pooled and self._graphs_come_often()):
            return graph
        if graph.one_thread is None or not graph.one_thread.usable:
            if graph.one_thread is not None:
                graph.one_thread.close()
            graph.one_thread = StaticForward(network, store, batch, [self._single_thread()], key[1])
        return graph.one_thread

    def run(self, network: Network, store: ParamStore, xb: np.ndarray) -> np.ndarray:
        """``network``'s outputs for the batch ``xb`` (its first axis: the batch size), on a cached graph."""
        graph = self.get(network, store, xb.shape[0])
        assert graph is not None  # built on first use
        return graph.run(xb)

    def __len__(self) -> int:
        return len(self._graphs)

    def close(self) -> None:
        """Free every cached graph and the one-thread backend (the cache stays usable)."""
        while self._graphs:
            self._graphs.popitem()[1].close()
        if self._single is not None:
            self._single.close()
            self._single = None
