"""Argument checks shared by every layer of the package: one owner for each rule.

Each function returns the value in its canonical Python type or raises ``ValueError`` /
``TypeError`` naming the argument, so a bad value never reaches ggml (which aborts instead of
returning errors). This module depends on numpy only.
"""
from __future__ import annotations

import math
from typing import Any, Collection

import numpy as np


def check_int(name: str, value: object, lo: int = 1, hi: int | None = None) -> int:
    """``value`` as an int in [lo, hi] (bools are refused: ``True`` is not a batch size)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < lo \
            or (hi is not None and value > hi):
        bound = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{name} must be an int {bound}, got {value!r}")
    return int(value)


def check_bool(name: str, value: object) -> bool:
    """A bool (numpy's too): a flag given "no" or None would otherwise read as what Python makes of it."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_pair(name: str, value: object, lo: int = 1) -> tuple[int, int]:
    """An int or a pair of ints, each >= ``lo``, as a pair (kernel sizes, strides, padding)."""
    vals: tuple[Any, ...] | None  # checked just below
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        vals = (value, value)
    elif isinstance(value, (tuple, list)):
        vals = tuple(value)
    else:
        vals = None
    if vals is None or len(vals) != 2 or any(
            not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)) or v < lo for v in vals):
        raise ValueError(f"{name} must be an int >= {lo} or a pair of them, got {value!r}")
    return int(vals[0]), int(vals[1])


def check_number(name: str, value: object, lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False,
                 why: str = "") -> float:
    """A finite real number in the interval given (open or closed at each end)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    v = float(value)
    ok = math.isfinite(v) and (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
    if not ok:
        bound = f"{'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
        raise ValueError(f"{name} must be in {bound}, got {value!r}{why}")
    return v


def check_choice(name: str, value: object, choices: Collection[str]) -> str:
    """One of ``choices`` (strings)."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value
