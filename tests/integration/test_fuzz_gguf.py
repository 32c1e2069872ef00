"""Untrusted GGUF files: truncated, bit-flipped, overwritten and hostile files never crash ``load``.

Each case is loaded in a child process (a crash there would be a signal, not a Python error); the
children load many files each to keep the run short, and a child that dies is reported with the
file it died on. The mutations are drawn from a fixed seed, so a failure replays.
"""
import json
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt.core import GGUFFile
from pyggml_opt.nn import serialize

N_FILES = 1000
N_CHILDREN = 8
SEED = 20261130
TOKENS = pgo.data.CharTokenizer("abcdefg")

CHILD = textwrap.dedent("""
    import json, sys, logging
    logging.disable(logging.CRITICAL)
    import pyggml_opt as pgo
    for path in sys.argv[1:]:
        print("BEGIN", path, flush=True)
        try:
            m = pgo.load(path)
            m.predict(__import__("numpy").zeros((2,) + m.input_shape, m.input_dtype))
            outcome = "loaded"
        except (ValueError, TypeError, KeyError, FileNotFoundError) as e:  # the documented errors
            outcome = "error:" + type(e).__name__
        print("END", json.dumps([path, outcome]), flush=True)
""")


BASE_MODELS = {
    "mlp": lambda: pgo.Sequential([pgo.layers.Linear(6, 5), pgo.layers.ReLU(), pgo.layers.Linear(5, 3)],
                                  input_shape=(6,)),
    "tokens": lambda: pgo.Sequential([pgo.layers.Embedding(9, 4), pgo.layers.GlobalAveragePooling1D(),
                                      pgo.layers.Linear(4, 3)], input_shape=(5,)),
    "gpt": lambda: pgo.models.gpt(9, 5, 8, 1, 2),  # the pyggml-gpt layout: hyperparameter keys
    # llama.cpp's layout with a tokenizer, its matrices quantized (memory-mapped by load): Q8_0 blocks of
    # 32 values, Q4_K super-blocks of 256 (rows of 256)
    "llama-q8_0": lambda: pgo.models.llama(TOKENS.vocab_size, 5, 32, 1, 2, ffn_dim=32),
    "llama-q4_K": lambda: pgo.models.llama(TOKENS.vocab_size, 5, 256, 1, 2, ffn_dim=256),
}


def _base_file(tmp_path, kind: str = "mlp") -> bytes:
    model = BASE_MODELS[kind]()
    path = tmp_path / "base.gguf"
    if kind.startswith("llama-"):
        model.save(path, tokenizer=TOKENS, quantize=kind.split("-")[1])
    else:
        model.save(path)
    return path.read_bytes()


def _mutations(base: bytes, rng: np.random.Generator):
    n = len(base)
    for i in range(N_FILES):
        data = bytearray(base)
        kind = i % 6
        if kind == 0:  # truncation anywhere
            data = data[: int(rng.integers(0, n))]
        elif kind == 1:  # random bit flips
            for _ in range(int(rng.integers(1, 8))):
                pos = int(rng.integers(0, n))
                data[pos] ^= 1 << int(rng.integers(0, 8))
        elif kind == 2:  # random bytes over a header-sized region
            pos = int(rng.integers(0, min(n, 512)))
            data[pos:pos + 8] = rng.integers(0, 256, 8, dtype=np.uint8).tobytes()
        elif kind == 3:  # absurd counts / dimensions: a huge little-endian int64 at an aligned offset
            pos = int(rng.integers(0, min(n, 600) // 8)) * 8
            data[pos:pos + 8] = struct.pack("<q", int(rng.choice([-1, 2**62, 2**31, 2**40 + 7])))
        elif kind == 4:  # the tensor-count / kv-count fields (bytes 8..24 of the header)
            pos = 8 + 8 * int(rng.integers(0, 2))
            data[pos:pos + 8] = struct.pack("<Q", int(rng.integers(0, 2**63)))
        else:  # byte chunk duplicated or deleted in the metadata
            a = int(rng.integers(0, min(n, 700)))
            b = a + int(rng.integers(1, 32))
            data = data[:a] + data[b:] if rng.random() < 0.5 else data[:b] + data[a:b] + data[b:]
        yield bytes(data)


@pytest.mark.parametrize("kind", sorted(BASE_MODELS))
def test_mutated_gguf_files_never_crash(tmp_path, kind):
    base = _base_file(tmp_path, kind)
    rng = np.random.default_rng(SEED)
    paths = []
    for i, blob in enumerate(_mutations(base, rng)):
        p = tmp_path / f"m{i:04d}.gguf"
        p.write_bytes(blob)
        paths.append(str(p))
    chunks = [paths[i::N_CHILDREN] for i in range(N_CHILDREN)]
    outcomes = {}
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, *chunk], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for chunk in chunks]
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        started = [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("BEGIN ")]
        for line in out.splitlines():
            if line.startswith("END "):
                path, outcome = json.loads(line[4:])
                outcomes[path] = outcome
        assert proc.returncode == 0, (f"child died with code {proc.returncode} on {started[-1] if started else '?'}"
                                      f"\n{err[-3000:]}")
    assert len(outcomes) == N_FILES
    kinds = {}
    for v in outcomes.values():
        kinds[v] = kinds.get(v, 0) + 1
    # Most mutations must be rejected; some (flips in float data) still load, which is fine.
    assert sum(v for k, v in kinds.items() if k.startswith("error")) > N_FILES // 2, kinds
    print("outcomes:", kinds)


def test_hostile_metadata_is_rejected(tmp_path):
    model = pgo.Sequential([pgo.layers.Linear(4, 2)], input_shape=(4,))
    good = tmp_path / "good.gguf"
    model.save(good)
    cases = {
        "config not JSON": {"pyggml_opt.config": "{not json"},
        "unknown layer": {"pyggml_opt.config": json.dumps({"type": "Sequential", "layers": [
            {"class": "Evil", "name": None, "config": {}}]})},
        "absurd layer size": {"pyggml_opt.config": json.dumps({"type": "Sequential", "layers": [
            {"class": "Linear", "name": None, "config": {"in_features": 4, "out_features": 2**40}}]})},
        "wrong input shape": {"pyggml_opt.input_shape": "[5]"},
        "unknown arch": {"general.architecture": "llama"},
        "config is a number": {"pyggml_opt.config": 7},
    }
    weights = model.get_weights()
    for what, overrides in cases.items():
        path = tmp_path / "bad.gguf"
        with GGUFFile() as f:
            meta = {"general.architecture": "pyggml_opt", "pyggml_opt.config": json.dumps(serialize(model)),
                    "pyggml_opt.input_shape": "[4]", "pyggml_opt.loss": ""}
            meta.update(overrides)
            for k, v in meta.items():
                f.set(k, v)
            for k, v in weights.items():
                f.add_tensor(k, v)
            f.write(path)
        with pytest.raises((ValueError, MemoryError)):
            pgo.load(path)
    # a tensor of the wrong shape
    path = tmp_path / "shape.gguf"
    with GGUFFile() as f:
        f.set("general.architecture", "pyggml_opt")
        f.set("pyggml_opt.config", json.dumps(serialize(model)))
        f.set("pyggml_opt.input_shape", "[4]")
        f.add_tensor("0.weight", np.zeros((3, 4), np.float32))
        f.add_tensor("0.bias", np.zeros((2,), np.float32))
        f.write(path)
    with pytest.raises(ValueError, match="0.weight"):
        pgo.load(path)
    with pytest.raises(FileNotFoundError):
        pgo.load(tmp_path / "missing.gguf")
