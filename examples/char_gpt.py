"""Train a small GPT on real text, character by character, and sample from it.

The corpus is Debian's fortunes (`apt-get install fortunes`: quotations in
/usr/share/games/fortunes/), read offline. Every character becomes a token (pyggml_opt.data.CharTokenizer),
the whole corpus one stream of ids cut into windows of --context characters; the model
(pyggml_opt.models.gpt: learned positions, pre-norm transformer blocks, GELU MLP) learns to predict
the next character at every step. The last 5 % of the windows are held out for validation. The
learning rate warms up and decays on a cosine (pyggml_opt.WarmupCosine).

At the end the script prints samples, saves the model with its tokenizer as GGUF (layout
"pyggml-gpt"), loads the file back and checks that the same prompt and seed generate the same text.

    python examples/char_gpt.py                          # 4 layers, dim 128, context 64, 2000 steps
    python examples/char_gpt.py --steps 300 --layers 2 --dim 64
    python examples/char_gpt.py --categories wisdom science --prompt "The "
"""
import argparse
import math
import time

import pyggml_opt as pgo
from pyggml_opt import data


def main(argv=None) -> float:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--categories", nargs="*", default=None, help="fortune files to read (default: all)")
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--steps", type=int, default=2000, help="optimizer steps (one pass over that many batches)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--prompt", default="The ")
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--length", type=int, default=200, help="characters to generate per sample")
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-k", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="char-gpt.gguf")
    args = ap.parse_args(argv)

    texts, _, names = data.load_fortunes(args.categories)
    tokenizer, x, y = data.char_windows(texts, args.context)
    n_val = max(1, len(x) // 20)
    n_train = min(len(x) - n_val, args.steps * args.batch)
    print(f"fortunes ({len(names)} files): {len(x) * args.context:,} characters, {tokenizer.vocab_size} tokens; "
          f"{n_train} training windows of {args.context}, {n_val} for validation")

    model = pgo.models.gpt(tokenizer.vocab_size, args.context, args.dim, args.layers, args.heads,
                           dropout=args.dropout)
    steps = n_train // args.batch
    schedule = pgo.WarmupCosine(args.lr, total_steps=steps, warmup_steps=max(1, steps // 20), min_lr=args.lr / 10)
    t0 = time.perf_counter()
    model.fit(x[:n_train], y[:n_train], epochs=1, batch_size=args.batch, optimizer=pgo.AdamW(lr=schedule),
              validation_data=(x[-n_val:], y[-n_val:]), seed=args.seed, backend=args.backend,
              n_threads=args.threads, verbose=1)
    elapsed = time.perf_counter() - t0
    print(f"trained {steps} steps in {elapsed:.1f} s ({steps * args.batch * args.context / elapsed:,.0f} tokens/s)")
    val_loss, _ = model.evaluate(x[-n_val:], y[-n_val:], backend=args.backend)
    print(f"validation loss {val_loss:.4f} nats per character ({val_loss / math.log(2):.3f} bits)")

    prompt = tokenizer.encode(args.prompt)
    samples = model.generate([prompt] * args.samples, args.length, temperature=args.temperature,
                             top_k=args.top_k, seed=args.seed, backend=args.backend)
    for i, ids in enumerate(samples):
        print(f"--- sample {i + 1} ---\n{tokenizer.decode(ids)}")

    model.save(args.out, extra=tokenizer.to_metadata())  # the tokenizer's characters beside the weights
    loaded = pgo.load(args.out)
    same_tokenizer = data.CharTokenizer.from_metadata(pgo.saving.load_metadata(args.out))
    again = loaded.generate([same_tokenizer.encode(args.prompt)] * args.samples, args.length,
                            temperature=args.temperature, top_k=args.top_k, seed=args.seed, backend=args.backend)
    if not (again == samples).all():
        raise SystemExit(f"{args.out}: the loaded model generated other text for the same prompt and seed")
    print(f"saved {args.out}; loaded back, it generates the same samples")
    return val_loss


if __name__ == "__main__":
    main()
