"""Language models: one table entry per GGUF architecture (``table.py``), a frozen ``ModelArgs`` per
family (``gpt.py``, ``llama.py``, each with its builder and its entries), ``LanguageModel`` (the
Sequential that carries its arguments), the files of the table's architectures (``gguf_io.py``) and
the plain Sequentials of earlier versions (``legacy.py``)."""
from .args import MAX_CONTEXT, ModelArgs, check_context
from .gpt import GPT2, PYGGML_GPT, GPTArgs, gpt
from .llama import LLAMA, QWEN2, QWEN3, LlamaArgs, default_ffn_dim, llama
from .model import LOSS, TIED, LanguageModel
from .table import Architecture, Key, TensorMap
from .legacy import args_of
from .gguf_io import ARCHITECTURES, register_architecture

for _arch in (PYGGML_GPT, GPT2, LLAMA, QWEN2, QWEN3):  # the table's entries, in the order save tries them
    register_architecture(_arch)

__all__ = ["ARCHITECTURES", "Architecture", "GPT2", "GPTArgs", "Key", "LLAMA", "LOSS", "LanguageModel", "LlamaArgs",
           "MAX_CONTEXT", "ModelArgs", "PYGGML_GPT", "QWEN2", "QWEN3", "TIED", "TensorMap", "args_of", "check_context", "default_ffn_dim",
           "gpt", "llama", "register_architecture"]
