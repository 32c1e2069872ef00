"""``Block``: a layer made of named sublayers, whose parameters and step inputs it owns as
``<sublayer>.<name>`` (so a model names them ``<layer>.<sublayer>.<name>``, as PyTorch's modules do)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..ops import Tensor
from .base import Layer, LayerShapes, SequenceState, combined, own_tensors, run_layer


class Block(Layer):
    """Base class of composite layers. A subclass creates its sublayers in ``__init__`` (``children``,
    name -> Layer), returns ``infer_children(...)`` from ``infer`` with the input shape each sublayer
    sees, and applies them in ``forward`` with ``call``. In the training graph (``forward_train``)
    ``call`` runs the sublayers' training forms. A block over sequences takes ``state`` in ``forward``
    and hands it to ``call``, which gives each sublayer its part (``SequenceState.within``)."""

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

    def forward_train(self, x: Tensor, params: dict[str, Tensor], updates: list[Tensor], **state: Any) -> Tensor:
        self._updates = updates
        try:
            return self.forward(x, params, **state)
        finally:
            self._updates = None

    def init(self, pname: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        child, p = pname.split(".", 1)
        return self.children[child].init(p, shape, rng)

    def fill_step_input(self, name: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        child, p = name.split(".", 1)
        return self.children[child].fill_step_input(p, rng, shape)

    def call(self, child: str, x: Tensor, params: dict[str, Tensor], state: SequenceState | None = None) -> Tensor:
        """Sublayer ``child`` applied to ``x``, given this block's ``params`` (step inputs included,
        where the graph has them) and ``state`` (what the block's ``forward`` was given)."""
        own = own_tensors(f"{child}.", params)
        inner = (state or SequenceState()).within(f"{child}.")
        return run_layer(self.children[child], x, own, inner, self._updates)
