"""predict / evaluate: forward passes through ggml-opt's allocation-based graphs.

Each batch gets a forward graph of its own size (``ggml_opt_prepare_alloc`` / ``ggml_opt_alloc``), so
any number of samples is computed without padding and without a cached graph per batch size."""
from __future__ import annotations

from typing import Callable

import numpy as np
from numpy.typing import ArrayLike

from ..checks import check_int
from ..core import OptContext, Scheduler
from ..nn import ForwardGraph, Network, ParamStore, check_network
from .checks import check_loss, check_x, targets
from .metrics import loss_and_accuracy, sigmoid, softmax
from .session import SESSION, Session, device_of, exclusive_use, session_for


class Inference:
    """A forward-only ggml-opt context with allocation-based graphs on ``scheduler``."""

    def __init__(self, scheduler: Scheduler) -> None:
        # "sum": a loss that needs no labels; ggml-opt adds it to every graph, its value is unused
        self.opt_ctx = OptContext(scheduler, "sum", forward_only=True)

    def run(self, network: Network, store: ParamStore, xb: np.ndarray) -> np.ndarray:
        """``network``'s outputs for the batch ``xb`` (any number of samples)."""
        graph = ForwardGraph(network, store, xb.shape[0], static=False)
        self.opt_ctx.prepare_alloc(graph.ctx_compute, graph.gf, graph.inputs, graph.outputs, keep_alive=graph)
        self.opt_ctx.alloc(backward=False)
        graph.set_input(xb.reshape(graph.batch, -1))
        self.opt_ctx.eval()
        return graph.output()

    def close(self) -> None:
        self.opt_ctx.close()


def forward_all(x: np.ndarray, batch: int, run: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Outputs for every sample of ``x``, in batches of at most ``batch``."""
    return np.concatenate([run(x[start:start + batch]) for start in range(0, x.shape[0], batch)], axis=0)


def forward(network: Network, x: np.ndarray, batch_size: int, backend: str | None = None,
            n_threads: int | None = None) -> np.ndarray:
    """Raw outputs (n, n_out) of ``network`` for checked samples ``x``, on ``backend`` (default: the
    network's own). The caller holds the network's lock."""
    device = device_of(network, backend)
    current: Session | None = network.attachment(SESSION)
    if network.busy is not None and current is not None and device != current.device:
        # from a callback of fit: another backend would move the parameters fit is using
        raise ValueError(f"predict / evaluate during fit must use fit's backend {current.device!r}, got {backend!r}")
    s = session_for(network, backend, n_threads)
    if s.inference is None:
        s.inference = Inference(s.scheduler)
    inference = s.inference
    store = network.params_on(s.scheduler.main)
    try:
        return forward_all(x, batch_size, lambda xb: inference.run(network, store, xb))
    except BaseException:
        # interrupted between ggml_opt_alloc and ggml_opt_eval (Ctrl+C), the context would abort on
        # its next alloc: start the next call with a fresh one
        inference.close()
        s.inference = None
        raise


def predict(model: Network, x: ArrayLike, *, batch_size: int = 256, logits: bool | None = None,
            backend: str | None = None, n_threads: int | None = None) -> np.ndarray:
    """Model outputs for every sample of ``x`` (any n), shape (n, n_out).

    For a model trained with (or loaded as) a cross-entropy classifier the outputs are logits and
    ``predict`` returns softmax probabilities (sigmoid ones after ``binary_cross_entropy``), unless
    ``logits=True``. ``backend``: default the one
    the model last ran on (the CPU for a new model).
    """
    check_network(model)
    batch_size = check_int("batch_size", batch_size)
    x = check_x(model, x)
    model.require_built()
    with exclusive_use(model):
        out = forward(model, x, batch_size, backend, n_threads)
    to_probs = sigmoid if model.loss == "binary_cross_entropy" else softmax
    as_probs = model.loss in ("cross_entropy", "binary_cross_entropy") if logits is None else not logits
    return to_probs(out) if as_probs else out


def evaluate(model: Network, x: ArrayLike, y: ArrayLike | None = None, *, loss: str | None = None,
             batch_size: int = 256, backend: str | None = None, n_threads: int | None = None,
             return_uncertainty: bool = False) -> tuple[float, ...]:
    """(loss, accuracy) of ``model`` on ``x``, ``y``; accuracy is a fraction, NaN unless the loss is
    cross_entropy. ``loss`` defaults to the one the model was trained with. With
    ``return_uncertainty`` returns (loss, loss_unc, accuracy, accuracy_unc)."""
    check_network(model)
    loss = check_loss(loss or model.loss or "cross_entropy")
    x = check_x(model, x)
    model.require_built()
    t = targets(model, y, x.shape[0], loss)
    out = predict(model, x, batch_size=batch_size, logits=True, backend=backend, n_threads=n_threads)
    lv, lu, av, au = loss_and_accuracy(out, t, loss)
    return (lv, lu, av, au) if return_uncertainty else (lv, av)
