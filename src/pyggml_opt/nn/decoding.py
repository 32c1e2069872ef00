"""Decoding with a key / value cache: a language model's logits for new steps only, each attention
layer keeping the keys and values of the steps before them (as llama.cpp does).

A ``KVCache`` holds, per attention layer, a keys tensor (n, context, kv_width) and a values tensor kept
transposed, (n, kv_width, context), in a backend buffer of its own. A ``DecodeGraph`` is the model's
forward graph for ``steps`` new ids of the ``n`` sequences at positions ``start .. start + steps - 1``
(an int32 input, so one graph serves every start): each attention layer writes the new keys and values
into rows (columns) ``positions`` of its cache (ggml_set_rows) and its queries attend over the cache's
first ``n_kv`` rows, the rows after each query's own position masked (an additive mask input, -inf; for
a sliding-window layer a mask of its own that also hides the rows its window leaves behind, so that the
cache keeps every row and each layer reads the ones it sees). A prompt runs as graphs of at most
``PROMPT_CHUNK`` steps, each new token as a graph of one step over ``n_kv`` rows rounded up to
``KV_BLOCK``: the cost of a token grows with the cache's block, not with the whole context.
"""
from __future__ import annotations

import numpy as np

from .._lib import CData, lib
from ..core import GRAPH_SIZE, Backend, Buffer, Context, Scheduler, tensor_data
from .layers import Block, Layer
from .layers.base import SequenceState
from .network import Network
from .ops import Tensor, contiguous, new_input
from .params import ParamStore

# cached rows a one-step graph attends over come in blocks of this many: a token pays for at most 63 rows
# it does not see (llama.cpp pads to 256; at position 64 of a 512 x 8 llama, 256 rows cost 0.4 ms more)
KV_BLOCK = 64
# the most steps of a prompt one graph takes (llama.cpp's n_ubatch): its attention scores are heads x steps x
# cached rows floats (0.9 GB for 14 heads over 32,768 rows)
PROMPT_CHUNK = 512


def decoding_layers(network: Network) -> list[tuple[str, Layer]] | None:
    """(parameter prefix, layer) of every layer of ``network`` that needs something of a decoding graph
    (attention layers, positions), blocks' sublayers included; None where some layer cannot decode (a
    model that is not a sequence of layers, a layer not marked ``Layer.decoding``)."""
    names, layers = getattr(network, "layer_names", None), getattr(network, "layers", None)
    if names is None or layers is None:
        return None
    found: list[tuple[str, Layer]] = []
    todo = [(f"{name}.", layer) for name, layer in zip(names, layers)]
    while todo:
        prefix, layer = todo.pop(0)
        if isinstance(layer, Block) and layer.decoding not in ("positions", "cache"):
            todo[:0] = [(f"{prefix}{child}.", sub) for child, sub in layer.children.items()]
        elif layer.decoding in ("positions", "cache"):
            found.append((prefix, layer))
        elif layer.decoding != "steps":
            return None
    return found if any(layer.decoding == "cache" for _, layer in found) else None


class KVCache:
    """The keys and values of ``batch`` sequences of up to ``context`` steps for every attention layer
    of ``layers`` (``decoding_layers``), in a buffer on ``backend``; ``tensors``: parameter-style name
    (``<prefix>k_cache`` / ``<prefix>v_cache``) -> tensor."""

    def __init__(self, layers: list[tuple[str, Layer]], batch: int, context: int, backend: Backend) -> None:
        attention = [(prefix, layer) for prefix, layer in layers if layer.decoding == "cache"]
        self.batch, self.context = batch, context
        self.ctx = Context(2 * len(attention))
        self.tensors: dict[str, CData] = {}
        for prefix, layer in attention:
            width = layer.kv_width  # type: ignore[attr-defined]  # a "cache" layer has it
            # values transposed (a feature's steps side by side): see ops.cache_columns
            for kind, shape in (("k", (batch, context, width)), ("v", (batch, width, context))):
                self.tensors[f"{prefix}{kind}_cache"] = new_input(self.ctx, shape, f"{prefix}{kind}_cache").ptr
        self.buffer = Buffer(self.ctx, backend)
        # attention reads the rows not written yet too (masked): uninitialised memory could hold NaN,
        # which a zero weight does not cancel
        self.buffer.clear(0)

    def close(self) -> None:
        """Free the buffer and the context (idempotent)."""
        self.buffer.close()
        self.ctx.close()


def kv_rows(n_past: int, steps: int, context: int) -> int:
    """The cached rows a graph of ``steps`` new steps after ``n_past`` cached ones attends over: what
    they fill, rounded up to ``KV_BLOCK`` (at most ``context``)."""
    return min(context, -(-(n_past + steps) // KV_BLOCK) * KV_BLOCK)


class DecodeGraph:
    """``network``'s logits for ``steps`` new ids of each of the cache's sequences over the parameters in
    ``store``, attending over the first ``n_kv`` rows of ``cache`` (``layers``: ``decoding_layers``);
    computed on a scheduler of its own (``run``). With ``last_only`` the logits of the last step only
    (``SequenceState.last_steps``: a prompt's output layer runs on one step, not on all of them)."""

    def __init__(self, network: Network, layers: list[tuple[str, Layer]], store: ParamStore, cache: KVCache,
                 steps: int, n_kv: int, last_only: bool = False) -> None:
        self.steps, self.n_kv, self.batch = steps, n_kv, cache.batch
        # the attention layers' sliding windows: each gets a mask input of its own
        self.windows = sorted({w for _, layer in layers if (w := getattr(layer, "window", None)) is not None})
        self.ctx_compute = Context(GRAPH_SIZE, graph_size=GRAPH_SIZE)
        self.ctx_static = Context(3 + len(self.windows))
        self.buf_static: Buffer | None = None
        try:
            g = self.ctx_compute
            ids = new_input(self.ctx_static, (self.batch, steps), "ids", "int32", graph=g)
            positions = new_input(self.ctx_static, (steps,), "positions", "int32", graph=g)
            mask = new_input(self.ctx_static, (1, 1, steps, n_kv), "kv_mask", graph=g)
            windows = {w: new_input(self.ctx_static, (1, 1, steps, n_kv), f"kv_mask_{w}", graph=g) for w in self.windows}
            self._inputs = (ids.ptr, positions.ptr, mask.ptr, *(t.ptr for t in windows.values()))
            for t in self._inputs:
                lib.ggml_set_input(t)
            caches = {name: Tensor(t, g, cache.ctx, 3) for name, t in cache.tensors.items()}
            state = SequenceState(positions=positions, kv_mask=mask, window_masks=windows, caches=caches,
                                  last_steps=1 if last_only else None)
            out = contiguous(network.forward(ids, dict(store.tensors), state))
            self.outputs = out.ptr
            lib.ggml_set_output(self.outputs)
            self.gf = lib.ggml_new_graph_custom(g.ptr, GRAPH_SIZE, False)
            lib.ggml_build_forward_expand(self.gf, self.outputs)
            self.buf_static = Buffer(self.ctx_static, store.backend)
        except BaseException:
            self.close()
            raise

    def run(self, scheduler: Scheduler, ids: np.ndarray, start: int) -> np.ndarray:
        """The logits (batch, steps, vocab) of ``ids`` (batch, steps) at positions ``start`` onwards (with
        ``last_only``: (batch, 1, vocab), the last step's), after the cache's first ``start`` rows; writes
        their keys and values into the cache."""
        pos = np.arange(start, start + self.steps, dtype=np.int32)
        back = pos[:, None] - np.arange(self.n_kv)[None, :]  # how many steps each row is before each step
        # a step attends to the cached rows up to its own position (and within its window)
        masks = [np.where((back >= 0) & (back < w), 0.0, -np.inf).astype(np.float32) for w in (np.inf, *self.windows)]
        for t, value in zip(self._inputs, (ids.astype(np.int32, copy=False), pos, *masks)):
            tensor_data.set(t, value)
        scheduler.compute(self.gf)
        return tensor_data.get(self.outputs, 3)

    def close(self) -> None:
        """Free the graph's contexts and input buffer (idempotent; not the cache or the parameters)."""
        for owner in (self.buf_static, self.ctx_static, self.ctx_compute):
            if owner is not None:
                owner.close()
