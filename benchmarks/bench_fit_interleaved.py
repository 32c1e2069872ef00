"""fit against the C++ mnist-train, time-sliced: both train at once, taking turns every --slice seconds.

bench_fit.py alternates whole runs; on this shared VM the speed of the machine drifts by 30 % within
seconds (a logical batch of mnist-fc takes 11 ms in one second and 15 ms in the next), so the ratio of
two runs ten seconds apart scatters by +-15 %. Here two training processes run side by side and are
alternately stopped (SIGSTOP) and continued (SIGCONT), a quarter of a second each, so that both see
the same states of the machine, interleaved finely; only one of them runs at any time.

What is timed: each process reports every finished physical batch on a pipe (mnist-train: ggml-opt's
progress bar; Python: one line per ``ggml_opt_eval``); the parent stamps the reports as they arrive.
A logical batch (1000 samples: two physical batches, the second with the AdamW step) is the time from
one optimizer step's report to the next; only logical batches wholly inside one time slice count, and
the first of each slice (caches just cooled by the other process) is dropped. Each slice gives the
median logical-batch time of its process; the result is the median, over pairs of adjacent slices, of
the ratio  first process's time / second's  (>= 1: the second is at least as fast). Epoch boundaries
(validation, shuffle) are not in these batches: bench_fit.py's epoch times cover them.

    python benchmarks/bench_fit_interleaved.py                       # mnist-train vs fit, shuffle=10
    python benchmarks/bench_fit_interleaved.py --b "fit shuffle=1"   # fit with its default shuffle
    python benchmarks/bench_fit_interleaved.py --a cpp --b cpp       # a control: expect 1.00
    python benchmarks/bench_fit_interleaved.py --a "fit shuffle=10" --b "fit shuffle=10" \
        --a-src /old/checkout/src --b-src src                          # two versions of pyggml_opt

Processes: "cpp" (ggml's mnist-train: mnist-fc, batch 1000, physical 500, 5 % validation, shuffled
in runs of 10 samples: its dataset's ndata_shard) and "fit shuffle=K" (model.fit with the same
hyperparameters and threads, shuffle=K; K=10 is mnist-train's shuffle, 1 a new order of single
samples). Needs what bench_fit.py needs.
"""
from __future__ import annotations

import argparse
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_fit import cpp_args, cpp_threads, find_tool
from pyggml_opt import data

CPP_REPORT = re.compile(rb"train: \[[^\]]*\] data=(\d+)/")   # ggml_opt_epoch_callback_progress_bar
FIT_REPORT = re.compile(rb"B (\d+)\n")
FIT_CHILD = r'''
import os, sys
sys.path.insert(0, sys.argv[4])
from bench_fit import run_python
from pyggml_opt import data
from pyggml_opt.core import OptContext
(x, y), _ = data.load_fashion_mnist(sys.argv[1] or None, flatten=True)
evaluate, n = OptContext.eval, [0]
def reported(self, *args):
    out = evaluate(self, *args)
    n[0] += 1
    os.write(1, b"B %d\n" % n[0])
    return out
OptContext.eval = reported
run_python(x, y, 30, int(sys.argv[2]), int(sys.argv[3]))  # mnist-train's 30 epochs and hyperparameters
'''


class Trainer:
    """One training process and the times of its optimizer steps, as (slice, time) pairs."""

    def __init__(self, spec: str, tool: Path, idx: Path, data_dir: str | None, workdir: Path, n: int,
                 src: str | None = None) -> None:
        if spec == "cpp":
            args = cpp_args(tool, idx, workdir / f"cpp{n}.gguf")
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            self.fd, self.pattern, self.per_batch = self.proc.stderr.fileno(), CPP_REPORT, 500
        else:
            m = re.fullmatch(r"fit shuffle=(\d+)", spec)
            if not m:
                raise SystemExit(f"unknown process {spec!r}: 'cpp' or 'fit shuffle=K'")
            args = [sys.executable, "-c", FIT_CHILD, data_dir or "", str(cpp_threads()), m.group(1),
                    str(Path(__file__).resolve().parent)]
            env = dict(os.environ, PYTHONPATH=src) if src else None
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, env=env)
            self.fd, self.pattern, self.per_batch = self.proc.stdout.fileno(), FIT_REPORT, 1
        self.spec, self.buf, self.steps = spec, bytearray(), []

    def read(self, timeout: float, slice_no: int | None) -> int:
        """Wait up to `timeout` s for output; record its optimizer steps under `slice_no` (None: untimed).
        Returns the number of batch reports read (-1: nothing arrived)."""
        if not select.select([self.fd], [], [], timeout)[0]:
            return -1
        chunk = os.read(self.fd, 1 << 16)
        now = time.perf_counter()
        if not chunk:
            raise EOFError(self.spec)
        self.buf += chunk
        end = n = 0
        for m in self.pattern.finditer(self.buf):
            batch = int(m.group(1)) // self.per_batch
            if slice_no is not None and batch % 2 == 0:  # the second physical batch: the optimizer step
                self.steps.append((slice_no, batch, now))
            end, n = m.end(), n + 1
        del self.buf[:end]
        return n

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def slice_medians(self) -> dict[int, float]:
        """Median logical-batch time per slice (the first logical batch of each slice left out)."""
        per: dict[int, list[float]] = {}
        for (s0, b0, t0), (s1, b1, t1) in zip(self.steps, self.steps[1:]):
            if s0 == s1 and b1 == b0 + 2:
                per.setdefault(s0, []).append(t1 - t0)
        return {s: statistics.median(v[1:]) for s, v in per.items() if len(v) >= 3}


def main(argv=None) -> float:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", default="cpp", help="first process: 'cpp' or 'fit shuffle=K' (default cpp)")
    ap.add_argument("--b", default="fit shuffle=10", help="second process (default 'fit shuffle=10')")
    ap.add_argument("--slice", type=float, default=0.25, help="seconds per turn (default 0.25)")
    ap.add_argument("--seconds", type=float, default=50, help="measuring time, both together (default 50; "
                    "mnist-train stops after 30 epochs, ~60 s of turns)")
    ap.add_argument("--data", default=None, help="Fashion-MNIST IDX folder (default: Debian's)")
    ap.add_argument("--a-src", default=None, help="PYTHONPATH of a 'fit' first process: a pyggml_opt source "
                    "tree (with its compiled parts) to compare with another version")
    ap.add_argument("--b-src", default=None, help="PYTHONPATH of a 'fit' second process")
    ap.add_argument("--build-dir", default=None, help="folder holding bin/mnist-train (as bench_fit.py)")
    args = ap.parse_args(argv)

    tool, idx = find_tool(args.build_dir), data.raw_idx_dir(args.data)
    print(f"{args.a!r} vs {args.b!r}: {cpp_threads()} threads each, turns of {args.slice} s for {args.seconds} s; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        trainers = [Trainer(spec, tool, idx, args.data, Path(tmp), i, src)
                    for i, (spec, src) in enumerate(((args.a, args.a_src), (args.b, args.b_src)))]
        try:
            # each alone until it trains (loading the data is not timed)
            trainers[1].signal(signal.SIGSTOP)
            for t in trainers:
                t.signal(signal.SIGCONT)
                deadline = time.perf_counter() + 120
                while t.read(1.0, None) <= 0:
                    if time.perf_counter() > deadline:
                        raise SystemExit(f"{t.spec} reported no batch within 120 s")
                t.signal(signal.SIGSTOP)
                while t.read(0.05, None) >= 0:
                    pass
            n_slices, end = 0, time.perf_counter() + args.seconds
            try:
                while time.perf_counter() < end:
                    t = trainers[n_slices % 2]
                    t.signal(signal.SIGCONT)
                    stop_at = time.perf_counter() + args.slice
                    while (left := stop_at - time.perf_counter()) > 0:
                        t.read(left, n_slices)
                    t.signal(signal.SIGSTOP)
                    while t.read(0.0, None) >= 0:  # written before the stop, read after it: not timed
                        pass
                    n_slices += 1
            except EOFError as e:
                print(f"{e} finished its 30 epochs: measured {n_slices} turns")
        finally:
            for t in trainers:
                t.signal(signal.SIGKILL)
                t.signal(signal.SIGCONT)
                t.proc.wait()

    med = [t.slice_medians() for t in trainers]
    # a slice of one process against the next slice of the other, in both orders
    pairs = [(med[0][s] / med[1][s + 1]) if s % 2 == 0 else (med[0][s + 1] / med[1][s])
             for s in range(n_slices - 1) if (s if s % 2 == 0 else s + 1) in med[0]
             and (s + 1 if s % 2 == 0 else s) in med[1]]
    if not pairs:
        raise SystemExit("no complete pair of slices: use longer --slice or --seconds")
    ratio = statistics.median(pairs)
    q1, _, q3 = statistics.quantiles(pairs, n=4)
    for t, m in zip(trainers, med):
        print(f"{t.spec:>16}: median {statistics.median(m.values()) * 1000:.2f} ms per logical batch "
              f"({len(m)} slices)")
    print(f"time of {args.a!r} / time of {args.b!r}: {ratio:.3f}, median of {len(pairs)} adjacent pairs of slices "
          f"(quartiles {q1:.3f} {q3:.3f}); load average {os.getloadavg()[0]:.2f}")
    return ratio


if __name__ == "__main__":
    main()
