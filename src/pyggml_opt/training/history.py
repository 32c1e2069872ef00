"""``History``: the per-epoch metrics of a ``fit``."""
from __future__ import annotations


class History:
    """Per-epoch metrics of a ``fit``: ``history`` maps a metric name to a list (one value per epoch).

    Names: loss, loss_unc, accuracy, accuracy_unc, val_loss, val_loss_unc, val_accuracy,
    val_accuracy_unc, time (seconds), lr. Accuracies are fractions in [0, 1]; NaN where undefined.
    """

    def __init__(self) -> None:
        self.epoch: list[int] = []
        self.history: dict[str, list[float]] = {}

    def append(self, epoch: int, logs: dict) -> None:
        self.epoch.append(epoch)
        for k, v in logs.items():
            self.history.setdefault(k, []).append(v)

    def to_dict(self) -> dict:
        """``{"epoch": [...], "history": {name: [...]}}``, JSON-ready (checkpoints store it)."""
        return {"epoch": list(self.epoch), "history": {k: list(v) for k, v in self.history.items()}}

    @classmethod
    def from_dict(cls, d: dict) -> "History":
        h = cls()
        h.epoch = [int(e) for e in d.get("epoch", [])]
        h.history = {str(k): [float(x) for x in v] for k, v in d.get("history", {}).items()}
        return h

    def keys(self):
        return self.history.keys()

    def __getitem__(self, key: str) -> list[float]:
        return self.history[key]

    def __contains__(self, key: str) -> bool:
        return key in self.history

    def __repr__(self) -> str:
        return f"History(epochs={len(self.epoch)}, keys={sorted(self.history)})"
