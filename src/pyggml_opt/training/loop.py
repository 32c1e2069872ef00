"""``fit``: numpy data in, ggml-opt training out.

How ``fit`` drives ggml-opt:
  1. x, y are checked (``checks``); x is read in place where it is C-contiguous float32 (int32 token
     ids), else copied once; class ids become one-hot label rows. The last ``validation_split`` of the
     samples (before shuffling) are held out.
  2. The network's training graph is built once for the physical batch (``TrainingSession``):
     parameters in a backend buffer, the input in a static one; ``ggml_opt_init`` adds the loss,
     gradients and optimizer (opt_period = batch_size / physical_batch_size).
  3. Each epoch visits every training sample: a seeded order (``batching.epoch_order``) is cut into
     batches; the last, partial batch is filled up with samples from the start of that order (so no
     sample is dropped and the graph keeps one batch size). Per physical batch: ``ggml_opt_alloc`` ->
     the batch's row numbers into the graph's input (on the CPU the graph's first op, GET_ROWS,
     gathers those rows from x's memory; a device gets the rows gathered on the host) and its labels
     into the label tensor -> ``ggml_opt_eval`` (GIL released).
  4. After each epoch: the train loss (± uncertainty) from the ggml-opt result, and the metrics from it
     (its accuracy) or from the outputs of the epoch's training steps (``logs.HostMetrics``, where fit
     ends the graph with its own loss); validation loss and metrics from forward passes
     (``inference``); callbacks, History.
  5. At the end (also after an error or Ctrl+C): the training graph's compute buffers are freed, then
     the optimizer state is copied to ``model.optimizer_state`` (``TrainingSession.finish``) and the
     ggml-opt context freed, so that the copy does not raise fit's peak memory.
Ctrl+C stops within one batch: the model keeps the weights of the last completed optimizer step,
``model.history`` holds the epochs completed, and KeyboardInterrupt is raised.
"""
from __future__ import annotations

import os
import time
import warnings
from typing import Iterable, Optional, Union

import numpy as np
from numpy.typing import ArrayLike

from ..checks import check_choice, check_int
from ..nn.losses import DEFAULT as DEFAULT_LOSS
from ..nn.losses import LossSpec, function_entry_name, get_loss
from ..core import OptimizerState
from ..saving import Checkpoint, load_checkpoint
from .arguments import (check_batch_sizes, check_seed, check_shuffle, check_validation_split, check_verbose,
                        check_x)
from .batching import epoch_order
from .callbacks import Callback, CallbackList, RecordHistory
from .history import History
from .inference import validate
from .logs import HostMetrics, result_logs, validation_logs
from .loss_graph import step_weights
from .metrics import Metric, Metrics
from .optimizers import Optimizer
from .optimizers import get as get_optimizer
from .plan import Batching, FitPlan, plan_fit
from .progress import Progress
from .session import TrainingSession, device_of, exclusive_use, session_for
from .trainable import Trainable, check_has_trainable, check_quantized_on_cpu, check_trainable

MAX_EPOCH_STEPS_ENV = "PYGGML_OPT_MAX_EPOCH_STEPS"


def max_epoch_steps() -> int | None:
    """``PYGGML_OPT_MAX_EPOCH_STEPS=k``: every epoch of every ``fit`` ends after ``k`` optimizer steps.

    A smoke run of a script as written, every call at its real arguments and only the training cut
    short (tests/integration/test_snippets.py runs the documentation's examples so); it reaches the worker
    processes of joblib and Dask, which inherit the environment. Warns, since a model trained so is
    not the one the script means."""
    value = os.environ.get(MAX_EPOCH_STEPS_ENV, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{MAX_EPOCH_STEPS_ENV}={value!r}: expected a number of optimizer steps >= 1")
    warnings.warn(f"{MAX_EPOCH_STEPS_ENV}={value}: each epoch of fit stops after {int(value)} optimizer steps",
                  RuntimeWarning)
    return int(value)


class FitLoop:
    """The state of one ``fit`` run: its session, plan and optimizer, and the loop itself.

    Callbacks see it as ``callback.trainer`` (``optimizer``, ``optimizer_state()``, ``metrics``,
    ``epochs``, ``n_batches``). ``callbacks`` hold fit's History (``history``) and progress display."""

    def __init__(self, model: Trainable, train: TrainingSession, plan: FitPlan, optimizer: Optimizer,
                 callbacks: CallbackList, history: History) -> None:
        self.model, self.train, self.plan, self.optimizer = model, train, plan, optimizer
        self.n_train = train.x.shape[0]
        self.n_batches = plan.batching.steps_per_epoch(self.n_train)
        self.epochs = plan.batching.epochs
        self.rng = np.random.default_rng(plan.batching.seed)
        self.callbacks, self.history = callbacks, history
        callbacks.trainer = self
        self.start_epoch = 0
        # fit's own loss graph: the metrics are computed here (ggml-opt counts an accuracy for its own loss only)
        self.host_metrics = HostMetrics(plan.metrics, plan.batching.batch_size) if plan.own_loss_graph else None

    @property
    def metrics(self) -> list[Metric]:
        """The metrics of this fit, bound to its loss."""
        return self.plan.metrics

    def optimizer_state(self, copy: bool = True) -> OptimizerState:
        """The optimizer state now (for checkpoints). ``copy=False``: the AdamW moments may be read-only
        views of the optimizer's memory, valid until the next training step (write them out at once)."""
        return self.train.read_state(copy)

    def resume(self, checkpoint: Checkpoint) -> None:
        """Continue after the checkpoint's completed epochs: restore the weights, the optimizer state
        and the history, and replay the shuffles of the epochs already done."""
        self.train.write_state(checkpoint.state)
        self.model.set_weights(checkpoint.weights)
        self.start_epoch = checkpoint.epoch
        self.history.load(checkpoint.history)
        for _ in range(checkpoint.epoch):
            epoch_order(self.rng, self.n_train, self.plan.batching.run)

    def fit(self) -> History:
        self.model.stop_training = False
        try:
            self.callbacks.on_train_begin()
            for epoch in range(self.start_epoch, self.epochs):
                self.callbacks.on_epoch_begin(epoch)
                logs = self.train_epoch(epoch)
                self.callbacks.on_epoch_end(epoch, logs)
                if self.model.stop_training:
                    break
        finally:
            self.callbacks.on_train_end()
        return self.history

    def train_epoch(self, epoch: int) -> dict:
        """One pass over the training samples, then validation; the epoch's logs."""
        t0 = time.perf_counter()
        train, plan = self.train, self.plan
        physical, metrics = plan.batching.physical, plan.metrics
        order = epoch_order(self.rng, self.n_train, plan.batching.run)
        order = order[np.arange(self.n_batches * physical) % self.n_train]  # a last partial batch wraps around
        # the row numbers as the in-graph gather reads them, once per epoch; the labels are gathered per
        # batch (a copy of all label rows in epoch order would stay in memory through the epoch)
        rows = order.astype(np.int32) if train.gathers_in_graph else None
        weights = None
        if plan.own_loss_graph:  # per epoch: the weights are divided by their sum over each step
            weights = step_weights(plan.weights[order] if plan.weights is not None else np.ones(len(order)),
                                   plan.batching.batch_size)
        train.result.reset()
        if self.host_metrics is not None:
            self.host_metrics.reset()
        # dropout masks: a generator of their own per epoch, so that a resumed fit draws the same ones
        seed = plan.batching.seed
        masks = np.random.default_rng(None if seed is None else (seed, epoch))
        for ib in range(self.n_batches):
            b = slice(ib * physical, (ib + 1) * physical)
            train.opt_ctx.alloc(backward=True)
            if rows is not None:
                train.x_writer.copy(rows[b])
            else:
                train.x_writer.gather(train.x, order[b])
            if weights is not None:
                assert train.y_writer is not None  # fit's own loss graph has a label tensor
                train.y_writer.copy(train.label_batch(order[b], weights[b]))
            elif train.y_writer is not None:
                assert train.targets is not None  # a label tensor comes with targets
                train.y_writer.gather(train.targets, order[b])
            for key, writer in train.step_writers.items():
                writer.copy(self.model.fill_step_input(key, masks, writer.buf.shape))
            train.opt_ctx.eval(train.result)
            if train.graph.readable:  # the session made them readable for fit's metrics
                assert self.host_metrics is not None and train.targets is not None  # metrics need targets
                self.host_metrics.add(train.graph.output(), train.targets[order[b]])
            if self.callbacks.needs_batch_logs:
                self.callbacks.on_batch_end(ib, result_logs(train.result, metrics, self.host_metrics))
            if self.model.stop_training:
                break
        logs = result_logs(train.result, metrics, self.host_metrics)
        val = None
        if plan.validation is not None:
            xv, yv, wv = plan.validation
            val = validate(self.model, xv, yv, plan.loss, metrics, physical, weights=wv)
        logs.update(validation_logs(val, metrics))
        logs["time"] = time.perf_counter() - t0
        logs["lr"] = self.optimizer.last_lr
        return logs


def check_resumed_metrics(history: dict, metrics: list[Metric]) -> None:
    """ValueError unless a checkpoint's history (``History.to_dict``) has the metrics this fit reports:
    its lists go on with this fit's logs."""
    names = {k for k in history.get("history", {}) if not k.startswith("val_") and not k.endswith("_unc")}
    names -= {"time", "lr"}
    want = {"loss", *(m.name for m in metrics)}
    if names and names != want:
        raise ValueError(f"the checkpoint's history has the metrics {sorted(names)}, this fit reports {sorted(want)}: "
                         "resume with the same metrics=")


# fit's validation_data: (x_val, y_val) or, with weights, (x_val, y_val, sample_weight_val)
ValidationData = Union[tuple[ArrayLike, Optional[ArrayLike]], tuple[ArrayLike, Optional[ArrayLike], Optional[ArrayLike]]]

def fit(model: Trainable, x: ArrayLike, y: ArrayLike | None = None, *, epochs: int = 1, batch_size: int = 32,
        physical_batch_size: int | None = None, validation_split: float = 0.0,
        validation_data: ValidationData | None = None, loss: LossSpec = DEFAULT_LOSS,
        optimizer: Optimizer | str = "adamw", shuffle: bool | int | str = True, seed: int | None = 0,
        backend: str | None = None, n_threads: int | None = None, verbose: int | str = 1,
        callbacks: Iterable[Callback] = (), resume_from: str | os.PathLike[str] | None = None, gather: str = "auto",
        sample_weight: ArrayLike | None = None, class_weight: dict | None = None,
        optimizer_state: OptimizerState | None = None, metrics: Metrics = None) -> History:
    """Train ``model`` on numpy data with ggml-opt.

    x: (n, *input_shape) numbers (float64 and ints are converted to float32). A C-contiguous float32
       array (int32 token ids) is read in place, as torch.from_numpy shares it: no copy of the data
       is made, so do not change x while fit runs. A language model also trains on sequences (n, T)
       shorter than its context (T from 1 to the context), on a graph built for that length.
    y: the targets, as the loss takes them (``pyggml_opt.nn.losses``, where each loss is defined): class
       ids (n,) or one-hot/probability rows (n, n_out) for cross-entropy (the default), token ids (n, T)
       for sequence outputs (-100 for no target; int32 ids are read in place a batch at a time, as x:
       a file's mapping of them trains without being loaded); float rows (n, n_out) for mse, mae,
       huber, and in [0, 1] for binary_cross_entropy (on logits, as PyTorch's BCEWithLogitsLoss);
       ignored for mean and sum (the model output is the loss). The losses are PyTorch's, each a mean over samples.
    loss: a loss name, a ``pgo.Loss`` object (a class of your own registered with ``pgo.register_loss``),
       or a loss function ``fn(outputs, labels) -> Tensor`` built with ``pgo.ops``
       from the outputs (n, *output_shape) and the label rows (n, k) of ``y`` (float rows; a column
       (n,) becomes (n, 1)), returning per-sample losses (n,) or (n, 1), or a scalar (the batch's
       mean: then no sample_weight). It is tried on a graph before training (an error, a result that is
       not a Tensor or has another shape is a ValueError / TypeError naming it); every step minimises
       the mean (weighted: the weighted mean) of its batch's losses, and validation and ``evaluate``
       compute it in the forward graph. Model files and checkpoints name the function but cannot hold
       it: pass it again to ``evaluate`` after ``pgo.load``, and to ``fit`` with ``resume_from``.
    metrics: metric names or ``pgo.Metric`` objects (``training/metrics.py``): "accuracy",
       "top_k_accuracy" (``pgo.TopKAccuracy(k)`` for another k), "mae", "mse"; History then has
       each name and "val_" + name, with their "_unc" uncertainties. Default: the accuracy (NaN
       unless the loss is on classes or binary labels). A metric that does not fit the loss
       (top_k_accuracy for mse, mae for cross-entropy) is a ValueError. Training values come from the
       outputs of the epoch's training steps (before each step's update), validation values from
       forward passes after the epoch; metrics other than the accuracy make fit end the training graph
       with its own loss (as sample_weight does) to read those outputs. Metrics are unweighted.
    batch_size: samples per optimizer step; physical_batch_size: samples per graph evaluation
       (default batch_size; must divide it: gradients are accumulated over batch_size / physical).
       A batch_size above the number of training samples is cut to it (as Keras and PyTorch do), and
       the physical batch with it where it no longer divides the batch.
    validation_split: fraction in [0, 1) of the samples, taken from the end before shuffling, held
       out for validation (with their sample_weight); or validation_data=(x_val, y_val) or (x_val,
       y_val, sample_weight_val) (as Keras's). The validation loss is weighted where weights are given.
    shuffle: True: a new order of the training samples every epoch; False: their order as given;
       an int k > 1 (or "batch": k = batch_size): runs of k consecutive samples in a new order every
       epoch, as ggml's ``ndata_shard`` (ggml's mnist-train uses 10). Coarser, but each batch is
       copied in longer runs: on Fashion-MNIST's MLP here an epoch is ~2 % faster with 10.
    optimizer: pgo.AdamW(...), pgo.SGD(...) or "adamw"/"sgd". seed: weight init (if the model is not
       built yet) and shuffling. backend: "cpu", "cuda", "cuda:1", "metal", "gpu" or a ggml device
       name; default the backend the model last ran on, else the CPU.
    verbose: 0 silent, 1 (or "auto") progress bar, which becomes one line per epoch when the output is
       not a terminal, 2 one line per epoch. callbacks: Callback objects.
    resume_from: a checkpoint written by ``ModelCheckpoint``: weights, optimizer state and the epoch
       count are restored and training continues up to ``epochs`` in total, exactly as if it had not
       stopped (same data, seed and hyperparameters).
    gather: how a batch gets into the graph. "graph": the training graph gathers its rows from x's
       memory itself (GET_ROWS; host backends only); "host": numpy gathers the rows per batch (the
       labels are gathered per batch either way); "auto" (default): "graph" where the
       backend's memory is the host's. Both train bit-identically.
    sample_weight: (n,) weights >= 0, one per sample of x; class_weight: {class id: weight} for
       cross_entropy (classes not named weigh 1). Each optimizer step then minimises the weighted mean
       loss of its batch (weights divided by their sum over the batch; a weight of 0 removes a
       sample). Metrics stay unweighted.
    optimizer_state: continue from this optimizer state (AdamW moments, step count), such as
       ``model.optimizer_state``, which every fit leaves on the model; default a fresh optimizer.
    Environment: ``PYGGML_OPT_MAX_EPOCH_STEPS=k`` ends every epoch after k optimizer steps (with a
       RuntimeWarning), to smoke-run a script at its own settings (tests/integration/test_snippets.py).
    Returns a History (also stored as ``model.history``).
    """
    check_trainable(model)
    resolved = get_loss(loss)
    epochs = check_int("epochs", epochs, 0)
    batch_size, physical = check_batch_sizes(batch_size, physical_batch_size)
    verbose = check_verbose(verbose)
    validation_split = check_validation_split(validation_split, validation_data)
    batching = Batching(epochs, batch_size, physical, check_shuffle(shuffle, batch_size), check_seed(seed),
                        check_choice("gather", gather, ("auto", "graph", "host")), max_epoch_steps())
    opt = get_optimizer(optimizer)
    history = History()
    # fit's own first, as Keras's: History records an epoch before the user's callbacks see it
    callback_list = CallbackList([RecordHistory(history), Progress(verbose), *callbacks], model, None)  # the loop: their trainer
    if resume_from is not None and optimizer_state is not None:
        raise ValueError("give resume_from or optimizer_state, not both")
    if optimizer_state is not None and not isinstance(optimizer_state, OptimizerState):
        raise TypeError(f"optimizer_state must be a model's optimizer_state, got {type(optimizer_state).__name__}")

    # all of it: the shape too if built (a language model's sequences may be shorter than its
    # context), else the build below takes x's shape
    x = check_x(model, x, shorter=True)
    model.ensure_built(model.input_shape or x.shape[1:], batching.seed)
    checkpoint = load_checkpoint(resume_from, model) if resume_from is not None else None
    if checkpoint is not None:
        function_name = function_entry_name(checkpoint.loss)
        if function_name is not None and function_entry_name(resolved.entry) is None:
            raise ValueError(f"{resume_from!s} was trained with the loss function {function_name!r}, which a "
                             "checkpoint cannot hold: pass it again as loss=")
    plan = plan_fit(model, x, y, resolved, metrics, (sample_weight, class_weight), batching,
                    (validation_split, validation_data))
    if checkpoint is not None:
        check_resumed_metrics(checkpoint.history, plan.metrics)

    with exclusive_use(model):
        model.check_not_busy("fit")  # fit from one of this fit's callbacks (the lock is re-entrant)
        # under the lock: set_weights may change which parameters are quantized
        check_quantized_on_cpu(model, device_of(model, backend))
        check_has_trainable(model)
        session = session_for(model, backend, n_threads)
        model.busy = "fit is running"
        train = None
        try:
            train = TrainingSession.create(model, session, plan, opt)
            loop = FitLoop(model, train, plan, opt, callback_list, history)
            if checkpoint is not None:
                loop.resume(checkpoint)
            elif optimizer_state is not None:
                train.write_state(optimizer_state)
            model.loss = loss
            return loop.fit()
        finally:
            model.busy = None
            if train is not None:
                # kept with the weights it belongs to, also after Ctrl+C (copies and pickles carry it)
                model.optimizer_state = train.finish()
