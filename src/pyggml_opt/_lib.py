"""Loads ggml: the cffi extension, the backends, and the log / abort callbacks.

This is the one place that touches the compiled extension ``pyggml_opt._ggml`` (cffi API mode, 1:1
with ggml's public headers; declarations in ``_cdef/``). Everything else imports ``ffi`` and ``lib``
from here.

On import:
  1. the extension is loaded (it finds ``lib/libggml*.so`` through its rpath);
  2. the backends in ``lib/`` are registered with ``ggml_backend_load_all_from_path``: with
     GGML_BACKEND_DL (x86-64 Linux) this loads the CPU backend, in a PYGGML_OPT_PORTABLE build the
     best of its variants for this CPU;
  3. ggml's log output is routed to the ``logging`` logger ``"pyggml_opt.ggml"``;
  4. an abort callback prints the Python stack before ggml aborts on a failed GGML_ASSERT.
"""
from __future__ import annotations

import logging
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parent

try:
    from . import _ggml
except ImportError as exc:  # pragma: no cover - exercised only with a broken install
    raise ImportError(
        f"pyggml_opt: cannot load its compiled extension {PACKAGE_DIR / '_ggml.*.so'} or the ggml "
        f"libraries it links to in {PACKAGE_DIR / 'lib'} ({exc}). Reinstall with `pip install .`; importing "
        "from the source tree without building does not work."
    ) from exc

ffi = _ggml.ffi
lib = _ggml.lib
# A cffi object (pointer, struct, array, C function): cffi gives them no static types.
CData = Any
# Beside the extension, which in an editable install is not beside this file.
LIB_DIR = Path(_ggml.__file__).resolve().parent / "lib"

log = logging.getLogger("pyggml_opt.ggml")

_LOG_LEVELS = {
    lib.GGML_LOG_LEVEL_DEBUG: logging.DEBUG,
    lib.GGML_LOG_LEVEL_INFO: logging.INFO,
    lib.GGML_LOG_LEVEL_WARN: logging.WARNING,
    lib.GGML_LOG_LEVEL_ERROR: logging.ERROR,
}
# ggml logs a line in pieces (GGML_LOG_LEVEL_CONT continues the previous one): assemble per thread.
_log_state = threading.local()


@ffi.def_extern()
def pyggml_log_callback(level: int, text: CData, user_data: CData) -> None:  # noqa: ARG001 - C signature
    piece = ffi.string(text).decode("utf-8", "replace")
    if level != lib.GGML_LOG_LEVEL_CONT:
        _log_state.level = _LOG_LEVELS.get(level, logging.INFO)
        _log_state.buf = ""
    _log_state.buf = getattr(_log_state, "buf", "") + piece
    if _log_state.buf.endswith("\n"):
        line, _log_state.buf = _log_state.buf.rstrip("\n"), ""
        if line:
            log.log(getattr(_log_state, "level", logging.INFO), "%s", line)


@ffi.def_extern()
def pyggml_abort_callback(error_message: CData) -> None:
    msg = ffi.string(error_message).decode("utf-8", "replace")
    sys.stderr.write(f"pyggml_opt: ggml aborted: {msg}\nPython stack at the time of the abort:\n")
    traceback.print_stack(file=sys.stderr)
    sys.stderr.flush()


lib.ggml_log_set(lib.pyggml_log_callback, ffi.NULL)
lib.ggml_set_abort_callback(lib.pyggml_abort_callback)
lib.ggml_backend_load_all_from_path(str(LIB_DIR).encode())


def cpu_proc(name: str, ctype: str) -> CData | None:
    """A function of the CPU backend (ggml-cpu.h) by name, typed as ``ctype``, or None.

    With GGML_BACKEND_DL these functions live in the CPU variant loaded at run time and are not
    exported by libggml, so they are reached through the backend registry.
    """
    reg = lib.ggml_backend_reg_by_name(b"CPU")
    if reg == ffi.NULL:
        return None
    ptr = lib.ggml_backend_reg_get_proc_address(reg, name.encode())
    return None if ptr == ffi.NULL else ffi.cast(ctype, ptr)


def c_str(value: CData) -> str:
    """A C string (``const char *``) as a Python str; '' for NULL."""
    return "" if value == ffi.NULL else ffi.string(value).decode("utf-8", "replace")
