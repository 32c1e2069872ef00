"""What the language-model builders (``gpt``, ``llama``) share: telling whether a model is exactly
what a builder makes from some hyperparameters, and, when it is not, which layer differs."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ..nn import Network, serialize
from ..nn.layers import Embedding, Layer
from ..nn.losses import CrossEntropy
from .model import Sequential

LOSS = CrossEntropy.name  # what a language model trains with: the next id of every step
Builder = Callable[..., Sequential]
Guess = Callable[[Network], "dict[str, Any] | None"]  # hyperparameters read off a model's layers, unchecked


def language_model(layers: list[Layer], context: int) -> Sequential:
    """A Sequential of ``layers`` taking windows of ``context`` ids, trained with cross-entropy."""
    model = Sequential(layers, input_shape=(context,))
    model.loss = LOSS
    return model


class Parts(NamedTuple):
    """What a language model's hyperparameters are read from."""

    embedding: Embedding
    blocks: list[Any]  # of the builder's block type
    head: Layer        # the last layer
    context: int


def blocks_of(model: Network, block: type[Layer]) -> Parts | None:
    """The parts of a language model with an input shape that starts with an Embedding and has
    ``block`` layers; None otherwise."""
    if not isinstance(model, Sequential) or not model.layers or not isinstance(model.layers[0], Embedding):
        return None
    blocks = [layer for layer in model.layers if isinstance(layer, block)]
    if not blocks or model.input_shape is None:
        return None
    return Parts(model.layers[0], blocks, model.layers[-1], model.input_shape[0])


def hyperparameters_of(model: Network, guess: Guess, builder: Builder) -> dict[str, Any] | None:
    """``builder``'s arguments that rebuild ``model``'s architecture exactly, or None."""
    h = guess(model)
    if h is None:
        return None
    try:
        same = serialize(builder(**h)) == serialize(model)
    except ValueError:
        return None
    return h if same else None


def first_difference(model: Network, guess: Guess, builder: Builder, what: str, kinds: tuple[type, ...]) -> str:
    """Which layer of ``model`` keeps it from being the ``builder``'s model ``what``, whose layers are
    of the types ``kinds`` in that order (for errors)."""
    outline = ", ".join(k.__name__ for k in kinds)
    if not isinstance(model, Sequential):
        return f"a {type(model).__name__} is not a {what} (a Sequential of {outline})"
    h = guess(model)
    if h is None:
        # the first layer takes the ids (kinds[0]); the others are of the later kinds
        i, layer = next(((i, la) for i, la in enumerate(model.layers) if not isinstance(la, kinds[:1] if i == 0 else kinds[1:])),
                        (0, model.layers[0]))
        return f"layer {i} ({layer!r} named {layer.name!r}) does not map: a {what} is made of {outline}"
    try:
        reference = builder(**h).layers if h is not None else []
    except ValueError as exc:
        return f"its hyperparameters do not make a {what} ({exc})"
    for i, layer in enumerate(model.layers):
        if i >= len(reference) or serialize(layer) != serialize(reference[i]):
            want = f"{reference[i]!r} named {reference[i].name!r}" if i < len(reference) else "no layer"
            return f"layer {i} ({layer!r} named {layer.name!r}) does not map: a {what} has {want} there"
    if len(reference) > len(model.layers):
        return f"it lacks a {what}'s layer {len(model.layers)} ({reference[len(model.layers)]!r})"
    return f"its input shape {model.input_shape} is not a {what}'s"
