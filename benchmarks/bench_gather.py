"""The batch gather alone: 500 random rows of Fashion-MNIST's size (784 floats) out of a 60000-row ggml
dataset, with the caches cooled between batches (a 64 MB read), as a training step leaves them.

  - np.take of single rows          (fit's host gather with shuffle=True, and any backend but the CPU)
  - np.take of 50 runs of 10 rows   (what mnist-train's dataset, ndata_shard = 10, copies)
  - GET_ROWS of single rows, in a ggml graph on 1 and 2 threads (fit's in-graph gather on the CPU)

    python benchmarks/bench_gather.py [--batches 150]

Session 4 (issue 3), ms per 500 rows: single rows 0.49-0.52 (np.take), 0.44-0.46 (GET_ROWS, 1 or 2
threads); runs of 10: 0.26-0.27. Cached (no cooling): GET_ROWS 0.06 ms. The cost is the number of
random places read, not the copying.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from pyggml_opt._lib import lib
from pyggml_opt.core import Backend, Buffer, Context, Dataset, Scheduler, tensor_data


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=150, help="batches per variant (default 150)")
    args = ap.parse_args(argv)
    n, ne, batch = 60000, 784, 500
    ds = Dataset(ne, 10, n)
    ds.data[...] = np.random.default_rng(0).random((n, ne), dtype=np.float32)
    backend = Backend("cpu", 1)
    ctx_in = Context(1)
    rows_t = lib.ggml_new_tensor_1d(ctx_in.ptr, lib.GGML_TYPE_I32, batch)
    buf = Buffer(ctx_in, backend)
    ctx = Context(8, graph_size=8)
    gf = lib.ggml_new_graph_custom(ctx.ptr, 8, False)
    lib.ggml_build_forward_expand(gf, lib.ggml_get_rows(ctx.ptr, ds.data_tensor, rows_t))
    sched = Scheduler([backend])
    lib.ggml_backend_sched_alloc_graph(sched.ptr, gf)
    rows_view = tensor_data.host_view(rows_t, (batch,))
    cool = np.ones(16 << 20, np.float32)
    out = np.empty((batch, ne), np.float32)
    rng = np.random.default_rng(1)

    def single():
        return rng.permutation(n)[:batch]

    def runs_of_10():
        return (rng.choice(n // 10, batch // 10, replace=False)[:, None] * 10 + np.arange(10)).ravel()

    def timed(rows_fn, gather) -> float:
        times = []
        for _ in range(args.batches):
            rows = rows_fn()
            cool.sum()
            t = time.perf_counter()
            gather(rows)
            times.append(time.perf_counter() - t)
        return float(np.median(times)) * 1e3

    def take(rows):
        np.take(ds.data, rows, axis=0, out=out, mode="clip")

    def get_rows(rows):
        rows_view[...] = rows
        lib.ggml_backend_graph_compute(backend.ptr, gf)

    for rep in range(2):
        line = [f"np.take single rows {timed(single, take):.3f}", f"runs of 10 {timed(runs_of_10, take):.3f}"]
        for threads in (1, 2):
            backend.set_n_threads(threads)
            line.append(f"GET_ROWS {threads} thread(s) {timed(single, get_rows):.3f}")
        print("ms per 500 rows: " + ", ".join(line), flush=True)
    sched.close()
    buf.close()


if __name__ == "__main__":
    main()
