"""``History``: the per-epoch metrics of a ``fit`` (recorded by fit's first callback,
``callbacks.RecordHistory``), and their plot (matplotlib, an optional extra)."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, KeysView, Sequence

import numpy as np

if TYPE_CHECKING:  # matplotlib is an optional extra, imported by plot() only
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Per-epoch entries that are not metrics of the model: left out of the default plot.
_NOT_METRICS = ("time", "lr")


class History:
    """Per-epoch metrics of a ``fit``: ``history`` maps a metric name to a list (one value per epoch).

    Names: loss, loss_unc, then each metric of fit's ``metrics`` (default: accuracy) and its
    uncertainty (accuracy, accuracy_unc, ...), the same with "val_" for the validation data, time
    (seconds), lr. Accuracies are fractions in [0, 1]; NaN where undefined.
    """

    def __init__(self) -> None:
        self.epoch: list[int] = []
        self.history: dict[str, list[float]] = {}

    def append(self, epoch: int, logs: dict) -> None:
        """Record the logs of ``epoch`` (numbered from 0)."""
        self.epoch.append(epoch)
        for k, v in logs.items():
            self.history.setdefault(k, []).append(v)

    def to_dict(self) -> dict:
        """``{"epoch": [...], "history": {name: [...]}}``, JSON-ready (checkpoints store it)."""
        return {"epoch": list(self.epoch), "history": {k: list(v) for k, v in self.history.items()}}

    @classmethod
    def from_dict(cls, d: dict) -> "History":
        """A History from what ``to_dict`` returned."""
        h = cls()
        h.load(d)
        return h

    def load(self, d: dict) -> None:
        """Replace the epochs recorded with what ``to_dict`` returned (a resumed fit's)."""
        self.epoch = [int(e) for e in d.get("epoch", [])]
        self.history = {str(k): [float(x) for x in v] for k, v in d.get("history", {}).items()}

    def keys(self) -> KeysView[str]:
        """The names of the per-epoch entries."""
        return self.history.keys()

    def plot(self, metrics: str | Sequence[str] | None = None, axes: Axes | Iterable[Axes] | None = None, *,
             uncertainty: bool = True, figsize: tuple[float, float] | None = None) -> Figure:
        """Plot each metric per epoch, one subplot each: training as a solid line, validation
        (``val_<metric>``) dashed, and a band of +- the uncertainty (``<metric>_unc``) around each
        line when ``uncertainty`` is true and the history has one.

        metrics: names without the ``val_`` prefix (default: loss, then every other metric; not
        ``time`` or ``lr``, which can be asked for by name). Series with no finite value (validation
        when fit had none, accuracy for a regression loss) are left out, and so is a metric left
        with none. axes: a matplotlib Axes or several (a list, an array from ``plt.subplots``), one
        per metric plotted, to draw into; by default a new pyplot figure with one row of subplots
        (``figsize`` in inches, default 5 x 4 per subplot). Returns the matplotlib Figure.

        Needs matplotlib: ``pip install pyggml_opt[plot]``.
        """
        try:
            from matplotlib.ticker import MaxNLocator
        except ImportError as e:
            raise ImportError("History.plot needs matplotlib: pip install pyggml_opt[plot]") from e
        if metrics is None:
            bases = [k[len("val_"):] if k.startswith("val_") else k for k in self.history]
            names = [k for k in dict.fromkeys(["loss", *bases]) if not k.endswith("_unc") and k not in _NOT_METRICS]
        else:
            names = [metrics] if isinstance(metrics, str) else list(metrics)
            for k in names:
                if k not in self.history and f"val_{k}" not in self.history:
                    raise KeyError(f"no metric {k!r} in this history; it has {sorted(self.history)}")
        series = {}  # metric -> [(label, key, line style)] of the series with something to draw
        for k in names:
            drawn = [(label, key, style) for label, key, style in
                     (("training", k, "-"), ("validation", f"val_{k}", "--")) if self._finite(key)]
            if drawn:
                series[k] = drawn
        if not series:
            raise ValueError(f"nothing to plot: no finite values of {names} in {self!r}")
        if axes is None:
            import matplotlib.pyplot as plt

            size = figsize or (5.0 * len(series), 4.0)
            fig, grid = plt.subplots(1, len(series), figsize=size, squeeze=False, layout="constrained")
            axes = list(grid.ravel())
        else:
            axes = list(np.ravel(np.asarray(axes, dtype=object)))
            if len(axes) != len(series):
                raise ValueError(f"got {len(axes)} axes for {len(series)} metrics to plot: {list(series)}")
            fig = axes[0].figure.figure  # the top-level Figure, also for an Axes in a SubFigure
        x = [e + 1 for e in self.epoch]  # numbered from 1, as fit's progress lines are
        for ax, (name, drawn) in zip(axes, series.items()):
            for label, key, style in drawn:
                values = self.history[key]
                (line,) = ax.plot(x, values, style, marker=".", label=label)
                if uncertainty and self._finite(f"{key}_unc"):
                    unc = self.history[f"{key}_unc"]
                    ax.fill_between(x, [v - u for v, u in zip(values, unc)], [v + u for v, u in zip(values, unc)],
                                    color=line.get_color(), alpha=0.2, linewidth=0)
            ax.set_title(name)
            ax.set_xlabel("epoch")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # no ticks between epochs
            ax.legend()
        return fig

    def _finite(self, key: str) -> bool:
        return any(math.isfinite(v) for v in self.history.get(key, ()))

    def __getitem__(self, key: str) -> list[float]:
        return self.history[key]

    def __contains__(self, key: str) -> bool:
        return key in self.history

    def __repr__(self) -> str:
        return f"History(epochs={len(self.epoch)}, keys={sorted(self.history)})"
