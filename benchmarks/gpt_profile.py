"""Where does a training step of the small GPT go? Per-op time of pyggml_opt's step, and PyTorch's.

The model, data, initial weights, optimizer and threads are those of ``compare_torch.py --model gpt``
(gpt_compare.py). Each framework runs in a subprocess of its own.

pyggml_opt: ``model.fit`` runs ``--warmup`` steps, ``--plain`` steps timed as they are, then
``--steps`` steps with an eval callback on the training graph's backend scheduler
(``ggml_backend_sched_set_eval_callback`` through the raw binding; the scheduler is fit's
``TrainingSession.scheduler``, reached from a Callback's ``trainer``). The callback answers "yes" for
every node that computes something (not for VIEW / RESHAPE / PERMUTE / TRANSPOSE / NONE, which are
free), so the scheduler computes the graph one node at a time, synchronising after each: the time
from a node's first "ask" to its "done" call is that node's time, plus the cost of starting and
finishing a one-node graph on the CPU backend (plan, waking the thread pool, the barrier) and of two
Python callbacks. That overhead is estimated as (instrumented step - plain step) / nodes per step and
subtracted in the "est." columns; the raw columns keep it. Nodes are grouped by op (ggml_op_desc: the
unary op for UNARY) and by phase: forward (up to ggml-opt's loss node), backward (after it) and the
optimizer (OPT_STEP_ADAMW); in the backward phase the input gradients of a matmul are MUL_MATs and its
weight gradients OUT_PRODs. "outside" is the part of a step that is not graph compute (fit's loop:
batch rows and labels into the graph, ggml_opt_alloc, zeroing gradients, the optimizer parameters,
callbacks, the host-side accuracy).

"by part of the model": before the graph is built, the layers' forward methods and F.linear / F.gelu
/ the loss are wrapped (in the profiling process only) to name every forward node after the part
that made it (``install_labels``). ggml names each gradient "grad for <forward node>", so a backward
node is given the part whose incoming gradient it reads (the backward pass of that part), else the
part of the backward node it reads, else of the forward node it reads. The backward attribution is a
heuristic: an ADD that accumulates two gradients can land on the neighbouring part.

PyTorch: ``--plain`` steps timed per phase with the wall clock (forward + loss, backward,
zero_grad + AdamW step), then ``--steps`` steps under torch.profiler (CPU), ops ranked by their self
time (the calling thread's wall time inside the op, waiting for intra-op threads included).

    python benchmarks/gpt_profile.py                      # 2 threads (default_n_threads), 10 steps each
    python benchmarks/gpt_profile.py --threads 1 --steps 20 --top 30 --no-torch
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import gpt_compare as G
from machine import fit_buffer_mb
import numpy as np

EMPTY_OPS = ("NONE", "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE")


# ---------------------------------------------------------------------------------------- pyggml_opt

def _ne(t) -> tuple[int, ...]:
    ne = [int(t.ne[i]) for i in range(4)]
    while len(ne) > 1 and ne[-1] == 1:
        ne.pop()
    return tuple(ne)


def _shape(t) -> str:
    return "x".join(map(str, _ne(t)))


MARK = "@"   # prefix of the names given to forward nodes (ggml copies names into ggml-opt's graph copy)


def install_labels(ffi, lib) -> bool:
    """Name every forward node of the graphs built from now on after the part of the model that made
    it, by wrapping (in this process only) the layers' forward methods and a few functional ops:
    "embeddings", "LayerNorm", "attn q/k/v/o" (the four projections), "attn core" (split into heads,
    scores, mask, softmax, weights x v, merge), "MLP fc1", "GELU", "MLP fc2", "residual adds", "head",
    "loss". A node made inside nested wrappers takes the innermost label. Returns False if this
    version of pyggml_opt lacks a hook (the part table is then left out)."""
    try:
        from pyggml_opt.nn import ops as F
        from pyggml_opt.nn.layers import (
            Block,
            Embedding,
            LayerNorm,
            Linear,
            MultiHeadAttention,
            PositionalEmbedding,
            TransformerBlock,
        )
        from pyggml_opt.training import session as S
    except ImportError:
        return False
    none_op = int(lib.GGML_OP_NONE)
    stack: list[str] = []
    child_key: list[str] = []

    def addr(t) -> int:
        return int(ffi.cast("uintptr_t", t))

    def mark(out, label: str, args) -> None:
        stops = {addr(a.ptr) for a in args if hasattr(a, "ptr")}
        todo, seen = [out.ptr], set()
        while todo:
            t = todo.pop()
            a = addr(t)
            if a in seen or a in stops or int(t.op) == none_op:
                continue
            seen.add(a)
            # nodes of an inner wrapper keep their label; the walk goes on through them (it ends at
            # this call's arguments and at leaves)
            if not ffi.string(t.name).decode(errors="replace").startswith(MARK):
                lib.ggml_set_name(t, (MARK + label).encode())
            todo.extend(t.src[i] for i in range(len(t.src)) if t.src[i] != ffi.NULL)

    def wrap(owner, attr: str, label_of) -> None:
        orig = getattr(owner, attr)

        def wrapper(*args, **kwargs):
            label = label_of(args)
            if label is None:
                return orig(*args, **kwargs)
            stack.append(label)
            try:
                out = orig(*args, **kwargs)
            finally:
                stack.pop()
            if hasattr(out, "ptr"):
                mark(out, label, [*args, *kwargs.values(),
                                  *(v for a in args if isinstance(a, dict) for v in a.values())])
            return out
        setattr(owner, attr, wrapper)

    orig_call = Block.call

    def call(self, child, x, params):
        child_key.append(child)
        try:
            return orig_call(self, child, x, params)
        finally:
            child_key.pop()
    Block.call = call
    wrap(Embedding, "forward", lambda a: "embeddings")
    wrap(PositionalEmbedding, "forward", lambda a: "embeddings")
    wrap(LayerNorm, "forward", lambda a: "LayerNorm")
    wrap(MultiHeadAttention, "forward", lambda a: "attn core")
    wrap(F, "linear", lambda a: "attn q/k/v/o" if stack and stack[-1] == "attn core" else None)
    wrap(Linear, "forward", lambda a: f"MLP {child_key[-1]}" if child_key and stack and stack[-1] == "residual adds"
         else (a[0].name or "linear"))
    wrap(F, "gelu", lambda a: "GELU")
    wrap(TransformerBlock, "forward", lambda a: "residual adds")
    if hasattr(S, "weighted_loss"):
        wrap(S, "weighted_loss", lambda a: "loss")
    return True


def _label_of_name(name: str) -> str | None:
    """The label in a node name: "@GELU", "@GELU (view)", "grad for @GELU (transposed)" -> "GELU"."""
    i = name.find(MARK)
    if i < 0:
        return None
    return name[i + 1:].split(" (")[0]


def profile_pgo(d: dict, warmup: int, plain: int, steps: int, threads: int) -> dict:
    import pyggml_opt as pgo
    from pyggml_opt._lib import ffi, lib

    labelled = install_labels(ffi, lib)
    vocab = int(d["vocab"])
    model = pgo.models.gpt(vocab, context=G.CONTEXT, dim=G.DIM, n_layers=G.N_LAYERS, n_heads=G.N_HEADS)
    model.ensure_built((G.CONTEXT,), G.SEED)
    model.set_weights(dict(np.load(d["init"])))
    loss_flag = int(lib.GGML_TENSOR_FLAG_LOSS)
    empty = {int(getattr(lib, f"GGML_OP_{n}")) for n in EMPTY_OPS}
    adamw = int(lib.GGML_OP_OPT_STEP_ADAMW)
    perf = time.perf_counter_ns
    nodes: dict[int, dict] = {}                    # node address -> its description (static graph: same every step)
    acc: dict[int, int] = defaultdict(int)         # node address -> ns over the instrumented steps
    st = {"start": None, "phase": "fwd", "loss": None, "order": 0, "first": None, "last": None, "chunks": 0}

    def part_of(t, phase: str) -> str:
        """The model part a node belongs to: forward nodes by their name (install_labels); a backward
        node by the incoming gradient it reads ("grad for @X": the backward pass of part X), else by
        the backward node it reads, else by the forward node it reads."""
        name = ffi.string(t.name).decode(errors="replace")
        if phase == "opt":
            return "AdamW"
        if phase == "fwd":
            if name == "outputs":
                return "head"
            if name.startswith("loss_"):
                return "loss"
            return _label_of_name(name) or "other"
        srcs = [t.src[i] for i in (1, 0, *range(2, len(t.src))) if t.src[i] != ffi.NULL]
        fallback = None
        for s in srcs:
            sname = ffi.string(s.name).decode(errors="replace")
            known = nodes.get(int(ffi.cast("uintptr_t", s)))
            if "grad for " in sname:
                lab = _label_of_name(sname)
                if lab:
                    return lab
                if "grad for outputs" in sname:
                    return "head"
                if "grad for loss" in sname:
                    return "loss"
            if known is not None and known["phase"] == "bwd":
                return known["part"]
            if fallback is None:
                fallback = _label_of_name(sname)
        return fallback or "other"

    def describe(t, addr: int) -> dict:
        op = ffi.string(lib.ggml_op_desc(t)).decode()
        phase = "opt" if int(t.op) == adamw else st["phase"]
        srcs = [t.src[i] for i in range(2) if t.src[i] != ffi.NULL]
        shape = _shape(t) if op not in ("MUL_MAT", "OUT_PROD") else \
            " x ".join(_shape(s) for s in srcs) + " -> " + _shape(t)
        return {"op": op, "phase": phase, "shape": shape, "order": st["order"],
                "part": part_of(t, phase) if labelled else "?"}

    @ffi.callback("bool(struct ggml_tensor *, bool, void *)")
    def eval_cb(t, ask, _ud):
        now = perf()
        addr = int(ffi.cast("uintptr_t", t))
        if ask:
            if st["first"] is None:
                st["first"] = now
            if addr not in nodes:
                nodes[addr] = describe(t, addr)
                st["order"] += 1
            if int(t.flags) & loss_flag:     # ggml-opt's loss node: the forward pass ends here
                st["phase"] = "bwd"
            if int(t.op) in empty:
                return False
            if st["start"] is None:
                st["start"] = now
            return True
        acc[addr] += now - st["start"]
        st["chunks"] += 1
        st["start"] = None
        st["last"] = perf()
        return True

    stamps: list[float] = []
    windows: list[tuple[int, int]] = []            # (first ask, last done) per instrumented step

    class Profiler(pgo.Callback):
        sched = None

        def on_batch_end(self, _model, batch, _logs):
            stamps.append(time.perf_counter())
            if st["first"] is not None:
                windows.append((st["first"], st["last"]))
            st.update(start=None, phase="fwd", first=None, last=None)
            if batch == warmup + plain - 1:       # instrument the steps after this one
                train = self.trainer.train        # fit's TrainingSession (training/session.py)
                self.sched = train.scheduler.ptr
                st["buffer_mb"] = fit_buffer_mb(self.trainer)
                lib.ggml_backend_sched_set_eval_callback(self.sched, eval_cb, ffi.NULL)

        def on_train_end(self, _model):
            if self.sched is not None:
                lib.ggml_backend_sched_set_eval_callback(self.sched, ffi.NULL, ffi.NULL)

    total = warmup + plain + steps
    t0 = time.perf_counter()
    model.fit(d["x"][:total * G.BATCH], d["y"][:total * G.BATCH], epochs=1, batch_size=G.BATCH, shuffle=False,
              loss="cross_entropy", optimizer=pgo.AdamW(lr=G.LR, beta1=G.BETAS[0], beta2=G.BETAS[1], eps=G.EPS,
                                                        weight_decay=G.WEIGHT_DECAY),
              n_threads=threads, seed=G.SEED, verbose=0, callbacks=[Profiler()])
    step_s = np.diff([t0, *stamps])
    plain_s = step_s[warmup:warmup + plain]
    instr_s = step_s[warmup + plain:]
    rows = [{**nodes[a], "ns": acc[a]} for a in nodes if a in acc]
    return {"plain_step_s": plain_s.tolist(), "instrumented_step_s": instr_s.tolist(),
            "compute_window_s": [(b - a) / 1e9 for a, b in windows], "chunks": st["chunks"], "steps": steps,
            "nodes_total": len(nodes), "nodes": rows, "threads": threads, "labelled": labelled,
            "compute_buffer_mb": st.get("buffer_mb")}


def report_pgo(r: dict, top: int) -> dict:
    steps = r["steps"]
    plain = float(np.median(r["plain_step_s"])) if r["plain_step_s"] else float("nan")
    instr = float(np.median(r["instrumented_step_s"]))
    window = float(np.median(r["compute_window_s"]))
    chunks = r["chunks"] / steps
    raw_total = sum(n["ns"] for n in r["nodes"]) / 1e9 / steps
    # the per-node cost of computing one node at a time: the cheapest node (a few floats of work)
    over = min(n["ns"] for n in r["nodes"]) / 1e9 / steps
    outside = instr - window
    est_total = sum(max(0.0, n["ns"] / 1e9 / steps - over) for n in r["nodes"]) + outside
    print(f"pyggml_opt, {r['threads']} thread(s): plain step {plain * 1e3:.1f} ms (median of {len(r['plain_step_s'])}); "
          f"instrumented step {instr * 1e3:.1f} ms (median of {steps}), of which graph compute {window * 1e3:.1f} ms "
          f"and outside the graph (fit's loop) {outside * 1e3:.1f} ms")
    print(f"  {r['nodes_total']} graph nodes, {chunks:.0f} computed one at a time per step (the rest are views); sum "
          f"of node times {raw_total * 1e3:.1f} ms/step")
    print(f"  instrumentation cost per node: {over * 1e6:.1f} us (the cheapest node's time, subtracted from every node "
          f"in the est. columns, clamped at 0); (instrumented - plain) / nodes = "
          f"{(instr - plain) / chunks * 1e6:.1f} us (noisy on a shared machine)")
    if r.get("compute_buffer_mb") is not None:
        print(f"  the training graph's compute buffer: {r['compute_buffer_mb']:.1f} MB")
    print(f"  est. step = est. node times + outside = {est_total * 1e3:.1f} ms (plain step {plain * 1e3:.1f} ms); "
          "% step = est. ms / est. step")
    plain_ms = est_total * 1e3

    def table(key, title, limit):
        groups: dict[tuple, list] = defaultdict(lambda: [0, 0])
        for n in r["nodes"]:
            g = groups[key(n)]
            g[0] += n["ns"]
            g[1] += 1
        rows = []
        for k, (ns, count) in groups.items():
            raw_ms = ns / 1e6 / steps
            est_ms = max(0.0, raw_ms - count * over * 1e3)
            rows.append((k, count, raw_ms, est_ms))
        rows.sort(key=lambda x: -x[3])
        print(f"\n  {title}")
        print(f"  {'group':58} {'nodes':>5} {'raw ms':>7} {'est. ms':>7} {'% step':>6} {'cum %':>6}")
        cum = 0.0
        for k, count, raw_ms, est_ms in rows[:limit]:
            pct = 100 * est_ms / plain_ms
            cum += pct
            print(f"  {' '.join(k)[:58]:58} {count:5d} {raw_ms:7.2f} {est_ms:7.2f} {pct:6.1f} {cum:6.1f}")
        if len(rows) > limit:
            rest = rows[limit:]
            e = sum(x[3] for x in rest)
            print(f"  {'(' + str(len(rest)) + ' more)':58} {sum(x[1] for x in rest):5d} "
                  f"{sum(x[2] for x in rest):7.2f} {e:7.2f} {100 * e / plain_ms:6.1f}")
        return [{"group": " ".join(k), "nodes": c, "raw_ms": a, "est_ms": b} for k, c, a, b in rows]

    phases = table(lambda n: (n["phase"],), "by phase (fwd: forward + loss; bwd: gradients; opt: AdamW)", 5)
    print(f"  {'outside the graph (fit loop, alloc, zeroing gradients)':58} {'':5} {outside * 1e3:7.2f} "
          f"{outside * 1e3:7.2f} {100 * outside / est_total:6.1f}")
    parts = table(lambda n: (n["part"],), "by part of the model (forward + backward; approximate for the backward "
                  "nodes: see the docstring)", top) if r.get("labelled") else []
    by_op = table(lambda n: (n["op"], n["phase"]), "by op and phase", top)
    table(lambda n: (n["part"], n["op"], n["phase"]), "by part, op and phase", top)
    by_shape = table(lambda n: (n["op"], n["phase"], n["shape"]), "by op, phase and shape (ggml ne, innermost first; "
                     "MUL_MAT / OUT_PROD: src0 x src1 -> dst)", top)
    return {"plain_step_ms": plain * 1e3, "instrumented_step_ms": instr * 1e3, "compute_ms": window * 1e3,
            "outside_ms": outside * 1e3, "overhead_us_per_node": over * 1e6, "nodes_per_step": chunks,
            "by_phase": phases, "by_part": parts, "by_op": by_op, "by_shape": by_shape, "est_total_ms": est_total * 1e3}


# ------------------------------------------------------------------------------------------- PyTorch

def profile_torch(d: dict, warmup: int, plain: int, steps: int, threads: int, attention: str, top: int) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(threads)
    vocab = int(d["vocab"])
    net = G.torch_gpt(torch, vocab, attention)
    G.load_torch_weights(torch, net, dict(np.load(d["init"])))
    x, y = torch.from_numpy(d["x"].astype(np.int64)), torch.from_numpy(d["y"].astype(np.int64))
    opt = torch.optim.AdamW(net.parameters(), lr=G.LR, betas=G.BETAS, eps=G.EPS, weight_decay=G.WEIGHT_DECAY)
    F = torch.nn.functional
    phases = defaultdict(list)

    def step(i, timed):
        xb, yb = x[i * G.BATCH:(i + 1) * G.BATCH], y[i * G.BATCH:(i + 1) * G.BATCH]
        t0 = time.perf_counter()
        loss = F.cross_entropy(net(xb).reshape(-1, vocab), yb.reshape(-1))
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t3 = time.perf_counter()
        if timed:
            phases["forward + loss"].append(t1 - t0)
            phases["backward"].append(t2 - t1)
            phases["AdamW + zero_grad"].append(t3 - t2)
            phases["step"].append(t3 - t0)

    i = 0
    for _ in range(warmup + plain):
        step(i, i >= warmup)
        i += 1
    med = {k: float(np.median(v)) for k, v in phases.items()}
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} thread(s), attention {attention}: step "
          f"{med['step'] * 1e3:.1f} ms (median of {plain}): " + ", ".join(
              f"{k} {v * 1e3:.1f} ms ({100 * v / med['step']:.0f} %)" for k, v in med.items() if k != "step"))
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step(i, False)
            i += 1
    prof_step = (time.perf_counter() - t0) / steps
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    events.sort(key=lambda e: -e.self_cpu_time_total)
    total = sum(e.self_cpu_time_total for e in events) / 1e3 / steps
    print(f"  under the profiler: {prof_step * 1e3:.1f} ms/step; self times add up to {total:.1f} ms/step\n")
    print(f"  {'op (self time)':58} {'calls':>5} {'ms':>7} {'% step':>6} {'cum %':>6}")
    cum, rows = 0.0, []
    for e in events[:top]:
        ms = e.self_cpu_time_total / 1e3 / steps
        pct = 100 * ms / total
        cum += pct
        print(f"  {e.key[:58]:58} {e.count // steps:5d} {ms:7.2f} {pct:6.1f} {cum:6.1f}")
    for e in events:
        rows.append({"op": e.key, "calls": e.count / steps, "ms": e.self_cpu_time_total / 1e3 / steps})
    return {"phases_ms": {k: v * 1e3 for k, v in med.items()}, "profiled_step_ms": prof_step * 1e3,
            "self_total_ms": total, "ops": rows, "threads": torch.get_num_threads(), "version": torch.__version__}


# ------------------------------------------------------------------------------------------- driver

def child(a) -> None:
    with np.load(Path(a.dir) / "data.npz") as z:
        d = {k: z[k] for k in z.files}
    d["init"] = str(Path(a.dir) / "init.npz")
    if a.only == "pgo":
        r = profile_pgo(d, a.warmup, a.plain, a.steps, a.threads)
        out = report_pgo(r, a.top)
    else:
        out = profile_torch(d, a.warmup, a.plain, a.steps, a.threads, a.torch_attention, a.top)
    if a.out:
        Path(a.out).write_text(json.dumps(out))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=None, help="threads for both (default pgo.default_n_threads())")
    ap.add_argument("--steps", type=int, default=10, help="instrumented / profiled steps (default 10)")
    ap.add_argument("--plain", type=int, default=10, help="steps timed without instrumentation first (default 10)")
    ap.add_argument("--warmup", type=int, default=3, help="steps before those (default 3)")
    ap.add_argument("--top", type=int, default=25, help="rows per table (default 25)")
    ap.add_argument("--torch-attention", choices=("sdpa", "manual"), default="sdpa")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--json", default=None, help="also write both breakdowns here")
    ap.add_argument("--only", choices=("pgo", "torch"), help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.only:
        return child(a)
    from machine import cpu_name

    import pyggml_opt as pgo
    a.threads = a.threads or pgo.default_n_threads()
    load0 = os.getloadavg()
    print(f"CPU: {cpu_name()}; {os.cpu_count()} cores; load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}; "
          f"{a.threads} thread(s); steps: {a.warmup} warm-up, {a.plain} plain, {a.steps} instrumented\n", flush=True)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        G.prepare(Path(tmp), a.warmup + a.plain + a.steps, 1)
        for kind in ("pgo",) + (() if a.no_torch else ("torch",)):
            out = Path(tmp) / f"{kind}.json"
            cmd = [sys.executable, str(Path(__file__).resolve()), "--only", kind, "--dir", tmp, "--out", str(out),
                   "--threads", str(a.threads), "--steps", str(a.steps), "--plain", str(a.plain),
                   "--warmup", str(a.warmup), "--top", str(a.top), "--torch-attention", a.torch_attention]
            subprocess.run(cmd, check=True, cwd=Path(__file__).resolve().parent)
            results[kind] = json.loads(out.read_text())
            print(flush=True)
    load1 = os.getloadavg()
    print(f"load average after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps({"cpu": cpu_name(), "load_before": load0, "load_after": load1,
                                            "threads": a.threads, **results}, indent=1))


if __name__ == "__main__":
    main()
