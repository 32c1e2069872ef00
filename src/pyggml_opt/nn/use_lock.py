"""``UseLock``: a network's lock, held by each call that uses its native state, first come first served."""
from __future__ import annotations

import os
import threading
import weakref
from collections import deque


class UseLock:
    """A network's lock, held by each call that uses its native state (fit, predict, evaluate,
    generate, close): ggml's contexts and the cached graphs are not thread-safe, so the calls of
    several threads on one network run one after the other, in the order they came (not refused).
    Re-entrant: fit's callbacks run in fit's thread and may call predict / evaluate.

    First come, first served: releasing hands the lock to the longest-waiting thread. Python's own
    locks let the releasing thread take them again at once, so a thread in a loop of calls starves the
    others (their p99 wait grew by orders of magnitude); handing over costs some throughput instead,
    two context switches per call (benchmarks/CPU_SPEED.md, "Measurements behind design choices").

    In a child forked while another thread held it, ``acquire`` raises RuntimeError instead of
    waiting for a thread that does not exist there (the network is left as that call left it)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()  # held only for the few lines that read or change the fields below
        self._owner: int | None = None  # the holding thread's id
        self._depth = 0
        self._queue: deque[tuple[int, threading.Lock]] = deque()  # waiting threads: id, lock they wait on
        self._orphaned = False
        _use_locks.add(self)

    def acquire(self) -> None:
        """Wait until the threads that came first are done, then hold the lock (once more if this
        thread holds it already)."""
        me = threading.get_ident()
        with self._guard:
            if self._orphaned:
                raise RuntimeError("this model was in use by another thread when this process forked; that "
                                   "call never ends in this child: use a copy made before the fork "
                                   "(model.clone()), or load the model here")
            if self._owner is None or self._owner == me:
                self._owner = me
                self._depth += 1
                return
            turn = threading.Lock()
            turn.acquire()
            waiting = (me, turn)
            self._queue.append(waiting)
        try:
            turn.acquire()  # released by the thread that hands the lock over (release)
        except BaseException:  # Ctrl+C while waiting
            with self._guard:
                handed_over = self._owner == me
                if not handed_over:
                    self._queue.remove(waiting)
            if handed_over:
                self.release()
            raise

    def release(self) -> None:
        """Hold it once less; at the last, hand it to the longest-waiting thread."""
        with self._guard:
            self._depth -= 1
            if self._depth:
                return
            if self._queue:
                self._owner, turn = self._queue.popleft()
                self._depth = 1
                turn.release()
            else:
                self._owner = None

    def __enter__(self) -> UseLock:
        self.acquire()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()

    def _note_fork(self) -> None:
        # in the child only the forking thread exists, and it forked outside acquire / release: a
        # guard held (the fields half changed), a holder or a waiter other than it never comes back
        guard_held = not self._guard.acquire(blocking=False)
        held = self._owner is not None and self._owner != threading.get_ident()
        self._orphaned = self._orphaned or guard_held or held
        self._guard = threading.Lock()
        self._queue.clear()


_use_locks: "weakref.WeakSet[UseLock]" = weakref.WeakSet()


def _orphan_locks_after_fork() -> None:
    for lock in list(_use_locks):
        lock._note_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_orphan_locks_after_fork)
