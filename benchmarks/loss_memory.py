"""Memory of the token-id cross-entropy's training graph against the logits it reads (issue 36).

The graph: logits (n, T, V) as a parameter, token ids (n, T), the per-sample loss of ``cross_entropy``
(``nn/losses/named.py``), summed; ggml's backward pass of it; ggml-alloc's buffer for the whole graph
(logits, their gradient, every intermediate, with ggml-alloc's reuse) measured by
``ggml_gallocr_reserve``. Printed: that buffer in MiB and as a multiple of the logits' own bytes.

``--one-hot`` builds instead the graph of the previous main (token ids turned into one-hot rows by a
GET_ROWS from a vocab x vocab identity table, times the log-softmax, summed per row) at a vocabulary
small enough to allocate, to compare both at the same size; at large vocabularies its table alone is
printed (V * V * 4 bytes).

    python benchmarks/loss_memory.py                       # V = 151,936 (Qwen2.5 / Qwen3), 2 x 256 tokens
    python benchmarks/loss_memory.py --vocab 4096 --one-hot
"""
from __future__ import annotations

import argparse

from pyggml_opt import ops
from pyggml_opt._lib import ffi, lib
from pyggml_opt.core import Context
from pyggml_opt.core.tensor_data import ne_of
from pyggml_opt.nn.losses import CrossEntropy
from pyggml_opt.nn.ops import Tensor

GRAPH_SIZE = 1024
MIB = 1 << 20


def _leaf(ctx: Context, shape: tuple[int, ...], name: str) -> Tensor:
    t = lib.ggml_new_tensor(ctx.ptr, lib.GGML_TYPE_F32, lib.GGML_MAX_DIMS, ffi.new("int64_t[4]", ne_of(shape)))
    lib.ggml_set_name(t, name.encode())
    return Tensor(t, ctx, ctx, len(shape))


def one_hot_loss(outputs: Tensor, y: Tensor, table: Tensor) -> Tensor:
    """The previous main's graph: one-hot rows from the identity table, -sum(rows * log_softmax)."""
    n, steps, vocab = outputs.shape
    targets = ops.reshape(ops.embedding(ops.to_int32(y), table), n * steps, vocab)
    per_token = ops.neg(ops.sum_rows(ops.mul(targets, ops.log_softmax(ops.reshape(outputs, n * steps, vocab)))))
    return ops.mean(ops.reshape(per_token, n, steps))


def graph_bytes(vocab: int, n: int, steps: int, one_hot: bool) -> int:
    """ggml-alloc's buffer for the loss graph and its backward pass."""
    ctx = Context(64, graph_size=GRAPH_SIZE, grads=True)
    logits = _leaf(ctx, (n, steps, vocab), "logits")
    lib.ggml_set_param(logits.ptr)
    ids = _leaf(ctx, (n, steps), "ids")
    if one_hot:
        per_sample = one_hot_loss(logits, ids, _leaf(ctx, (vocab, vocab), "one_hot"))
    else:
        per_sample = CrossEntropy().per_sample(logits, ids, {})
    loss = ops.sum(per_sample)
    lib.ggml_set_loss(loss.ptr)
    gf = lib.ggml_new_graph_custom(ctx.ptr, GRAPH_SIZE, True)
    lib.ggml_build_forward_expand(gf, loss.ptr)
    lib.ggml_build_backward_expand(ctx.ptr, gf, ffi.NULL)
    galloc = lib.ggml_gallocr_new(lib.ggml_backend_cpu_buffer_type())
    try:
        if not lib.ggml_gallocr_reserve(galloc, gf):
            raise MemoryError("ggml-alloc could not reserve the graph's buffer")
        return int(lib.ggml_gallocr_get_buffer_size(galloc, 0))
    finally:
        lib.ggml_gallocr_free(galloc)
        ctx.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vocab", type=int, default=151_936)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--one-hot", action="store_true", help="also the previous main's one-hot graph")
    a = p.parse_args()
    logits = a.batch * a.context * a.vocab * 4
    print(f"vocab {a.vocab}, {a.batch} x {a.context} tokens: logits {logits / MIB:.1f} MiB")
    got = graph_bytes(a.vocab, a.batch, a.context, one_hot=False)
    print(f"cross_entropy_ids:    {got / MIB:10.1f} MiB = {got / logits:.2f} x the logits")
    if a.one_hot:
        table = a.vocab * a.vocab * 4
        if table > 8 << 30:
            print(f"one-hot (before):     the identity table alone is {table / MIB:.0f} MiB; not built")
        else:
            old = graph_bytes(a.vocab, a.batch, a.context, one_hot=True)
            print(f"one-hot (before):     {old / MIB:10.1f} MiB = {old / logits:.2f} x the logits "
                  f"(its table {table / MIB:.1f} MiB, a graph constant)")


if __name__ == "__main__":
    main()
