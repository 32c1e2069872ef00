"""Where a training step of compare_torch.py's mnist-cnn, cnn-bn or mnist-fc, or of
compare_llama_torch.py's llama, goes, op by op.

fit runs --warmup steps, --plain steps timed as they are, then --steps steps with an eval callback on
the training graph's scheduler (``ggml_backend_sched_set_eval_callback`` through the raw binding; the
scheduler is fit's ``TrainingSession.scheduler``, reached from a Callback's ``trainer``): every node
that computes something is then computed as a graph of its own, and the time from its "ask" to its
"done" is its time (plus a one-node graph's start and end, which the "instrumented" step time shows:
compare it with the plain one). Prints each node (phase: forward up to ggml-opt's loss node, backward
after it; op; time per step; shape; sources' shapes; name) and the time per op and phase.

    python benchmarks/step_profile.py                         # mnist-cnn, physical batch 500, 2 threads
    python benchmarks/step_profile.py --model cnn-bn --steps 10
    python benchmarks/step_profile.py --model llama --plain 3 --steps 2   # 10.2M parameters, batch 16 x 256
    python benchmarks/step_profile.py --model lora --file /tmp/pgo-qwen2-q8_0.gguf --warmup 1 --plain 1 --steps 1

``--memory`` adds where the step's compute memory goes: walking the instrumented step's nodes in the
order they run, each result lives from its node to its last reader (views count as what they view;
inputs, parameters, gradients and optimizer state live in buffers of their own and are not counted),
so the sum of live results peaks at some node; printed: that peak against the scheduler's actual
compute buffer (ggml-alloc also reuses a source's memory in place, so its buffer is smaller), and the
results live at the peak by phase and op.

``--model lora`` loads a GGUF language model (``--file``: compare_peft_lora.py's files) and trains rank-8
adapters on all its linear projections, batch 4 x 256 random ids (compare_peft_lora.py's step).

The llama (compare_llama_torch.py's defaults: vocabulary 1024, context 256, dim 384, 6 layers, 6 / 2
heads, batch 16) trains on random ids: the time of a step does not depend on the values.
"""
from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np

import pyggml_opt as pgo
from pyggml_opt import data
from pyggml_opt._lib import ffi, lib

import compare_llama_torch as L
from compare_torch import PHYSICAL, pgo_model

EMPTY_OPS = ("NONE", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE")


def model_and_data(name: str, steps: int, folder: str | None, file: str | None):
    """(model, x, y, physical batch) for ``steps`` steps of the model ``name``."""
    if name == "lora":
        if file is None:
            raise SystemExit("--model lora needs --file (a GGUF language model)")
        model = pgo.load(file)
        model.enable_lora(rank=8, alpha=16, seed=0)
        vocab = model.output_shape[-1]
        ids = np.random.default_rng(0).integers(0, vocab, (steps * 4, 257), dtype=np.int32)
        return model, ids[:, :-1], ids[:, 1:], 4
    if name == "llama":
        ids = np.random.default_rng(0).integers(0, L.VOCAB, (steps * L.BATCH, L.MODEL["context"] + 1), dtype=np.int32)
        return pgo.models.llama(L.VOCAB, **L.MODEL), ids[:, :-1], ids[:, 1:], L.BATCH
    x, y = data.load_fashion_mnist(folder, flatten=True)[0]
    return pgo_model(name), x[:steps * PHYSICAL], y[:steps * PHYSICAL], PHYSICAL


def _ne(t) -> str:
    return "x".join(str(int(t.ne[i])) for i in range(4))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="cnn", choices=("fc", "cnn", "cnn-bn", "llama", "lora"))
    ap.add_argument("--file", default=None, help="the GGUF file of --model lora")
    ap.add_argument("--memory", action="store_true", help="where the step's compute memory goes")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--plain", type=int, default=10)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", default=None, help="Fashion-MNIST IDX folder (default: Debian's)")
    a = ap.parse_args(argv)

    empty = {int(getattr(lib, f"GGML_OP_{n}")) for n in EMPTY_OPS}
    loss_flag = int(lib.GGML_TENSOR_FLAG_LOSS)
    nodes: dict[int, tuple] = {}
    results: dict[int, tuple[int, int, list[int]]] = {}  # node -> (what it views or itself, bytes, sources)
    buffer: list[int] = []
    spent: dict[int, int] = defaultdict(int)
    st: dict = {"start": 0, "phase": "fwd"}

    @ffi.callback("bool(struct ggml_tensor *, bool, void *)")
    def eval_cb(t, ask, _ud):
        now, key = time.perf_counter_ns(), int(ffi.cast("uintptr_t", t))
        if not ask:
            spent[key] += now - st["start"]
            return True
        if key not in nodes:
            srcs = " ".join(_ne(t.src[i]) for i in range(3) if t.src[i] != ffi.NULL)
            nodes[key] = (len(nodes), st["phase"], ffi.string(lib.ggml_op_desc(t)).decode(), _ne(t), srcs,
                          ffi.string(t.name).decode(errors="replace")[:32])
            reads = [_root(t.src[i]) for i in range(lib.GGML_MAX_SRC) if t.src[i] != ffi.NULL]
            results[key] = (_root(t), int(lib.ggml_nbytes(t)) if t.view_src == ffi.NULL else 0, reads)
        if int(t.flags) & loss_flag:
            st["phase"] = "bwd"
        st["start"] = now
        return int(t.op) not in empty

    stamps: list[float] = []

    class Profiler(pgo.Callback):
        sched = None

        def on_batch_end(self, _model, batch, _logs):
            stamps.append(time.perf_counter())
            st["phase"] = "fwd"
            if batch == a.warmup + a.plain - 1:
                self.sched = self.trainer.train.scheduler.ptr
                buffer.append(sum(lib.ggml_backend_sched_get_buffer_size(self.sched, lib.ggml_backend_sched_get_backend(self.sched, i))
                                  for i in range(lib.ggml_backend_sched_get_n_backends(self.sched))))
                lib.ggml_backend_sched_set_eval_callback(self.sched, eval_cb, ffi.NULL)

        def on_train_end(self, _model):
            if self.sched is not None:
                lib.ggml_backend_sched_set_eval_callback(self.sched, ffi.NULL, ffi.NULL)

    model, x, y, batch = model_and_data(a.model, a.warmup + a.plain + a.steps, a.data, a.file)
    t0 = time.perf_counter()
    model.fit(x, y, epochs=1, batch_size=batch, shuffle=False, optimizer=pgo.AdamW(lr=1e-3),
              n_threads=a.threads, seed=0, verbose=0, callbacks=[Profiler()],
              **({"metrics": []} if a.model == "lora" else {}))  # compare_peft_lora.py's step: no metrics
    step = np.diff([t0, *stamps]) * 1e3
    plain, instr = step[a.warmup:a.warmup + a.plain], step[a.warmup + a.plain:]
    print(f"{a.model}, physical batch {batch}, {a.threads} threads: plain step {np.median(plain):.1f} ms "
          f"(median of {a.plain}), instrumented {np.median(instr):.1f} ms, "
          f"node times {sum(spent.values()) / a.steps / 1e6:.1f} ms")
    by_op: dict[tuple[str, str], float] = defaultdict(float)
    for key in sorted(spent, key=lambda k: nodes[k][0]):
        i, phase, op, shape, srcs, name = nodes[key]
        ms = spent[key] / a.steps / 1e6
        by_op[(phase, op)] += ms
        print(f"{i:4d} {phase} {op:18s} {ms:6.2f} ms  {shape:16s} <- {srcs:36s} {name}")
    print("\nper op and phase (ms per step):")
    for (phase, op), ms in sorted(by_op.items(), key=lambda kv: -kv[1]):
        print(f"  {phase} {op:18s} {ms:6.2f}")
    if a.memory:
        print_memory(nodes, results, buffer[0])


def _root(t) -> int:
    """The tensor whose memory ``t`` uses (what a view views), as an address."""
    while t.view_src != ffi.NULL:
        t = t.view_src
    return int(ffi.cast("uintptr_t", t))


def print_memory(nodes: dict[int, tuple], results: dict[int, tuple[int, int, list[int]]], buffer: int) -> None:
    """The peak of the live results of one step's nodes (see the module) and what is live there."""
    order = sorted(results, key=lambda k: nodes[k][0])
    last = {}
    for i, key in enumerate(order):
        for r in results[key][2]:
            last[r] = i
    live: dict[int, int] = {}
    peak, peak_at, peak_live = 0, 0, {}
    for i, key in enumerate(order):
        root, size, _ = results[key]
        if size:
            live[key] = size
        total = sum(live.values())
        if total > peak:
            peak, peak_at, peak_live = total, i, dict(live)
        for r in [r for r in live if last.get(r, -1) <= i]:
            del live[r]
    print(f"\ncompute memory: live results peak at {peak / 2**20:.0f} MiB at node {peak_at} "
          f"({nodes[order[peak_at]][1]} {nodes[order[peak_at]][2]}); the scheduler's buffer {buffer / 2**20:.0f} MiB")
    by: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for key, size in peak_live.items():
        _, phase, op, shape, _, _ = nodes[key]
        by[(phase, op)][0] += size
        by[(phase, op)][1] += 1
    for (phase, op), (size, count) in sorted(by.items(), key=lambda kv: -kv[1][0])[:20]:
        print(f"  {phase} {op:18s} {size / 2**20:8.0f} MiB in {count} results")


if __name__ == "__main__":
    main()
