"""Batches: the order of samples in an epoch, and writing a batch's rows into a graph input."""
from __future__ import annotations

import numpy as np

from ..core import CData, tensor_data


def epoch_order(rng: np.random.Generator, n: int, run: int) -> np.ndarray:
    """An epoch's order of samples 0..n-1: runs of ``run`` consecutive samples (the last one may be
    shorter) in random order; ``run`` 1 is a plain permutation, 0 keeps the order."""
    if run == 0:
        return np.arange(n)
    if run == 1:
        return rng.permutation(n)
    starts = rng.permutation(-(-n // run)) * run
    order = (starts[:, None] + np.arange(run)).ravel()
    return order[order < n]


class BatchWriter:
    """Writes rows into one input tensor per batch: straight into its memory when that is host
    memory (as ggml-opt's own ggml_opt_dataset_get_batch does), else through a staging array.

    The numpy view of the tensor is made again only when ggml_opt_alloc moved the tensor (its data or
    buffer pointer changed), not for every batch."""

    def __init__(self, t: CData, shape: tuple[int, ...]) -> None:
        self.t = t
        self.buf: np.ndarray = np.empty(shape, tensor_data.np_dtype(t))
        self._where: tuple[int, int] | None = None
        self._view: np.ndarray | None = None

    def _target(self) -> np.ndarray | None:
        where = tensor_data.location(self.t)
        if where != self._where:
            self._view = tensor_data.host_view(self.t, self.buf.shape)
            self._where = where
        return self._view

    def gather(self, src: np.ndarray, idx: np.ndarray) -> None:
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
