"""Ready-made architectures: ggml's MNIST example models, with ggml's tensor names.

Models built here save with ``general.architecture`` "mnist-fc" / "mnist-cnn" (two registered file
layouts) and the tensor names of vendor/ggml/examples/mnist, so ggml's C++ ``mnist-eval`` reads them
and files written by the C++ ``mnist-train`` load here (``pyggml_opt.load``). Both take flat rows of
784 pixels, as the C++ does. Any Sequential with the same layers saves in the same layout.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..nn import Network, serialize
from ..nn.losses import CrossEntropy
from ..nn.layers import Conv2d, Flatten, Layer, Linear, MaxPool2d, ReLU, Reshape
from ..core.tensor_data import Weight
from ..saving import FileFormat, register_format
from ..saving.formats import Reader, read_each
from .model import Sequential

MNIST_HW = 28
MNIST_NINPUT = MNIST_HW * MNIST_HW
MNIST_NCLASSES = 10
MNIST_NHIDDEN = 500
MNIST_CNN_NCB = 8


def _fc_layers(n_hidden: int) -> list[Layer]:
    return [Linear(MNIST_NINPUT, n_hidden, name="fc1"), ReLU(), Linear(n_hidden, MNIST_NCLASSES, name="fc2")]


def _cnn_layers() -> list[Layer]:
    ncb = MNIST_CNN_NCB
    return [Reshape((1, MNIST_HW, MNIST_HW)),
            Conv2d(1, ncb, 3, padding=1, name="conv1"), ReLU(), MaxPool2d(2),
            Conv2d(ncb, 2 * ncb, 3, padding=1, name="conv2"), ReLU(), MaxPool2d(2),
            Flatten(),
            Linear((MNIST_HW // 4) ** 2 * 2 * ncb, MNIST_NCLASSES, name="dense")]


def mnist_fc(n_hidden: int = MNIST_NHIDDEN) -> Sequential:
    """784 -> n_hidden -> ReLU -> 10 (ggml's "mnist-fc"; tensors fc1.weight, fc1.bias, fc2.*)."""
    return Sequential(_fc_layers(n_hidden), input_shape=(MNIST_NINPUT,))


def mnist_cnn() -> Sequential:
    """ggml's "mnist-cnn": two 3x3 convolutions (8 and 16 channels, padding 1) with ReLU and 2x2 max
    pooling, then a dense layer to 10 classes (tensors conv1.*, conv2.*, dense.*)."""
    return Sequential(_cnn_layers(), input_shape=(MNIST_NINPUT,))


def _matcher(layers: list[Layer]) -> Callable[[Network], bool]:
    """Whether a built model is a Sequential of exactly these layers on flat 784-pixel rows."""
    config = serialize(Sequential(layers))

    def matches(model: Network) -> bool:
        return (isinstance(model, Sequential) and model.input_shape == (MNIST_NINPUT,)
                and serialize(model) == config)
    return matches


# ggml's mnist-cnn flattens its last feature map as (height, width, channel); pyggml_opt's Flatten,
# as PyTorch's, as (channel, height, width): the dense weight's columns are permuted on the way.
_DENSE_CHW = (2 * MNIST_CNN_NCB, MNIST_HW // 4, MNIST_HW // 4)


def _dense_to_ggml(weights: dict[str, Weight]) -> dict[str, Weight]:
    c, h, hw = _DENSE_CHW
    w = weights["dense.weight"]
    assert isinstance(w, np.ndarray)  # the layout is float32_only
    return {**weights, "dense.weight": w.reshape(-1, c, h, hw).transpose(0, 2, 3, 1).reshape(w.shape[0], -1)}


def _dense_from_ggml(read: Reader, shapes: dict[str, tuple[int, ...]]) -> dict[str, Weight]:
    c, h, hw = _DENSE_CHW
    weights = read_each(read, shapes)
    w = weights["dense.weight"]
    if isinstance(w, np.ndarray) and w.shape == shapes["dense.weight"]:  # else the caller's shape check refuses it
        weights["dense.weight"] = w.reshape(-1, h, hw, c).transpose(0, 3, 1, 2).reshape(w.shape[0], -1)
    return weights


register_format(FileFormat("mnist-fc", _matcher(_fc_layers(MNIST_NHIDDEN)), lambda f: (Sequential(_fc_layers(MNIST_NHIDDEN)), (MNIST_NINPUT,)),
                           default_loss=CrossEntropy.name))
register_format(FileFormat("mnist-cnn", _matcher(_cnn_layers()), lambda f: (Sequential(_cnn_layers()), (MNIST_NINPUT,)),
                           _dense_to_ggml, _dense_from_ggml, default_loss=CrossEntropy.name, float32_only=True))
