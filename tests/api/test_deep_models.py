"""Models deeper than ggml's default graph size holds: ggml-opt made static training graphs of 2048
nodes for every model (vendor patch 0044 makes it a parameter, ``core.opt_context`` sizes it from the
forward graph), so a llama of 12 blocks, or of 8 with LoRA adapters, aborted the process in
ggml_opt_init. Each of these trains with everything that adds nodes to the training graph (sample
weights, metrics of the outputs, gradient clipping, LoRA dropout)."""
import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L
from support import FAST

CLIP = dict(optimizer=pgo.AdamW(lr=1e-3, global_clipnorm=1.0))


def tokens(n=4, steps=32, vocab=500):
    x = np.random.default_rng(0).integers(0, vocab, (n, steps + 1)).astype(np.int32)
    return x[:, :-1], x[:, 1:]


@pytest.mark.parametrize("make, lora", [
    (lambda: pgo.models.llama(500, 32, 32, 24, 4, 2, 64, tie_embeddings=True, qkv_bias=True, rope_mode="neox"), False),
    (lambda: pgo.models.llama(500, 32, 32, 24, 4, 2, 64, tie_embeddings=True, qkv_bias=True, rope_mode="neox"), True),
    (lambda: pgo.models.gpt(500, 32, 32, 24, 2), False),
])
def test_24_blocks_train(make, lora):
    model = make()
    if lora:
        model.enable_lora(rank=4, dropout=0.1)
    x, y = tokens()
    h = model.fit(x, y, epochs=2, batch_size=4, sample_weight=np.ones(4), metrics=["accuracy"], **CLIP, **FAST)
    assert np.isfinite(h["loss"]).all() and h["loss"][1] < h["loss"][0]


def test_a_300_layer_mlp_trains():
    layers = []
    for _ in range(300):
        layers += [L.Linear(16, 16), L.ReLU()]
    model = pgo.Sequential([*layers, L.Linear(16, 3)], input_shape=(16,))
    x = np.random.default_rng(0).normal(size=(8, 16)).astype(np.float32)
    h = model.fit(x, np.arange(8) % 3, epochs=1, batch_size=8, sample_weight=np.ones(8), **CLIP, **FAST)
    assert np.isfinite(h["loss"]).all()
