"""Language models: one module per architecture, each owning its arguments, its block and its GGUF
table entry over the shared layers of ``nn.layers`` (attention with its options, norms, gated MLPs):
``gpt.py`` (pyggml_opt's "pyggml-gpt" and llama.cpp's "gpt2"), ``llama.py``, ``qwen2.py``, ``qwen3.py``
(Llama's block with attention options), ``gemma3.py`` (its own block: sliding windows, GeGLU); ``args.py`` (``ModelArgs``, what every architecture's
arguments share), ``table.py`` (what a table entry is), ``model.py`` (``LanguageModel``: the Sequential
that carries its arguments), ``gguf_io.py`` (the files of the table's architectures) and ``legacy.py``
(the plain Sequentials of earlier versions)."""
from .args import MAX_CONTEXT, ModelArgs, check_context
from .gpt import GPT2, PYGGML_GPT, GPTArgs, gpt
from .llama import LLAMA, LlamaArgs, LlamaBlock, default_ffn_dim, llama
from .qwen2 import QWEN2, qwen2
from .qwen3 import QWEN3, qwen3
from .gemma3 import GEMMA3, Gemma3Args, Gemma3Block, gemma3
from .model import LOSS, TIED, LanguageModel
from .table import Architecture, Key, TensorMap
from .legacy import args_of
from .gguf_io import ARCHITECTURES, register_architecture

for _arch in (PYGGML_GPT, GPT2, LLAMA, QWEN2, QWEN3, GEMMA3):  # the table's entries, in the order save tries them
    register_architecture(_arch)

__all__ = ["ARCHITECTURES", "Architecture", "GEMMA3", "GPT2", "Gemma3Args", "Gemma3Block", "GPTArgs", "Key", "LLAMA", "LOSS", "LanguageModel", "LlamaArgs",
           "LlamaBlock", "MAX_CONTEXT", "ModelArgs", "PYGGML_GPT", "QWEN2", "QWEN3", "TIED", "TensorMap", "args_of",
           "check_context", "default_ffn_dim", "gemma3", "gpt", "llama", "qwen2", "qwen3", "register_architecture"]
