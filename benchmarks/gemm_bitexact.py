"""One sha256 over the packed f32 GEMM's MUL_MAT and OUT_PROD results of the pyggml_opt on the path
(issue 31): run it under two builds (say with and without a GEMM patch, or two CPU variants' k blocks)
and compare the hashes; a patch that keeps every element's FMA chain gives the same one. Shapes:
around the register tile, the strip, the k block (K up to 1000), at 1-3 threads (the split differs).

    PYTHONPATH=<package dir of build A> python benchmarks/gemm_bitexact.py
    PYTHONPATH=<package dir of build B> python benchmarks/gemm_bitexact.py
"""
from __future__ import annotations

import hashlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from support import OpGraph  # noqa: E402

from pyggml_opt._lib import lib  # noqa: E402

# (M, N, K): MUL_MAT of a (M rows of K) by b (N rows of K); OUT_PROD of a (K x M) and b (K x N)
SHAPES = [(64, 64, 64), (67, 130, 257), (300, 129, 1000), (5, 70, 513), (128, 256, 129), (64, 2048, 300),
          (500, 500, 784)]


def main() -> None:
    rng = np.random.default_rng(1)
    h = hashlib.sha256()
    for m, n, k in SHAPES:
        for n_threads in (1, 2, 3):
            for op in ("mul_mat", "out_prod"):
                g = OpGraph(n_threads)
                if op == "mul_mat":
                    a = g.leaf(rng.standard_normal((m, k), np.float32))
                    b = g.leaf(rng.standard_normal((n, k), np.float32))
                    out = g.compute(lib.ggml_mul_mat(g.ctx.ptr, a, b))
                else:
                    a = g.leaf(rng.standard_normal((k, m), np.float32))
                    b = g.leaf(rng.standard_normal((k, n), np.float32))
                    out = g.compute(lib.ggml_out_prod(g.ctx.ptr, a, b))
                h.update(np.ascontiguousarray(out).tobytes())
    print(h.hexdigest())


if __name__ == "__main__":
    main()
