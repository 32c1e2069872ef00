"""Saving: models as GGUF files (a registry of file layouts; every model round-trips through its
JSON configuration), training checkpoints (weights + optimizer state + epoch count), and tokenizers
under llama.cpp's keys (``load_vocab``, ``read_vocab``, ``save_vocab``, ``vocab_metadata``: re-exported
from :mod:`pyggml_opt.text`)."""
from ..text import load_vocab, read_vocab, save_vocab, vocab_metadata
from .checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from .formats import GENERIC, FileFormat, register_format
from .model_file import load, load_metadata, load_weights, read_weights, save

__all__ = ["Checkpoint", "FileFormat", "GENERIC", "load", "load_checkpoint", "load_metadata", "load_vocab", "load_weights",
           "read_vocab", "read_weights", "register_format", "save", "save_checkpoint", "save_vocab", "vocab_metadata"]
