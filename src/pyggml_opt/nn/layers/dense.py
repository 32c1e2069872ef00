"""Layers on feature vectors and their shapes: Linear, Dropout, Flatten, Reshape, the gated MLPs."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...checks import check_choice, check_int, check_number
from .. import ops as F
from ..ops import Tensor
from ..params import uniform_init
from ..shapes import MAX_SAMPLE_AXES
from .base import Layer, LayerShapes
from .block import Block


class Linear(Layer):
    """y = x W^T + b: (in_features,) -> (out_features,), or each step of a sequence (T, in_features) ->
    (T, out_features). ``weight`` (out, in), ``bias`` (out,).

    With ``lora_rank`` r > 0 a low-rank adapter (LoRA, as PEFT's and Keras's ``enable_lora``) adds
    ``lora_scale`` * B A x, ``lora_a`` (r, in) made as PEFT makes it (Kaiming-uniform: U(+-1/sqrt(in))),
    ``lora_b`` (out, r) zeros, so that the adapted layer starts as the layer; ``lora_scale`` is
    ``lora_alpha`` / r (rsLoRA: / sqrt(r)). ``lora_dropout`` drops the adapter's input in training
    (the layer's own input goes through whole). ``Network.enable_lora`` sets these on chosen layers."""

    keeps_mask = True
    decoding = "steps"
    quantizable = frozenset({"weight"})

    def __init__(self, in_features: int, out_features: int, bias: bool = True, name: str | None = None,
                 lora_rank: int = 0, lora_alpha: float | None = None, lora_dropout: float = 0.0,
                 rslora: bool = False) -> None:
        super().__init__(name)
        self.in_features = check_int("in_features", in_features)
        self.out_features = check_int("out_features", out_features)
        self.bias = bool(bias)
        self.lora_rank = check_int("lora_rank", lora_rank, 0, min(self.in_features, self.out_features))
        self.lora_alpha = float(self.lora_rank) if lora_alpha is None else check_number("lora_alpha", lora_alpha, 0.0, float("inf"))
        self.lora_dropout = check_number("lora_dropout", lora_dropout, 0.0, 1.0, hi_open=True)
        self.rslora = bool(rslora)

    @property
    def lora_scale(self) -> float:
        """What the adapter's product is multiplied by: alpha / rank (rsLoRA: alpha / sqrt(rank))."""
        if not self.lora_rank:
            return 0.0
        return self.lora_alpha / (self.lora_rank ** 0.5 if self.rslora else self.lora_rank)

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if not input_shape or input_shape[-1] != self.in_features or len(input_shape) > 2:
            self._fail(input_shape, f"({self.in_features},), or (steps, {self.in_features}) for a sequence; add "
                                    "Flatten() before it for images")
        params: dict[str, tuple[int, ...]] = {"weight": (self.out_features, self.in_features)}
        if self.bias:
            params["bias"] = (self.out_features,)
        if self.lora_rank:
            params.update(lora_a=(self.lora_rank, self.in_features), lora_b=(self.out_features, self.lora_rank))
        steps = {"lora_mask": tuple(input_shape)} if self.lora_rank and self.lora_dropout > 0 else {}
        return LayerShapes((*input_shape[:-1], self.out_features), params, step_inputs=steps)

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        if pname == "lora_b":
            return np.zeros(shape, np.float32)
        return uniform_init(rng, shape, self.in_features)

    def fill_step_input(self, name: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return dropout_mask(rng, shape, self.lora_dropout)

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        y = F.linear(x, params["weight"], params.get("bias"))
        if "lora_a" not in params:
            return y
        inner = F.mul(x, params["lora_mask"]) if "lora_mask" in params else x
        # scaled at rank width: r values a token, not out (the same product up to rounding)
        low = F.linear(F.scale(F.linear(inner, params["lora_a"]), self.lora_scale), params["lora_b"])
        return F.add(y, low)

    def get_config(self) -> dict:
        config = {**super().get_config(), "in_features": self.in_features, "out_features": self.out_features,
                  "bias": self.bias}
        if self.lora_rank:
            config.update(lora_rank=self.lora_rank, lora_alpha=self.lora_alpha, lora_dropout=self.lora_dropout,
                          rslora=self.rslora)
        return config


def dropout_mask(rng: np.random.Generator, shape: tuple[int, ...], rate: float) -> np.ndarray:
    """A dropout mask: 0 with probability ``rate``, else 1 / (1 - rate) (float32)."""
    keep = rng.random(shape, dtype=np.float32) >= rate
    return keep.astype(np.float32) / np.float32(1.0 - rate)


class Dropout(Layer):
    """Zeroes each value with probability ``rate`` during training and scales the others by
    1 / (1 - rate); the identity in predict, evaluate and validation (PyTorch's Dropout). ggml has no
    random numbers: fit draws a new mask for every training step from a generator seeded by fit's
    ``seed`` and the epoch (so resuming from a checkpoint draws the same masks)."""

    keeps_mask = True
    decoding = "steps"

    def __init__(self, rate: float = 0.5, name: str | None = None) -> None:
        super().__init__(name)
        self.rate = check_number("rate", rate, 0.0, 1.0, hi_open=True)

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        return LayerShapes(tuple(input_shape), step_inputs={"mask": tuple(input_shape)} if self.rate > 0 else {})

    def fill_step_input(self, name: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        return dropout_mask(rng, shape, self.rate)

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        return F.mul(x, params["mask"]) if "mask" in params else x

    def get_config(self) -> dict:
        return {**super().get_config(), "rate": self.rate}


class Flatten(Layer):
    """(d1, d2, ...) -> (d1*d2*...,), in numpy (C) order, as torch.nn.Flatten."""

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        return LayerShapes((int(np.prod(input_shape)),))

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

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if int(np.prod(input_shape)) != int(np.prod(self.shape)):
            self._fail(input_shape, f"{int(np.prod(self.shape))} values per sample to reshape into {self.shape}")
        return LayerShapes(self.shape)

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        return F.reshape(x, x.shape[0], *self.shape)

    def get_config(self) -> dict:
        return {**super().get_config(), "shape": list(self.shape)}


# a gated MLP's activations: Llama's SiLU (SwiGLU), Gemma's GELU in the tanh approximation (GeGLU)
GATE_ACTIVATIONS = {"silu": F.silu, "gelu_tanh": F.gelu}


class GatedMLP(Block):
    """A gated feed-forward network: down(act(gate(x)) * up(x)), (in,) or (T, in) -> same shape, with
    ``Linear`` children without biases ``w_gate`` and ``w_up`` (hidden, dim) and ``w_down`` (dim, hidden);
    ``activation`` "silu" (SwiGLU: Llama's, Qwen's) or "gelu_tanh" (GeGLU: Gemma's)."""

    keeps_mask = True
    decoding = "steps"

    def __init__(self, dim: int, hidden: int, activation: str = "silu", name: str | None = None) -> None:
        super().__init__(name)
        self.dim, self.hidden = check_int("dim", dim), check_int("hidden", hidden)
        self.activation = check_choice("activation", activation, tuple(GATE_ACTIVATIONS))
        self.children = {"w_gate": Linear(self.dim, self.hidden, False), "w_up": Linear(self.dim, self.hidden, False),
                         "w_down": Linear(self.hidden, self.dim, False)}

    def infer(self, input_shape: tuple[int, ...]) -> LayerShapes:
        if not input_shape or input_shape[-1] != self.dim or len(input_shape) > 2:
            self._fail(input_shape, f"({self.dim},) or (steps, {self.dim})")
        hidden = (*input_shape[:-1], self.hidden)
        return self.infer_children({"w_gate": input_shape, "w_up": input_shape, "w_down": hidden}, tuple(input_shape))

    def legacy_names(self) -> dict[str, str]:
        # raw parameters before the projections were Linear children
        return {f"{p}.weight": p for p in self.children}

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        gate, up = self.call("w_gate", x, params), self.call("w_up", x, params)
        # SiLU's gating is one ggml node (ops.swiglu: less training memory); GELU's has no backward there
        hidden = F.swiglu(gate, up) if self.activation == "silu" else F.mul(GATE_ACTIVATIONS[self.activation](gate), up)
        return self.call("w_down", hidden, params)

    def get_config(self) -> dict:
        return {**super().get_config(), "dim": self.dim, "hidden": self.hidden, "activation": self.activation}


class SwiGLU(GatedMLP):
    """Llama's feed-forward network: a ``GatedMLP`` with SiLU, down(silu(gate(x)) * up(x))."""

    def __init__(self, dim: int, hidden: int, name: str | None = None) -> None:
        super().__init__(dim, hidden, "silu", name)

    def get_config(self) -> dict:
        config = super().get_config()
        del config["activation"]
        return config
