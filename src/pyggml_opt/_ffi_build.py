"""Generate the C source of the cffi extension ``pyggml_opt._ggml`` (API mode).

Run by CMake at build time: ``python _ffi_build.py OUT.c``. The declarations come from ``_cdef/``:
``ggml_api.h`` (generated from ggml's public headers by scripts/gen_cdef.py) and ``callbacks.h``
(the Python functions C calls back). Compiling OUT.c against the real headers makes the C compiler
check every declared struct layout, constant and signature.
"""
from __future__ import annotations

import sys
from pathlib import Path

from cffi import FFI

CDEF_DIR = Path(__file__).resolve().parent / "_cdef"
CDEF_FILES = ["ggml_api.h", "callbacks.h"]

SOURCE = """
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-opt.h"
#include "gguf.h"
"""


def make_ffi() -> FFI:
    ffi = FFI()
    ffi.cdef("\n".join((CDEF_DIR / name).read_text() for name in CDEF_FILES))
    ffi.set_source("pyggml_opt._ggml", SOURCE)
    return ffi


if __name__ == "__main__":
    make_ffi().emit_c_code(sys.argv[1])
