"""Language models of earlier versions' files and pickles: a plain ``Sequential`` of a builder's layers,
without the arguments a ``LanguageModel`` carries. ``args_of`` reads them off its layers once (the
configurations compared, no weights made); ``why_not`` says why a model does not fit an architecture."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ...nn import Network, serialize
from ...nn.layers import Dropout, Embedding, Layer, LayerNorm, Linear, PositionalEmbedding, RMSNorm, TransformerBlock
from ..model import Sequential
from .args import ModelArgs
from .gpt import GPTArgs
from .llama import LlamaArgs, LlamaBlock
from .model import TIED, LanguageModel
from .table import Architecture


class Family(NamedTuple):
    """How a family's models look: their block type, the arguments read off a model's layers
    (unchecked), the layer kinds in order (for errors)."""

    block: type[Layer]
    guess: Callable[[Sequential, list[Any], Embedding, int], "dict[str, Any]"]
    kinds: tuple[type, ...]


def _guess_gpt(model: Sequential, blocks: list[Any], embedding: Embedding, context: int) -> dict[str, Any]:
    b, head = blocks[0], model.layers[-1]
    return {"vocab_size": embedding.num_embeddings, "context": context, "dim": b.dim, "n_layers": len(blocks),
            "n_heads": b.n_heads, "dropout": b.dropout, "positions": "rope" if b.rope else "learned",
            "head_bias": not isinstance(head, Linear) or head.bias, "tie_embeddings": model.tied == TIED}


def _guess_llama(model: Sequential, blocks: list[Any], embedding: Embedding, context: int) -> dict[str, Any]:
    b = blocks[0]
    return {"vocab_size": embedding.num_embeddings, "context": context, "dim": b.dim, "n_layers": len(blocks),
            "n_heads": b.n_heads, "n_kv_heads": b.n_kv_heads, "ffn_dim": b.ffn_dim, "rope_theta": b.rope_theta,
            "norm_eps": b.eps, "tie_embeddings": model.tied == TIED}


FAMILIES: dict[type[ModelArgs], Family] = {
    GPTArgs: Family(TransformerBlock, _guess_gpt, (Embedding, PositionalEmbedding, Dropout, TransformerBlock, LayerNorm, Linear)),
    LlamaArgs: Family(LlamaBlock, _guess_llama, (Embedding, LlamaBlock, RMSNorm, Linear)),
}


def _guessed(model: Network, args_type: type[ModelArgs]) -> dict[str, Any] | None:
    """The arguments of family ``args_type`` read off a plain Sequential's layers (unchecked), or None."""
    if not isinstance(model, Sequential) or not model.layers or not isinstance(model.layers[0], Embedding) \
            or model.input_shape is None:
        return None
    family = FAMILIES[args_type]
    blocks = [layer for layer in model.layers if isinstance(layer, family.block)]
    return family.guess(model, blocks, model.layers[0], model.input_shape[0]) if blocks else None


def _same_layers(model: Sequential, args: ModelArgs) -> bool:
    return [serialize(la) for la in args.layers()] == [serialize(la) for la in model.layers] and \
        model.tied == (TIED if args.tie_embeddings else {})


def args_of(model: Network) -> ModelArgs | None:
    """A language model's arguments: those a ``LanguageModel`` carries, or, for a plain Sequential that
    is exactly a builder's model (an earlier version's file or pickle), those read off its layers;
    None for any other model."""
    if isinstance(model, LanguageModel):
        return model.args
    for args_type in FAMILIES:
        guessed = _guessed(model, args_type)
        if guessed is None:
            continue
        try:
            args = args_type(**guessed)
        except (TypeError, ValueError):
            continue
        if _same_layers(model, args):  # type: ignore[arg-type]  # _guessed checked it is a Sequential
            return args
    return None


def why_not(model: Network, arch: Architecture) -> str:
    """Why ``model`` cannot be saved as ``arch``: the first layer that does not map, or what else differs."""
    args = args_of(model)
    family = FAMILIES.get(arch.args)  # None: a family with no plain form of earlier versions (gemma3)
    what = arch.name
    outline = ", ".join(k.__name__ for k in family.kinds) if family else f"the layers pgo.models.{arch.args.family} makes"
    if args is not None and not isinstance(args, arch.args):
        return f"a {what} file holds {arch.args.family} models, this is a {args.family}"
    if args is not None:
        fixed = arch.why_not(args)  # an argument the file cannot express: name it and its value there
        if fixed is not None:
            return fixed
        reference, layers = args.replace(**arch.fixed).layers(), model.layers  # type: ignore[attr-defined]
    else:
        if not isinstance(model, Sequential) or family is None:
            return f"a {type(model).__name__} is not a {what} (a Sequential of {outline})"
        guessed = _guessed(model, arch.args)
        if guessed is None:
            # the first layer takes the ids (kinds[0]); the others are of the later kinds
            kinds = family.kinds
            odd = next(((i, la) for i, la in enumerate(model.layers)
                        if not isinstance(la, kinds[:1] if i == 0 else kinds[1:])), None)
            if odd is None:  # every layer is of a kind a builder uses, but the blocks are missing
                return f"it has no blocks: a {what} is made of {outline}"
            return f"layer {odd[0]} ({odd[1]!r} named {odd[1].name!r}) does not map: a {what} is made of {outline}"
        try:
            reference = arch.args(**{**guessed, **arch.fixed}).layers()
        except (TypeError, ValueError) as exc:
            return f"its hyperparameters do not make a {what} ({exc})"
        if model.tied not in ({}, TIED):
            return f"its tied parameters {model.tied} are not a {what}'s (tie_embeddings ties {TIED})"
        layers = model.layers
    for i, layer in enumerate(layers):
        if i >= len(reference) or serialize(layer) != serialize(reference[i]):
            want = f"{reference[i]!r} named {reference[i].name!r}" if i < len(reference) else "no layer"
            return f"layer {i} ({layer!r} named {layer.name!r}) does not map: a {what} has {want} there"
    if len(reference) > len(layers):
        return f"it lacks a {what}'s layer {len(layers)} ({reference[len(layers)]!r})"
    return f"its input shape {model.input_shape} is not a {what}'s"
