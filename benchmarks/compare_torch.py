"""Training speed on the CPU: pyggml_opt's ``model.fit``, ggml's C++ ``mnist-train`` and PyTorch, same run.

For each model, ggml's "mnist-fc" (784 -> 500 -> ReLU -> 10) and "mnist-cnn" (two 3x3 convolutions with
8 and 16 channels, ReLU, 2x2 max pooling, dense to 10), and on request "cnn-bn" (three 3x3 convolutions of
8, 16 and 32 channels, each with BatchNorm2d and ReLU, 2x2 max pooling after the first two, dense to 10;
no C++ twin), and "fc-wide" (784 -> 4096 -> ReLU -> 4096 -> ReLU -> 10: 20 M parameters, where memory is
the parameters' and the optimizer's, not fixed costs; ~45 s per epoch on 2 cores), trains on Fashion-MNIST
with ggml's examples/mnist
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

Memory (on by default, ``--no-memory`` leaves it out; ~10 s for fc, ~40 s for cnn on 2 cores): after the timed
runs of a model, --memory-epochs (1) epochs of training again, each framework in a fresh subprocess of its own
(``compare_torch.py --memory-worker pgo|torch``), so that neither's allocations hide the other's. In it the
data is loaded, then gc.collect() + malloc_trim(0) and the RSS baseline, the high-water mark (VmHWM, what
ru_maxrss reads) is reset (/proc/self/clear_refs), and pyggml_opt's ``model.fit`` (as the timed run, the model
built inside fit) or PyTorch's TorchTrainer (model and optimizer made, then its epochs; torch.optim's one-time
import of torch._dynamo, ~70 MB, is done before the baseline, as ``import torch`` is) runs. Printed per
model: "peak RSS growth of fit: pyggml_opt X MB vs PyTorch Y MB" (VmHWM - baseline), what stays after it
("kept", after gc.collect() + malloc_trim(0)), and the RSS and peak at stages of the first epoch (pyggml_opt:
after fit's setup, after the first physical batch, after the last one, after validation; with the size of
fit's copy of the samples (0 where it trains on x in place) and of its label rows, of the training graph's
compute buffer and of validation's), the same as gpt_compare.py
measures the GPT's memory (machine.py's helpers).

    pip install torch==2.13.0            # optional benchmark dependency (the CPU build on these machines)
    python benchmarks/compare_torch.py                   # both models, 4 epochs each, ~5 min idle
    python benchmarks/compare_torch.py --models fc --epochs 30 --json fc30.json   # accuracy too
    python benchmarks/compare_torch.py --epochs 1 --warmup 0 --no-cpp   # quick: 1 timed epoch, then memory

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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import pyggml_opt as pgo
from pyggml_opt import data

from bench_fit import cpp_threads, find_tool, python_cpu_lib, run_cpp
from machine import (cpu_name, describe_peak, fit_buffer_mb, peak_mb, ratio_ceiling, reset_peak, rss_parts_mb,
                     ru_maxrss_mb, sched_buffer_mb, sgemm_peak, trimmed_rss_mb)

BATCH, PHYSICAL, VAL_SPLIT, LR = 1000, 500, 0.05, 1e-3
# the models and their twin in ggml's C++ mnist-train, where it has one
ARCH = {"fc": "mnist-fc", "cnn": "mnist-cnn", "cnn-bn": None, "fc-wide": None}
# the widths of the MLPs' layers (ReLU between them)
MLP = {"fc": [784, 500, 10], "fc-wide": [784, 4096, 4096, 10]}
# cnn-bn: a deeper CNN with batch normalisation, (in, out) channels of its 3x3 convolutions (padding 1),
# each followed by BatchNorm2d and ReLU, the first two by 2x2 max pooling, then a dense layer
CNN_BN = [(1, 8), (8, 16), (16, 32)]


def epoch_gflop(model: str, n_train: int, n_val: int) -> float:
    """Multiply-adds (x2) of one epoch: forward + weight gradients + needed input gradients of every
    GEMM-like layer for the training samples, forward for the validation samples."""
    if model in MLP:
        w = MLP[model]   # (K, N, input gradient needed) per sample
        layers = [(k, n, i > 0) for i, (k, n) in enumerate(zip(w, w[1:]))]
        fwd = sum(2 * k * n for k, n, _ in layers)
        bwd = sum(2 * k * n * (2 if needs_dx else 1) for k, n, needs_dx in layers)
    else:
        # conv as im2col GEMM: output pixels x out channels x (in channels * 9)
        if model == "cnn":
            layers = [(28 * 28, 8, 1 * 9, False), (14 * 14, 16, 8 * 9, True), (1, 10, 7 * 7 * 16, True)]
        else:
            hw = [28 * 28, 14 * 14, 7 * 7]
            layers = [(p, c_out, c_in * 9, i > 0) for i, (p, (c_in, c_out)) in enumerate(zip(hw, CNN_BN))]
            layers.append((1, 10, 7 * 7 * CNN_BN[-1][1], True))
        fwd = sum(2 * p * n * k for p, n, k, _ in layers)
        bwd = sum(2 * p * n * k * (2 if needs_dx else 1) for p, n, k, needs_dx in layers)
    return (n_train * (fwd + bwd) + n_val * fwd) / 1e9


def mlp_layers(widths: list[int], linear, relu) -> list:
    """Dense layers between consecutive ``widths`` with a ReLU between them, from either framework's
    ``Linear`` and ``ReLU`` classes."""
    layers: list = []
    for k, n in zip(widths, widths[1:]):
        layers += [linear(k, n), relu()]
    return layers[:-1]


def pgo_model(model: str) -> pgo.Sequential:
    """ggml's "mnist-fc" or "mnist-cnn", or cnn-bn, fc-wide, in pyggml_opt (weights initialised from seed 0)."""
    if model == "fc":
        return pgo.models.mnist_fc()
    if model == "cnn":
        return pgo.models.mnist_cnn()
    L = pgo.layers
    if model in MLP:
        return pgo.Sequential(mlp_layers(MLP[model], L.Linear, L.ReLU), input_shape=(784,))
    layers: list = [L.Reshape((1, 28, 28))]
    for i, (c_in, c_out) in enumerate(CNN_BN):
        layers += [L.Conv2d(c_in, c_out, 3, padding=1), L.BatchNorm2d(c_out), L.ReLU()]
        layers += [L.MaxPool2d(2)] if i < 2 else []
    return pgo.Sequential(layers + [L.Flatten(), L.Linear(7 * 7 * CNN_BN[-1][1], 10)], input_shape=(784,))


def run_pgo(model: str, train, test, epochs: int, n_threads: int,
            after_epoch=None) -> tuple[list[float], float]:
    """pyggml_opt's fit; ``after_epoch()`` runs after each epoch, outside the epoch's timing."""
    net = pgo_model(model)
    callbacks = [pgo.LambdaCallback(on_epoch_end=lambda *_: after_epoch())] if after_epoch else []
    h = pgo_fit(net, train, epochs, n_threads, callbacks)
    _, acc = net.evaluate(*test, n_threads=n_threads)
    net.close()
    return list(h["time"]), acc


def pgo_fit(net: pgo.Sequential, train, epochs: int, n_threads: int, callbacks=()) -> pgo.History:
    """The benchmark's ``fit`` call (ggml's examples/mnist hyperparameters)."""
    return net.fit(*train, epochs=epochs, batch_size=BATCH, physical_batch_size=PHYSICAL,
                   validation_split=VAL_SPLIT, optimizer=pgo.AdamW(lr=LR), seed=0, n_threads=n_threads,
                   verbose=0, callbacks=list(callbacks))


def torch_model(torch, model: str):
    """The same model in torch.nn (torch's default initialisation); parameters in pgo_model's order."""
    nn = torch.nn
    if model in MLP:
        return nn.Sequential(*mlp_layers(MLP[model], nn.Linear, nn.ReLU))
    if model == "cnn-bn":
        layers: list = [nn.Unflatten(1, (1, 28, 28))]
        for i, (c_in, c_out) in enumerate(CNN_BN):
            layers += [nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU()]
            layers += [nn.MaxPool2d(2)] if i < 2 else []
        return nn.Sequential(*layers, nn.Flatten(), nn.Linear(7 * 7 * CNN_BN[-1][1], 10))
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
        self.on_step = None   # called with the step's index after each optimizer step (the memory probe's)

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
            if self.on_step is not None:
                self.on_step(b // BATCH)
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


# -------------------------------------------------------------------------------------------- memory

STAGES = ("setup", "step 1", "training", "validation")   # of the first epoch, in this order
STAGE_NAMES = {"pyggml_opt": ("fit's setup", "1st physical batch", "last batch", "validation"),
               "PyTorch": ("model + optimizer", "1st step", "last step", "validation")}


def _stage() -> dict:
    """RSS (and its anonymous and file-backed parts) and the high-water mark now, MB."""
    parts = rss_parts_mb()
    return {"rss_mb": parts["rss"], "anon_mb": parts["anon"], "file_mb": parts["file"], "peak_mb": peak_mb()}


def _validation_buffers_mb(net) -> dict | None:
    """Compute buffers of fit's validation: the session's scheduler (a batch size's first forward, on
    ggml-opt's allocation-based graphs) and the forward graphs cached per batch size (its later ones)."""
    try:
        s = net.session
        return {"session_scheduler": sched_buffer_mb(s.scheduler),
                "forward_cache": sum(sched_buffer_mb(g.scheduler) or 0.0 for g in s.forwards._graphs.values())}
    except Exception:  # noqa: BLE001 - informational only
        return None


class PgoMemoryProbe(pgo.Callback):
    """RSS and its peak at the stages of fit's first epoch, and the sizes of what fit allocated."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x                      # the samples given to fit
        self.stages: dict[str, dict] = {}
        self.sizes: dict[str, object] = {}

    def on_train_begin(self, model) -> None:
        # the training graph built, ggml_opt_init's buffers, the label rows (and a copy of the samples
        # where fit cannot read x in place)
        self.stages["setup"] = _stage()
        try:
            train = self.trainer.train
            self.sizes["x_copy_mb"] = 0.0 if np.shares_memory(train.x, self.x) else train.x.nbytes / 2 ** 20
            self.sizes["labels_mb"] = train.labels.nbytes / 2 ** 20 if train.labels is not None else 0.0
        except Exception:  # noqa: BLE001 - informational only
            self.sizes["x_copy_mb"] = self.sizes["labels_mb"] = None
        self.sizes["params_mb"] = sum(int(w.nbytes) for w in model.get_weights().values()) / 2 ** 20

    def on_batch_end(self, model, batch, logs) -> None:
        if "validation" in self.stages:
            return
        if batch == 0:
            self.stages["step 1"] = _stage()
            self.sizes["train_buffer_mb"] = fit_buffer_mb(self.trainer)
        if batch == self.trainer.n_phys - 1:
            self.stages["training"] = _stage()

    def on_epoch_end(self, model, epoch, logs) -> None:
        if "validation" not in self.stages:
            self.stages["validation"] = _stage()
            self.sizes["validation_buffers_mb"] = _validation_buffers_mb(model)


def memory_worker(argv: list[str]) -> None:
    """``compare_torch.py --memory-worker pgo|torch --model fc|cnn ...``: one framework's memory run in a
    process of its own (main starts it): load the data, take the baseline, train, write the JSON."""
    ap = argparse.ArgumentParser(prog="compare_torch.py --memory-worker")
    ap.add_argument("framework", choices=("pgo", "torch"))
    ap.add_argument("--model", choices=tuple(ARCH), required=True)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--data", default=None)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    torch = None
    if a.framework == "torch":
        import torch
        # torch.optim's first optimizer imports torch._dynamo and with it ~800 modules (sympy, mpmath, ...:
        # ~70 MB of Python objects, once per process): here, before the baseline, as `import torch` is
        torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))])
    # the training set only: a test set held here would count in the baseline and, freed during the
    # run, make the peak growth look ~31 MB smaller (as `for _ in range(...)` below once did for PyTorch)
    train = data.load_fashion_mnist(a.data, flatten=True)[0]
    sizes: dict = {}
    rss0 = trimmed_rss_mb()
    base = rss_parts_mb()
    reset = reset_peak()
    t0 = time.perf_counter()
    if torch is None:
        probe = PgoMemoryProbe(train[0])
        net = pgo_model(a.model)
        pgo_fit(net, train, a.epochs, a.threads, [probe])
        stages, sizes = probe.stages, probe.sizes
    else:
        trainer = TorchTrainer(torch, a.model, train, a.threads)
        stages = {"setup": _stage()}
        last = trainer.n_train // BATCH - 1

        def on_step(i: int) -> None:
            if "validation" in stages:
                return
            if i == 0:
                stages["step 1"] = _stage()
            if i == last:
                stages["training"] = _stage()

        trainer.on_step = on_step
        for _epoch in range(a.epochs):
            trainer.epoch()
            stages.setdefault("validation", _stage())
        sizes["params_mb"] = sum(p.numel() * p.element_size() for p in trainer.net.parameters()) / 2 ** 20
    seconds = time.perf_counter() - t0
    peak = peak_mb()
    rss1 = trimmed_rss_mb()
    stages["after"] = {**_stage(), "peak_mb": peak}   # trimmed; the peak is the whole run's
    res = {"framework": a.framework, "model": a.model, "epochs": a.epochs, "threads": a.threads, "seconds": seconds,
           "rss_before_mb": rss0, "peak_mb": peak, "peak_reset": reset, "rss_after_mb": rss1,
           "ru_maxrss_mb": ru_maxrss_mb(), "peak_growth_mb": peak - rss0, "kept_mb": rss1 - rss0,
           "anon_before_mb": base["anon"], "file_before_mb": base["file"], "stages": stages, "sizes": sizes}
    if torch is not None:
        res["version"] = torch.__version__
    Path(a.out).write_text(json.dumps(res))


def run_memory(framework: str, model: str, args, n_threads: int, tmp: Path) -> dict:
    """One memory run (memory_worker) in a fresh subprocess; its JSON."""
    out = tmp / f"memory-{framework}-{model}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--memory-worker", framework, "--model", model,
           "--epochs", str(args.memory_epochs), "--threads", str(n_threads), "--out", str(out)]
    if args.data:
        cmd += ["--data", args.data]
    subprocess.run(cmd, check=True, cwd=Path(__file__).resolve().parent)
    return json.loads(out.read_text())


def print_memory(model: str, mem: dict) -> None:
    """The memory rows of one model: the peak growth of each framework, then their first epoch by stage."""
    pg, pt = mem.get("pyggml_opt"), mem.get("PyTorch")
    epochs = pg["epochs"]
    row = f"pyggml_opt {pg['peak_growth_mb']:.1f} MB" + (f" vs PyTorch {pt['peak_growth_mb']:.1f} MB" if pt else "")
    kept = f"{pg['kept_mb']:.1f}" + (f" / {pt['kept_mb']:.1f}" if pt else "")
    print(f"{model:3} peak RSS growth of fit: {row} (kept after it: {kept} MB; {epochs} epoch"
          f"{'s' if epochs > 1 else ''}, fresh processes)")
    for name, r in mem.items():
        if not r["peak_reset"]:
            print(f"{model:3}   note: {name}'s high-water mark could not be reset: its peak includes the data loading")
        base, st = r["rss_before_mb"], r["stages"]
        parts = [f"{label} {st[key]['rss_mb'] - base:+.1f}/{st[key]['peak_mb'] - base:+.1f}"
                 for key, label in zip(STAGES, STAGE_NAMES[name]) if key in st]
        print(f"{model:3}   {name:10} MB over the baseline, RSS/peak after: " + ", ".join(parts))
        if "validation" in st:
            v = st["validation"]
            print(f"{model:3}   {'':10} RSS after epoch 1's validation: anonymous {v['anon_mb'] - r['anon_before_mb']:+.1f}, "
                  f"file-backed (library pages) {v['file_mb'] - r['file_before_mb']:+.1f} MB")
        z = r["sizes"]
        extra = [f"parameters {z['params_mb']:.2f}"] if z.get("params_mb") is not None else []
        if z.get("x_copy_mb") is not None:
            extra.append(f"fit's copy of x {z['x_copy_mb']:.1f}, label rows {z['labels_mb']:.1f}")
        if z.get("train_buffer_mb") is not None:
            extra.append(f"training graph's compute buffer {z['train_buffer_mb']:.1f}")
        v = z.get("validation_buffers_mb")
        if v:
            extra.append(f"validation's compute buffers {v['session_scheduler'] or 0:.1f} (first batch) + "
                         f"{v['forward_cache']:.1f} (cached graph)")
        if extra:
            print(f"{model:3}   {'':10} sizes (MB): " + ", ".join(extra))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", "--model", default="fc,cnn",
                    help="comma-separated: fc, cnn, cnn-bn, gpt (default fc,cnn); gpt runs its own comparison (gpt_compare.py)")
    ap.add_argument("--epochs", type=int, default=4, help="epochs per run (default 4)")
    ap.add_argument("--warmup", type=int, default=1, help="epochs of each run left out of the timing")
    ap.add_argument("--threads", type=int, default=None, help="threads for all three (default: mnist-train's "
                    "own choice, min(cores, (cores + 4) / 2))")
    ap.add_argument("--data", default=None, help="Fashion-MNIST IDX folder (default: Debian's)")
    ap.add_argument("--build-dir", default=None, help="folder holding bin/mnist-train")
    ap.add_argument("--no-cpp", action="store_true", help="leave out ggml's C++ mnist-train")
    ap.add_argument("--no-torch", action="store_true", help="leave out PyTorch")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--memory", action=argparse.BooleanOptionalAction, default=True,
                    help="after each model's timed runs, measure the peak RSS growth of training, each framework "
                         "in a fresh subprocess (default on; --no-memory leaves it out)")
    ap.add_argument("--memory-epochs", type=int, default=1, help="epochs of the memory runs (default 1)")
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
    if args.memory_epochs < 1:
        ap.error("--memory-epochs must be at least 1")
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
            if tool is not None and ARCH[model] is not None:
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
            if "PyTorch" in res:
                print(f"{model:3} {ratio_ceiling(res['pyggml_opt']['gflops'], res['PyTorch']['gflops'], peak)}")
            results["models"][model] = {"gflop_per_epoch": gflop, **res}
            if args.memory:
                mem = {"pyggml_opt": run_memory("pgo", model, args, n_threads, Path(tmp))}
                if torch is not None:
                    mem["PyTorch"] = run_memory("torch", model, args, n_threads, Path(tmp))
                print_memory(model, mem)
                results["models"][model]["memory"] = {
                    "peak_growth_mb": {name: r["peak_growth_mb"] for name, r in mem.items()}, "runs": mem}
            print(f"{model:3} ({gflop:.1f} GFLOP per epoch)\n")
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
    if sys.argv[1:2] == ["--memory-worker"]:
        memory_worker(sys.argv[2:])
    else:
        main()
