"""fit + predict of a small model while other processes keep the cores busy (issue 14: ggml's threads
wait for each other at every op; a waiting thread that only spins holds a core that the thread it
waits for may need).

    python benchmarks/bench_contention.py [--reps 15] [--busy N]

For 1 and 2 threads (and all cores, if more), alone and with ``--busy`` busy-looping processes (default:
one per core), prints the median and quartiles of the wall time of one small fit (MLP 64-128-10,
load_digits, 3 epochs of batch 32) followed by a predict. Each measurement runs in this process; the busy
processes are started before and stopped after each block. ``PYGGML_OPT_THREAD_POOL=0`` in the
environment measures without pyggml_opt's persistent thread pools (threads started per graph)."""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time

import numpy as np
from sklearn.datasets import load_digits

import pyggml_opt as pgo
from machine import cpu_name  # benchmarks/machine.py
from pyggml_opt import layers as L


def burn() -> None:
    while True:
        pass


def one_run(x: np.ndarray, y: np.ndarray, threads: int) -> float:
    model = pgo.Sequential([L.Linear(64, 128), L.ReLU(), L.Linear(128, 10)])
    t0 = time.perf_counter()
    model.fit(x, y, epochs=3, batch_size=32, verbose=0, n_threads=threads, seed=0)
    model.predict(x, n_threads=threads)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--busy", type=int, default=len(os.sched_getaffinity(0)), help="competing busy processes")
    args = ap.parse_args()
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    cores = len(os.sched_getaffinity(0))
    pool = os.environ.get("PYGGML_OPT_THREAD_POOL", "1") != "0"
    print(f"{cpu_name()}, {cores} cores; thread pools {'on' if pool else 'off'}; "
          f"load average before {os.getloadavg()[0]:.2f}")
    one_run(x, y, 1)  # warm-up: library loading, first allocations
    print("| threads | competing busy processes | median ms | quartiles ms |")
    print("|---|---|---|---|")
    for threads in sorted({1, 2, cores}):
        for busy in (0, args.busy):
            procs = [mp.Process(target=burn, daemon=True) for _ in range(busy)]
            for p in procs:
                p.start()
            try:
                times = sorted(1e3 * one_run(x, y, threads) for _ in range(args.reps))
            finally:
                for p in procs:
                    p.terminate()
                    p.join()
            q = statistics.quantiles(times, n=4)
            print(f"| {threads} | {busy} | {statistics.median(times):.1f} | {q[0]:.1f} .. {q[2]:.1f} |")


if __name__ == "__main__":
    main()
