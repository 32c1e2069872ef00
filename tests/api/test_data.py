"""Tests for pyggml_opt.data: IDX reading/writing, Fashion-MNIST, the bundled subset, raw IDX folders."""
import gzip
import hashlib
import os
import re
import struct
from pathlib import Path

import numpy as np
import pytest

from pyggml_opt import data
from pyggml_opt.data import (
    CLASS_NAMES,
    FASHION_MNIST_FILES,
    fashion_mnist_available,
    load_fashion_mnist,
    load_fashion_mnist_small,
    raw_idx_dir,
    read_idx,
    write_idx,
)

DEBIAN = data.DEBIAN_FASHION_MNIST_DIR
needs_debian = pytest.mark.skipif(
    not fashion_mnist_available(), reason="Debian's dataset-fashion-mnist is not installed"
)


@pytest.fixture(scope="module")
def full():
    return load_fashion_mnist(normalize=False)


# ------------------------------------------------------------------------------------------------ IDX

DTYPES = [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64]
SHAPES = [(), (0,), (7,), (3, 5), (2, 3, 4), (2, 1, 3, 1, 2)]


def _sample(dtype, shape, rng):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        a = rng.standard_normal(shape).astype(dt) * 1e3
        if a.size:
            a.reshape(-1)[0] = np.finfo(dt).max
        return a
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)


@pytest.mark.parametrize("gz", [False, True], ids=["raw", "gz"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)) or "scalar")
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_idx_round_trip(tmp_path, dtype, shape, gz):
    rng = np.random.default_rng(hash((np.dtype(dtype).name, shape)) & 0xFFFF)
    a = _sample(dtype, shape, rng)
    p = write_idx(tmp_path / ("a.idx.gz" if gz else "a.idx"), a)
    assert (p.read_bytes()[:2] == b"\x1f\x8b") == gz
    b = read_idx(p)
    assert b.dtype == np.dtype(dtype) and b.dtype.isnative
    assert b.shape == shape
    np.testing.assert_array_equal(a, b)
    assert b.flags.writeable


def test_idx_byte_layout(tmp_path):
    a = np.array([[1, -2, 3], [256, 0, 32767]], dtype=np.int16)
    p = write_idx(tmp_path / "x", a)
    assert p.read_bytes() == (
        bytes([0, 0, 0x0B, 2]) + (2).to_bytes(4, "big") + (3).to_bytes(4, "big")
        + b"".join(int(v).to_bytes(2, "big", signed=True) for v in a.ravel())
    )
    f = write_idx(tmp_path / "f", np.array([1.5], dtype=np.float32))
    assert f.read_bytes() == bytes([0, 0, 0x0D, 1, 0, 0, 0, 1]) + struct.pack(">f", 1.5)


def test_idx_detects_gzip_by_magic_not_name(tmp_path):
    a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    p = write_idx(tmp_path / "plain_name", a, compress=True)
    q = write_idx(tmp_path / "looks.gz", a, compress=False)
    np.testing.assert_array_equal(read_idx(p), a)
    np.testing.assert_array_equal(read_idx(q), a)


def test_write_idx_gz_is_reproducible(tmp_path):
    a = np.arange(1000, dtype=np.int32)
    assert write_idx(tmp_path / "a.gz", a).read_bytes() == write_idx(tmp_path / "b.gz", a).read_bytes()


def test_write_idx_rejects_unsupported(tmp_path):
    for bad in (np.zeros(3, np.uint16), np.zeros(3, np.int64), np.zeros(3, np.float16), np.zeros(3, bool)):
        with pytest.raises(ValueError, match="dtype"):
            write_idx(tmp_path / "bad", bad)
    assert not list(tmp_path.iterdir())  # nothing half-written


@pytest.mark.parametrize("gz", [False, True], ids=["raw", "gz"])
@pytest.mark.parametrize(
    "content, pattern",
    [
        (b"", "truncated"),
        (b"\x00\x00", "truncated"),
        (b"\x01\x00\x08\x01\x00\x00\x00\x01\x05", "bad magic"),
        (b"\x00\x00\x07\x01\x00\x00\x00\x01\x05", "bad magic"),
        (b"\x00\x00\x08\x02\x00\x00\x00\x01", "truncated IDX header"),
        (b"\x00\x00\x08\x01\x00\x00\x00\x04\x01\x02\x03", "truncated IDX data"),
        (b"\x00\x00\x0c\x01\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00", "truncated IDX data"),
        (b"\x00\x00\x08\x01\x00\x00\x00\x02\x01\x02\x03", "size mismatch"),
    ],
    ids=["empty", "short-magic", "bad-byte0", "bad-type", "short-dims", "short-u8", "short-i32", "trailing"],
)
def test_read_idx_errors(tmp_path, content, pattern, gz):
    p = tmp_path / "broken-file"
    p.write_bytes(gzip.compress(content, mtime=0) if gz else content)
    with pytest.raises(ValueError, match=pattern) as ei:
        read_idx(p)
    assert str(p) in str(ei.value)


def test_read_idx_truncated_gzip_stream(tmp_path):
    blob = gzip.compress(bytes([0, 0, 8, 1, 0, 0, 0x10, 0]) + os.urandom(4096), mtime=0)
    p = tmp_path / "cut.gz"
    p.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(ValueError, match="gzip") as ei:
        read_idx(p)
    assert str(p) in str(ei.value)


def test_read_idx_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_idx(tmp_path / "nope")


# ------------------------------------------------------------------------------------- Fashion-MNIST

def test_class_names():
    assert len(CLASS_NAMES) == 10
    assert CLASS_NAMES[0] == "T-shirt/top" and CLASS_NAMES[9] == "Ankle boot"


def test_missing_files_message(tmp_path):
    assert not fashion_mnist_available(tmp_path)
    with pytest.raises(FileNotFoundError) as ei:
        load_fashion_mnist(tmp_path)
    msg = str(ei.value)
    assert "apt-get install dataset-fashion-mnist" in msg
    for name in FASHION_MNIST_FILES.values():
        assert str(tmp_path / name) in msg and str(tmp_path / (name + ".gz")) in msg
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        raw_idx_dir(tmp_path, tmp_path / "out")


@needs_debian
def test_full_fashion_mnist(full):
    (xtr, ytr), (xte, yte) = full
    assert xtr.shape == (60000, 1, 28, 28) and xte.shape == (10000, 1, 28, 28)
    assert xtr.dtype == np.uint8 and ytr.dtype == np.int32 and yte.dtype == np.int32
    assert ytr.shape == (60000,) and yte.shape == (10000,)
    assert np.bincount(ytr, minlength=10).tolist() == [6000] * 10
    assert np.bincount(yte, minlength=10).tolist() == [1000] * 10
    assert xtr.min() == 0 and xtr.max() == 255 and xte.min() == 0 and xte.max() == 255
    # first labels of the published files (train[0] and test[0] are ankle boots)
    assert ytr[:5].tolist() == [9, 0, 0, 3, 0]
    assert yte[:5].tolist() == [9, 2, 1, 1, 6]


@needs_debian
def test_full_fashion_mnist_normalized_and_flat(full):
    (xtr, ytr), (xte, yte) = load_fashion_mnist(flatten=True)
    assert xtr.shape == (60000, 784) and xte.shape == (10000, 784)
    assert xtr.dtype == np.float32 and xte.dtype == np.float32
    assert float(xtr.min()) == 0.0 and float(xtr.max()) == 1.0
    assert 0.0 <= float(xte.min()) and float(xte.max()) <= 1.0
    (xtr_u8, ytr_u8), _ = full
    np.testing.assert_array_equal(ytr, ytr_u8)
    np.testing.assert_allclose(xtr[:100], xtr_u8[:100].reshape(100, 784) / np.float32(255.0), rtol=1e-6)


# ------------------------------------------------------------------------------------ bundled subset

def test_small_shapes_and_counts():
    (xtr, ytr), (xte, yte) = load_fashion_mnist_small()
    assert xtr.shape == (6000, 1, 28, 28) and xte.shape == (1000, 1, 28, 28)
    assert xtr.dtype == np.float32 and xte.dtype == np.float32
    assert ytr.dtype == np.int32 and yte.dtype == np.int32
    assert ytr.shape == (6000,) and yte.shape == (1000,)
    assert np.bincount(ytr, minlength=10).tolist() == [600] * 10
    assert np.bincount(yte, minlength=10).tolist() == [100] * 10
    assert 0.0 <= float(xtr.min()) and float(xtr.max()) <= 1.0
    assert float(xtr.max()) == 1.0
    # classes are mixed, not sorted (original order of the full set)
    assert len(set(ytr[:50].tolist())) > 5

    (ftr, _), (fte, _) = load_fashion_mnist_small(normalize=False, flatten=True)
    assert ftr.shape == (6000, 784) and ftr.dtype == np.uint8 and fte.shape == (1000, 784)
    np.testing.assert_array_equal(ftr.reshape(6000, 1, 28, 28) / np.float32(255), xtr)


def test_small_file_matches_readme():
    npz = Path(data.__file__).parent / "datasets" / "fashion_mnist_small.npz"
    readme = (npz.parent / "README.md").read_text()
    blob = npz.read_bytes()
    assert len(blob) < 3_200_000
    m = re.search(r"sha256: `([0-9a-f]{64})`", readme)
    assert m and hashlib.sha256(blob).hexdigest() == m.group(1)
    assert f"Size: {len(blob)} bytes" in readme


def test_small_arrays_are_independent_copies():
    (a, _), _ = load_fashion_mnist_small(normalize=False)
    a[0] = 0
    (b, _), _ = load_fashion_mnist_small(normalize=False)
    assert b[0].any()


@needs_debian
def test_small_is_subset_of_full(full):
    (xtr, ytr), (xte, yte) = full
    with np.load(Path(data.__file__).parent / "datasets" / "fashion_mnist_small.npz") as z:
        itr, ite = z["train_index"].astype(np.int64), z["test_index"].astype(np.int64)
    assert len(np.unique(itr)) == 6000 and len(np.unique(ite)) == 1000
    assert (np.diff(itr) > 0).all() and (np.diff(ite) > 0).all()
    (str_, sytr), (ste, syte) = load_fashion_mnist_small(normalize=False)
    np.testing.assert_array_equal(str_, xtr[itr])
    np.testing.assert_array_equal(sytr, ytr[itr])
    np.testing.assert_array_equal(ste, xte[ite])
    np.testing.assert_array_equal(syte, yte[ite])


# ------------------------------------------------------------------------------------ raw IDX folders

@needs_debian
def test_raw_idx_dir_byte_identical(tmp_path, monkeypatch):
    monkeypatch.setenv("PYGGML_OPT_CACHE", str(tmp_path / "cache"))
    out = raw_idx_dir()
    assert out == tmp_path / "cache" / "fashion-mnist"
    for name in FASHION_MNIST_FILES.values():
        with gzip.open(DEBIAN / (name + ".gz"), "rb") as f:
            assert (out / name).read_bytes() == f.read(), name
    assert sorted(p.name for p in out.iterdir()) == sorted(FASHION_MNIST_FILES.values())

    # second call reuses the files (no rewrite)
    before = {n: (out / n).stat().st_mtime_ns for n in FASHION_MNIST_FILES.values()}
    inodes = {n: (out / n).stat().st_ino for n in FASHION_MNIST_FILES.values()}
    assert raw_idx_dir() == out
    assert before == {n: (out / n).stat().st_mtime_ns for n in FASHION_MNIST_FILES.values()}
    assert inodes == {n: (out / n).stat().st_ino for n in FASHION_MNIST_FILES.values()}

    # a damaged (short) file is replaced
    victim = out / FASHION_MNIST_FILES["test_labels"]
    victim.write_bytes(victim.read_bytes()[:100])
    raw_idx_dir()
    with gzip.open(DEBIAN / (victim.name + ".gz"), "rb") as f:
        assert victim.read_bytes() == f.read()

    # a folder of raw files is used as it is, and loads like the original
    assert raw_idx_dir(out, tmp_path / "unused") == out
    assert not (tmp_path / "unused").exists()
    (xtr, ytr), (xte, yte) = load_fashion_mnist(out, normalize=False)
    assert xtr.shape == (60000, 1, 28, 28) and yte.shape == (10000,)


def test_raw_idx_dir_small(tmp_path):
    out = raw_idx_dir(dest=tmp_path / "small", small=True)
    (xtr, ytr), (xte, yte) = load_fashion_mnist(out, normalize=False)
    (sxtr, sytr), (sxte, syte) = load_fashion_mnist_small(normalize=False)
    np.testing.assert_array_equal(xtr, sxtr)
    np.testing.assert_array_equal(ytr, sytr)
    np.testing.assert_array_equal(xte, sxte)
    np.testing.assert_array_equal(yte, syte)
    # uncompressed, header sizes as ggml's mnist example expects (16 bytes images, 8 bytes labels)
    img = out / "train-images-idx3-ubyte"
    assert img.read_bytes()[:4] == b"\x00\x00\x08\x03"
    assert img.stat().st_size == 16 + 6000 * 784
    assert (out / "t10k-labels-idx1-ubyte").stat().st_size == 8 + 1000
    mtime = img.stat().st_mtime_ns
    raw_idx_dir(dest=tmp_path / "small", small=True)
    assert img.stat().st_mtime_ns == mtime
