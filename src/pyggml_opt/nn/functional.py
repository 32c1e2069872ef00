"""``FunctionNetwork``: a network written as a Python function over tensor ops."""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from .._lib import CData, lib
from ..checks import check_int
from ..core import GRAPH_SIZE, Context
from .graph import output_shape_of
from .layers.base import SequenceState
from .network import Network, NetworkShapes
from .summary import SummaryRow
from .ops import Tensor, new_input
from .params import uniform_init


class FunctionNetwork(Network):
    """A model written as a Python function over tensor ops, for what Sequential cannot express.

    ``forward(x, params) -> Tensor`` uses ``pyggml_opt.ops``; ``params`` maps each name of
    ``param_shapes`` (numpy-order shapes) to a Tensor. ``init(name, shape, rng) -> array`` gives
    initial values (default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in the product of all but
    the first axis; 1-D parameters start at zero).
    """

    def __init__(self, forward: Callable[[Tensor, dict[str, Tensor]], Tensor],
                 param_shapes: Mapping[str, int | Sequence[int]],
                 init: Callable[[str, tuple[int, ...], np.random.Generator], ArrayLike] | None = None,
                 input_shape: Sequence[int] | None = None) -> None:
        super().__init__()
        if not callable(forward):
            raise TypeError("forward must be a callable (x, params) -> Tensor")
        self._forward, self._init = forward, init
        self._declared: dict[str, tuple[int, ...]] = {}
        for k, v in dict(param_shapes).items():
            shape = tuple(v) if isinstance(v, (tuple, list)) else (v,)
            if not 1 <= len(shape) <= lib.GGML_MAX_DIMS:
                raise ValueError(f"parameter {k!r}: shape must have 1 to {lib.GGML_MAX_DIMS} positive entries, got {v}")
            self._declared[str(k)] = tuple(check_int(f"parameter {k!r}: shape entries", d) for d in shape)
        if input_shape is not None:
            self.build(input_shape)

    def _build_shapes(self, input_shape: tuple[int, ...]) -> NetworkShapes:
        return NetworkShapes(output_shape_of(self, self._declared, input_shape), dict(self._declared))

    def _init_param(self, name: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
        if self._init is not None:
            value = np.asarray(self._init(name, shape, rng), dtype=np.float32)
            if value.shape != shape:
                raise ValueError(f"init returned shape {value.shape} for parameter {name!r} of shape {shape}")
            return value
        if len(shape) == 1:
            return np.zeros(shape, np.float32)
        return uniform_init(rng, shape, int(np.prod(shape[1:])))

    def forward(self, x: Tensor, params: dict[str, Tensor], state: SequenceState | None = None) -> Tensor:
        out = self._forward(x, params)
        if not isinstance(out, Tensor):
            raise TypeError(f"the model function must return a Tensor, got {type(out).__name__}")
        return out

    def _summary_rows(self) -> list[SummaryRow]:
        # A row per group of parameters (the name up to its last ".": "fc1.weight" and "fc1.bias" make
        # "fc1"), not per ggml node: ggml expands one op into several nodes (a linear layer is a mul_mat
        # and an add, a multi-head attention dozens of reshapes and permutes), which would say more
        # about ggml than about the model. A group's output is that of the last node reading its parameters.
        # The graph is built for two batch sizes: the axes that differ are the batch axis.
        small, large = self._group_outputs(2), self._group_outputs(3)
        groups: dict[str, list[str]] = {}
        for name in self.param_shapes:
            groups.setdefault(name.rsplit(".", 1)[0], []).append(name)
        assert self.input_shape is not None and self.output_shape is not None  # summary() checked
        rows: list[SummaryRow] = [("input", (None, *self.input_shape), [])]
        used = sorted((g for g in groups if g in small), key=lambda g: small[g][0])
        for g in used:
            a, b = small[g][1], large[g][1]
            ndim = max((d + 1 for d in range(lib.GGML_MAX_DIMS) if a[d] != 1 or b[d] != 1), default=1)
            rows.append((g, tuple(None if a[d] != b[d] else a[d] for d in reversed(range(ndim))), groups[g]))
        rows += [(g, "unused", groups[g]) for g in groups if g not in small]
        rows.append(("output", (None, *self.output_shape), []))
        return rows

    def _group_outputs(self, batch: int) -> dict[str, tuple[int, tuple[int, ...]]]:
        """Parameter group -> (index, ggml ``ne``) of the last node of the forward graph for ``batch``
        samples that reads one of the group's parameters (directly or through nodes computed from
        parameters alone, such as ggml's reshape of a convolution kernel)."""
        assert self.input_shape is not None  # built: called by summary()
        ctx = Context(GRAPH_SIZE, graph_size=GRAPH_SIZE)
        ctx_p = Context(max(1, len(self.param_shapes)))
        try:
            params: dict[str, Tensor] = {}
            carries: dict[CData, set[str]] = {}  # tensor -> the groups whose parameters alone it is made of
            for name, shape in self.param_shapes.items():
                params[name] = new_input(ctx_p, shape, name)
                params[name].ctx = None
                carries[params[name].ptr] = {name.rsplit(".", 1)[0]}
            out = self.forward(new_input(ctx, (batch, *self.input_shape)), params)
            gf = lib.ggml_new_graph_custom(ctx.ptr, GRAPH_SIZE, False)
            lib.ggml_build_forward_expand(gf, out.ptr)
            outputs: dict[str, tuple[int, tuple[int, ...]]] = {}
            for i in range(lib.ggml_graph_n_nodes(gf)):
                node = lib.ggml_graph_node(gf, i)
                srcs = [src for src in node.src if src]
                read = set().union(*(carries.get(src, ()) for src in srcs))
                if all(src in carries for src in srcs):
                    carries[node] = read
                else:
                    outputs.update({g: (i, tuple(node.ne)) for g in read})
            return outputs
        finally:
            ctx.close()
            ctx_p.close()

    def get_config(self) -> dict:
        """The forward and init functions (Python callables: not for a file) and the parameter shapes."""
        return {"forward": self._forward, "param_shapes": {k: list(v) for k, v in self._declared.items()},
                "init": self._init}

    @classmethod
    def from_config(cls, config: dict) -> "FunctionNetwork":
        return cls(config["forward"], config["param_shapes"], config.get("init"))
