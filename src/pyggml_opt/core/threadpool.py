"""``ThreadPool``: the CPU backend's worker threads, kept from one graph to the next.

Without a pool of its own, ggml's CPU backend starts and joins its worker threads for every graph it
computes; a training step of a small model is then mostly thread start-up (benchmarks/CPU_SPEED.md,
"Measurements behind design choices"). A pool's workers poll
for the next graph for at most ``POLL`` milliseconds, yielding their core between checks (vendor
patches 0011 and 0029), then sleep until woken. Waking a sleeping worker costs more than a small
graph's work: the forward cache runs a small graph on the pool only while graphs come less than
``POLLING_S`` apart (``Backend.idle_s``), when its workers still poll. After its model's last graph a
pool competes with other work for at most those milliseconds (a time bound, not a count of checks: a
pool that polled for longer made the next model's small fit wait for it).

``PYGGML_OPT_THREAD_POOL=0`` in the environment turns pools off (threads started per graph, as ggml
does by default), for comparisons (benchmarks/bench_contention.py).

A forked child has none of its parent's threads: ``os.register_at_fork`` detaches (pauses) every pool
before the fork and attaches it again in the parent, and makes every backend forget its pool in the
child (the pool's memory is left alone: freeing it would wait for threads that do not exist there), so
the child's graphs run as without a pool. A fork happens only between graphs: every graph computed on a
CPU backend holds the backend's ``ComputeLock``, and the before-fork handler takes all of them. Pausing
a pool while another thread's graph ran on it would hang that graph for ever (the graph's worker sees
the pause before the graph and goes to sleep, and the calling thread spins at the graph's first
barrier; the pool never resumes).
"""
from __future__ import annotations

import functools
import os
import threading
import weakref
from typing import Callable

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
        super().__init__(new(params), functools.partial(_free_in, os.getpid(), free))
        self.n_threads = n_threads


def _free_in(pid: int, free: Callable[[CData], None], ptr: CData) -> None:
    # Freed in the process that made it only. In a forked child the pool's threads stayed in the parent,
    # and freeing it waits for them for ever (pthread_cond_destroy of a condition they were waiting on
    # at the fork): a pool can reach its finalizer there before _forget_pools_after_fork abandons it,
    # when the after-fork handlers registered before this module's (threading's) drop the last
    # reference to a model that another thread of the parent was using.
    if os.getpid() == pid:
        free(ptr)


class ComputeLock:
    """Held around every graph computed on a CPU backend (``with backend.compute_lock:`` in
    ``Scheduler.compute`` and ``OptContext.eval``) and while its pool is replaced; the before-fork
    handler takes the locks of all backends, so a fork happens between graphs. While a fork waits for
    them, a thread about to compute waits for the fork to end first (the fork would else wait for as
    long as graphs keep coming), unless it holds such a lock already: a graph computed from inside
    another one's call (the optimizer's callback, which ggml-opt calls before its graph starts) must
    not wait for a fork that waits for the outer graph. Re-entrant for the same reason."""

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.RLock()

    def __enter__(self) -> None:
        if _fork_pending and not _holds_a_compute_lock():
            with _fork_gate:
                pass
        self._lock.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()

    def acquire(self, blocking: bool = True) -> bool:
        """Take the lock without waiting for a pending fork (the fork handler's own way); with
        ``blocking=False`` False at once if another thread holds it."""
        return self._lock.acquire(blocking)

    def release(self) -> None:
        self._lock.release()

    def held_here(self) -> bool:
        """Held by the calling thread."""
        return self._lock._is_owned()  # type: ignore[attr-defined] # RLock's, what threading.Condition uses

    def _renew_in_child(self) -> None:
        # in a forked child: held by no thread but the forking one, which may hold it (a fork from the
        # optimizer's callback) and releases it itself; any other holder does not exist here
        if not self.held_here():
            self._lock = threading.RLock()


class PoolSlot:
    """The pool a CPU backend uses, replaced when its thread count changes. ``backend`` is the
    ``Backend`` that owns the slot (kept as a weak reference: the fork handlers skip a slot whose
    backend is gone or closed); the slot must be closed before the backend is freed. ``lock``: the
    backend's ``ComputeLock``."""

    def __init__(self, backend: Handle) -> None:
        self._backend = weakref.ref(backend)
        self._set_pool = cpu_proc("ggml_backend_cpu_set_threadpool", _SET)
        self.pool: ThreadPool | None = None
        self.lock = ComputeLock()
        _slots.add(self)

    def _set(self, pool_ptr: CData) -> None:
        # the local reference keeps a backend that is being dropped alive through the call (the GIL is
        # released during it; a fork handler may hold this slot after its backend was collected)
        backend = self._backend()
        if self._set_pool is not None and backend is not None and not backend.closed:
            self._set_pool(backend.ptr, pool_ptr)

    def use(self, n_threads: int) -> None:
        """Run the backend's graphs on a pool of ``n_threads`` (none for one thread, or with pools off)."""
        if os.environ.get("PYGGML_OPT_THREAD_POOL", "1") == "0":
            n_threads = 1
        if (self.pool.n_threads if self.pool is not None else 1) == n_threads or self._set_pool is None:
            return
        with self.lock:
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
# Held by a forking thread from its before-fork handler to its after-fork one (one fork at a time);
# _fork_pending is set meanwhile, for ComputeLock to read without taking a lock.
_fork_gate = threading.Lock()
_fork_pending = False
# The slots whose locks the forking thread holds, by thread id (it keeps its id in the child; a thread
# whose before-fork handler failed, interrupted while waiting, has none).
_held: dict[int, list[PoolSlot]] = {}


def _holds_a_compute_lock() -> bool:
    return any(slot.lock.held_here() for slot in list(_slots))


def _lock_all_slots() -> list[PoolSlot]:
    # Waits only while holding no slot's lock, so it is never part of a cycle of waits (a thread that
    # holds one slot's lock may wait for another's: a graph computed from the optimizer's callback):
    # takes every lock without waiting; at a busy one, releases them all, waits for that one (the GIL
    # released meanwhile) and tries the others again. New graphs wait for the fork (_fork_pending), so
    # the busy locks run out.
    held: list[PoolSlot] = []
    try:
        while True:
            busy = None
            for slot in list(_slots):
                if slot not in held:
                    if not slot.lock.acquire(blocking=False):
                        busy = slot
                        break
                    held.append(slot)
            if busy is None:
                return held
            for slot in held:
                slot.lock.release()
            held = []
            busy.lock.acquire()
            held.append(busy)
    except BaseException:
        for slot in held:
            slot.lock.release()
        raise


def _detach_pools_before_fork() -> None:
    # Between graphs only: pausing a pool while a graph runs on it hangs that graph. Paused here, in
    # the parent, rather than in the child (_forget), as detaching pauses a pool under its mutex, which
    # one of the parent's workers may hold at the moment of the fork (it takes it when it stops polling).
    global _fork_pending
    _fork_gate.acquire()
    _fork_pending = True
    try:
        held = _held[threading.get_ident()] = _lock_all_slots()
    except BaseException:
        # a Ctrl+C while waiting: the fork goes on anyway (Python ignores a handler's exception), as
        # before these locks existed
        _fork_pending = False
        _fork_gate.release()
        raise
    for slot in held:
        if slot.pool is not None:
            slot._set(ffi.NULL)


def _attach_pools_after_fork_in_parent() -> None:
    global _fork_pending
    if threading.get_ident() not in _held:
        return  # this thread's before-fork handler failed (interrupted): it holds nothing
    for slot in _held.pop(threading.get_ident()):
        if slot.pool is not None:
            slot._set(slot.pool.ptr)
        slot.lock.release()
    _fork_pending = False
    _fork_gate.release()


def _forget_pools_after_fork() -> None:
    # only the forking thread exists here: whatever it does not hold is free, whoever held it before
    # (another thread's fork in progress too, where this one's handler was interrupted)
    global _fork_pending, _fork_gate
    for slot in _held.pop(threading.get_ident(), []):
        slot.lock.release()
    for slot in list(_slots):
        slot._forget()
        slot.lock._renew_in_child()
    _held.clear()
    _fork_pending = False
    _fork_gate = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_detach_pools_before_fork, after_in_parent=_attach_pools_after_fork_in_parent,
                        after_in_child=_forget_pools_after_fork)
