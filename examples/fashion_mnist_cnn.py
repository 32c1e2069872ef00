"""Train a convolutional network on Fashion-MNIST with ggml's training API, from Python.

The model and hyperparameters are those of ggml's examples/mnist ("mnist-cnn": two 3x3 convolutions
with 8 and 16 channels, each followed by ReLU and 2x2 max pooling, then a dense layer to 10 classes;
30 epochs, logical batch 1000, physical batch 500, 5 % validation, AdamW with lr 1e-3). Expect about
86-87 % test accuracy after 30 epochs; an epoch takes about 8 s on two cores (benchmarks/CPU_SPEED.md).
The saved GGUF file is readable by ggml's C++ mnist-eval.

    python examples/fashion_mnist_cnn.py                       # Debian's dataset-fashion-mnist
    python examples/fashion_mnist_cnn.py /path/to/idx/folder   # any folder with the 4 IDX files
    python examples/fashion_mnist_cnn.py --epochs 3 --out cnn.gguf

The folder holds train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
t10k-labels-idx1-ubyte, raw or gzipped (.gz); `apt-get install dataset-fashion-mnist` puts them in
/usr/share/datasets/fashion-mnist.
"""
import pyggml_opt as pgo
from _train import run


def build_model():
    L = pgo.layers
    # Flat rows of 784 pixels, read as 1x28x28 images (as ggml's example does; a model without the
    # Reshape takes images shaped (n, 1, 28, 28)). The layer names are ggml's, so the saved file is
    # an "mnist-cnn" model for ggml's mnist-eval.
    return pgo.Sequential([
        L.Reshape((1, 28, 28)),
        L.Conv2d(1, 8, 3, padding=1, name="conv1"), L.ReLU(), L.MaxPool2d(2),    # 8 x 14 x 14
        L.Conv2d(8, 16, 3, padding=1, name="conv2"), L.ReLU(), L.MaxPool2d(2),   # 16 x 7 x 7
        L.Flatten(),
        L.Linear(7 * 7 * 16, 10, name="dense"),
    ], input_shape=(784,))


def main(argv=None):
    return run(build_model, __doc__, "fashion-mnist-cnn.gguf", argv)


if __name__ == "__main__":
    main()
