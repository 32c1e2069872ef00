"""pyggml_opt: train small neural networks from Python with ggml's training API (ggml-opt)."""
from ._lib import ffi, lib  # noqa: F401  (the raw binding, 1:1 with ggml's headers)

__version__ = "0.1.0"
