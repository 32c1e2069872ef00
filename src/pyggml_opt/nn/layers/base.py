"""The ``Layer`` base class every layer of ``Sequential`` derives from."""
from __future__ import annotations

from typing import NoReturn

import numpy as np

from ..ops import Tensor


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
