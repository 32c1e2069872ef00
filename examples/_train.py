"""What the Fashion-MNIST examples share: the command line, and training with ggml's MNIST
hyperparameters (30 epochs, batch 1000, physical batch 500, 5 % validation, AdamW 1e-3)."""
import argparse
import time

import pyggml_opt as pgo
from pyggml_opt import data


def run(build_model, doc: str, default_out: str, argv=None) -> float:
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", nargs="?", default=str(data.DEBIAN_FASHION_MNIST_DIR),
                    help="folder with the Fashion-MNIST IDX files (default: %(default)s)")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=None, help="CPU threads (default: pyggml_opt.default_n_threads(): the cores this process may use)")
    ap.add_argument("--backend", default="cpu", help='"cpu", "cuda", "metal" or a ggml device name')
    ap.add_argument("--out", default=default_out, help="GGUF file to write")
    args = ap.parse_args(argv)

    (x_train, y_train), (x_test, y_test) = data.load_fashion_mnist(args.path, flatten=True)
    print(f"Fashion-MNIST from {args.path}: {len(x_train)} training, {len(x_test)} test images")

    model = build_model()
    print(model.summary())

    t0 = time.perf_counter()
    history = model.fit(x_train, y_train, epochs=args.epochs, batch_size=1000, physical_batch_size=500,
                        validation_split=0.05, optimizer=pgo.AdamW(lr=1e-3), seed=0,
                        backend=args.backend, n_threads=args.threads, verbose=1)
    elapsed = time.perf_counter() - t0
    print(f"trained {len(history['loss'])} epochs in {elapsed:.1f} s "
          f"({elapsed / max(len(history['loss']), 1):.2f} s/epoch)")

    loss, accuracy = model.evaluate(x_test, y_test, backend=args.backend)
    print(f"test loss {loss:.4f}, test accuracy {100 * accuracy:.2f} %")

    model.save(args.out)
    print(f"saved {args.out} (pyggml_opt.load({args.out!r}) reads it back)")
    return accuracy
