"""The modules of the ``text`` extra (Hugging Face ``tokenizers``, ``regex``, Jinja2), imported when a
tokenizer or template first needs them, so that ``import pyggml_opt`` works without them."""
from __future__ import annotations

import importlib
from typing import Any


def text_extra(module: str, needed_by: str) -> Any:
    """Module ``module`` (a dotted name imports its package too); ImportError saying that ``needed_by``
    needs it and how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f'{needed_by} needs {module.split(".")[0]}: pip install "pyggml_opt[text]"') from exc
