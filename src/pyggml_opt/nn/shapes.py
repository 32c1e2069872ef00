"""Output-size arithmetic of convolution and pooling: one formula each, used by the ops (to check
a graph as it is built) and by the layers (to know shapes before any graph exists)."""
from __future__ import annotations

from .._lib import lib

# A sample has at most 3 axes (channels, height, width): ggml tensors have 4 dimensions, one is the batch.
MAX_SAMPLE_AXES = lib.GGML_MAX_DIMS - 1


def conv_output_size(size: int, kernel: int, stride: int, padding: int, dilation: int = 1) -> int:
    """Output length of a convolution along one axis (< 1: the kernel does not fit)."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def conv2d_output_hw(hw: tuple[int, int], kernel: tuple[int, int], stride: tuple[int, int],
                     padding: tuple[int, int], dilation: tuple[int, int] = (1, 1)) -> tuple[int, int]:
    """(height, width) after a 2-D convolution; either < 1 when the kernel does not fit."""
    oh, ow = (conv_output_size(*args) for args in zip(hw, kernel, stride, padding, dilation))
    return oh, ow


def pool2d_output_hw(hw: tuple[int, int], window: tuple[int, int], stride: tuple[int, int],
                     padding: tuple[int, int]) -> tuple[int, int] | None:
    """(height, width) after 2-D pooling; None when the window does not fit the padded input."""
    if any(s + 2 * p < k for s, k, p in zip(hw, window, padding)):
        return None
    oh, ow = (conv_output_size(s, k, st, p) for s, k, st, p in zip(hw, window, stride, padding))
    return oh, ow
