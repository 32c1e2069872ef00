"""Training speed on the CPU: pyggml_opt's ``model.fit``, ggml's C++ ``mnist-train`` and PyTorch, same run.

For each model, ggml's "mnist-fc" (784 -> 500 -> ReLU -> 10) and "mnist-cnn" (two 3x3 convolutions with
8 and 16 channels, ReLU, 2x2 max pooling, dense to 10), trains on Fashion-MNIST with ggml's examples/mnist
hyperparameters: logical batch 1000 made of two physical batches of 500 (gradient accumulation), 5 %
validation evaluated every epoch, AdamW (lr 1e-3, betas 0.9 / 0.999, eps 1e-8, no weight decay), the
same number of threads everywhere. PyTorch runs the same model with the same batches, accumulation,
optimizer and per-epoch validation (torch.nn layers, torch's default initialisation).

PyTorch's epochs are interleaved with pyggml_opt's (one PyTorch epoch in fit's epoch-end callback,
outside fit's epoch timing), so that the shared machine's slow drifts in speed hit both alike; the C++
trainer runs as a separate process after them.

Printed per model: the median seconds per epoch of each (first --warmup epochs left out), the test
accuracy after --epochs epochs (pyggml_opt and PyTorch; mnist-train is stopped early, so time only),
the achieved GFLOP/s (the model's multiply-adds of one epoch: forward and backward of the training
samples, forward of the validation samples, counted per layer), and the ratios
    PyTorch time / pyggml_opt time     (>= 1: pyggml_opt is at least as fast; issue 5 asks for >= 1.0)
    C++ time / pyggml_opt time         (>= 1: the Python layer costs nothing)
The GFLOP/s are also printed as a percentage of the machine's f32 GEMM peak measured at the start of the
same run with the same threads (machine.sgemm_peak: the best of 5 products of 2048 x 2048 matrices by ggml's
MUL_MAT and by PyTorch's torch.mm, alternated; the peak is the larger of the two, both are printed).

    pip install torch==2.13.0            # optional benchmark dependency (the CPU build on these machines)
    python benchmarks/compare_torch.py                   # both models, 4 epochs each, ~5 min idle
    python benchmarks/compare_torch.py --models fc --epochs 30 --json fc30.json   # accuracy too

``--model gpt`` (or ``--models gpt``) compares a small GPT instead (pyggml_opt.models.gpt, context 64, dim
128, 4 layers, 4 heads, on Debian's fortunes as characters), trained by pyggml_opt and by PyTorch from the
same initial weights on the same windows in the same order, each in a subprocess of its own: validation
loss, tokens/s, GFLOP/s and memory (details in gpt_compare.py; ``--profile`` adds gpt_profile.py's
per-op breakdown):

    python benchmarks/compare_torch.py --model gpt                       # 300 steps each, ~2 min idle
    python benchmarks/compare_torch.py --model gpt --steps 1000 --repeats 3 --profile --json gpt.json

Needs Debian's dataset-fashion-mnist (or --data) and, for the C++ column, ggml's tools built with
``pip install . -C cmake.define.PYGGML_OPT_BUILD_TESTS=ON`` (or --build-dir; --no-cpp leaves it out).
Measure on a quiet machine: ggml's CPU threads spin while they wait (see benchmarks/README.md).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import pyggml_opt as pgo
from pyggml_opt import data

from bench_fit import cpp_threads, find_tool, python_cpu_lib, run_cpp
from machine import cpu_name, describe_peak, sgemm_peak

BATCH, PHYSICAL, VAL_SPLIT, LR = 1000, 500, 0.05, 1e-3
ARCH = {"fc": "mnist-fc", "cnn": "mnist-cnn"}


def epoch_gflop(model: str, n_train: int, n_val: int) -> float:
    """Multiply-adds (x2) of one epoch: forward + weight gradients + needed input gradients of every
    GEMM-like layer for the training samples, forward for the validation samples."""
    if model == "fc":
        layers = [(784, 500, False), (500, 10, True)]   # (K, N, input gradient needed) per sample
        fwd = sum(2 * k * n for k, n, _ in layers)
        bwd = sum(2 * k * n * (2 if needs_dx else 1) for k, n, needs_dx in layers)
    else:
        # conv as im2col GEMM: output pixels x out channels x (in channels * 9)
        layers = [(28 * 28, 8, 1 * 9, False), (14 * 14, 16, 8 * 9, True), (1, 10, 7 * 7 * 16, True)]
        fwd = sum(2 * p * n * k for p, n, k, _ in layers)
        bwd = sum(2 * p * n * k * (2 if needs_dx else 1) for p, n, k, needs_dx in layers)
    return (n_train * (fwd + bwd) + n_val * fwd) / 1e9


def pgo_model(model: str) -> pgo.Sequential:
    """ggml's "mnist-fc" or "mnist-cnn" in pyggml_opt (weights initialised from seed 0)."""
    return pgo.models.mnist_fc() if model == "fc" else pgo.models.mnist_cnn()


def run_pgo(model: str, train, test, epochs: int, n_threads: int,
            after_epoch=None) -> tuple[list[float], float]:
    """pyggml_opt's fit; ``after_epoch()`` runs after each epoch, outside the epoch's timing."""
    net = pgo_model(model)
    callbacks = [pgo.LambdaCallback(on_epoch_end=lambda *_: after_epoch())] if after_epoch else []
    h = net.fit(*train, epochs=epochs, batch_size=BATCH, physical_batch_size=PHYSICAL,
                validation_split=VAL_SPLIT, optimizer=pgo.AdamW(lr=LR), seed=0, n_threads=n_threads,
                verbose=0, callbacks=callbacks)
    _, acc = net.evaluate(*test, n_threads=n_threads)
    net.close()
    return list(h["time"]), acc


def torch_model(torch, model: str):
    """The same model in torch.nn (torch's default initialisation); parameters in pgo_model's order."""
    nn = torch.nn
    if model == "fc":
        return nn.Sequential(nn.Linear(784, 500), nn.ReLU(), nn.Linear(500, 10))
    return nn.Sequential(nn.Unflatten(1, (1, 28, 28)),
                         nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(7 * 7 * 16, 10))


class TorchTrainer:
    """ggml-opt's fit, written in PyTorch: shuffle the first 95 % each epoch, logical batches of 1000 as
    two accumulated physical batches of 500, then evaluate the last 5 %."""

    def __init__(self, torch, model: str, train, n_threads: int):
        self.torch = torch
        torch.manual_seed(0)
        torch.set_num_threads(n_threads)
        self.x, self.y = torch.from_numpy(train[0]), torch.from_numpy(train[1].astype(np.int64))
        self.n_train = int(len(self.x) * (1 - VAL_SPLIT)) // BATCH * BATCH
        self.net = torch_model(torch, model)
        self.opt = torch.optim.AdamW(self.net.parameters(), lr=LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.gen = torch.Generator().manual_seed(0)
        self.times: list[float] = []

    def epoch(self) -> None:
        t0 = time.perf_counter()
        self.net.train()
        perm = self.torch.randperm(self.n_train, generator=self.gen)
        for b in range(0, self.n_train, BATCH):
            self.opt.zero_grad(set_to_none=False)
            for p in range(b, b + BATCH, PHYSICAL):
                idx = perm[p:p + PHYSICAL]
                (self.loss_fn(self.net(self.x[idx]), self.y[idx]) * (PHYSICAL / BATCH)).backward()
            self.opt.step()
        self.evaluate(self.x[self.n_train:], self.y[self.n_train:])
        self.times.append(time.perf_counter() - t0)

    def evaluate(self, x, y) -> float:
        self.net.eval()
        correct = 0
        with self.torch.no_grad():
            for b in range(0, len(x), PHYSICAL):
                correct += int((self.net(x[b:b + PHYSICAL]).argmax(1) == y[b:b + PHYSICAL]).sum())
        return correct / len(x)

    def test_accuracy(self, test) -> float:
        return self.evaluate(self.torch.from_numpy(test[0]), self.torch.from_numpy(test[1].astype(np.int64)))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", "--model", default="fc,cnn",
                    help="comma-separated: fc, cnn, gpt (default fc,cnn); gpt runs its own comparison (gpt_compare.py)")
    ap.add_argument("--epochs", type=int, default=4, help="epochs per run (default 4)")
    ap.add_argument("--warmup", type=int, default=1, help="epochs of each run left out of the timing")
    ap.add_argument("--threads", type=int, default=None, help="threads for all three (default: mnist-train's "
                    "own choice, min(cores, (cores + 4) / 2))")
    ap.add_argument("--data", default=None, help="Fashion-MNIST IDX folder (default: Debian's)")
    ap.add_argument("--build-dir", default=None, help="folder holding bin/mnist-train")
    ap.add_argument("--no-cpp", action="store_true", help="leave out ggml's C++ mnist-train")
    ap.add_argument("--no-torch", action="store_true", help="leave out PyTorch")
    ap.add_argument("--json", default=None, help="also write the results here")
    gpt = ap.add_argument_group("--model gpt")
    gpt.add_argument("--steps", type=int, default=300, help="optimizer steps of batch 32 per framework (default 300)")
    gpt.add_argument("--warmup-steps", type=int, default=5, help="first steps left out of the timing (default 5)")
    gpt.add_argument("--repeats", type=int, default=1, help="alternated runs of each framework (default 1); "
                     "speed and memory are the medians")
    gpt.add_argument("--val-windows", type=int, default=None,
                     help="validate on the first N held-out windows only (default all of the last 10 %%)")
    gpt.add_argument("--torch-attention", choices=("sdpa", "manual"), default="sdpa",
                     help="PyTorch's attention: F.scaled_dot_product_attention(is_causal=True) (default) or "
                          "ggml's way (full scores, mask, softmax, matmul)")
    gpt.add_argument("--profile", action="store_true", help="then run gpt_profile.py (per-op time of a step)")
    gpt.add_argument("--profile-steps", type=int, default=10, help="steps gpt_profile.py instruments (default 10)")
    args = ap.parse_args(argv)
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not models or any(m not in (*ARCH, "gpt") for m in models):
        ap.error(f"--models takes a comma-separated subset of {sorted((*ARCH, 'gpt'))}")
    if args.epochs <= args.warmup:
        ap.error("--epochs must be larger than --warmup")
    if "gpt" in models:
        results = {}
        if len(models) > 1:
            results = main([a for a in (argv if argv is not None else sys.argv[1:])] + ["--models",
                           ",".join(m for m in models if m != "gpt")])
        results["gpt"] = run_gpt(args)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        return results

    torch = None
    if not args.no_torch:
        try:
            import torch
        except ImportError:
            sys.exit("PyTorch is not installed: `pip install torch==2.13.0`, or pass --no-torch")
    n_threads = args.threads or cpp_threads()
    if not args.no_cpp and n_threads != cpp_threads():
        print(f"note: mnist-train picks its own thread count ({cpp_threads()}), not --threads {n_threads}")
    tool = None if args.no_cpp else find_tool(args.build_dir)
    idx = data.raw_idx_dir(args.data)
    train, test = data.load_fashion_mnist(args.data, flatten=True)
    n_val = len(train[0]) - int(len(train[0]) * (1 - VAL_SPLIT))
    n_train = len(train[0]) - n_val

    load_before = os.getloadavg()
    print(f"CPU: {cpu_name()}; {os.cpu_count()} cores, {n_threads} threads; load average {load_before[0]:.2f}; "
          f"pyggml_opt CPU library {python_cpu_lib()}" + (f"; torch {torch.__version__}" if torch else ""))
    gemm = sgemm_peak(n_threads, torch)
    peak = gemm["peak"]
    print(describe_peak(gemm) + "\n")

    results = {"cpu": cpu_name(), "threads": n_threads, "epochs": args.epochs, "warmup": args.warmup,
               "gemm_peak": gemm, "load_before": load_before, "command": " ".join(sys.argv), "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            gflop = epoch_gflop(model, n_train, n_val)
            # PyTorch trains one epoch after each pyggml_opt epoch (in fit's epoch-end callback, outside
            # fit's epoch timing), so slow drifts of the shared machine's speed hit both alike.
            trainer = TorchTrainer(torch, model, train, n_threads) if torch is not None else None
            runs = {"pyggml_opt": run_pgo(model, train, test, args.epochs, n_threads,
                                          trainer.epoch if trainer else None)}
            if trainer is not None:
                runs["PyTorch"] = (trainer.times, trainer.test_accuracy(test))
            if tool is not None:
                runs["C++"] = (run_cpp(tool, idx, args.epochs, Path(tmp), ARCH[model])[0], None)
            res = {}
            for name, (times, acc) in runs.items():
                med = statistics.median(times[args.warmup:])
                res[name] = {"epoch_s": times, "median_s": med, "test_accuracy": acc, "gflops": gflop / med}
                print(f"{model:3} {name:10} s/epoch " + " ".join(f"{t:.3f}" for t in times)
                      + f" | median {med:.3f} | {gflop / med:5.1f} GFLOP/s"
                      + f" = {100 * gflop / med / peak:4.1f} % of peak"
                      + (f" | test accuracy {100 * acc:.2f} %" if acc is not None else ""), flush=True)
            if trainer is not None:
                pairs = [t / p for p, t in zip(runs["pyggml_opt"][0][args.warmup:], trainer.times[args.warmup:])]
                res["PyTorch"]["paired_ratio_median"] = statistics.median(pairs)
                print(f"{model:3} PyTorch / pyggml_opt time, epoch by epoch: median {statistics.median(pairs):.2f} "
                      f"(range {min(pairs):.2f}-{max(pairs):.2f})")
            base = res["pyggml_opt"]["median_s"]
            for name in res:
                if name != "pyggml_opt":
                    res[name]["ratio_vs_pyggml_opt"] = res[name]["median_s"] / base
                    print(f"{model:3} ratio {name} time / pyggml_opt time: {res[name]['median_s'] / base:.2f}")
            print(f"{model:3} ({gflop:.1f} GFLOP per epoch)\n")
            results["models"][model] = {"gflop_per_epoch": gflop, **res}
    load_after = os.getloadavg()
    results["load_after"] = load_after
    print(f"load average after: {load_after[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return results


def run_gpt(args) -> dict:
    """``--model gpt``: pyggml_opt's gpt against its PyTorch twin (gpt_compare.py), then optionally the
    per-op profile (gpt_profile.py), each framework in subprocesses of its own."""
    import subprocess

    import gpt_compare
    torch = None
    if not args.no_torch:
        try:
            import torch  # the workers import it too; here it times the GEMM peak
        except ImportError:
            sys.exit("PyTorch is not installed: `pip install torch==2.13.0`, or pass --no-torch")
    args.threads = args.threads or pgo.default_n_threads()
    gemm = sgemm_peak(args.threads, torch)
    print(describe_peak(gemm))
    res = gpt_compare.run(args, gemm["peak"])
    res["gemm_peak"] = gemm
    if args.profile:
        print(flush=True)
        cmd = [sys.executable, str(Path(__file__).with_name("gpt_profile.py")), "--threads", str(args.threads),
               "--steps", str(args.profile_steps), "--torch-attention", args.torch_attention]
        if args.no_torch:
            cmd.append("--no-torch")
        if args.json:   # the breakdown beside the comparison: gpt.json -> gpt.profile.json
            cmd += ["--json", str(Path(args.json).with_suffix(".profile.json"))]
        subprocess.run(cmd, check=True)
    return res


if __name__ == "__main__":
    main()
