"""Data sets for pyggml_opt: an IDX reader/writer, Fashion-MNIST, and a small bundled subset of it.

Fashion-MNIST (Zalando Research, MIT licence) comes from Debian's ``dataset-fashion-mnist`` package,
which installs the four gzipped IDX files into ``/usr/share/datasets/fashion-mnist/``. Nothing here
downloads anything. Where that package is not installed, :func:`load_fashion_mnist_small` returns a
stratified subset of the real data (6000 train + 1000 test images) shipped inside this package.

Array conventions (numpy, row-major, outermost dimension first; ggml lists the same shape reversed):

- images: ``(n, 1, 28, 28)`` (samples, channels, rows, columns), or ``(n, 784)`` with ``flatten=True``;
  float32 in [0, 1] with ``normalize=True`` (pixel / 255), else uint8 in [0, 255].
- labels: ``(n,)`` int32 class ids in [0, 10); :data:`CLASS_NAMES` gives their names.

Text: ``load_fortunes`` reads Debian's ``fortunes`` package (``/usr/share/games/fortunes/``) as a real
text corpus; ``sliding_windows`` cuts a stream of token ids into a language model's (input, next id)
pairs, and ``char_windows`` does it for texts. The tokenizers that turn texts into int32 token ids for
``layers.Embedding``, ``CharTokenizer`` and ``BPETokenizer``, live in :mod:`pyggml_opt.text` and are
re-exported here.

Fine-tuning data: ``jsonl.py`` reads JSONL records in MLX-LM's and TRL's formats (texts, prompt /
completion pairs, conversations) and data directories (``split_files``); ``finetune.py`` tokenizes them
with a GGUF file's tokenizer and chat template into ``Examples`` whose trained tokens are marked
(``tokenize_jsonl``), and lays them out as the windows, targets and weights ``fit`` takes (one example
per row, or several packed per row), the tokens not trained marked by the loss's ``IGNORE_INDEX``.

The data sets depend on numpy and the standard library only (the tokenizers are ``text``'s:
``BPETokenizer`` needs Hugging Face's ``tokenizers``); nothing here calls ggml.
"""
from ..text import BPETokenizer, CharTokenizer
from .fashion_mnist import (CLASS_NAMES, DEBIAN_FASHION_MNIST_DIR, FASHION_MNIST_FILES, default_cache_dir,
                            fashion_mnist_available, load_fashion_mnist, load_fashion_mnist_small, raw_idx_dir)
from .finetune import Examples, tokenize_jsonl
from .idx import read_idx, write_idx
from .jsonl import read_records, split_files
from .text import DEBIAN_FORTUNES_DIR, char_windows, fortune_categories, load_fortunes, sliding_windows

__all__ = ["BPETokenizer", "CLASS_NAMES", "CharTokenizer", "DEBIAN_FASHION_MNIST_DIR", "DEBIAN_FORTUNES_DIR",
           "Examples", "FASHION_MNIST_FILES", "char_windows", "default_cache_dir", "fashion_mnist_available", "fortune_categories",
           "load_fashion_mnist", "load_fashion_mnist_small", "load_fortunes", "raw_idx_dir", "read_idx", "read_records",
           "sliding_windows", "split_files", "tokenize_jsonl", "write_idx"]
