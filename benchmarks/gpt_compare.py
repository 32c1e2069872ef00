"""A small GPT trained by pyggml_opt and by PyTorch from the same initial weights: loss, speed, memory.

Used by ``compare_torch.py --model gpt`` (which documents the command line); this file holds the
model, the data, the PyTorch twin, the training workers and the table. Each framework trains in a
subprocess of its own (``python gpt_compare.py --worker pgo|torch --dir DIR ...``), so that its memory
is measured without the other framework, the data preparation or the parent in the process.

The model is ``pyggml_opt.models.gpt(vocab, context=64, dim=128, n_layers=4, n_heads=4)``:
token embedding ``tok`` + learned positions ``pos``, 4 pre-norm TransformerBlocks (LayerNorm eps 1e-5,
causal multi-head attention with separate wq/wk/wv/wo (dim, dim) + biases and scale 1/sqrt(d_head),
MLP fc1 (4 dim) -> GELU (tanh approximation) -> fc2), final LayerNorm ``ln_f``, untied Linear ``head``.
Data: Debian's fortunes joined by "\\n\\n" as one character stream (CharTokenizer), windows of 64 ids
and their next ids (sliding_windows, stride 64), the last 10 % of the windows held out for validation.
Training: AdamW lr 1e-3, betas 0.9 / 0.999, eps 1e-8, weight decay 0 (pyggml_opt's AdamW defaults;
PyTorch's own default weight decay is 0.01, so it is passed explicitly), batch 32, no dropout, the
first ``steps * 32`` training windows in order (no shuffle, wrapping around if needed), cross-entropy
per token (the mean over every token of the batch), the same threads.

FLOPs of one training step, counted analytically (B = 32 windows, T = 64, d = 128, L = 4 blocks,
V = vocabulary): the GEMMs only (embeddings, norms, softmax and element-wise ops not counted), each
forward GEMM once and twice in the backward pass (input gradient + weight gradient):
    forward  = 2 B T (12 L d^2 + d V)     per token: wq, wk, wv, wo (4 d^2) + fc1, fc2 (8 d^2), head d V
             + 2 B L (2 T^2 d)            attention: q k^T and weights v per sequence, the full T x T
                                          (what ggml computes; a causal kernel may skip half)
    step     = 3 x forward                10.65 GFLOP for V = 115
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

from machine import fit_buffer_mb, peak_mb, ratio_ceiling, reset_peak, ru_maxrss_mb, trimmed_rss_mb

HERE = Path(__file__).resolve().parent
CONTEXT, DIM, N_LAYERS, N_HEADS = 64, 128, 4, 4
BATCH, LR, BETAS, EPS, WEIGHT_DECAY = 32, 1e-3, (0.9, 0.999), 1e-8, 0.0
VAL_FRACTION = 0.1
SEED = 0


# ---------------------------------------------------------------------------------------------- data

def corpus() -> tuple[np.ndarray, np.ndarray, int]:
    """All windows x (n, 64) and next ids y (n, 64) of the fortunes stream, and the vocabulary size."""
    from pyggml_opt import data
    texts, _, _ = data.load_fortunes()
    stream = "\n\n".join(texts)
    tok = data.CharTokenizer.fit([stream])
    ids = tok.encode([stream], len(stream))[0]
    x, y = data.sliding_windows(ids, CONTEXT)
    return x, y, tok.vocab_size


def split(x: np.ndarray, y: np.ndarray, steps: int, val_windows: int | None):
    """The windows of ``steps`` batches in training order (the first 90 %, wrapping around), and the
    last 10 % (or its first ``val_windows``) for validation."""
    n_val = round(len(x) * VAL_FRACTION)
    n_train = len(x) - n_val
    order = np.arange(steps * BATCH) % n_train
    xv, yv = x[n_train:], y[n_train:]
    if val_windows:
        xv, yv = xv[:val_windows], yv[:val_windows]
    return x[order], y[order], xv, yv, n_train


def step_flop(vocab: int) -> float:
    """FLOPs of one training step (module docstring)."""
    fwd = 2 * BATCH * CONTEXT * (12 * N_LAYERS * DIM ** 2 + DIM * vocab) + 2 * BATCH * N_LAYERS * 2 * CONTEXT ** 2 * DIM
    return 3.0 * fwd


def cross_entropy(logits: np.ndarray, targets: np.ndarray) -> tuple[float, int]:
    """Sum over tokens of -log softmax(logits)[target] in float64, and the token count."""
    z = logits.astype(np.float64)
    z -= z.max(axis=-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(logp, targets.astype(np.int64)[..., None], axis=-1)
    return float(-picked.sum()), targets.size


def val_loss(logits_of, xv: np.ndarray, yv: np.ndarray, chunk: int = 256) -> float:
    """Mean per-token cross-entropy (nats) of ``logits_of(x_chunk)`` over the validation windows."""
    total, count = 0.0, 0
    for s in range(0, len(xv), chunk):
        t, c = cross_entropy(logits_of(xv[s:s + chunk]), yv[s:s + chunk])
        total, count = total + t, count + c
    return total / count


# ------------------------------------------------------------------------------------------ PyTorch

def torch_gpt(torch, vocab: int, attention: str = "sdpa"):
    """pyggml_opt's gpt in torch.nn; parameter names are the same."""
    nn, F = torch.nn, torch.nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq, self.wk, self.wv, self.wo = (nn.Linear(DIM, DIM) for _ in range(4))
            mask = torch.triu(torch.ones(CONTEXT, CONTEXT, dtype=torch.bool), diagonal=1)
            self.register_buffer("mask", mask, persistent=False)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (w(x).view(b, t, N_HEADS, d // N_HEADS).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
            if attention == "sdpa":
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:   # as ggml computes it: full scores, masked, softmax, times v
                scores = (q @ k.transpose(-2, -1)) * (d // N_HEADS) ** -0.5
                out = torch.softmax(scores.masked_fill(self.mask[:t, :t], float("-inf")), dim=-1) @ v
            return self.wo(out.transpose(1, 2).reshape(b, t, d))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn = nn.LayerNorm(DIM, eps=1e-5), Attention()
            self.ln2, self.fc1, self.fc2 = nn.LayerNorm(DIM, eps=1e-5), nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, DIM), nn.Embedding(CONTEXT, DIM)
            for i in range(N_LAYERS):
                self.add_module(f"blk{i}", Block())
            self.ln_f, self.head = nn.LayerNorm(DIM, eps=1e-5), nn.Linear(DIM, vocab)

        def forward(self, ids):
            x = self.tok(ids) + self.pos.weight[:ids.shape[1]]
            for i in range(N_LAYERS):
                x = getattr(self, f"blk{i}")(x)
            return self.head(self.ln_f(x))

    return GPT()


def load_torch_weights(torch, net, weights: dict[str, np.ndarray]) -> None:
    """Copy pyggml_opt's weights (numpy, (out, in) for Linear as torch) into ``net``; every name and
    shape must match (load_state_dict(strict=True) checks both)."""
    net.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in weights.items()}, strict=True)


# ------------------------------------------------------------------------------------------- workers

def train_pgo(d: dict, steps: int, threads: int) -> dict:
    from bench_fit import python_cpu_lib

    import pyggml_opt as pgo
    vocab = int(d["vocab"])
    model = pgo.models.gpt(vocab, context=CONTEXT, dim=DIM, n_layers=N_LAYERS, n_heads=N_HEADS)
    model.ensure_built((CONTEXT,), SEED)
    model.set_weights(dict(np.load(d["init"])))
    x, y, xv, yv = d["x"], d["y"], d["xv"], d["yv"]
    stamps, first_loss, buffer_mb = [], [], []

    class Stamps(pgo.Callback):
        def on_batch_end(self, _model, batch, logs):
            stamps.append(time.perf_counter())
            if batch == 0:
                first_loss.append(float(logs["loss"]))
                buffer_mb.append(fit_buffer_mb(self.trainer))

    rss0 = trimmed_rss_mb()
    reset = reset_peak()
    t0 = time.perf_counter()
    model.fit(x, y, epochs=1, batch_size=BATCH, shuffle=False, loss="cross_entropy",
              optimizer=pgo.AdamW(lr=LR, beta1=BETAS[0], beta2=BETAS[1], eps=EPS, weight_decay=WEIGHT_DECAY),
              n_threads=threads, seed=SEED, verbose=0, callbacks=[Stamps()])
    peak = peak_mb()
    rss1 = trimmed_rss_mb()
    vl = val_loss(lambda xb: model.predict(xb, logits=True, batch_size=len(xb), n_threads=threads), xv, yv)
    return {"t0": t0, "stamps": stamps, "first_loss": first_loss[0], "val_loss": vl, "rss_before_mb": rss0,
            "peak_mb": peak, "peak_reset": reset, "rss_after_mb": rss1,
            "ru_maxrss_mb": ru_maxrss_mb(),
            "threads": threads, "library": python_cpu_lib(), "version": getattr(pgo, "__version__", "?"),
            "compute_buffer_mb": buffer_mb[0]}


def train_torch(d: dict, steps: int, threads: int, attention: str) -> dict:
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(SEED)
    vocab = int(d["vocab"])
    net = torch_gpt(torch, vocab, attention)
    load_torch_weights(torch, net, dict(np.load(d["init"])))
    x, y = torch.from_numpy(d["x"].astype(np.int64)), torch.from_numpy(d["y"].astype(np.int64))
    xv, yv = d["xv"], d["yv"]
    opt = torch.optim.AdamW(net.parameters(), lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    F = torch.nn.functional
    stamps, first_loss = [], []
    rss0 = trimmed_rss_mb()
    reset = reset_peak()
    net.train()
    t0 = time.perf_counter()
    for i in range(steps):
        xb, yb = x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH]
        loss = F.cross_entropy(net(xb).reshape(-1, vocab), yb.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        stamps.append(time.perf_counter())
        if i == 0:
            first_loss.append(loss.item())
    peak = peak_mb()
    rss1 = trimmed_rss_mb()
    net.eval()

    def logits_of(xb):
        with torch.no_grad():
            return net(torch.from_numpy(xb.astype(np.int64))).numpy()

    vl = val_loss(logits_of, xv, yv)
    return {"t0": t0, "stamps": stamps, "first_loss": first_loss[0], "val_loss": vl, "rss_before_mb": rss0,
            "peak_mb": peak, "peak_reset": reset, "rss_after_mb": rss1,
            "ru_maxrss_mb": ru_maxrss_mb(),
            "threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads(),
            "library": torch_parallel(torch),
            "version": torch.__version__, "attention": attention}


def torch_parallel(torch) -> str:
    """torch's intra-op backend line ("ATen parallel backend: OpenMP") and its OMP / MKL thread settings."""
    try:
        lines = torch.__config__.parallel_info().splitlines()
    except Exception:  # noqa: BLE001 - informational only
        return "?"
    keep = [ln.strip() for ln in lines if ln.startswith("ATen parallel backend") or "NUM_THREADS" in ln]
    keep += ["MKL " + ln.split("Version")[1].split()[0] for ln in lines if "Math Kernel Library Version" in ln]
    return "; ".join(keep) or "?"


def worker(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", choices=("pgo", "torch"), required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--torch-attention", default="sdpa")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    with np.load(Path(a.dir) / "data.npz") as z:
        d = {k: z[k] for k in z.files}
    d["init"] = str(Path(a.dir) / "init.npz")
    if a.worker == "pgo":
        res = train_pgo(d, a.steps, a.threads)
    else:
        res = train_torch(d, a.steps, a.threads, a.torch_attention)
    res["load_after"] = os.getloadavg()
    Path(a.out).write_text(json.dumps(res))


# ------------------------------------------------------------------------------------------- parent

def prepare(workdir: Path, steps: int, val_windows: int | None) -> dict:
    """Data and pyggml_opt's initial weights (seed 0) into ``workdir`` for the workers."""
    import pyggml_opt as pgo
    x, y, vocab = corpus()
    xt, yt, xv, yv, n_train = split(x, y, steps, val_windows)
    np.savez(workdir / "data.npz", x=xt, y=yt, xv=xv, yv=yv, vocab=np.int64(vocab))
    model = pgo.models.gpt(vocab, context=CONTEXT, dim=DIM, n_layers=N_LAYERS, n_heads=N_HEADS)
    model.ensure_built((CONTEXT,), SEED)
    weights = model.get_weights()
    np.savez(workdir / "init.npz", **weights)
    n_params = sum(int(v.size) for v in weights.values())
    return {"vocab": vocab, "n_windows": len(x), "n_train": n_train, "n_val": len(xv), "n_params": n_params,
            "epochs": steps * BATCH / n_train}


def run_worker(kind: str, workdir: Path, steps: int, threads: int, attention: str, tag: str) -> dict:
    out = workdir / f"result-{tag}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--dir", str(workdir),
           "--steps", str(steps), "--threads", str(threads), "--torch-attention", attention, "--out", str(out)]
    subprocess.run(cmd, check=True, cwd=HERE)
    return json.loads(out.read_text())


def summarise(res: dict, warmup: int, flop: float, tokens_per_step: int = BATCH * CONTEXT) -> dict:
    """Timing of steps warmup .. end (the first ``warmup`` steps left out) of a worker's result (its
    "t0" and one "stamps" entry per step)."""
    stamps = res["stamps"]
    n = len(stamps) - warmup
    t = stamps[-1] - stamps[warmup - 1] if warmup > 0 else stamps[-1] - res["t0"]
    per_step = np.diff([res["t0"], *stamps])[warmup:]
    return {"timed_steps": n, "train_s": t, "s_per_step": t / n, "median_step_s": float(np.median(per_step)),
            "tokens_per_s": n * tokens_per_step / t, "gflops": n * flop / t / 1e9,
            "first_step_s": stamps[0] - res["t0"]}


def run(args, peak: float | None) -> dict:
    """``compare_torch.py --model gpt``: train both, print the table; returns the JSON-ready results."""
    from machine import cpu_name
    steps, warmup, threads = args.steps, args.warmup_steps, args.threads
    if steps <= warmup:
        sys.exit("--steps must be larger than --warmup-steps")
    frameworks = ["pgo"] + ([] if args.no_torch else ["torch"])
    names = {"pgo": "pyggml_opt", "torch": "PyTorch"}
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        info = prepare(workdir, steps, args.val_windows)
        flop = step_flop(info["vocab"])
        print(f"CPU: {cpu_name()}; {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable); "
              f"load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")
        print(f"gpt: vocab {info['vocab']}, context {CONTEXT}, dim {DIM}, {N_LAYERS} layers, {N_HEADS} heads, "
              f"{info['n_params']:,} parameters; {info['n_windows']} windows, {info['n_train']} for training, "
              f"{info['n_val']} for validation")
        print(f"training: {steps} steps of {BATCH} windows (= {info['epochs']:.2f} epochs, in order), AdamW lr {LR} "
              f"betas {BETAS} eps {EPS} wd {WEIGHT_DECAY}; {threads} threads each; timed steps {warmup + 1}-{steps} "
              f"(first {warmup} left out); {flop / 1e9:.2f} GFLOP per step (GEMMs, fwd + bwd)\n", flush=True)
        runs: dict[str, list[dict]] = {f: [] for f in frameworks}
        for rep in range(args.repeats):
            for f in frameworks:
                res = run_worker(f, workdir, steps, threads, args.torch_attention, f"{f}{rep}")
                res.update(summarise(res, warmup, flop))
                runs[f].append(res)
                print(f"  run {rep + 1} {names[f]:10}: {res['tokens_per_s']:8.0f} tokens/s, "
                      f"{res['s_per_step'] * 1e3:6.1f} ms/step (median {res['median_step_s'] * 1e3:.1f}; first step "
                      f"{res['first_step_s'] * 1e3:.0f} ms), val loss {res['val_loss']:.4f}, "
                      f"load {res['load_after'][0]:.2f}", flush=True)
    load1 = os.getloadavg()

    def med(f, key):
        return statistics.median(r[key] for r in runs[f])

    def gflops(f):
        # from the median throughput, as ms/step
        return med(f, "tokens_per_s") / (BATCH * CONTEXT) * flop / 1e9

    print()
    head = (f"{'framework':11} {'val loss':>9} {'step-1 loss':>11} {'tokens/s':>9} {'ms/step':>8} {'GFLOP/s':>8}"
            f"{' (% peak)' if peak else ''} {'peak RSS +MB':>12} {'kept +MB':>9} {'threads':>7}")
    print(head)
    print("-" * len(head))
    for f in frameworks:
        r0 = runs[f][0]
        tps = med(f, "tokens_per_s")          # ms/step and GFLOP/s follow from the median throughput
        g = gflops(f)
        print(f"{names[f]:11} {r0['val_loss']:9.5f} {r0['first_loss']:11.5f} {tps:9.0f} "
              f"{BATCH * CONTEXT / tps * 1e3:8.1f} {g:8.1f}" + (f" ({100 * g / peak:4.1f} %)" if peak else "")
              + f" {med(f, 'peak_mb') - med(f, 'rss_before_mb'):12.1f} {med(f, 'rss_after_mb') - med(f, 'rss_before_mb'):9.1f}"
              f" {r0['threads']:7d}")
    out = {"command": " ".join(sys.argv), "cpu": cpu_name(), "cores": os.cpu_count(), "load_before": load0,
           "load_after": load1, "steps": steps, "warmup_steps": warmup, "threads": threads, "batch": BATCH,
           "context": CONTEXT, "gflop_per_step": flop / 1e9, "gemm_peak_gflops": peak, **info,
           "runs": {names[f]: runs[f] for f in frameworks}}
    if "torch" in runs:
        diff = runs["pgo"][0]["val_loss"] - runs["torch"][0]["val_loss"]
        ratio = med("pgo", "tokens_per_s") / med("torch", "tokens_per_s")
        pairs = [p["tokens_per_s"] / t["tokens_per_s"] for p, t in zip(runs["pgo"], runs["torch"])]
        print(f"\nval loss pyggml_opt - PyTorch: {diff:+.5f} nats ({diff:+.1e}; target |diff| <= 0.05: "
              f"{'met' if abs(diff) <= 0.05 else 'NOT met'}); step-1 loss difference "
              f"{runs['pgo'][0]['first_loss'] - runs['torch'][0]['first_loss']:+.2e} (same initial weights)")
        print(f"throughput pyggml_opt / PyTorch: {ratio:.3f} (target >= 1.0: {'met' if ratio >= 1.0 else 'NOT met'})"
              + ("; per pair of adjacent runs " + ", ".join(f"{p:.3f}" for p in pairs) if len(pairs) > 1 else ""))
        if peak:
            print(ratio_ceiling(gflops("pgo"), gflops("torch"), peak))
        out.update(val_loss_diff=diff, throughput_ratio=ratio, pair_ratios=pairs)
    print(f"PyTorch attention: {args.torch_attention}; pyggml_opt CPU library {runs['pgo'][0]['library']}"
          + (f"; torch {runs['torch'][0]['version']} ({runs['torch'][0]['library']}, interop threads "
             f"{runs['torch'][0]['interop_threads']})" if "torch" in runs else ""))
    buf = runs["pgo"][0].get("compute_buffer_mb")
    if buf is not None:
        print(f"pyggml_opt's training graph compute buffer (ggml_backend_sched_get_buffer_size): {buf:.1f} MB")
    print("memory: 'peak RSS +MB' = the training's RSS high-water mark (VmHWM, reset just before training) minus the "
          "RSS before it; 'kept +MB' = RSS after training, gc.collect() and malloc_trim(0), minus the same "
          "(model and optimizer state still alive)")
    print(f"load average after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    return out


if __name__ == "__main__":
    worker(sys.argv[1:])
