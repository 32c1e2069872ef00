"""``LanguageModel``: a ``Sequential`` of a language model's layers that carries the arguments it was
made from (``args``), so that saving, conversion and checks read what it is instead of guessing."""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ...nn import PACKED_ROWS, Tensor, ops, register
from ...nn.layers import Embedding, Layer
from ...nn.layers.base import SequenceState
from ...nn.losses import CrossEntropy
from ...nn.network import NetworkShapes
from ..model import Sequential
from .args import ModelArgs

LOSS = CrossEntropy.name  # what a language model trains with: the next id of every step
TIED = {"head.weight": "tok.weight"}  # the output layer that uses the token embedding


def token_embedding(vocab_size: int, dim: int, tie_embeddings: bool, scale: float = 1.0) -> Embedding:
    """A language model's token embedding "tok" (its rows times ``scale``); when the output layer shares
    it, initialised with standard deviation 1 / sqrt(dim), so that the first logits are about 1 in size
    (N(0, 1), an embedding's default, made them sqrt(dim): a llama of width 64 started at a loss of 30 nats)."""
    return Embedding(vocab_size, dim, name="tok", init_std=dim ** -0.5 if tie_embeddings else 1.0, scale=scale)


@register
class LanguageModel(Sequential):
    """The layers of a language model (ids (n, context) -> logits (n, context, vocab_size)) and the
    ``args`` (a ``ModelArgs``) they were made from. Its configuration is the layers' and the arguments';
    a model file of an earlier version names a plain ``Sequential`` of the same layers instead."""

    def __init__(self, layers: Sequence[Layer], args: ModelArgs, input_shape: Sequence[int] | None = None,
                 tied: Mapping[str, str] | None = None) -> None:
        if not isinstance(args, ModelArgs):
            raise TypeError(f"args must be a ModelArgs, got {type(args).__name__}")
        super().__init__(layers, input_shape, tied)
        self.args = args
        self.loss = LOSS

    @classmethod
    def made(cls, args: ModelArgs, build: bool = True) -> "LanguageModel":
        """The model of ``args`` (``args.layers()``, its output layer tied to the token embedding as the
        arguments say), built for windows of ``args.context`` ids (random weights) unless ``build`` is
        False (``build_with_weights`` then gives it a file's weights, with no random ones first)."""
        return cls(args.layers(), args, (args.context,) if build else None, TIED if args.tie_embeddings else None)

    # ---- packed windows: several documents per sequence (fine-tuning data) --------------------------
    def packed_steps(self, sample_shape: tuple[int, ...]) -> int | None:
        """T for packed windows (3, T) of at most the context's steps: rows of ids, their positions
        (restarting at each document) and their document index (no document attends to another)."""
        packed = len(sample_shape) == 2 and sample_shape[0] == PACKED_ROWS
        return sample_shape[1] if packed and self.built and 0 < sample_shape[1] <= self.args.context else None

    def check_input(self, x: np.ndarray) -> None:
        if x.ndim != 3 or x.shape[1] != PACKED_ROWS:
            return super().check_input(x)
        super().check_input(x[:, 0])
        positions, documents = x[:, 1], x[:, 2]
        if positions.size and (positions.min() < 0 or positions.max() >= self.args.context):
            raise ValueError(f"packed windows' positions (row 1) must be in [0, {self.args.context}), got range "
                             f"[{positions.min()}, {positions.max()}]")
        if documents.size and documents.min() < 0:
            raise ValueError(f"packed windows' document indices (row 2) must be >= 0, got {documents.min()}")

    def _build_shapes(self, input_shape: tuple[int, ...]) -> NetworkShapes:
        steps = self.packed_steps(input_shape)
        return super()._build_shapes((steps,) if steps is not None else input_shape)

    def forward(self, x: Tensor, params: dict[str, Tensor], state: SequenceState | None = None) -> Tensor:
        return self._packed(x, params, None) if x.ndim == 3 else super().forward(x, params, state)

    def forward_train(self, x: Tensor, params: dict[str, Tensor], updates: list[Tensor]) -> Tensor:
        return self._packed(x, params, updates) if x.ndim == 3 else super().forward_train(x, params, updates)

    def _packed(self, x: Tensor, params: dict[str, Tensor], updates: list[Tensor] | None) -> Tensor:
        """The layers over packed windows x (n, 3, T): the ids, the positions their layers see, and the
        documents' attention mask."""
        ids, positions, documents = (ops.select(x, i) for i in range(PACKED_ROWS))
        return self._apply(ids, params, updates, SequenceState(positions=positions,
                                                               documents=ops.document_mask(documents)))

    def get_config(self) -> dict:
        return {**super().get_config(), "args": self.args.to_config()}

    @classmethod
    def from_config(cls, config: dict) -> "LanguageModel":
        if not isinstance(config, dict) or "args" not in config:
            raise ValueError("a LanguageModel configuration needs its args")
        plain = Sequential.from_config({k: v for k, v in config.items() if k != "args"})
        return cls(plain.layers, ModelArgs.from_config(config["args"]), tied=plain.tied or None)

