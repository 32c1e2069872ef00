"""Tokenizers: texts <-> int32 token ids, and their files.

``CharTokenizer`` gives one id per character (``char.py``); ``BPETokenizer`` learns a byte-level BPE
vocabulary, GPT-2's scheme, from the user's texts with Hugging Face's ``tokenizers`` (``bpe.py``,
``pip install "pyggml_opt[text]"``). Both ``encode`` texts for a model starting with
``layers.Embedding`` and ``decode`` what ``generate`` returns. ``llama_vocab.py`` writes either as
llama.cpp's ``tokenizer.ggml.*`` GGUF keys (``vocab_metadata``, ``save_vocab``: a file of the
vocabulary alone) and reads them back (``read_vocab``, ``load_vocab``). ``GGUFTokenizer``
(``gguf_tokenizer.py``, with llama.cpp's pre-tokenizers in ``llama_pretokenizers.py``) is the
tokenizer of any GGUF file, as llama.cpp tokenizes (SentencePiece, byte-level BPE, Gemma 4's BPE), its
special tokens as llama.cpp settles them (``llama_special.py``) and its chat template
(``ChatTemplate``, ``chat_template.py``: Jinja2's sandbox).

This package sits below ``data`` (whose ``char_windows`` fits a ``CharTokenizer``) and ``saving`` (which
writes a model's tokenizer into its file), and imports ``core`` (GGUF files), ``checks`` and ``atomic``
only. ``data`` re-exports the two tokenizers, ``saving`` the four GGUF functions.
"""
from .bpe import BPETokenizer
from .char import CharTokenizer
from .chat_template import ChatTemplate
from .gguf_tokenizer import GGUFTokenizer
from .llama_vocab import load_vocab, read_vocab, save_vocab, vocab_metadata

__all__ = ["BPETokenizer", "CharTokenizer", "ChatTemplate", "GGUFTokenizer", "load_vocab", "read_vocab", "save_vocab", "vocab_metadata"]
