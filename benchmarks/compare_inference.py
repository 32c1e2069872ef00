"""Inference speed on the CPU: pyggml_opt's ``model.predict`` against PyTorch's ``torch.no_grad()`` forward.

The models of compare_torch.py (ggml's "mnist-fc", 784 -> 500 -> ReLU -> 10, and "mnist-cnn", two 3x3
convolutions with 8 and 16 channels, ReLU, 2x2 max pooling, dense to 10; compare_torch.pgo_model /
torch_model) with the same weights: pyggml_opt's initial weights (seed 0) are copied into the torch module,
and the outputs of both on the first 1000 test images (one batch of 1000 and five single images) must
agree to 1e-4 before anything is timed. Inputs: Fashion-MNIST's test images, flat rows of 784 floats.

Two measurements per model, each framework with the same number of threads (``--threads``, default 2):
  batch 1     latency: the median wall time of one call on one image, ``model.predict(x[i:i+1])`` and
              ``with torch.no_grad(): module(torch.from_numpy(x[i:i+1])).numpy()``, over --calls calls
              on consecutive test images (the first --warmup-calls of each block left out);
  batch 1000  throughput: samples/s of one call on 1000 images (``predict(x, batch_size=1000)``: one
              graph, as PyTorch's one forward), the median of --tp-calls calls on consecutive slices.
Both take a float32 numpy array and return one (logits; predict(logits=True)). The frameworks alternate
in rounds (pyggml_opt's block, then PyTorch's, for every model and batch size, --rounds times), and the
result is the median over rounds of the ratio PyTorch time / pyggml_opt time of the two blocks of a round
(>= 1: pyggml_opt is faster; the issue asks for >= 1.5). Adjacent blocks see the same state of a shared
machine, whose speed drifts by more than the differences measured. Below the table, the batch-1000 calls'
GFLOP/s (the forward pass's multiply-adds x 2, compare_torch.epoch_gflop) as a percentage of the f32 GEMM
peak measured at the start (machine.sgemm_peak: ggml's MUL_MAT and torch.mm, 2048^3, the larger).

    pip install torch==2.13.0                     # optional benchmark dependency (CPU build)
    python benchmarks/compare_inference.py        # both models, 9 rounds, ~15 s on 2 idle cores
    python benchmarks/compare_inference.py --models fc --rounds 15 --json inf.json
    python benchmarks/compare_inference.py --profile 2000   # then cProfile of 2000 batch-1 predicts per model

Needs Debian's dataset-fashion-mnist (or --data DIR). Measure on a quiet machine (benchmarks/README.md).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import pyggml_opt as pgo
from pyggml_opt import data

from bench_fit import python_cpu_lib
from compare_torch import ARCH, epoch_gflop, pgo_model, torch_model
from machine import cpu_name, describe_peak, ratio_ceiling, sgemm_peak

TARGET = 1.5                  # the target for PyTorch time / pyggml_opt time
TOLERANCE = 1e-4              # outputs must agree to this (absolute and relative) before timing
THROUGHPUT_ROWS = 1000


def copy_weights(torch, net: pgo.Sequential, module) -> None:
    """pyggml_opt's weights into the torch module: both list weight, bias per layer in the same order
    (pyggml_opt's conv biases are (C, 1, 1), torch's (C,); Flatten is (channel, height, width) in both)."""
    weights, params = net.get_weights(), list(module.state_dict().items())
    if len(weights) != len(params):
        raise ValueError(f"{len(weights)} pyggml_opt parameters, {len(params)} torch parameters")
    with torch.no_grad():
        for (name, w), (tname, p) in zip(weights.items(), params):
            if w.size != p.numel():
                raise ValueError(f"{name} {w.shape} does not fit {tname} {tuple(p.shape)}")
            p.copy_(torch.from_numpy(w.reshape(tuple(p.shape))))


def forwards(torch, net: pgo.Sequential, module) -> dict:
    """Each framework's call: numpy rows in, numpy logits out."""
    def ours(xb: np.ndarray) -> np.ndarray:
        return net.predict(xb, batch_size=len(xb), logits=True)

    def theirs(xb: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return module(torch.from_numpy(xb)).numpy()
    return {"pyggml_opt": ours, "PyTorch": theirs}


def check_outputs(fns: dict, x: np.ndarray) -> float:
    """The largest difference between the two frameworks' outputs on one batch of 1000 and on five single
    images; exits when they differ by more than TOLERANCE."""
    worst = 0.0
    for xb in [x[:THROUGHPUT_ROWS], *(x[i:i + 1] for i in range(5))]:
        a, b = fns["pyggml_opt"](xb), fns["PyTorch"](xb)
        worst = max(worst, float(np.max(np.abs(a - b))))
        if a.shape != b.shape or not np.allclose(a, b, rtol=TOLERANCE, atol=TOLERANCE):
            sys.exit(f"outputs differ: max |pyggml_opt - PyTorch| = {worst:.2e} on a batch of {len(xb)}")
    return worst


def time_block(fn, batches: list[np.ndarray], warmup: int) -> float:
    """The median wall time of ``fn(batch)`` over ``batches`` after the first ``warmup`` of them."""
    for xb in batches[:warmup]:
        fn(xb)
    times = []
    for xb in batches[warmup:]:
        t0 = time.perf_counter()
        fn(xb)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def profile_predict(fn, x: np.ndarray, calls: int, top: int) -> str:
    """cProfile of ``calls`` batch-1 calls of ``fn``: the ``top`` functions by own time, then by cumulative."""
    fn(x[:1])
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for i in range(calls):
        fn(x[i % len(x):i % len(x) + 1])
    prof.disable()
    wall = time.perf_counter() - t0
    out = io.StringIO()
    out.write(f"{calls} calls, {wall / calls * 1e6:.0f} us per call under the profiler\n")
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="fc,cnn", help="comma-separated: fc, cnn (default both)")
    ap.add_argument("--threads", type=int, default=2, help="threads for both frameworks (default 2)")
    ap.add_argument("--rounds", type=int, default=9, help="alternated rounds (default 9)")
    ap.add_argument("--calls", type=int, default=200, help="timed batch-1 calls per block (default 200)")
    ap.add_argument("--warmup-calls", type=int, default=10, help="batch-1 calls left out per block (default 10)")
    ap.add_argument("--tp-calls", type=int, default=5, help="timed batch-1000 calls per block (default 5, "
                    "after one left out)")
    ap.add_argument("--data", default=None, help="Fashion-MNIST IDX folder (default: Debian's)")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="then profile N batch-1 predicts per model with cProfile and print the top functions")
    ap.add_argument("--profile-top", type=int, default=25, help="functions listed by --profile (default 25)")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not models or any(m not in ARCH for m in models):
        ap.error(f"--models takes a comma-separated subset of {sorted(ARCH)}")
    if min(args.rounds, args.calls, args.tp_calls, args.threads) < 1 or args.warmup_calls < 0:
        ap.error("--rounds, --calls, --tp-calls and --threads must be >= 1, --warmup-calls >= 0")
    try:
        import torch
    except ImportError:
        sys.exit("PyTorch is not installed: `pip install torch==2.13.0`")
    torch.set_num_threads(args.threads)

    x = data.load_fashion_mnist(args.data, flatten=True)[1][0]     # the 10000 test images, (n, 784) float32
    n_slices = len(x) // THROUGHPUT_ROWS
    load_before = os.getloadavg()
    print(f"CPU: {cpu_name()}; {os.cpu_count()} cores; {args.threads} threads each; load average "
          f"{load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}")
    print(f"pyggml_opt CPU library {python_cpu_lib()}; torch {torch.__version__} "
          f"(intra-op threads {torch.get_num_threads()})")

    gemm = sgemm_peak(args.threads, torch)
    print(describe_peak(gemm))

    fns, diffs = {}, {}
    for model in models:
        net, module = pgo_model(model), torch_model(torch, model).eval()
        copy_weights(torch, net, module)
        net.predict(x[:1], n_threads=args.threads)      # the model's session, with --threads, kept by later calls
        fns[model] = forwards(torch, net, module)
        diffs[model] = check_outputs(fns[model], x)
        print(f"{model}: outputs agree, max |pyggml_opt - PyTorch| = {diffs[model]:.1e}")
    print(f"{args.rounds} rounds; per block: batch 1 {args.warmup_calls} + {args.calls} calls (median of the "
          f"{args.calls}), batch {THROUGHPUT_ROWS} 1 + {args.tp_calls} calls (median)\n", flush=True)

    kinds = {1: "latency", THROUGHPUT_ROWS: "throughput"}
    blocks = {(m, b): {f: [] for f in fns[m]} for m in models for b in kinds}
    for r in range(args.rounds):
        for model in models:
            for batch in kinds:
                if batch == 1:
                    start = r * (args.calls + args.warmup_calls)
                    rows = [(start + i) % len(x) for i in range(args.warmup_calls + args.calls)]
                    batches, warmup = [x[i:i + 1] for i in rows], args.warmup_calls
                else:
                    batches = [x[(r + k) % n_slices * THROUGHPUT_ROWS:][:THROUGHPUT_ROWS]
                               for k in range(1 + args.tp_calls)]
                    warmup = 1
                for name, fn in fns[model].items():     # pyggml_opt's block, then PyTorch's
                    blocks[model, batch][name].append(time_block(fn, batches, warmup))
        print(f"round {r + 1}: " + ", ".join(
            f"{m} b{b} {v['PyTorch'][-1] / v['pyggml_opt'][-1]:.2f}" for (m, b), v in blocks.items()), flush=True)
    load_after = os.getloadavg()

    print(f"\n{'model':5} {'batch':>5} {'measure':10} {'pyggml_opt':>12} {'PyTorch':>12} {'PyTorch/pgo time':>17} "
          f"{'range':>11} {'target':>8}")
    results = {"command": " ".join(sys.argv), "cpu": cpu_name(), "cores": os.cpu_count(), "threads": args.threads,
               "torch": torch.__version__, "pgo_cpu_library": python_cpu_lib(), "load_before": load_before,
               "load_after": load_after, "rounds": args.rounds, "calls": args.calls,
               "warmup_calls": args.warmup_calls, "tp_calls": args.tp_calls, "target": TARGET, "gemm_peak": gemm,
               "models": {}}
    notes = []
    for (model, batch), v in blocks.items():
        ratios = [t / p for p, t in zip(v["pyggml_opt"], v["PyTorch"])]
        ratio = statistics.median(ratios)
        med = {f: statistics.median(ts) for f, ts in v.items()}
        if batch == 1:
            cells = [f"{med[f] * 1e6:9.0f} us" for f in v]
        else:
            cells = [f"{batch / med[f]:7.0f} smp/s" for f in v]
        print(f"{model:5} {batch:5d} {kinds[batch]:10} {cells[0]:>12} {cells[1]:>12} {ratio:17.2f} "
              f"{min(ratios):5.2f}-{max(ratios):<5.2f} {'met' if ratio >= TARGET else 'NOT met':>8}")
        gflop = batch * epoch_gflop(model, 0, 1)           # the forward pass's multiply-adds x 2
        gflops = {f: gflop / t for f, t in med.items()}
        if batch != 1:
            notes.append(f"{model} batch {batch}: {gflop:.2f} GFLOP per call; " + ", ".join(
                f"{f} {g:.0f} GFLOP/s = {100 * g / gemm['peak']:.0f} % of peak" for f, g in gflops.items())
                + f"; {ratio_ceiling(gflops['pyggml_opt'], gflops['PyTorch'], gemm['peak'])}")
        results["models"].setdefault(model, {"max_abs_diff": diffs[model]})[f"batch_{batch}"] = {
            "block_median_s": v, "median_s": med, "samples_per_s": {f: batch / t for f, t in med.items()},
            "gflop_per_call": gflop, "gflops": gflops,
            "round_ratios": ratios, "ratio_torch_over_pgo": ratio, "target_met": ratio >= TARGET}
    print("\n" + "\n".join(notes))
    print(f"ratio = median over rounds of (PyTorch block median time / pyggml_opt block median time); "
          f"target >= {TARGET}")
    print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")

    if args.profile:
        for model in models:
            print(f"\n=== cProfile: {model}, pyggml_opt predict at batch 1 ===")
            text = profile_predict(fns[model]["pyggml_opt"], x, args.profile, args.profile_top)
            print(text)
            results["models"][model]["profile"] = text
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
