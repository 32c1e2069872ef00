"""LoRA adapters as llama.cpp's adapter files (what ``convert_lora_to_gguf.py`` writes and
``src/llama-adapter.cpp`` reads, ``--lora`` / llama-cpp-python's ``lora_path``): ``general.architecture``
the base's, ``general.type`` = "adapter", ``adapter.type`` = "lora", ``adapter.lora.alpha``, and for each
adapted base tensor ``<tensor>.lora_a`` (rank, in) and ``<tensor>.lora_b`` (out, rank) in numpy order,
named as the base file names its tensor (``blk.0.attn_q.weight.lora_a``).

llama.cpp scales each pair by alpha / rank, the rank read from the tensors: one alpha serves every
pair, so a pair whose scale differs from the first pair's (another alpha, rsLoRA's alpha / sqrt(rank))
is written with its scale's ratio folded into B, which gives llama.cpp the same product."""
from __future__ import annotations

import os

import numpy as np

from ..core import GGUFFile
from ..nn import Network
from ..nn.lora import add_adapters, linear_layers, lora_settings
from .formats import format_of

LAYOUT = "llama.cpp"


def _base_names(model: Network) -> tuple[str, dict[str, str]]:
    """The model's llama.cpp architecture and, for each of its Linear layers' weights that the file
    names alone, the file's tensor name (layer path -> "blk.0.attn_q.weight")."""
    fmt = format_of(model, LAYOUT)
    if fmt is None:
        raise ValueError("llama.cpp's adapter files are for models that save in llama.cpp's layout (pgo.models.llama, "
                         "pgo.models.gpt, or a model loaded from such a file)")
    names: dict[str, str] = {}
    for path in linear_layers(model):
        weight = f"{path}.weight"
        try:
            mapped = fmt.to_tensors({weight: np.zeros(0, np.float32)})
        except (KeyError, StopIteration):
            continue  # fused into a file tensor with others (gpt2's attn_qkv): no adapter of its own there
        if len(mapped) == 1:
            names[path] = next(iter(mapped))
    return fmt.architecture, names


def save_adapter(model: Network, path: str | os.PathLike[str]) -> None:
    """Write ``model``'s LoRA adapters (``enable_lora``) as llama.cpp's LoRA GGUF (see the module), which
    llama.cpp applies to the base file with ``--lora`` and llama-cpp-python with ``lora_path``. The file
    is replaced atomically. ValueError for a model without adapters, one that llama.cpp's layout does not
    hold, or an adapter on a tensor the layout fuses with others."""
    settings = lora_settings(model)
    if not settings:
        raise ValueError("the model has no LoRA adapters: enable_lora(...) and fit first")
    arch, names = _base_names(model)
    fused = sorted(set(settings) - names.keys())
    if fused:
        raise ValueError(f"the {arch} layout stores {fused[0]!r} fused with other tensors: llama.cpp's adapter file "
                         "cannot hold an adapter on it; adapt the others")
    weights = model.get_weights()
    first = next(iter(settings.values()))
    alpha = _scale(first) * first["rank"]
    with GGUFFile() as f:
        f.set("general.architecture", arch)
        f.set("general.type", "adapter")
        f.set("adapter.type", "lora")
        f.set("adapter.lora.alpha", np.float32(alpha))
        for layer, setting in settings.items():
            fold = np.float32(_scale(setting) * setting["rank"] / alpha)
            f.add_tensor(f"{names[layer]}.lora_a", np.ascontiguousarray(weights[f"{layer}.lora_a"], np.float32))
            f.add_tensor(f"{names[layer]}.lora_b", np.ascontiguousarray(weights[f"{layer}.lora_b"] * fold, np.float32))
        f.write(path)


def _float32(w: object) -> np.ndarray:
    """A tensor of the file as float32 (convert_lora_to_gguf.py writes F16 or BF16 by default)."""
    return np.array(w.dequantize() if hasattr(w, "dequantize") else w, np.float32)


def _scale(setting: dict) -> float:
    return float(setting["alpha"]) / (np.sqrt(setting["rank"]) if setting["rslora"] else setting["rank"])


def load_adapter(model: Network, path: str | os.PathLike[str]) -> list[str]:
    """Put the LoRA adapters of a llama.cpp adapter file (``save_adapter``'s, or
    ``convert_lora_to_gguf.py``'s from a PEFT adapter) on ``model``, to generate with or to train further
    (the rest of the model is frozen, as ``enable_lora`` leaves it). Returns the adapted layers' paths.
    ValueError, before the model changes, for a file that is not a LoRA adapter, one for another
    architecture, tensors the model lacks or of other shapes, a lora_a without its lora_b."""
    path = os.fspath(path)
    arch, names = _base_names(model)
    by_file = {v: k for k, v in names.items()}
    layers = linear_layers(model)
    with GGUFFile.read(path) as f:
        kind = (f.get("general.type"), f.get("adapter.type"))
        if kind != ("adapter", "lora"):
            raise ValueError(f"{path!r} is not a LoRA adapter (general.type {kind[0]!r}, adapter.type {kind[1]!r})")
        if f.get("general.architecture") != arch:
            raise ValueError(f"{path!r} adapts a {f.get('general.architecture')!r} model, this one is {arch!r}")
        alpha = f.get("adapter.lora.alpha")
        tensors = {n: _float32(f.weight(n, 2)) for n in f.tensor_names()}
    if not isinstance(alpha, (int, float)) or not np.isfinite(alpha) or alpha < 0:
        raise ValueError(f"{path!r}: adapter.lora.alpha is {alpha!r}")
    settings: dict[str, dict] = {}
    weights: dict[str, np.ndarray] = {}
    for name in sorted(tensors):
        base, dot, part = name.rpartition(".")
        if not dot or part not in ("lora_a", "lora_b") or base not in by_file:
            raise ValueError(f"{path!r}: tensor {name!r} adapts nothing this model has (its tensors: "
                             f"{sorted(by_file)[:4]} ...)")
        other = f"{base}.{'lora_b' if part == 'lora_a' else 'lora_a'}"
        if other not in tensors:
            raise ValueError(f"{path!r}: {name!r} has no {other!r}")
        layer = layers[by_file[base]]
        a, b = tensors[f"{base}.lora_a"], tensors[f"{base}.lora_b"]
        rank = a.shape[0]
        if a.shape != (rank, layer.in_features) or b.shape != (layer.out_features, rank):
            raise ValueError(f"{path!r}: {base!r}'s adapter is {a.shape} / {b.shape}; this model's {by_file[base]!r} "
                             f"needs (rank, {layer.in_features}) / ({layer.out_features}, rank)")
        settings[by_file[base]] = {"rank": int(rank), "alpha": float(alpha), "dropout": 0.0, "rslora": False}
        weights[f"{by_file[base]}.lora_a"], weights[f"{by_file[base]}.lora_b"] = a, b
    if not settings:
        raise ValueError(f"{path!r} holds no adapter tensors")
    add_adapters(model, settings, weights=weights)
    return list(settings)
