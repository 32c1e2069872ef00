"""Fashion-MNIST: Debian's ``dataset-fashion-mnist`` package, the small real subset bundled in
``datasets/``, and the raw IDX files ggml's C++ mnist examples read (see the package docstring)."""
from __future__ import annotations

import gzip
import os
import shutil
import struct
from pathlib import Path
from typing import Optional, Tuple

import numpy as np

from ..atomic import atomic_file
from .idx import PathLike, is_gzip, read_idx, write_idx

__all__ = [
    "CLASS_NAMES",
    "DEBIAN_FASHION_MNIST_DIR",
    "FASHION_MNIST_FILES",
    "load_fashion_mnist",
    "load_fashion_mnist_small",
    "fashion_mnist_available",
    "raw_idx_dir",
    "default_cache_dir",
]

Split = Tuple[np.ndarray, np.ndarray]

#: Fashion-MNIST class names, indexed by label id.
CLASS_NAMES: Tuple[str, ...] = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)

#: Where Debian's ``dataset-fashion-mnist`` package installs the gzipped IDX files.
DEBIAN_FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")

#: The four IDX file names (uncompressed form), keyed by role. These are also the names ggml's C++
#: mnist examples are given (``examples/mnist``: ``mnist-train``/``mnist-eval`` take the image and
#: label files as arguments and read them raw, skipping the 16- resp. 8-byte IDX header).
FASHION_MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}

_SMALL_NPZ = Path(__file__).resolve().parent / "datasets" / "fashion_mnist_small.npz"

# --------------------------------------------------------------------------------------------------
# Fashion-MNIST
# --------------------------------------------------------------------------------------------------

def _find_files(path: Optional[PathLike]) -> Tuple[dict, list]:
    """Locate the four files in `path` (or the Debian folder); returns (found: role -> Path, looked_for)."""
    folder = Path(path) if path is not None else DEBIAN_FASHION_MNIST_DIR
    found, looked = {}, []
    for role, name in FASHION_MNIST_FILES.items():
        candidates = [folder / name, folder / (name + ".gz")]
        looked.extend(candidates)
        for c in candidates:
            if c.is_file():
                found[role] = c
                break
    return found, looked


def _not_found(found: dict, looked: list, tail: str) -> FileNotFoundError:
    missing = [n for r, n in FASHION_MNIST_FILES.items() if r not in found]
    return FileNotFoundError(
        f"Fashion-MNIST not found: missing {', '.join(missing)}. Looked for: {', '.join(str(p) for p in looked)}. "
        f"On Debian/Ubuntu, `apt-get install dataset-fashion-mnist` provides them in {DEBIAN_FASHION_MNIST_DIR}{tail}")


def fashion_mnist_available(path: Optional[PathLike] = None) -> bool:
    """Whether all four Fashion-MNIST IDX files (gzipped or not) are present.

    Args:
        path: folder to look in; None means Debian's ``/usr/share/datasets/fashion-mnist``.

    Returns:
        True when :func:`load_fashion_mnist` with the same `path` would find every file.
    """
    found, _ = _find_files(path)
    return len(found) == len(FASHION_MNIST_FILES)


def _prepare(images: np.ndarray, labels: np.ndarray, normalize: bool, flatten: bool, what: str) -> Split:
    if images.dtype != np.uint8 or images.ndim != 3 or images.shape[1:] != (28, 28):
        raise ValueError(f"{what}: expected uint8 images of shape (n, 28, 28), got {images.dtype} {images.shape}")
    if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
        raise ValueError(f"{what}: {images.shape[0]} images but labels of shape {labels.shape}")
    if labels.size and (labels.min() < 0 or labels.max() >= len(CLASS_NAMES)):
        raise ValueError(f"{what}: labels outside [0, {len(CLASS_NAMES)})")
    n = images.shape[0]
    x = images.reshape(n, 784) if flatten else images.reshape(n, 1, 28, 28)
    if normalize:
        x = x.astype(np.float32)
        x /= np.float32(255.0)  # exactly as ggml's mnist example: pixel / 255.0f
    else:
        x = np.array(x, dtype=np.uint8, copy=True)
    return x, labels.astype(np.int32)


def load_fashion_mnist(
    path: Optional[PathLike] = None, *, normalize: bool = True, flatten: bool = False
) -> Tuple[Split, Split]:
    """Load the full Fashion-MNIST data set (60000 train + 10000 test images, 10 balanced classes).

    Args:
        path: folder holding ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
            ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte``, each raw or with ``.gz``
            appended (a raw file wins when both exist). None means Debian's
            ``/usr/share/datasets/fashion-mnist``.
        normalize: True: images as float32 in [0, 1] (pixel / 255, as ggml's mnist example does).
            False: the uint8 pixels in [0, 255].
        flatten: images of shape ``(n, 784)`` instead of ``(n, 1, 28, 28)``.

    Returns:
        ``((x_train, y_train), (x_test, y_test))``; x as above, y of shape ``(n,)`` and dtype int32.

    Raises:
        FileNotFoundError: some files are missing; the message lists the paths looked for.
        ValueError: a file is not a valid Fashion-MNIST IDX file.
    """
    found, looked = _find_files(path)
    if len(found) != len(FASHION_MNIST_FILES):
        raise _not_found(found, looked, "; or pass path= a folder holding them. "
                         "load_fashion_mnist_small() needs no download.")
    arrays = {role: read_idx(p) for role, p in found.items()}
    train = _prepare(arrays["train_images"], arrays["train_labels"], normalize, flatten, str(found["train_images"]))
    test = _prepare(arrays["test_images"], arrays["test_labels"], normalize, flatten, str(found["test_images"]))
    return train, test


def _load_small_raw() -> dict:
    with np.load(_SMALL_NPZ) as z:
        return {k: z[k] for k in z.files}


def load_fashion_mnist_small(*, normalize: bool = True, flatten: bool = False) -> Tuple[Split, Split]:
    """Load the small Fashion-MNIST subset shipped with pyggml_opt (no download, no Debian package).

    6000 train images (600 per class) and 1000 test images (100 per class), drawn with a fixed seed
    from the real train and test sets and kept in their original order; see
    ``pyggml_opt/data/datasets/README.md`` and ``scripts/make_small_dataset.py``.

    Args:
        normalize: True: images as float32 in [0, 1] (pixel / 255). False: uint8 in [0, 255].
        flatten: images of shape ``(n, 784)`` instead of ``(n, 1, 28, 28)``.

    Returns:
        ``((x_train, y_train), (x_test, y_test))`` with x_train of shape ``(6000, 1, 28, 28)`` and
        x_test ``(1000, 1, 28, 28)`` (or ``(n, 784)``), y int32 of shape ``(n,)``.
    """
    z = _load_small_raw()
    train = _prepare(z["x_train"], z["y_train"], normalize, flatten, str(_SMALL_NPZ))
    test = _prepare(z["x_test"], z["y_test"], normalize, flatten, str(_SMALL_NPZ))
    return train, test


# --------------------------------------------------------------------------------------------------
# Raw IDX files for ggml's C++ mnist tools
# --------------------------------------------------------------------------------------------------

def default_cache_dir() -> Path:
    """The folder :func:`raw_idx_dir` writes to by default.

    ``$PYGGML_OPT_CACHE/fashion-mnist`` when that variable is set, else
    ``$XDG_CACHE_HOME/pyggml_opt/fashion-mnist``, else ``~/.cache/pyggml_opt/fashion-mnist``.
    """
    root = os.environ.get("PYGGML_OPT_CACHE")
    if root:
        return Path(root).expanduser() / "fashion-mnist"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "pyggml_opt" / "fashion-mnist"


def _gzip_isize(path: Path) -> int:
    """Uncompressed size mod 2**32 from a gzip file's trailer."""
    with open(path, "rb") as f:
        f.seek(-4, os.SEEK_END)
        return struct.unpack("<I", f.read(4))[0]


def _gunzip_to(src: Path, dest: Path) -> None:
    with atomic_file(dest) as out, gzip.open(src, "rb") as f:
        shutil.copyfileobj(f, out, 1 << 20)


def raw_idx_dir(
    src: Optional[PathLike] = None, dest: Optional[PathLike] = None, *, small: bool = False
) -> Path:
    """A folder holding the four uncompressed Fashion-MNIST IDX files, for ggml's C++ mnist tools.

    ggml's ``examples/mnist`` programs (``mnist-train``, ``mnist-eval``) take the image and label
    files as arguments and read them raw (no gzip), skipping the 16-byte (images) or 8-byte
    (labels) IDX header. The files here are named as in that example: ``train-images-idx3-ubyte``,
    ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``.

    Args:
        src: folder holding the four files (gzipped or raw); None means Debian's folder. When every
            file there is already raw, `src` itself is returned and nothing is written.
        dest: folder to decompress into; None means :func:`default_cache_dir`. Files already there
            with the right size are kept (nothing is decompressed twice); others are written
            atomically (temporary file, then rename).
        small: write the bundled subset of :func:`load_fashion_mnist_small` instead (6000 train +
            1000 test images; `src` is ignored), to ``dest`` or ``default_cache_dir()/small``.

    Returns:
        The folder holding the four raw files.

    Raises:
        FileNotFoundError: `src` lacks some of the files (see :func:`load_fashion_mnist`).
    """
    if small:
        out = Path(dest) if dest is not None else default_cache_dir() / "small"
        out.mkdir(parents=True, exist_ok=True)
        z = _load_small_raw()
        arrays = {
            "train_images": z["x_train"], "train_labels": z["y_train"],
            "test_images": z["x_test"], "test_labels": z["y_test"],
        }
        for role, name in FASHION_MNIST_FILES.items():
            a = np.ascontiguousarray(arrays[role], dtype=np.uint8)
            target = out / name
            expected = 4 + 4 * a.ndim + a.nbytes
            if target.is_file() and target.stat().st_size == expected:
                try:
                    if np.array_equal(read_idx(target), a):
                        continue
                except ValueError:
                    pass
            write_idx(target, a, compress=False)
        return out

    found, looked = _find_files(src)
    if len(found) != len(FASHION_MNIST_FILES):
        raise _not_found(found, looked, ".")
    if all(not is_gzip(p) and p.name == FASHION_MNIST_FILES[r] for r, p in found.items()):
        return found["train_images"].parent

    out = Path(dest) if dest is not None else default_cache_dir()
    out.mkdir(parents=True, exist_ok=True)
    for role, name in FASHION_MNIST_FILES.items():
        p = found[role]
        target = out / name
        if is_gzip(p):
            want = _gzip_isize(p)
            if target.is_file() and target.stat().st_size % 2**32 == want:
                continue
            _gunzip_to(p, target)
        else:
            if target.is_file() and target.stat().st_size == p.stat().st_size:
                continue
            with atomic_file(target) as dst, open(p, "rb") as f:
                shutil.copyfileobj(f, dst, 1 << 20)
    return out
