"""predict / evaluate: forward passes, through graphs cached per batch size or allocation-based ones.

Without a loss function (predict, evaluate with a loss name, fit's validation) a batch size asked for
again gets a static forward-only graph built once and kept by the session (``forward_cache``: the two
most recently used sizes, such as a loop's full batches and its remainder); per batch only the input
is written, the graph computed and the outputs read. Other batches (a size's first use, or any batch
for a loss evaluated in the graph, such as a loss function: ``fit(loss=fn)``) get a forward graph of their own size through ggml-opt's
allocation-based graphs (``ggml_opt_prepare_alloc`` / ``ggml_opt_alloc``), which for a loss function
also computes the loss of each sample, from label rows given beside the input."""
from __future__ import annotations

from typing import Iterator, Literal, Sequence, overload

import numpy as np
from numpy.typing import ArrayLike

from ..checks import check_int
from ..core import OptContext, OptLoss, Scheduler, tensor_data
from ..nn import AllocGraph, Network, ParamStore
from ..nn.losses import DEFAULT, Loss, LossSpec, find_loss, get_loss, softmax
from .arguments import check_x, sample_weights, targets
from .logs import EvaluationLogs
from .metrics import Metric, Metrics, get_metrics
from .session import device_of, exclusive_use, session_for
from .trainable import Trainable, check_trainable


class Inference:
    """A forward-only ggml-opt context with allocation-based graphs on ``scheduler``: any batch size,
    a graph built per batch (a loss function's batches, and a batch size's first use)."""

    def __init__(self, scheduler: Scheduler) -> None:
        # SUM: a loss that needs no labels; ggml-opt adds it to every graph, its value is unused
        self.opt_ctx = OptContext(scheduler, OptLoss.SUM, forward_only=True)

    def run(self, network: Network, store: ParamStore, xb: np.ndarray, yb: np.ndarray | None = None,
            loss: Loss | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """``network``'s outputs for the batch ``xb`` (any number of samples) and, given a loss evaluated
        in the graph and label rows ``yb``, its loss per sample (each the batch's loss if it returns a
        scalar)."""
        n = xb.shape[0]
        graph = AllocGraph(network, store, n, sample_shape=xb.shape[1:])
        labels = per = None
        if loss is not None:
            assert yb is not None  # labels come with the loss
            labels = graph.new_input(yb.shape, "labels")
            per = graph.add_output(loss.per_sample(graph.out, labels, {}))
        self.opt_ctx.prepare_alloc(graph.ctx_compute, graph.gf, graph.inputs, graph.outputs, keep_alive=graph)
        self.opt_ctx.alloc(backward=False)
        graph.set_input(xb.reshape(graph.batch, -1))
        if labels is not None:
            assert yb is not None  # given with the loss
            tensor_data.set(labels.ptr, yb.astype(np.float32, copy=False))  # token ids may come as int32
        self.opt_ctx.eval()
        losses = None if per is None else np.broadcast_to(tensor_data.get(per.ptr, per.ndim).ravel(), (n,))
        return graph.output(), losses

    def close(self) -> None:
        self.opt_ctx.close()


def forward_batches(network: Trainable, x: np.ndarray, batch_size: int, backend: str | None = None,
                    n_threads: int | None = None, labels: np.ndarray | None = None,
                    loss: Loss | None = None) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
    """Raw outputs (b, n_out) of ``network`` for checked samples ``x``, batch by batch of ``batch_size``
    (the last one shorter), on ``backend`` (default: the network's own), and for a loss evaluated in the
    graph with label rows ``labels`` the loss per sample. The caller holds the network's lock."""
    device = device_of(network, backend)
    current = network.session
    if network.busy is not None and current is not None and device != current.device:
        # from a callback of fit or between a stream's tokens: another backend would move the parameters in use
        raise ValueError(f"predict / evaluate while {network.busy} must use its backend {current.device!r}, got {backend!r}")
    s = session_for(network, backend, n_threads)
    store = network.params_on(s.scheduler.main)
    try:
        for start in range(0, x.shape[0], batch_size):
            b = slice(start, start + batch_size)
            xb = x[b]
            # a batch size that comes again (this loop's next batch, or a later call's: the second
            # use) runs on a graph cached for it, and only there (one compute buffer, not two); a
            # StaticForward interrupted between alloc and eval closes itself
            again = x.shape[0] - start >= 2 * xb.shape[0]
            cached = (s.forwards.get(network, store, xb.shape[0], first_use=again, sample_shape=xb.shape[1:])
                      if loss is None else None)
            if cached is not None:
                yield cached.run(xb), None
                continue
            if s.inference is None:
                s.inference = Inference(s.scheduler)
            yield s.inference.run(network, store, xb, None if labels is None else labels[b], loss)
    except BaseException:
        # interrupted between ggml_opt_alloc and ggml_opt_eval (Ctrl+C), the context would abort on
        # its next alloc: start the next call with a fresh one
        if s.inference is not None:
            s.inference.close()
            s.inference = None
        raise


def forward(network: Trainable, x: np.ndarray, batch_size: int, backend: str | None = None,
            n_threads: int | None = None) -> np.ndarray:
    """Raw outputs (n, n_out) of ``network`` for checked samples ``x`` (``forward_batches``, joined)."""
    outputs = [out for out, _ in forward_batches(network, x, batch_size, backend, n_threads)]
    return outputs[0] if len(outputs) == 1 else np.concatenate(outputs, axis=0)


def predict(model: Trainable, x: ArrayLike, *, batch_size: int = 256, logits: bool | None = None,
            backend: str | None = None, n_threads: int | None = None) -> np.ndarray:
    """Model outputs for every sample of ``x`` (any n), shape (n, n_out); for a language model, whose
    samples are sequences of ids, of any length from 1 to its context: (n, length, vocab_size), the
    logits at every position (a prompt need not fill the window).

    For a model trained with (or loaded as) a cross-entropy classifier the outputs are logits and
    ``predict`` returns softmax probabilities (sigmoid ones after ``binary_cross_entropy``), unless
    ``logits=True``; after a loss function, the raw outputs. ``backend``: default the one
    the model last ran on (the CPU for a new model).
    """
    check_trainable(model)
    batch_size = check_int("batch_size", batch_size)
    x = check_x(model, x, shorter=True)
    model.require_built()
    with exclusive_use(model):
        out = forward(model, x, batch_size, backend, n_threads)
    loss = find_loss(model.loss)
    as_probs = (loss is not None and loss.logits) if logits is None else not logits
    if not as_probs:
        return out
    return loss.probabilities(out) if loss is not None else softmax(out)


def validate(model: Trainable, x: np.ndarray, t: np.ndarray | None, loss: Loss, metrics: Sequence[Metric],
             batch_size: int, backend: str | None = None, n_threads: int | None = None,
             weights: np.ndarray | None = None) -> dict[str, float]:
    """The loss (weighted by ``weights``, one per sample, where given) and ``metrics`` (bound ``Metric``
    objects) of ``model`` on checked samples ``x`` and targets ``t``, batch by batch: the logs of
    evaluate and of fit's validation. The caller holds the network's lock."""
    in_graph = loss if loss.in_graph else None
    logs = EvaluationLogs(loss, metrics, weighted=weights is not None)
    start = 0
    for out, per in forward_batches(model, x, batch_size, backend, n_threads, t if in_graph is not None else None,
                                    in_graph):
        b = slice(start, start + out.shape[0])
        start = b.stop
        logs.add(out, t[b] if t is not None else None, per, weights[b] if weights is not None else None)
    return logs.logs()


@overload
def evaluate(model: Trainable, x: ArrayLike, y: ArrayLike | None = None, *, loss: LossSpec | None = None,
             metrics: Metrics = None, batch_size: int = 256, backend: str | None = None, n_threads: int | None = None,
             return_uncertainty: bool = False, return_dict: Literal[False] = False,
             sample_weight: ArrayLike | None = None) -> tuple[float, ...]: ...


@overload
def evaluate(model: Trainable, x: ArrayLike, y: ArrayLike | None = None, *, loss: LossSpec | None = None,
             metrics: Metrics = None, batch_size: int = 256, backend: str | None = None, n_threads: int | None = None,
             return_uncertainty: bool = False, return_dict: Literal[True],
             sample_weight: ArrayLike | None = None) -> dict[str, float]: ...


def evaluate(model: Trainable, x: ArrayLike, y: ArrayLike | None = None, *, loss: LossSpec | None = None,
             metrics: Metrics = None, batch_size: int = 256, backend: str | None = None, n_threads: int | None = None,
             return_uncertainty: bool = False, return_dict: bool = False,
             sample_weight: ArrayLike | None = None) -> tuple[float, ...] | dict[str, float]:
    """The loss and the metrics of ``model`` on ``x``, ``y``.

    loss: a loss name or a loss function (``fit``'s ``loss``); default the one the model was trained
       with (a loss function is not kept in model files: pass it again after ``pgo.load``). The loss
       is the mean over samples (of tokens for sequence outputs, in nats for cross_entropy), weighted
       by ``sample_weight`` (n,) where given, as fit weighs its steps' losses (for token ids with
       ignored targets, the counts of the others give the mean over the tokens); metrics stay unweighted.
    metrics: as ``fit``'s: metric names or ``Metric`` objects; default the accuracy (a fraction, NaN
       unless the loss is cross_entropy or binary_cross_entropy).
    Returns a tuple: (loss, accuracy) by default, else (loss, *metrics) in the order given; with
    ``return_uncertainty`` each value is followed by its uncertainty, (loss, loss_unc, accuracy,
    accuracy_unc, ...). With ``return_dict`` a dict of the same values by name instead: "loss",
    the metrics' names, and with ``return_uncertainty`` their "_unc" entries (as fit's logs).
    """
    check_trainable(model)
    resolved = get_loss(loss or model.loss or DEFAULT)
    batch_size = check_int("batch_size", batch_size)
    x = check_x(model, x, shorter=True)
    model.require_built()
    output_shape = model.output_shape_for(tuple(x.shape[1:]))
    t = targets(model, y, x, resolved)
    resolved.check(output_shape, None if t is None else t.shape[1])
    bound = get_metrics(metrics, resolved, output_shape, None if t is None else t.shape[1:])
    weights = sample_weights(sample_weight, None, t, x.shape[0], resolved)
    with exclusive_use(model):
        logs = validate(model, x, t, resolved, bound, batch_size, backend, n_threads, weights)
    if not return_uncertainty:
        logs = {k: v for k, v in logs.items() if not k.endswith("_unc")}
    return logs if return_dict else tuple(logs.values())
