"""The input gradient of a matrix product with a frozen weight of each ggml type: OUT_PROD(W, dy^T), the
node every LoRA step on a quantized base computes once per projection (issue 48; vendor patch 0043).

W is (out, in) = 1024 x 1024 (``--size``) in F32, F16, Q8_0, Q4_K and Q6_K (ggml's quantizer), dy is
(tokens, out) with 1024 tokens (``--tokens``); one graph of the single node per type on the CPU
backend, ``--threads`` threads, best of ``--repeats`` computes after a warm-up. Prints ms, GFLOP/s
(2 x in x out x tokens per product) and each type's time over F32's (issue 48's goal: <= 1.5).

    python benchmarks/bench_out_prod.py                    # ~10 s
    python benchmarks/bench_out_prod.py --threads 1 --size 896 --tokens 512
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

from pyggml_opt._lib import ffi, lib
from pyggml_opt.core import Buffer, Context, Scheduler, tensor_data
from pyggml_opt.core.tensor_data import QUANTIZED_TYPES, Quantized

sys.path.insert(0, os.path.dirname(__file__))
from machine import cpu_name  # noqa: E402

TYPES = ["f32", "f16", "q8_0", "q4_K", "q6_K"]


def time_type(type_name: str, w: np.ndarray, dy: np.ndarray, sched: Scheduler, repeats: int) -> float:
    """Best seconds of one OUT_PROD(W in ``type_name``, dy^T) compute."""
    ctx = Context(8, graph_size=8)
    kind = lib.GGML_TYPE_F32 if type_name == "f32" else QUANTIZED_TYPES[type_name]
    tw = lib.ggml_new_tensor_2d(ctx.ptr, kind, w.shape[1], w.shape[0])        # ne (in, out)
    tdy = lib.ggml_new_tensor_2d(ctx.ptr, lib.GGML_TYPE_F32, dy.shape[1], dy.shape[0])  # ne (out, tokens)
    out = lib.ggml_out_prod(ctx.ptr, tw, lib.ggml_transpose(ctx.ptr, tdy))     # ne (in, tokens)
    gf = lib.ggml_new_graph_custom(ctx.ptr, 8, False)
    lib.ggml_build_forward_expand(gf, out)
    buf = Buffer(ctx, sched.main)
    if type_name == "f32":
        tensor_data.set(tw, w)
    else:
        data = tensor_data.quantize(w, type_name).reshape(w.shape[0], -1)
        tensor_data.set_quantized(tw, Quantized(type_name, w.shape, data))
    tensor_data.set(tdy, dy)
    sched.compute(gf)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        sched.compute(gf)
        best = min(best, time.perf_counter() - t0)
    buf.close()
    ctx.close()
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    w = rng.standard_normal((args.size, args.size)).astype(np.float32)
    dy = rng.standard_normal((args.tokens, args.size)).astype(np.float32)
    sched = Scheduler.for_device("cpu", n_threads=args.threads)
    flops = 2.0 * args.size * args.size * args.tokens
    print(f"CPU: {cpu_name()}, {args.threads} thread(s); OUT_PROD(W {args.size} x {args.size}, dy^T of "
          f"{args.tokens} tokens)")
    f32 = None
    for type_name in TYPES:
        t = time_type(type_name, w, dy, sched, args.repeats)
        f32 = f32 or t
        print(f"  {type_name:5s} {t * 1e3:8.2f} ms {flops / t / 1e9:8.1f} GFLOP/s   {t / f32:5.2f}x F32")


if __name__ == "__main__":
    main()
