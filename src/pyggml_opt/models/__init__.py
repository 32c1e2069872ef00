"""User-facing models: ``Model``, ``Sequential``, ``FunctionModel``, the language models (``lm``) and
the model zoo."""
from .model import FunctionModel, Model, Sequential
from .lm import GPTArgs, LanguageModel, LlamaArgs, LlamaBlock, ModelArgs, gpt, llama, qwen2, qwen3
from .zoo import mnist_cnn, mnist_fc

__all__ = ["FunctionModel", "GPTArgs", "LanguageModel", "LlamaArgs", "LlamaBlock", "Model", "ModelArgs", "Sequential",
           "gpt", "llama", "mnist_cnn", "mnist_fc", "qwen2", "qwen3"]
