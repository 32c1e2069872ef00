"""TransformerBlock, PositionalEmbedding and RoPE against float64 numpy (forward), finite differences
(gradients), and the causal property (no step sees a later one)."""
import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L
from support import FAST, check_gradients

V, T, D, H, N = 11, 6, 8, 2, 4
GELU_K = np.sqrt(2 / np.pi)


def tokens(seed=0, n=N):
    return np.random.default_rng(seed).integers(0, V, (n, T))


def np_layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def np_rope(x, base=10000.0):
    """x (n, T, heads, d): GPT-NeoX's rotate-half rotary embedding, positions 0 .. T-1."""
    d = x.shape[-1]
    theta = np.arange(x.shape[1])[:, None] * base ** (-np.arange(d // 2) * 2.0 / d)  # (T, d/2)
    cos, sin = np.cos(theta)[None, :, None, :], np.sin(theta)[None, :, None, :]
    a, b = x[..., :d // 2], x[..., d // 2:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)


def np_attention(x, w, p, rope=False):
    n = len(x)

    def heads(name):
        y = (x @ w[f"{p}w{name}.weight"].T + w[f"{p}w{name}.bias"]).reshape(n, T, H, D // H)
        return (np_rope(y) if rope and name in "qk" else y).transpose(0, 2, 1, 3)

    s = heads("q") @ heads("k").transpose(0, 1, 3, 2) / np.sqrt(D // H) + np.triu(np.full((T, T), -np.inf), 1)
    a = np.exp(s - s.max(axis=-1, keepdims=True))
    a /= a.sum(axis=-1, keepdims=True)
    return (a @ heads("v")).transpose(0, 2, 1, 3).reshape(n, T, D) @ w[f"{p}wo.weight"].T + w[f"{p}wo.bias"]


def np_block(x, w, p, rope=False):
    x = x + np_attention(np_layer_norm(x, w[f"{p}ln1.weight"], w[f"{p}ln1.bias"]), w, f"{p}attn.", rope)
    h = np_layer_norm(x, w[f"{p}ln2.weight"], w[f"{p}ln2.bias"]) @ w[f"{p}fc1.weight"].T + w[f"{p}fc1.bias"]
    h = 0.5 * h * (1 + np.tanh(GELU_K * (h + 0.044715 * h ** 3)))
    return x + h @ w[f"{p}fc2.weight"].T + w[f"{p}fc2.bias"]


def np_gpt(w, x, n_layers, rope=False):
    h = w["tok.weight"][x] + (0 if rope else w["pos.weight"][:x.shape[1]])
    for i in range(n_layers):
        h = np_block(h, w, f"blk{i}.", rope)
    return np_layer_norm(h, w["ln_f.weight"], w["ln_f.bias"]) @ w["head.weight"].T + w["head.bias"]


def weights64(m, seed=7, scale=0.3):
    """The model's weights, its zero biases and unit norm weights perturbed so that every parameter
    matters, as float64 (and set on the model as float32)."""
    rng = np.random.default_rng(seed)
    w = {k: (v + scale * rng.standard_normal(v.shape)).astype(np.float32) for k, v in m.get_weights().items()}
    m.set_weights(w)
    return {k: v.astype(np.float64) for k, v in w.items()}


def cross_entropy(z, y):
    z = z - z.max(axis=-1, keepdims=True)
    lsm = z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return float(-np.take_along_axis(lsm, y[..., None], axis=-1).mean())


@pytest.mark.parametrize("positions", ["learned", "rope"])
def test_gpt_forward_matches_numpy(positions):
    m = pgo.models.gpt(V, T, D, 2, H, positions=positions)
    w = weights64(m)
    x = tokens()
    # float32 through two blocks, each value O(1): 1e-5 absolute is ~100 float32 ulps
    np.testing.assert_allclose(m.predict(x, logits=True), np_gpt(w, x, 2, positions == "rope"), rtol=0, atol=1e-5)


@pytest.mark.parametrize("positions", ["learned", "rope"])
def test_gpt_gradients_match_finite_differences(positions):
    m = pgo.models.gpt(V, T, D, 1, H, positions=positions)
    w0 = weights64(m)
    x = tokens(1)
    y = (x * 3 + 1) % V
    m.fit(x, y, epochs=1, batch_size=N, shuffle=False, optimizer=pgo.SGD(lr=1.0), **FAST)
    got = {k: w0[k] - v for k, v in m.get_weights().items()}
    names = ["tok.weight", "blk0.ln1.weight", "blk0.ln1.bias", "blk0.attn.wq.weight", "blk0.attn.wk.weight", "blk0.attn.wv.weight",
             "blk0.attn.wo.bias", "blk0.fc1.weight", "blk0.fc2.bias", "ln_f.weight", "head.weight"]
    names += ["pos.weight"] if positions == "learned" else []
    check_gradients(lambda w: cross_entropy(np_gpt(w, x, 1, positions == "rope"), y), w0, got, names,
                    eps=1e-6, tol=5e-6)


@pytest.mark.parametrize("positions", ["learned", "rope"])
def test_no_step_sees_a_later_one(positions):
    m = pgo.models.gpt(V, T, D, 2, H, positions=positions)
    x = tokens()
    changed = x.copy()
    changed[:, 4:] = (changed[:, 4:] + 1) % V
    a, b = m.predict(x, logits=True), m.predict(changed, logits=True)
    np.testing.assert_array_equal(a[:, :4], b[:, :4])
    assert np.abs(a[:, 4:] - b[:, 4:]).max() > 1e-3


def test_rope_op_matches_numpy_and_rotates_relative_positions():
    x = np.random.default_rng(3).standard_normal((2, 5, 3, 4)).astype(np.float32)
    m = pgo.FunctionModel(lambda t, p: pgo.ops.flatten(pgo.ops.rope(t)), {}, input_shape=(5, 3, 4))
    np.testing.assert_allclose(m.predict(x).reshape(x.shape), np_rope(x.astype(np.float64)), rtol=0, atol=1e-6)
    # the point of RoPE: q.k depends on the distance of the two steps only
    q = np.broadcast_to(x[:1, :1], (1, 5, 3, 4)).copy()
    r = m.predict(q).reshape(q.shape).astype(np.float64)
    dots = np.einsum("nthd,nshd->nhts", r, r)[0, 0]
    np.testing.assert_allclose(np.diag(dots, 1), np.full(4, dots[0, 1]), rtol=1e-5)


def test_rope_refuses_an_odd_head_size():
    with pytest.raises(ValueError, match="even head size"):
        L.MultiHeadAttention(6, 2, rope=True)
    m = pgo.FunctionModel(lambda t, p: pgo.ops.rope(t), {})
    with pytest.raises(ValueError, match="even d_head"):
        m.build((5, 3, 3))


def test_positional_embedding_adds_the_first_rows_and_checks_length():
    m = pgo.Sequential([L.Embedding(V, D), L.PositionalEmbedding(8, D)], input_shape=(T,))
    w = m.get_weights()
    x = tokens()
    np.testing.assert_allclose(m.predict(x), w["0.weight"][x] + w["1.weight"][:T], rtol=0, atol=1e-6)
    assert np.std(w["1.weight"]) < 0.03  # GPT-2's N(0, 0.02^2)
    with pytest.raises(ValueError, match="at most max_length=4"):
        pgo.Sequential([L.Embedding(V, D), L.PositionalEmbedding(4, D)], input_shape=(T,))


def test_block_dropout_trains_differently_and_predicts_deterministically():
    x, y = tokens(0, 32), tokens(1, 32)
    runs = []
    for _ in range(2):
        m = pgo.models.gpt(V, T, D, 1, H, dropout=0.3)
        m.fit(x, y, epochs=2, batch_size=8, seed=3, **FAST)
        runs.append(m.get_weights())
    assert all(np.array_equal(runs[0][k], runs[1][k]) for k in runs[0])  # equal seeds, equal masks
    p1, p2 = m.predict(x[:4], logits=True), m.predict(x[:4], logits=True)
    np.testing.assert_array_equal(p1, p2)  # no dropout outside training
    plain = pgo.models.gpt(V, T, D, 1, H)
    assert [k for k in m.param_shapes if k not in plain.param_shapes] == []  # Dropout adds no parameters


def test_gpt_layout_and_parameter_count():
    m = pgo.models.gpt(100, 64, 128, 4, 4)
    assert m.input_shape == (64,) and m.output_shape == (64, 100) and m.input_dtype == "int32"
    per_block = 2 * 128 * 2 + 4 * (128 * 128 + 128) + (128 * 512 + 512) + (512 * 128 + 128)
    expected = 100 * 128 + 64 * 128 + 4 * per_block + 2 * 128 + 128 * 100 + 100
    assert sum(int(np.prod(s)) for s in m.param_shapes.values()) == expected
    assert "pos.weight" not in pgo.models.gpt(100, 64, 128, 4, 4, positions="rope").param_shapes
    with pytest.raises(ValueError, match="multiple of n_heads"):
        pgo.models.gpt(100, 64, 130, 4, 4)
    with pytest.raises(ValueError, match="positions"):
        pgo.models.gpt(100, 64, 128, 4, 4, positions="sinusoidal")


def masked_model(causal=False):
    # PositionalEmbedding(T, D) adds its first k rows to a sequence of k steps: the same weights serve
    # every length up to T
    return pgo.Sequential([L.Embedding(V, D, mask_zero=True), L.PositionalEmbedding(T, D),
                           L.TransformerBlock(D, H, causal=causal), L.MultiHeadAttention(D, H, causal=causal),
                           L.GlobalAveragePooling1D(), L.Linear(D, 3)])


@pytest.mark.parametrize("causal", [False, True])
def test_padding_changes_nothing_with_mask_zero(causal):
    # a sequence padded with id 0 gives the outputs of the same sequence without the padding: no step
    # attends to padding and the pooling averages the tokens only
    m = masked_model(causal).build((T,), seed=0)
    w = weights64(m)
    x = tokens(4)
    x[x == 0] = 1
    lengths = [2, 3, 5, 6]
    padded = np.array([np.r_[row[:k], np.zeros(T - k, int)] for row, k in zip(x, lengths)])
    got = m.predict(padded, logits=True)
    for row, k in enumerate(lengths):
        short = masked_model(causal).build((k,))
        short.set_weights({name: v.astype(np.float32) for name, v in w.items()})
        np.testing.assert_allclose(got[row], short.predict(x[row:row + 1, :k], logits=True)[0], rtol=0, atol=2e-6)
    unmasked = pgo.Sequential.from_config(m.get_config())
    assert unmasked.layers[0].mask_zero  # saved in the configuration
    plain = pgo.Sequential([L.Embedding(V, D), *masked_model(causal).layers[1:]]).build((T,))
    plain.set_weights(m.get_weights())
    assert np.abs(plain.predict(padded, logits=True) - got).max() > 1e-3  # without the mask padding counts


def test_masked_model_trains_and_pools_tokens_only():
    # class = whether token 5 occurs among the tokens of a padded sequence; the padding carries no signal
    rng = np.random.default_rng(0)
    x = rng.integers(1, V, (256, T))
    x[x == 5] = 6
    has = rng.random(256) < 0.5
    x[has, rng.integers(0, 3, has.sum())] = 5
    lengths = rng.integers(3, T + 1, 256)
    x[np.arange(T)[None, :] >= lengths[:, None]] = 0
    m = pgo.Sequential([L.Embedding(V, 16, mask_zero=True), L.TransformerBlock(16, 2, causal=False),
                        L.GlobalAveragePooling1D(), L.Linear(16, 2)])
    h = m.fit(x, has.astype(int), epochs=30, batch_size=32, validation_split=0.25, optimizer=pgo.AdamW(lr=3e-3), **FAST)
    assert h["val_accuracy"][-1] > 0.9  # measured: 1.0 (seed 0)


class NormedMLP(L.Block):
    """A block of a BatchNorm1d and a Linear: its buffers and training updates go through the Block."""

    def __init__(self, dim, name=None):
        super().__init__(name)
        self.dim = dim
        self.children = {"bn": L.BatchNorm1d(dim), "fc": L.Linear(dim, dim)}

    def infer(self, input_shape):
        return self.infer_children({"bn": input_shape, "fc": input_shape}, input_shape)

    def forward(self, x, params):
        return self.call("fc", self.call("bn", x, params), params)

    def get_config(self):
        return {**super().get_config(), "dim": self.dim}


def test_a_block_carries_its_sublayers_buffers_and_updates():
    m = pgo.Sequential([NormedMLP(4), L.Linear(4, 2)]).build((4,))
    assert set(m.param_shapes) - set(m.get_weights()) == set()
    assert {"0.bn.running_mean", "0.bn.running_var"} <= set(m.param_shapes)
    x = np.random.default_rng(0).normal(3.0, 2.0, (64, 4)).astype(np.float32)
    m.fit(x, np.zeros(64, int), epochs=1, batch_size=64, shuffle=False, optimizer=pgo.SGD(lr=1e-9), **FAST)
    w = m.get_weights()
    # one step of momentum 0.1 from (0, 1) towards the batch's mean and unbiased variance
    np.testing.assert_allclose(w["0.bn.running_mean"], 0.1 * x.mean(0), rtol=1e-5)
    np.testing.assert_allclose(w["0.bn.running_var"], 0.9 + 0.1 * x.var(0, ddof=1), rtol=1e-5)


class CountTokens(L.Layer):
    """A layer of the user's that reads the sequence state: each step's output is the number of tokens
    (not padding) in its sequence."""

    keeps_mask = True

    def infer(self, input_shape):
        return L.LayerShapes(tuple(input_shape))

    def forward(self, x, params, state=None):
        n, steps, dim = x.shape
        assert state is not None and state.positions is None and not state.caches  # not a decoding graph
        if state.padding is None:
            return pgo.ops.scale(x, 0.0, float(steps))
        count = pgo.ops.sum_rows(state.padding)                                  # (n, 1)
        return pgo.ops.add(pgo.ops.scale(x, 0.0), pgo.ops.reshape(count, n, 1, 1))


def test_a_forward_that_takes_state_gets_the_padding_mask():
    """As Keras passes ``mask`` to a call that takes it: the padding mask of Embedding(mask_zero=True)
    reaches a layer whose forward has a ``state`` argument, as ``state.padding``; layers without it are
    called as before."""
    x = np.array([[3, 4, 0, 0, 0, 0], [1, 2, 3, 4, 5, 6]], np.int32)
    for mask_zero, expected in ((True, [2, 6]), (False, [6, 6])):
        m = pgo.Sequential([L.Embedding(V, 4, mask_zero=mask_zero), CountTokens(), L.Linear(4, 4)], input_shape=(T,))
        m.set_weights({"2.weight": np.eye(4, dtype=np.float32), "2.bias": np.zeros(4, np.float32)})
        out = m.predict(x)
        np.testing.assert_array_equal(out[:, :, 0], np.repeat(np.array(expected, np.float32)[:, None], T, axis=1))


@pytest.mark.parametrize("activation", ["silu", "gelu_tanh"])
def test_gated_mlp_matches_numpy(activation):
    """GatedMLP: down(act(gate x) * up x), SiLU (SwiGLU: Llama's) or GELU's tanh form (GeGLU: Gemma's)."""
    m = pgo.Sequential([L.GatedMLP(D, 12, activation)])
    m.build((T, D), seed=1)
    w = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    x = np.random.default_rng(2).standard_normal((N, T, D)).astype(np.float32)
    g = x.astype(np.float64) @ w["0.w_gate.weight"].T
    act = g / (1 + np.exp(-g)) if activation == "silu" else 0.5 * g * (1 + np.tanh(GELU_K * (g + 0.044715 * g ** 3)))
    ref = (act * (x @ w["0.w_up.weight"].T)) @ w["0.w_down.weight"].T
    # float32 through two small products: measured max |difference| 5e-8 (outputs up to 0.35)
    np.testing.assert_allclose(m.predict(x), ref, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="activation"):
        L.GatedMLP(D, 12, "relu")
