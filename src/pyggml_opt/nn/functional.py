"""``FunctionModel``: a network written as a Python function over tensor ops."""
from __future__ import annotations

from typing import Callable

import numpy as np

from .._lib import lib
from ..checks import check_int
from .graph import output_shape_of
from .network import Network
from .ops import Tensor
from .params import uniform_init


class FunctionModel(Network):
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
        self._declared = {}
        for k, v in dict(param_shapes).items():
            shape = tuple(v) if isinstance(v, (tuple, list)) else (v,)
            if not 1 <= len(shape) <= lib.GGML_MAX_DIMS:
                raise ValueError(f"parameter {k!r}: shape must have 1 to {lib.GGML_MAX_DIMS} positive entries, got {v}")
            self._declared[str(k)] = tuple(check_int(f"parameter {k!r}: shape entries", d) for d in shape)
        if input_shape is not None:
            self.build(input_shape)

    def _build_shapes(self, input_shape):
        return dict(self._declared), output_shape_of(self, self._declared, input_shape)

    def _init_param(self, name, shape, rng):
        if self._init is not None:
            value = np.asarray(self._init(name, shape, rng), dtype=np.float32)
            if value.shape != shape:
                raise ValueError(f"init returned shape {value.shape} for parameter {name!r} of shape {shape}")
            return value
        if len(shape) == 1:
            return np.zeros(shape, np.float32)
        return uniform_init(rng, shape, int(np.prod(shape[1:])))

    def forward(self, x, params):
        out = self._forward(x, params)
        if not isinstance(out, Tensor):
            raise TypeError(f"the model function must return a Tensor, got {type(out).__name__}")
        return out

    def get_config(self) -> dict:
        """The forward and init functions (Python callables: not for a file) and the parameter shapes."""
        return {"forward": self._forward, "param_shapes": {k: list(v) for k, v in self._declared.items()},
                "init": self._init}

    @classmethod
    def from_config(cls, config: dict) -> "FunctionModel":
        return cls(config["forward"], config["param_shapes"], config.get("init"))
