"""Train a small Llama on the fortunes, export it for llama.cpp, and generate from it in both.

The corpus is Debian's fortunes (`apt-get install fortunes`), read offline. A byte-level BPE
tokenizer of --vocab tokens is learnt on it (pyggml_opt.data.BPETokenizer; `pip install
"pyggml_opt[text]"`), the texts joined by blank lines become one stream of ids cut into windows of
--context ids, the last 5 % held out for validation, and pyggml_opt.models.llama (RMSNorm, rotary
positions, grouped-query attention, SwiGLU) learns the next id at every step.

The model is then saved with its tokenizer as llama.cpp's `llama` architecture, in float32 and with
Q8_0 weights, and generates from --prompt, greedily and sampled: in pyggml_opt (`model.generate`, and
the Q8_0 file loaded back with `pgo.load`) and in llama.cpp through llama-cpp-python (`pip install
llama-cpp-python`) from both files. llama.cpp's greedy text must be pyggml_opt's, token for token, for
the float32 model and for the Q8_0 one (the Q8_0 model's may depart from the float32 one's); sampled
texts differ (two random generators). The files also run in llama.cpp's own tools:
`llama-completion -m llama-fortunes.gguf -c 256 -p "A man" -n 60 --temp 0` (docs: "Deploy with
llama.cpp").

    python examples/llama_fortunes.py                        # 2 x 128 wide, 512 tokens, ~2 min on 2 cores
    python examples/llama_fortunes.py --steps 1000 --layers 4 --dim 256 --heads 8 --kv-heads 4
    python examples/llama_fortunes.py --prompt "Q: Why" --length 80 --temperature 1
"""
import argparse
import math
import time
from pathlib import Path

import pyggml_opt as pgo
from pyggml_opt import data


def in_llama_cpp(path: Path, prompt: str, length: int, args: argparse.Namespace) -> tuple[list[int], str]:
    """What llama.cpp makes of the model file ``path``: the ids it generates greedily after ``prompt``,
    and a text it samples."""
    try:
        from llama_cpp import Llama
    except ImportError as exc:
        raise SystemExit("this example generates with llama.cpp: pip install llama-cpp-python") from exc
    # type_k / type_v 0: an F32 key / value cache (llama.cpp's default F16 cache rounds keys and values)
    llm = Llama(str(path), n_ctx=args.context, type_k=0, type_v=0, n_threads=args.threads, verbose=False)
    try:
        greedy: list[int] = []
        for token in llm.generate(llm.tokenize(prompt.encode(), add_bos=False, special=False), temp=0.0):
            greedy.append(token)
            if len(greedy) == length:
                break
        sampled = llm(prompt, max_tokens=length, temperature=args.temperature, top_k=args.top_k, top_p=1.0,
                      min_p=0.0, seed=args.seed)["choices"][0]["text"]
        return greedy, sampled
    finally:
        llm.close()


def main(argv=None) -> float:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--categories", nargs="*", default=None, help="fortune files to read (default: all)")
    ap.add_argument("--vocab", type=int, default=512, help="BPE vocabulary size")
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=200, help="optimizer steps (one pass over that many batches)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--prompt", default="A man")
    ap.add_argument("--length", type=int, default=60, help="tokens to generate (prompt + length <= context)")
    ap.add_argument("--temperature", type=float, default=0.8, help="of the sampled texts")
    ap.add_argument("--top-k", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="llama-fortunes.gguf", help="the float32 file; the Q8_0 one gets -q8_0")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    texts, _, names = data.load_fortunes(args.categories)
    tokenizer = data.BPETokenizer.fit(texts, args.vocab)
    x, y = data.sliding_windows(tokenizer.encode("\n\n".join(texts)), args.context)
    n_val = max(1, len(x) // 20)
    n_train = min(len(x) - n_val, args.steps * args.batch)
    print(f"fortunes ({len(names)} files): {len(x) * args.context:,} tokens of a {tokenizer.vocab_size}-token BPE "
          f"(learnt in {time.perf_counter() - t0:.1f} s); {n_train} training windows of {args.context}, "
          f"{n_val} for validation")

    model = pgo.models.llama(tokenizer.vocab_size, args.context, args.dim, args.layers, args.heads,
                             n_kv_heads=args.kv_heads)
    steps = n_train // args.batch
    schedule = pgo.WarmupCosine(args.lr, total_steps=steps, warmup_steps=max(1, steps // 20), min_lr=args.lr / 10)
    t1 = time.perf_counter()
    model.fit(x[:n_train], y[:n_train], epochs=1, batch_size=args.batch, optimizer=pgo.AdamW(lr=schedule),
              seed=args.seed, n_threads=args.threads, verbose=1)
    elapsed = time.perf_counter() - t1
    print(f"trained {steps} steps in {elapsed:.1f} s ({steps * args.batch * args.context / elapsed:,.0f} tokens/s)")
    val_loss, _ = model.evaluate(x[-n_val:], y[-n_val:], n_threads=args.threads)
    print(f"validation loss {val_loss:.4f} nats per token (a uniform guess: {math.log(tokenizer.vocab_size):.2f})")

    f32 = Path(args.out)
    q8 = f32.with_name(f"{f32.stem}-q8_0{f32.suffix}")
    model.save(f32, tokenizer=tokenizer)                    # llama.cpp's `llama` architecture + tokenizer
    model.save(q8, tokenizer=tokenizer, quantize="q8_0")   # weight matrices in 8-bit blocks
    print(f"saved {f32} ({f32.stat().st_size:,} bytes) and {q8} ({q8.stat().st_size:,} bytes)")

    prompt = tokenizer.encode(args.prompt)
    quantized = pgo.load(q8)                                # its matrices stay Q8_0
    for (label, ours_model), path in zip((("float32", model), ("Q8_0", quantized)), (f32, q8)):
        ours = ours_model.generate(prompt, args.length, temperature=0, n_threads=args.threads)[len(prompt):].tolist()
        sampled = ours_model.generate(prompt, args.length, temperature=args.temperature, top_k=args.top_k,
                                      seed=args.seed, n_threads=args.threads)
        print(f"--- pyggml_opt, {label}, greedy ---\n{args.prompt}{tokenizer.decode(ours)}")
        print(f"--- pyggml_opt, {label}, sampled ---\n{tokenizer.decode(sampled)}")
        ids, text = in_llama_cpp(path, args.prompt, args.length, args)
        same = next((i for i, (a, b) in enumerate(zip(ids, ours)) if a != b), min(len(ids), len(ours)))
        print(f"--- llama.cpp, {label}, greedy: the first {same} of {len(ours)} tokens are pyggml_opt's ---\n"
              f"{args.prompt}{tokenizer.decode(ids)}")
        print(f"--- llama.cpp, {label}, sampled (another random generator than pyggml_opt's) ---\n{args.prompt}{text}")
        if ids != ours:
            raise SystemExit(f"llama.cpp's greedy text from {path} departs from pyggml_opt's at token {same}")
    print(f"llama.cpp generates pyggml_opt's greedy text from both files; {time.perf_counter() - t0:.0f} s in all")
    return val_loss


if __name__ == "__main__":
    main()
