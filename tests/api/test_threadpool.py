"""The CPU backend's persistent thread pool (core/threadpool.py): results do not depend on it, it is
replaced when the thread count changes, freed with its model, its workers sleep soon after the last
graph, small graphs use it only while they come often, and a forked child runs without it; forks
while other threads compute on pools hang nothing, and a child refuses a model another thread was using."""
import gc
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import pyggml_opt as pgo
from support import X, Y, child_env, mlp, same_weights


def os_threads() -> set[int]:
    """Thread ids of this process as the kernel lists them (ggml's workers are not Python threads), once
    the models earlier tests dropped are collected (their pools go with them)."""
    gc.collect()
    return {int(t) for t in os.listdir("/proc/self/task")}


def started_since(before: set[int]) -> int:
    """Threads alive now that were not in `before`. Counting only new ids keeps the tests exact when a
    thread of an earlier test (a queue feeder, a BLAS helper) exits meanwhile: a plain count once saw 9
    threads where 10 were expected."""
    return len(os_threads() - before)


def cpu_seconds(tid: int) -> float:
    """User + system CPU time of thread ``tid`` of this process (/proc/self/task/<tid>/stat: utime and
    stime, the 14th and 15th fields, in clock ticks)."""
    with open(f"/proc/self/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def train(n_threads: int) -> dict:
    m = mlp()
    m.fit(X, Y, epochs=3, batch_size=8, shuffle=False, verbose=0, n_threads=n_threads)
    return m.get_weights()


def test_results_do_not_depend_on_the_threads():
    # each op splits its rows among the threads without changing any sum's order: bit-identical
    assert same_weights(train(1), train(2))
    assert same_weights(train(2), train(3))


def test_changing_the_thread_count_replaces_the_pool():
    m = mlp()
    before = os_threads()
    m.fit(X, Y, epochs=1, batch_size=8, verbose=0, n_threads=2)
    assert started_since(before) == 1   # one worker beside the calling thread
    p = m.predict(X, n_threads=4)       # the pool of 2 replaced by one of 4: three workers
    assert started_since(before) == 3
    np.testing.assert_array_equal(m.predict(X, n_threads=1), p)  # one thread: no pool at all
    assert started_since(before) == 0
    m.close()


def test_pools_are_freed_with_their_models():
    base = os_threads()
    models = [mlp() for _ in range(8)]
    for m in models:
        m.predict(X, n_threads=2)
    assert started_since(base) == 8   # one worker per model (the caller is the other thread)
    for m in models[:4]:
        m.close()
    assert started_since(base) == 4
    del models, m
    assert started_since(base) == 0


def _child(model, x, queue):
    queue.put(model.predict(x, n_threads=2))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_forked_child_computes_without_the_parents_pool():
    m = mlp()
    m.fit(X, Y, epochs=1, batch_size=8, verbose=0, n_threads=2)
    expected = m.predict(X, n_threads=2)   # the parent's pool now has a worker polling for graphs
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(m, X, queue))
    child.start()
    got = queue.get(timeout=60)   # a child waiting on the parent's (absent) workers would hang here
    child.join(timeout=60)
    assert child.exitcode == 0
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(m.predict(X, n_threads=2), expected)  # the parent's pool still works


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_forks_while_other_threads_fit_and_predict_on_pools():
    # issue 26: a fork during another thread's graph paused the graph's pool for ever (the fit hung,
    # one core spinning); now a fork waits for the graphs running on pools to end. In a process of its
    # own (fork_stress.py), so that a hang fails here instead of hanging the suite.
    script = Path(__file__).with_name("fork_stress.py")
    proc = subprocess.Popen([sys.executable, str(script), "--forks", "40"], cwd=script.parent, text=True,
                            env=child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)   # its forked children too
        out, _ = proc.communicate()
        pytest.fail(f"hung (fork_stress.py past 300 s):\n{out}")
    assert proc.returncode == 0, out


class _HoldOpen(pgo.Callback):
    """Makes fit wait at its first batch until ``go`` is set (``holding`` is set there)."""

    def __init__(self):
        self.go, self.holding = threading.Event(), threading.Event()

    def on_batch_end(self, model, batch, logs):
        if not self.holding.is_set():
            self.holding.set()
            assert self.go.wait(60)


def _child_uses(busy, copy, queue):
    try:
        busy.predict(X)
        queue.put("no error")
    except RuntimeError as e:
        queue.put(str(e))
    queue.put(copy.predict(X, n_threads=2))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_forked_child_refuses_a_model_another_thread_was_using():
    # that thread does not exist in the child: waiting for it would never end
    m = mlp()
    copy = m.clone()
    hold = _HoldOpen()
    fitting = threading.Thread(target=m.fit, args=(X, Y), kwargs=dict(epochs=1, batch_size=8, verbose=0,
                                                                      n_threads=2, callbacks=[hold]))
    fitting.start()
    try:
        assert hold.holding.wait(60)
        ctx = mp.get_context("fork")
        queue = ctx.Queue()
        child = ctx.Process(target=_child_uses, args=(m, copy, queue))
        child.start()
        message, got = queue.get(timeout=60), queue.get(timeout=60)
        child.join(timeout=60)
    finally:
        hold.go.set()
        fitting.join(60)
    assert "in use by another thread when this process forked" in message
    assert child.exitcode == 0
    np.testing.assert_array_equal(got, copy.predict(X, n_threads=2))


def test_a_pools_worker_sleeps_within_milliseconds_of_the_last_graph():
    # vendor patch 0029: a worker polls for the next graph for at most POLL (1) ms, then sleeps; it
    # used ~80 ms of CPU polling after every graph before (its yields made the 131072 rounds long)
    m = mlp()
    before = os_threads()
    m.predict(X, n_threads=2)
    (worker,) = os_threads() - before
    used = cpu_seconds(worker)
    time.sleep(0.3)
    assert cpu_seconds(worker) - used <= 0.02   # two clock ticks of slack for the 1 ms of polling
    m.close()


def test_small_graphs_run_on_the_pool_only_while_predict_is_called_often():
    # batch-1 predicts of a small model: in a quick loop on the pool (its worker polls between the
    # calls), spaced out on one thread (the sleeping worker is not woken); the outputs are the same
    m = mlp()
    before = os_threads()
    m.predict(X[:1], n_threads=2)
    (worker,) = os_threads() - before
    rows = np.arange(2000) % len(X)
    time.sleep(0.01)          # the worker asleep: what it uses next is the loop's
    used = cpu_seconds(worker)
    quick = np.concatenate([m.predict(X[i:i + 1]) for i in rows])
    quick_cpu = cpu_seconds(worker) - used
    time.sleep(0.01)
    used = cpu_seconds(worker)
    apart = []
    for i in rows[:40]:
        time.sleep(0.005)   # 10x POLLING_S
        apart.append(m.predict(X[i:i + 1]))
    apart_cpu = cpu_seconds(worker) - used
    assert quick_cpu >= 0.02  # polling and computing through 2000 calls (0.07-0.2 s; a sleeping worker: 0)
    assert apart_cpu <= 0.01  # asleep through 40 calls over 0.2 s (one tick of slack)
    np.testing.assert_array_equal(np.concatenate(apart), quick[:40])
    np.testing.assert_allclose(quick, m.predict(X[rows]), rtol=1e-6, atol=1e-6)
    m.close()


def test_a_forked_child_never_frees_its_parents_pools():
    """A pool whose workers sleep (waiting on the pool's condition variable) when the process forks:
    the child drops its copy. Freeing it there waited for ever (pthread_cond_destroy waits for waiters
    that exist in the parent only): it was fork_stress.py's rare hang (3 in 20 runs), when threading's
    after-fork handler dropped the last reference to a model another thread of the parent was using,
    before this package's handler could abandon its pool. Now a pool is freed in its own process only."""
    code = ("import gc, os, sys, time\n"
            "from pyggml_opt.core.threadpool import ThreadPool\n"
            "pool = ThreadPool(2)\n"
            "time.sleep(0.2)  # its worker polls, then sleeps on the condition variable\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    del pool\n"
            "    gc.collect()\n"
            "    os._exit(0)\n"
            "_, status = os.waitpid(pid, 0)\n"
            "pool.close()\n"
            "sys.exit(os.waitstatus_to_exitcode(status))\n")
    proc = subprocess.Popen([sys.executable, "-c", code], env=child_env(), start_new_session=True)
    try:
        assert proc.wait(timeout=60) == 0
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the forked child hung freeing its parent's pool")
