"""``ThreadPool``: the CPU backend's worker threads, kept from one graph to the next.

Without a pool of its own, ggml's CPU backend starts and joins its worker threads for every graph it
computes; a training step of a small model is then mostly thread start-up (a small MLP fit + predict
on 2 threads: 29-41 ms without a pool, 13 ms with one; benchmarks/CPU_SPEED.md). A pool's workers poll
for the next graph for at most ``POLL`` milliseconds, yielding their core between checks (vendor
patches 0011 and 0029), then sleep until woken. Waking a sleeping worker costs more than a small
graph's work: the forward cache runs a small graph on the pool only while graphs come less than
``POLLING_S`` apart (``Backend.idle_s``), when its workers still poll. After its model's last graph a
pool competes with other work for at most those milliseconds (before 0029 it polled ~80 ms, and was
paused at the end of every call: a small fit took 14 or 155 ms depending on whether the last model's
pool was still polling).

``PYGGML_OPT_THREAD_POOL=0`` in the environment turns pools off (threads started per graph, as ggml
does by default), for comparisons (benchmarks/bench_contention.py).

A forked child has none of its parent's threads: ``os.register_at_fork`` detaches (pauses) every pool
before the fork and attaches it again in the parent, and makes every backend forget its pool in the
child (the pool's memory is left alone: freeing it would wait for threads that do not exist there), so
the child's graphs run as without a pool.
"""
from __future__ import annotations

import os
import weakref

from .._lib import CData, cpu_proc, ffi, lib
from .handle import Handle

# ggml's polling level: workers check for the next graph for at most POLL ms (and 131072 * POLL times)
# before they sleep. 0 (sleep at once) made each graph wait for its workers to wake: no faster than no
# pool at all.
POLL = 1
# how long after a graph its workers count as polling: half of POLL, a margin for a worker that
# finished its share of the graph before the calling thread
POLLING_S = POLL / 2000

_NEW = "struct ggml_threadpool * (*)(struct ggml_threadpool_params *)"
_FREE = "void (*)(struct ggml_threadpool *)"
_SET = "void (*)(ggml_backend_t, struct ggml_threadpool *)"


class ThreadPool(Handle):
    """Owns a ``ggml_threadpool`` of ``n_threads`` (the calling thread is one of them)."""

    _kind = "thread pool"

    def __init__(self, n_threads: int) -> None:
        new, free = cpu_proc("ggml_threadpool_new", _NEW), cpu_proc("ggml_threadpool_free", _FREE)
        if new is None or free is None:
            raise RuntimeError("this build's CPU backend has no thread pools")
        params = ffi.new("struct ggml_threadpool_params *", lib.ggml_threadpool_params_default(n_threads))
        params.poll = POLL
        super().__init__(new(params), free)
        self.n_threads = n_threads


class PoolSlot:
    """The pool a CPU backend uses, replaced when its thread count changes. ``backend_ptr`` is the
    ``ggml_backend_t``; the slot must be closed before the backend is freed."""

    def __init__(self, backend_ptr: CData) -> None:
        self.backend_ptr = backend_ptr
        self._set_pool = cpu_proc("ggml_backend_cpu_set_threadpool", _SET)
        self.pool: ThreadPool | None = None
        _slots.add(self)

    def _set(self, pool_ptr: CData) -> None:
        if self._set_pool is not None:
            self._set_pool(self.backend_ptr, pool_ptr)

    def use(self, n_threads: int) -> None:
        """Run the backend's graphs on a pool of ``n_threads`` (none for one thread, or with pools off)."""
        if os.environ.get("PYGGML_OPT_THREAD_POOL", "1") == "0":
            n_threads = 1
        if (self.pool.n_threads if self.pool is not None else 1) == n_threads or self._set_pool is None:
            return
        old = self.pool
        self.pool = ThreadPool(n_threads) if n_threads > 1 else None
        self._set(self.pool.ptr if self.pool is not None else ffi.NULL)
        if old is not None:
            old.close()

    def close(self) -> None:
        """Detach and free the pool (before the backend itself is freed)."""
        self.use(1)
        _slots.discard(self)

    def _forget(self) -> None:
        # in a forked child: the pool's threads are gone; never free it, never use it again (detached
        # before the fork already: this _set finds no pool to pause)
        if self.pool is not None:
            self._set(ffi.NULL)
            self.pool.abandon()
            self.pool = None


_slots: "weakref.WeakSet[PoolSlot]" = weakref.WeakSet()


def _detach_pools_before_fork() -> None:
    # the child would otherwise detach them itself (_forget), and detaching pauses a pool under its
    # mutex, which one of the parent's workers may hold at the moment of the fork (it takes it when it
    # stops polling): pause them here, where the workers exist
    for slot in list(_slots):
        if slot.pool is not None:
            slot._set(ffi.NULL)


def _attach_pools_after_fork_in_parent() -> None:
    for slot in list(_slots):
        if slot.pool is not None:
            slot._set(slot.pool.ptr)


def _forget_pools_after_fork() -> None:
    for slot in list(_slots):
        slot._forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_detach_pools_before_fork, after_in_parent=_attach_pools_after_fork_in_parent,
                        after_in_child=_forget_pools_after_fork)
