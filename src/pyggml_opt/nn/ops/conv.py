"""Convolution and pooling over images (n, c, h, w) and sequences (n, c, length)."""
from __future__ import annotations

from typing import Sequence

from ..._lib import lib
from ...checks import check_pair
from ...core.tensor_data import ne_of
from ..shapes import conv2d_output_hw, pool2d_output_hw
from .shape import reshape
from .tensor import Tensor, check_tensor, contiguous, graph_context, wrap


def conv_2d(x: Tensor, kernel: Tensor, stride: int | Sequence[int] = 1, padding: int | Sequence[int] = 0,
            dilation: int | Sequence[int] = 1) -> Tensor:
    """2-D convolution, differentiable: x (n, c_in, h, w), kernel (c_out, c_in, kh, kw) -> (n, c_out,
    h_out, w_out). One CONV_2D node (ggml_conv_2d_direct): on the CPU im2col in blocks that stay in
    cache, no im2col tensor of the whole batch and no permutation of the result (vendor patch 0023)."""
    check_tensor("x", x)
    check_tensor("kernel", kernel)
    sh, sw = check_pair("stride", stride)
    ph, pw = check_pair("padding", padding, 0)
    dh, dw = check_pair("dilation", dilation)
    xs, ks = ne_of(x.shape), ne_of(kernel.shape)  # ne order: [w, h, c, n]
    if xs[2] != ks[2]:
        raise ValueError(f"conv_2d: input has {xs[2]} channels, kernel expects {ks[2]} "
                         f"(input {x.shape}, kernel {kernel.shape})")
    oh, ow = conv2d_output_hw((xs[1], xs[0]), (ks[1], ks[0]), (sh, sw), (ph, pw), (dh, dw))
    if oh < 1 or ow < 1:
        raise ValueError(f"conv_2d: kernel {kernel.shape[-2:]} does not fit input {x.shape[-2:]} with padding {(ph, pw)}")
    src = contiguous(kernel)
    return wrap(lib.ggml_conv_2d_direct(graph_context(x, src).ptr, src.ptr, x.ptr, sw, sh, pw, ph, dw, dh), x, src,
                ndim=4)


def conv_1d(x: Tensor, kernel: Tensor, stride: int = 1, padding: int = 0, dilation: int = 1) -> Tensor:
    """1-D convolution, x (n, c_in, length), kernel (c_out, c_in, k) -> (n, c_out, length'): the 2-D
    convolution of rows of height one (ggml's own conv_1d packs its im2col in float16)."""
    check_tensor("x", x)
    check_tensor("kernel", kernel)
    if x.ndim != 3 or kernel.ndim != 3:
        raise ValueError(f"conv_1d: expected x (n, c_in, length) and kernel (c_out, c_in, k), got {x.shape} "
                         f"and {kernel.shape}")
    n, c_in, length = x.shape
    c_out, _, k = kernel.shape
    rows = reshape(x, n, c_in, 1, length)
    src = contiguous(kernel)
    kernel_rows = wrap(lib.ggml_reshape_4d(graph_context(x, src).ptr, src.ptr, k, 1, src.shape[1], c_out), x, src,
                       ndim=4)
    y = conv_2d(rows, kernel_rows, (1, stride), (0, padding), (1, dilation))
    return reshape(y, n, c_out, y.shape[3])


def pool_2d(x: Tensor, kind: str, kernel_size: int | Sequence[int], stride: int | Sequence[int] | None = None,
            padding: int | Sequence[int] = 0) -> Tensor:
    """Max or average pooling over the last two axes of x (n, c, h, w); kind: "max" or "avg"."""
    check_tensor("x", x)
    ops = {"max": lib.GGML_OP_POOL_MAX, "avg": lib.GGML_OP_POOL_AVG}
    if kind not in ops:
        raise ValueError(f"pool_2d: kind must be 'max' or 'avg', got {kind!r}")
    kh, kw = check_pair("kernel_size", kernel_size)
    sh, sw = check_pair("stride", stride if stride is not None else (kh, kw))
    ph, pw = check_pair("padding", padding, 0)
    xs = ne_of(x.shape)
    if pool2d_output_hw((xs[1], xs[0]), (kh, kw), (sh, sw), (ph, pw)) is None:
        raise ValueError(f"pool_2d: window {(kh, kw)} does not fit input {x.shape[-2:]}")
    return wrap(lib.ggml_pool_2d(graph_context(x).ptr, x.ptr, ops[kind], kw, kh, sw, sh, float(pw), float(ph)), x, ndim=4)
