"""Convolutions and pooling over images (channels, h, w) and sequences (channels, length)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...checks import check_int, check_pair
from .. import ops as F
from ..ops import Tensor
from ..params import uniform_init
from ..shapes import conv2d_output_hw, pool2d_output_hw
from .base import Layer, LayerShapes, SequenceState


class Conv2d(Layer):
    """2-D convolution: (in_channels, h, w) -> (out_channels, h', w'). ``kernel`` (out, in, kh, kw),
    ``bias`` (out, 1, 1). Names follow ggml's mnist example ("kernel", "bias")."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | Sequence[int],
                 stride: int | Sequence[int] = 1, padding: int | Sequence[int] = 0,
                 dilation: int | Sequence[int] = 1, bias: bool = True, name: str | None = None) -> None:
        super().__init__(name)
        self.in_channels = check_int("in_channels", in_channels)
        self.out_channels = check_int("out_channels", out_channels)
        self.kernel_size = check_pair("kernel_size", kernel_size)
        self.stride = check_pair("stride", stride)
        self.padding = check_pair("padding", padding, 0)
        self.dilation = check_pair("dilation", dilation)
        self.bias = bool(bias)

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if len(input_shape) != 3 or input_shape[0] != self.in_channels:
            self._fail(input_shape, f"(channels={self.in_channels}, height, width); add Reshape(...) for flat rows")
        _, h, w = input_shape
        kh, kw = self.kernel_size
        oh, ow = conv2d_output_hw((h, w), self.kernel_size, self.stride, self.padding, self.dilation)
        if oh < 1 or ow < 1:
            self._fail(input_shape, f"height and width of at least the kernel {self.kernel_size}")
        params: dict[str, tuple[int, ...]] = {"kernel": (self.out_channels, self.in_channels, kh, kw)}
        if self.bias:
            params["bias"] = (self.out_channels, 1, 1)
        return LayerShapes((self.out_channels, oh, ow), params)

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return uniform_init(rng, shape, self.in_channels * self.kernel_size[0] * self.kernel_size[1])

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        y = F.conv_2d(x, params["kernel"], self.stride, self.padding, self.dilation)
        return F.add(y, params["bias"]) if self.bias else y

    def get_config(self) -> dict:
        return {**super().get_config(), "in_channels": self.in_channels, "out_channels": self.out_channels,
                "kernel_size": list(self.kernel_size), "stride": list(self.stride),
                "padding": list(self.padding), "dilation": list(self.dilation), "bias": self.bias}


class Conv1d(Conv2d):
    """1-D convolution: (in_channels, length) -> (out_channels, length'). ``kernel`` (out, in, k),
    ``bias`` (out, 1); PyTorch's Conv1d (its ``weight`` is called ``kernel`` here, as in Conv2d)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0,
                 dilation: int = 1, bias: bool = True, name: str | None = None) -> None:
        super().__init__(in_channels, out_channels, (1, check_int("kernel_size", kernel_size)),
                         (1, check_int("stride", stride)), (0, check_int("padding", padding, 0)),
                         (1, check_int("dilation", dilation)), bias, name)

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if len(input_shape) != 2 or input_shape[0] != self.in_channels:
            self._fail(input_shape, f"(channels={self.in_channels}, length); add Reshape(...) for flat rows")
        image = super().infer((input_shape[0], 1, input_shape[1]))
        c_out, _, length = image.output
        params = {name: (shape[0], shape[1], shape[3]) if name == "kernel" else (shape[0], 1)
                  for name, shape in image.params.items()}
        return LayerShapes((c_out, length), params)

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        y = F.conv_1d(x, params["kernel"], self.stride[1], self.padding[1], self.dilation[1])
        return F.add(y, params["bias"]) if self.bias else y

    def get_config(self) -> dict:
        return {**super().get_config(), "kernel_size": self.kernel_size[1], "stride": self.stride[1],
                "padding": self.padding[1], "dilation": self.dilation[1]}


class _Pool2d(Layer):
    kind = "max"

    def __init__(self, kernel_size: int | Sequence[int], stride: int | Sequence[int] | None = None,
                 padding: int | Sequence[int] = 0, name: str | None = None) -> None:
        super().__init__(name)
        self.kernel_size = check_pair("kernel_size", kernel_size)
        self.stride = check_pair("stride", stride if stride is not None else self.kernel_size)
        self.padding = check_pair("padding", padding, 0)

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if len(input_shape) != 3:
            self._fail(input_shape, "(channels, height, width)")
        c, h, w = input_shape
        hw = pool2d_output_hw((h, w), self.kernel_size, self.stride, self.padding)
        if hw is None:
            self._fail(input_shape, f"height and width of at least the window {self.kernel_size}")
        return LayerShapes((c, *hw))

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        return F.pool_2d(x, self.kind, self.kernel_size, self.stride, self.padding)

    def get_config(self) -> dict:
        return {**super().get_config(), "kernel_size": list(self.kernel_size), "stride": list(self.stride), "padding": list(self.padding)}


class MaxPool2d(_Pool2d):
    """Max pooling over (h, w); stride defaults to the window size."""
    kind = "max"


class AvgPool2d(_Pool2d):
    """Average pooling over (h, w); stride defaults to the window size."""
    kind = "avg"


class GlobalAveragePooling1D(Layer):
    """The mean over the steps of a sequence: (T, features) -> (features,) (Keras's layer of that name);
    after an ``Embedding(mask_zero=True)``, over the steps that are tokens (a sequence of padding only
    gives zeros)."""


    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if len(input_shape) != 2:
            self._fail(input_shape, "a sequence (T, features)")
        return LayerShapes((input_shape[1],))

    def forward(self, x: Tensor, params: dict[str, Tensor], state: SequenceState | None = None) -> Tensor:
        n, steps, features = x.shape
        by_feature = F.permute(x, 0, 2, 1)  # (n, features, T)
        if state is None or state.padding is None:
            return F.reshape(F.mean(by_feature), n, features)
        keep = state.padding
        total = F.sum_rows(F.mul(by_feature, F.reshape(keep, n, 1, steps)))          # (n, features, 1)
        count = F.clamp(F.reshape(F.sum_rows(keep), n, 1, 1), 1.0, float("inf"))    # tokens per sequence
        return F.reshape(F.div(total, count), n, features)


class GlobalAveragePooling2D(Layer):
    """The mean over the positions of an image: (channels, h, w) -> (channels,) (Keras's layer of that
    name for channels-first images; PyTorch's AdaptiveAvgPool2d(1) then Flatten)."""

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if len(input_shape) != 3:
            self._fail(input_shape, "an image (channels, height, width)")
        return LayerShapes((input_shape[0],))

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        n, c, h, w = x.shape
        return F.reshape(F.mean(F.reshape(x, n, c, h * w)), n, c)
