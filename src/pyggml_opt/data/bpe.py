"""Where pickles of a ``BPETokenizer`` written before the tokenizers moved to ``pyggml_opt.text`` find
its class (pickle names the module): kept so that users' pickled tokenizers still load."""
from ..text.bpe import BPETokenizer

__all__ = ["BPETokenizer"]
