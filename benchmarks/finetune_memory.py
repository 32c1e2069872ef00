"""Fine-tuning data in memory or in a cache of mapped files: peak resident memory and seconds of
``pyggml_opt.finetune.finetune`` as the JSONL file grows, in one run.

The data: Debian's fortunes as ``{"text": ...}`` lines, repeated (numbered) up to each ``--sizes`` MB.
The base: a llama of width 64 and 2 blocks over Llama 2's vocabulary (llama.cpp's
``ggml-vocab-llama-spm.gguf``), written once. Each run is a child process of its own (its VmHWM is
its own): ``finetune(base, data, max_seq_length=256, pack=True, epochs=1)`` with every epoch cut to 2
optimizer steps (``PYGGML_OPT_MAX_EPOCH_STEPS``: the tokenizing, the windows and the training graph are
what is measured, not the training), in memory and with ``cache=`` (first run: tokenized into the cache;
second run: found there).

    pip install ".[test]"
    python benchmarks/finetune_memory.py                   # ~5 min on 2 cores
    python benchmarks/finetune_memory.py --sizes 8 32 128
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, str(ROOT / "tests"))
from machine import cpu_name  # noqa: E402

CHILD = r"""
import json, sys, time
from pyggml_opt.finetune import finetune

base, data, cache = sys.argv[1], sys.argv[2], sys.argv[3] or None
t0 = time.perf_counter()
r = finetune(base, data, output=None, max_seq_length=256, pack=True, epochs=1, verbose=0, log=lambda line: None,
             cache=cache)
seconds = time.perf_counter() - t0
with open("/proc/self/status") as f:
    peak = next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmHWM:"))
print(json.dumps({"tokens": int(r.data["train"].lengths().sum()), "seconds": seconds, "peak_mb": peak}))
"""


def make_base(folder: Path) -> Path:
    """The base model file (Llama 2's vocabulary, random weights)."""
    import pyggml_opt as pgo
    from support.hf_models import vocab_keys

    keys = vocab_keys("llama-spm")
    model = pgo.models.llama(len(keys["tokenizer.ggml.tokens"]), 256, 64, 2, 2)
    model.file_keys = dict(keys)
    path = folder / "base.gguf"
    model.save(path, format="llama.cpp")
    return path


def make_data(path: Path, megabytes: float) -> None:
    """Fortunes as JSONL texts, numbered and repeated to ``megabytes`` MB."""
    import pyggml_opt as pgo

    texts, _, _ = pgo.data.load_fortunes()
    size, i = 0, 0
    with open(path, "w") as f:
        while size < megabytes * 1e6:
            line = json.dumps({"text": f"{i}: {texts[i % len(texts)]}"}) + "\n"
            f.write(line)
            size += len(line.encode())
            i += 1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=float, nargs="+", default=[4, 16])
    a = p.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="finetune_memory-"))
    try:
        base = make_base(folder)
        env = {**os.environ, "PYGGML_OPT_MAX_EPOCH_STEPS": "2", "PYTHONWARNINGS": "ignore"}
        print(f"CPU: {cpu_name()}; load {os.getloadavg()[0]:.2f}")
        print("| data | mode | tokens | seconds | peak RSS |\n|---|---|---|---|---|")
        for mb in a.sizes:
            data = folder / f"data-{mb:g}.jsonl"
            make_data(data, mb)
            cache = folder / f"cache-{mb:g}"
            for mode, arg in (("in memory", ""), ("cache, first run", str(cache)), ("cache, found", str(cache))):
                out = subprocess.run([sys.executable, "-c", CHILD, str(base), str(data), arg], capture_output=True,
                                     text=True, env=env)
                if out.returncode != 0:
                    raise SystemExit(out.stderr[-2000:])
                r = json.loads(out.stdout.strip().splitlines()[-1])
                print(f"| {mb:g} MB | {mode} | {r['tokens']:,} | {r['seconds']:.1f} | {r['peak_mb']:.0f} MB |")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
