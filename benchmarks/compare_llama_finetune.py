"""Full fine-tuning: pyggml_opt's fit against llama.cpp's own trainer (the steps of its
``examples/training/finetune.cpp``, llama-finetune, run through llama-cpp-python 0.3.36's libraries:
tests/support/llama_trainer.py) on the same F32 file, windows, threads and AdamW, in one run.

The file: a llama of ``--dim`` x ``--layers`` over Llama 2's vocabulary (llama.cpp's
``ggml-vocab-llama-spm.gguf``), random weights, written by pyggml_opt for llama.cpp. The data: Debian's
fortunes tokenized by that vocabulary, windows of 256 ids (llama.cpp pads contexts to 256) every 128
(llama-finetune's n_ctx / 2), in order, one AdamW step (lr ``--lr``) per window, every tensor but the
token embedding trained (llama.cpp never trains it). Printed: each epoch's mean training loss and time
on both sides, tokens per second and their ratio, and the first step checked equal (one window, two
epochs: the loss before and after one step of every tensor).

The curves part after the first step by design of the reference: upstream ggml-opt never resets the
gradient accumulators of allocation-based graphs, the graphs llama.cpp's trainer builds, so each of its
steps applies the sum of every gradient so far (vendor/patches/0038 fixes it in pyggml_opt's ggml).

    pip install ".[test]"
    python benchmarks/compare_llama_finetune.py                # ~1 min on 2 cores
    python benchmarks/compare_llama_finetune.py --threads 2 --dim 512 --layers 8
"""
from __future__ import annotations

import argparse
import os
import sys
import time


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import pyggml_opt as pgo  # noqa: E402
from machine import cpu_name  # noqa: E402
from support.hf_models import vocab_keys  # noqa: E402
from support.llama_trainer import llama_finetune, pyggml_finetune  # noqa: E402

CONTEXT = 256


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--windows", type=int, default=48)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "compare_llama_finetune.gguf"))
    a = p.parse_args()
    keys = vocab_keys("llama-spm")
    tok = pgo.text.GGUFTokenizer(keys)
    model = pgo.models.llama(tok.vocab_size, CONTEXT, a.dim, a.layers, max(1, a.dim // 64))
    model.file_keys = dict(keys)
    model.save(a.out, format="llama.cpp")
    texts, _, _ = pgo.data.load_fortunes()
    ids = tok.encode("\n%\n".join(texts[:2000]))
    x, y = pgo.data.sliding_windows(ids, CONTEXT, CONTEXT // 2)
    x, y = x[:a.windows], y[:a.windows]
    print(f"CPU: {cpu_name()}, {a.threads} thread(s); llama {a.dim} x {a.layers}, vocabulary {tok.vocab_size}, "
          f"{len(x)} windows of {CONTEXT}, AdamW lr {a.lr}, {a.epochs} epochs; load {os.getloadavg()[0]:.2f}")
    one = (llama_finetune(a.out, x[:1], y[:1], 2, a.lr, a.threads),
           pyggml_finetune(a.out, x[:1], y[:1], 2, a.lr, a.threads)[1])
    print("one window, two epochs (the loss before and after one step): llama.cpp "
          f"{[round(v, 6) for v, _ in one[0]]}, pyggml_opt {[round(v, 6) for v, _ in one[1]]}")
    t0 = time.perf_counter()
    theirs = llama_finetune(a.out, x, y, a.epochs, a.lr, a.threads)
    ours = pyggml_finetune(a.out, x, y, a.epochs, a.lr, a.threads)[1]
    tokens = x.size
    print(f"{'epoch':>5} {'llama.cpp loss':>15} {'s':>7} {'tokens/s':>9}   {'pyggml_opt loss':>15} {'s':>7} "
          f"{'tokens/s':>9}   ratio")
    for e, ((lt, st), (lo, so)) in enumerate(zip(theirs, ours)):
        print(f"{e + 1:5d} {lt:15.5f} {st:7.2f} {tokens / st:9.0f}   {lo:15.5f} {so:7.2f} {tokens / so:9.0f}   "
              f"{st / so:.2f}x")
    total_theirs, total_ours = sum(s for _, s in theirs), sum(s for _, s in ours)
    print(f"tokens/s, all epochs: pyggml_opt / llama.cpp = {total_theirs / total_ours:.2f}x "
          f"({time.perf_counter() - t0:.0f} s in all)")


if __name__ == "__main__":
    main()
