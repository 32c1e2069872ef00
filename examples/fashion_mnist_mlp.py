"""Train a multilayer perceptron on Fashion-MNIST with ggml's training API, from Python.

The model and hyperparameters are those of ggml's examples/mnist ("mnist-fc": 784 -> 500 -> ReLU
-> 10; 30 epochs, logical batch 1000, physical batch 500 (gradients accumulated over 2 physical
batches), 5 % of the training images held out for validation, AdamW with lr 1e-3). Expect about
88-89 % test accuracy. The saved GGUF file is readable by ggml's C++ mnist-eval.

    python examples/fashion_mnist_mlp.py                       # Debian's dataset-fashion-mnist
    python examples/fashion_mnist_mlp.py /path/to/idx/folder   # any folder with the 4 IDX files
    python examples/fashion_mnist_mlp.py --epochs 5 --out mlp.gguf

The folder holds train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
t10k-labels-idx1-ubyte, raw or gzipped (.gz); `apt-get install dataset-fashion-mnist` puts them in
/usr/share/datasets/fashion-mnist.
"""
import argparse
import time

import pyggml_opt as pgo
from pyggml_opt import data


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", nargs="?", default=str(data.DEBIAN_FASHION_MNIST_DIR),
                    help="folder with the Fashion-MNIST IDX files (default: %(default)s)")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores)")
    ap.add_argument("--backend", default="cpu", help='"cpu", "cuda", "metal" or a ggml device name')
    ap.add_argument("--out", default="fashion-mnist-mlp.gguf", help="GGUF file to write")
    args = ap.parse_args(argv)

    (x_train, y_train), (x_test, y_test) = data.load_fashion_mnist(args.path, flatten=True)
    print(f"Fashion-MNIST from {args.path}: {len(x_train)} training, {len(x_test)} test images")

    # the names fc1 / fc2 are ggml's: the saved file is an "mnist-fc" model for ggml's mnist-eval
    model = pgo.Sequential([
        pgo.layers.Linear(784, 500, name="fc1"),
        pgo.layers.ReLU(),
        pgo.layers.Linear(500, 10, name="fc2"),
    ], input_shape=(784,))
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


if __name__ == "__main__":
    main()
