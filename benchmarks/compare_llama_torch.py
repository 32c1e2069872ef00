"""Training a ~10M-parameter llama: pyggml_opt's ``fit`` against the same model in PyTorch (issue 30).

The model is ``pyggml_opt.models.llama(vocab, context=256, dim=384, n_layers=6, n_heads=6,
n_kv_heads=2)`` (ffn 1024, the default 8/3 x dim rounded up to 32; 10.2 M parameters with the
1024-token vocabulary) and its twin in torch.nn (``torch_llama``: the same parameter names, so the
state dicts map 1:1): token embedding ``tok``, blocks of RMSNorm (eps 1e-5), causal grouped-query
attention (wq, wk, wv, wo without biases; rotary positions as llama.cpp's ``llama`` computes them:
adjacent feature pairs rotated by t * 10000^(-2i/d); ``F.scaled_dot_product_attention(...,
enable_gqa=True)``), RMSNorm, SwiGLU (down(silu(gate x) * up x)), a final RMSNorm ``norm`` and an
untied ``head``.

Data: Debian's fortunes joined by "\\n\\n", a byte-level BPE of ``--vocab`` tokens learnt on them
(``data.BPETokenizer``, Hugging Face ``tokenizers``), the id stream cut into windows of 256 ids and
their next ids (stride 256), the last 5 % held out. Both frameworks start from pyggml_opt's initial
weights (seed 0) copied into the torch model, see the same ``--steps`` batches of 16 windows in the
same order (no shuffle) and train with AdamW (lr 1e-3, betas 0.9 / 0.999, eps 1e-8, weight decay 0.1
on every parameter, no clipping) on the mean per-token cross-entropy, with the same threads, each in a
subprocess of its own (alternated ``--repeats`` times).

Before training the parent checks that the torch model is the same function: its logits for two
held-out windows on the copied weights equal ``predict``'s to 1e-5 of the largest logit (asserted).

Printed per framework: the training loss of the last step's batch (pyggml_opt's from fit's running
mean of the epoch: step i's loss is i m_i - (i - 1) m_(i-1)), the loss on ``--val-windows`` held-out
windows after training (float64 from each model's logits), tokens/s and ms/step over the steps after
``--warmup-steps``, the GFLOP/s (GEMMs only, counted as below) and their share of the f32 GEMM peak
measured at the start of the run (``machine.sgemm_peak``); then the loss differences (target: within
0.05 nats) and the throughput ratio pyggml_opt / PyTorch (target >= 1.2), with the ceiling of the
ratio the peak allows (``machine.ratio_ceiling``).

FLOPs of one step (B = 16 windows, T = 256, d = dim, k = n_kv_heads * d / n_heads, f = ffn, L = layers,
V = vocabulary): forward 2 B T (L (2 d^2 + 2 d k + 3 d f) + d V) + 2 B L (2 T^2 d) (the full T x T
scores, as ggml computes them), the step 3 x forward (input and weight gradients).

    python benchmarks/compare_llama_torch.py                          # 200 steps each, 85 min at load 8 on 2 cores
    python benchmarks/compare_llama_torch.py --steps 20 --dim 128 --layers 2 --heads 4   # a quick look
    python benchmarks/compare_llama_torch.py --repeats 3 --json llama.json

Needs PyTorch (``pip install torch==2.13.0``), Hugging Face ``tokenizers`` (``pip install
"pyggml_opt[text]"``) and Debian's fortunes (``apt-get install fortunes``).
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

from gpt_compare import summarise, torch_parallel, val_loss
from machine import cpu_name, describe_peak, ratio_ceiling, sgemm_peak

# the default model (``pgo.models.llama``'s arguments), vocabulary and batch
MODEL = {"context": 256, "dim": 384, "n_layers": 6, "n_heads": 6, "n_kv_heads": 2}
VOCAB, BATCH = 1024, 16
BETAS, EPS = (0.9, 0.999), 1e-8
VAL_FRACTION = 0.05
SEED = 0
CHECK_WINDOWS = 2          # held-out windows of the forward check
CHECK_TOLERANCE = 1e-5     # of the largest logit: float32 rounding of two summation orders


def model_args(a: argparse.Namespace) -> dict:
    """``pgo.models.llama``'s arguments but the vocabulary size."""
    return {"context": a.context, "dim": a.dim, "n_layers": a.layers, "n_heads": a.heads,
            "n_kv_heads": a.kv_heads, "ffn_dim": a.ffn}


def step_flop(h: dict, batch: int) -> float:
    """FLOPs of one training step (module docstring); ``h``: the model's hyperparameters."""
    d, t, layers = h["dim"], h["context"], h["n_layers"]
    k = h["n_kv_heads"] * d // h["n_heads"]
    per_token = layers * (2 * d * d + 2 * d * k + 3 * d * h["ffn_dim"]) + d * h["vocab_size"]
    return 3.0 * (2 * batch * t * per_token + 2 * batch * layers * 2 * t * t * d)


# ------------------------------------------------------------------------------------------ PyTorch

def torch_llama(torch, h: dict):
    """pyggml_opt's llama with hyperparameters ``h`` in torch.nn, parameters named as pyggml_opt's."""
    nn, F = torch.nn, torch.nn.functional
    dim, heads, kv_heads, ffn = h["dim"], h["n_heads"], h["n_kv_heads"], h["ffn_dim"]
    d_head, eps = dim // heads, h["norm_eps"]

    def linear(rows: int, cols: int):  # pyggml_opt's projections are Linear children without bias
        return nn.Linear(cols, rows, bias=False)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq, self.wk = linear(dim, dim), linear(kv_heads * d_head, dim)
            self.wv, self.wo = linear(kv_heads * d_head, dim), linear(dim, dim)
            # llama.cpp's rope for arch llama: pairs (2i, 2i+1) turned by t * theta^(-2i / d_head)
            angle = torch.outer(torch.arange(h["context"], dtype=torch.float64),
                                h["rope_theta"] ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head))
            self.register_buffer("cos", angle.cos().float(), persistent=False)
            self.register_buffer("sin", angle.sin().float(), persistent=False)

        def rope(self, x):  # (b, t, heads, d_head)
            t = x.shape[1]
            c, s = self.cos[:t, None, :], self.sin[:t, None, :]
            even, odd = x[..., 0::2], x[..., 1::2]
            return torch.stack((even * c - odd * s, even * s + odd * c), dim=-1).flatten(-2)

        def forward(self, x):
            b, t, _ = x.shape
            q = self.rope(self.wq(x).view(b, t, heads, d_head)).transpose(1, 2)
            k = self.rope(self.wk(x).view(b, t, kv_heads, d_head)).transpose(1, 2)
            v = self.wv(x).view(b, t, kv_heads, d_head).transpose(1, 2)
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv_heads != heads)
            return self.wo(out.transpose(1, 2).reshape(b, t, dim))

    class SwiGLU(nn.Module):
        def __init__(self):
            super().__init__()
            self.w_gate, self.w_up, self.w_down = linear(ffn, dim), linear(ffn, dim), linear(dim, ffn)

        def forward(self, x):
            return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn_norm, self.attn = nn.RMSNorm(dim, eps), Attention()
            self.ffn_norm, self.ffn = nn.RMSNorm(dim, eps), SwiGLU()

        def forward(self, x):
            x = x + self.attn(self.attn_norm(x))
            return x + self.ffn(self.ffn_norm(x))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(h["vocab_size"], dim)
            self.blocks = [Block() for _ in range(h["n_layers"])]
            for i, block in enumerate(self.blocks):
                self.add_module(f"blk{i}", block)
            self.norm, self.head = nn.RMSNorm(dim, eps), nn.Linear(dim, h["vocab_size"], bias=False)

        def forward(self, ids):
            x = self.tok(ids)
            for block in self.blocks:
                x = block(x)
            return self.head(self.norm(x))

    return Llama()


def torch_model(torch, h: dict, weights: dict[str, np.ndarray]):
    """``torch_llama`` holding ``weights`` (load_state_dict(strict=True): every name and shape must match)."""
    net = torch_llama(torch, h)
    net.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in weights.items()}, strict=True)
    return net


def torch_logits(torch, net, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return net(torch.from_numpy(x.astype(np.int64))).numpy()


# ------------------------------------------------------------------------------------------- workers

def train_pgo(d: dict, cfg: dict) -> dict:
    import pyggml_opt as pgo
    model = pgo.models.llama(**cfg["h"])
    model.ensure_built((cfg["h"]["context"],), SEED)
    model.set_weights(d["init"])
    stamps, running = [], []

    class Stamps(pgo.Callback):
        def on_batch_end(self, _model, batch, logs):
            stamps.append(time.perf_counter())
            running.append(float(logs["loss"]))  # the mean over the epoch's steps so far

    t0 = time.perf_counter()
    model.fit(d["x"], d["y"], epochs=1, batch_size=cfg["batch"], shuffle=False,
              optimizer=pgo.AdamW(lr=cfg["lr"], beta1=BETAS[0], beta2=BETAS[1], eps=EPS,
                                  weight_decay=cfg["weight_decay"]),
              n_threads=cfg["threads"], seed=SEED, verbose=0, callbacks=[Stamps()])
    sums = np.arange(1, len(running) + 1) * np.array(running)
    losses = np.diff(sums, prepend=0.0)
    threads = cfg["threads"]
    vl = val_loss(lambda xb: model.predict(xb, logits=True, batch_size=len(xb), n_threads=threads),
                  d["xv"], d["yv"], chunk=cfg["batch"])
    return {"t0": t0, "stamps": stamps, "losses": losses.tolist(), "val_loss": vl,
            "version": getattr(pgo, "__version__", "?")}


def train_torch(d: dict, cfg: dict) -> dict:
    import torch
    torch.set_num_threads(cfg["threads"])
    net = torch_model(torch, cfg["h"], d["init"])
    x, y = torch.from_numpy(d["x"].astype(np.int64)), torch.from_numpy(d["y"].astype(np.int64))
    opt = torch.optim.AdamW(net.parameters(), lr=cfg["lr"], betas=BETAS, eps=EPS, weight_decay=cfg["weight_decay"])
    vocab, batch = cfg["h"]["vocab_size"], cfg["batch"]
    stamps, losses = [], []
    net.train()
    t0 = time.perf_counter()
    for i in range(len(x) // batch):
        xb, yb = x[i * batch:(i + 1) * batch], y[i * batch:(i + 1) * batch]
        loss = torch.nn.functional.cross_entropy(net(xb).reshape(-1, vocab), yb.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        stamps.append(time.perf_counter())
        losses.append(loss.item())
    net.eval()
    vl = val_loss(lambda xb: torch_logits(torch, net, xb), d["xv"], d["yv"], chunk=batch)
    return {"t0": t0, "stamps": stamps, "losses": losses, "val_loss": vl, "version": torch.__version__,
            "library": torch_parallel(torch)}


def worker(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", choices=("pgo", "torch"), required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    folder = Path(a.dir)
    cfg = json.loads((folder / "config.json").read_text())
    with np.load(folder / "data.npz") as z:
        d = {k: z[k] for k in z.files}
    with np.load(folder / "init.npz") as z:
        d["init"] = {k: z[k] for k in z.files}
    res = (train_pgo if a.worker == "pgo" else train_torch)(d, cfg)
    res["load_after"] = os.getloadavg()
    Path(a.out).write_text(json.dumps(res))


# ------------------------------------------------------------------------------------------- parent

def prepare(folder: Path, a: argparse.Namespace) -> dict:
    """Tokenizer, windows and pyggml_opt's initial weights (seed 0) into ``folder`` for the workers;
    then the forward check of the torch twin. Returns the run's description."""
    import torch

    import pyggml_opt as pgo
    from pyggml_opt import data
    from pyggml_opt.models.llama import hyperparameters
    texts, _, _ = data.load_fortunes()
    tok = data.BPETokenizer.fit(texts, a.vocab)
    x, y = data.sliding_windows(tok.encode("\n\n".join(texts)), a.context)
    n_val = round(len(x) * VAL_FRACTION)
    n_train = len(x) - n_val
    order = np.arange(a.steps * a.batch) % n_train
    xv, yv = x[n_train:][:a.val_windows], y[n_train:][:a.val_windows]
    np.savez(folder / "data.npz", x=x[order], y=y[order], xv=xv, yv=yv)
    model = pgo.models.llama(tok.vocab_size, **model_args(a))
    model.ensure_built((a.context,), SEED)
    weights = model.get_weights()
    np.savez(folder / "init.npz", **weights)
    h = hyperparameters(model)
    cfg = {"h": h, "batch": a.batch, "lr": a.lr, "weight_decay": a.weight_decay, "threads": a.threads}
    (folder / "config.json").write_text(json.dumps(cfg))

    # the twin is the same function: logits of held-out windows on the copied weights
    torch.set_num_threads(a.threads)
    ours = model.predict(xv[:CHECK_WINDOWS], logits=True, n_threads=a.threads)
    theirs = torch_logits(torch, torch_model(torch, h, weights), xv[:CHECK_WINDOWS])
    scale = float(np.abs(ours).max())
    diff = float(np.abs(ours - theirs).max())
    assert diff <= CHECK_TOLERANCE * scale, (f"the torch model is not pyggml_opt's: logits differ by {diff:.2e} "
                                             f"(largest {scale:.3g}, tolerance {CHECK_TOLERANCE:g} of it)")
    return {"cfg": cfg, "n_windows": len(x), "n_train": n_train, "n_val": len(xv), "epochs": len(order) / n_train,
            "n_params": sum(int(v.size) for v in weights.values()), "check_diff": diff, "check_scale": scale}


def run_worker(kind: str, folder: Path, tag: str) -> dict:
    out = folder / f"result-{tag}.json"
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", kind, "--dir", str(folder),
                    "--out", str(out)], check=True, cwd=Path(__file__).resolve().parent)
    return json.loads(out.read_text())


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200, help="optimizer steps per framework (default 200)")
    ap.add_argument("--warmup-steps", type=int, default=5, help="first steps left out of the timing (default 5)")
    ap.add_argument("--repeats", type=int, default=1, help="alternated runs of each framework (default 1)")
    ap.add_argument("--vocab", type=int, default=VOCAB, help="BPE vocabulary size (default %(default)s)")
    ap.add_argument("--context", type=int, default=MODEL["context"])
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--dim", type=int, default=MODEL["dim"])
    ap.add_argument("--layers", type=int, default=MODEL["n_layers"])
    ap.add_argument("--heads", type=int, default=MODEL["n_heads"])
    ap.add_argument("--kv-heads", type=int, default=MODEL["n_kv_heads"])
    ap.add_argument("--ffn", type=int, default=None, help="SwiGLU width (default: llama's, 8/3 x dim rounded up to 32)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--val-windows", type=int, default=64, help="held-out windows for the loss after training")
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                    help="threads of each framework (default: the cores this process may use)")
    ap.add_argument("--no-peak", action="store_true", help="skip the GEMM peak (~5 s)")
    ap.add_argument("--json", default=None, help="write the results here")
    a = ap.parse_args(argv)
    if a.steps <= a.warmup_steps:
        ap.error("--steps must be larger than --warmup-steps")
    import torch
    load0 = os.getloadavg()
    print(f"CPU: {cpu_name()}; {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable); "
          f"load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}", flush=True)
    peak = None if a.no_peak else sgemm_peak(a.threads, torch)
    if peak:
        print(describe_peak(peak), flush=True)
    names = {"pgo": "pyggml_opt", "torch": "PyTorch"}
    runs: dict[str, list[dict]] = {"pgo": [], "torch": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        info = prepare(folder, a)
        h = info["cfg"]["h"]
        flop = step_flop(h, a.batch)
        print(f"llama: vocab {h['vocab_size']} (BPE), context {h['context']}, dim {h['dim']}, {h['n_layers']} layers, "
              f"{h['n_heads']} heads / {h['n_kv_heads']} kv heads, ffn {h['ffn_dim']}: {info['n_params']:,} parameters; "
              f"{info['n_windows']} windows, {info['n_train']} for training, {info['n_val']} held out used")
        print(f"forward check: torch logits vs predict, {CHECK_WINDOWS} windows: max |diff| {info['check_diff']:.2e} "
              f"(largest logit {info['check_scale']:.3g}; asserted <= {CHECK_TOLERANCE:g} of it)")
        print(f"training: {a.steps} steps of {a.batch} windows ({info['epochs']:.2f} epochs, in order), AdamW lr {a.lr} "
              f"betas {BETAS} eps {EPS} wd {a.weight_decay}; {a.threads} threads each; timed steps "
              f"{a.warmup_steps + 1}-{a.steps}; {flop / 1e9:.1f} GFLOP per step (GEMMs, fwd + bwd)\n", flush=True)
        for rep in range(a.repeats):
            for f in runs:
                res = run_worker(f, folder, f"{f}{rep}")
                res.update(summarise(res, a.warmup_steps, flop, a.batch * a.context))
                runs[f].append(res)
                print(f"  run {rep + 1} {names[f]:10}: {res['tokens_per_s']:8.0f} tokens/s, "
                      f"{res['s_per_step'] * 1e3:7.1f} ms/step (median {res['median_step_s'] * 1e3:.1f}), "
                      f"step-{a.steps} loss {res['losses'][-1]:.4f}, held-out loss {res['val_loss']:.4f}, "
                      f"load {res['load_after'][0]:.2f}", flush=True)
    load1 = os.getloadavg()

    def med(f: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[f])

    print()
    head = (f"{'framework':11} {'step-1 loss':>11} {f'step-{a.steps} loss':>14} {'held-out':>9} {'tokens/s':>9} "
            f"{'ms/step':>8} {'GFLOP/s':>8}{' (% peak)' if peak else ''}")
    print(head)
    print("-" * len(head))
    for f in runs:
        r0 = runs[f][0]
        g = med(f, "gflops")
        print(f"{names[f]:11} {r0['losses'][0]:11.5f} {r0['losses'][-1]:14.5f} {r0['val_loss']:9.5f} "
              f"{med(f, 'tokens_per_s'):9.0f} {med(f, 's_per_step') * 1e3:8.1f} {g:8.1f}"
              + (f" ({100 * g / peak['peak']:4.1f} %)" if peak else ""))
    last = runs["pgo"][0]["losses"][-1] - runs["torch"][0]["losses"][-1]
    held = runs["pgo"][0]["val_loss"] - runs["torch"][0]["val_loss"]
    ratio = med("pgo", "tokens_per_s") / med("torch", "tokens_per_s")
    pairs = [p["tokens_per_s"] / t["tokens_per_s"] for p, t in zip(runs["pgo"], runs["torch"])]
    worst = max(abs(last), abs(held))
    print(f"\nloss pyggml_opt - PyTorch: step {a.steps} {last:+.2e}, held-out {held:+.2e} nats (target within 0.05: "
          f"{'met' if worst <= 0.05 else 'NOT met'}); step 1 "
          f"{runs['pgo'][0]['losses'][0] - runs['torch'][0]['losses'][0]:+.1e} (same initial weights)")
    print(f"throughput pyggml_opt / PyTorch: {ratio:.3f} (target >= 1.2: {'met' if ratio >= 1.2 else 'NOT met'})"
          + ("; per pair of adjacent runs " + ", ".join(f"{p:.3f}" for p in pairs) if len(pairs) > 1 else ""))
    if peak:
        print(ratio_ceiling(med("pgo", "gflops"), med("torch", "gflops"), peak["peak"]))
    print(f"torch {runs['torch'][0]['version']} ({runs['torch'][0]['library']}); pyggml_opt {runs['pgo'][0]['version']}")
    print(f"load average after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    out = {"command": " ".join(sys.argv), "cpu": cpu_name(), "load_before": load0, "load_after": load1,
           "args": vars(a), "gemm_peak": peak, "gflop_per_step": flop / 1e9, **info, "loss_diff_last": last,
           "loss_diff_held_out": held, "throughput_ratio": ratio, "pair_ratios": pairs,
           "runs": {names[f]: runs[f] for f in runs}}
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    if "--worker" in sys.argv:
        worker(sys.argv[1:])
    else:
        main()
