"""Peak resident memory of ``pgo.load`` on a llama.cpp file, against the file's size.

A llama of Qwen2.5-0.5B's shapes (vocabulary 151,936, width 896, 24 blocks, 14 query / 2 key-value
heads, feed-forward 4,864, tied embeddings: 494 M parameters, a 1.98 GB file in float32) is written
once with llama.cpp's layout (``save(..., tokenizer=)``, a character tokenizer of as many tokens; with
``--type``, its matrices in that ggml type: ``save(quantize=)``), then loaded in a fresh child process.
The child measures its resident set after ``import pyggml_opt``, ``gc.collect()`` and ``malloc_trim(0)``,
resets the kernel's high-water mark (``/proc/self/clear_refs``), loads the file and computes the logits
of a one-token prompt (the weights reach ggml's memory there), and reads the high-water mark
(``VmHWM``): the peak the loading itself added. Printed: that peak and the resident set after loading
(the file's mapped pages included), in MB and as multiples of the file's size.

    python benchmarks/load_memory.py                       # writes and measures /tmp/pgo-load-memory.gguf
    python benchmarks/load_memory.py --type q8_0           # the same model with Q8_0 matrices
    python benchmarks/load_memory.py --measure FILE         # only the measurement, of an existing file
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

MB = 1e6

CHILD = r"""
import ctypes, gc, sys
import numpy as np
import pyggml_opt as pgo

def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

gc.collect(); ctypes.CDLL("libc.so.6").malloc_trim(0)
before = status("VmRSS")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # the high-water mark starts again from the current resident set
model = pgo.load(sys.argv[1])
model.predict(np.zeros((1, 1), np.int32))
peak = status("VmHWM")
gc.collect(); ctypes.CDLL("libc.so.6").malloc_trim(0)
print(before, peak, status("VmRSS"), model.count_params())
"""


def make(path: str, vocab: int, dim: int, layers: int, heads: int, kv_heads: int, ffn: int,
         type_name: str = "f32") -> None:
    """A llama file of these shapes, its matrices in ``type_name`` (constant weights: their values do not
    change the memory)."""
    import numpy as np

    import pyggml_opt as pgo
    from pyggml_opt.data import CharTokenizer

    context = 4096
    model = pgo.models.llama(vocab, context, dim, layers, heads, kv_heads, ffn, tie_embeddings=True, build=False)
    shapes = model.shapes_for((context,))
    model.build_with_weights((context,), {name: np.full(shape, 0.01, np.float32) for name, shape in shapes.items()})
    # one token per character, from U+10000 on (no surrogates, none of the characters save refuses)
    tokenizer = CharTokenizer("".join(chr(0x10000 + i) for i in range(vocab - 2)))
    model.save(path, tokenizer=tokenizer, quantize=None if type_name == "f32" else type_name)


def measure(path: str) -> None:
    out = subprocess.run([sys.executable, "-c", CHILD, path], check=True, capture_output=True, text=True).stdout
    before, peak, after, params = (int(v) for v in out.split())
    size = os.path.getsize(path)
    print(f"file {size / MB:.0f} MB, {params / 1e6:.1f} M parameters")
    print(f"peak added while loading: {(peak - before) / MB:8.0f} MB = {(peak - before) / size:.2f} x the file")
    print(f"resident after loading:   {(after - before) / MB:8.0f} MB = {(after - before) / size:.2f} x the file")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--measure", metavar="FILE", help="measure an existing file instead of writing one")
    p.add_argument("--file", default="/tmp/pgo-load-memory.gguf", help="where to write the file")
    p.add_argument("--vocab", type=int, default=151_936)
    p.add_argument("--dim", type=int, default=896)
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--heads", type=int, default=14)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--ffn", type=int, default=4864)
    p.add_argument("--type", default="f32", help="the ggml type of the matrices (save's quantize=): q8_0, q4_K ...")
    a = p.parse_args()
    if a.measure:
        measure(a.measure)
        return
    make(a.file, a.vocab, a.dim, a.layers, a.heads, a.kv_heads, a.ffn, a.type)
    measure(a.file)


if __name__ == "__main__":
    main()
