"""``LanguageModel``: a ``Sequential`` of a language model's layers that carries the arguments it was
made from (``args``), so that saving, conversion and checks read what it is instead of guessing."""
from __future__ import annotations

from typing import Mapping, Sequence

from ...nn import register
from ...nn.layers import Embedding, Layer
from ...nn.losses import CrossEntropy
from ..model import Sequential
from .args import ModelArgs

LOSS = CrossEntropy.name  # what a language model trains with: the next id of every step
TIED = {"head.weight": "tok.weight"}  # the output layer that uses the token embedding


def token_embedding(vocab_size: int, dim: int, tie_embeddings: bool) -> Embedding:
    """A language model's token embedding "tok"; when the output layer shares it, initialised with
    standard deviation 1 / sqrt(dim), so that the first logits are about 1 in size (N(0, 1), an
    embedding's default, made them sqrt(dim): a llama of width 64 started at a loss of 30 nats)."""
    return Embedding(vocab_size, dim, name="tok", init_std=dim ** -0.5 if tie_embeddings else 1.0)


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

    def get_config(self) -> dict:
        return {**super().get_config(), "args": self.args.to_config()}

    @classmethod
    def from_config(cls, config: dict) -> "LanguageModel":
        if not isinstance(config, dict) or "args" not in config:
            raise ValueError("a LanguageModel configuration needs its args")
        plain = Sequential.from_config({k: v for k, v in config.items() if k != "args"})
        return cls(plain.layers, ModelArgs.from_config(config["args"]), tied=plain.tied or None)
