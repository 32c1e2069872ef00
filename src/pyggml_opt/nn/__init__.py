"""Graph building: tensor ops (``ops``), layers, and models."""
from . import layers
from . import tensor as ops
from .model import FunctionModel, Model, Sequential
from .tensor import Tensor

__all__ = ["FunctionModel", "Model", "Sequential", "Tensor", "layers", "ops"]
