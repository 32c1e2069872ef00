"""The base of every owning object: one Python object per C handle, freed exactly once.

Rules (docs/architecture.md, "Ownership"):
  1. The C pointer is freed by a ``weakref.finalize`` that also holds the objects it depends on
     (a buffer holds its backend, an opt context its scheduler ...), so dependencies outlive their
     dependants whatever order the garbage collector picks, and at interpreter exit the finalizers
     run while the library is still loaded.
  2. ``close()`` frees now; calling it again does nothing; ``with`` blocks call it.
  3. Using a closed object raises ``ValueError`` instead of touching freed memory.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, TypeVar

from .._lib import CData, ffi

_H = TypeVar("_H", bound="Handle")


class ClosedError(ValueError):
    """An owning object was used after ``close()``."""


class Handle:
    """Owns one C pointer; ``free`` is called with it exactly once."""

    _kind = "handle"

    def __init__(self, ptr: CData, free: Callable[[CData], None] | None, *deps: Any) -> None:
        if ptr == ffi.NULL:
            raise MemoryError(f"pyggml_opt: ggml could not create the {self._kind}")
        self._ptr = ptr
        self._deps = deps
        self._finalizer = weakref.finalize(self, _free, free, ptr, deps) if free else None

    @property
    def ptr(self) -> CData:
        """The C pointer; raises if this object is closed."""
        if self._ptr is None:
            raise ClosedError(f"this {self._kind} is closed")
        return self._ptr

    @property
    def closed(self) -> bool:
        return self._ptr is None

    def close(self) -> None:
        """Free the C object now (idempotent)."""
        if self._ptr is None:
            return
        self._ptr = None
        if self._finalizer is not None:
            self._finalizer()

    def abandon(self) -> None:
        """Forget the C pointer without freeing it: for an object whose C side cannot be freed here
        (a thread pool in a forked child, whose threads stayed in the parent)."""
        if self._finalizer is not None:
            self._finalizer.detach()
        self._ptr = None

    def __enter__(self: _H) -> _H:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._ptr is None else "open"
        return f"<{type(self).__name__} {state}>"


def _free(free: Callable[[CData], None], ptr: CData, deps: tuple[Any, ...]) -> None:  # noqa: ARG001
    # `deps` is only held so that what `ptr` depends on is freed after it.
    free(ptr)
