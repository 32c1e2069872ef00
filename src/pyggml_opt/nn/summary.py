"""The text of ``Network.summary``: a Keras-like table of a built network's layers, then its totals."""
from __future__ import annotations

from typing import AbstractSet, Mapping, Optional, Union

import numpy as np

from ..core.tensor_data import nbytes

# A row of the table: label, output shape (None for the batch axis) or a text, parameter names.
SummaryRow = tuple[str, Union[tuple[Optional[int], ...], str], list[str]]


def summary_lines(title: str, rows: list[SummaryRow], param_shapes: Mapping[str, tuple[int, ...]],
                  frozen: AbstractSet[str], types: Mapping[str, str]) -> list[str]:
    """The lines of the table titled ``title``: one row per layer of ``rows`` (name and type, output
    shape, parameter count, then its parameters' names and shapes, one per line), then the total, the
    trainable and the non-trainable (``frozen``) parameter counts and the parameters' size in memory
    (each of ggml type ``types[name]``, f32 when absent)."""
    header = ("Layer (type)", "Output shape", "Param #", "Parameters")
    table = []
    for label, shape, names in rows:
        count = sum(int(np.prod(param_shapes[n])) for n in names)
        weights = [f"{n} {param_shapes[n]}" for n in names] or [""]
        table.append((label, str(shape), f"{count:,}", weights[0]))
        table += [("", "", "", w) for w in weights[1:]]  # one parameter per line, as Keras's "Connected to"
    widths = [max(len(row[i]) for row in [header, *table]) for i in range(4)]

    def line(row: tuple[str, str, str, str]) -> str:
        cells = (row[0].ljust(widths[0]), row[1].ljust(widths[1]), row[2].rjust(widths[2]), row[3])
        return "   ".join(cells).rstrip()

    width = sum(widths) + 3 * len(widths) - 3
    total = int(sum(np.prod(s) for s in param_shapes.values()))
    n_frozen = sum(int(np.prod(param_shapes[n])) for n in frozen)
    size = float(sum(nbytes(shape, types.get(n, "f32")) for n, shape in param_shapes.items()))
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            break
        size /= 1024
    size_text = f"{size:.0f} B" if unit == "B" else f"{size:.2f} {unit}"
    return [f'Model: "{title}"', "_" * width, line(header), "=" * width,
            *(line(row) for row in table), "=" * width,
            f"Total params: {total:,} ({size_text})",
            f"Trainable params: {total - n_frozen:,}",
            f"Non-trainable params: {n_frozen:,}"]
