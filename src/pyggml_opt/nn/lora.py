"""Low-rank adapters (LoRA) on a network's ``Linear`` layers: which layers a target names, and
``enable_lora``, which gives them adapters (``Linear``'s ``lora_rank`` ...) and freezes everything else,
so that training changes the adapters alone (PEFT's ``get_peft_model``, Keras's ``enable_lora``).

Targets name layers as llama.cpp names the base tensors (``attn_q``, ``attn_k``, ``attn_v``,
``attn_output``, ``ffn_gate``, ``ffn_up``, ``ffn_down``), as PEFT names the modules (``q_proj`` ...
``down_proj``), by pyggml_opt's layer paths or their ends (``blk0.attn.wq``, ``attn.wq``), or
``"all-linear"``: every ``Linear`` but the output layer (PEFT's choice).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .layers.block import Block
from .layers.dense import Linear

# llama.cpp's tensor names and PEFT's module names -> the ends of pyggml_opt's layer paths
ALIASES: dict[str, tuple[str, ...]] = {
    "attn_q": ("attn.wq",), "attn_k": ("attn.wk",), "attn_v": ("attn.wv",), "attn_output": ("attn.wo",),
    "ffn_gate": ("ffn.w_gate",), "ffn_up": ("ffn.w_up", "fc1"), "ffn_down": ("ffn.w_down", "fc2"),
}
ALIASES.update({peft: ALIASES[cpp] for peft, cpp in (("q_proj", "attn_q"), ("k_proj", "attn_k"), ("v_proj", "attn_v"),
                                                     ("o_proj", "attn_output"), ("gate_proj", "ffn_gate"),
                                                     ("up_proj", "ffn_up"), ("down_proj", "ffn_down"))})
ALL_LINEAR = "all-linear"


def linear_layers(network: Any) -> dict[str, Linear]:
    """Every ``Linear`` of a sequential ``network``, blocks' sublayers included, by path ("blk0.attn.wq":
    its parameters are "<path>.weight" ...), in the network's order."""
    names, layers = getattr(network, "layer_names", None), getattr(network, "layers", None)
    if names is None or layers is None:
        raise TypeError(f"LoRA needs a model that is a sequence of layers, got a {type(network).__name__}")
    found: dict[str, Linear] = {}
    todo = list(zip(names, layers))
    while todo:
        path, layer = todo.pop(0)
        if isinstance(layer, Linear):
            found[path] = layer
        elif isinstance(layer, Block):
            todo[:0] = [(f"{path}.{child}", sub) for child, sub in layer.children.items()]
    return found


def lora_targets(network: Any, targets: str | Sequence[str]) -> list[str]:
    """The paths of the ``Linear`` layers ``targets`` name (see the module); ValueError for a target that
    names none, listing the model's."""
    layers = linear_layers(network)
    wanted = [targets] if isinstance(targets, str) else list(targets)
    if not wanted or not all(isinstance(t, str) for t in wanted):
        raise TypeError(f"targets must be a name or a list of names, got {targets!r}")
    chosen: set[str] = set()
    for target in wanted:
        if target == ALL_LINEAR:
            last = list(getattr(network, "layer_names", []))[-1:]
            hits = {p for p in layers if p not in last}  # the output layer keeps its weights
        else:
            ends = ALIASES.get(target, (target,))
            hits = {p for p in layers for end in ends if p == end or p.endswith(f".{end}")}
        if not hits:
            raise ValueError(f"LoRA target {target!r} names no Linear layer of this model; it has {sorted(layers)} "
                             f"(or name them {sorted(ALIASES)} or {ALL_LINEAR!r})")
        chosen |= hits
    return [p for p in layers if p in chosen]


def enable_lora(model: Any, rank: int = 8, alpha: float | None = None, targets: str | Sequence[str] = ALL_LINEAR,
                dropout: float = 0.0, rslora: bool = False, seed: int | None = 0) -> list[str]:
    """Give ``model``'s layers that ``targets`` names low-rank adapters of ``rank`` and freeze every other
    parameter, so that ``fit`` trains the adapters alone (PEFT's LoRA): each adapted layer computes
    W x + b + scale B A x, A (rank, in) Kaiming-uniform and B (out, rank) zeros as PEFT makes them (from
    ``seed``), scale = ``alpha`` / rank (rsLoRA: alpha / sqrt(rank); alpha None: rank, a scale of 1), the
    adapter's input dropped at rate ``dropout`` in training. Targets: llama.cpp's tensor names
    ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"), PEFT's module
    names ("q_proj" ... "down_proj"), layer paths ("blk0.attn.wq") or "all-linear" (every Linear but
    the output layer). The model keeps its weights; the adapters are part of its configuration (saved,
    pickled, copied, checkpointed) as parameters ``<layer>.lora_a`` / ``.lora_b``. Returns the adapted
    layers' paths. ValueError for a target that names no layer (listing the model's), a rank above a
    layer's size, or a layer adapted already."""
    model.require_built()
    layers = linear_layers(model)
    paths = lora_targets(model, targets)
    checked = Linear(1, 1, lora_rank=1, lora_alpha=alpha, lora_dropout=dropout, rslora=rslora)  # the argument checks
    setting = {"rank": rank, "alpha": checked.lora_alpha if alpha is not None else rank, "dropout": checked.lora_dropout,
               "rslora": checked.rslora}
    add_adapters(model, {path: dict(setting) for path in paths}, seed)
    return paths


def add_adapters(model: Any, settings: dict[str, dict[str, Any]], seed: int | None = 0,
                 weights: dict[str, np.ndarray] | None = None) -> None:
    """Give the layers of ``settings`` (path -> rank, alpha, dropout, rslora) adapters, their weights
    from ``weights`` (parameter name -> array) or made from ``seed``, and freeze every other parameter;
    the model keeps its weights. ValueError, with the model unchanged, for a layer adapted already or a
    rank above its size."""
    layers = linear_layers(model)
    for path, setting in settings.items():
        layer = layers[path]
        if layer.lora_rank:
            raise ValueError(f"layer {path!r} has an adapter already (rank {layer.lora_rank})")
        size, rank = min(layer.in_features, layer.out_features), setting["rank"]
        if not isinstance(rank, (int, np.integer)) or isinstance(rank, bool) or not 1 <= rank <= size:
            raise ValueError(f"rank must be an int in [1, {size}] for layer {path!r} ({layer.in_features} -> "
                             f"{layer.out_features}), got {rank!r}")
    current = model.get_weights()
    try:
        apply_lora_settings(model, settings)
        assert model.input_shape is not None  # built
        shapes = model.shapes_for(model.input_shape)
        rng = np.random.default_rng(seed)
        fresh = {}
        for name in shapes:  # in the network's order: one seed gives the same adapters
            if name not in current:
                path, pname = name.rsplit(".", 1)
                fresh[name] = layers[path].init(pname, shapes[name], rng) if weights is None else weights[name]
        model.build_with_weights(model.input_shape, {**current, **fresh})
    except BaseException:
        for path in settings:
            _set_lora(layers[path], 0, 0.0, 0.0, False)
        raise
    base = [n for n in current if n not in model.buffer_names() and n not in model.quantized()]
    if base:
        model.freeze(*base)


def merge_lora(model: Any) -> list[str]:
    """Fold each of ``model``'s LoRA adapters into its layer's weight, W + scale B A (in float64, then
    float32), and remove the adapters (PEFT's ``merge_and_unload``): the model computes what it computed
    with them, and saves as a plain model (llama.cpp's layout included). A weight kept quantized becomes
    float32 (``save(..., quantize=...)`` writes it in a quantized type again); the merged weights are
    trainable, the other parameters keep their frozen state. Returns the merged layers' paths;
    ValueError for a model without adapters."""
    settings = lora_settings(model)
    if not settings:
        raise ValueError("the model has no LoRA adapters to merge")
    layers = linear_layers(model)
    weights = model.get_weights()
    merged = {}
    for path in settings:
        w = weights[f"{path}.weight"]
        base = np.asarray(w.dequantize() if hasattr(w, "dequantize") else w, np.float64)
        delta = np.asarray(weights[f"{path}.lora_b"], np.float64) @ np.asarray(weights[f"{path}.lora_a"], np.float64)
        merged[f"{path}.weight"] = (base + layers[path].lora_scale * delta).astype(np.float32)
    kept = {n: w for n, w in weights.items() if not any(n in (f"{p}.lora_a", f"{p}.lora_b") for p in settings)}
    try:
        for path in settings:
            _set_lora(layers[path], 0, 0.0, 0.0, False)
        assert model.input_shape is not None  # built: it has adapters
        model.build_with_weights(model.input_shape, {**kept, **merged})
    except BaseException:
        apply_lora_settings(model, settings)
        raise
    model.unfreeze(*merged)
    return list(settings)


def _set_lora(layer: Linear, rank: int, alpha: float, dropout: float, rslora: bool) -> None:
    layer.lora_rank, layer.lora_alpha, layer.lora_dropout, layer.rslora = rank, alpha, dropout, rslora


def lora_settings(network: Any) -> dict[str, dict[str, Any]]:
    """The adapters of a sequential network's layers, by path (its configuration's "lora" entry: a
    block's configuration does not hold its sublayers')."""
    return {path: {"rank": layer.lora_rank, "alpha": layer.lora_alpha, "dropout": layer.lora_dropout,
                   "rslora": layer.rslora}
            for path, layer in linear_layers(network).items() if layer.lora_rank}


def apply_lora_settings(network: Any, settings: Any) -> None:
    """Give a network's layers the adapters ``lora_settings`` listed (ValueError for a path it lacks or
    bad settings)."""
    if not isinstance(settings, dict):
        raise ValueError(f"a configuration's lora entry must be a dict path -> settings, got {type(settings).__name__}")
    layers = linear_layers(network)
    for path, given in settings.items():
        if path not in layers or not isinstance(given, dict) or set(given) != {"rank", "alpha", "dropout", "rslora"}:
            raise ValueError(f"the configuration's adapter {path!r}: {given!r} fits no Linear layer of the model")
        layer = layers[path]
        checked = Linear(layer.in_features, layer.out_features, lora_rank=given["rank"], lora_alpha=given["alpha"],
                         lora_dropout=given["dropout"], rslora=bool(given["rslora"]))
        _set_lora(layer, checked.lora_rank, checked.lora_alpha, checked.lora_dropout, checked.rslora)
