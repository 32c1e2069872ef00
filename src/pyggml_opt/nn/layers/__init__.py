"""Layers for ``Sequential``: each declares its parameters and maps an input Tensor to an output.

A layer's shapes exclude the batch axis. ``infer(input_shape)`` (pure) validates the input shape and
returns the output, parameter, buffer and step-input shapes (``LayerShapes``); the model calls it when
it is built, so a mismatch is a ValueError naming the layer, never a ggml abort.
Parameters are created by the model; ``init(pname, shape, rng)`` gives their initial values (PyTorch's
defaults: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases). ``get_config()`` returns the
constructor arguments and ``from_config`` rebuilds the layer; each class is registered by name
(``registry.py``) from this package's ``__all__``, so adding a layer to one of its modules (by kind)
and to ``__all__`` is all a saved model needs to know about it."""
from .base import Layer, LayerShapes
from .dense import Dropout, Flatten, GatedMLP, Linear, Reshape, SwiGLU
from .embedding import Embedding, PositionalEmbedding
from .conv import AvgPool2d, Conv1d, Conv2d, GlobalAveragePooling1D, GlobalAveragePooling2D, MaxPool2d
from .activations import GELU, ReLU, SiLU, Sigmoid, Softmax, Tanh
from .norm import BatchNorm1d, BatchNorm2d, LayerNorm, RMSNorm
from .attention import GroupedQueryAttention, MultiHeadAttention
from .block import Block
from .transformer import TransformerBlock
from ..registry import register

__all__ = ['AvgPool2d', 'BatchNorm1d', 'BatchNorm2d', 'Block', 'Conv1d', 'Conv2d', 'Dropout', 'Embedding', 'Flatten', 'GELU', 'GatedMLP', 'GlobalAveragePooling1D',
           'GlobalAveragePooling2D', 'GroupedQueryAttention', 'Layer', 'LayerNorm', 'LayerShapes', 'Linear', 'MaxPool2d', 'MultiHeadAttention', 'PositionalEmbedding', 'RMSNorm',
           'ReLU', 'Reshape', 'SiLU', 'Sigmoid', 'Softmax', 'SwiGLU', 'Tanh', 'TransformerBlock']

for _name in __all__:
    if _name not in ("Layer", "LayerShapes", "Block"):
        register(globals()[_name])
