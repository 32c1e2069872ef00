"""Kernel-level speed of GEMMs, one op at a time: the products of a training step.

``--set mnist-fc`` (the default): the fc1 layer of ggml's mnist-fc (784 -> 500), physical batch 500:
  mul_mat   500 x 500 x 784   the forward pass (W1 x images), K = 784
  out_prod  784 x 500 x 500   the weight gradient (images x output gradient), K = the batch
``--set gpt``: the products of compare_torch.py's small GPT (d_model 128, MLP 512, 2048 tokens per
step): projections, MLP layers, their weight gradients (K = 2048) and input gradients.
``--set heads``: a classifier's output layer (10 columns) over a batch of 500, after 500 and 784 inputs.
M x N x K: dst is M x N in ggml order (ne0 = M), summed over K. Each op is built with the raw binding,
computed once to warm up, then --reps times through the scheduler; prints the median and best time and
GFLOP/s (2 M N K / time). On this project's shared VMs the best of a run is the steadier figure; for an
A/B of two builds, alternate runs of each (package copies first on ``PYTHONPATH``, or --lib-dir).

    python benchmarks/bench_ops.py                    # 1 and 2 threads, both ops
    python benchmarks/bench_ops.py --threads 1 --ops out_prod --reps 100
    python benchmarks/bench_ops.py --set gpt --threads 2 --reps 80
    python benchmarks/bench_ops.py --lib-dir /tmp/build/bin   # time another build's libggml

--lib-dir re-runs the script with LD_LIBRARY_PATH set to that folder: a libggml built with
GGML_BACKEND_DL=OFF carries its CPU backend inside and registers it first, so the "cpu" backend is
that build's (the script prints which libggml files the process mapped).

numpy's OpenBLAS threads spin after a BLAS call and took ~5 % of the samples beside an op under perf:
the script holds OpenBLAS to one thread unless OPENBLAS_NUM_THREADS is set.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy loads OpenBLAS (see above)

import numpy as np  # noqa: E402

# (op, M, N, K): dst M x N (ggml ne0 = M), summed over K
SETS = {
    "mnist-fc": [("mul_mat", 500, 500, 784), ("out_prod", 784, 500, 500)],
    "gpt": [
        ("mul_mat", 128, 2048, 128), ("mul_mat", 512, 2048, 128), ("mul_mat", 128, 2048, 512),  # forward
        ("out_prod", 128, 128, 2048), ("out_prod", 128, 512, 2048), ("out_prod", 512, 128, 2048),  # weights
        ("out_prod", 128, 2048, 128), ("out_prod", 128, 2048, 512), ("out_prod", 512, 2048, 128),  # inputs
    ],
    "heads": [("mul_mat", 10, 500, 500), ("mul_mat", 10, 500, 784), ("out_prod", 500, 10, 500)],
}


def time_op(op: str, m: int, n: int, k: int, n_threads: int, reps: int) -> list[float]:
    from machine import GgmlOp
    from pyggml_opt._lib import lib

    rng = np.random.default_rng(0)
    if op == "mul_mat":       # dst[n, m] = sum_k a[m, k] b[n, k]  (numpy order)
        a, b = rng.random((m, k), np.float32), rng.random((n, k), np.float32)
        build = lib.ggml_mul_mat
    else:                     # dst[n, m] = sum_k a[k, m] b[k, n]
        a, b = rng.random((k, m), np.float32), rng.random((k, n), np.float32)
        build = lib.ggml_out_prod
    compute = GgmlOp(build, a, b, n_threads)
    times = []
    try:
        for _ in range(reps):
            t0 = time.perf_counter()
            compute()
            times.append(time.perf_counter() - t0)
    finally:
        compute.close()
    return times


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", default="mnist-fc", choices=tuple(SETS), help="which products (default mnist-fc)")
    ap.add_argument("--ops", default="mul_mat,out_prod", help="comma-separated ops of the set to time")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--lib-dir", default=None, help="time the libggml in this folder instead")
    args = ap.parse_args(argv)
    if args.lib_dir and os.environ.get("LD_LIBRARY_PATH") != args.lib_dir:
        env = dict(os.environ, LD_LIBRARY_PATH=args.lib_dir)
        os.execve(sys.executable, [sys.executable, __file__, *(argv or sys.argv[1:])], env)

    import pyggml_opt  # noqa: F401  (loads the libraries)
    maps = open("/proc/self/maps").read() if os.path.exists("/proc/self/maps") else ""
    print("libraries:", ", ".join(sorted(set(re.findall(r"\S+/libggml[\w.-]*\.so", maps)))) or "?")
    print(f"load average {os.getloadavg()[0]:.2f}")
    ops = args.ops.split(",")
    for op, m, n, k in (case for case in SETS[args.set] if case[0] in ops):
        for nt in (int(t) for t in args.threads.split(",")):
            ts = time_op(op, m, n, k, nt, args.reps)
            med, best = float(np.median(ts)), min(ts)
            print(f"{op:8} {m}x{n}x{k} {nt} thread(s): median {med * 1e3:6.2f} ms ({2 * m * n * k / med / 1e9:5.1f} "
                  f"GFLOP/s), best {best * 1e3:6.2f} ms ({2 * m * n * k / best / 1e9:5.1f} GFLOP/s)", flush=True)


if __name__ == "__main__":
    main()
