"""CPU kernels of the training hot path against numpy: OUT_PROD (weight gradients of mul_mat),
MUL_MAT, the convolution-network ops POOL_2D(_BACK), IM2COL(_BACK), REPEAT_BACK, the AdamW step, and
the element-wise and row ops (unary ops, SCALE, SUB, SUM_ROWS, REPEAT) that vendor/patches/0015 runs on
every thread, f32, for odd shapes; SIGMOID on ggml's vectorised exp (0017), small batched GEMMs as in
attention (0018), the row normalisations NORM, RMS_NORM and RMS_NORM_BACK (0019), and GELU with its
backward GELU_BACK (0022), SILU_BACK on the vectorised sigmoid (0047), the batch normalisation ops
(0025), copies of permuted views (0034), SOFT_MAX and DIAG_MASK (0035), and MEAN and REPEAT_BACK into
one row on every thread (0036).

vendor/patches replaces these kernels with blocked ones (0003: a packed GEMM with register tiles of
6 x 16 on AVX2, 252-row blocks, k in blocks of 256, for OUT_PROD and MUL_MAT; llamafile's sgemm for
what it leaves when GGML_LLAMAFILE is on), so the shapes here are non-multiples of every block size,
1-row and 1-column cases, k beyond one k-block, strided and transposed (non-contiguous) inputs,
broadcast batches, and 1 to 3 threads (the work split differs). They pass on the unpatched kernels as
well.

Tolerance: the result is a float32 sum of k products, in an order the kernel chooses (sequential,
blocked, pairwise). Any such order satisfies |fl(s) - s| <= gamma_k * sum|a_i b_i| with
gamma_k = k u / (1 - k u), u = 2**-24 (Higham, Accuracy and Stability of Numerical Algorithms, 3.1);
we allow k * 2**-23 (twice the first-order bound) times the float64 sum of |products|, plus a few
ulps for the rounding of the inputs' own sum, against a float64 reference of the same float32 inputs.
"""
from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest

from pyggml_opt._lib import ffi, lib
from pyggml_opt.core import tensor_data
from support import OpGraph

EPS32 = 2.0 ** -23


def _check(got: np.ndarray, ref: np.ndarray, absref: np.ndarray, k: int) -> None:
    tol = max(k, 1) * EPS32 * absref + 4 * EPS32 * np.abs(ref) + 1e-30
    err = np.abs(got.astype(np.float64) - ref)
    bad = err > tol
    assert not bad.any(), (f"{bad.sum()} of {bad.size} elements beyond tolerance; worst error "
                           f"{err.max():.3g}, its tolerance {tol.flat[np.argmax(err - tol)]:.3g}")


def _rng(*key):
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


# (M, N, K): dst is M x N (ggml ne0 = M), summed over K. M, N around the 6-row x 16-column register
# tile (1, 5, 7, 15, 17, 33), K around the 256 k-block (1, 255, 256, 257, 600).
OUT_PROD_SHAPES = [
    (1, 1, 1), (1, 7, 3), (7, 1, 3), (16, 6, 8), (17, 5, 9), (15, 7, 257), (33, 13, 256),
    (8, 1, 600), (1, 9, 255), (100, 37, 31), (784, 10, 50), (31, 500, 10), (40, 300, 20),
    (130, 45, 300),  # packed A read k by k (0021): two k blocks, a last row tile of 1 or 3 rows
    (70, 200, 530),  # packed A in chunks of 16 k (0031): a last chunk of 1 k, two row blocks of A
    (10, 24, 50),    # one column strip, few rows: split by rows between the threads (0033)
]


def _out_prod_ref(a: np.ndarray, b: np.ndarray):
    """a: numpy (K, M) (ggml [M, K]), b: (K, N); dst numpy (N, M) = b^T a, and the sum of |products|."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return b64.T @ a64, np.abs(b64).T @ np.abs(a64)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("m,n,k", OUT_PROD_SHAPES)
def test_out_prod_contiguous(m, n, k, n_threads):
    rng = _rng("op", m, n, k)
    a = rng.uniform(-1, 1, (k, m)).astype(np.float32)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    g = OpGraph(n_threads)
    out = lib.ggml_out_prod(g.ctx.ptr, g.leaf(a), g.leaf(b))
    got = g.compute(out)[0, 0]
    ref, absref = _out_prod_ref(a, b)
    _check(got, ref, absref, k)


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (17, 5, 9), (10, 500, 7), (33, 7, 300), (1, 23, 5)])
def test_out_prod_transposed_src1(m, n, k, n_threads):
    """src1 = transpose(grad): the backward pass of mul_mat for its src1 (strides nb10 > nb11)."""
    rng = _rng("opT", m, n, k)
    a = rng.uniform(-1, 1, (k, m)).astype(np.float32)
    grad = rng.uniform(-1, 1, (n, k)).astype(np.float32)  # ggml [K, N]
    g = OpGraph(n_threads)
    tb = lib.ggml_transpose(g.ctx.ptr, g.leaf(grad))     # ggml [N, K], not contiguous
    assert n == 1 or k == 1 or not lib.ggml_is_contiguous(tb)
    out = lib.ggml_out_prod(g.ctx.ptr, g.leaf(a), tb)
    got = g.compute(out)[0, 0]
    ref, absref = _out_prod_ref(a, grad.T)
    _check(got, ref, absref, k)


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("m,n,k", [(1, 1, 2), (17, 5, 9), (9, 13, 260)])
def test_out_prod_strided_views(m, n, k, n_threads):
    """src0 and src1 as views with padded rows (row strides larger than the row) and offsets."""
    rng = _rng("opV", m, n, k)
    big_a = rng.uniform(-1, 1, (k + 2, m + 3)).astype(np.float32)
    big_b = rng.uniform(-1, 1, (k + 1, n + 5)).astype(np.float32)
    g = OpGraph(n_threads)
    ta, tb = g.leaf(big_a), g.leaf(big_b)
    va = lib.ggml_view_2d(g.ctx.ptr, ta, m, k, ta.nb[1], 1 * ta.nb[1] + 2 * 4)   # rows 1.., cols 2..
    vb = lib.ggml_view_2d(g.ctx.ptr, tb, n, k, tb.nb[1], 3 * 4)                  # rows 0.., cols 3..
    out = lib.ggml_out_prod(g.ctx.ptr, va, vb)
    got = g.compute(out)[0, 0]
    ref, absref = _out_prod_ref(big_a[1:1 + k, 2:2 + m], big_b[0:k, 3:3 + n])
    _check(got, ref, absref, k)


# MUL_MAT: dst (ggml [M, N]) = a (ggml [K, M]) x b (ggml [K, N]) summed over K (the row length).


def _mul_mat_ref(a: np.ndarray, b: np.ndarray):
    """a: numpy (M, K) (ggml [K, M]), b: (N, K); dst numpy (N, M) = b a^T, and the sum of |products|."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return b64 @ a64.T, np.abs(b64) @ np.abs(a64).T

MUL_MAT_SHAPES = [
    (1, 1, 1), (1, 7, 8), (7, 1, 8), (17, 5, 9), (16, 16, 16), (33, 13, 784), (500, 10, 500),
    (10, 500, 500), (500, 500, 10), (13, 37, 257), (16, 6, 1), (17, 6, 9), (47, 100, 600),
    (100, 7, 257), (392, 8, 9), (40, 300, 20),
    (6, 130, 40), (10, 500, 784),  # the packed GEMM's narrowest products (0033): 6 and 10 columns,
    (10, 24, 50), (5, 200, 30),    # and the narrow ones it leaves to vec_dot / tinyBLAS
]


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("m,n,k", MUL_MAT_SHAPES)
def test_mul_mat(m, n, k, n_threads):
    rng = _rng("mm", m, n, k)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, k)).astype(np.float32)
    g = OpGraph(n_threads)
    out = lib.ggml_mul_mat(g.ctx.ptr, g.leaf(a), g.leaf(b))
    got = g.compute(out)[0, 0]                                # numpy (n, m)
    _check(got, *_mul_mat_ref(a, b), k)


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("m,n,k", [(17, 5, 9), (10, 33, 16), (40, 33, 20)])
def test_mul_mat_noncontiguous_src1(m, n, k, n_threads):
    """src1 a view with padded rows (not contiguous): the sgemm path must fall back or handle it."""
    rng = _rng("mmV", m, n, k)
    a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    big_b = rng.uniform(-1, 1, (n, k + 4)).astype(np.float32)
    g = OpGraph(n_threads)
    tb = g.leaf(big_b)
    vb = lib.ggml_view_2d(g.ctx.ptr, tb, k, n, tb.nb[1], 4)
    out = lib.ggml_mul_mat(g.ctx.ptr, g.leaf(a), vb)
    got = g.compute(out)[0, 0]
    _check(got, *_mul_mat_ref(a, big_b[:, 1:1 + k]), k)



@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("m,n,k", [(17, 5, 9), (40, 33, 20)])
def test_mul_mat_strided_src0(m, n, k, n_threads):
    """src0 a view with padded rows and an offset (row stride larger than the row)."""
    rng = _rng("mmA", m, n, k)
    big_a = rng.uniform(-1, 1, (m + 1, k + 3)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, k)).astype(np.float32)
    g = OpGraph(n_threads)
    ta = g.leaf(big_a)
    va = lib.ggml_view_2d(g.ctx.ptr, ta, k, m, ta.nb[1], 1 * ta.nb[1] + 2 * 4)   # rows 1.., cols 2..
    out = lib.ggml_mul_mat(g.ctx.ptr, va, g.leaf(b))
    got = g.compute(out)[0, 0]
    _check(got, *_mul_mat_ref(big_a[1:1 + m, 2:2 + k], b), k)


# Batched GEMMs: src0 broadcast over dims 2 and 3 of src1 (ne2 = 3 * ne02, ne3 = 2 * ne03).
# op: (ggml function, numpy shapes of one (i3, i2) slice of src0 and src1, reference, (M, N, K), rng key)
BATCHED_GEMMS = {
    "out_prod": (lib.ggml_out_prod, lambda m, n, k: ((k, m), (k, n)),
                 _out_prod_ref, (19, 7, 11), "opB"),
    "mul_mat": (lib.ggml_mul_mat, lambda m, n, k: ((m, k), (n, k)),
                _mul_mat_ref, (21, 13, 11), "mmB"),
}


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("op", sorted(BATCHED_GEMMS))
def test_gemm_batched_broadcast(op, n_threads):
    build, slice_shapes, ref_of, (m, n, k), key = BATCHED_GEMMS[op]
    rng = _rng(key, m, n, k)
    sa, sb = slice_shapes(m, n, k)
    a = rng.uniform(-1, 1, (1, 2, *sa)).astype(np.float32)
    b = rng.uniform(-1, 1, (2, 6, *sb)).astype(np.float32)
    g = OpGraph(n_threads)
    got = g.compute(build(g.ctx.ptr, g.leaf(a), g.leaf(b)))  # numpy (2, 6, n, m)
    assert got.shape == (2, 6, n, m)
    for i3 in range(2):
        for i2 in range(6):
            _check(got[i3, i2], *ref_of(a[0, i2 // 3], b[i3, i2]), k)



# Small batched GEMMs, as in attention (vendor/patches/0018): the packed GEMM gives each thread whole
# slices while there is one for every thread, splits the n_slices % n_threads left over, runs a strip
# narrower than its 16 / 64-column tile with fewer vectors, reads A in place when the columns fit in
# one strip, and takes MUL_MATs from 16 columns (dst ne0) on. (m, n, k): dst ne0 = m, ne1 = n, summed
# over k; the batch (ne3, ne2) with src0 broadcast over ne2 when it is even.
SMALL_BATCHED = [
    ((32, 64, 64), (8, 4)),      # attention's weights x V: d_head 32, T 64
    ((64, 64, 32), (3, 4)),      # its scores
    ((64, 32, 64), (1, 7)),
    ((17, 5, 9), (1, 3)),
    ((40, 33, 70), (2, 5)),
    ((16, 7, 300), (3, 2)),      # two k blocks, A in place
    ((48, 13, 5), (1, 8)),
    ((33, 64, 64), (2, 2)),
    ((100, 9, 20), (1, 5)),      # two strips on AVX-512: A packed
]


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("op", sorted(BATCHED_GEMMS))
@pytest.mark.parametrize("mnk,batch", SMALL_BATCHED)
def test_gemm_small_batched(mnk, batch, op, n_threads):
    build, slice_shapes, ref_of, _, key = BATCHED_GEMMS[op]
    (m, n, k), (ne3, ne2) = mnk, batch
    r2 = 2 if ne2 % 2 == 0 else 1
    rng = _rng(key, "small", mnk, batch)
    sa, sb = slice_shapes(m, n, k)
    a = rng.uniform(-1, 1, (ne3, ne2 // r2, *sa)).astype(np.float32)
    b = rng.uniform(-1, 1, (ne3, ne2, *sb)).astype(np.float32)
    g = OpGraph(n_threads)
    got = g.compute(build(g.ctx.ptr, g.leaf(a), g.leaf(b)))
    assert got.shape == (ne3, ne2, n, m)
    for i3 in range(ne3):
        for i2 in range(ne2):
            _check(got[i3, i2], *ref_of(a[i3, i2 // r2], b[i3, i2]), k)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("op", sorted(BATCHED_GEMMS))
def test_gemm_small_batched_views(op, n_threads):
    """The attention layouts: MUL_MAT of a head-permuted src1 (not contiguous: tinyBLAS cannot take
    it), OUT_PROD of a transposed src1 (the backward pass), 4 heads x 3 samples."""
    m, n, k, heads, batch = 32, 64, 48, 4, 3
    rng = _rng("smallV", op)
    g = OpGraph(n_threads)
    if op == "mul_mat":
        a = rng.uniform(-1, 1, (batch, heads, m, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (batch, n, heads, k)).astype(np.float32)      # ggml [k, heads, n, batch]
        out = lib.ggml_mul_mat(g.ctx.ptr, g.leaf(a), lib.ggml_permute(g.ctx.ptr, g.leaf(b), 0, 2, 1, 3))
        b_eff = b.transpose(0, 2, 1, 3)                                       # (batch, heads, n, k)
    else:
        a = rng.uniform(-1, 1, (batch, heads, k, m)).astype(np.float32)
        b = rng.uniform(-1, 1, (batch, heads, n, k)).astype(np.float32)      # ggml [k, n, ...]
        out = lib.ggml_out_prod(g.ctx.ptr, g.leaf(a), lib.ggml_transpose(g.ctx.ptr, g.leaf(b)))
        b_eff = b.swapaxes(-1, -2)                                            # (batch, heads, k, n)
    got = g.compute(out)
    assert got.shape == (batch, heads, n, m)
    ref_of = BATCHED_GEMMS[op][2]
    for i3 in range(batch):
        for i2 in range(heads):
            _check(got[i3, i2], *ref_of(a[i3, i2], b_eff[i3, i2]), k)

# --- the convolution-network ops that vendor/patches/0004 spreads over threads -----------------------
# Each is a copy, a max or a sum of at most a few dozen terms: copies and maxima must match exactly,
# sums within _check's bound for their number of terms. Shapes: one plane (fewer planes than threads),
# odd sizes, windows that do not tile the input, stride 2 and padding.

IMG_SHAPES = [(1, 1, 5, 7), (2, 3, 9, 8), (5, 8, 14, 14)]          # numpy (N, C, H, W)
POOL_CASES = [(2, 2, 0), (3, 3, 0), (3, 2, 1), (3, 1, 0)]            # (kernel, stride, padding)
CONV_CASES = [(3, 1, 1, 1), (3, 1, 0, 1), (3, 2, 1, 1), (2, 3, 0, 1), (3, 1, 2, 2), (2, 2, 1, 3)]  # (kernel, stride, padding, dilation)


def _pool_ref(x: np.ndarray, kind: str, k: int, s: int, p: int):
    """ggml's pool_2d: windows start at -p; cells outside the input are skipped (max) or count as 0
    (avg, divided by k*k). Returns the output and, for max, the argmax flat index into (H, W) per cell."""
    n, c, h, w = x.shape
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    out = np.zeros((n, c, oh, ow), np.float64)
    arg = np.full((n, c, oh, ow), -1, np.int64)
    for i in range(oh):
        for j in range(ow):
            ys = [y for y in range(i * s - p, i * s - p + k) if 0 <= y < h]
            xs = [v for v in range(j * s - p, j * s - p + k) if 0 <= v < w]
            win = x[:, :, ys][:, :, :, xs].astype(np.float64).reshape(n, c, -1)
            if kind == "max":
                a = win.argmax(-1)
                out[:, :, i, j] = win.max(-1)
                arg[:, :, i, j] = np.array(ys)[a // len(xs)] * w + np.array(xs)[a % len(xs)]
            else:
                out[:, :, i, j] = win.sum(-1) / (k * k)
    return out, arg


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("k,s,p", POOL_CASES)
@pytest.mark.parametrize("shape", IMG_SHAPES)
def test_pool_2d_and_back(shape, k, s, p, kind, n_threads):
    rng = _rng("pool", shape, k, s, p, kind)
    x = rng.uniform(-1, 1, shape).astype(np.float32)   # continuous values: no ties for max
    ref, arg = _pool_ref(x, kind, k, s, p)
    grad = rng.uniform(-1, 1, ref.shape).astype(np.float32)
    op = lib.GGML_OP_POOL_MAX if kind == "max" else lib.GGML_OP_POOL_AVG
    g = OpGraph(n_threads)
    tx, tg = g.leaf(x), g.leaf(grad)
    fwd = lib.ggml_pool_2d(g.ctx.ptr, tx, op, k, k, s, s, float(p), float(p))
    back = lib.ggml_pool_2d_back(g.ctx.ptr, tg, tx, op, k, k, s, s, float(p), float(p))
    got_fwd, got_back = g.compute(fwd, back)
    if kind == "max":
        np.testing.assert_array_equal(got_fwd, ref.astype(np.float32))
    else:
        _check(got_fwd, ref, np.abs(x).max() * np.ones_like(ref), k * k)
    n, c, h, w = shape
    ref_back = np.zeros((n, c, h * w), np.float64)
    if kind == "max":
        for (i_n, i_c, i, j), a in np.ndenumerate(arg):
            ref_back[i_n, i_c, a] += grad[i_n, i_c, i, j]
    else:
        for i in range(ref.shape[2]):
            for j in range(ref.shape[3]):
                for y in range(i * s - p, i * s - p + k):
                    for v in range(j * s - p, j * s - p + k):
                        if 0 <= y < h and 0 <= v < w:
                            ref_back[:, :, y * w + v] += grad[:, :, i, j] / (k * k)
    ref_back = ref_back.reshape(shape)
    _check(got_back, ref_back, np.ones_like(ref_back) * np.abs(grad).max(), k * k)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_pool_2d_max_special_values(n_threads):
    """Max pooling with NaN, infinities and signed zeros (the 2x2 windows run vectorised, 0027): bit for
    bit ggml's scalar rule, res = max(value, res) over the window in row order from -FLT_MAX, where
    max(a, b) = b if a < b else a (a NaN value replaces res; a NaN res is replaced by the next value)."""
    x = _rng("pool specials").uniform(-1, 1, (2, 3, 8, 40)).astype(np.float32)
    x.flat[::5] = np.nan
    x.flat[1::7] = -np.inf
    x.flat[2::9] = np.inf
    x.flat[3::4] = -0.0
    x.flat[4::6] = 0.0
    g = OpGraph(n_threads)
    got = g.compute(lib.ggml_pool_2d(g.ctx.ptr, g.leaf(x), lib.GGML_OP_POOL_MAX, 2, 2, 2, 2, 0, 0)).reshape(2, 3, 4, 20)
    res = np.full((2, 3, 4, 20), -np.finfo(np.float32).max, np.float32)
    for ky in range(2):
        for kx in range(2):
            v = x[:, :, ky::2, kx::2]
            res = np.where(v < res, res, v)
    np.testing.assert_array_equal(got.view(np.uint32), res.view(np.uint32))


def _pool_max_back_rule(x: np.ndarray, grad: np.ndarray, k: int, s: int, p: int) -> np.ndarray:
    """ggml's scalar POOL_2D_BACK for max, float32 step by step: per output cell (in row order) the
    window's value that is not <= the maximum so far (from -FLT_MAX, window order; a NaN is taken)
    last gets grad added to it (into zeros); a window of values <= -FLT_MAX passes nothing."""
    n, c, h, w = x.shape
    out = np.zeros(x.shape, np.float32)
    lowest = -np.finfo(np.float32).max
    for i_n in range(n):
        for i_c in range(c):
            for i in range(grad.shape[2]):
                for j in range(grad.shape[3]):
                    best, where = lowest, None
                    for y in range(i * s - p, i * s - p + k):
                        for v in range(j * s - p, j * s - p + k):
                            if 0 <= y < h and 0 <= v < w and not x[i_n, i_c, y, v] <= best:
                                best, where = x[i_n, i_c, y, v], (y, v)
                    if where is not None:
                        out[i_n, i_c, where[0], where[1]] += grad[i_n, i_c, i, j]
    return out


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("k,s,p", [(2, 2, 0), (2, 2, 1), (3, 2, 1)])
@pytest.mark.parametrize("w", [40, 45])
def test_pool_2d_back_max_special_values(w, k, s, p, n_threads):
    """Max pooling's backward pass with NaN, infinities, signed zeros and ties in the input and signed
    zeros and infinities in the gradient (2x2 windows with stride 2 run sixteen cells at a time on
    AVX-512, eight on AVX2, 0028; here 20-23 cells per row: full and masked vectors): bit for bit the
    scalar rule."""
    rng = _rng("pool back specials", w, k, s, p)
    x = rng.uniform(-1, 1, (2, 3, 9, w)).astype(np.float32)
    x.flat[::5] = np.nan
    x.flat[1::7] = -np.inf
    x.flat[2::9] = np.inf
    x.flat[3::4] = -0.0
    x.flat[4::6] = 0.0
    x[0, 0, :4, :8] = -np.inf                                    # whole windows without a maximum
    x[1, 2, :, :6] = 0.5                                         # ties
    oh, ow = (9 + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    grad = rng.uniform(-1, 1, (2, 3, oh, ow)).astype(np.float32)
    grad.flat[::3] = -0.0
    grad.flat[1::11] = np.inf
    g = OpGraph(n_threads)
    got = g.compute(lib.ggml_pool_2d_back(g.ctx.ptr, g.leaf(grad), g.leaf(x), lib.GGML_OP_POOL_MAX,
                                          k, k, s, s, float(p), float(p))).reshape(x.shape)
    want = _pool_max_back_rule(x, grad, k, s, p)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def _im2col_ref(x: np.ndarray, k: int, s: int, p: int, d: int = 1) -> np.ndarray:
    """numpy (N, OH, OW, C*k*k), zeros where the window leaves the input (ggml's im2col layout)."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    span = d * (k - 1) + 1
    oh, ow = (h + 2 * p - span) // s + 1, (w + 2 * p - span) // s + 1
    cols = np.empty((n, oh, ow, c, k, k), x.dtype)
    for ky in range(k):
        for kx in range(k):
            cols[:, :, :, :, ky, kx] = xp[:, :, ky * d:ky * d + s * oh:s, kx * d:kx * d + s * ow:s].transpose(0, 2, 3, 1)
    return cols.reshape(n, oh, ow, c * k * k)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("k,s,p,d", CONV_CASES)
@pytest.mark.parametrize("shape", IMG_SHAPES)
def test_im2col_and_back(shape, k, s, p, d, n_threads):
    n, c, h, w = shape
    rng = _rng("im2col", shape, k, s, p, d)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    ref = _im2col_ref(x, k, s, p, d)
    grad = rng.uniform(-1, 1, ref.shape).astype(np.float32)
    g = OpGraph(n_threads)
    tx, tg = g.leaf(x), g.leaf(grad)
    kernel = g.leaf(np.zeros((4, c, k, k), np.float32))      # only its shape matters
    fwd = lib.ggml_im2col(g.ctx.ptr, kernel, tx, s, s, p, p, d, d, True, lib.GGML_TYPE_F32)
    ne = ffi.new("int64_t[4]", tensor_data.ne_of(shape))
    back = lib.ggml_im2col_back(g.ctx.ptr, tg, kernel, ne, s, s, p, p, d, d, True)
    got_fwd, got_back = g.compute(fwd, back)
    np.testing.assert_array_equal(got_fwd, ref)
    # im2col_back is the adjoint of im2col: every column entry adds back to the pixel it came from
    idx = _im2col_ref(np.arange(x.size, dtype=np.float64).reshape(shape) + 1, k, s, p, d).astype(np.int64) - 1
    ref_back = np.zeros(x.size, np.float64)
    valid = idx >= 0
    np.add.at(ref_back, idx[valid], grad[valid].astype(np.float64))
    absref = np.zeros(x.size, np.float64)
    np.add.at(absref, idx[valid], np.abs(grad[valid]).astype(np.float64))
    _check(got_back, ref_back.reshape(shape), absref.reshape(shape), k * k)


# --- CONV_2D in cache-sized im2col blocks and its backward passes (vendor/patches/0023) --------------
# Each output is a sum of terms: c_in*kh*kw (forward), c_out*kh*kw per pixel (input gradient), every
# output pixel of the batch (kernel gradient), checked with _check's bound against float64 sums of the
# same float32 inputs. Shapes: "same" convolutions (the shifted-run im2col), strides, dilations,
# padding wider than the kernel's reach, one image (fewer than the threads), and blocks of fewer rows
# than the image (1 and 3 rows per block: taps x width beyond the 16384-float block). The "same"
# convolutions (3x3, 5x5, dilated 3x3, 1x1) take the shifted-run im2col, 16 cells at a time on AVX-512
# builds (0030), over rows narrower and wider than a vector and blocks that end inside one.
CONV2D_SHAPES = [((1, 1, 5, 7), 2), ((2, 3, 9, 8), 4), ((5, 8, 14, 14), 16), ((2, 64, 6, 32), 3),
                 ((3, 16, 20, 30), 5)]          # (numpy x (N, C, H, W), c_out)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("k,s,p,d", CONV_CASES + [(3, 1, 3, 1), (1, 1, 0, 1), (5, 1, 2, 1)])
@pytest.mark.parametrize("shape,c_out", CONV2D_SHAPES)
def test_conv_2d_direct_and_backward(shape, c_out, k, s, p, d, n_threads):
    n, c, h, w = shape
    rng = _rng("conv2d", shape, c_out, k, s, p, d)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    kern = rng.uniform(-1, 1, (c_out, c, k, k)).astype(np.float32)
    cols = _im2col_ref(x.astype(np.float64), k, s, p, d)               # (N, OH, OW, C*k*k)
    oh, ow = cols.shape[1:3]
    dy = rng.uniform(-1, 1, (n, c_out, oh, ow)).astype(np.float32)
    g = OpGraph(n_threads)
    tx, tk, tdy = g.leaf(x), g.leaf(kern), g.leaf(dy)
    fwd = lib.ggml_conv_2d_direct(g.ctx.ptr, tk, tx, s, s, p, p, d, d)
    back_x = lib.ggml_conv_2d_direct_back_input(g.ctx.ptr, tk, tdy, ffi.new("int64_t[4]", tensor_data.ne_of(shape)),
                                                s, s, p, p, d, d)
    back_k = lib.ggml_conv_2d_direct_back_kernel(g.ctx.ptr, tx, tdy, ffi.new("int64_t[4]", tensor_data.ne_of(kern.shape)),
                                                 s, s, p, p, d, d)
    got_y, got_dx, got_dk = g.compute(fwd, back_x, back_k)

    w64, dy64 = kern.reshape(c_out, -1).astype(np.float64), dy.astype(np.float64).transpose(0, 2, 3, 1)
    ref_y = (cols @ w64.T).transpose(0, 3, 1, 2)
    _check(got_y.reshape(ref_y.shape), ref_y, (np.abs(cols) @ np.abs(w64).T).transpose(0, 3, 1, 2), c * k * k)
    flat_cols, flat_dy = cols.reshape(-1, c * k * k), dy64.reshape(-1, c_out)
    ref_dk = (flat_dy.T @ flat_cols).reshape(kern.shape)
    abs_dk = (np.abs(flat_dy).T @ np.abs(flat_cols)).reshape(kern.shape)
    _check(got_dk.reshape(kern.shape), ref_dk, abs_dk, n * oh * ow)
    # the input gradient is the adjoint of im2col applied to dy W: every column entry adds back to
    # the pixel it came from (as in test_im2col_and_back)
    dcols, abs_dcols = dy64 @ w64, np.abs(dy64) @ np.abs(w64)
    idx = _im2col_ref(np.arange(x.size, dtype=np.float64).reshape(shape) + 1, k, s, p, d).astype(np.int64) - 1
    valid = idx >= 0
    ref_dx, abs_dx = np.zeros(x.size), np.zeros(x.size)
    np.add.at(ref_dx, idx[valid], dcols[valid])
    np.add.at(abs_dx, idx[valid], abs_dcols[valid])
    _check(got_dx.reshape(shape), ref_dx.reshape(shape), abs_dx.reshape(shape), c_out * k * k)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("a_shape,b_shape", [
    ((5, 8, 14, 14), (1, 8, 1, 1)),      # a conv bias gradient: one value per channel (ne0 == 1)
    ((3, 4, 5, 6), (1, 1, 1, 1)),        # one value from every plane (0024: a plane summed at once)
    ((2, 3, 9, 7), (2, 3, 1, 1)),        # one value per plane, no plane repeated
    ((3, 2, 7, 1), (1, 2, 7, 1)),        # ne0 == 1 with rows to sum over the batch
    ((2, 3, 4, 10), (1, 3, 1, 10)),      # rows (ne0 > 1) summed over dims 1 and 3
    ((4, 6), (1, 6)),                    # a dense bias gradient
    ((2, 5), (2, 5)),                    # nothing to sum
    # into one row (0036: each thread sums its own source rows, then its own columns of the partials)
    ((64, 130), (1, 130)),               # columns split 80 + 50 (2 threads), 48 + 48 + 34 (3)
    ((3, 5, 33), (1, 1, 33)),            # source rows over two dims
    ((2, 3, 4, 10), (1, 1, 1, 10)),      # over three dims
    ((2, 40), (1, 40)),                  # fewer source rows than threads
    ((5, 80), (1, 40)),                  # each source row also repeats the row twice along dim 0
])
def test_repeat_back(a_shape, b_shape, n_threads):
    rng = _rng("repeat_back", a_shape, b_shape)
    a = rng.uniform(-1, 1, a_shape).astype(np.float32)
    g = OpGraph(n_threads)
    ta, tb = g.leaf(a), g.leaf(np.zeros(b_shape, np.float32))
    got = g.compute(lib.ggml_repeat_back(g.ctx.ptr, ta, tb))
    # a holds a_shape[i] // b_shape[i] copies of b one after the other along axis i: each axis split
    # into (copies, b's size), the copies summed
    tiles = a.astype(np.float64).reshape([n for x, y in zip(a_shape, b_shape) for n in (x // y, y)])
    copies = tuple(range(0, 2 * len(a_shape), 2))
    ref, absref = tiles.sum(axis=copies), np.abs(tiles).sum(axis=copies)
    terms = int(np.prod(a_shape) // np.prod(b_shape))
    _check(got.reshape(ref.shape), ref, absref, terms)


# --- the AdamW step (vendor/patches/0006: 8 parameters at a time with AVX, the rest scalar) ----------
# Shapes: fewer than 8 values, exactly 8, 8 + a remainder, and rows split between threads.

@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("shape", [(1,), (7,), (8,), (37,), (5, 19)])
@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_opt_step_adamw(shape, wd, n_threads):
    rng = _rng("adamw", shape, wd)
    w, grad = (rng.uniform(-1, 1, shape).astype(np.float32) for _ in range(2))
    m = rng.uniform(-0.1, 0.1, shape).astype(np.float32)         # moments of earlier steps
    v = rng.uniform(0, 0.01, shape).astype(np.float32)
    alpha, beta1, beta2, eps, it = 1e-3, 0.9, 0.999, 1e-8, 3     # ggml-opt's hyperparameters at step 3
    pars = np.array([alpha, beta1, beta2, eps, wd, 1 / (1 - beta1 ** it), 1 / (1 - beta2 ** it)], np.float32)
    g = OpGraph(n_threads)
    tw, tg, tm, tv, tp = (g.leaf(x) for x in (w, grad, m, v, pars))
    lib.ggml_set_param(tw)
    g.compute(lib.ggml_opt_step_adamw(g.ctx.ptr, tw, tg, tm, tv, tp))
    got_w, got_m, got_v = (tensor_data.get(t, ndim=len(shape)) for t in (tw, tm, tv))

    p = pars.astype(np.float64)
    w64, g64, m64, v64 = (x.astype(np.float64) for x in (w, grad, m, v))
    ref_m = m64 * p[1] + g64 * (1 - p[1])
    ref_v = v64 * p[2] + g64 * g64 * (1 - p[2])
    step = p[0] * (ref_m * p[5]) / (np.sqrt(ref_v * p[6]) + p[3])
    keep = np.float64(np.float32(1 - p[0] * p[4]))                # ggml rounds 1 - alpha*wd to float
    ref_w = w64 * keep - step
    # m, v: two products and a sum (a few ulps of the terms); w: about ten roundings along the step
    _check(got_m, ref_m, np.abs(m64 * p[1]) + np.abs(g64 * (1 - p[1])), 2)
    _check(got_v, ref_v, np.abs(v64 * p[2]) + np.abs(g64 * g64 * (1 - p[2])), 2)
    _check(got_w, ref_w, np.abs(w64 * keep) + np.abs(step), 8)


# --- broadcast element-wise ops (vendor/patches/0008: one src1 value per row runs as one loop) -------
# One rounding per element: the results must equal numpy's float32 ones exactly.

@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("a_shape,b_shape", [
    ((5, 8, 14, 14), (1, 8, 1, 1)),      # a per-channel convolution bias (ne10 == 1)
    ((3, 5, 13, 7), (3, 5, 1, 1)),       # one value per plane, 3 threads split planes mid-way
    ((3, 4, 7), (3, 4, 1)),              # one value per row
    ((2, 6, 1), (1, 6, 1)),              # rows of one element
    ((4, 9), (1, 9)),                    # a dense bias (a whole row broadcast)
    ((2, 3, 5), (2, 3, 5)),              # no broadcast
])
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_broadcast(a_shape, b_shape, op, n_threads):
    rng = _rng("binary", a_shape, b_shape, op)
    a = rng.uniform(-1, 1, a_shape).astype(np.float32)
    b = rng.uniform(0.5, 2, b_shape).astype(np.float32) * rng.choice([-1, 1], b_shape).astype(np.float32)
    g = OpGraph(n_threads)
    got = g.compute(getattr(lib, f"ggml_{op}")(g.ctx.ptr, g.leaf(a), g.leaf(b)))
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[op](a, b)
    np.testing.assert_array_equal(got.reshape(ref.shape), ref)



# Contiguous tensors run as whole runs of rows (vendor/patches/0024); views whose planes are not
# contiguous keep the per-row loop: both must give numpy's float32 results.
@pytest.mark.parametrize("n_threads", [1, 3])
@pytest.mark.parametrize("op", ["relu", "step", "neg", "add", "mul"])
def test_elementwise_on_permuted_views(op, n_threads):
    rng = _rng("views", op)
    a = rng.uniform(-1, 1, (3, 4, 5, 6)).astype(np.float32)
    b = rng.uniform(-1, 1, (3, 5, 4, 6)).astype(np.float32)
    g = OpGraph(n_threads)
    ta = lib.ggml_permute(g.ctx.ptr, g.leaf(a), 0, 2, 1, 3)        # numpy a.transpose(0, 2, 1, 3): rows stay contiguous
    if op in ("add", "mul"):
        got = g.compute(getattr(lib, f"ggml_{op}")(g.ctx.ptr, ta, g.leaf(b)))
        ref = {"add": np.add, "mul": np.multiply}[op](a.transpose(0, 2, 1, 3), b)
    else:
        got = g.compute(getattr(lib, f"ggml_{op}")(g.ctx.ptr, ta))
        at = a.transpose(0, 2, 1, 3)
        ref = {"relu": np.maximum(at, np.float32(0)), "step": (at > 0).astype(np.float32), "neg": -at}[op]
    np.testing.assert_array_equal(got.reshape(ref.shape), ref)

# --- element-wise and row ops on every thread (vendor/patches/0015) ---------------------------------
# ggml_get_n_tasks gave these one task; their kernels split rows by thread (unary_op, binary_op, SCALE)
# or now do (SUM_ROWS, REPEAT). Shapes: fewer rows than threads, a row count that does not divide by
# the threads, 4-d. Each result must equal the 1-thread result bit for bit (one value per element or
# row, whichever thread computes it) and numpy's: exactly where the op is one IEEE operation or
# rounding-free, else within a few ulps of a float64 reference (libm's expf, tanhf, ... vs numpy's).

# (3, 41, 113): 13,899 elements, more than one 4096-element block per thread (vendor/patches/0024)
ELEMENTWISE_SHAPES = [(1,), (3, 7), (2, 5, 33), (3, 1, 4, 5), (3, 41, 113)]


def _round_half_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _f32(fn):
    """A float32 computation, for ops ggml computes with the same float32 operations (exact)."""
    return lambda x: fn(x.astype(np.float32)).astype(np.float32)


def _sigmoid64(x):
    return 1.0 / (1.0 + np.exp(-x))


# name -> (ggml call on (ctx, t), reference on float64 x (None: exact float32 ref), exact float32
# reference or None, input range, rtol in ulps, atol)
UNARY_CASES = {
    "abs": (lambda c, t: lib.ggml_abs(c, t), None, _f32(np.abs), (-3, 3)),
    "sgn": (lambda c, t: lib.ggml_sgn(c, t), None, _f32(np.sign), (-3, 3)),
    "neg": (lambda c, t: lib.ggml_neg(c, t), None, _f32(np.negative), (-3, 3)),
    "step": (lambda c, t: lib.ggml_step(c, t), None, _f32(lambda x: (x > 0).astype(np.float32)), (-3, 3)),
    "relu": (lambda c, t: lib.ggml_relu(c, t), None, _f32(lambda x: np.maximum(x, np.float32(0))), (-3, 3)),
    "floor": (lambda c, t: lib.ggml_floor(c, t), None, _f32(np.floor), (-4, 4)),
    "ceil": (lambda c, t: lib.ggml_ceil(c, t), None, _f32(np.ceil), (-4, 4)),
    "round": (lambda c, t: lib.ggml_round(c, t), None, _f32(_round_half_away), (-4, 4)),
    "trunc": (lambda c, t: lib.ggml_trunc(c, t), None, _f32(np.trunc), (-4, 4)),
    "sqr": (lambda c, t: lib.ggml_sqr(c, t), None, _f32(lambda x: x * x), (-3, 3)),
    "sqrt": (lambda c, t: lib.ggml_sqrt(c, t), None, _f32(np.sqrt), (0, 9)),
    "hardsigmoid": (lambda c, t: lib.ggml_hardsigmoid(c, t), None,
                    _f32(lambda x: np.minimum(np.float32(1), np.maximum(np.float32(0), (x + np.float32(3)) / np.float32(6)))),
                    (-5, 5)),
    "hardswish": (lambda c, t: lib.ggml_hardswish(c, t), None,
                  _f32(lambda x: x * np.minimum(np.float32(1), np.maximum(np.float32(0), (x + np.float32(3)) / np.float32(6)))),
                  (-5, 5)),
    "scale": (lambda c, t: lib.ggml_scale(c, t, 0.37), None, _f32(lambda x: x * np.float32(0.37)), (-3, 3)),
    "scale_bias": (lambda c, t: lib.ggml_scale_bias(c, t, 0.37, -1.5), lambda x: 0.37 * x - 1.5, None, (-3, 3)),
    "exp": (lambda c, t: lib.ggml_exp(c, t), np.exp, None, (-80, 80)),
    "expm1": (lambda c, t: lib.ggml_expm1(c, t), np.expm1, None, (-10, 10)),  # expf(x) - 1: absolute error
    "elu": (lambda c, t: lib.ggml_elu(c, t), lambda x: np.where(x > 0, x, np.expm1(x)), None, (-6, 6)),
    "sigmoid": (lambda c, t: lib.ggml_sigmoid(c, t), _sigmoid64, None, (-100, 100)),
    "softplus": (lambda c, t: lib.ggml_softplus(c, t), lambda x: np.logaddexp(0, x), None, (-30, 30)),
    "tanh": (lambda c, t: lib.ggml_tanh(c, t), np.tanh, None, (-12, 12)),
    "sin": (lambda c, t: lib.ggml_sin(c, t), np.sin, None, (-10, 10)),
    "cos": (lambda c, t: lib.ggml_cos(c, t), np.cos, None, (-10, 10)),
    "log": (lambda c, t: lib.ggml_log(c, t), np.log, None, (1e-3, 50)),
}


def _unary_input(name, shape):
    lo, hi = UNARY_CASES[name][3]
    x = _rng("unary", name, shape).uniform(lo, hi, shape).astype(np.float32)
    if name in ("floor", "ceil", "round", "trunc"):
        x.flat[::3] = np.round(x.flat[::3] * 2) / 2  # exact halves and integers
    return x


@pytest.mark.parametrize("n_threads", [2, 3])
@pytest.mark.parametrize("shape", ELEMENTWISE_SHAPES)
@pytest.mark.parametrize("name", sorted(UNARY_CASES))
def test_unary_ops_threads(name, shape, n_threads):
    call, ref64, ref32, _ = UNARY_CASES[name]
    x = _unary_input(name, shape)
    got = []
    for nt in (1, n_threads):
        g = OpGraph(nt)
        got.append(g.compute(call(g.ctx.ptr, g.leaf(x))).reshape(shape))
    np.testing.assert_array_equal(got[1], got[0])       # the split between threads changes nothing
    if ref32 is not None:
        np.testing.assert_array_equal(got[1], ref32(x))
        return
    x64 = x.astype(np.float64)
    ref = ref64(x64)
    # a few ulps of the result; expm1 = expf(x) - 1 and softplus = log(1 + expf(x)) round terms of
    # size exp(x) and 1 + exp(x) first; sin / cos / scale + bias: ulps of their arguments' terms
    size = np.abs(ref)
    if name == "expm1":
        size = size + np.exp(x64)
    elif name == "softplus":
        size = size + 1.0
    elif name in ("sin", "cos"):
        size = size + 1e-6
    elif name == "scale_bias":
        size = np.abs(0.37 * x64) + 1.5
    assert np.isfinite(got[1]).all()
    err = np.abs(got[1].astype(np.float64) - ref)
    tol = 4 * EPS32 * size + 1e-38
    assert (err <= tol).all(), f"worst error {err.max():.3g} at x = {x.flat[np.argmax(err - tol)]!r}"


@pytest.mark.parametrize("n_threads", [2, 3])
@pytest.mark.parametrize("a_shape,b_shape", [((3, 7), (3, 7)), ((2, 5, 33), (1, 5, 33)), ((3, 1, 4, 5), (1, 1, 4, 1))])
def test_sub_threads(a_shape, b_shape, n_threads):
    rng = _rng("sub", a_shape, b_shape)
    a, b = rng.uniform(-1, 1, a_shape).astype(np.float32), rng.uniform(-1, 1, b_shape).astype(np.float32)
    g = OpGraph(n_threads)
    got = g.compute(lib.ggml_sub(g.ctx.ptr, g.leaf(a), g.leaf(b)))
    np.testing.assert_array_equal(got.reshape(a_shape), a - b)


SUM_ROWS_SHAPES = [(1,), (1, 1000), (3, 1), (5, 7), (2, 3, 33), (2, 3, 4, 257)]


# SUM_ROWS (0015: rows split between the threads) and MEAN (0036: the same split; it ran on thread 0):
# every thread count gives the same bits (each row is summed by one thread in the same order), within
# the sum's bound of float64 numpy (one rounding more for the mean's division: the last entry).
ROW_REDUCTIONS = {"sum_rows": (lib.ggml_sum_rows, np.sum, 0), "mean": (lib.ggml_mean, np.mean, 1)}


@pytest.mark.parametrize("n_threads", [2, 3])
@pytest.mark.parametrize("shape", SUM_ROWS_SHAPES)
@pytest.mark.parametrize("op", sorted(ROW_REDUCTIONS))
def test_row_reductions_threads(op, shape, n_threads):
    build, ref, division = ROW_REDUCTIONS[op]
    x = _rng(op, shape).uniform(-1, 1, shape).astype(np.float32)
    got = []
    for nt in (1, n_threads):
        g = OpGraph(nt)
        got.append(g.compute(build(g.ctx.ptr, g.leaf(x))).reshape(shape[:-1] + (1,)))
    np.testing.assert_array_equal(got[1], got[0])
    x64 = x.astype(np.float64)
    _check(got[1], ref(x64, axis=-1, keepdims=True), ref(np.abs(x64), axis=-1, keepdims=True), shape[-1] + division)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("op", sorted(ROW_REDUCTIONS))
def test_row_reductions_of_padded_rows(op, n_threads):
    """Rows further apart than their length (a view of the first 7 columns of 2 x 5 x 10)."""
    build, ref, division = ROW_REDUCTIONS[op]
    x = _rng(op, "view").uniform(-1, 1, (2, 5, 10)).astype(np.float32)
    g = OpGraph(n_threads)
    t = g.leaf(x)
    v = lib.ggml_view_3d(g.ctx.ptr, t, 7, 5, 2, t.nb[1], t.nb[2], 0)
    got = g.compute(build(g.ctx.ptr, v)).reshape(2, 5, 1)
    x64 = x[..., :7].astype(np.float64)
    _check(got, ref(x64, axis=-1, keepdims=True), ref(np.abs(x64), axis=-1, keepdims=True), 7 + division)


# GET_ROWS (fit's gather of each batch from the training set, embeddings): each thread copies its own
# range of rows; exact copies of numpy's fancy indexing with repeated ids, batched tables (ggml's dim 2:
# each slice gathers from its own table) and f16 tables (converted to f32).
@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("slices,rows,width,n_ids", [(1, 40, 7, 9), (1, 300, 131, 301), (3, 50, 257, 45)])
def test_get_rows(slices, rows, width, n_ids, dtype, n_threads):
    table = _rng("get_rows", rows, width).uniform(-100, 100, (slices, rows, width)).astype(dtype)
    ids = _rng("get_rows ids", n_ids).integers(0, rows, (slices, n_ids)).astype(np.int32)
    g = OpGraph(n_threads)
    got = g.compute(lib.ggml_get_rows(g.ctx.ptr, g.leaf(table, dtype), g.leaf(ids, np.int32)))
    want = np.stack([table[k][ids[k]] for k in range(slices)]).astype(np.float32)
    np.testing.assert_array_equal(got.reshape(want.shape), want)


# --- row normalisations (vendor/patches/0019: SIMD sums; 0020: NORM's backward is composed in ggml.c) ---
# Rows around the 8 / 16-float vectors and the dot product's 4-vector unroll, with an offset that makes
# NORM's centring cancel. Tolerance: the row sums have the first-order bound n u |terms| (module
# docstring), which reaches the output through the mean and the scale: 8 n u times the output's
# magnitude plus the offset's share in units of the row's standard deviation.
NORM_ROWS = [1, 7, 8, 15, 16, 17, 33, 64, 127, 1025]


def _norm_input(name, n, offset):
    return (_rng(name, n, offset).uniform(-1, 1, (3, 5, n)) + offset).astype(np.float32)


def _norm_tol(x64, ref):
    n = x64.shape[-1]
    spread = np.sqrt((x64 ** 2).mean(axis=-1, keepdims=True)) / (x64.std(axis=-1, keepdims=True) + 1e-3)
    return 8 * n * 2.0 ** -24 * (np.abs(ref) + 1) * spread


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("n", NORM_ROWS)
@pytest.mark.parametrize("offset", [0.0, 3.0])
def test_row_norms(n, offset, n_threads):
    x = _norm_input("norms", n, offset)
    dz = _rng("norms dz", n).uniform(-1, 1, x.shape).astype(np.float32)
    eps = 1e-5
    g = OpGraph(n_threads)
    tx, tdz = g.leaf(x), g.leaf(dz)
    got_norm, got_rms, got_back = g.compute(lib.ggml_norm(g.ctx.ptr, tx, eps), lib.ggml_rms_norm(g.ctx.ptr, tx, eps),
                                            lib.ggml_rms_norm_back(g.ctx.ptr, tdz, tx, eps))
    x64, dz64 = x.astype(np.float64), dz.astype(np.float64)
    centred = x64 - x64.mean(axis=-1, keepdims=True)
    norm = centred / np.sqrt((centred ** 2).mean(axis=-1, keepdims=True) + eps)
    ms = (x64 ** 2).mean(axis=-1, keepdims=True) + eps
    rms = x64 / np.sqrt(ms)
    back = (dz64 - x64 * (x64 * dz64).mean(axis=-1, keepdims=True) / ms) / np.sqrt(ms)
    for got, ref, spread in ((got_norm, norm, True), (got_rms, rms, False), (got_back, back, False)):
        tol = _norm_tol(x64, ref) if spread else 8 * n * 2.0 ** -24 * (np.abs(ref) + 1)
        err = np.abs(got.reshape(ref.shape) - ref)
        assert (err <= tol).all(), f"worst error {err.max():.3g} at tolerance {tol.flat[np.argmax(err - tol)]:.3g}"


# --- batch normalisation (vendor/patches/0025) -------------------------------------------------------
# numpy shapes (N, C, rows) and (N2, N, C, rows): ggml [rows, C, N(, N2)], channels along ggml's dim 1.
# Rows of 1 (BatchNorm1d of feature vectors), around the 16 float lanes (7, 9, 17), an image (784). With
# an offset of 100 the channel means are 100x the spread. The kernels sum in float lanes of at most 64
# terms (chunks of 1024 values, 16 lanes) added up in double, so a sum is within 64 EPS32 of the sum of
# its terms' magnitudes; the statistics' errors carry into the normalised values and the gradients
# through the mean (64 EPS32 of the channel's mean |x - mean| + |mean|) and the variance.
BN_SHAPES = [(7, 3, 1), (5, 4, 9), (3, 2, 17), (2, 3, 7), (4, 5, 784), (2, 3, 2, 10)]


def _batch_norm_ops(x, dy, w, b, eps, n_threads):
    """The statistics, the normalised x, the backward sums, the gradient of x through the statistics and
    for given statistics, computed with ``n_threads``."""
    g = OpGraph(n_threads)
    tx, tdy, tw, tb = g.leaf(x), g.leaf(dy), g.leaf(w), g.leaf(b)
    ctx = g.ctx.ptr
    stats = lib.ggml_batch_norm_stats(ctx, tx)
    sums = lib.ggml_batch_norm_back_sums(ctx, tdy, tx, stats, eps)
    return g.compute(stats, lib.ggml_batch_norm(ctx, tx, stats, tw, tb, eps), sums,
                     lib.ggml_batch_norm_back(ctx, tdy, tx, stats, sums, tw, eps),
                     lib.ggml_batch_norm_back(ctx, tdy, tx, stats, ffi.NULL, tw, eps))


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
@pytest.mark.parametrize("offset", [0.0, 100.0])
def test_batch_norm_ops(shape, offset, n_threads):
    rng = _rng("batch norm", shape, offset)
    c, eps = shape[-2], 1e-5
    x = (rng.normal(size=shape) + offset).astype(np.float32)
    dy = rng.uniform(-1, 1, shape).astype(np.float32)
    w, b = rng.uniform(0.5, 2, c).astype(np.float32), rng.normal(size=c).astype(np.float32)
    got = _batch_norm_ops(x, dy, w, b, eps, n_threads)
    got_stats, got_y, got_sums, got_dx, got_dx_given = got

    # channels last, values of a channel along axis 0
    x64 = np.moveaxis(x.astype(np.float64), -2, -1).reshape(-1, c)
    dy64 = np.moveaxis(dy.astype(np.float64), -2, -1).reshape(-1, c)
    m, var = x64.mean(axis=0), x64.var(axis=0)
    inv_std, k1 = 1 / np.sqrt(var + eps), w / np.sqrt(var + eps)
    xhat = (x64 - m) * inv_std
    spread = np.abs(x64 - m).mean(axis=0) + np.abs(m)     # the scale of the mean's error
    around = (np.abs(x64) + np.abs(m) + spread) * inv_std  # of |xhat|'s error, in units of 64 EPS32
    _check(got_stats.reshape(2, c), np.stack([m, var]), np.stack([spread, var]), 64)

    def as_x(a):  # channels-last values back to x's layout
        return np.moveaxis(a.reshape(*shape[:-2], shape[-1], c), -1, -2)

    _check(got_y.reshape(shape), as_x(xhat * w + b), as_x(k1 / inv_std * around + np.abs(b)), 64)
    sum_dyxhat, sum_dy = (dy64 * xhat).sum(axis=0), dy64.sum(axis=0)
    _check(got_sums.reshape(2, c), np.stack([sum_dyxhat, sum_dy]),
           np.stack([(np.abs(dy64) * around).sum(axis=0), np.abs(dy64).sum(axis=0)]), 64)
    count = x64.shape[0]
    ref_dx = k1 * (dy64 - sum_dy / count - xhat * sum_dyxhat / count)
    abs_dx = k1 * (np.abs(dy64) + np.abs(dy64).mean(axis=0) + around * (np.abs(dy64) * around).mean(axis=0))
    _check(got_dx.reshape(shape), as_x(ref_dx), as_x(abs_dx), 64)
    _check(got_dx_given.reshape(shape), as_x(k1 * dy64), as_x(k1 * np.abs(dy64)), 64)
    if n_threads > 1:  # whole channels per thread, element-wise passes by rows: no sum depends on the split
        for one, want in zip(got, _batch_norm_ops(x, dy, w, b, eps, 1)):
            np.testing.assert_array_equal(one, want)


REPEAT_CASES = [
    ((1,), (5,)),                        # one value everywhere
    ((1, 1), (7, 9)),
    ((2, 7, 1), (2, 7, 33)),             # one value per row (the gradient of a row sum, LayerNorm's mean)
    ((1, 5), (3, 5)),                    # a row repeated
    ((1, 3, 1, 5), (4, 3, 2, 10)),       # repeats in dims 0, 1 and 3 (ggml order), one kept
    ((3, 1, 2), (6, 5, 4)),
    ((2, 3), (2, 3)),                    # nothing repeated
]


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("src_shape,dst_shape", REPEAT_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_repeat_threads(src_shape, dst_shape, dtype, n_threads):
    rng = _rng("repeat", src_shape, dst_shape)
    if dtype is np.int32:
        # bit patterns that are NaNs and denormals as float32: copies must keep every bit
        x = rng.integers(-2 ** 31, 2 ** 31, src_shape, dtype=np.int64).astype(np.int32)
        x.flat[0] = 0x7F800001                                   # a signalling NaN as float32
    else:
        x = rng.uniform(-1, 1, src_shape).astype(dtype)
    g = OpGraph(n_threads)
    out = lib.ggml_repeat(g.ctx.ptr, g.leaf(x, dtype), g.leaf(np.zeros(dst_shape, dtype), dtype))
    got = g.compute(out).reshape(dst_shape)
    reps = tuple(d // s for s, d in zip(src_shape, dst_shape))
    np.testing.assert_array_equal(got, np.tile(x, reps))


# --- SIGMOID f32 on ggml's vectorised exp (vendor/patches/0017) --------------------------------------
# 1 / (1 + ggml_v_expf(-x)) in 16 / 8 / 4-float vectors, the rest of a row with libm's expf. Tolerance:
# ggml_v_expf is within 1.95 ulps (relative 1.95 * 2**-23), the sum 1 + e and the division each round
# once (2**-24 relative), and d/de 1/(1 + e) shrinks e's relative error by e/(1 + e) <= 1: at most
# ~3 * 2**-23 relative (measured over every float in [-110, 110]: 2.3 * 2**-23, 3.9 ulps), plus
# 2**-126 absolute where the result is subnormal (x < -87.3: the scalar formula loses those bits too).

SIGMOID_ROW_LENGTHS = [1, 3, 4, 5, 8, 15, 16, 17, 31, 33, 64, 67]


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("row", SIGMOID_ROW_LENGTHS)
def test_sigmoid_vectorised(row, n_threads):
    grid = np.linspace(-100.0, 100.0, 60_001).astype(np.float32)
    x = grid[: grid.size // row * row].reshape(-1, row)
    g = OpGraph(n_threads)
    got = g.compute(lib.ggml_sigmoid(g.ctx.ptr, g.leaf(x))).reshape(x.shape).astype(np.float64)
    ref = _sigmoid64(x.astype(np.float64))
    tol = 3 * EPS32 * ref + 2.0 ** -126
    err = np.abs(got - ref)
    assert (err <= tol).all(), (f"worst error {err.max():.3g} (tolerance {tol.flat[np.argmax(err - tol)]:.3g}) "
                                f"at x = {x.flat[np.argmax(err - tol)]!r}")
    assert ((got >= 0) & (got <= 1)).all()


@pytest.mark.parametrize("n_threads", [1, 2])
def test_sigmoid_limits(n_threads):
    """Saturation, infinities, zeros and NaN at every position of a 19-float row (vector lanes and the
    scalar tail): exactly 1 once exp(-x) < 2**-25, exactly 0 once exp(-x) overflows float32 (x < -88.72,
    as with libm's expf; the true value there is subnormal or below), 1/2 at +-0, NaN for NaN."""
    expect = [(100, 1), (-100, 0), (1e4, 1), (-1e4, 0), (np.inf, 1), (-np.inf, 0), (0.0, 0.5), (-0.0, 0.5),
              (1e-30, 0.5), (-1e-30, 0.5), (17.5, 1), (30, 1), (88.8, 1), (-88.8, 0), (-90, 0), (np.nan, np.nan)]
    special = np.array([v for v, _ in expect] + [3, -3, 87], np.float32)
    x = np.stack([np.roll(special, i) for i in range(special.size)])
    g = OpGraph(n_threads)
    got = g.compute(lib.ggml_sigmoid(g.ctx.ptr, g.leaf(x))).reshape(x.shape)
    for v, want in expect:
        at = np.isnan(x) if np.isnan(v) else x == np.float32(v)     # +0 and -0 both
        np.testing.assert_array_equal(got[at], np.full(at.sum(), want, np.float32), err_msg=f"sigmoid({v})")
    for v in (3, -3, 87):
        at = x == np.float32(v)
        np.testing.assert_allclose(got[at], _sigmoid64(np.float64(np.float32(v))), rtol=3 * EPS32, atol=2.0 ** -126)


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("row", [1, 15, 16, 17, 255, 256, 257, 600])
def test_silu_back_vectorised(row, n_threads):
    """SILU_BACK (0047): dy s (1 + x (1 - s)), s = sigmoid(x) on ggml's vectorised exp a block of 256
    floats at a time, rows around the vector widths and the block, against float64. Tolerance: s carries
    at most 3.9 ulps (test_sigmoid_vectorised); 1 - s in float32 (as ggml's scalar formula computes it)
    loses digits as s nears 1, an absolute error of a few ulps of 1 that |x| multiplies; 16 ulps of
    |dy| s (1 + |x|) bound both and the products' roundings."""
    grid = np.linspace(-30.0, 30.0, 6_001).astype(np.float32)
    x = grid[: grid.size // row * row].reshape(-1, row)
    dy = np.random.default_rng(row).uniform(-2, 2, x.shape).astype(np.float32)
    g = OpGraph(n_threads)
    got = g.compute(lib.ggml_silu_back(g.ctx.ptr, g.leaf(dy), g.leaf(x))).reshape(x.shape).astype(np.float64)
    x64 = x.astype(np.float64)
    s = _sigmoid64(x64)
    ref = dy * s * (1 + x64 * (1 - s))
    tol = 16 * EPS32 * np.abs(dy) * s * (1 + np.abs(x64)) + 2.0 ** -126
    err = np.abs(got - ref)
    assert (err <= tol).all(), (f"worst error {err.max():.3g} (tolerance {tol.flat[np.argmax(err - tol)]:.3g}) "
                                f"at x = {x.flat[np.argmax(err - tol)]!r}")


# --- GELU and its backward on ggml_v_expf (vendor/patches/0022) --------------------------------------
# f32 GELU (tanh approximation) as x sigmoid(z), z = x (k + k a x^2), and GELU_BACK: dy * gelu'(x).
# Tolerance: z carries a few ulps of rounding (x^2, the product, the float32 constants), which the
# output inherits times its sensitivity to z; on top of that 8 ulps of the terms' magnitude (exp, the
# division, the products). The sensitivity is measured on the float64 formula itself, by moving z 4 ulps.
# Where exp(-z) overflows (z < -88.72, x < -10.04) both are 0 in float32, while the true values are below
# |x| e^z <= 20 * 3e-39 (gelu) and |x| z' e^z <= 20 * 87.2 * 3e-39 (its derivative): absolute 1e-36 / 1e-34.

_GELU_K64 = float(np.float32(2 * np.sqrt(2 / np.pi)))
_GELU_KA64 = float(np.float32(2 * np.sqrt(2 / np.pi) * 0.044715))


def _gelu64(x, shift=0.0):
    z = x * (_GELU_K64 + _GELU_KA64 * x * x) * (1 + shift)
    return x / (1 + np.exp(-z))


def _gelu_grad64(x, shift=0.0):
    z = x * (_GELU_K64 + _GELU_KA64 * x * x) * (1 + shift)
    s = 1 / (1 + np.exp(-z))
    terms = s * (1 + np.abs(x * (1 - s) * (_GELU_K64 + 3 * _GELU_KA64 * x * x)))
    return s * (1 + x * (1 - s) * (_GELU_K64 + 3 * _GELU_KA64 * x * x)), terms


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("row", SIGMOID_ROW_LENGTHS)
def test_gelu_and_backward_vectorised(row, n_threads):
    grid = np.linspace(-25.0, 25.0, 40_001).astype(np.float32)
    x = grid[: grid.size // row * row].reshape(-1, row)
    dy = _rng("gelu dy", row).uniform(-2, 2, x.shape).astype(np.float32)
    g = OpGraph(n_threads)
    tx, tdy = g.leaf(x), g.leaf(dy)
    got, got_back = g.compute(lib.ggml_gelu(g.ctx.ptr, tx), lib.ggml_gelu_back(g.ctx.ptr, tdy, tx))
    with np.errstate(over="ignore"):
        x64, dy64 = x.astype(np.float64), dy.astype(np.float64)
        ref = _gelu64(x64)
        tol = 8 * EPS32 * np.abs(ref) + np.abs(_gelu64(x64, 4 * EPS32) - ref) + 1e-36
        grad, terms = _gelu_grad64(x64)
        ref_back = dy64 * grad
        tol_back = np.abs(dy64) * (8 * EPS32 * terms + np.abs(_gelu_grad64(x64, 4 * EPS32)[0] - grad) + 1e-34)
    for name, out, want, t in (("gelu", got, ref, tol), ("gelu_back", got_back, ref_back, tol_back)):
        err = np.abs(out.reshape(x.shape).astype(np.float64) - want)
        assert (err <= t).all(), (f"{name}: worst error {err.max():.3g} (tolerance {t.flat[np.argmax(err - t)]:.3g}) "
                                  f"at x = {x.flat[np.argmax(err - t)]!r}")


@pytest.mark.parametrize("n_threads", [1, 2])
def test_gelu_limits(n_threads):
    """The tails, infinities, zeros and NaN at every position of a row (vector lanes and the scalar
    tail): gelu is -0 below -20 and x above ~10 (exactly, as sigmoid saturates), its derivative exactly
    0 / 1 there; gelu(0) = 0 with derivative 1/2; NaN stays NaN."""
    expect = {100.0: (100.0, 1.0), -100.0: (0.0, 0.0), 1e4: (1e4, 1.0), -1e4: (0.0, 0.0), 1e30: (1e30, 1.0),
              -1e30: (0.0, 0.0), np.inf: (np.inf, 1.0), -np.inf: (0.0, 0.0), 0.0: (0.0, 0.5), 30.0: (30.0, 1.0),
              -30.0: (0.0, 0.0), -20.5: (0.0, 0.0)}
    special = np.array(list(expect) + [np.nan, 1.0, -1.0, 2.0, -0.5, 7.0, -7.0], np.float32)
    x = np.stack([np.roll(special, i) for i in range(special.size)])
    g = OpGraph(n_threads)
    tx, tdy = g.leaf(x), g.leaf(np.ones_like(x))
    got, got_back = (a.reshape(x.shape) for a in g.compute(lib.ggml_gelu(g.ctx.ptr, tx), lib.ggml_gelu_back(g.ctx.ptr, tdy, tx)))
    for v, (want, want_back) in expect.items():
        at = x == np.float32(v)
        np.testing.assert_array_equal(got[at], np.float32(want), err_msg=f"gelu({v})")
        np.testing.assert_array_equal(got_back[at], np.float32(want_back), err_msg=f"gelu_back({v})")
    assert np.isnan(got[np.isnan(x)]).all() and np.isnan(got_back[np.isnan(x)]).all()


# CONT of permuted views (vendor patch 0034: rows copied in one contiguous range per thread, transposed
# views in 16 x 16 tiles): every permutation of 4-d tensors whose sizes are not multiples of the tile,
# with 1-sized dims, in the 4-byte and 2-byte types, must be an exact copy of numpy's transpose.
@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16])
@pytest.mark.parametrize("shape", [(3, 5, 17, 33), (2, 1, 40, 7), (1, 2, 16, 31)])
def test_cont_of_permuted_views(shape, dtype, n_threads):
    x = _rng("cont", shape).uniform(-1000, 1000, shape).astype(dtype)
    g = OpGraph(n_threads)
    t = g.leaf(x, dtype)
    perms = list(itertools.permutations(range(4)))
    outs = [lib.ggml_cont(g.ctx.ptr, lib.ggml_permute(g.ctx.ptr, t, *p)) for p in perms]
    for p, got in zip(perms, g.compute(*outs)):
        # ggml_permute puts ggml dim i (numpy axis 3 - i) at position p[i]
        src_dim = {pos: i for i, pos in enumerate(p)}
        np.testing.assert_array_equal(got, np.transpose(x, [3 - src_dim[3 - j] for j in range(4)]), err_msg=f"{p}")


def _check_softmax(got: np.ndarray, z: np.ndarray) -> None:
    """``got`` against softmax over the last axis of the float64 scores ``z``: each z - max is rounded to
    float32 before exp (relative error |z - max| 2**-24 in the result), exp and the normalisation round
    in float32 (ggml's vectorised expf is within a few ulps): 16 ulps more, and 1e-37 absolute below
    float32's normal range."""
    d = z - z.max(axis=-1, keepdims=True)
    ref = np.exp(d) / np.exp(d).sum(axis=-1, keepdims=True)
    tol = ref * (np.abs(np.where(np.isfinite(d), d, 0.0)) * EPS32 / 2 + 16 * EPS32) + 1e-37
    err = np.abs(got - ref)
    assert (err <= tol).all(), f"worst error {err.max():.3g} (tolerance {tol.flat[np.argmax(err - tol)]:.3g})"


# SOFT_MAX and DIAG_MASK_INF / _ZERO (vendor patch 0035: rows in one contiguous range per thread, the
# row maximum in vector lanes): rows shorter and longer than a vector, the largest value in the vector
# part or in the scalar tail (a wrong maximum overflows exp at these magnitudes), odd numbers of rows and
# matrices (tolerance: _check_softmax).
@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("shape", [(3, 5, 7, 1), (2, 3, 5, 16), (1, 3, 7, 17), (2, 2, 9, 64), (1, 1, 3, 100)])
def test_soft_max_and_diag_mask(shape, n_threads):
    rng = _rng("softmax", shape)
    x = rng.uniform(-50, 50, shape).astype(np.float32)
    x[..., 0, -1] = 150.0   # the maximum in the scalar tail (exp(150 - 50) overflows float32)
    x[..., -1, 0] = 160.0   # the maximum in the first vector
    mask = rng.uniform(-5, 5, shape[2:]).astype(np.float32)
    g = OpGraph(n_threads)
    tx, tm = g.leaf(x), g.leaf(mask)
    ctx = g.ctx.ptr
    outs = [lib.ggml_soft_max(ctx, tx), lib.ggml_soft_max_ext(ctx, tx, tm, 0.25, 0.0),
            lib.ggml_diag_mask_inf(ctx, tx, 0), lib.ggml_diag_mask_zero(ctx, tx, 2),
            lib.ggml_soft_max(ctx, lib.ggml_diag_mask_inf(ctx, tx, 1))]
    plain, ext, inf0, zero2, causal = g.compute(*outs)
    rows, cols = np.indices(shape[2:])
    ref_inf0 = np.where(cols > rows, -np.inf, x)
    np.testing.assert_array_equal(inf0, ref_inf0)
    np.testing.assert_array_equal(zero2, np.where(cols > rows + 2, 0.0, x))
    x64 = x.astype(np.float64)
    for got, z in ((plain, x64), (ext, 0.25 * x64 + mask), (causal, np.where(cols > rows + 1, -np.inf, x64))):
        _check_softmax(got, z)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
@pytest.mark.parametrize("inplace", [False, True])
def test_diag_mask_of_a_view_with_strided_matrices(inplace, n_threads):
    """DIAG_MASK of a view whose matrices are not at ne2 * nb2 steps: swapping dims 2 and 3 of a tensor
    with one matrix per dim-3 index gives ne2 == 1, which ggml still calls contiguous (a helper
    session's review of 0035 found that rows addressed as k * nb2 read past the tensor)."""
    x = _rng("diag-view", inplace).uniform(-1, 1, (1, 3, 4, 5)).astype(np.float32)  # ggml ne [5, 4, 3, 1]
    g = OpGraph(n_threads)
    t = g.leaf(x)
    view = lib.ggml_permute(g.ctx.ptr, t, 0, 1, 3, 2)                                # ne [5, 4, 1, 3]
    mask = lib.ggml_diag_mask_inf_inplace if inplace else lib.ggml_diag_mask_inf
    got = g.compute(mask(g.ctx.ptr, view, 1))
    rows, cols = np.indices((4, 5))
    np.testing.assert_array_equal(got, np.where(cols > rows + 1, -np.inf, x.transpose(1, 0, 2, 3)))
