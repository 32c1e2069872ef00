"""ggml_opt_dataset: the training data, held once in ggml memory."""
from __future__ import annotations

import numpy as np

from .._lib import ffi, lib
from .handle import Handle
from .tensor_data import np_dtype


class Dataset(Handle):
    """Owns a ``ggml_opt_dataset_t``: ``ndata`` datapoints of ``ne_datapoint`` floats and ``ne_label``
    label floats each (``ne_label=0``: no labels), split in shards of ``ndata_shard`` datapoints.

    The data and labels live in host memory owned by the dataset; ``data`` / ``labels`` are numpy
    views of it (shapes ``(ndata, ne_datapoint)`` and ``(ndata, ne_label)``), so filling them is the
    one copy of the user's arrays.
    """

    _kind = "ggml-opt dataset"

    def __init__(self, ne_datapoint: int, ne_label: int, ndata: int, ndata_shard: int = 1) -> None:
        for name, v, lo in (("ne_datapoint", ne_datapoint, 1), ("ne_label", ne_label, 0),
                            ("ndata", ndata, 1), ("ndata_shard", ndata_shard, 1)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < lo:
                raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
        if ndata % ndata_shard:
            raise ValueError(f"ndata ({ndata}) must be a multiple of ndata_shard ({ndata_shard})")
        ptr = lib.ggml_opt_dataset_init(lib.GGML_TYPE_F32, lib.GGML_TYPE_F32, int(ne_datapoint),
                                        int(ne_label), int(ndata), int(ndata_shard))
        super().__init__(ptr, lib.ggml_opt_dataset_free)
        self.ndata, self.ndata_shard = int(ndata), int(ndata_shard)
        self.data = self._view(lib.ggml_opt_dataset_data(ptr), (ndata, ne_datapoint))
        self.labels = self._view(lib.ggml_opt_dataset_labels(ptr), (ndata, ne_label)) if ne_label else None

    def _view(self, t, shape) -> np.ndarray:
        # The dataset's tensors are in a CPU buffer; keep `self` alive while a view exists.
        buf = ffi.buffer(t.data, lib.ggml_nbytes(t))
        arr = np.frombuffer(buf, dtype=np_dtype(t)).reshape(shape)
        return arr

    @property
    def data_tensor(self):
        return lib.ggml_opt_dataset_data(self.ptr)

    @property
    def labels_tensor(self):
        return lib.ggml_opt_dataset_labels(self.ptr)

    def _check_batch(self, ibatch: int, ndata_batch: int) -> None:
        if ndata_batch % self.ndata_shard:
            raise ValueError(f"batch size {ndata_batch} must be a multiple of the shard size {self.ndata_shard}")
        if ibatch < 0 or (ibatch + 1) * ndata_batch > self.ndata:
            raise ValueError(f"batch {ibatch} of size {ndata_batch} is outside the dataset ({self.ndata} datapoints)")

    def get_batch(self, data_batch, labels_batch, ibatch: int) -> None:
        """Copy batch ``ibatch`` (in shuffled order) into the tensors ``data_batch`` / ``labels_batch``."""
        ndata_batch = lib.ggml_nbytes(data_batch) // (4 * self.data.shape[1])
        self._check_batch(ibatch, ndata_batch)
        lib.ggml_opt_dataset_get_batch(self.ptr, data_batch, labels_batch if self.labels is not None else ffi.NULL, ibatch)

    def get_batch_host(self, ibatch: int, ndata_batch: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Batch ``ibatch`` of ``ndata_batch`` datapoints (in shuffled order) as numpy arrays."""
        self._check_batch(ibatch, ndata_batch)
        x = np.empty((ndata_batch, self.data.shape[1]), np.float32)
        y = np.empty((ndata_batch, self.labels.shape[1]), np.float32) if self.labels is not None else None
        lib.ggml_opt_dataset_get_batch_host(self.ptr, ffi.from_buffer(x), x.nbytes,
                                            ffi.from_buffer(y) if y is not None else ffi.NULL, ibatch)
        return x, y

    def shuffle(self, opt_context, idata: int = -1) -> None:
        """Shuffle the first ``idata`` datapoints (all for -1) with the opt context's random generator."""
        if idata != -1 and not (0 <= idata <= self.ndata and idata % self.ndata_shard == 0):
            raise ValueError(f"idata must be -1 or a multiple of {self.ndata_shard} in [0, {self.ndata}], got {idata}")
        lib.ggml_opt_dataset_shuffle(opt_context.ptr, self.ptr, idata)
