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
import pyggml_opt as pgo
from _train import run


def build_model():
    # the names fc1 / fc2 are ggml's: the saved file is an "mnist-fc" model for ggml's mnist-eval
    return pgo.Sequential([
        pgo.layers.Linear(784, 500, name="fc1"),
        pgo.layers.ReLU(),
        pgo.layers.Linear(500, 10, name="fc2"),
    ], input_shape=(784,))


def main(argv=None):
    return run(build_model, __doc__, "fashion-mnist-mlp.gguf", argv)


if __name__ == "__main__":
    main()
