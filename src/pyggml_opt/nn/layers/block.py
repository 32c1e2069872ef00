"""``Block``: a layer made of named sublayers, whose parameters and step inputs it owns as
``<sublayer>.<name>`` (so a model names them ``<layer>.<sublayer>.<name>``, as PyTorch's modules do)."""
from __future__ import annotations

import numpy as np

from ..ops import Tensor
from .base import Layer, own_tensors


class Block(Layer):
    """Base class of composite layers. A subclass creates its sublayers in ``__init__`` (``children``,
    name -> Layer), calls ``build_children`` from ``output_shape`` with the input shape each sublayer
    sees, and applies them in ``forward`` with ``call``. In the training graph (``forward_train``)
    ``call`` runs the sublayers' training forms; a padding mask reaches the sublayers that use it."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.children: dict[str, Layer] = {}
        self._updates: list[Tensor] | None = None  # set while forward_train builds the training graph

    def build_children(self, shapes: dict[str, tuple[int, ...]]) -> None:
        """Shape-check each sublayer on its input shape (``shapes``: child name -> input shape), then
        gather their parameters and step inputs under the child's name."""
        for child, shape in shapes.items():
            self.children[child].output_shape(shape)
        self.param_shapes = {f"{c}.{p}": s for c, layer in self.children.items() for p, s in layer.param_shapes.items()}
        self.buffer_shapes = {f"{c}.{p}": s for c, layer in self.children.items() for p, s in layer.buffer_shapes.items()}
        self.step_inputs = {f"{c}.{p}": s for c, layer in self.children.items() for p, s in layer.step_inputs.items()}

    def forward_train(self, x: Tensor, params: dict[str, Tensor], updates: list[Tensor]) -> Tensor:
        self._updates = updates
        try:
            return self.forward(x, params)
        finally:
            self._updates = None

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        child, p = pname.split(".", 1)
        return self.children[child].init(p, shape, rng)

    def fill_step_input(self, name: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        child, p = name.split(".", 1)
        return self.children[child].fill_step_input(p, rng, shape)

    def call(self, child: str, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        """Sublayer ``child`` applied to ``x``, given this block's ``params`` (step inputs included,
        where the graph has them)."""
        layer = self.children[child]
        own = own_tensors(layer, f"{child}.", params, params.get("padding"))
        return layer.forward(x, own) if self._updates is None else layer.forward_train(x, own, self._updates)
