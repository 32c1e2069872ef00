"""What the benchmarks print about the machine they ran on: the CPU's name and its measured f32 GEMM peak;
and how they measure a process's resident memory (compare_torch.py's fc / cnn and gpt_compare.py's
workers: RSS after gc.collect() + malloc_trim(0) as the baseline, the high-water mark VmHWM reset just
before the measured work, and the size of a ggml backend scheduler's compute buffers)."""
from __future__ import annotations

import ctypes
import gc
import platform
import resource
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


def _status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_mb() -> float:
    """This process's resident memory now (VmRSS), as it is."""
    kb = _status_kb("VmRSS")
    return kb / 1024 if kb is not None else float("nan")


def rss_parts_mb() -> dict[str, float]:
    """VmRSS now and its parts, MB: "anon" (RssAnon: heap, numpy and ggml buffers, thread stacks) and
    "file" (RssFile: pages of mapped files, the libraries' code and data touched so far); NaN if unknown."""
    want = {"VmRSS": "rss", "RssAnon": "anon", "RssFile": "file"}
    out = dict.fromkeys(want.values(), float("nan"))
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key = line.split(":", 1)[0]
                if key in want:
                    out[want[key]] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return out


def trimmed_rss_mb() -> float:
    """RSS after gc.collect() and malloc_trim(0)."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
    return rss_mb()


def reset_peak() -> bool:
    """Reset this process's RSS high-water mark (VmHWM, which getrusage's ru_maxrss reads) to the
    current RSS: writing 5 to /proc/self/clear_refs (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_mb() -> float:
    """This process's RSS high-water mark (VmHWM; since reset_peak if that succeeded)."""
    kb = _status_kb("VmHWM")
    return kb / 1024 if kb is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def ru_maxrss_mb() -> float:
    """getrusage's ru_maxrss (not reset by reset_peak; a child's includes its parent's peak before exec)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def sched_buffer_mb(scheduler) -> float | None:
    """The compute buffers of a pyggml_opt ``Scheduler`` (ggml_backend_sched_get_buffer_size over its
    backends), in MB; None if this version of pyggml_opt hides them."""
    try:
        from pyggml_opt._lib import lib
        return sum(lib.ggml_backend_sched_get_buffer_size(scheduler.ptr, b.ptr) for b in scheduler.backends) / 2 ** 20
    except Exception:  # noqa: BLE001 - informational only
        return None


def fit_buffer_mb(trainer) -> float | None:
    """The training graph's compute buffer: sched_buffer_mb of fit's scheduler, reached through the fit
    loop's TrainingSession (a Callback's ``trainer``); None if this version of pyggml_opt hides it."""
    try:
        return sched_buffer_mb(trainer.train.scheduler)
    except Exception:  # noqa: BLE001 - informational only
        return None


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

    timed = {"ggml": gemm}
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


def ratio_ceiling(ours_gflops: float, peer_gflops: float, peak: float) -> str:
    """The largest "peer time / pyggml_opt time" a run can show while the peer computes at
    ``peer_gflops`` (same work on both sides): pyggml_opt at 100 % of the measured ``peak``. A ratio
    target above it is out of reach in that run, whatever pyggml_opt does. A peak below either
    framework's speed was measured while the shared machine was slower: no ceiling then."""
    if max(ours_gflops, peer_gflops) > peak:
        return (f"no ceiling of the ratio in this run: the peak measured at its start ({peak:.0f} GFLOP/s) is below "
                f"{max(ours_gflops, peer_gflops):.0f} GFLOP/s measured after it (the machine's speed moved)")
    return (f"ceiling of the ratio in this run: {peak / peer_gflops:.2f} (pyggml_opt at 100 % of the measured peak, "
            f"PyTorch at its {100 * peer_gflops / peak:.1f} %)")


def describe_peak(p: dict) -> str:
    """One line for sgemm_peak's result."""
    return (f"measured f32 GEMM peak {p['peak']:.0f} GFLOP/s (best of {p['reps']} products {p['n']}^3: ggml MUL_MAT "
            f"{p['ggml']:.0f}" + (f", PyTorch torch.mm {p['torch']:.0f}" if p["torch"] is not None else "") + ")")
