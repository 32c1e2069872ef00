#!/usr/bin/env python3
"""Smoke test of an installed pyggml_opt (a repaired wheel, a wheel built from the sdist, a
cibuildwheel test): run it from outside the source tree with the interpreter of the environment
under test. Used by scripts/check_wheel.sh and by cibuildwheel's test-command.

Checks that
  - pyggml_opt is imported from site-packages, not from a source tree;
  - ggml found its CPU backend in the package's own lib folder: on x86-64 Linux ggml dlopen()s it
    there at import (GGML_BACKEND_DL: one of the libggml-cpu-<variant>.so files of a portable build,
    libggml-cpu.so of one for the build machine's CPU), and an auditwheel / delocate repair must not
    have moved, renamed or duplicated them;
  - every ggml library mapped into the process comes from the package and is mapped once (a second
    copy of libggml-base, e.g. one grafted into pyggml_opt.libs next to the original, would split
    ggml's global state);
  - a small MLP trains on the bundled Fashion-MNIST subset above chance, predicts probabilities, and
    saves / loads as GGUF with the same predictions; on each GPU device the build found (CUDA,
    Metal) the same fit reaches about the same accuracy.

Exit status 0 on success; prints what it saw either way. Options: --backend NAME for the main fit
(default cpu), --min-accuracy (default 0.6).
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--min-accuracy", type=float, default=0.6)
    args = ap.parse_args()

    # ggml logs which backend library it loaded ("load_backend: loaded CPU backend from <path>") at
    # INFO through pyggml_opt's log callback, which is installed before the backends are loaded.
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    glog = logging.getLogger("pyggml_opt.ggml")
    glog.setLevel(logging.DEBUG)
    glog.addHandler(Keep())

    t0 = time.perf_counter()
    import numpy as np

    import pyggml_opt as pgo
    from pyggml_opt._lib import LIB_DIR, c_str, ffi, lib
    t_import = time.perf_counter() - t0
    ok = True

    def fail(msg: str) -> None:
        nonlocal ok
        ok = False
        print(f"FAIL: {msg}")

    pkg = os.path.dirname(os.path.realpath(pgo.__file__))
    print(f"python {sys.version.split()[0]} {sys.executable}")
    print(f"pyggml_opt {pgo.__version__} imported from {pkg} in {t_import:.2f} s")
    if "site-packages" not in pkg and "dist-packages" not in pkg:
        fail("pyggml_opt was not imported from an installed package (site-packages)")
    print(f"lib folder {LIB_DIR}: {', '.join(sorted(p.name for p in LIB_DIR.iterdir()))}")
    libs_dir = os.path.join(os.path.dirname(pkg), "pyggml_opt.libs")
    if os.path.isdir(libs_dir):
        print(f"pyggml_opt.libs (grafted by auditwheel): {sorted(os.listdir(libs_dir))}")

    print("devices:")
    for d in pgo.devices():
        print(f"  {d.name:8s} {d.type:6s} {d.description} ({d.memory_total / 2**30:.1f} GiB)")
    if not any(d.type == "cpu" for d in pgo.devices()):
        fail("no CPU device: ggml found no CPU backend library")

    loaded = [m for m in seen if "loaded" in m and "backend from" in m]
    for m in loaded:
        print(f"ggml: {m}")
    errors = [m for m in seen if "failed to load" in m]
    for m in errors:
        print(f"ggml: {m}")
    cpu_loads = [m for m in loaded if "loaded CPU backend from" in m]
    if os.path.isdir(LIB_DIR) and any(LIB_DIR.glob("*ggml-cpu*")):  # GGML_BACKEND_DL build
        if len(cpu_loads) != 1:
            fail(f"expected one 'loaded CPU backend from' line from ggml, got {cpu_loads}")
        else:
            path = os.path.realpath(cpu_loads[0].split("backend from", 1)[1].strip())
            if os.path.dirname(path) != os.path.realpath(LIB_DIR):
                fail(f"the CPU backend was loaded from {path}, not from the package's {LIB_DIR}")

    # which CPU features the loaded variant was built with (ggml_backend_get_features)
    reg = lib.ggml_backend_reg_by_name(b"CPU")
    fn = lib.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_get_features") if reg != ffi.NULL else ffi.NULL
    if fn != ffi.NULL:
        feats = ffi.cast("ggml_backend_get_features_t", fn)(reg)
        names, i = [], 0
        while feats[i].name != ffi.NULL:
            names.append(f"{c_str(feats[i].name)}={c_str(feats[i].value)}")
            i += 1
        print(f"CPU backend features: {' '.join(names)}")

    # every ggml library in this process: from the package, each once
    if os.path.exists("/proc/self/maps"):
        mapped = set()
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and "ggml" in os.path.basename(parts[5].strip()):
                    mapped.add(os.path.realpath(parts[5].strip()))
        print("ggml libraries mapped:")
        for p in sorted(mapped):
            print(f"  {p}")
        outside = [p for p in mapped if not p.startswith(os.path.dirname(pkg) + os.sep)]
        if outside:
            fail(f"ggml libraries mapped from outside the installed package: {outside}")
        bases = {}
        for p in mapped:
            stem = os.path.basename(p).split(".so")[0]
            stem = stem.rsplit("-", 1)[0] if os.path.dirname(p).endswith(".libs") else stem  # auditwheel's -<hash>
            bases.setdefault(stem, []).append(p)
        dup = {k: v for k, v in bases.items() if len(v) > 1}
        if dup:
            fail(f"a ggml library is mapped twice (two copies of its global state): {dup}")

    # a small fit on real data shipped in the package
    from pyggml_opt.data import load_fashion_mnist_small
    (x, y), (xt, yt) = load_fashion_mnist_small(flatten=True)
    x, y, xt, yt = x[:2000], y[:2000], xt[:500], yt[:500]
    model = pgo.models.mnist_fc(n_hidden=64)
    t0 = time.perf_counter()
    # one thread: ggml's workers spin at barriers, so on a busy CI machine two threads can take 100x
    # longer than one for a model this small (the thread pool has its own tests)
    h = model.fit(x, y, epochs=3, batch_size=100, optimizer=pgo.AdamW(lr=1e-3), backend=args.backend, seed=0,
                  n_threads=1, verbose=0)
    t_fit = time.perf_counter() - t0
    loss, acc = model.evaluate(xt, yt)
    p = model.predict(xt[:7])
    print(f"fit: 3 epochs x 2000 samples on {model.backend} in {t_fit:.2f} s; train loss "
          f"{h.history['loss'][0]:.3f} -> {h.history['loss'][-1]:.3f}; test loss {loss:.3f}, accuracy {acc:.3f}")
    if not h.history["loss"][-1] < h.history["loss"][0]:
        fail("the training loss did not decrease")
    if not acc >= args.min_accuracy:
        fail(f"test accuracy {acc:.3f} < {args.min_accuracy}")
    if p.shape != (7, 10) or not np.allclose(p.sum(axis=1), 1.0, atol=1e-4):
        fail(f"predict: expected (7, 10) probabilities, got shape {p.shape}, row sums {p.sum(axis=1)}")
    # every GPU this build found (CUDA, Metal): the same fit there (a CI runner usually has none)
    for d in pgo.devices():
        if d.type in ("gpu", "igpu"):
            try:
                g = pgo.models.mnist_fc(n_hidden=64)
                t0 = time.perf_counter()
                gh = g.fit(x, y, epochs=3, batch_size=100, optimizer=pgo.AdamW(lr=1e-3), backend=d.name, seed=0,
                           verbose=0)
                _, gacc = g.evaluate(xt, yt)
                print(f"fit on {d.name}: {time.perf_counter() - t0:.2f} s; train loss {gh.history['loss'][-1]:.3f}, "
                      f"test accuracy {gacc:.3f} (CPU: {acc:.3f})")
                if abs(gacc - acc) > 0.05:
                    fail(f"{d.name}: test accuracy {gacc:.3f} differs from the CPU's {acc:.3f} by more than 0.05")
            except Exception as exc:  # noqa: BLE001 - report any failure of the device
                fail(f"fit on {d.name}: {type(exc).__name__}: {exc}")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "fc.gguf")
        model.save(path)
        again = pgo.load(path)
        if not np.allclose(again.predict(xt[:7]), p, atol=1e-6):
            fail("a model saved and loaded back predicts differently")
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
