"""User-facing models: ``Model``, ``Sequential``, ``FunctionModel`` and the model zoo."""
from .gpt import gpt
from .model import FunctionModel, Model, Sequential
from .zoo import mnist_cnn, mnist_fc

__all__ = ["FunctionModel", "Model", "Sequential", "gpt", "mnist_cnn", "mnist_fc"]
