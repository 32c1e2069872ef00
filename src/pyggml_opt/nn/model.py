"""Models: ``Sequential`` (a list of layers) and ``FunctionModel`` (a Python function over tensor ops).

A model is built for an input shape (batch axis excluded): its parameters get names, shapes and
initial values drawn from ``seed``. Weights live in numpy until the model is first run, then in a
backend buffer (``ParamStore``); ``get_weights`` / ``set_weights`` move them as dicts of arrays.
Training and inference are in ``pyggml_opt.train``; GGUF files in ``pyggml_opt.io``.
"""
from __future__ import annotations

import threading
from typing import Callable

import numpy as np

from .layers import LAYER_TYPES, Layer
from .params import ParamStore
from .tensor import Tensor


class Model:
    """Base class of trainable models."""

    def __init__(self) -> None:
        self.input_shape: tuple[int, ...] | None = None
        self.output_shape: tuple[int, ...] | None = None
        self.param_shapes: dict[str, tuple[int, ...]] = {}
        self.loss: str | None = None  # the loss last trained with (predict applies softmax for cross_entropy)
        self.history = None
        self._weights: dict[str, np.ndarray] | None = None
        self._store: ParamStore | None = None
        # Re-entrant: callbacks run in fit's thread and may call predict / evaluate; other threads are
        # still refused (non-blocking acquire). ``_fitting`` is fit's backend while fit runs.
        self._lock = threading.RLock()
        self._fitting: str | None = None
        self.stop_training = False

    # ---- to implement -----------------------------------------------------------------------------
    def _build_shapes(self, input_shape: tuple[int, ...]) -> tuple[dict[str, tuple[int, ...]], tuple[int, ...]]:
        """Parameter shapes and output shape for ``input_shape``; raises ValueError if it does not fit."""
        raise NotImplementedError

    def _init_param(self, name: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def forward(self, x: Tensor, params: dict[str, Tensor]) -> Tensor:
        """The graph of the model for input ``x`` (shape (batch, *input_shape))."""
        raise NotImplementedError

    def config(self) -> dict:
        """What ``pyggml_opt.io`` needs to rebuild the architecture."""
        raise NotImplementedError

    # ---- building -------------------------------------------------------------------------------------
    @property
    def built(self) -> bool:
        return self.input_shape is not None

    def build(self, input_shape, seed: int | None = 0) -> "Model":
        """Fix the input shape (batch axis excluded) and initialise the weights from ``seed``."""
        input_shape = tuple(int(d) for d in input_shape)
        if not 1 <= len(input_shape) <= 3 or any(d < 1 for d in input_shape):
            raise ValueError(f"input_shape must have 1 to 3 positive entries (batch axis excluded), got {input_shape}")
        shapes, out = self._build_shapes(input_shape)
        if len(out) != 1:
            raise ValueError(f"the model's output must be (batch, features), got per-sample shape {out}; "
                             "end it with Flatten() or Linear(...)")
        self._check_not_fitting("build")
        rng = np.random.default_rng(seed)
        self.input_shape, self.output_shape, self.param_shapes = input_shape, out, shapes
        self._drop_store()
        self._weights = {name: self._init_param(name, shape, rng) for name, shape in shapes.items()}
        return self

    def _ensure_built(self, input_shape, seed=0) -> None:
        input_shape = tuple(input_shape)
        if not self.built:
            self.build(input_shape, seed)
        elif input_shape != self.input_shape:
            raise ValueError(f"the model was built for samples of shape {self.input_shape}, got {input_shape}")

    # ---- weights ----------------------------------------------------------------------------------------
    def get_weights(self) -> dict[str, np.ndarray]:
        """A copy of every parameter as float32 numpy arrays, by name."""
        self._require_built()
        if self._store is not None:
            return self._store.get()
        return {k: v.copy() for k, v in self._weights.items()}

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        """Replace parameters (all or some) from numpy arrays of the exact shapes."""
        self._require_built()
        if not isinstance(weights, dict):
            raise TypeError(f"weights must be a dict name -> array, got {type(weights).__name__}")
        clean = {}
        for name, value in weights.items():
            if name not in self.param_shapes:
                raise ValueError(f"unknown parameter {name!r}; the model has {list(self.param_shapes)}")
            arr = np.asarray(value)
            if arr.dtype.kind not in "fiu":
                raise TypeError(f"parameter {name!r}: expected a numeric array, got dtype {arr.dtype}")
            if arr.shape != self.param_shapes[name]:
                raise ValueError(f"parameter {name!r}: expected shape {self.param_shapes[name]}, got {arr.shape}")
            arr = np.ascontiguousarray(arr, dtype=np.float32)
            if not np.isfinite(arr).all():
                raise ValueError(f"parameter {name!r} contains NaN or inf")
            clean[name] = arr
        if self._store is not None:
            self._store.set(clean)
        else:
            self._weights.update({k: v.copy() for k, v in clean.items()})

    def count_params(self) -> int:
        return int(sum(np.prod(s) for s in self.param_shapes.values()))

    def _check_not_fitting(self, what: str) -> None:
        # fit's graphs use the parameter buffer: freeing or replacing it from a callback would crash
        if self._fitting is not None:
            raise RuntimeError(f"cannot {what} the model while fit is running (called from a callback)")

    def _require_built(self) -> None:
        if not self.built:
            raise ValueError("the model is not built yet: call build(input_shape) or fit() first")

    def params_on(self, backend) -> ParamStore:
        """The parameters as ggml tensors on ``backend`` (moved there through numpy if elsewhere)."""
        self._require_built()
        if self._store is not None and self._store.backend is backend:
            return self._store
        weights = self.get_weights()
        self._drop_store()
        store = ParamStore(self.param_shapes, backend)
        store.set(weights)
        self._store, self._weights = store, None
        return store

    def _drop_store(self) -> None:
        if self._store is not None:
            self._weights = self._store.get()
            self._store.close()
            self._store = None

    def close(self) -> None:
        """Free the ggml memory of the weights (they stay available in numpy)."""
        with self._lock:
            self._check_not_fitting("close")
            self._drop_store()
            from ..train import release
            release(self)

    # ---- training API (pyggml_opt.train) ---------------------------------------------------------------
    def fit(self, x, y=None, **kwargs):
        """Train on numpy data; see ``pyggml_opt.fit`` for the arguments. Returns a History."""
        from ..train import fit
        return fit(self, x, y, **kwargs)

    def evaluate(self, x, y=None, **kwargs):
        """(loss, accuracy) on numpy data (``y`` unused for the 'mean' and 'sum' losses); see
        ``pyggml_opt.evaluate``."""
        from ..train import evaluate
        return evaluate(self, x, y, **kwargs)

    def predict(self, x, **kwargs) -> np.ndarray:
        """Model outputs for any number of samples; see ``pyggml_opt.predict``."""
        from ..train import predict
        return predict(self, x, **kwargs)

    def save(self, path) -> None:
        """Write the model (architecture, weights, metadata) as a GGUF file."""
        from ..io import save
        save(self, path)

    def summary(self) -> str:
        lines = [f"{type(self).__name__}: input {self.input_shape}, output {self.output_shape}, "
                 f"{self.count_params()} parameters"]
        lines += [f"  {name}: {shape}" for name, shape in self.param_shapes.items()]
        return "\n".join(lines)


class Sequential(Model):
    """Layers applied in order. Parameter names are ``<layer name>.<param>`` where a layer's name is
    its ``name`` argument or its index in the list (as in PyTorch: "0.weight", "2.bias")."""

    def __init__(self, layers: list[Layer], input_shape=None) -> None:
        super().__init__()
        if not isinstance(layers, (list, tuple)) or not layers:
            raise ValueError("Sequential needs a non-empty list of layers")
        for i, layer in enumerate(layers):
            if not isinstance(layer, Layer):
                raise TypeError(f"layer {i} is a {type(layer).__name__}, not a pyggml_opt layer")
        names = [layer.name or str(i) for i, layer in enumerate(layers)]
        if len(set(names)) != len(names):
            raise ValueError(f"layer names must be unique, got {names}")
        self.layers, self.layer_names = list(layers), names
        if input_shape is not None:
            self.build(input_shape)

    def _build_shapes(self, input_shape):
        shapes, shape = {}, input_shape
        for name, layer in zip(self.layer_names, self.layers):
            shape = layer.output_shape(shape)
            shapes.update({f"{name}.{p}": s for p, s in layer.param_shapes.items()})
        return shapes, tuple(shape)

    def _init_param(self, name, shape, rng):
        lname, pname = name.rsplit(".", 1)
        return self.layers[self.layer_names.index(lname)].init(pname, shape, rng)

    def forward(self, x, params):
        for name, layer in zip(self.layer_names, self.layers):
            x = layer.forward(x, {p: params[f"{name}.{p}"] for p in layer.param_shapes})
        return x

    def config(self):
        return {"type": "Sequential", "layers": [
            {"class": type(l).__name__, "name": l.name, "config": l.config()} for l in self.layers]}

    @classmethod
    def from_config(cls, config: dict) -> "Sequential":
        layers = []
        for spec in config["layers"]:
            if spec["class"] not in LAYER_TYPES:
                raise ValueError(f"unknown layer class {spec['class']!r} in the model file")
            layers.append(LAYER_TYPES[spec["class"]](**spec["config"], name=spec.get("name")))
        return cls(layers)

    def __repr__(self) -> str:
        return "Sequential([" + ", ".join(map(repr, self.layers)) + "])"


class FunctionModel(Model):
    """A model written as a Python function over tensor ops, for what Sequential cannot express.

    ``forward(x, params) -> Tensor`` uses ``pyggml_opt.ops``; ``params`` maps each name of
    ``param_shapes`` (numpy-order shapes) to a Tensor. ``init(name, shape, rng) -> array`` gives
    initial values (default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in the product of all but
    the first axis; 1-D parameters start at zero).
    """

    def __init__(self, forward: Callable[[Tensor, dict[str, Tensor]], Tensor], param_shapes: dict,
                 init: Callable | None = None, input_shape=None) -> None:
        super().__init__()
        if not callable(forward):
            raise TypeError("forward must be a callable (x, params) -> Tensor")
        self._forward, self._init = forward, init
        self._declared = {str(k): tuple(int(d) for d in v) for k, v in param_shapes.items()}
        for k, v in self._declared.items():
            if not 1 <= len(v) <= 4 or any(d < 1 for d in v):
                raise ValueError(f"parameter {k!r}: shape must have 1 to 4 positive entries, got {v}")
        if input_shape is not None:
            self.build(input_shape)

    def _build_shapes(self, input_shape):
        from ..train import output_shape_of
        self.param_shapes = dict(self._declared)
        return dict(self._declared), output_shape_of(self, input_shape)

    def _init_param(self, name, shape, rng):
        if self._init is not None:
            value = np.asarray(self._init(name, shape, rng), dtype=np.float32)
            if value.shape != shape:
                raise ValueError(f"init returned shape {value.shape} for parameter {name!r} of shape {shape}")
            return value
        if len(shape) == 1:
            return np.zeros(shape, np.float32)
        fan_in = int(np.prod(shape[1:]))
        bound = 1.0 / np.sqrt(fan_in)
        return rng.uniform(-bound, bound, size=shape).astype(np.float32)

    def forward(self, x, params):
        out = self._forward(x, params)
        if not isinstance(out, Tensor):
            raise TypeError(f"the model function must return a Tensor, got {type(out).__name__}")
        return out

    def config(self):
        return {"type": "FunctionModel", "param_shapes": {k: list(v) for k, v in self._declared.items()}}
