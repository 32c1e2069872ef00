"""How far a single float32 rounding upstream moves a GGUF model's logits, by weight type: the bound the
kernels imply for any two implementations that agree in float32 (pyggml_opt and llama.cpp agree to 1e-6
on float32 files) but round one intermediate value differently. The quantized types' MUL_MAT rounds its
float32 activations to the weight type's partner (8-bit blocks, F16, BF16), so a one-ulp difference that
moves a value across a rounding step changes it by a step (1/127 of its block's largest value), and
random-weight models carry that to the logits.

Here the attention norm's weights of block 0 are scaled by (1 + 2**-23), one ulp, and the logits of 10
prompts of 2 to 40 tokens compared with the unchanged model's, pyggml_opt's kernels on both sides. Printed:
the largest difference over the largest logit.

    python benchmarks/gguf_rounding.py F32.gguf Q8_0.gguf Q4_K_M.gguf ...   # files of tests/integration/test_gguf_models.py
"""
import sys

import numpy as np

import pyggml_opt as pgo


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


def main() -> None:
    rng = np.random.default_rng(1)
    for path in sys.argv[1:]:
        m = pgo.load(path)
        prompts = [rng.integers(0, m.args.vocab_size, int(n)).astype(np.int32) for n in rng.integers(2, 40, 10)]
        base = [m.predict(p[None], logits=True)[0] for p in prompts]
        w = m.get_weights()["blk0.attn_norm.weight"]
        m.set_weights({"blk0.attn_norm.weight": (w * np.float32(1 + 2**-23)).astype(np.float32)})
        moved = [m.predict(p[None], logits=True)[0] for p in prompts]
        print(f"{path}: one ulp upstream moves the logits by {max(relative(a, b) for a, b in zip(moved, base)):.2e}")


if __name__ == "__main__":
    main()
