"""``SequentialNetwork``: the network of layers applied in order (``pgo.Sequential`` is it with the
training API)."""
from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np

from . import ops as F
from .layers import Layer
from .layers.activations import ReLU
from .layers.base import SequenceState, combined, own_tensors, prefixed, run_layer
from .layers.conv import MaxPool2d
from .lora import apply_lora_settings, lora_settings
from .network import Network, NetworkShapes
from .summary import SummaryRow
from .ops import Tensor
from .registry import deserialize, serialize


def application_order(layers: Sequence[Layer]) -> list[int]:
    """The order in which a SequentialNetwork applies its layers (indices): as given, except that a ReLU directly
    before a max pooling whose padding is smaller than its window (every window holds an input value)
    runs after it. max(relu(x)) is relu(max(x)) value for value (ReLU keeps the order of values and passes
    positive ones unchanged; a window of values <= 0 gives 0 either way), and the gradients agree up to
    the sign of zeros (the same window element gets them, or none does; NaN and infinite values aside);
    but the ReLU and its backward pass then see the pooled tensor, a quarter of the values after 2x2
    pooling. (A window entirely in the padding gives -FLT_MAX after the ReLU, 0 before it: no swap.)"""
    order = list(range(len(layers)))
    for i in range(len(order) - 1):
        first, then = layers[order[i]], layers[order[i + 1]]
        if type(first) is ReLU and type(then) is MaxPool2d and \
                all(p < k for p, k in zip(then.padding, then.kernel_size)):
            order[i], order[i + 1] = order[i + 1], order[i]
    return order


class SequentialNetwork(Network):
    """Layers applied in order. Parameter names are ``<layer name>.<param>`` where a layer's name is
    its ``name`` argument or its index in the list (as in PyTorch: "0.weight", "2.bias"); the layers'
    buffers are named the same way ("1.running_mean").

    ``tied`` shares parameters between layers (weight tying): ``{"head.weight": "tok.weight"}`` makes
    layer "head" use "tok"'s weight as its own (same shape required). The network then has one parameter
    "tok.weight", trained with the gradients of both uses summed; "head.weight" is no parameter of its
    own (not counted, saved or initialised)."""

    def __init__(self, layers: Sequence[Layer], input_shape: Sequence[int] | None = None,
                 tied: Mapping[str, str] | None = None) -> None:
        super().__init__()
        if not isinstance(layers, (list, tuple)) or not layers:
            raise ValueError("Sequential needs a non-empty list of layers")
        for i, layer in enumerate(layers):
            if not isinstance(layer, Layer):
                raise TypeError(f"layer {i} is a {type(layer).__name__}, not a pyggml_opt layer")
        for i, layer in enumerate(layers[1:], 1):
            if layer.input_dtype is not None:
                raise ValueError(f"{type(layer).__name__} (layer {i}) takes ids and must be the model's first layer")
        names = [layer.name or str(i) for i, layer in enumerate(layers)]
        if len(set(names)) != len(names):
            raise ValueError(f"layer names must be unique, got {names}")
        self.layers, self.layer_names = list(layers), names
        self.tied = _checked_ties(tied)
        if input_shape is not None:
            self.build(input_shape)

    @property
    def input_dtype(self) -> str:
        return self.layers[0].input_dtype or "float32"

    def check_input(self, x: np.ndarray) -> None:
        self.layers[0].check_input(x)

    def _build_shapes(self, input_shape: tuple[int, ...]) -> NetworkShapes:
        parts = []
        shape = input_shape
        for name, layer in zip(self.layer_names, self.layers):
            inferred = layer.infer(shape)
            parts.append((f"{name}.", inferred))
            shape = inferred.output
        whole = combined(parts, tuple(shape))
        # each layer's parameters then its buffers (the order of the parameter buffer and of saved files)
        tensors = {k: v for prefix, s in parts for k, v in prefixed(prefix, s.tensors).items()}
        for alias, target in self.tied.items():
            if alias not in whole.params or target not in whole.params:
                missing = alias if alias not in whole.params else target
                raise ValueError(f"tied parameter {missing!r} is none of the layers' parameters {list(whole.params)}")
            if tensors[alias] != tensors[target]:
                raise ValueError(f"tied parameters must have one shape: {alias!r} is {tensors[alias]}, "
                                 f"{target!r} {tensors[target]}")
            del tensors[alias]
        return NetworkShapes(whole.output, tensors, frozenset(whole.buffers), dict(whole.step_inputs))

    def _owner(self, name: str) -> tuple[Layer, str]:
        """The layer of a parameter or step input ``<layer name>.<its own name>``, and that own name
        (which has dots of its own in a Block: "3.attn.wq")."""
        lname = max((n for n in self.layer_names if name.startswith(n + ".")), key=len)
        return self.layers[self.layer_names.index(lname)], name[len(lname) + 1:]

    def _init_param(self, name: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        layer, pname = self._owner(name)
        return layer.init(pname, shape, rng)

    def forward(self, x: Tensor, params: dict[str, Tensor], state: SequenceState | None = None) -> Tensor:
        """The layers in order; ``state``: a decoding graph's positions, key / value caches and mask
        (``nn/decoding.py``; the padding mask comes from the first layer)."""
        return self._apply(x, params, None, state)

    def forward_train(self, x: Tensor, params: dict[str, Tensor], updates: list[Tensor]) -> Tensor:
        return self._apply(x, params, updates, None)

    def _apply(self, x: Tensor, params: dict[str, Tensor], updates: list[Tensor] | None,
               state: SequenceState | None) -> Tensor:
        """The layers in order (in the training graph when ``updates`` collects buffer updates), with
        the padding mask of the first layer carried as far as the layers keep the steps axis."""
        state = dataclasses.replace(state or SequenceState(), padding=self.layers[0].input_mask(x))
        params = {**params, **{alias: params[target] for alias, target in self.tied.items()}}
        order = application_order(self.layers)
        # with ``last_steps``, the steps axis is cut to them before the layers that compute each step alone
        # (a language model's final norm and output layer: the logits of a prompt's last step only)
        keep = state.last_steps or 0
        cut = -1 if not keep else next(
            p for p in range(len(order) + 1) if all(self.layers[i].decoding == "steps" for i in order[p:]))
        for p, i in enumerate(order):
            if p == cut:
                x = F.last_steps(x, keep)
            name, layer = self.layer_names[i], self.layers[i]
            x = run_layer(layer, x, own_tensors(f"{name}.", params), state.within(f"{name}."), updates)
            if not layer.keeps_mask:
                state = state.without_padding()
        return F.last_steps(x, keep) if cut == len(order) else x

    def quantizable(self) -> frozenset[str]:
        names = (f"{name}.{p}" for name, layer in zip(self.layer_names, self.layers) for p in layer.quantizable)
        return frozenset(n for n in names if n not in self.tied)

    def legacy_names(self) -> dict[str, str]:
        return {f"{name}.{new}": f"{name}.{old}" for name, layer in zip(self.layer_names, self.layers)
                for new, old in layer.legacy_names().items() if f"{name}.{new}" not in self.tied}

    def fill_step_input(self, name: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        layer, p = self._owner(name)
        return layer.fill_step_input(p, rng, shape)

    def _summary_rows(self) -> list[SummaryRow]:
        # The shapes are recomputed layer by layer: the network keeps only its input and output shapes.
        assert self.input_shape is not None  # summary() checked that the model is built
        rows: list[SummaryRow] = [("input", (None, *self.input_shape), [])]
        shape = self.input_shape
        for name, layer in zip(self.layer_names, self.layers):
            inferred = layer.infer(shape)
            shape = inferred.output
            names = [n for n in prefixed(f"{name}.", inferred.tensors) if n not in self.tied]
            uses = "".join(f"; {n} is {self.tied[n]}" for n in prefixed(f"{name}.", inferred.tensors) if n in self.tied)
            rows.append((f"{name} ({type(layer).__name__}{uses})", (None, *shape), names))
        return rows

    def get_config(self) -> dict:
        config: dict = {"layers": [serialize(layer) for layer in self.layers]}
        if self.tied:  # absent when nothing is tied: the configurations of earlier versions
            config["tied"] = dict(self.tied)
        adapters = lora_settings(self)
        if adapters:  # absent without adapters, likewise
            config["lora"] = adapters
        return config

    @classmethod
    def from_config(cls, config: dict) -> "SequentialNetwork":
        if not isinstance(config, dict) or not isinstance(config.get("layers"), list):
            raise ValueError("a Sequential configuration needs a list of layers")
        network = cls([deserialize(spec, Layer) for spec in config["layers"]], tied=config.get("tied"))
        if "lora" in config:
            apply_lora_settings(network, config["lora"])
        return network

    def __repr__(self) -> str:
        tied = f", tied={self.tied!r}" if self.tied else ""
        return f"{type(self).__name__}([" + ", ".join(map(repr, self.layers)) + f"]{tied})"


def _checked_ties(tied: Mapping[str, str] | None) -> dict[str, str]:
    """``tied`` as a dict parameter name -> the parameter it uses; TypeError / ValueError for anything
    but str -> str, a parameter tied to itself, or chains (a target that is tied itself)."""
    if tied is None:
        return {}
    if not isinstance(tied, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tied.items()):
        raise TypeError(f"tied must be a dict parameter name -> parameter name (str -> str), got {tied!r}")
    for alias, target in tied.items():
        if alias == target or target in tied:
            raise ValueError(f"tied: {alias!r} -> {target!r}: a parameter must be tied to another parameter, one "
                             "that is not tied itself")
    return dict(tied)
