"""LoRA adapters as llama.cpp's adapter files (what ``convert_lora_to_gguf.py`` writes and
``src/llama-adapter.cpp`` reads, ``--lora`` / llama-cpp-python's ``lora_path``): ``general.architecture``
the base's, ``general.type`` = "adapter", ``adapter.type`` = "lora", ``adapter.lora.alpha``, and for each
adapted base tensor ``<tensor>.lora_a`` (rank, in) and ``<tensor>.lora_b`` (out, rank) in numpy order,
named as the base file names its tensor (``blk.0.attn_q.weight.lora_a``).

llama.cpp scales each pair by alpha / rank, the rank read from the tensors: one alpha serves every
pair, so a pair whose scale differs from the first pair's (another alpha, rsLoRA's alpha / sqrt(rank))
is written with its scale's ratio folded into B, which gives llama.cpp the same product."""
from __future__ import annotations

import json
import os
import re

import numpy as np

from ..core import GGUFFile
from ..nn import Network
from ..nn.lora import ALIASES, add_adapters, linear_layers, lora_settings
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
    """Put LoRA adapters on ``model``, to generate with or to train further (the rest of the model is
    frozen, as ``enable_lora`` leaves it): from a llama.cpp adapter file (``save_adapter``'s, or
    ``convert_lora_to_gguf.py``'s from a PEFT adapter), or from a PEFT adapter directory
    (``adapter_config.json`` + ``adapter_model.safetensors``, as ``peft``'s ``save_pretrained`` writes
    it for a Hugging Face model that llama.cpp's converter turned into the base). Returns the adapted
    layers' paths. ValueError, before the model changes, for a file that is not a LoRA adapter, one
    for another architecture, tensors the model lacks or of other shapes, an A without its B."""
    path = os.fspath(path)
    settings, weights = (read_peft if os.path.isdir(path) else read_adapter_file)(model, path)
    add_adapters(model, settings, weights=weights)
    return list(settings)


def read_adapter_file(model: Network, path: str) -> tuple[dict[str, dict], dict[str, np.ndarray]]:
    """The adapters of a llama.cpp adapter file as ``add_adapters`` takes them (settings by layer path,
    weights by parameter name), checked against ``model``."""
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
    return settings, weights


# a PEFT key of a Hugging Face decoder: "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight"
_PEFT_KEY = re.compile(r"(?:^|\.)layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$")
_SAFETENSORS_TYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


def read_safetensors(path: str) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file as float32 arrays (F32, F16, BF16); ValueError for another
    file or dtype."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        n = int.from_bytes(data[:8], "little")
        header = json.loads(data[8:8 + n])
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            kind = _SAFETENSORS_TYPES[info["dtype"]]
            start, end = info["data_offsets"]
            raw = np.frombuffer(data, kind, count=(end - start) // np.dtype(kind).itemsize, offset=8 + n + start)
            values = (raw.astype(np.uint32) << 16).view(np.float32) if info["dtype"] == "BF16" else raw.astype(np.float32)
            out[name] = values.reshape(info["shape"])
    except (KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path!r} is not a safetensors file of F32 / F16 / BF16 tensors ({exc})") from None
    return out


def read_peft(model: Network, folder: str) -> tuple[dict[str, dict], dict[str, np.ndarray]]:
    """The adapters of a PEFT directory as ``add_adapters`` takes them (settings by layer path, weights
    by parameter name). The rows of a llama's q_proj / k_proj B are permuted as llama.cpp's converter
    permuted the base's q / k rows (its rotary pairs: rope mode "norm")."""
    try:
        with open(os.path.join(folder, "adapter_config.json"), encoding="utf-8") as f:
            config = json.load(f)
        tensors = read_safetensors(os.path.join(folder, "adapter_model.safetensors"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{folder!r} is not a PEFT adapter directory (adapter_config.json, "
                         f"adapter_model.safetensors): {exc}") from None
    if config.get("peft_type", "LORA") != "LORA":
        raise ValueError(f"{folder!r} holds a {config.get('peft_type')!r} adapter, not LoRA")
    layers = linear_layers(model)
    args = getattr(model, "args", None)
    settings: dict[str, dict] = {}
    weights: dict[str, np.ndarray] = {}
    for key, value in tensors.items():
        m = _PEFT_KEY.search(key)
        if m is None:
            raise ValueError(f"{folder!r}: tensor {key!r} adapts nothing this model has")
        block, module, part = m.groups()
        path = next((f"blk{block}.{end}" for end in ALIASES.get(module, ()) if f"blk{block}.{end}" in layers), None)
        if path is None:
            raise ValueError(f"{folder!r}: tensor {key!r} adapts nothing this model has")
        if part == "B" and module in ("q_proj", "k_proj") and getattr(args, "rope_mode", None) == "norm":
            heads = args.n_heads if module == "q_proj" else args.n_kv_heads  # type: ignore[union-attr]
            value = value.reshape(heads, 2, value.shape[0] // heads // 2, -1).swapaxes(1, 2).reshape(value.shape)
        weights[f"{path}.lora_{part.lower()}"] = np.ascontiguousarray(value, np.float32)
        rank = value.shape[0] if part == "A" else value.shape[1]
        alpha = config.get("alpha_pattern", {}).get(module, config.get("lora_alpha", rank))
        settings[path] = {"rank": int(rank), "alpha": float(alpha), "dropout": 0.0,
                          "rslora": bool(config.get("use_rslora", False))}
    missing = sorted(p for p in settings if f"{p}.lora_a" not in weights or f"{p}.lora_b" not in weights)
    if missing or not settings:
        raise ValueError(f"{folder!r}: {'no adapter tensors' if not settings else f'layer {missing[0]!r} lacks A or B'}")
    for path in settings:
        layer, a, b = layers[path], weights[f"{path}.lora_a"], weights[f"{path}.lora_b"]
        if a.shape != (settings[path]["rank"], layer.in_features) or b.shape != (layer.out_features, settings[path]["rank"]):
            raise ValueError(f"{folder!r}: {path!r}'s adapter is {a.shape} / {b.shape}; this model's layer needs "
                             f"(rank, {layer.in_features}) / ({layer.out_features}, rank)")
    return settings, weights
