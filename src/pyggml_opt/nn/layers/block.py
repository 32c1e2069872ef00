"""``Block``: a layer made of named sublayers, whose parameters and step inputs it owns as
``<sublayer>.<name>`` (so a model names them ``<layer>.<sublayer>.<name>``, as PyTorch's modules do)."""
from __future__ import annotations

import numpy as np

from ..ops import Tensor
from .base import Layer, LayerShapes, combined, own_tensors


class Block(Layer):
    """Base class of composite layers. A subclass creates its sublayers in ``__init__`` (``children``,
    name -> Layer), returns ``infer_children(...)`` from ``infer`` with the input shape each sublayer
    sees, and applies them in ``forward`` with ``call``. In the training graph (``forward_train``)
    ``call`` runs the sublayers' training forms; a padding mask reaches the sublayers that use it."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__(name)
        self.children: dict[str, Layer] = {}
        self._updates: list[Tensor] | None = None  # set while forward_train builds the training graph

    def infer_children(self, inputs: dict[str, tuple[int, ...]], output: tuple[int, ...]) -> LayerShapes:
        """The block's shapes: each sublayer inferred on its input shape (``inputs``: child name -> input
        shape), its parameters, buffers and step inputs under the child's name; ``output``, the block's."""
        return combined([(f"{child}.", self.children[child].infer(shape)) for child, shape in inputs.items()], output)

    @property
    def quantizable(self) -> frozenset[str]:  # type: ignore[override]  # the sublayers' own, by child name
        return frozenset(f"{child}.{name}" for child, layer in self.children.items() for name in layer.quantizable)

    def legacy_names(self) -> dict[str, str]:  # the sublayers' own, by child name
        return {f"{child}.{new}": f"{child}.{old}" for child, layer in self.children.items()
                for new, old in layer.legacy_names().items()}

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
