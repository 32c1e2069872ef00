"""Many threads, one model (issue 26): batch-1 predicts from 1 and from N threads on one shared model, as a
threaded web server issues them; the calls of the threads queue on the model's lock (ggml's contexts are
not thread-safe), none is refused.

    python benchmarks/bench_threads.py [--threads 8] [--requests 2000] [--model fc|mlp] [--n-threads N]

For each row, every thread issues ``--requests`` predicts of one sample each (rows of random inputs, after a
warm-up call per thread) and the table gives the requests per second of all threads together (requests
over the wall time from the common start to the last answer) and the p50 / p99 latency of one request (its
predict call, waiting for the model included). Rows: 1 thread; N threads sharing one model; N threads with
a copy of the model each (``model.clone()``: no waiting on one another, for comparison). ``--model``: fc
is ggml's mnist-fc (784-500-10), mlp a small MLP (64-128-10). ``--n-threads``: ggml's CPU threads per
predict (default: ``pgo.default_n_threads()``).
"""
from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

import numpy as np

import pyggml_opt as pgo
from machine import cpu_name  # benchmarks/machine.py
from pyggml_opt import layers as L


def make_model(kind: str) -> tuple[pgo.Model, int]:
    if kind == "fc":
        model = pgo.models.mnist_fc()
        model.build((784,), seed=0)
        return model, 784
    model = pgo.Sequential([L.Linear(64, 128), L.ReLU(), L.Linear(128, 10)])
    model.build((64,), seed=0)
    return model, 64


def serve(models: list[pgo.Model], x: np.ndarray, requests: int, n_threads: int | None) -> tuple[float, list[float]]:
    """Thread i issues ``requests`` batch-1 predicts on ``models[i]``; the wall time of all of them and
    every request's latency, in seconds."""
    start = threading.Barrier(len(models) + 1)
    latencies: list[list[float]] = [[] for _ in models]

    def client(i: int) -> None:
        model, own = models[i], latencies[i]
        model.predict(x[i:i + 1], n_threads=n_threads)   # warm-up: this thread's first call
        start.wait()
        for r in range(requests):
            row = (i * requests + r) % len(x)
            t0 = time.perf_counter()
            model.predict(x[row:row + 1], n_threads=n_threads)
            own.append(time.perf_counter() - t0)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(models))]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, [s for own in latencies for s in own]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=8, help="client threads of the shared-model rows")
    ap.add_argument("--requests", type=int, default=2000, help="predicts per client thread")
    ap.add_argument("--model", choices=("fc", "mlp"), default="fc")
    ap.add_argument("--n-threads", type=int, default=None, help="ggml's CPU threads per predict")
    args = ap.parse_args()
    model, n_in = make_model(args.model)
    x = np.random.default_rng(0).standard_normal((4096, n_in)).astype(np.float32)
    cores = len(os.sched_getaffinity(0))
    ggml_threads = args.n_threads or pgo.default_n_threads()
    print(f"{cpu_name()}, {cores} cores, load average before {os.getloadavg()[0]:.2f}; model {args.model}, "
          f"batch-1 predicts on {ggml_threads} ggml thread(s), {args.requests} per client thread")
    print("| client threads | models | requests/s | vs 1 thread | p50 latency us | p99 latency us |")
    print("|---|---|---|---|---|---|")
    base = None
    rows = [("1", [model]), ("1 (shared)", [model] * args.threads),
            (f"{args.threads} (a copy each)", [model] + [model.clone() for _ in range(args.threads - 1)])]
    for what, models in rows:
        wall, lat = serve(models, x, args.requests, args.n_threads)
        rate = len(models) * args.requests / wall
        base = base or rate
        q = statistics.quantiles(lat, n=100)
        print(f"| {len(models)} | {what} | {rate:,.0f} | {rate / base:.2f}x | {1e6 * q[49]:.0f} | {1e6 * q[98]:.0f} |")


if __name__ == "__main__":
    main()
