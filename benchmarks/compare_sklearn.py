"""GGMLClassifier against scikit-learn's MLPClassifier on load_digits: same split, same architecture
(one hidden layer of 100 ReLU units), same optimizer settings (Adam, lr 1e-3, batch 200, up to
max_iter epochs with scikit-learn's convergence rule), same cores, alternating runs.

    python benchmarks/compare_sklearn.py [--reps 5] [--max-iter 200] [--threads N]

Prints the test accuracy and fit time of each run, the medians, and the ratio of median fit times
(MLPClassifier / GGMLClassifier: above 1 means pyggml_opt is faster). MLPClassifier's numpy uses
the BLAS threads it finds (OPENBLAS_NUM_THREADS / OMP_NUM_THREADS limit them); GGMLClassifier gets
``--threads`` (default: pyggml_opt.default_n_threads())."""
from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

import pyggml_opt as pgo
from machine import cpu_name  # benchmarks/machine.py
from pyggml_opt.sklearn import GGMLClassifier


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=5, help="runs of each (alternated), seeds 0..reps-1")
    ap.add_argument("--max-iter", type=int, default=200)
    ap.add_argument("--threads", type=int, default=None, help="GGMLClassifier's n_threads")
    args = ap.parse_args()

    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x / 16.0, y, random_state=0)
    threads = args.threads or pgo.default_n_threads()
    print(f"{cpu_name()}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f}; "
          f"load_digits: {len(x_train)} training, {len(x_test)} test samples; GGMLClassifier n_threads={threads}")
    makers = {
        "MLPClassifier": lambda seed: MLPClassifier(random_state=seed, max_iter=args.max_iter),
        "GGMLClassifier": lambda seed: GGMLClassifier(random_state=seed, max_iter=args.max_iter, n_threads=threads),
    }
    results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in makers}
    for seed in range(args.reps):
        for name, make in makers.items():
            clf = make(seed)
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ConvergenceWarning)
                clf.fit(x_train, y_train)
            seconds = time.perf_counter() - t0
            accuracy = clf.score(x_test, y_test)
            results[name].append((accuracy, seconds, clf.n_iter_))
            print(f"seed {seed}  {name:15s} accuracy {accuracy:.4f}  fit {seconds:6.3f} s  epochs {clf.n_iter_}")
    print()
    print("| estimator | median test accuracy | min .. max | median fit time (s) | median epochs |")
    print("|---|---|---|---|---|")
    medians = {}
    for name, runs in results.items():
        acc = [r[0] for r in runs]
        medians[name] = statistics.median(r[1] for r in runs)
        print(f"| {name} | {statistics.median(acc):.4f} | {min(acc):.4f} .. {max(acc):.4f} | {medians[name]:.3f} | "
              f"{statistics.median(r[2] for r in runs):.0f} |")
    print(f"\nMLPClassifier time / GGMLClassifier time: {medians['MLPClassifier'] / medians['GGMLClassifier']:.2f}; "
          f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
