"""Forks while other threads compute on thread pools: run as a script by test_threadpool.py, in a process
of its own, so that a hang fails that test (its timeout) instead of hanging the suite.

    python fork_stress.py [--forks 40]

One thread fits a fresh model over and over (2 threads: a pool), another predicts with a second model
(a pool of its own), and the main thread forks ``--forks`` times meanwhile (multiprocessing's fork
context); each child predicts with a fresh model on 2 threads and exits. Exits 0 when every fit gave
the weights of the same fit without forks, every predict the same outputs, every child exit code 0;
else prints what differed and exits 1.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import threading

import numpy as np

from support import X, Y, mlp, same_weights

FIT = dict(epochs=30, batch_size=8, shuffle=False, verbose=0, n_threads=2)


def child(expected: np.ndarray) -> None:
    got = mlp().predict(X, n_threads=2)
    sys.exit(0 if np.array_equal(got, expected) else 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--forks", type=int, default=40)
    args = ap.parse_args()
    reference = mlp()
    reference.fit(X, Y, **FIT)
    weights = reference.get_weights()
    predictor = mlp()
    outputs = predictor.predict(X, n_threads=2)
    stop = threading.Event()
    failures: list[str] = []
    counts = {"fits": 0, "predicts": 0}

    def fit_loop() -> None:
        while not stop.is_set():
            m = mlp()
            m.fit(X, Y, **FIT)
            if not same_weights(m.get_weights(), weights):
                failures.append(f"fit {counts['fits']}: other weights")
            counts["fits"] += 1
            m.close()

    def predict_loop() -> None:
        while not stop.is_set():
            if not np.array_equal(predictor.predict(X, n_threads=2), outputs):
                failures.append(f"predict {counts['predicts']}: other outputs")
            counts["predicts"] += 1

    threads = [threading.Thread(target=fit_loop, daemon=True), threading.Thread(target=predict_loop, daemon=True)]
    for t in threads:
        t.start()
    ctx = mp.get_context("fork")
    fresh = mlp().predict(X, n_threads=2)
    for i in range(args.forks):
        p = ctx.Process(target=child, args=(fresh,))
        p.start()
        p.join(60)
        if p.exitcode != 0:
            failures.append(f"child {i}: exit code {p.exitcode}")
            if p.exitcode is None:
                p.kill()
    stop.set()
    for t in threads:
        t.join(60)
        if t.is_alive():
            failures.append(f"{t.name} did not finish its call within 60 s of the last fork")
    print(f"{args.forks} forks during {counts['fits']} fits and {counts['predicts']} predicts")
    for f in failures:
        print(f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
