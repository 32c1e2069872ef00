#!/usr/bin/env python3
"""Which backend runs each op of pyggml_opt's training graphs, and how fast a fit is there.

    python3 scripts/backend_report.py --backend cuda            # fallbacks + speed vs the CPU
    python3 scripts/backend_report.py --backend metal --epochs 3
    python3 scripts/backend_report.py --backend cpu --no-speed  # just the ops the graphs use

Run it against an installed pyggml_opt (scripts/test_gpu.sh does). It changes nothing in the package:

1. Fallbacks. Every scheduler pyggml_opt creates gets a ggml_backend_sched eval callback (through the
   package's own cffi binding) that records, for each node the scheduler computes, its op
   (ggml_op_desc: unary ops by name) and the backend the scheduler assigned it
   (ggml_backend_sched_get_tensor_backend). A node on the CPU while --backend is a GPU is a fallback:
   the device lacks the op (ggml_backend_supports_op) and the scheduler copies its inputs to the
   host and back. Recorded for a short fit (forward, backward and optimizer step of ggml-opt's
   static graphs) and a predict (the allocation-based forward graph), for the MLP and the CNN of
   ggml's MNIST example and a model with every other layer kind (LayerNorm, GELU, Tanh, Sigmoid,
   SiLU) trained with MSE and with a weighted loss. The callback makes the scheduler call into
   Python once per node, so it is installed only for these short runs, never for the timed ones.
2. Speed. The Fashion-MNIST MLP of the README (784-500-10, batch 1000, physical batch 500, AdamW
   1e-3) for --epochs epochs on --backend and on the CPU: s/epoch (first epoch shown apart: it
   includes graph allocation and, on CUDA, kernel loading) and the test accuracy.

Exit status: 0 when everything ran (fallbacks are reported, not failures); 1 when a fit fails or
--max-fallback-ops is exceeded; 2 on bad arguments or a missing backend.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter, defaultdict

import numpy as np

# ggml_is_view_op: no kernel runs for these, the scheduler skips them in its own debug output too
VIEW_OPS = {"NONE", "VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cuda", help="backend name as fit takes it (cuda, cuda:1, metal, gpu, cpu)")
    ap.add_argument("--epochs", type=int, default=5, help="epochs of the timed MLP fit on each backend (default 5)")
    ap.add_argument("--models", default="mlp,cnn,layers",
                    help="models of the fallback report, comma separated: mlp, cnn (ggml's MNIST models), "
                         "layers (LayerNorm, GELU, Tanh, Sigmoid, SiLU; MSE and weighted losses)")
    ap.add_argument("--no-speed", action="store_true", help="only the fallback report")
    ap.add_argument("--cnn-speed", action="store_true", help="also time the CNN (slow on 2 CPU cores: ~20 s/epoch)")
    ap.add_argument("--data", help="folder with Fashion-MNIST's four IDX files "
                                   "(default: Debian's, else the bundled subset)")
    ap.add_argument("--small", action="store_true",
                    help="use the bundled 6000-image subset even if the full set exists")
    ap.add_argument("--max-fallback-ops", type=int, default=-1,
                    help="fail when more distinct ops than this fall back to the CPU (-1: never fail)")
    ap.add_argument("--json", help="write the results here as JSON")
    args = ap.parse_args()

    import pyggml_opt as pgo
    from pyggml_opt._lib import LIB_DIR, c_str, ffi, lib
    from pyggml_opt.core import find_device
    from pyggml_opt.core import scheduler as scheduler_module
    from pyggml_opt.data import fashion_mnist_available, load_fashion_mnist, load_fashion_mnist_small

    print(f"pyggml_opt {pgo.__version__} from {os.path.dirname(pgo.__file__)}")
    print(f"ggml libraries: {LIB_DIR}: {', '.join(sorted(p.name for p in LIB_DIR.glob('*ggml*')))}")
    print("devices:")
    for d in pgo.devices():
        print(f"  {d.name:8s} {d.type:6s} {d.description}  ({d.memory_total / 2**30:.1f} GiB)")
    try:
        dev = find_device(args.backend)
    except ValueError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    device = c_str(lib.ggml_backend_dev_name(dev))
    is_cpu = lib.ggml_backend_dev_type(dev) == lib.GGML_BACKEND_DEVICE_TYPE_CPU
    print(f"backend {args.backend!r} -> device {device}")

    # --- the recorder: an eval callback on every scheduler created while recording ----------------
    record = {"on": False, "nodes": {}}   # (phase, tensor address) -> (op, backend name)
    keep = []                              # the cffi callbacks must outlive their schedulers
    original_init = scheduler_module.Scheduler.__init__

    def init(self, *a, **kw):
        original_init(self, *a, **kw)
        if not record["on"]:
            return
        sched = self.ptr

        @ffi.callback("ggml_backend_sched_eval_callback")
        def cb(t, ask, user_data):
            if ask:
                be = lib.ggml_backend_sched_get_tensor_backend(sched, t)
                name = c_str(lib.ggml_backend_name(be)) if be != ffi.NULL else "?"
                record["nodes"][(record["phase"], int(ffi.cast("uintptr_t", t)))] = (c_str(lib.ggml_op_desc(t)), name)
                return False  # nothing to look at: the scheduler computes the whole split at once
            return True
        keep.append(cb)
        lib.ggml_backend_sched_set_eval_callback(sched, cb, ffi.NULL)

    scheduler_module.Scheduler.__init__ = init

    # --- data ------------------------------------------------------------------------------------
    if args.data and not args.small:
        (x_train, y_train), (x_test, y_test) = load_fashion_mnist(args.data, flatten=True)
        data_name = f"Fashion-MNIST ({args.data})"
    elif fashion_mnist_available() and not args.small:
        (x_train, y_train), (x_test, y_test) = load_fashion_mnist(flatten=True)
        data_name = "Fashion-MNIST (Debian's dataset-fashion-mnist)"
    else:
        (x_train, y_train), (x_test, y_test) = load_fashion_mnist_small(flatten=True)
        data_name = "Fashion-MNIST small subset (bundled)"
    print(f"data: {data_name}: {len(x_train)} train, {len(x_test)} test")

    results = {"device": device, "backend": args.backend, "data": data_name, "fallbacks": {}, "speed": {}}
    failed = False

    # --- 1. fallbacks ----------------------------------------------------------------------------
    def layers_model():
        L = pgo.layers
        return pgo.Sequential([L.Linear(784, 64), L.LayerNorm(64), L.GELU(), L.Linear(64, 64), L.Tanh(),
                               L.Linear(64, 64), L.Sigmoid(), L.Linear(64, 64), L.SiLU(), L.Linear(64, 10)])

    builders = {"mlp": pgo.models.mnist_fc, "cnn": pgo.models.mnist_cnn, "layers": layers_model}
    fallback_ops = set()
    for name in [m.strip() for m in args.models.split(",") if m.strip()]:
        if name not in builders:
            print(f"ERROR: unknown model {name!r} (mlp, cnn, layers)", file=sys.stderr)
            return 2
        record["nodes"].clear()
        record["on"] = True
        try:
            model = builders[name]()
            n = 1000  # two optimizer steps of batch 500 (physical 250: gradient accumulation too)
            record["phase"] = "fit"
            model.fit(x_train[:n], y_train[:n], epochs=1, batch_size=500, physical_batch_size=250,
                      optimizer=pgo.AdamW(lr=1e-3), backend=args.backend, seed=0, verbose=0)
            record["phase"] = "predict"
            model.predict(x_test[:300], batch_size=256)  # a full and a partial batch
            record["phase"] = "fit-sgd"
            model.close()
            model.fit(x_train[:500], y_train[:500], epochs=1, batch_size=500, optimizer=pgo.SGD(lr=1e-2),
                      backend=args.backend, seed=0, verbose=0)
            model.close()
            if name == "layers":  # the other losses: MSE, and fit's own weighted cross-entropy
                record["phase"] = "fit-mse"
                onehot = np.eye(10, dtype=np.float32)[y_train[:500]]
                model.fit(x_train[:500], onehot, epochs=1, batch_size=500, loss="mse", backend=args.backend,
                          seed=0, verbose=0)
                model.close()
                record["phase"] = "fit-weighted"
                model.fit(x_train[:500], y_train[:500], epochs=1, batch_size=500, backend=args.backend, seed=0,
                          verbose=0, sample_weight=np.linspace(0.5, 1.5, 500, dtype=np.float32))
                model.close()
        except Exception as exc:  # report and go on: the speed part may still say something
            print(f"ERROR: {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            failed = True
        finally:
            record["on"] = False
        table = defaultdict(Counter)  # op -> backend -> distinct nodes
        for op, be in record["nodes"].values():
            if op not in VIEW_OPS:
                table[op][be] += 1
        backends = sorted({be for c in table.values() for be in c}, key=lambda b: (b != device, b))
        print(f"\n{name}: nodes (distinct tensors) per op and backend over a fit (AdamW, gradient accumulation), "
              f"a predict and an SGD fit on {device}" + ("" if is_cpu else "; '<-- CPU' marks ops that fall back"))
        print(f"  {'op':28s}" + "".join(f"{b:>8s}" for b in backends))
        for op in sorted(table):
            row = "".join(f"{table[op].get(b, 0):8d}" for b in backends)
            flag = "  <-- CPU" if not is_cpu and table[op].get("CPU", 0) else ""
            print(f"  {op:28s}{row}{flag}")
            if flag:
                fallback_ops.add(op)
        results["fallbacks"][name] = {op: dict(c) for op, c in table.items()}
    if not is_cpu:
        print(f"\nops that fall back to the CPU on {device}: {', '.join(sorted(fallback_ops)) or 'none'}")
    results["fallback_ops"] = sorted(fallback_ops)
    scheduler_module.Scheduler.__init__ = original_init

    # --- 2. speed --------------------------------------------------------------------------------
    if not args.no_speed:
        runs = [("mlp", pgo.models.mnist_fc)] + ([("cnn", pgo.models.mnist_cnn)] if args.cnn_speed else [])
        targets = [args.backend] if is_cpu else [args.backend, "cpu"]
        print(f"\nspeed: {args.epochs} epochs, batch 1000 (physical 500), AdamW(lr=1e-3), 5 % validation")
        print(f"  {'model':5s} {'backend':8s} {'first epoch s':>14s} {'s/epoch after':>14s} {'test acc':>9s} "
              f"{'train loss':>11s}")
        for name, build in runs:
            for target in targets:
                try:
                    model = build()
                    t0 = time.perf_counter()
                    h = model.fit(x_train, y_train, epochs=args.epochs, batch_size=1000, physical_batch_size=500,
                                  validation_split=0.05, optimizer=pgo.AdamW(lr=1e-3), backend=target, seed=0,
                                  verbose=0)
                    wall = time.perf_counter() - t0
                    _, acc = model.evaluate(x_test, y_test)
                    times = h.history["time"]
                    rest = float(np.mean(times[1:])) if len(times) > 1 else float("nan")
                    loss = h.history["loss"][-1]
                    print(f"  {name:5s} {target:8s} {times[0]:14.3f} {rest:14.3f} {acc:9.4f} {loss:11.4f}")
                    results["speed"][f"{name}/{target}"] = {"epoch_s": times, "wall_s": wall, "test_accuracy": acc,
                                                            "loss": h.history["loss"]}
                    model.close()
                except Exception as exc:
                    print(f"ERROR: {name} on {target}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    failed = True
            if not is_cpu and f"{name}/{args.backend}" in results["speed"] and f"{name}/cpu" in results["speed"]:
                g, c = results["speed"][f"{name}/{args.backend}"], results["speed"][f"{name}/cpu"]
                gs, cs = np.mean(g["epoch_s"][1:] or g["epoch_s"]), np.mean(c["epoch_s"][1:] or c["epoch_s"])
                print(f"  {name}: {device} is {cs / gs:.1f}x the CPU's speed "
                      f"({os.cpu_count()} CPU cores, n_threads {pgo.default_n_threads()}); "
                      f"test accuracy {g['test_accuracy']:.4f} vs {c['test_accuracy']:.4f}")

    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    if 0 <= args.max_fallback_ops < len(fallback_ops):
        print(f"FAIL: {len(fallback_ops)} ops fall back to the CPU (allowed: {args.max_fallback_ops})", file=sys.stderr)
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
