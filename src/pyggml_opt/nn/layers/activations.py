"""Element-wise activations as layers."""
from __future__ import annotations

from typing import Callable

from .. import ops as F
from ..ops import Tensor
from .base import Layer


def _activation(name: str, fn: Callable[[Tensor], Tensor], doc: str) -> type[Layer]:
    class _Act(Layer):
        __doc__ = doc
        keeps_mask = True
        decoding = "steps"

        def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
            return fn(x)

    _Act.__name__ = _Act.__qualname__ = name
    return _Act


ReLU = _activation("ReLU", F.relu, "max(x, 0), element-wise.")
Sigmoid = _activation("Sigmoid", F.sigmoid, "1 / (1 + exp(-x)) (ggml_sigmoid; its backward pass is vendor patch 0016).")
Tanh = _activation("Tanh", F.tanh, "tanh(x) (ggml_tanh; its backward pass is vendor patch 0016).")
GELU = _activation("GELU", F.gelu, "GELU, tanh approximation (PyTorch's approximate=\"tanh\"): ggml_gelu.")
SiLU = _activation("SiLU", F.silu, "x * sigmoid(x) (ggml_silu).")
Softmax = _activation("Softmax", F.softmax, "Softmax over the feature axis. Do not put it before a "
                      "cross_entropy loss: ggml's cross-entropy takes logits and applies softmax itself.")
