"""Examples of different lengths in fine-tuning: one static graph over padded windows, one over packed
windows (masks keep the documents apart), or one graph per length bucket, measured on the same data,
model and threads in one run: tokens trained per second and peak resident memory.

The data: Debian's fortunes as prompt / completion pairs ("A fortune from <file>:" -> the fortune),
tokenized by Llama 2's SentencePiece vocabulary (llama.cpp's ``ggml-vocab-llama-spm.gguf`` from the
llama-cpp-python 0.3.36 sdist the tests fetch), the completion trained; their lengths run from a dozen
to ``--max-seq-length`` tokens, as fine-tuning data does. The model: a llama of that vocabulary (width
256, 4 blocks, random weights) with rank-8 LoRA adapters on every projection, as the fine-tuning command
trains it. One epoch each, AdamW, batches of ``--batch-size`` rows:
  - padded: every example its own row of the longest example's length (``Examples.windows``);
  - packed: examples packed first-fit into rows of that length (``Examples.packed``);
  - buckets: the examples grouped by length rounded up to 64 tokens, each group trained on its own
    graph of that length (what allocation-based graphs per length bucket compute; one ``fit`` each).
Each mode runs in a child process of its own, so its peak RSS (VmHWM) is its own.

    pip install ".[test]"
    python benchmarks/bench_packing.py                 # ~1 min on 2 cores
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from machine import cpu_name, peak_mb  # noqa: E402

VOCAB = Path.home() / ".cache" / "pyggml_opt" / "llama_cpp_python-0.3.36" / "vendor" / "llama.cpp" / "models" / \
    "ggml-vocab-llama-spm.gguf"
MODES = ("padded", "packed", "buckets")
BUCKET = 64


def examples(n: int, max_seq_length: int):
    """The fortunes as tokenized completions (``data.Examples``)."""
    import pyggml_opt as pgo
    from pyggml_opt.data import tokenize_jsonl
    from pyggml_opt.data.text import load_fortunes

    texts, labels, names = load_fortunes()
    order = np.random.default_rng(0).permutation(len(texts))[:n]
    path = Path(os.environ.get("TMPDIR", "/tmp")) / "bench_packing.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"A fortune from {names[labels[i]]}:\n", "completion": texts[i]}) + "\n"
                            for i in order))
    return tokenize_jsonl(path, pgo.text.GGUFTokenizer.from_file(VOCAB), max_seq_length=max_seq_length)


def run(mode: str, args: argparse.Namespace) -> dict:
    """Train one epoch in ``mode``; its tokens per second and peak RSS."""
    import pyggml_opt as pgo

    ex = examples(args.examples, args.max_seq_length)
    steps = int(ex.lengths().max()) - 1
    if mode == "buckets":
        groups = {}
        for i, n in enumerate(ex.lengths()):
            groups.setdefault(min(-(-(n - 1) // BUCKET) * BUCKET, steps), []).append(i)
        parts = [sub_windows(ex, idx, length) for length, idx in sorted(groups.items())]
    else:
        parts = [ex.windows(steps) if mode == "padded" else ex.packed(steps)]
    model = pgo.models.llama(32000, args.max_seq_length, 256, 4, 4)
    model.enable_lora(rank=8, alpha=16, seed=0)
    rows = sum(len(p[0]) for p in parts)
    t0 = time.perf_counter()
    for x, y, w in parts:
        model.fit(x, y, sample_weight=w, epochs=1, batch_size=min(args.batch_size, len(x)), verbose=0,
                  n_threads=args.threads, optimizer=pgo.AdamW(lr=1e-4))
    seconds = time.perf_counter() - t0
    tokens = int((ex.lengths() - 1).sum())
    return {"mode": mode, "rows": rows, "steps": steps, "tokens": tokens, "seconds": seconds,
            "tokens_per_s": tokens / seconds, "peak_mb": peak_mb()}


def sub_windows(ex, idx, length):
    """``Examples.windows`` of the examples ``idx`` at ``length`` steps."""
    from pyggml_opt.data import Examples

    ids = [ex.example(i) for i in idx]
    starts = np.r_[0, np.cumsum([len(a) for a, _ in ids])]
    sub = Examples(np.concatenate([a for a, _ in ids]), np.concatenate([t for _, t in ids]), starts, ex.format)
    return sub.windows(length)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=int, default=200)
    p.add_argument("--max-seq-length", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)  # a child's one mode
    args = p.parse_args()
    if args.mode:
        print(json.dumps(run(args.mode, args)))
        return
    print(f"CPU: {cpu_name()}, {args.threads} threads; {args.examples} fortunes, max_seq_length {args.max_seq_length}, "
          f"batch {args.batch_size} rows; load {os.getloadavg()[0]:.2f}")
    results = []
    for mode in MODES:
        out = subprocess.run([sys.executable, __file__, "--mode", mode, *sys.argv[1:]], capture_output=True, text=True,
                             check=True)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    base = results[0]["tokens_per_s"]
    print(f"{'mode':8} {'rows':>5} {'tokens':>7} {'seconds':>8} {'tokens/s':>9} {'vs padded':>9} {'peak MB':>8}")
    for r in results:
        print(f"{r['mode']:8} {r['rows']:5d} {r['tokens']:7d} {r['seconds']:8.1f} {r['tokens_per_s']:9.0f} "
              f"{r['tokens_per_s'] / base:8.2f}x {r['peak_mb']:8.0f}")


if __name__ == "__main__":
    main()
