"""The progress display of ``fit``: a bar per epoch (verbose=1) or one line per epoch (verbose=2), a
callback that fit adds to its list (after History, before the user's callbacks)."""
from __future__ import annotations

import math
import sys
import time
from typing import TextIO

from .callbacks import Callback
from .trainable import Trainable


def _fmt(logs: dict, prefix: str = "") -> str:
    """The loss and the metrics of ``logs`` (those with ``prefix``), each with its uncertainty:
    accuracies (names with "acc") in percent, the accuracy shown as "acc"."""
    parts = []
    for key in logs:
        if key.startswith("val_") or key.endswith("_unc") or key in ("time", "lr"):
            continue
        v, u = logs.get(prefix + key, math.nan), logs.get(prefix + key + "_unc", math.nan)
        if math.isnan(v):
            continue
        label = prefix + ("acc" if key == "accuracy" else key)
        parts.append(f"{label} {100 * v:.2f}±{100 * u:.2f}%" if "acc" in key else f"{label} {v:.5f}±{u:.5f}")
    return "  ".join(parts)


class Progress(Callback):
    """Writes fit's progress to ``stream`` (default: standard output). The bar (verbose=1) redraws a
    line with "\\r", which only a terminal shows as such: to a file or pipe it writes one line per
    epoch, as verbose=2 does (as Keras does). ``epochs`` and ``nbatches`` (per epoch) default to the
    running fit's."""

    def __init__(self, verbose: int, epochs: int = 0, nbatches: int = 0, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        interactive = getattr(self.stream, "isatty", lambda: False)()
        self.verbose = 2 if verbose == 1 and not interactive else verbose
        self.epochs, self.nbatches = epochs, nbatches
        self.last = 0.0
        self.needs_batch_logs = self.verbose == 1
        self._epoch, self._t0 = 0, 0.0

    def on_train_begin(self, model: Trainable) -> None:
        if self.trainer is not None:
            self.epochs, self.nbatches = self.trainer.epochs, self.trainer.n_batches

    def on_epoch_begin(self, model: Trainable, epoch: int) -> None:
        self._epoch, self._t0 = epoch, time.perf_counter()

    def on_batch_end(self, model: Trainable, batch: int, logs: dict) -> None:
        self.batch(self._epoch, batch, logs, self._t0)

    def on_epoch_end(self, model: Trainable, epoch: int, logs: dict) -> None:
        self.epoch(epoch, logs)

    def batch(self, epoch: int, ibatch: int, logs: dict, t0: float) -> None:
        if self.verbose != 1:
            return
        now = time.perf_counter()
        if ibatch + 1 < self.nbatches and now - self.last < 0.1:
            return
        self.last = now
        done = (ibatch + 1) / self.nbatches
        eta = (now - t0) / done * (1 - done)
        bar = "=" * int(25 * done) + ">" + " " * (25 - int(25 * done))
        rate = self.throughput(done, now - t0)
        self.stream.write(f"\repoch {epoch + 1}/{self.epochs} [{bar[:26]}] {ibatch + 1}/{self.nbatches}  "
                          f"{_fmt(logs)}  {rate + '  ' if rate else ''}ETA {eta:.1f}s ")
        self.stream.flush()

    def throughput(self, done: float, seconds: float) -> str:
        """What the display says of the speed, ``done`` of the epoch in ``seconds``: nothing here; a
        subclass may say how many items a second."""
        return ""

    def epoch(self, epoch: int, logs: dict) -> None:
        if self.verbose == 0:
            return
        rate = self.throughput(1.0, logs["time"])
        line = (f"epoch {epoch + 1}/{self.epochs}  {_fmt(logs)}  {_fmt(logs, 'val_')}  {logs['time']:.2f}s"
                f"{'  ' + rate if rate else ''}").rstrip()
        self.stream.write(("\r" if self.verbose == 1 else "") + line + " " * 10 + "\n")
        self.stream.flush()
