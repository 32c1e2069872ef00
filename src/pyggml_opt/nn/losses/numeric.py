"""The numbers of losses in numpy: targets checked and converted (float rows, class ids as one-hot
rows, token ids), and the transforms of logits (log softmax, softmax, sigmoid)."""
from __future__ import annotations

import numpy as np


def finite_float32(arr: np.ndarray, name: str) -> np.ndarray:
    """Targets as float32, refusing NaN and inf (also where float32 overflows)."""
    out = arr.astype(np.float32, copy=False)
    if not np.isfinite(out).all():
        raise ValueError(f"{name} contains NaN or inf")
    return out


def class_rows(arr: np.ndarray, n: int, n_out: int, name: str) -> np.ndarray:
    """Class ids (n,) in [0, n_out) as one-hot float32 rows."""
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


IGNORE_INDEX = -100  # a token id that is no target (PyTorch's ignore_index): prompt tokens, padding


CHECK_BLOCK = 1 << 20  # ids checked at a time: no temporary of the whole array (it may be a file's mapping)


def token_targets(arr: np.ndarray, output_shape: tuple[int, ...], name: str) -> np.ndarray:
    """Token ids (n, T) for a model whose outputs are (T, V) logits per sample; ``IGNORE_INDEX`` marks
    a token that is no target. An int32 array is used as it is (no copy: fit reads the rows of each
    batch from it, as it reads x); other ids become float32 (exact below 2^24)."""
    steps, vocab = output_shape
    if arr.shape[1:] != (steps,):
        raise ValueError(f"{name} must hold token ids of shape (n, {steps}) for outputs of shape {output_shape}, "
                         f"got {arr.shape}")
    lo, hi = None, None
    rows = max(1, CHECK_BLOCK // max(steps, 1))
    for start in range(0, arr.shape[0], rows):
        block = arr[start:start + rows]
        if block.dtype.kind == "f" and (not np.isfinite(block).all() or (block != np.round(block)).any()):
            raise ValueError(f"{name}: token ids must be integers")
        targeted = block[block != IGNORE_INDEX]
        if targeted.size:
            lo = targeted.min() if lo is None else min(lo, targeted.min())
            hi = targeted.max() if hi is None else max(hi, targeted.max())
    if lo is not None and hi is not None and (lo < 0 or hi >= vocab):
        raise ValueError(f"{name}: token ids must be in [0, {vocab}) or {IGNORE_INDEX} (no target), got range "
                         f"[{lo}, {hi}]")
    return arr if arr.dtype == np.int32 else arr.astype(np.float32)


def log_softmax(z: np.ndarray) -> np.ndarray:
    """log softmax over the last axis, stable for any magnitude."""
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def sigmoid(z: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-z)), the probabilities of binary logits, without overflow."""
    return np.exp(-np.logaddexp(0.0, -z)).astype(z.dtype, copy=False)


def softmax(z: np.ndarray) -> np.ndarray:
    """softmax over the last axis (the probabilities of logits)."""
    return np.exp(log_softmax(z))
