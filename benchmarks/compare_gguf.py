"""pyggml_opt against llama.cpp (llama-cpp-python) on the quantized GGUF files users run: a model of
Qwen2.5-0.5B's configuration (``--model qwen2.5-0.5b``, llama.cpp's ``qwen2``: vocabulary 151,936, width
896, 24 blocks, 14 query / 2 key-value heads of 64, feed-forward 4,864, q / k / v biases, NEOX rope, tied
embeddings: 494 M parameters) or of Gemma-3-270M's (``--model gemma-3-270m``, llama.cpp's ``gemma3``:
vocabulary 262,144, width 640, 18 blocks (every sixth global, the others a sliding window of 512), 4
query / 1 key-value heads of 256, feed-forward 2,048, tied embeddings: 268 M parameters) with random
weights, written as float32 by pyggml_opt and quantized by llama.cpp (``llama_model_quantize``) to Q8_0
and Q4_K_M. On each file, the same threads, in one run:

  load      seconds from nothing to the logits of a one-token prompt (``pgo.load`` + ``predict`` /
            ``Llama(...)`` + ``eval``), and the peak resident memory that added, as a multiple of the file
  prompt    tokens/s of a 512-token prompt (``generate(prompt, 1)`` / ``eval``: one batch)
  generate  tokens/s of 128 new tokens after a 32-token prompt (greedy; the gaps between streamed tokens)
  LoRA step with ``--lora``, pyggml_opt only (llama.cpp has no LoRA training): seconds of one AdamW step of
            rank-8 adapters on every block projection, on a batch of 1 x 256 tokens (after a first one)

Each figure is the best of ``--repeats`` runs, each run in a fresh process per side (the file is in the
page cache for both). llama.cpp keeps an F32 key / value cache (``type_k=0, type_v=0``), as pyggml_opt
does. Printed: both figures and pyggml_opt / llama.cpp (for load time and memory, llama.cpp / pyggml_opt:
above 1 is better for pyggml_opt everywhere).

    pip install ".[test]"                       # llama-cpp-python 0.3.36
    python benchmarks/compare_gguf.py           # writes /tmp/pgo-qwen2-*.gguf once (2 GB + 0.5 + 0.4 GB)
    python benchmarks/compare_gguf.py --threads 1 --repeats 3
    python benchmarks/compare_gguf.py --model gemma-3-270m --lora   # /tmp/pgo-gemma-3-270m-*.gguf
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from machine import cpu_name  # noqa: E402

CONTEXT, SHORT, LONG, NEW, LORA_TOKENS = 1024, 32, 512, 128, 256


def qwen25_05b():
    import pyggml_opt as pgo
    return pgo.models.qwen2(151_936, CONTEXT, 896, 24, 14, 2, 4864, tie_embeddings=True)


def gemma3_270m():
    import pyggml_opt as pgo
    return pgo.models.gemma3(262_144, CONTEXT, 640, 18, 4, 1, 2048, 256, sliding_window=512)


MODELS = {"qwen2.5-0.5b": (qwen25_05b, 151_936, "qwen2"), "gemma-3-270m": (gemma3_270m, 262_144, "gemma-3-270m")}

CHILD = r"""
import ctypes, gc, json, sys, time
import numpy as np

side, path, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
CONTEXT, SHORT, LONG, NEW, VOCAB, LORA = (int(v) for v in sys.argv[4:10])

def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

rng = np.random.default_rng(0)
short, long = (rng.integers(0, VOCAB, n).astype(np.int32) for n in (SHORT, LONG))
if side == "pyggml_opt":
    import pyggml_opt as pgo
else:
    import llama_cpp
gc.collect(); ctypes.CDLL("libc.so.6").malloc_trim(0)
before = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
t0 = time.perf_counter()
if side == "pyggml_opt":
    model = pgo.load(path)
    model.predict(short[None, :1], logits=True, n_threads=threads)
else:
    llm = llama_cpp.Llama(path, n_ctx=CONTEXT, n_batch=LONG, n_ubatch=LONG, n_threads=threads,
                          n_threads_batch=threads, type_k=0, type_v=0, verbose=False)
    llm.eval(short[:1].tolist())
load_s = time.perf_counter() - t0
peak = status("VmHWM") - before

t0 = time.perf_counter()
if side == "pyggml_opt":
    model.generate(long, 1, temperature=0, n_threads=threads)
else:
    llm.reset(); llm.eval(long.tolist()); llm.sample(temp=0.0)
prompt_s = time.perf_counter() - t0

if side == "pyggml_opt":
    stream = model.generate(short, NEW, temperature=0, n_threads=threads, stream=True)
else:
    stream = llm.generate(short.tolist(), temp=0.0, top_k=1, top_p=1.0, min_p=0.0, repeat_penalty=1.0, reset=True)
stamps = []
for _ in stream:
    stamps.append(time.perf_counter())
    if len(stamps) == NEW:
        break
stream.close()  # the model is busy while a generate stream is open
lora_s = None
if side == "pyggml_opt" and LORA:
    model.enable_lora(rank=8, alpha=16, seed=0)
    batch = rng.integers(0, VOCAB, (2, 1, LORA)).astype(np.int32)
    times = []
    for x in batch:  # the first step builds the training graph
        t0 = time.perf_counter()
        model.fit(x, np.roll(x, -1, axis=1), epochs=1, batch_size=1, optimizer=pgo.AdamW(lr=1e-4), verbose=0,
                  n_threads=threads)
        times.append(time.perf_counter() - t0)
    lora_s = times[-1]
print(json.dumps({"load_s": load_s, "peak": peak, "prompt_tps": LONG / prompt_s,
                  "gen_tps": (NEW - 1) / (stamps[-1] - stamps[0]), "lora_s": lora_s}))
"""


def make_files(folder: str, name: str = "qwen2.5-0.5b") -> dict[str, str]:
    """The float32 file of model ``name`` (``MODELS``; pyggml_opt's writer, random weights) and llama.cpp's
    Q8_0 and Q4_K_M of it."""
    import llama_cpp

    from pyggml_opt.data import CharTokenizer

    build, vocab, stem = MODELS[name]
    f32 = os.path.join(folder, f"pgo-{stem}-f32.gguf")
    files = {"Q8_0": os.path.join(folder, f"pgo-{stem}-q8_0.gguf"), "Q4_K_M": os.path.join(folder, f"pgo-{stem}-q4_k_m.gguf")}
    if not os.path.exists(f32):
        # one token per character, from U+10000 on (no surrogates, none of the characters save refuses)
        build().save(f32, tokenizer=CharTokenizer("".join(chr(0x10000 + i) for i in range(vocab - 2))))
    for ftype, path in files.items():
        if not os.path.exists(path):
            params = llama_cpp.llama_model_quantize_default_params()
            params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}")
            params.nthread = os.cpu_count() or 1
            assert llama_cpp.llama_model_quantize(f32.encode(), path.encode(), params) == 0
    return files


def run(side: str, path: str, threads: int, vocab: int, lora: bool) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, side, path, str(threads), str(CONTEXT), str(SHORT), str(LONG),
                          str(NEW), str(vocab), str(LORA_TOKENS if lora else 0)], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--folder", default="/tmp")
    ap.add_argument("--model", choices=sorted(MODELS), default="qwen2.5-0.5b")
    ap.add_argument("--lora", action="store_true", help="also time a LoRA training step (pyggml_opt)")
    args = ap.parse_args()
    import llama_cpp  # the peer; an ImportError says what to install

    files = make_files(args.folder, args.model)
    vocab = MODELS[args.model][1]
    print(f"{args.model}; CPU: {cpu_name()} ({os.cpu_count()} logical), {args.threads} thread(s), load average "
          f"{os.getloadavg()[0]:.1f}; llama-cpp-python {llama_cpp.__version__}; best of {args.repeats}")
    print(f"| file | figure | pyggml_opt | llama.cpp | ratio |\n|---|---|---|---|---|")
    for ftype, path in files.items():
        size = os.path.getsize(path)
        results: dict[str, list[dict[str, float]]] = {"pyggml_opt": [], "llama.cpp": []}
        for _ in range(args.repeats):
            for side in results:  # alternated: the machine's drifts hit both
                results[side].append(run(side, path, args.threads, vocab, args.lora))
        best = {side: {"load_s": min(r["load_s"] for r in rs), "peak": min(r["peak"] for r in rs),
                       "prompt_tps": max(r["prompt_tps"] for r in rs), "gen_tps": max(r["gen_tps"] for r in rs)}
                for side, rs in results.items()}
        ours, theirs = best["pyggml_opt"], best["llama.cpp"]
        name = f"{ftype} ({size / 1e6:.0f} MB)"
        print(f"| {name} | load (s) | {ours['load_s']:.2f} | {theirs['load_s']:.2f} | "
              f"{theirs['load_s'] / ours['load_s']:.2f}x |")
        print(f"| {name} | peak memory of loading (x file) | {ours['peak'] / size:.2f} | {theirs['peak'] / size:.2f} | "
              f"{theirs['peak'] / ours['peak']:.2f}x |")
        print(f"| {name} | prompt, {LONG} tokens (tokens/s) | {ours['prompt_tps']:.1f} | {theirs['prompt_tps']:.1f} | "
              f"{ours['prompt_tps'] / theirs['prompt_tps']:.2f}x |")
        print(f"| {name} | generation, {NEW} tokens (tokens/s) | {ours['gen_tps']:.1f} | {theirs['gen_tps']:.1f} | "
              f"{ours['gen_tps'] / theirs['gen_tps']:.2f}x |")
        if args.lora:
            lora_s = min(r["lora_s"] for r in results["pyggml_opt"])
            print(f"| {name} | LoRA step, 1 x {LORA_TOKENS} tokens (s) | {lora_s:.2f} | - | - |")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
