"""ggml_opt_dataset: the training data, held once in ggml memory."""
from __future__ import annotations

import numpy as np

from .._lib import CData, ffi, lib
from ..checks import check_int
from .handle import Handle
from .tensor_data import np_dtype


class Dataset(Handle):
    """Owns a ``ggml_opt_dataset_t``: ``ndata`` datapoints of ``ne_datapoint`` values of ``data_type``
    (GGML_TYPE_F32, or GGML_TYPE_I32 for token ids) and ``ne_label`` label floats each (``ne_label=0``: no labels), split in shards of ``ndata_shard`` datapoints.

    The data and labels live in host memory owned by the dataset; ``data`` / ``labels`` are numpy
    views of it (shapes ``(ndata, ne_datapoint)`` and ``(ndata, ne_label)``), so filling them is the
    one copy of the user's arrays. A view keeps that memory alive: after ``close()`` the dataset is
    unusable, but its memory is freed only once the last view handed out is gone, so no array ever
    points into freed memory.
    """

    _kind = "ggml-opt dataset"

    def __init__(self, ne_datapoint: int, ne_label: int, ndata: int, ndata_shard: int = 1,
                 data_type: int = lib.GGML_TYPE_F32) -> None:
        ne_datapoint, ne_label = check_int("ne_datapoint", ne_datapoint), check_int("ne_label", ne_label, 0)
        ndata, ndata_shard = check_int("ndata", ndata), check_int("ndata_shard", ndata_shard)
        if ndata % ndata_shard:
            raise ValueError(f"ndata ({ndata}) must be a multiple of ndata_shard ({ndata_shard})")
        memory = Handle(lib.ggml_opt_dataset_init(data_type, lib.GGML_TYPE_F32, ne_datapoint, ne_label,
                                                  ndata, ndata_shard), lib.ggml_opt_dataset_free)
        # The dataset proper is a Handle without a free function of its own: closing it drops its
        # reference to `memory`, whose finalizer frees the C dataset once no view refers to it either.
        super().__init__(memory.ptr, None)
        self._memory: Handle | None = memory
        self.ndata, self.ndata_shard = ndata, ndata_shard
        # None once closed
        self.data: np.ndarray | None = self._view(lib.ggml_opt_dataset_data(memory.ptr), (ndata, ne_datapoint))
        self.labels: np.ndarray | None = (self._view(lib.ggml_opt_dataset_labels(memory.ptr), (ndata, ne_label))
                                          if ne_label else None)

    def _view(self, t: CData, shape: tuple[int, int]) -> np.ndarray:
        # ffi.gc's destructor closure holds `memory`: the buffer, and every numpy view of it, keep the
        # C dataset alive through this cdata object.
        memory = self._memory
        keeper = ffi.gc(ffi.cast("char *", t.data), lambda _ptr: memory)
        return np.frombuffer(ffi.buffer(keeper, lib.ggml_nbytes(t)), dtype=np_dtype(t)).reshape(shape)

    def close(self) -> None:
        super().close()
        self._memory = self.data = self.labels = None

    @property
    def data_tensor(self) -> CData:
        """The ``[ne_datapoint, ndata]`` tensor holding the data (host memory)."""
        return lib.ggml_opt_dataset_data(self.ptr)

    def get_batch_host(self, ibatch: int, ndata_batch: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Batch ``ibatch`` of ``ndata_batch`` datapoints (in ggml-opt's shuffled order) as numpy arrays,
        through ``ggml_opt_dataset_get_batch_host``."""
        ptr = self.ptr
        if ndata_batch % self.ndata_shard:
            raise ValueError(f"batch size {ndata_batch} must be a multiple of the shard size {self.ndata_shard}")
        if ibatch < 0 or (ibatch + 1) * ndata_batch > self.ndata:
            raise ValueError(f"batch {ibatch} of size {ndata_batch} is outside the dataset ({self.ndata} datapoints)")
        assert self.data is not None  # self.ptr raised if closed
        x = np.empty((ndata_batch, self.data.shape[1]), self.data.dtype)
        y = np.empty((ndata_batch, self.labels.shape[1]), np.float32) if self.labels is not None else None
        lib.ggml_opt_dataset_get_batch_host(ptr, ffi.from_buffer(x), x.nbytes,
                                            ffi.from_buffer(y) if y is not None else ffi.NULL, ibatch)
        return x, y
