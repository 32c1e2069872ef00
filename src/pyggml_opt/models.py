"""Ready-made architectures: ggml's MNIST example models, with ggml's tensor names.

Models built here save with ``general.architecture`` "mnist-fc" / "mnist-cnn" and the tensor names
of vendor/ggml/examples/mnist, so ggml's C++ ``mnist-eval`` reads them and files written by the C++
``mnist-train`` load here (``pyggml_opt.load``). Both take flat rows of 784 pixels, as the C++ does.
"""
from __future__ import annotations

from .nn.layers import Conv2d, Flatten, Linear, MaxPool2d, ReLU, Reshape
from .nn.model import Sequential

MNIST_HW = 28
MNIST_NINPUT = MNIST_HW * MNIST_HW
MNIST_NCLASSES = 10
MNIST_NHIDDEN = 500
MNIST_CNN_NCB = 8


def mnist_fc(n_hidden: int = MNIST_NHIDDEN) -> Sequential:
    """784 -> n_hidden -> ReLU -> 10 (ggml's "mnist-fc"; tensors fc1.weight, fc1.bias, fc2.*)."""
    return Sequential([Linear(MNIST_NINPUT, n_hidden, name="fc1"), ReLU(),
                       Linear(n_hidden, MNIST_NCLASSES, name="fc2")], input_shape=(MNIST_NINPUT,))


def mnist_cnn() -> Sequential:
    """ggml's "mnist-cnn": two 3x3 convolutions (8 and 16 channels, padding 1) with ReLU and 2x2 max
    pooling, then a dense layer to 10 classes (tensors conv1.*, conv2.*, dense.*)."""
    ncb = MNIST_CNN_NCB
    return Sequential([
        Reshape((1, MNIST_HW, MNIST_HW)),
        Conv2d(1, ncb, 3, padding=1, name="conv1"), ReLU(), MaxPool2d(2),
        Conv2d(ncb, 2 * ncb, 3, padding=1, name="conv2"), ReLU(), MaxPool2d(2),
        Flatten(),
        Linear((MNIST_HW // 4) ** 2 * 2 * ncb, MNIST_NCLASSES, name="dense"),
    ], input_shape=(MNIST_NINPUT,))


ARCHITECTURES = {"mnist-fc": mnist_fc, "mnist-cnn": mnist_cnn}
