#!/usr/bin/env python3
"""Make the small Fashion-MNIST subset that pyggml_opt ships (src/pyggml_opt/data/datasets/fashion_mnist_small.npz).

Reads the four gzipped IDX files of Debian's ``dataset-fashion-mnist`` package (or --src), draws a
class-balanced subset with a fixed seed (per class: --train-per-class from the train set,
--test-per-class from the test set, without replacement), keeps the chosen images in their original
order, and writes an .npz with

    x_train (n, 28, 28) uint8    y_train (n,) uint8    train_index (n,) uint16  (row in the full train set)
    x_test  (m, 28, 28) uint8    y_test  (m,) uint8    test_index  (m,) uint16  (row in the full test set)

The zip is written reproducibly (fixed time stamps, deflate level 9), so the same inputs and options
give the same bytes; the script prints the per-class counts, the size and the sha256.

    python scripts/make_small_dataset.py            # defaults: 600 + 100 per class, seed 2017
"""
from __future__ import annotations

import argparse
import hashlib
import io
import sys
import zipfile
from pathlib import Path

import numpy as np

from pyggml_opt.data import load_fashion_mnist  # the installed package (the reader of the IDX files)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "src" / "pyggml_opt" / "data" / "datasets" / "fashion_mnist_small.npz"


def pick(labels: np.ndarray, per_class: int, rng: np.random.Generator, nclasses: int = 10) -> np.ndarray:
    """Indices of `per_class` random samples of every class, sorted ascending (original order)."""
    chosen = []
    for c in range(nclasses):
        idx = np.flatnonzero(labels == c)
        if idx.size < per_class:
            raise SystemExit(f"class {c} has only {idx.size} samples, {per_class} requested")
        chosen.append(rng.choice(idx, per_class, replace=False))
    return np.sort(np.concatenate(chosen))


def write_npz(path: Path, arrays: dict) -> bytes:
    """Write arrays as a reproducible .npz (what np.load reads); returns the bytes written."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for name, a in arrays.items():
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            npy = io.BytesIO()
            np.lib.format.write_array(npy, np.ascontiguousarray(a), allow_pickle=False)
            zf.writestr(info, npy.getvalue(), compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    data = buf.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", default=None, help="folder with the four IDX files (default: Debian's)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output .npz (default: {DEFAULT_OUT})")
    ap.add_argument("--train-per-class", type=int, default=600)
    ap.add_argument("--test-per-class", type=int, default=100)
    ap.add_argument("--seed", type=int, default=2017)
    args = ap.parse_args(argv)

    (xtr, ytr), (xte, yte) = load_fashion_mnist(args.src, normalize=False, flatten=False)
    rng = np.random.default_rng(args.seed)
    itr = pick(ytr, args.train_per_class, rng)
    ite = pick(yte, args.test_per_class, rng)
    arrays = {
        "x_train": xtr[itr, 0].astype(np.uint8),
        "y_train": ytr[itr].astype(np.uint8),
        "train_index": itr.astype(np.uint16),
        "x_test": xte[ite, 0].astype(np.uint8),
        "y_test": yte[ite].astype(np.uint8),
        "test_index": ite.astype(np.uint16),
    }
    blob = write_npz(args.out, arrays)

    print(f"wrote {args.out}: {len(blob)} bytes")
    print(f"train: {len(itr)} images, per class {np.bincount(arrays['y_train'], minlength=10).tolist()}")
    print(f"test:  {len(ite)} images, per class {np.bincount(arrays['y_test'], minlength=10).tolist()}")
    print(f"sha256 {hashlib.sha256(blob).hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
