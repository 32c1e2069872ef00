"""Where does fit's gap to the C++ mnist-train come from: the Python loop, or the Python process?

Runs ggml's own C training loop, ``ggml_opt_fit``, inside this Python process on pyggml_opt's mnist-fc
graph and a ggml dataset of Fashion-MNIST (the same ggml calls mnist-train makes), alternated with
  - ``model.fit`` in the same process   (ratio C loop / fit: the cost of fit's Python loop), and
  - the C++ ``mnist-train`` process     (ratio mnist-train / C loop: the cost of being in this process).
Epoch times are taken as bench_fit.py takes mnist-train's: ggml_opt_fit prints "epoch N/M:" to stderr
as each epoch starts (stderr goes through a pipe read by a thread). The first epoch of each run is
left out; each ratio is the median over adjacent pairs of the ratio of their median epoch times.

    python benchmarks/bench_c_loop.py                 # 6 pairs of each, 4 epochs per run
    python benchmarks/bench_c_loop.py --reps 10 --no-validation

Session 3 (issue 3; medians of pairs, each pair's ratio scatters by +-10 % on this shared machine):
mnist-train / C loop 0.927 (6 pairs), 0.945 (4 pairs, OPENBLAS_NUM_THREADS=1), 1.021 (2 pairs);
C loop / fit 0.961 (6 pairs), 1.05 (5 pairs, no validation), 0.966 (2 pairs). The C loop's dataset
then had shards of 1 sample, mnist-train's has 10 (--shard, now 10 by default): session 4 found that to
be the whole "process" gap (CPU_SPEED.md, issue 3); fit is run with the same shuffle (shuffle=shard).
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

import pyggml_opt as pgo
from pyggml_opt import data
from pyggml_opt._lib import lib
from pyggml_opt.core import Dataset, Scheduler
from pyggml_opt.nn import StaticGraph

from bench_fit import EPOCH_RE, cpp_threads, find_tool, run_cpp, run_python


def run_c_loop(x: np.ndarray, onehot: np.ndarray, epochs: int, n_threads: int, val_split: float,
               shard: int) -> list[float]:
    """Per-epoch wall times of ggml_opt_fit on pyggml_opt's mnist-fc graph, in this process."""
    model = pgo.models.mnist_fc()
    main = Scheduler.for_device("cpu", n_threads)
    store = model.params_on(main.main)
    graph = StaticGraph(model, store, 500)  # fit's training graph, with the input in a buffer of its own
    store.mark_trainable()
    ds = Dataset(784, 10, len(x), shard)
    ds.data[...] = x.reshape(len(x), 784)
    ds.labels[...] = onehot
    sched = Scheduler(main.backends)
    r, w = os.pipe()
    saved = os.dup(2)
    os.dup2(w, 2)
    os.close(w)
    starts: list[float] = []

    def read_stderr():
        while chunk := os.read(r, 1 << 16):
            now = time.perf_counter()
            starts.extend(now for _ in EPOCH_RE.finditer(chunk))

    reader = threading.Thread(target=read_stderr)
    reader.start()
    try:
        lib.ggml_opt_fit(sched.ptr, graph.ctx_compute.ptr, graph.inputs, graph.outputs, ds.ptr,
                         lib.GGML_OPT_LOSS_TYPE_CROSS_ENTROPY, lib.GGML_OPT_OPTIMIZER_TYPE_ADAMW,
                         lib.ggml_opt_get_default_optimizer_params, epochs, 1000, val_split, False)
        end = time.perf_counter()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        reader.join()
        os.close(r)
        sched.close()
        ds.close()
        graph.close()
        model.close()
    return list(np.diff(starts + [end]))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=None, help="Fashion-MNIST IDX folder (default: Debian's)")
    ap.add_argument("--build-dir", default=None, help="folder holding bin/mnist-train (as bench_fit.py)")
    ap.add_argument("--epochs", type=int, default=4, help="epochs per run (default 4)")
    ap.add_argument("--reps", type=int, default=6, help="pairs of each comparison (default 6)")
    ap.add_argument("--shard", type=int, default=10, help="samples per shuffled run, the C loop's dataset "
                    "shard size and fit's shuffle (default 10, as mnist-train)")
    ap.add_argument("--no-validation", action="store_true", help="validation split 0 (C loop vs fit only: "
                    "mnist-train always validates on 5 %%)")
    args = ap.parse_args(argv)

    (x, y), _ = data.load_fashion_mnist(args.data, flatten=True)
    onehot = np.eye(10, dtype=np.float32)[y]
    n_threads = cpp_threads()
    val = 0.0 if args.no_validation else 0.05
    tool = None if args.no_validation else find_tool(args.build_dir)
    idx = data.raw_idx_dir(args.data)
    print(f"{n_threads} threads, {args.reps} pairs x {args.epochs} epochs, validation split {val}; "
          f"load average {os.getloadavg()[0]:.2f}")

    def med(t):
        return statistics.median(t[1:])

    loop_vs_fit, cpp_vs_loop = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            c = run_c_loop(x, onehot, args.epochs, n_threads, val, args.shard)
            f = run_python(x, y, args.epochs, n_threads, args.shard, validation_split=val)
            loop_vs_fit.append(med(c) / med(f))
            line = (f"C loop {' '.join(f'{v:.3f}' for v in c)} | fit {' '.join(f'{v:.3f}' for v in f)} "
                    f"| C loop / fit {loop_vs_fit[-1]:.3f}")
            if tool is not None:
                e, _ = run_cpp(tool, idx, args.epochs, Path(tmp))
                cpp_vs_loop.append(med(e) / med(c))
                line += f" | mnist-train {' '.join(f'{v:.3f}' for v in e)} | mnist-train / C loop {cpp_vs_loop[-1]:.3f}"
            print(line, flush=True)
    print(f"\nC loop time / fit time (fit's Python loop; >= 1: fit is as fast): {statistics.median(loop_vs_fit):.3f}")
    if cpp_vs_loop:
        print(f"mnist-train time / C loop time (the process; < 1: the C loop is slower in Python's process): "
              f"{statistics.median(cpp_vs_loop):.3f}")


if __name__ == "__main__":
    main()
