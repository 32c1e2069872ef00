"""fit / evaluate / predict: numpy data in, ggml-opt training out.

How ``fit`` drives ggml-opt (see DESIGN.md, "fit(), as data flows"):
  1. x, y are validated and written once into a ``ggml_opt_dataset`` (float32; class ids become
     one-hot rows). The last ``validation_split`` of the samples (before shuffling) are held out.
  2. The model's graph is built once for the physical batch: parameters and the input in statically
     allocated buffers, the forward graph in a compute context; ``ggml_opt_init`` adds the loss,
     gradients and optimizer (opt_period = batch_size / physical_batch_size).
  3. Each epoch visits every training sample: a seeded permutation is cut into batches; the last,
     partial batch is filled up with samples from the start of the permutation (so no sample is
     dropped and the graph keeps one batch size). Per physical batch: ``ggml_opt_alloc`` -> the
     batch's row numbers into the graph's input (on the CPU the graph's first op, GET_ROWS, gathers
     those rows from the dataset; a device gets the rows gathered on the host) and
     its labels into the label tensor -> ``ggml_opt_eval`` (GIL released).
  4. After each epoch: train loss/accuracy (± uncertainty) from the ggml-opt result, validation
     metrics from a forward pass, callbacks, History.
Ctrl+C stops within one batch: the model keeps the weights of the last completed optimizer step,
``model.history`` holds the epochs completed, and KeyboardInterrupt is raised.
"""
from __future__ import annotations

import math
import sys
import time
from typing import Callable, Iterable

import numpy as np

from ._lib import ffi, lib
from .core import LOSS_TYPES, Buffer, Context, OptContext, Result, Scheduler
from .core import tensor_data
from .nn.model import Model
from .nn.tensor import Tensor, new_input
from .optim import Optimizer
from .optim import get as get_optimizer

GRAPH_SIZE = 16384
# On the CPU, fit's graph gathers each batch from the dataset itself (GET_ROWS). A switch only so that
# tests can compare it with the host-side gather every other backend uses.
_GATHER_IN_GRAPH = True
# fit gathers the labels of a whole epoch at once (in batch order) when they take at most this much.
_EPOCH_LABELS_MAX_BYTES = 32 << 20

# ggml ops with a backward pass (ggml.c, ggml_compute_backward at 0.15.3).
_BACKWARD_OPS = {
    "NONE", "DUP", "ADD", "ADD1", "ACC", "SUB", "MUL", "DIV", "SQR", "SQRT", "LOG", "SIN", "COS", "SUM",
    "SUM_ROWS", "MEAN", "REPEAT", "REPEAT_BACK", "RMS_NORM", "MUL_MAT", "SCALE", "SET", "CPY", "CONT",
    "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE", "GET_ROWS", "DIAG_MASK_INF", "DIAG_MASK_ZERO", "SOFT_MAX",
    "ROPE", "IM2COL", "POOL_2D", "CROSS_ENTROPY_LOSS",
}
_BACKWARD_UNARY = {"ABS", "SGN", "NEG", "STEP", "RELU", "SILU", "EXP", "EXPM1", "SOFTPLUS"}
_BACKWARD_GLU = {"SWIGLU"}


# ---- validation ---------------------------------------------------------------------------------------
def _as_float_array(name: str, x) -> np.ndarray:
    if x is None:
        raise ValueError(f"{name} is required")
    try:
        arr = np.asarray(x)
    except Exception as exc:  # noqa: BLE001
        raise TypeError(f"{name} must be array-like: {exc}") from None
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers, got dtype {arr.dtype}")
    return arr


def _check_x(model: Model, x, name: str = "x") -> np.ndarray:
    arr = _as_float_array(name, x)
    if arr.ndim < 2:
        raise ValueError(f"{name} must have a batch axis first: shape (n, features...), got {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    if arr.ndim > 4:
        raise ValueError(f"{name} has {arr.ndim} axes; at most 4 (n, channels, height, width) are supported")
    if model.built and tuple(arr.shape[1:]) != model.input_shape:
        raise ValueError(f"{name} has samples of shape {tuple(arr.shape[1:])}, the model expects {model.input_shape}")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or inf")
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 4 and np.abs(arr).max() > np.finfo(np.float32).max:
        # ggml computes in float32: such values would become inf there and every weight NaN
        raise ValueError(f"{name} contains values beyond float32's range (about ±3.4e38)")
    return arr


def _targets(model: Model, y, n: int, loss: str, name: str = "y") -> np.ndarray | None:
    """Targets as float32 rows (n, n_out); None for the 'mean' and 'sum' losses (no labels)."""
    n_out = model.output_shape[0]
    if loss in ("mean", "sum"):
        return None
    arr = _as_float_array(name, y)
    if arr.shape[0] != n:
        raise ValueError(f"x and {name} have different lengths: {n} and {arr.shape[0]}")
    if loss == "cross_entropy" and arr.ndim == 1:
        if arr.dtype.kind == "f":
            if not np.isfinite(arr).all() or (arr != np.round(arr)).any():
                raise ValueError(f"{name}: class ids must be integers")
        ids = arr.astype(np.int64)
        if ids.min() < 0 or ids.max() >= n_out:
            raise ValueError(f"{name}: class ids must be in [0, {n_out}) for a model with {n_out} outputs, "
                             f"got range [{ids.min()}, {ids.max()}]")
        onehot = np.zeros((n, n_out), np.float32)
        onehot[np.arange(n), ids] = 1.0
        return onehot
    if arr.ndim == 1 and n_out == 1:
        arr = arr.reshape(n, 1)
    if arr.shape != (n, n_out):
        raise ValueError(f"{name} must have shape ({n}, {n_out}) for a model with {n_out} outputs"
                         f"{' (or class ids of shape (n,))' if loss == 'cross_entropy' else ''}, got {arr.shape}")
    arr = arr.astype(np.float32, copy=False)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or inf")
    if loss == "cross_entropy" and ((arr < 0).any() or not np.allclose(arr.sum(axis=1), 1.0, atol=1e-3)):
        raise ValueError(f"{name}: cross_entropy targets must be one-hot or probability rows (>= 0, summing to 1)")
    return arr


def _check_int(name: str, v, lo: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    return int(v)


def _check_loss(loss: str) -> str:
    if not isinstance(loss, str) or loss not in LOSS_TYPES:
        raise ValueError(f"unknown loss {loss!r}; expected one of {sorted(LOSS_TYPES)}")
    return loss


def check_backward(outputs) -> None:
    """Raise ValueError naming the first op on a parameter's path that ggml cannot differentiate."""
    seen: set = set()
    needs: dict = {}
    stack = [outputs]
    order = []
    while stack:  # iterative post-order over the tensor DAG
        t = stack.pop()
        key = int(ffi.cast("uintptr_t", t))
        if key in seen:
            continue
        seen.add(key)
        order.append(t)
        for i in range(lib.GGML_MAX_SRC):
            if t.src[i] != ffi.NULL:
                stack.append(t.src[i])
    changed = True  # propagate "needs a gradient" from parameters to their users until stable
    while changed:
        changed = False
        for t in order:
            key = int(ffi.cast("uintptr_t", t))
            if needs.get(key):
                continue
            n = bool(t.flags & lib.GGML_TENSOR_FLAG_PARAM) or any(
                t.src[i] != ffi.NULL and needs.get(int(ffi.cast("uintptr_t", t.src[i])), False)
                for i in range(lib.GGML_MAX_SRC))
            if n:
                needs[key] = True
                changed = True
    if not any(t.flags & lib.GGML_TENSOR_FLAG_PARAM for t in order):
        # ggml_build_backward_expand asserts (aborts) on a graph without parameters
        raise ValueError("the model's output does not depend on any trainable parameter: nothing to train")
    for t in order:
        if not needs.get(int(ffi.cast("uintptr_t", t))) or t.op == lib.GGML_OP_NONE:
            continue
        op = ffi.string(lib.ggml_op_name(t.op)).decode()
        if t.op == lib.GGML_OP_UNARY:
            u = ffi.string(lib.ggml_unary_op_name(lib.ggml_get_unary_op(t))).decode()
            if u not in _BACKWARD_UNARY:
                raise ValueError(f"ggml has no backward pass for the unary op {u} (used on a trainable path); "
                                 "use the composed versions in pyggml_opt.ops (sigmoid, tanh, gelu, layer_norm)")
        elif t.op == lib.GGML_OP_GLU:
            g = ffi.string(lib.ggml_glu_op_name(lib.ggml_get_glu_op(t))).decode()
            if g not in _BACKWARD_GLU:
                raise ValueError(f"ggml has no backward pass for the GLU op {g} (used on a trainable path)")
        elif op not in _BACKWARD_OPS:
            raise ValueError(f"ggml has no backward pass for the op {op} (used on a trainable path); "
                             "build it from differentiable ops (see pyggml_opt.ops)")
        elif t.op == lib.GGML_OP_MEAN:
            # ggml's MEAN backward adds its gradient with ggml_add1, which asserts a scalar: it aborts
            # when the input also gets a gradient from another user (x - mean(x), as in layer_norm)
            src = int(ffi.cast("uintptr_t", t.src[0]))
            users = sum(1 for u in order if needs.get(int(ffi.cast("uintptr_t", u))) and any(
                u.src[i] != ffi.NULL and int(ffi.cast("uintptr_t", u.src[i])) == src for i in range(lib.GGML_MAX_SRC)))
            if users > 1:
                raise ValueError("ggml's backward pass for MEAN (ggml_mean) fails when its input has other users "
                                 "on a trainable path; use pyggml_opt.ops.mean (sum_rows * 1/n) instead")


# ---- graphs -------------------------------------------------------------------------------------------
class _ForwardGraph:
    """The model's forward graph for a fixed batch size, with a statically allocated input.

    With ``rows_of`` (a dataset's data tensor, ``[ne_datapoint, ndata]``, in host memory) the input
    is instead a vector of ``batch`` row numbers (int32) and the graph starts by gathering those rows
    (GET_ROWS): the batch is copied inside ggml's compute instead of by numpy in fit's loop.
    """

    def __init__(self, model: Model, backend, batch: int, rows_of=None) -> None:
        self.batch = batch
        self.store = model.params_on(backend)
        self.ctx_static = Context(1)
        self.ctx_compute = Context(GRAPH_SIZE, graph_size=GRAPH_SIZE, grads=True)
        shape = (batch, *model.input_shape)
        if rows_of is None:
            inp = new_input(self.ctx_static, shape, "input").ptr
        else:
            inp = lib.ggml_new_tensor_1d(self.ctx_static.ptr, lib.GGML_TYPE_I32, batch)
            lib.ggml_set_name(inp, b"batch_rows")
        self.buf_static = Buffer(self.ctx_static, backend)
        self.inputs = inp
        lib.ggml_set_input(self.inputs)
        if rows_of is None:
            x_ptr = self.inputs
        else:
            rows = lib.ggml_get_rows(self.ctx_compute.ptr, rows_of, self.inputs)
            x_ptr = lib.ggml_reshape_4d(self.ctx_compute.ptr, rows, *tensor_data.ne_of(shape))
        x = Tensor(x_ptr, self.ctx_compute, self.ctx_compute, len(shape))
        out = model.forward(x, self.store.tensors)
        if out.shape != (batch, *model.output_shape):
            raise ValueError(f"the model produced outputs of shape {out.shape}, expected {(batch, *model.output_shape)}")
        if out.ptr.type != lib.GGML_TYPE_F32:
            raise ValueError("the model's output must be float32")
        if not lib.ggml_is_contiguous(out.ptr):
            out = Tensor(lib.ggml_cont(self.ctx_compute.ptr, out.ptr), self.ctx_compute, self.ctx_compute, out.ndim)
        self.outputs = out.ptr
        lib.ggml_set_name(self.outputs, b"outputs")
        lib.ggml_set_output(self.outputs)

    def set_input(self, xb: np.ndarray) -> None:
        tensor_data.set(self.inputs, xb)

    def close(self) -> None:
        self.buf_static.close()
        self.ctx_static.close()
        self.ctx_compute.close()


class _Predictor:
    """A forward graph plus its own scheduler, cached on the model for predict / evaluate."""

    def __init__(self, model: Model, scheduler: Scheduler, batch: int) -> None:
        self.scheduler = scheduler
        self.graph = _ForwardGraph(model, scheduler.main, batch)
        self.gf = lib.ggml_new_graph_custom(self.graph.ctx_compute.ptr, GRAPH_SIZE, False)
        lib.ggml_build_forward_expand(self.gf, self.graph.outputs)
        self.key = (scheduler.main.device_name, batch, id(model._store))

    def run(self, xb: np.ndarray) -> np.ndarray:
        self.graph.set_input(xb)
        self.scheduler.compute(self.gf)
        return tensor_data.get(self.graph.outputs, 2)

    def close(self) -> None:
        self.graph.close()


def output_shape_of(model: Model, input_shape) -> tuple[int, ...]:
    """Build the model's graph for one sample on the CPU (no data) to learn its output shape."""
    ctx = Context(GRAPH_SIZE)
    ctx_p = Context(max(1, len(model.param_shapes)))
    try:
        params = {}
        for name, shape in model.param_shapes.items():
            params[name] = new_input(ctx_p, shape, name)
            params[name].ctx = None
        x = new_input(ctx, (1, *input_shape))
        out = model.forward(x, params)
        return out.shape[1:]
    finally:
        ctx.close()
        ctx_p.close()


# ---- sessions: scheduler per model and device ----------------------------------------------------------
# A model's scheduler and cached forward graph live on the model itself (``model._session``), so they
# are freed with it: a global registry would keep every model ever used alive.
def _session(model: Model, backend: str, n_threads: int | None) -> dict:
    s = getattr(model, "_session", None)
    if s is None or s["backend"] != backend:
        if s is not None:
            release(model)
        sched = Scheduler.for_device(backend, n_threads)
        s = {"backend": backend, "sched": sched, "predictor": None}
        model._session = s
    if n_threads is not None:
        for b in s["sched"].backends:
            b.set_n_threads(n_threads)
    return s


def release(model: Model) -> None:
    """Free the scheduler and cached graphs held for ``model``."""
    s = getattr(model, "_session", None)
    model._session = None
    if s:
        if s["predictor"] is not None:
            s["predictor"].close()
        s["sched"].close()


def _predictor(model: Model, s: dict, batch: int) -> _Predictor:
    p = s["predictor"]
    store = model.params_on(s["sched"].main)
    if p is None or p.key != (s["sched"].main.device_name, batch, id(store)):
        if p is not None:
            p.close()
        p = s["predictor"] = _Predictor(model, s["sched"], batch)
    return p


# ---- History and callbacks -------------------------------------------------------------------------------
class History:
    """Per-epoch metrics of a ``fit``: ``history`` maps a metric name to a list (one value per epoch).

    Names: loss, loss_unc, accuracy, accuracy_unc, val_loss, val_loss_unc, val_accuracy,
    val_accuracy_unc, time (seconds), lr. Accuracies are fractions in [0, 1]; NaN where undefined.
    """

    def __init__(self) -> None:
        self.epoch: list[int] = []
        self.history: dict[str, list[float]] = {}

    def append(self, epoch: int, logs: dict) -> None:
        self.epoch.append(epoch)
        for k, v in logs.items():
            self.history.setdefault(k, []).append(v)

    def __getitem__(self, key: str) -> list[float]:
        return self.history[key]

    def __repr__(self) -> str:
        return f"History(epochs={len(self.epoch)}, keys={sorted(self.history)})"


class Callback:
    """Hooks called by ``fit``. Set ``model.stop_training = True`` to stop after the current batch."""

    def on_train_begin(self, model: Model) -> None: ...
    def on_epoch_begin(self, model: Model, epoch: int) -> None: ...
    def on_batch_end(self, model: Model, batch: int, logs: dict) -> None: ...
    def on_epoch_end(self, model: Model, epoch: int, logs: dict) -> None: ...
    def on_train_end(self, model: Model) -> None: ...


class LambdaCallback(Callback):
    """Callback from plain functions: on_batch_end(model, batch, logs), on_epoch_end(model, epoch, logs)."""

    def __init__(self, on_batch_end: Callable | None = None, on_epoch_end: Callable | None = None) -> None:
        self._batch, self._epoch = on_batch_end, on_epoch_end

    def on_batch_end(self, model, batch, logs):
        if self._batch:
            self._batch(model, batch, logs)

    def on_epoch_end(self, model, epoch, logs):
        if self._epoch:
            self._epoch(model, epoch, logs)


def _monitor_mode(monitor: str, mode: str) -> str:
    if mode not in ("auto", "min", "max"):
        raise ValueError(f"mode must be 'auto', 'min' or 'max', got {mode!r}")
    if mode == "auto":
        return "max" if "acc" in monitor else "min"
    return mode


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved by more than ``min_delta`` for ``patience`` epochs;
    with ``restore_best_weights`` the weights of the best epoch are put back at the end."""

    def __init__(self, monitor: str = "val_loss", patience: int = 0, min_delta: float = 0.0,
                 restore_best_weights: bool = False, mode: str = "auto") -> None:
        self.monitor, self.patience = monitor, _check_int("patience", patience, 0)
        self.min_delta = abs(float(min_delta))
        self.restore_best_weights = restore_best_weights
        self.mode = _monitor_mode(monitor, mode)

    def on_train_begin(self, model):
        self.best, self.best_epoch, self.wait, self.best_weights, self.stopped_epoch = None, None, 0, None, None

    def _improved(self, value: float) -> bool:
        if self.best is None:
            return True
        return value < self.best - self.min_delta if self.mode == "min" else value > self.best + self.min_delta

    def on_epoch_end(self, model, epoch, logs):
        if self.monitor not in logs or math.isnan(logs[self.monitor]):
            raise ValueError(f"EarlyStopping monitors {self.monitor!r}, which fit does not report here; "
                             f"available: {sorted(k for k, v in logs.items() if not math.isnan(v))}")
        value = logs[self.monitor]
        if self._improved(value):
            self.best, self.best_epoch, self.wait = value, epoch, 0
            if self.restore_best_weights:
                self.best_weights = model.get_weights()
        else:
            self.wait += 1
            if self.wait > self.patience:
                self.stopped_epoch = epoch
                model.stop_training = True

    def on_train_end(self, model):
        if self.restore_best_weights and self.best_weights is not None:
            model.set_weights(self.best_weights)


class ModelCheckpoint(Callback):
    """Save the model as GGUF after each epoch (``path`` may contain ``{epoch}``), or only when
    ``monitor`` improved with ``save_best_only``. With ``save_optimizer`` (default) the file is a
    training checkpoint (``pyggml_opt.checkpoint``): ``fit(..., resume_from=path)`` continues from it
    exactly; ``pgo.load`` reads it as a model."""

    def __init__(self, path, monitor: str = "val_loss", save_best_only: bool = False, mode: str = "auto",
                 save_optimizer: bool = True) -> None:
        self.path, self.monitor, self.save_best_only = str(path), monitor, save_best_only
        self.save_optimizer = save_optimizer
        self.mode = _monitor_mode(monitor, mode)
        self.best = None
        self.saved: list[str] = []

    def on_epoch_end(self, model, epoch, logs):
        if self.save_best_only:
            value = logs.get(self.monitor, float("nan"))
            if math.isnan(value):
                raise ValueError(f"ModelCheckpoint monitors {self.monitor!r}, which fit does not report here")
            better = self.best is None or (value < self.best if self.mode == "min" else value > self.best)
            if not better:
                return
            self.best = value
        path = self.path.format(epoch=epoch + 1)
        trainer = getattr(model, "_trainer", None)
        if self.save_optimizer and trainer is not None:
            from .checkpoint import read_state, save_checkpoint
            save_checkpoint(model, path, epoch + 1, read_state(*trainer))
        else:
            model.save(path)
        self.saved.append(path)


# ---- progress ---------------------------------------------------------------------------------------------
def _fmt(logs: dict, prefix: str = "") -> str:
    parts = []
    for key in ("loss", "accuracy"):
        v, u = logs.get(prefix + key, float("nan")), logs.get(prefix + key + "_unc", float("nan"))
        if math.isnan(v):
            continue
        if key == "accuracy":
            parts.append(f"{prefix}acc {100 * v:.2f}±{100 * u:.2f}%")
        else:
            parts.append(f"{prefix}loss {v:.5f}±{u:.5f}")
    return "  ".join(parts)


class _Progress:
    def __init__(self, verbose: int, epochs: int, nbatches: int, stream=None) -> None:
        self.verbose, self.epochs, self.nbatches = verbose, epochs, nbatches
        self.stream = stream or sys.stdout
        self.last = 0.0

    def batch(self, epoch: int, ibatch: int, logs: dict, t0: float) -> None:
        if self.verbose != 1:
            return
        now = time.perf_counter()
        if ibatch + 1 < self.nbatches and now - self.last < 0.1:
            return
        self.last = now
        done = (ibatch + 1) / self.nbatches
        eta = (now - t0) / done * (1 - done)
        bar = "=" * int(25 * done) + ">" + " " * (25 - int(25 * done))
        self.stream.write(f"\repoch {epoch + 1}/{self.epochs} [{bar[:26]}] {ibatch + 1}/{self.nbatches}  "
                          f"{_fmt(logs)}  ETA {eta:.1f}s ")
        self.stream.flush()

    def epoch(self, epoch: int, logs: dict) -> None:
        if self.verbose == 0:
            return
        line = (f"epoch {epoch + 1}/{self.epochs}  {_fmt(logs)}  {_fmt(logs, 'val_')}  {logs['time']:.2f}s").rstrip()
        self.stream.write(("\r" if self.verbose == 1 else "") + line + " " * 10 + "\n")
        self.stream.flush()


# ---- fit ---------------------------------------------------------------------------------------------------
def _loss_and_accuracy(outputs: np.ndarray, targets: np.ndarray | None, loss: str) -> tuple[float, float, float, float]:
    """(loss, loss_unc, accuracy, accuracy_unc) over samples, as ggml-opt defines them."""
    n = outputs.shape[0]
    if loss == "cross_entropy":
        z = outputs - outputs.max(axis=1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        per = -(targets * logp).sum(axis=1)
        correct = (outputs.argmax(axis=1) == targets.argmax(axis=1)).astype(np.float64)
        acc = correct.mean()
        acc_unc = math.sqrt(acc * (1 - acc) / (n - 1)) if n > 1 else float("nan")
    elif loss == "mse":
        per = ((outputs - targets) ** 2).mean(axis=1)
        acc = acc_unc = float("nan")
    else:
        per = outputs.mean(axis=1) if loss == "mean" else outputs.sum(axis=1)
        acc = acc_unc = float("nan")
    value = per.mean() if loss != "sum" else per.sum()
    unc = per.std(ddof=1) / math.sqrt(n) if n > 1 else float("nan")
    if loss == "sum":
        unc *= n
    return float(value), float(unc), float(acc), float(acc_unc)


def fit(model: Model, x, y=None, *, epochs: int = 1, batch_size: int = 32, physical_batch_size: int | None = None,
        validation_split: float = 0.0, validation_data=None, loss: str = "cross_entropy",
        optimizer: Optimizer | str = "adamw", shuffle: bool | int | str = True, seed: int | None = 0,
        backend: str = "cpu", n_threads: int | None = None, verbose: int = 1,
        callbacks: Iterable[Callback] = (), resume_from=None) -> History:
    """Train ``model`` on numpy data with ggml-opt.

    x: (n, *input_shape) numbers (float64 and ints are converted to float32).
    y: class ids (n,) or one-hot/probability rows (n, n_out) for ``loss="cross_entropy"``; float rows
       (n, n_out) for ``"mse"``; ignored for ``"mean"`` and ``"sum"`` (the model output is the loss).
    batch_size: samples per optimizer step; physical_batch_size: samples per graph evaluation
       (default batch_size; must divide it: gradients are accumulated over batch_size / physical).
    validation_split: fraction in [0, 1) of the samples, taken from the end before shuffling, held
       out for validation; or validation_data=(x_val, y_val).
    shuffle: True: a new order of the training samples every epoch; False: their order as given;
       an int k > 1 (or "batch": k = batch_size): runs of k consecutive samples in a new order every
       epoch, as ggml's ``ndata_shard`` (ggml's mnist-train uses 10). Coarser, but each batch is
       copied in longer runs: on Fashion-MNIST's MLP here an epoch is ~2 % faster with 10.
    optimizer: pgo.AdamW(...), pgo.SGD(...) or "adamw"/"sgd". seed: weight init (if the model is not
       built yet) and shuffling. backend: "cpu", "cuda", "metal", "gpu" or a ggml device name.
    verbose: 0 silent, 1 progress bar, 2 one line per epoch. callbacks: Callback objects.
    resume_from: a checkpoint written by ``ModelCheckpoint``: weights, optimizer state and the epoch
       count are restored and training continues up to ``epochs`` in total, exactly as if it had not
       stopped (same data, seed and hyperparameters).
    Returns a History (also stored as ``model.history``).
    """
    if not isinstance(model, Model):
        raise TypeError(f"model must be a pyggml_opt model, got {type(model).__name__}")
    loss = _check_loss(loss)
    epochs = _check_int("epochs", epochs, 0)
    batch_size = _check_int("batch_size", batch_size)
    physical = _check_int("physical_batch_size", physical_batch_size if physical_batch_size is not None else batch_size)
    if batch_size % physical:
        raise ValueError(f"batch_size ({batch_size}) must be a multiple of physical_batch_size ({physical})")
    if verbose not in (0, 1, 2):
        raise ValueError(f"verbose must be 0, 1 or 2, got {verbose!r}")
    if not isinstance(validation_split, (int, float)) or isinstance(validation_split, bool) \
            or not 0.0 <= validation_split < 1.0:
        raise ValueError(f"validation_split must be in [0, 1), got {validation_split!r}")
    if validation_split and validation_data is not None:
        raise ValueError("give validation_split or validation_data, not both")
    run = _check_shuffle(shuffle, batch_size)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
        raise ValueError(f"seed must be a non-negative int or None, got {seed!r}")
    opt = get_optimizer(optimizer)
    callbacks = list(callbacks or [])
    for cb in callbacks:
        if not isinstance(cb, Callback):
            raise TypeError(f"callbacks must be Callback objects, got {type(cb).__name__}")

    x = _check_x(model, x)
    model._ensure_built(x.shape[1:], seed)
    x = _check_x(model, x)
    n = x.shape[0]
    targets = _targets(model, y, n, loss)
    resume = None
    if resume_from is not None:
        from .checkpoint import load_checkpoint
        weights, start_epoch, state = load_checkpoint(resume_from, model)
        if state.optimizer != opt.name:
            raise ValueError(f"the checkpoint was trained with {state.optimizer!r}, this fit uses {opt.name!r}")
        model.set_weights(weights)
        resume = (start_epoch, state)

    n_val = int(n * validation_split)
    n_train = n - n_val
    if n_train < 1:
        raise ValueError(f"validation_split={validation_split} leaves no training samples out of {n}")
    val = None
    if n_val:
        val = (x[n_train:], targets[n_train:] if targets is not None else None)
    elif validation_data is not None:
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) != 2:
            raise ValueError("validation_data must be a pair (x_val, y_val)")
        xv = _check_x(model, validation_data[0], "validation_data[0]")
        val = (xv, _targets(model, validation_data[1], xv.shape[0], loss, "validation_data[1]"))

    if not model._lock.acquire(blocking=False):
        raise RuntimeError("this model is already being trained or run in another thread; "
                           "use one model per thread")
    try:
        model._check_not_fitting("fit")  # fit from one of this fit's callbacks (the lock is re-entrant)
        model._fitting = backend
        try:
            return _fit_locked(model, x, targets, n_train, val, loss, opt, epochs, batch_size, physical,
                               run, seed, backend, n_threads, verbose, callbacks, resume)
        finally:
            model._fitting = None
    finally:
        model._lock.release()


def _fit_locked(model, x, targets, n_train, val, loss, opt, epochs, batch_size, physical, run, seed,
                backend, n_threads, verbose, callbacks, resume) -> History:
    from .core import Dataset
    s = _session(model, backend, n_threads)
    sched = s["sched"]
    ne_x = int(np.prod(model.input_shape))
    n_out = model.output_shape[0]

    # 1. the training samples, written once into the ggml dataset (the one copy of the user's data)
    dataset = Dataset(ne_x, n_out if targets is not None else 0, n_train)
    dataset.data[...] = x[:n_train].reshape(n_train, ne_x)
    if targets is not None:
        dataset.labels[...] = targets[:n_train]

    # 2. graphs, built once for the physical batch. On the CPU the graph gathers each batch from the
    # dataset itself (its memory is the CPU's); a device gets the batch copied into its input.
    gather_in_graph = _GATHER_IN_GRAPH and sched.main.is_cpu and n_train < 2**31  # row numbers are int32
    graph = _ForwardGraph(model, sched.main, physical, dataset.data_tensor if gather_in_graph else None)
    graph.store.mark_trainable()
    check_backward(graph.outputs)
    # A dedicated scheduler: ggml-opt tracks which graph is allocated on it, and predict / evaluate
    # called from a callback must not disturb that.
    train_sched = Scheduler(sched.backends)
    opt_ctx = OptContext(train_sched, graph.ctx_compute, graph.inputs, graph.outputs, loss, opt,
                         opt_period=batch_size // physical, keep_alive=(graph,))
    result = Result()
    labels_t = opt_ctx.labels if targets is not None else None
    start_epoch = 0
    if resume is not None:
        from .checkpoint import write_state
        start_epoch, state = resume
        write_state(opt_ctx, graph.store, opt, state)
    model._trainer = (opt_ctx, graph.store, opt)  # for callbacks that checkpoint the optimizer state

    history = History()
    model.history = history
    model.loss = loss
    model.stop_training = False
    rng = np.random.default_rng(seed)
    for _ in range(start_epoch):  # replay the shuffles of the epochs already done
        _epoch_order(rng, n_train, run)
    n_steps = -(-n_train // batch_size)
    n_phys = n_steps * (batch_size // physical)
    x_writer = _BatchWriter(graph.inputs, (physical,) if gather_in_graph else (physical, ne_x))
    y_writer = _BatchWriter(labels_t, (physical, n_out)) if targets is not None else None
    progress = _Progress(verbose, epochs, n_phys)
    for cb in callbacks:
        cb.on_train_begin(model)
    try:
        for epoch in range(start_epoch, epochs):
            for cb in callbacks:
                cb.on_epoch_begin(model, epoch)
            t0 = time.perf_counter()
            perm = _epoch_order(rng, n_train, run)
            order = perm[np.arange(n_phys * physical) % n_train]  # a last partial batch wraps around
            # Once per epoch rather than per batch: the row numbers as the in-graph gather reads them,
            # and small labels in batch order, so that each batch copies contiguous rows.
            rows = order.astype(np.int32) if gather_in_graph else None
            labels = (np.take(dataset.labels, order, axis=0)
                      if y_writer is not None and order.size * n_out * 4 <= _EPOCH_LABELS_MAX_BYTES else None)
            result.reset()
            for ib in range(n_phys):
                b = slice(ib * physical, (ib + 1) * physical)
                opt_ctx.alloc(backward=True)
                if rows is not None:
                    x_writer.copy(rows[b])
                else:
                    x_writer.write(dataset.data, order[b])
                if labels is not None:
                    y_writer.copy(labels[b])
                elif y_writer is not None:
                    y_writer.write(dataset.labels, order[b])
                opt_ctx.eval(result)
                if callbacks or verbose == 1:
                    logs = _result_logs(result)
                    progress.batch(epoch, ib, logs, t0)
                    for cb in callbacks:
                        cb.on_batch_end(model, ib, logs)
                if model.stop_training:
                    break
            logs = _result_logs(result)
            if val is not None:
                # ggml-opt computes a copy of the graph (static graphs), so the outputs are read
                # from a forward graph of our own that shares the parameters.
                pred = _predictor(model, s, physical)
                out = _forward_all(val[0], physical, pred.run)
                v = _loss_and_accuracy(out, val[1], loss)
                logs.update(val_loss=v[0], val_loss_unc=v[1], val_accuracy=v[2], val_accuracy_unc=v[3])
            else:
                logs.update(val_loss=float("nan"), val_loss_unc=float("nan"),
                            val_accuracy=float("nan"), val_accuracy_unc=float("nan"))
            logs["time"] = time.perf_counter() - t0
            logs["lr"] = opt._last_lr if opt._last_lr is not None else float("nan")
            history.append(epoch, logs)
            progress.epoch(epoch, logs)
            for cb in callbacks:
                cb.on_epoch_end(model, epoch, logs)
            if model.stop_training:
                break
    finally:
        model._trainer = None
        result.close()
        opt_ctx.close()
        train_sched.close()
        graph.close()
        dataset.close()
        for cb in callbacks:
            cb.on_train_end(model)
    return history


def _check_shuffle(shuffle, batch_size: int) -> int:
    """fit's ``shuffle`` as the length of the runs of consecutive samples it shuffles (0: none)."""
    if isinstance(shuffle, (bool, np.bool_)):
        return int(shuffle)
    if not isinstance(shuffle, (str, int, np.integer)):
        raise TypeError(f"shuffle must be a bool, 'batch' or a positive int, got {type(shuffle).__name__}")
    if shuffle == "batch":
        return batch_size
    if isinstance(shuffle, str) or shuffle < 1:
        raise ValueError(f"shuffle must be True, False, 'batch' or a positive int, got {shuffle!r}")
    return int(shuffle)


def _epoch_order(rng: np.random.Generator, n: int, run: int) -> np.ndarray:
    """An epoch's order of samples 0..n-1: runs of ``run`` consecutive samples (the last one may be
    shorter) in random order; ``run`` 1 is a plain permutation, 0 keeps the order."""
    if run == 0:
        return np.arange(n)
    if run == 1:
        return rng.permutation(n)
    starts = rng.permutation(-(-n // run)) * run
    order = (starts[:, None] + np.arange(run)).ravel()
    return order[order < n]


class _BatchWriter:
    """Writes gathered rows into one input tensor per batch: straight into its memory when that is host
    memory (as ggml-opt's own ggml_opt_dataset_get_batch does), else through a staging array.

    The numpy view of the tensor is made again only when ggml_opt_alloc moved the tensor (its data or
    buffer pointer changed), not for every batch."""

    def __init__(self, t, shape: tuple[int, ...]):
        self.t = t
        self.buf = np.empty(shape, tensor_data.np_dtype(t))
        self._where = None
        self._view = None

    def _target(self) -> np.ndarray | None:
        where = (int(ffi.cast("uintptr_t", self.t.data)), int(ffi.cast("uintptr_t", self.t.buffer)))
        if where != self._where:
            self._view = tensor_data.host_view(self.t, self.buf.shape)
            self._where = where
        return self._view

    def write(self, src: np.ndarray, idx: np.ndarray) -> None:
        """Rows ``idx`` of ``src`` into the tensor."""
        view = self._target()
        if view is not None:
            np.take(src, idx, axis=0, out=view, mode="clip")  # "raise" gathers into a temporary first
        else:
            np.take(src, idx, axis=0, out=self.buf, mode="clip")
            tensor_data.set(self.t, self.buf)

    def copy(self, rows: np.ndarray) -> None:
        """``rows`` (already in batch order) into the tensor."""
        view = self._target()
        if view is not None:
            view[...] = rows
        else:
            tensor_data.set(self.t, rows)


def _result_logs(result: Result) -> dict:
    lv, lu = result.loss()
    av, au = result.accuracy()
    return {"loss": lv, "loss_unc": lu, "accuracy": av, "accuracy_unc": au}


def _forward_all(x: np.ndarray, batch: int, run: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Outputs for every sample of x, in batches of ``batch``; the last batch is zero-padded and the
    padding's outputs dropped (samples do not interact in a forward pass)."""
    n = x.shape[0]
    flat = x.reshape(n, -1)
    outs = []
    buf = np.zeros((batch, flat.shape[1]), np.float32)
    for start in range(0, n, batch):
        stop = min(start + batch, n)
        buf[: stop - start] = flat[start:stop]
        if stop - start < batch:
            buf[stop - start:] = 0.0
        outs.append(run(buf)[: stop - start].copy())
    return np.concatenate(outs, axis=0)


# ---- predict / evaluate ----------------------------------------------------------------------------------
def predict(model: Model, x, *, batch_size: int = 256, logits: bool | None = None, backend: str = "cpu",
            n_threads: int | None = None) -> np.ndarray:
    """Model outputs for every sample of ``x`` (any n), shape (n, n_out), by forward-only graphs.

    For a model trained with (or loaded as) a cross-entropy classifier the outputs are logits and
    ``predict`` returns softmax probabilities, unless ``logits=True``.
    """
    batch_size = _check_int("batch_size", batch_size)
    x = _check_x(model, x)
    model._require_built()
    if not model._lock.acquire(blocking=False):
        raise RuntimeError("this model is already being trained or run in another thread; use one model per thread")
    try:
        if model._fitting is not None and backend != model._fitting:
            # from a callback of fit: another backend would move the parameters fit is using
            raise ValueError(f"predict / evaluate during fit must use fit's backend {model._fitting!r}, got {backend!r}")
        s = _session(model, backend, n_threads)
        p = _predictor(model, s, min(batch_size, x.shape[0]))
        out = _forward_all(x, p.graph.batch, p.run)
    finally:
        model._lock.release()
    as_probs = (model.loss == "cross_entropy") if logits is None else not logits
    if as_probs:
        z = out - out.max(axis=1, keepdims=True)
        e = np.exp(z)
        out = e / e.sum(axis=1, keepdims=True)
    return out


def evaluate(model: Model, x, y=None, *, loss: str | None = None, batch_size: int = 256,
             backend: str = "cpu", n_threads: int | None = None, return_uncertainty: bool = False):
    """(loss, accuracy) of ``model`` on ``x``, ``y``; accuracy is a fraction, NaN unless the loss is
    cross_entropy. ``loss`` defaults to the one the model was trained with. With
    ``return_uncertainty`` returns (loss, loss_unc, accuracy, accuracy_unc)."""
    loss = _check_loss(loss or model.loss or "cross_entropy")
    x = _check_x(model, x)
    model._require_built()
    targets = _targets(model, y, x.shape[0], loss)
    out = predict(model, x, batch_size=batch_size, logits=True, backend=backend, n_threads=n_threads)
    lv, lu, av, au = _loss_and_accuracy(out, targets, loss)
    return (lv, lu, av, au) if return_uncertainty else (lv, av)
