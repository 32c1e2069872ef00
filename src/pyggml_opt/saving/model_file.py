"""Saving and loading models as GGUF files.

A file holds:
  - ``general.architecture``: "pyggml_opt" (the generic layout) or a registered layout such as ggml's
    "mnist-fc" / "mnist-cnn" (``formats.py``);
  - ``pyggml_opt.config``: the architecture as JSON (``nn.serialize``: class name and configuration,
    layers included), ``pyggml_opt.input_shape`` and ``pyggml_opt.loss`` (the loss's entry,
    ``nn.losses.Loss.entry``: its name, or for a loss function ``custom:<its name>``);
  - one tensor per parameter, float32 or, for a parameter kept quantized, its Q8_0 / Q4_0 blocks, named
    as the model names it (a registered layout may store a tensor differently: mnist-cnn's dense
    weight is in ggml's flattening order; llama.cpp's layouts name and cut them as llama.cpp does);
  - optionally a tokenizer under llama.cpp's ``tokenizer.ggml.*`` keys (``llama_vocab``).
Loading validates every tensor's presence, type and shape before the model gets its weights. Q8_0 /
Q4_0 tensors (``save(..., quantize=)``, or another tool's file) load as parameters kept quantized
(frozen: ``Network.quantized``), which predict, evaluate and generate compute with as they are.

Which layout: ``save(model, path)`` writes pyggml_opt's own (the generic one, or a registered format
such as "pyggml-gpt"); ``save(model, path, tokenizer=tok)`` writes llama.cpp's (``gpt2`` for a gpt,
``llama`` for a llama: files llama.cpp runs, with the tokenizer inside); ``format=`` chooses
explicitly. ``load`` reads every layout back into the same model.
"""
from __future__ import annotations

import json
import os
import warnings
from typing import Collection, Mapping

import numpy as np

from ..checks import check_choice
from ..core import GGUFFile
from ..core.tensor_data import QUANTIZED_TYPES, Quantized, Weight, block_size
from ..text import BPETokenizer, CharTokenizer, vocab_metadata
from ..nn import Network, check_rebuilds, deserialize, serialize
from ..nn.losses import loss_entry
from ..nn.lora import lora_settings
from .formats import GENERIC, LAYOUTS, FileFormat, format_named, format_of, formats_in, known_architectures, read_each

# llama.cpp's general.file_type (llama.h: enum llama_ftype): what most of the weights are stored as (for
# the K-quants its "_S" member: all matrices in the one type)
FILE_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q8_0": 7, "q5_0": 8, "q5_1": 9, "q2_K": 10, "q3_K": 11,
              "q4_K": 14, "q5_K": 16, "q6_K": 18, "iq4_nl": 25, "iq4_xs": 30, "bf16": 32, "tq1_0": 36, "tq2_0": 37,
              "nvfp4": 39, "q1_0": 40, "q2_0": 41}
# the keys every file of save's has, besides its layout's hyperparameters and its tokenizer's
WRITTEN = ("general.architecture", "general.file_type", "pyggml_opt.config", "pyggml_opt.input_shape", "pyggml_opt.loss",
           "pyggml_opt.frozen")
TOKENIZER = "tokenizer."  # the prefix of a tokenizer's keys (llama.cpp's tokenizer.ggml.*, tokenizer.chat_template)
OWN = "pyggml_opt."  # the prefix of the keys pyggml_opt writes for itself
FROZEN = "pyggml_opt.frozen"  # the float32 parameters ``freeze`` kept out of training (JSON list; absent: none)



def config_entry(model: Network) -> str:
    """What a model file says of a model's architecture (``pyggml_opt.config``): its class and
    configuration as JSON, the configuration null where it holds Python code (a FunctionModel)."""
    spec = serialize(model)
    try:
        return json.dumps(spec)
    except TypeError:  # Python callables (FunctionModel): the file keeps the weights, not the code
        return json.dumps({"class": spec["class"], "config": None})


def check_architecture(f: GGUFFile, model: Network, what: str) -> None:
    """ValueError unless the file ``f`` describes ``model``'s architecture: its layout, its configuration
    (class and constructor arguments) and its input shape. Tensor shapes alone do not tell a 2-head
    from a 4-head attention, or learned positions from rotary ones."""
    assert model.input_shape is not None  # built
    layouts = [format_of(model, layout) for layout in LAYOUTS]
    archs = [(layouts[0].architecture if layouts[0] else GENERIC), *(f.architecture for f in layouts[1:] if f)]
    arch = f.get("general.architecture")
    if arch not in archs:
        raise ValueError(f"{what} holds a model of layout {arch!r}, this model saves as {' or '.join(map(repr, archs))}")
    fmt = format_named(arch)
    try:
        theirs = _upgrade(json.loads(f.get("pyggml_opt.config")))
        shape = json.loads(f.get("pyggml_opt.input_shape"))
    except (TypeError, ValueError):
        if fmt is not None:  # a layout from ggml's tools: its build checks its own keys
            return
        raise ValueError(f"{what}: corrupt pyggml_opt metadata (no architecture to compare)") from None
    ours = json.loads(config_entry(model))
    if isinstance(theirs, dict) and theirs.get("class") == "Sequential":
        ours = _as_plain_sequential(ours)
    if theirs != ours:
        raise ValueError(f"{what} was written for another architecture: {_first_difference(theirs, ours)}")
    if shape != list(model.input_shape):
        raise ValueError(f"{what} was written for samples of shape {tuple(shape)}, this model takes "
                         f"{model.input_shape}")


def _as_plain_sequential(spec: dict) -> dict:
    """A language model's configuration as earlier versions wrote it: a Sequential of the same layers,
    without the arguments (``models.LanguageModel``'s ``args``)."""
    config = spec.get("config")
    if isinstance(config, dict) and "args" in config:
        return {"class": "Sequential", "config": {k: v for k, v in config.items() if k != "args"}}
    return spec


def _first_difference(theirs: object, ours: object, where: str = "") -> str:
    """Where two JSON values first differ, as ``path: file value != model value``."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        for key in sorted(theirs.keys() | ours.keys(), key=str):
            if theirs.get(key) != ours.get(key):
                return _first_difference(theirs.get(key), ours.get(key), f"{where}.{key}" if where else str(key))
    if isinstance(theirs, list) and isinstance(ours, list) and len(theirs) == len(ours):
        for i, (a, b) in enumerate(zip(theirs, ours)):
            if a != b:
                return _first_difference(a, b, f"{where}[{i}]")
    return f"{where or 'configuration'}: {json.dumps(theirs)[:200]} in the file, {json.dumps(ours)[:200]} in the model"


def save(model: Network, path: str | os.PathLike[str], extra: dict[str, object] | None = None,
         extra_tensors: dict[str, np.ndarray] | None = None, *,
         tokenizer: BPETokenizer | CharTokenizer | None = None, format: str | None = None,
         quantize: str | None = None, layout: str | None = None) -> None:
    """Write ``model`` to ``path`` (GGUF). The file is replaced atomically.

    format: "pyggml_opt" (pyggml_opt's own layout) or "llama.cpp": a file llama.cpp runs (llama-cli,
       llama-server, llama-cpp-python), a ``gpt`` as llama.cpp's ``gpt2`` architecture, a ``llama`` as
       ``llama``, with the tokenizer inside; ValueError naming the first layer that does not map for
       any other model. Both load back with ``load``. Unless given, "llama.cpp" when a tokenizer is
       given, else the layout of the file the model was read from, else "pyggml_opt" (``layout=``: its
       former name, deprecated). A model read from a file keeps that file's other keys (``file_keys``:
       its name, its tokenizer, llama.cpp's ...) and save writes them back as they were, but those it
       writes itself (and the tokenizer's where ``tokenizer`` is given).
    tokenizer: written inside the file under llama.cpp's ``tokenizer.ggml.*`` keys (in either format);
       its vocabulary size must equal the model's (the rows of its token embedding).
    quantize: a ggml type of ``tensor_data.QUANTIZED_TYPES`` ("q8_0", "q4_0", "q4_K", "f16", ...; those ggml
       quantizes only with an importance matrix are refused; llama.cpp's layout only): the weight
       matrices (every 2-D tensor whose rows are a multiple of the type's block: 32 values, 256 for the
       K-quants; the others stay float32) stored in that type by ggml's quantizer, for
       llama.cpp to run; ``load`` reads them back as parameters kept in that type (frozen: predict and
       generate, not fit).
       Parameters the model already keeps quantized are written as they are, in either layout.
    ``extra`` (key -> str/int/float/bool) and ``extra_tensors`` (name -> array) are added as they are;
    ``checkpoint.py`` stores the optimizer state this way.
    """
    if not isinstance(model, Network):
        raise TypeError(f"model must be a pyggml_opt model, got {type(model).__name__}")
    if layout is not None:
        warnings.warn("save(layout=...) is save(format=...) now", DeprecationWarning, stacklevel=2)
        if format is not None and format != layout:
            raise ValueError(f"save got format={format!r} and layout={layout!r}: give format alone")
        format = layout
    file_keys = _kept_keys(model, tokenizer is not None)
    came_from = format_named(str(file_keys.get("general.architecture", "")))
    if format is None and tokenizer is None and came_from is not None:
        format = came_from.layout  # the layout of the file the model was read from
    layout = check_choice("format", format, LAYOUTS) if format is not None else LAYOUTS[tokenizer is not None]
    model.require_built()
    assert model.input_shape is not None  # built
    fmt = format_of(model, layout)
    if layout != GENERIC and fmt is None:
        reasons = "; ".join(f"{f.architecture}: {f.mismatch(model) if f.mismatch else 'does not fit'}"
                            for f in formats_in(layout))
        raise ValueError(f"no {layout} architecture fits this model ({reasons})")
    if quantize is not None:
        quantize = check_choice("quantize", quantize, tuple(QUANTIZED_TYPES))
        if layout == GENERIC:
            raise ValueError("quantize needs format='llama.cpp': pyggml_opt's own files hold float32 weights")
    vocab = vocab_metadata(tokenizer) if tokenizer is not None else {}
    if layout != GENERIC and not vocab and "tokenizer.ggml.tokens" not in file_keys:
        raise ValueError(f"a {layout} file needs the model's tokenizer inside: save(model, path, tokenizer=...)")
    config = config_entry(model)
    if fmt is None and json.loads(config)["config"] is not None:
        # a file whose architecture does not give back this model could never be loaded: refuse it now
        check_rebuilds(type(model), model.get_config(), model.input_shape, model.param_shapes)
    weights = model.get_weights()
    kept = model.quantized()
    if kept and fmt is not None and fmt.float32_only:
        raise ValueError(f"the {fmt.architecture} layout stores float32 tensors; this model keeps {sorted(kept)[:3]} "
                         "quantized")
    if fmt is not None and lora_settings(model):
        raise ValueError(f"the {fmt.architecture} layout holds a base model, not LoRA adapters: save_adapter(path) writes "
                         "them as llama.cpp's adapter file (or save(format='pyggml_opt') keeps the whole model)")
    tensors = fmt.to_tensors(weights) if fmt is not None else weights
    _check_vocab_size(vocab or file_keys, tensors, weights)
    own = {**(fmt.metadata(model) if fmt else {}), **vocab}
    clash = sorted((extra or {}).keys() & {*own, *WRITTEN})
    if clash:  # the file would lie about its model or tokenizer, and load as another one or not at all
        raise ValueError(f"extra key {clash[0]!r} is one save writes itself for this model")
    own = {**{k: v for k, v in file_keys.items() if k not in WRITTEN}, **own}
    with GGUFFile() as f:
        f.set("general.architecture", fmt.architecture if fmt else GENERIC)
        f.set("pyggml_opt.config", config)
        f.set("pyggml_opt.input_shape", json.dumps(list(model.input_shape)))
        f.set("pyggml_opt.loss", loss_entry(model.loss))
        frozen = sorted(model.frozen() - model.quantized().keys())
        if frozen:
            f.set(FROZEN, json.dumps(frozen))
        if layout != GENERIC:
            # what most weights are stored as: the requested type, else what the file the model was read
            # from said (its tensors are written as they were: llama.cpp's mixtures such as Q4_K_M keep
            # their name), else the type the model keeps most
            types = list(kept.values())
            file_type = FILE_TYPES.get(quantize) if quantize else file_keys.get(
                "general.file_type", FILE_TYPES.get(max(types, key=types.count, default="f32")))
            if isinstance(file_type, (int, np.integer)):  # else a type llama.cpp's enum has no name for
                f.set("general.file_type", np.uint32(file_type))
        for key, value in {**own, **(extra or {})}.items():
            f.set(key, value)
        for name, value in tensors.items():
            whole_blocks = quantize is not None and value.ndim == 2 and value.shape[1] % block_size(quantize) == 0
            f.add_tensor(name, value, quantize if quantize and whole_blocks else "f32")
        for name, value in (extra_tensors or {}).items():
            f.add_tensor(name, value)
        f.write(path)


def _kept_keys(model: Network, new_tokenizer: bool) -> dict[str, object]:
    """The keys of the file ``model`` was read from (``Network.file_keys``) that save writes back: all
    but those it writes itself, and the tokenizer's where another tokenizer is given."""
    return {k: v for k, v in model.file_keys.items() if not (new_tokenizer and k.startswith(TOKENIZER))}


def _check_vocab_size(vocab: dict[str, object], tensors: dict[str, Weight], weights: dict[str, Weight]) -> None:
    """ValueError unless the tokenizer has as many tokens as the model's token embedding has rows
    (llama.cpp's ``token_embd.weight``; in pyggml_opt's layouts the first layer's table)."""
    tokens = vocab.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list):
        return
    table = tensors.get("token_embd.weight", next(iter(weights.values())))
    if table.ndim != 2 or table.shape[0] != len(tokens):
        raise ValueError(f"the tokenizer has {len(tokens)} tokens, the model's token embedding {table.shape} "
                         "rows: a model and its tokenizer must have one vocabulary size")


def load_weights(path: str | os.PathLike[str], model: Network | None = None) -> dict[str, Weight]:
    """The tensors of a GGUF file as numpy arrays, or ``Quantized`` for Q8_0 / Q4_0 ones (shapes as
    ``model`` expects them, if given)."""
    with GGUFFile.read(path) as f:
        if model is None:
            return {n: f.weight(n) for n in f.tensor_names()}
        return read_weights(f, model)


def load_metadata(path: str | os.PathLike[str]) -> dict[str, object]:
    """The scalar and string keys of a GGUF file (``general.architecture``, a layout's hyperparameters,
    what ``save(..., extra=)`` added, such as a tokenizer); array keys are left out."""
    values: dict[str, object] = {}
    with GGUFFile.read(path) as f:
        for key in f.keys():
            try:
                values[key] = f.get(key)
            except ValueError:  # an array: not read
                continue
    return values


def read_weights(f: GGUFFile, model: Network, input_shape: tuple[int, ...] | None = None) -> dict[str, Weight]:
    """``model``'s parameters from an open file, checked (presence, shape, dtype, finite values): those
    it has, or, for an unbuilt model, those it will have when built for ``input_shape``."""
    shapes = model.param_shapes if input_shape is None else model.shapes_for(input_shape)
    return as_model_takes(read_tensors(f, shapes, model.legacy_names()), model)


def as_model_takes(weights: dict[str, Weight], model: Network) -> dict[str, Weight]:
    """``weights`` with the quantized tensors that ``model`` cannot keep quantized (``quantizable``: a
    gpt2 file's Q8_0 position table, which llama.cpp dequantizes as it reads rows) as float32 values:
    the values the file means, trained as float32 parameters."""
    keep = model.quantizable()
    return {n: v.dequantize() if isinstance(v, Quantized) and n not in keep else v for n, v in weights.items()}


def stored_name(name: str, names: Collection[str], legacy: Mapping[str, str], prefix: str = "") -> str:
    """The file tensor holding parameter ``name`` (under ``prefix``: a checkpoint's "optimizer.m."): its
    name of today, or, where the file lacks it and has the name an earlier version gave the parameter
    (``legacy``: ``Network.legacy_names``), that one."""
    old = legacy.get(name)
    if prefix + name not in names and old is not None and prefix + old in names:
        return prefix + old
    return prefix + name


def read_tensors(f: GGUFFile, shapes: dict[str, tuple[int, ...]],
                 legacy: dict[str, str] | None = None) -> dict[str, Weight]:
    """The tensors ``shapes`` names from an open file, checked against those shapes (presence, shape,
    dtype, finite values; a quantized tensor's values are checked where the model takes it); the
    file's registered layout converts them. ``legacy``: parameter name -> the name an earlier version's
    file gives it (``Network.legacy_names``), read where the file lacks the name of today."""
    fmt = format_named(f.get("general.architecture", ""))
    names = f.tensor_names()
    legacy = legacy or {}

    def file_tensor(name: str, ndim: int) -> Weight:
        name = stored_name(name, names, legacy)
        if name not in names:
            raise ValueError(f"the file has no tensor {name!r} (it has {names})")
        value = f.weight(name, ndim)
        if isinstance(value, Quantized) and fmt is not None and fmt.float32_only:
            raise ValueError(f"tensor {name!r} is {value.type_name}: the {fmt.architecture} layout stores float32 tensors")
        return value

    raw = (fmt.from_tensors if fmt is not None else read_each)(file_tensor, shapes)
    out: dict[str, Weight] = {}
    for name, shape in shapes.items():
        value = raw[name]
        if value.shape != shape:
            raise ValueError(f"tensor {name!r} has shape {value.shape} in the file, the model needs {shape}")
        if isinstance(value, Quantized):
            out[name] = value
            continue
        if value.dtype != np.float32:
            raise ValueError(f"tensor {name!r} has dtype {value.dtype}; float32 expected")
        if not np.isfinite(value).all():
            raise ValueError(f"tensor {name!r} contains NaN or inf")
        out[name] = value
    return out


def load(path: str | os.PathLike[str]) -> Network:
    """Rebuild a model saved by ``save``, or written by ggml's C++ tools in a registered layout.

    The generic layout's model takes the file's tensors as its weights (checked against the shapes
    its configuration gives), so a configuration edited to huge sizes allocates nothing."""
    path = os.fspath(path)
    with GGUFFile.read(path) as f:
        arch = f.get("general.architecture")
        if not isinstance(arch, str):
            raise ValueError(f"{path!r} has no string 'general.architecture'; not a model file")
        fmt = format_named(arch)
        if fmt is not None:
            # the file's arrays become the weights themselves: no random ones first, no second copy
            model, input_shape = fmt.build(f)
            model.build_with_weights(input_shape, read_weights(f, model, input_shape))
            loss = f.get("pyggml_opt.loss") or fmt.default_loss
        elif arch == GENERIC:
            model, loss = _from_config(path, f), f.get("pyggml_opt.loss") or None
        else:
            raise ValueError(f"{path!r}: unknown architecture {arch!r} (known: {known_architectures()})")
        model.loss = loss
        _freeze_as_saved(path, f, model)
        model.file_keys = {k: f.get_typed(k) for k in f.keys() if not k.startswith(OWN)}
        return model


def _freeze_as_saved(path: str, f: GGUFFile, model: Network) -> None:
    """Freeze the parameters the file says were frozen (ValueError for a corrupt list)."""
    text = f.get(FROZEN)
    if text is None:
        return
    try:
        names = json.loads(text)
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError(f"not a list of names: {text[:80]!r}")
        model.freeze(*names)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path!r}: corrupt {FROZEN} ({exc})") from None


def _from_config(path: str, f: GGUFFile) -> Network:
    try:
        spec = _upgrade(json.loads(f.get("pyggml_opt.config")))
        input_shape = tuple(json.loads(f.get("pyggml_opt.input_shape")))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path!r}: corrupt pyggml_opt metadata ({exc})") from None
    if isinstance(spec, dict) and spec.get("config", {}) is None:
        raise ValueError(f"{path!r} holds the weights of a {spec.get('class')} (its architecture is Python code): "
                         "rebuild the model in Python and call model.set_weights(pyggml_opt.saving.load_weights(path, model))")
    try:
        model = deserialize(spec, Network)
        shapes = model.shapes_for(input_shape)
    except (TypeError, KeyError, ValueError) as exc:
        raise ValueError(f"{path!r}: corrupt model configuration ({exc})") from None
    return model.build_with_weights(input_shape, as_model_takes(read_tensors(f, shapes, model.legacy_names()), model))


def _upgrade(spec: object) -> object:
    """The configuration layout of files written before layers were registered by name (version 0.1:
    ``{"type": "Sequential", "layers": [{"class", "name", "config"}]}``) in today's layout."""
    if isinstance(spec, dict) and "type" in spec and "class" not in spec:
        if spec["type"] == "FunctionModel":
            return {"class": "FunctionModel", "config": None}
        layers = [{"class": l.get("class"), "config": {**l.get("config", {}), "name": l.get("name")}}
                  for l in spec.get("layers", []) if isinstance(l, dict)]
        return {"class": spec["type"], "config": {"layers": layers}}
    return spec


__all__ = ["FileFormat", "check_architecture", "config_entry", "load", "load_metadata", "load_weights", "read_tensors",
           "read_weights", "save", "stored_name"]
