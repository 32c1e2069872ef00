"""User-facing models: ``Model``, ``Sequential``, ``FunctionModel`` and the model zoo."""
from .gpt import gpt
from .llama import llama
from . import llama_cpp  # registers llama.cpp's gpt2 and llama layouts
from .model import FunctionModel, Model, Sequential
from .zoo import mnist_cnn, mnist_fc

__all__ = ["FunctionModel", "Model", "Sequential", "gpt", "llama", "mnist_cnn", "mnist_fc"]
