"""LoRA training steps on a 0.5 B model: pyggml_opt on F32, Q8_0 and Q4_K_M GGUF files against PyTorch +
PEFT on the float32 model, the same threads, in one run: seconds per optimizer step, tokens/s, peak
resident memory, and GFLOP/s against the machine's measured f32 GEMM peak (``machine.sgemm_peak``).

The model: Qwen2.5-0.5B's configuration (vocabulary 151,936, width 896, 24 blocks, 14 query / 2 key-value
heads, feed-forward 4,864, q / k / v biases, tied embeddings: 494 M parameters), random weights; on
pyggml_opt's side compare_gguf.py's files (written as float32 by pyggml_opt, quantized by llama.cpp's
``llama_model_quantize``), on PEFT's a ``transformers`` ``Qwen2ForCausalLM`` of the same configuration in
float32. Both train rank-8 adapters (alpha 16, no dropout) on every linear projection of the blocks
("all-linear": q, k, v, o, gate, up, down; not the output layer), AdamW (lr 1e-4), batches of 4 windows
of 256 random ids, the cross-entropy over every token. Each side runs in a child process of its own
(its peak RSS, VmHWM, is its own: the model, the data, the training); ``--steps`` timed steps after one
warm-up step (which builds pyggml_opt's graph), the median reported.

A step's floating-point work, counted the same for both: every matrix product of the forward pass
(2 x params x tokens, the output layer included) and of the backward pass to the inputs (the same
again; the frozen weights get no gradient), attention's products (4 x T x head dim per token, head and
block forward, twice that backward), and the
adapters' few: 2.1 TFLOP per step of 1,024 tokens.

    pip install ".[test]"                      # torch, transformers, peft, llama-cpp-python
    python benchmarks/compare_peft_lora.py     # ~10 min on 2 cores; writes /tmp/pgo-qwen2-*.gguf once
    python benchmarks/compare_peft_lora.py --threads 1 --steps 2
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from compare_gguf import make_files  # noqa: E402
from machine import cpu_name, sgemm_peak  # noqa: E402

BATCH, STEPS_LEN = 4, 256
VOCAB, DIM, LAYERS, HEADS, KV_HEADS, FFN = 151_936, 896, 24, 14, 2, 4864
HEAD_DIM = DIM // HEADS

CHILD = r"""
import json, sys, time
import numpy as np

side, path, threads, steps, batch, length = sys.argv[1], sys.argv[2], int(sys.argv[3]), *map(int, sys.argv[4:7])

def peak_mb():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:"))

rng = np.random.default_rng(0)
x = rng.integers(0, 151_936, (batch * (steps + 1), length + 1)).astype(np.int32)
times = []
if side == "peft":
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=151_936, hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, intermediate_size=4864, tie_word_embeddings=True,
                         max_position_embeddings=1024, rope_theta=1e6, rms_norm_eps=1e-6)
    model = get_peft_model(Qwen2ForCausalLM(config), LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0,
                                                                target_modules="all-linear"))
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4, weight_decay=0.0)
    ids = torch.from_numpy(x.astype(np.int64))
    for s in range(steps + 1):
        t0 = time.perf_counter()
        b = ids[s * batch:(s + 1) * batch]
        loss = model(input_ids=b[:, :-1], labels=b[:, 1:].clone()).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
else:
    import pyggml_opt as pgo
    model = pgo.load(path)
    model.enable_lora(rank=8, alpha=16, seed=0)
    marks = []
    clock = pgo.LambdaCallback(on_batch_end=lambda m, b, logs: marks.append(time.perf_counter()))
    start = time.perf_counter()
    model.fit(x[:, :-1], x[:, 1:], epochs=1, batch_size=batch, shuffle=False, verbose=0, n_threads=threads,
              optimizer=pgo.AdamW(lr=1e-4), metrics=[], callbacks=[clock])
    times = list(np.diff([start, *marks]))
print(json.dumps({"side": side, "step_s": float(np.median(times[1:])), "first_s": float(times[0]),
                  "peak_mb": peak_mb()}))
"""


def step_flop(tokens: int, length: int) -> float:
    """The floating-point work of one LoRA step (see the module)."""
    projections = [(DIM, DIM), (DIM, KV_HEADS * HEAD_DIM), (DIM, KV_HEADS * HEAD_DIM), (DIM, DIM), (DIM, FFN),
                   (DIM, FFN), (FFN, DIM)]
    params = LAYERS * sum(i * o for i, o in projections) + VOCAB * DIM
    linear = 2 * 2 * params * tokens                                 # forward, and the inputs' gradients
    attention = 3 * LAYERS * HEADS * 4 * length * HEAD_DIM * tokens  # scores and mixing; backward twice that
    lora = LAYERS * 3 * 2 * 8 * sum(i + o for i, o in projections) * tokens  # rank 8: forward and gradients
    return linear + attention + lora


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--folder", default=os.environ.get("TMPDIR", "/tmp"))
    a = p.parse_args()
    files = make_files(a.folder)
    files = {"F32": os.path.join(a.folder, "pgo-qwen2-f32.gguf"), **files}
    peak = sgemm_peak(a.threads)
    tokens = BATCH * STEPS_LEN
    flop = step_flop(tokens, STEPS_LEN)
    print(f"CPU: {cpu_name()}, {a.threads} threads; f32 GEMM peak {peak['peak']:.0f} GFLOP/s (ggml); batch "
          f"{BATCH} x {STEPS_LEN} tokens, rank 8 all-linear; {flop / 1e12:.2f} TFLOP per step; "
          f"load {os.getloadavg()[0]:.2f}")
    runs = [("PyTorch + PEFT", "F32", "peft", "-")] + [("pyggml_opt", kind, "pyggml_opt", path)
                                                       for kind, path in files.items()]
    rows = []
    for who, kind, side, path in runs:
        out = subprocess.run([sys.executable, "-c", CHILD, side, path, str(a.threads), str(a.steps), str(BATCH),
                              str(STEPS_LEN)], capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"{who} {kind} failed:\n{out.stderr[-2000:]}")
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append((who, kind, r))
    base_tps = tokens / rows[0][2]["step_s"]
    base_mb = rows[0][2]["peak_mb"]
    print("| side | base | s / step | tokens/s | vs PEFT | GFLOP/s | % of peak | peak RSS | vs PEFT |")
    print("|---|---|---|---|---|---|---|---|---|")
    for who, kind, r in rows:
        tps = tokens / r["step_s"]
        gflops = flop / r["step_s"] / 1e9
        print(f"| {who} | {kind} | {r['step_s']:.2f} | {tps:.0f} | {tps / base_tps:.2f}x | {gflops:.0f} | "
              f"{100 * gflops / peak['peak']:.0f} % | {r['peak_mb']:.0f} MB | {100 * r['peak_mb'] / base_mb:.0f} % |")


if __name__ == "__main__":
    main()
