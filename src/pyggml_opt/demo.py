"""The main job: ``python -m pyggml_opt.demo`` trains a model on Fashion-MNIST and saves it.

Runs with no network and no download: it reads Debian's ``dataset-fashion-mnist`` (or the IDX folder
given with --data), and where that is not installed, the small real subset shipped in the package.
Prints the per-epoch progress, the test accuracy, and writes the model as GGUF.
``--model gpt`` instead trains a character-level GPT on Debian's ``fortunes`` (installed text) and
prints samples of the text it generates.

    python -m pyggml_opt.demo                      # MLP (ggml's mnist-fc), 30 epochs
    python -m pyggml_opt.demo --model cnn --epochs 5
    python -m pyggml_opt.demo --model gpt --steps 1000
"""
from __future__ import annotations

import argparse
import time

import pyggml_opt as pgo
from pyggml_opt import data


def main(argv: list[str] | None = None) -> float:
    ap = argparse.ArgumentParser(prog="python -m pyggml_opt.demo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["mlp", "cnn", "gpt"], default="mlp")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--steps", type=int, default=1000, help="optimizer steps of --model gpt (batch 32)")
    ap.add_argument("--data", help="folder with the four Fashion-MNIST IDX files (default: Debian's)")
    ap.add_argument("--small", action="store_true", help="use the small subset shipped in the package")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", default=None, help="GGUF file to write (default: fashion-<model>.gguf)")
    ap.add_argument("--verbose", type=int, default=1, choices=[0, 1, 2])
    args = ap.parse_args(argv)
    if args.model == "gpt":
        return char_gpt(args)

    if not args.small and data.fashion_mnist_available(args.data):
        (x_train, y_train), (x_test, y_test) = data.load_fashion_mnist(args.data, flatten=True)
        source = "Fashion-MNIST"
    else:
        if not args.small:
            print("Fashion-MNIST not found (apt-get install dataset-fashion-mnist); "
                  "using the small subset shipped with pyggml_opt")
        (x_train, y_train), (x_test, y_test) = data.load_fashion_mnist_small(flatten=True)
        source = "Fashion-MNIST subset (bundled)"
    print(f"data: {source}: {len(x_train)} training, {len(x_test)} test images; devices: "
          + ", ".join(d.name for d in pgo.devices()))

    model = pgo.models.mnist_fc() if args.model == "mlp" else pgo.models.mnist_cnn()
    print(model.summary())
    t0 = time.perf_counter()
    # ggml's examples/mnist hyperparameters
    model.fit(x_train, y_train, epochs=args.epochs, batch_size=1000, physical_batch_size=500,
              validation_split=0.05, optimizer=pgo.AdamW(lr=1e-3), seed=0, backend=args.backend,
              n_threads=args.threads, verbose=args.verbose)
    elapsed = time.perf_counter() - t0
    loss, acc = model.evaluate(x_test, y_test, backend=args.backend)
    print(f"training: {elapsed:.1f} s ({elapsed / max(args.epochs, 1):.2f} s/epoch)")
    print(f"test: loss {loss:.4f}, accuracy {100 * acc:.2f} %")
    out = args.out or f"fashion-{args.model}.gguf"
    model.save(out)
    print(f"saved {out}")
    return acc


def char_gpt(args: argparse.Namespace) -> float:
    """A 4-layer GPT (dim 128, context 64) trained on the fortunes, character by character; returns its
    validation loss in nats per character."""
    texts, _, _ = data.load_fortunes()
    tokenizer, x, y = data.char_windows(texts, 64)
    n_val = len(x) // 20
    n_train = min(len(x) - n_val, 32 * args.steps)
    print(f"data: Debian's fortunes: {n_train} windows of 64 characters for training, {n_val} for validation")
    model = pgo.models.gpt(tokenizer.vocab_size, 64, 128, 4, 4)
    print(model.summary())
    steps = n_train // 32
    t0 = time.perf_counter()
    model.fit(x[:n_train], y[:n_train], batch_size=32, validation_data=(x[-n_val:], y[-n_val:]),
              optimizer=pgo.AdamW(lr=pgo.WarmupCosine(2e-3, steps, max(1, steps // 20), 2e-4)), seed=0,
              backend=args.backend, n_threads=args.threads, verbose=args.verbose)
    print(f"training: {time.perf_counter() - t0:.1f} s for {steps} steps")
    val_loss, _ = model.evaluate(x[-n_val:], y[-n_val:], backend=args.backend)
    print(f"validation: loss {val_loss:.4f} nats per character")
    prompt = tokenizer.encode("The ")
    for ids in model.generate([prompt] * 3, 160, temperature=0.8, top_k=20, seed=0, backend=args.backend):
        print("---", tokenizer.decode(ids), sep="\n")
    out = args.out or "fortunes-gpt.gguf"
    model.save(out, extra=tokenizer.to_metadata())
    print(f"saved {out}")
    return val_loss


if __name__ == "__main__":
    main()
