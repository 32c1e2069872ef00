"""Layers for ``Sequential``: each declares its parameters and maps an input Tensor to an output.

A layer's shapes exclude the batch axis. ``output_shape(input_shape)`` validates the input shape and
is called when the model is built, so a mismatch is a ValueError naming the layer, never a ggml abort.
Parameters are created by the model; ``init(pname, shape, rng)`` gives their initial values (PyTorch's
defaults: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases). ``get_config()`` returns the
constructor arguments and ``from_config`` rebuilds the layer; each class is registered by name
(``registry.py``), so adding a layer here is all a saved model needs to know about it.
"""
from __future__ import annotations

import math
from typing import Callable, NoReturn, Sequence

import numpy as np

from ..checks import check_int, check_number, check_pair
from . import ops as F
from .ops import Tensor
from .params import uniform_init
from .registry import register
from .shapes import MAX_SAMPLE_AXES, conv2d_output_hw, pool2d_output_hw


class Layer:
    """Base class. Subclasses set ``params`` (name -> shape) in ``output_shape`` and implement ``forward``.

    ``input_dtype`` "int32" marks a layer that takes integer ids (Embedding): only the first layer of
    a model may, and the model's input is then int32."""

    input_dtype: str | None = None

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self.param_shapes: dict[str, tuple[int, ...]] = {}
        # per-sample shapes of the inputs a training step fills anew (a dropout mask), set with
        # param_shapes; the training graph passes them to forward among params, other graphs do not
        self.step_inputs: dict[str, tuple[int, ...]] = {}

    def fill_step_input(self, name: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """Values of step input ``name`` for one training step, of ``shape`` (batch first)."""
        raise NotImplementedError

    def check_input(self, x: np.ndarray) -> None:
        """ValueError for input values this layer cannot take (called with the whole input array)."""

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        return input_shape

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return np.zeros(shape, np.float32)

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        raise NotImplementedError

    def get_config(self) -> dict:
        """Constructor arguments (JSON-ready), for saving and copying the architecture."""
        return {"name": self.name}

    @classmethod
    def from_config(cls, config: dict) -> "Layer":
        return cls(**config)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items() if k != "name")
        return f"{type(self).__name__}({args})"

    def _fail(self, input_shape: tuple[int, ...], expected: str) -> NoReturn:
        raise ValueError(f"{self!r}{' ' + repr(self.name) if self.name else ''}: input shape "
                         f"{tuple(input_shape)} (batch axis excluded) does not fit: expected {expected}")


class Linear(Layer):
    """y = x W^T + b: (in_features,) -> (out_features,), or each step of a sequence (T, in_features) ->
    (T, out_features). ``weight`` (out, in), ``bias`` (out,)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, name: str | None = None) -> None:
        super().__init__(name)
        self.in_features = check_int("in_features", in_features)
        self.out_features = check_int("out_features", out_features)
        self.bias = bool(bias)

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        if not input_shape or input_shape[-1] != self.in_features or len(input_shape) > 2:
            self._fail(input_shape, f"({self.in_features},), or (steps, {self.in_features}) for a sequence; add "
                                    "Flatten() before it for images")
        self.param_shapes = {"weight": (self.out_features, self.in_features)}
        if self.bias:
            self.param_shapes["bias"] = (self.out_features,)
        return (*input_shape[:-1], self.out_features)

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return uniform_init(rng, shape, self.in_features)

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        return F.linear(x, params["weight"], params.get("bias"))

    def get_config(self) -> dict:
        return {**super().get_config(), "in_features": self.in_features, "out_features": self.out_features, "bias": self.bias}


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

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(input_shape) != 3 or input_shape[0] != self.in_channels:
            self._fail(input_shape, f"(channels={self.in_channels}, height, width); add Reshape(...) for flat rows")
        _, h, w = input_shape
        kh, kw = self.kernel_size
        oh, ow = conv2d_output_hw((h, w), self.kernel_size, self.stride, self.padding, self.dilation)
        if oh < 1 or ow < 1:
            self._fail(input_shape, f"height and width of at least the kernel {self.kernel_size}")
        self.param_shapes = {"kernel": (self.out_channels, self.in_channels, kh, kw)}
        if self.bias:
            self.param_shapes["bias"] = (self.out_channels, 1, 1)
        return (self.out_channels, oh, ow)

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

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(input_shape) != 2 or input_shape[0] != self.in_channels:
            self._fail(input_shape, f"(channels={self.in_channels}, length); add Reshape(...) for flat rows")
        c_out, _, length = super().output_shape((input_shape[0], 1, input_shape[1]))
        self.param_shapes = {name: (shape[0], shape[1], shape[3]) if name == "kernel" else (shape[0], 1)
                             for name, shape in self.param_shapes.items()}
        return (c_out, length)

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

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(input_shape) != 3:
            self._fail(input_shape, "(channels, height, width)")
        c, h, w = input_shape
        hw = pool2d_output_hw((h, w), self.kernel_size, self.stride, self.padding)
        if hw is None:
            self._fail(input_shape, f"height and width of at least the window {self.kernel_size}")
        return (c, *hw)

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


class Flatten(Layer):
    """(d1, d2, ...) -> (d1*d2*...,), in numpy (C) order, as torch.nn.Flatten."""

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        return (int(np.prod(input_shape)),)

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        return F.flatten(x)


class Reshape(Layer):
    """Reshape each sample to ``shape`` (batch axis excluded), e.g. Reshape((1, 28, 28)) for flat pixel rows."""

    def __init__(self, shape: Sequence[int], name: str | None = None) -> None:
        super().__init__(name)
        self.shape = tuple(check_int("shape entries", s) for s in shape)
        if not 1 <= len(self.shape) <= MAX_SAMPLE_AXES:
            raise ValueError(f"Reshape: shape must have 1 to {MAX_SAMPLE_AXES} entries (batch axis excluded), "
                             f"got {self.shape}")

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        if int(np.prod(input_shape)) != int(np.prod(self.shape)):
            self._fail(input_shape, f"{int(np.prod(self.shape))} values per sample to reshape into {self.shape}")
        return self.shape

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        return F.reshape(x, x.shape[0], *self.shape)

    def get_config(self) -> dict:
        return {**super().get_config(), "shape": list(self.shape)}


def _activation(name: str, fn: Callable[[Tensor], Tensor], doc: str) -> type[Layer]:
    class _Act(Layer):
        __doc__ = doc

        def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
            return fn(x)

    _Act.__name__ = _Act.__qualname__ = name
    return _Act


ReLU = _activation("ReLU", F.relu, "max(x, 0), element-wise.")
Sigmoid = _activation("Sigmoid", F.sigmoid, "1 / (1 + exp(-x)), composed from ops ggml can differentiate.")
Tanh = _activation("Tanh", F.tanh, "tanh(x), composed as 2 sigmoid(2x) - 1.")
GELU = _activation("GELU", F.gelu, "GELU (tanh approximation), composed from differentiable ops.")
SiLU = _activation("SiLU", F.silu, "x * sigmoid(x) (ggml_silu).")
Softmax = _activation("Softmax", F.softmax, "Softmax over the feature axis. Do not put it before a "
                      "cross_entropy loss: ggml's cross-entropy takes logits and applies softmax itself.")


class MultiHeadAttention(Layer):
    """Self-attention over a sequence: (T, dim) -> (T, dim) with ``n_heads`` heads of dim / n_heads,
    the query, key, value and output projections ``wq``, ``wk``, ``wv``, ``wo`` (dim, dim) with biases
    ``bq`` ... ``bo`` (dim,), and with ``causal`` (default) no step attending to a later one (a
    language model's attention)."""

    def __init__(self, dim: int, n_heads: int, causal: bool = True, name: str | None = None) -> None:
        super().__init__(name)
        self.dim, self.n_heads = check_int("dim", dim), check_int("n_heads", n_heads)
        if self.dim % self.n_heads:
            raise ValueError(f"dim ({dim}) must be a multiple of n_heads ({n_heads})")
        self.causal = bool(causal)
        self.param_shapes = {f"{kind}{p}": (self.dim, self.dim) if kind == "w" else (self.dim,)
                             for p in "qkvo" for kind in "wb"}

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(input_shape) != 2 or input_shape[1] != self.dim:
            self._fail(input_shape, f"a sequence (T, {self.dim})")
        return input_shape

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return uniform_init(rng, shape, self.dim) if pname.startswith("w") else np.zeros(shape, np.float32)

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        n, steps, dim = x.shape
        heads, d_head = self.n_heads, dim // self.n_heads

        def split(p: str) -> Tensor:  # (n, T, dim) -> (n, heads, T, d_head)
            y = F.linear(x, params[f"w{p}"], params[f"b{p}"])
            return F.permute(F.reshape(y, n, steps, heads, d_head), 0, 2, 1, 3)

        out = F.attention(split("q"), split("k"), split("v"), self.causal)
        merged = F.reshape(F.permute(out, 0, 2, 1, 3), n, steps, dim)
        return F.linear(merged, params["wo"], params["bo"])

    def get_config(self) -> dict:
        return {**super().get_config(), "dim": self.dim, "n_heads": self.n_heads, "causal": self.causal}


class Embedding(Layer):
    """Token ids (T,) -> their vectors (T, embedding_dim): row ``id`` of ``weight`` (num_embeddings,
    embedding_dim), initialised N(0, 1) as in PyTorch. Takes int arrays of ids in [0, num_embeddings);
    it must be a model's first layer."""

    input_dtype = "int32"

    def __init__(self, num_embeddings: int, embedding_dim: int, name: str | None = None) -> None:
        super().__init__(name)
        self.num_embeddings = check_int("num_embeddings", num_embeddings)
        self.embedding_dim = check_int("embedding_dim", embedding_dim)
        self.param_shapes = {"weight": (self.num_embeddings, self.embedding_dim)}

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(input_shape) != 1:
            self._fail(input_shape, "a sequence of ids (T,)")
        return (input_shape[0], self.embedding_dim)

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    def check_input(self, x: np.ndarray) -> None:
        lo, hi = int(x.min()), int(x.max())
        if lo < 0 or hi >= self.num_embeddings:
            raise ValueError(f"token ids must be in [0, {self.num_embeddings}) for {self!r}, got range [{lo}, {hi}]")

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        return F.embedding(x, params["weight"])

    def get_config(self) -> dict:
        return {**super().get_config(), "num_embeddings": self.num_embeddings, "embedding_dim": self.embedding_dim}


class GlobalAveragePooling1D(Layer):
    """The mean over the steps of a sequence: (T, features) -> (features,) (Keras's layer of that name)."""

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(input_shape) != 2:
            self._fail(input_shape, "a sequence (T, features)")
        return (input_shape[1],)

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        n, _, features = x.shape
        return F.reshape(F.mean(F.permute(x, 0, 2, 1)), n, features)


class GlobalAveragePooling2D(Layer):
    """The mean over the positions of an image: (channels, h, w) -> (channels,) (Keras's layer of that
    name for channels-first images; PyTorch's AdaptiveAvgPool2d(1) then Flatten)."""

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(input_shape) != 3:
            self._fail(input_shape, "an image (channels, height, width)")
        return (input_shape[0],)

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        n, c, h, w = x.shape
        return F.reshape(F.mean(F.reshape(x, n, c, h * w)), n, c)


class Dropout(Layer):
    """Zeroes each value with probability ``rate`` during training and scales the others by
    1 / (1 - rate); the identity in predict, evaluate and validation (PyTorch's Dropout). ggml has no
    random numbers: fit draws a new mask for every training step from a generator seeded by fit's
    ``seed`` and the epoch (so resuming from a checkpoint draws the same masks)."""

    def __init__(self, rate: float = 0.5, name: str | None = None) -> None:
        super().__init__(name)
        self.rate = check_number("rate", rate, 0.0, 1.0, hi_open=True)

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        self.step_inputs = {"mask": tuple(input_shape)} if self.rate > 0 else {}
        return input_shape

    def fill_step_input(self, name: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        keep = rng.random(shape, dtype=np.float32) >= self.rate
        return keep.astype(np.float32) / np.float32(1.0 - self.rate)

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        return F.mul(x, params["mask"]) if "mask" in params else x

    def get_config(self) -> dict:
        return {**super().get_config(), "rate": self.rate}


class _LastAxisNorm(Layer):
    """What the normalisations over the last axis share: its size, ``eps``, and an optional learnt
    affine part (``weight`` starting at ones, ``bias`` at zeros)."""

    def __init__(self, normalized_shape: int, eps: float, elementwise_affine: bool, name: str | None,
                 affine_params: tuple[str, ...]) -> None:
        super().__init__(name)
        self.normalized_shape = check_int("normalized_shape", normalized_shape)
        self.eps = check_number("eps", eps, 0.0, math.inf, lo_open=True)
        self.elementwise_affine = bool(elementwise_affine)
        self.param_shapes = {p: (self.normalized_shape,) for p in affine_params} if self.elementwise_affine else {}

    def output_shape(self, input_shape: tuple[int, ...]) -> tuple[int, ...]:
        if not input_shape or input_shape[-1] != self.normalized_shape:
            self._fail(input_shape, f"last axis of size {self.normalized_shape}")
        return input_shape

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        return np.ones(shape, np.float32) if pname == "weight" else np.zeros(shape, np.float32)

    def get_config(self) -> dict:
        return {**super().get_config(), "normalized_shape": self.normalized_shape, "eps": self.eps,
                "elementwise_affine": self.elementwise_affine}


class LayerNorm(_LastAxisNorm):
    """Layer normalisation over the last axis with learnt ``weight`` (ones) and ``bias`` (zeros)."""

    def __init__(self, normalized_shape: int, eps: float = 1e-5, elementwise_affine: bool = True,
                 name: str | None = None) -> None:
        super().__init__(normalized_shape, eps, elementwise_affine, name, ("weight", "bias"))

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        y = F.layer_norm(x, self.eps)
        if self.elementwise_affine:
            y = F.add(F.mul(y, params["weight"]), params["bias"])
        return y


class RMSNorm(_LastAxisNorm):
    """Root-mean-square normalisation over the last axis, x / sqrt(mean(x^2) + eps), times a learnt
    ``weight`` (ones) (PyTorch's RMSNorm, LLaMA's norm)."""

    def __init__(self, normalized_shape: int, eps: float = 1e-6, elementwise_affine: bool = True,
                 name: str | None = None) -> None:
        super().__init__(normalized_shape, eps, elementwise_affine, name, ("weight",))

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        y = F.rms_norm(x, self.eps)
        return F.mul(y, params["weight"]) if self.elementwise_affine else y

for _cls in (Linear, Conv2d, Conv1d, MaxPool2d, AvgPool2d, Flatten, Reshape, ReLU, Sigmoid, Tanh, GELU, SiLU, Softmax,
             LayerNorm, RMSNorm, Embedding, GlobalAveragePooling1D, GlobalAveragePooling2D, Dropout,
             MultiHeadAttention):
    register(_cls)
