"""What the benchmarks print about the machine they ran on: the CPU's name and its measured f32 GEMM peak."""
from __future__ import annotations

import platform
import time

GEMM_N = 2048       # sgemm_peak's matrices: GEMM_N x GEMM_N, f32
GEMM_REPS = 5       # timed products per framework, alternated, after one warm-up each


def cpu_name() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo, else what the platform module knows)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


class GgmlOp:
    """One ggml op of two f32 matrices ``a`` and ``b`` (numpy order), ``build(ctx, ta, tb)`` such as
    ``lib.ggml_mul_mat``, on the CPU backend with ``n_threads``: built with the raw binding, computed
    once through a backend scheduler to allocate it; ``__call__`` computes it again. Shared by
    sgemm_peak and bench_ops.py."""

    def __init__(self, build, a, b, n_threads: int) -> None:
        from pyggml_opt._lib import lib
        from pyggml_opt.core import Backend, Buffer, Context, Scheduler, tensor_data

        self.backend = Backend("cpu", n_threads)
        self.ctx_in, self.ctx = Context(4), Context(8, graph_size=8)
        ta = lib.ggml_new_tensor_4d(self.ctx_in.ptr, lib.GGML_TYPE_F32, *tensor_data.ne_of(a.shape))
        tb = lib.ggml_new_tensor_4d(self.ctx_in.ptr, lib.GGML_TYPE_F32, *tensor_data.ne_of(b.shape))
        out = build(self.ctx.ptr, ta, tb)
        self.buf = Buffer(self.ctx_in, self.backend)
        tensor_data.set(ta, a)
        tensor_data.set(tb, b)
        self.graph = lib.ggml_new_graph_custom(self.ctx.ptr, 8, False)
        lib.ggml_build_forward_expand(self.graph, out)
        self.sched = Scheduler([self.backend])
        self.sched.compute(self.graph)           # allocates the graph: later calls only compute
        self.lib = lib

    def __call__(self) -> None:
        self.lib.ggml_backend_sched_graph_compute(self.sched.ptr, self.graph)

    def close(self) -> None:
        self.sched.close()
        self.buf.close()
        self.backend.close()


def sgemm_peak(n_threads: int, torch=None, n: int = GEMM_N, reps: int = GEMM_REPS) -> dict:
    """The machine's measured f32 GEMM speed with ``n_threads`` threads: ggml's MUL_MAT and, given the
    ``torch`` module, PyTorch's ``torch.mm`` (``torch.set_num_threads(n_threads)``, left set), both on
    n x n matrices, one warm-up each, then ``reps`` products of each alternated (same load on both).
    Returns GFLOP/s (2 n^3 / the best time) as {"ggml": ..., "torch": ... or None, "peak": the larger,
    "n": n, "reps": reps}: the "peak" the benchmarks' "% of peak" columns divide by."""
    import numpy as np

    from pyggml_opt._lib import lib

    rng = np.random.default_rng(0)
    gemm = GgmlOp(lib.ggml_mul_mat, rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32),
                  n_threads)

    def ggml() -> None:
        gemm.backend.wake()
        gemm()
        gemm.backend.rest()                      # no polling workers while PyTorch computes

    timed = {"ggml": ggml}
    if torch is not None:
        torch.set_num_threads(n_threads)
        gen = torch.Generator().manual_seed(0)
        a, b = torch.randn(n, n, generator=gen), torch.randn(n, n, generator=gen)
        timed["torch"] = lambda: torch.mm(a, b)
    best = {name: float("inf") for name in timed}
    try:
        for fn in timed.values():
            fn()
        for _ in range(reps):
            for name, fn in timed.items():
                t0 = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t0)
    finally:
        gemm.close()
    gflops = {name: 2 * n ** 3 / t / 1e9 for name, t in best.items()}
    return {"ggml": gflops["ggml"], "torch": gflops.get("torch"), "peak": max(gflops.values()), "n": n, "reps": reps}


def describe_peak(p: dict) -> str:
    """One line for sgemm_peak's result."""
    return (f"measured f32 GEMM peak {p['peak']:.0f} GFLOP/s (best of {p['reps']} products {p['n']}^3: ggml MUL_MAT "
            f"{p['ggml']:.0f}" + (f", PyTorch torch.mm {p['torch']:.0f}" if p["torch"] is not None else "") + ")")
