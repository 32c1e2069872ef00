"""A graph larger than memory is a MemoryError, as often as it is tried, and leaves the process usable.

The model: a llama of context 2**20, whose attention scores alone need 2**40 x 4 bytes x 2 heads = 8 TiB,
more than any machine allocates. Run in a child process: before vendor patch 0041 the second attempt
ended in a segmentation fault (ggml's allocator placed the graph in the buffer it had failed to make),
and before the check in OptContext.alloc the first one was a ValueError about an input without memory.
"""
from __future__ import annotations

import subprocess
import sys

from support import child_env

SCRIPT = r'''
import numpy as np, pyggml_opt as pgo
big = pgo.models.llama(12, 2**20, 8, 1, 2)
x = np.zeros((1, 2**20), np.int32)
def attempt(name, fn):
    try:
        fn()
        print(name, "ran")
    except MemoryError:
        print(name, "MemoryError")
attempt("predict", lambda: big.predict(x))
attempt("predict", lambda: big.predict(x))
attempt("fit", lambda: big.fit(x, x, epochs=1, verbose=0))
attempt("predict", lambda: big.predict(x))
small = pgo.models.llama(12, 16, 8, 1, 2)
ids = np.arange(64, dtype=np.int32).reshape(4, 16) % 12
print("small predict", small.predict(ids).shape)
history = small.fit(ids, ids, epochs=2, verbose=0)
print("small fit", len(history.history["loss"]))
'''


def test_graphs_larger_than_memory_raise_memory_error_every_time():
    run = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=child_env(),
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines() == ["predict MemoryError", "predict MemoryError", "fit MemoryError",
                                       "predict MemoryError", "small predict (4, 16, 12)", "small fit 2"]
