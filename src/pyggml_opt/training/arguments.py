"""The arguments of fit / evaluate / predict checked: samples (shapes, dtypes, finite values), targets
(by the loss's own rules, ``nn.losses``), sample weights, shuffling, batch sizes, validation. Each raises
ValueError / TypeError naming the argument, before anything reaches ggml."""
from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from ..checks import check_int, check_number
from ..nn import MAX_SAMPLE_AXES, Network
from ..nn.losses import Loss, losses_where


_CHECK_BLOCK = 1 << 18   # elements per block of check_x's scans (1 MB as float32)


def as_number_array(name: str, x: ArrayLike | None) -> np.ndarray:
    """``x`` as a numpy array of numbers (bool, int, unsigned or float)."""
    if x is None:
        raise ValueError(f"{name} is required")
    try:
        arr = np.asarray(x)
    except Exception as exc:  # noqa: BLE001 - whatever the array-like raises
        raise TypeError(f"{name} must be array-like: {exc}") from None
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold numbers, got dtype {arr.dtype}")
    return arr


def check_x(model: Network, x: ArrayLike, name: str = "x", shorter: bool = False) -> np.ndarray:
    """Samples (n, *input_shape): finite numbers that fit float32, or for a model that takes ids
    (``input_dtype`` "int32", an Embedding first) integers the model accepts; with ``shorter``, for a
    model of sequences (a language model), sequences of 1 to ``input_shape[0]`` ids whose outputs its
    parameters give (``Network.output_shape_for``) and packed windows (``Network.packed_steps``)."""
    arr = as_number_array(name, x)
    if model.input_dtype == "int32":
        if arr.dtype.kind not in "iu":
            raise TypeError(f"{name} must hold integer token ids for a model that starts with an Embedding, "
                            f"got dtype {arr.dtype}")
        if arr.ndim >= 2 and arr.size:
            model.check_input(arr)
    if arr.ndim < 2:
        raise ValueError(f"{name} must have a batch axis first: shape (n, features...), got {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty")
    if arr.ndim > 1 + MAX_SAMPLE_AXES:
        raise ValueError(f"{name} has {arr.ndim} axes; at most {1 + MAX_SAMPLE_AXES} (n, channels, height, width) "
                         "are supported")
    if model.built and tuple(arr.shape[1:]) != model.input_shape:
        assert model.input_shape is not None  # built
        if shorter and model.packed_steps(tuple(arr.shape[1:])) is not None:
            return arr
        if model.input_dtype == "int32" and arr.ndim == 2 == 1 + len(model.input_shape):
            if shorter and 0 < arr.shape[1] < model.input_shape[0]:
                model.output_shape_for(arr.shape[1:])  # ValueError where the parameters do not fit
                return arr
            longer = "longer than" if arr.shape[1] > model.input_shape[0] else "other than"
            raise ValueError(f"{name} holds sequences of {arr.shape[1]} ids, {longer} the model's context of "
                             f"{model.input_shape[0]} (cut or pad them to {model.input_shape[0]}; "
                             "data.sliding_windows makes windows of a fixed length)")
        raise ValueError(f"{name} has samples of shape {tuple(arr.shape[1:])}, the model expects {model.input_shape}")
    if arr.dtype.kind == "f":
        # in blocks of rows: a boolean or absolute copy of the whole array would be fit's largest
        # allocation (it trains on x in place)
        step = max(1, _CHECK_BLOCK // max(1, arr[0].size))
        for i in range(0, arr.shape[0], step):
            block = arr[i:i + step]
            if not np.isfinite(block).all():
                raise ValueError(f"{name} contains NaN or inf")
            if arr.dtype.itemsize > 4 and np.abs(block).max(initial=0) > np.finfo(np.float32).max:
                # ggml computes in float32: such values would become inf there and every weight NaN
                raise ValueError(f"{name} contains values beyond float32's range (about ±3.4e38)")
    return arr


def targets(model: Network, y: ArrayLike | None, x: np.ndarray, loss: Loss, name: str = "y") -> np.ndarray | None:
    """Targets of the checked samples ``x`` as rows, as ``loss`` takes them (``Loss.targets``)
    for the outputs the model gives ``x`` (a language model's shorter sequences give shorter ones): None
    for a loss without targets; class ids become one-hot rows, token ids of sequence outputs stay ids
    (int32 ones as given, in place; others as float32, exact below 2^24)."""
    if not loss.has_targets:
        return None
    n = x.shape[0]
    arr = as_number_array(name, y)
    if arr.ndim == 0 or arr.shape[0] != n:
        raise ValueError(f"x and {name} have different lengths: {n} and {arr.shape[0] if arr.ndim else 'a scalar'}")
    return loss.targets(arr, n, model.output_shape_for(tuple(x.shape[1:])), name)


def sample_weights(sample_weight: ArrayLike | None, class_weight: dict | None, t: np.ndarray | None,
                   n: int, loss: Loss) -> np.ndarray | None:
    """Per-sample weights (n,) as float64 from fit's ``sample_weight`` (n,) numbers >= 0 and
    ``class_weight`` ({class id: weight}, classes not named weigh 1; losses on classes only); None when
    neither is given."""
    if sample_weight is None and class_weight is None:
        return None
    if not loss.weighted:
        raise ValueError(f"sample_weight and class_weight need one of the losses {losses_where('weighted')} or a "
                         f"loss function, got {loss.label!r}")
    w = np.ones(n)
    if sample_weight is not None:
        sw = as_number_array("sample_weight", sample_weight)
        if sw.shape != (n,):
            raise ValueError(f"sample_weight must have shape ({n},) (one weight per sample), got {sw.shape}")
        if not np.isfinite(sw).all() or (sw < 0).any():
            raise ValueError("sample_weight must be finite and >= 0")
        w *= sw
    if class_weight is not None:
        if not loss.classes:
            raise ValueError(f"class_weight needs loss={losses_where('classes')} (a loss on classes), got {loss.label!r}")
        if not isinstance(class_weight, dict):
            raise TypeError(f"class_weight must be a dict {{class id: weight}}, got {type(class_weight).__name__}")
        assert t is not None  # a loss on classes has targets
        n_out = t.shape[1]
        table = np.ones(n_out)
        for c, cw in class_weight.items():
            if isinstance(c, (bool, np.bool_)) or not isinstance(c, (int, np.integer)) or not 0 <= c < n_out:
                raise ValueError(f"class_weight: keys must be class ids in [0, {n_out}), got {c!r}")
            cw = check_number(f"class_weight[{c}]", cw, 0.0, math.inf)
            table[c] = cw
        w *= table[t.argmax(axis=1)]
    if not w.any():
        raise ValueError("sample_weight / class_weight give every sample the weight 0")
    return w


def check_shuffle(shuffle: bool | int | str, batch_size: int) -> int:
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


def check_seed(seed: int | None) -> int | None:
    """None or an int >= 0."""
    return None if seed is None else check_int("seed", seed, 0)


def check_batch_sizes(batch_size: int, physical_batch_size: int | None) -> tuple[int, int]:
    """(batch_size, physical_batch_size); the physical size divides the logical one."""
    batch_size = check_int("batch_size", batch_size)
    physical = check_int("physical_batch_size", batch_size if physical_batch_size is None else physical_batch_size)
    if batch_size % physical:
        raise ValueError(f"batch_size ({batch_size}) must be a multiple of physical_batch_size ({physical})")
    return batch_size, physical


def clamp_batch_sizes(batch_size: int, physical: int, n: int) -> tuple[int, int]:
    """(batch_size, physical) for ``n`` training samples: a batch is at most all of them; the physical
    batch follows when it no longer divides the batch."""
    if batch_size <= n:
        return batch_size, physical
    physical = min(physical, n)
    return n, physical if n % physical == 0 else n


def check_validation_split(validation_split: float, validation_data: object) -> float:
    validation_split = check_number("validation_split", validation_split, 0.0, 1.0, hi_open=True)
    if validation_split and validation_data is not None:
        raise ValueError("give validation_split or validation_data, not both")
    return validation_split


def check_validation_data(model: Network, validation_data: object, loss: Loss
                          ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(x_val, targets, weights or None) from ``validation_data=(x_val, y_val)`` or ``(x_val, y_val,
    sample_weight_val)`` (Keras's)."""
    if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
        raise ValueError("validation_data must be a pair (x_val, y_val) or a triple (x_val, y_val, sample_weight_val)")
    xv = check_x(model, validation_data[0], "validation_data[0]", shorter=True)
    tv = targets(model, validation_data[1], xv, loss, "validation_data[1]")
    wv = sample_weights(validation_data[2], None, tv, xv.shape[0], loss) if len(validation_data) == 3 else None
    return xv, tv, wv


def check_verbose(verbose: int | str) -> int:
    """0 (silent), 1 (progress bar; one line per epoch when the output is not a terminal), 2 (one line
    per epoch), or "auto" (Keras's name for 1)."""
    if verbose == "auto":
        return 1
    return check_int("verbose", verbose, 0, 2)
