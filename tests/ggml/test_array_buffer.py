"""core.ArrayBuffer: a ggml tensor over a numpy array's own memory (fit trains on x in place)."""
import gc
import weakref

import numpy as np
import pytest

from pyggml_opt._lib import lib
from pyggml_opt.core import ArrayBuffer, tensor_data


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("offset", [0, 4, 16, 28])
def test_tensor_views_the_array_in_place(dtype, offset):
    """Any 4-byte alignment works (ggml wants 32 for a buffer's base): the tensor reads the array's
    values, and a change to the array shows through it (no copy)."""
    raw = np.zeros(5 * 7 * 4 + 64, np.uint8)
    start = (-raw.ctypes.data) % 32 + offset
    arr = np.frombuffer(raw.data, dtype, 35, offset=start).reshape(5, 7)
    arr[...] = np.arange(35).reshape(5, 7)
    buf = ArrayBuffer(arr)
    assert (int(buf.tensor.ne[0]), int(buf.tensor.ne[1])) == (7, 5)
    assert buf.tensor.type == (lib.GGML_TYPE_F32 if dtype == np.float32 else lib.GGML_TYPE_I32)
    np.testing.assert_array_equal(tensor_data.get(buf.tensor, 2), arr)
    arr[2, 3] = 99
    assert tensor_data.get(buf.tensor, 2)[2, 3] == 99
    np.testing.assert_array_equal(raw[:start], 0)   # the bytes before the array are untouched
    buf.close()


def test_keeps_the_array_alive():
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    ref = weakref.ref(arr)
    buf = ArrayBuffer(arr)
    del arr
    gc.collect()
    assert ref() is not None
    np.testing.assert_array_equal(tensor_data.get(buf.tensor, 2), np.arange(12).reshape(3, 4))
    buf.close()
    del buf
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("arr", [np.zeros((3, 4), np.float64), np.zeros((4, 6), np.float32)[:, ::2],
                                 np.zeros(5, np.float32), np.zeros((2, 3), np.int64)])
def test_rejects_what_it_cannot_view(arr):
    with pytest.raises(ValueError, match="C-contiguous 2-d float32 or int32"):
        ArrayBuffer(arr)
