"""Text data sets: Debian's fortunes as a real text corpus, and a language model's training pairs.

``load_fortunes`` reads the fortune files that Debian's ``fortunes`` package installs in
``/usr/share/games/fortunes/`` (text files of quotations separated by lines holding ``%``); nothing is
downloaded. ``sliding_windows`` cuts a stream of token ids into (input, next id) pairs, and
``char_windows`` does it for texts with a ``text.CharTokenizer`` fitted on them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ..text import CharTokenizer

DEBIAN_FORTUNES_DIR = Path("/usr/share/games/fortunes")


def sliding_windows(ids: Sequence[int] | np.ndarray, context: int, stride: int | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """A language model's training pairs from one stream of token ids: windows ``x`` (n, context) of
    ``context`` ids starting every ``stride`` ids (default ``context``: windows that do not overlap),
    and ``y`` (n, context), the same windows one id later (the next id of every step). Both int32;
    n = (len(ids) - context - 1) // stride + 1."""
    a = np.asarray(ids)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"):
        raise TypeError(f"ids must be a 1-D sequence of int token ids, got shape {a.shape} and dtype {a.dtype}")
    for name, value in (("context", context), ("stride", context if stride is None else stride)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    step = int(context if stride is None else stride)
    if a.size < context + 1:
        raise ValueError(f"{a.size} ids make no window of context {context} plus the next id")
    windows = np.lib.stride_tricks.sliding_window_view(a.astype(np.int32, copy=False), context + 1)[::step]
    return np.ascontiguousarray(windows[:, :-1]), np.ascontiguousarray(windows[:, 1:])


def char_windows(texts: Sequence[str], context: int, separator: str = "\n\n"
                 ) -> tuple[CharTokenizer, np.ndarray, np.ndarray]:
    """A character language model's data: the tokenizer of ``texts``, and ``sliding_windows`` (x, y) of
    the texts joined by ``separator`` into one stream of ids."""
    tokenizer = CharTokenizer.fit([*texts, separator])
    corpus = separator.join(texts)
    x, y = sliding_windows(tokenizer.encode([corpus], len(corpus))[0], context)
    return tokenizer, x, y


def fortune_categories(path: str | Path = DEBIAN_FORTUNES_DIR) -> list[str]:
    """The fortune files in ``path`` (those that have the ``.dat`` index the package ships beside them)."""
    folder = Path(path)
    return sorted(p.stem for p in folder.glob("*.dat") if (folder / p.stem).is_file())


def load_fortunes(categories: Sequence[str] | None = None,
                  path: str | Path = DEBIAN_FORTUNES_DIR) -> tuple[list[str], np.ndarray, list[str]]:
    """(texts, labels, names): every fortune of the ``categories`` files (default: all), its label the
    index of its file in ``names``. FileNotFoundError naming the Debian package when it is missing."""
    folder = Path(path)
    names = list(categories) if categories is not None else fortune_categories(folder)
    if not names:
        raise FileNotFoundError(f"no fortune files in {folder}: install Debian's fortunes package "
                                "(apt-get install fortunes)")
    texts: list[str] = []
    labels: list[int] = []
    for label, name in enumerate(names):
        file = folder / name
        if not file.is_file():
            raise FileNotFoundError(f"{file} does not exist: install Debian's fortunes package (apt-get install "
                                    f"fortunes); categories there: {fortune_categories(folder)}")
        for block in file.read_text(encoding="utf-8", errors="replace").split("\n%\n"):
            block = block.strip("%\n")
            if block.strip():
                texts.append(block)
                labels.append(label)
    return texts, np.asarray(labels, np.int64), names
