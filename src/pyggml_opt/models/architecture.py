"""What the language-model builders (``gpt``, ``llama``) share: telling whether a model is exactly
what a builder makes from some hyperparameters, and, when it is not, which layer differs."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ..checks import check_bool, check_int
from ..nn import Network, serialize
from ..nn.layers import Embedding, Layer
from ..nn.losses import CrossEntropy
from .model import Sequential

LOSS = CrossEntropy.name  # what a language model trains with: the next id of every step
Builder = Callable[..., Sequential]
Guess = Callable[[Network], "dict[str, Any] | None"]  # hyperparameters read off a model's layers, unchecked


# longer windows are no model's: every graph is that many steps long, attention's scores the square
# (a gpt's position table of 2**40 rows was a MemoryError of 64 TiB when built; a file claiming more is corrupt)
MAX_CONTEXT = 1 << 20


def check_context(context: object) -> int:
    """A language model's window length, in [1, MAX_CONTEXT]."""
    return check_int("context", context, 1, MAX_CONTEXT)


TIED = {"head.weight": "tok.weight"}  # a language model's output layer that uses the token embedding


def token_embedding(vocab_size: int, dim: int, tie_embeddings: bool) -> Embedding:
    """A language model's token embedding "tok"; when the output layer shares it, initialised with
    standard deviation 1 / sqrt(dim), so that the first logits are about 1 in size (N(0, 1), an
    embedding's default, made them sqrt(dim): a llama of width 64 started at a loss of 30 nats)."""
    return Embedding(vocab_size, dim, name="tok", init_std=dim ** -0.5 if tie_embeddings else 1.0)


def language_model(layers: list[Layer], context: int, tie_embeddings: bool = False, build: bool = True) -> Sequential:
    """A Sequential of ``layers`` taking windows of ``context`` ids, trained with cross-entropy; with
    ``tie_embeddings`` its output layer "head" uses the token embedding "tok" as its weight. Built
    (random weights) unless ``build`` is False: then the architecture alone, for
    ``build_with_weights((context,), weights)`` (a file's weights) or a comparison of configurations."""
    build = check_bool("build", build)
    model = Sequential(layers, input_shape=(context,) if build else None, tied=TIED if tie_embeddings else None)
    model.loss = LOSS
    return model


class Parts(NamedTuple):
    """What a language model's hyperparameters are read from."""

    embedding: Embedding
    blocks: list[Any]  # of the builder's block type
    head: Layer        # the last layer
    context: int


def ties_embeddings(model: Network) -> bool | None:
    """Whether a language model's output layer uses its token embedding (True), has a weight of its own
    (False), or some other parameters are tied (None: no builder's model)."""
    tied = getattr(model, "tied", {})
    return True if tied == TIED else False if not tied else None


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
        same = serialize(builder(**h, build=False)) == serialize(model)
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
        odd = next(((i, la) for i, la in enumerate(model.layers) if not isinstance(la, kinds[:1] if i == 0 else kinds[1:])),
                   None)
        if odd is None:  # every layer is of a kind a builder uses, but the blocks are missing
            return f"it has no blocks: a {what} is made of {outline}"
        return f"layer {odd[0]} ({odd[1]!r} named {odd[1].name!r}) does not map: a {what} is made of {outline}"
    try:
        reference = builder(**h, build=False).layers if h is not None else []
    except ValueError as exc:
        return f"its hyperparameters do not make a {what} ({exc})"
    if ties_embeddings(model) is None:
        return f"its tied parameters {model.tied} are not a {what}'s (tie_embeddings ties {TIED})"
    for i, layer in enumerate(model.layers):
        if i >= len(reference) or serialize(layer) != serialize(reference[i]):
            want = f"{reference[i]!r} named {reference[i].name!r}" if i < len(reference) else "no layer"
            return f"layer {i} ({layer!r} named {layer.name!r}) does not map: a {what} has {want} there"
    if len(reference) > len(model.layers):
        return f"it lacks a {what}'s layer {len(model.layers)} ({reference[len(model.layers)]!r})"
    return f"its input shape {model.input_shape} is not a {what}'s"
