"""User-facing models: ``Model``, ``Sequential``, ``FunctionModel``, the language models (``lm``) and
the model zoo."""
from .model import FunctionModel, Model, Sequential
from .lm import (Gemma3Args, Gemma3Block, GPTArgs, LanguageModel, LlamaArgs, LlamaBlock, ModelArgs, gemma3, gpt, llama,
                 qwen2, qwen3)
from .zoo import mnist_cnn, mnist_fc

__all__ = ["FunctionModel", "GPTArgs", "Gemma3Args", "Gemma3Block", "LanguageModel", "LlamaArgs", "LlamaBlock", "Model", "ModelArgs", "Sequential",
           "gemma3", "gpt", "llama", "mnist_cnn", "mnist_fc", "qwen2", "qwen3"]
