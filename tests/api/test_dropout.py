"""Dropout: the fraction kept during training, a new mask every step, the identity in predict and
evaluate, seeded masks (equal seeds: bit-identical weights; resuming draws the same masks), saving."""
import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L
from support import FAST, X, Y, same_weights


def identity_then_dropout(rate):
    m = pgo.Sequential([L.Linear(10, 10), L.Dropout(rate)])
    m.build((10,))
    m.set_weights({"0.weight": np.eye(10), "0.bias": np.zeros(10)})
    return m


def test_the_fraction_kept_and_a_new_mask_every_step():
    # outputs = mask / 0.7 for inputs of ones; loss "sum" reports their sum, so each epoch's loss * 0.7 /
    # 10,000 is the fraction kept, a binomial mean of 10,000 draws (standard deviation 0.0046)
    x = np.ones((1000, 10), np.float32)
    m = identity_then_dropout(0.3)
    h = m.fit(x, None, epochs=4, batch_size=1000, loss="sum", optimizer=pgo.SGD(lr=1e-12), **FAST)
    kept = np.array(h["loss"]) * 0.7 / 10_000
    assert np.abs(kept - 0.7).max() < 0.02
    assert len(set(h["loss"])) == 4          # a different mask every step
    np.testing.assert_allclose(m.predict(x, logits=True), 1.0, atol=1e-5)   # predict: no dropout


def test_predict_and_evaluate_ignore_dropout():
    with_drop = pgo.Sequential([L.Linear(6, 16), L.ReLU(), L.Dropout(0.5), L.Linear(16, 3)])
    plain = pgo.Sequential([L.Linear(6, 16), L.ReLU(), L.Linear(16, 3)])
    with_drop.fit(X, Y, epochs=2, batch_size=8, validation_split=0.25, **FAST)
    plain.build((6,))
    w = with_drop.get_weights()
    plain.set_weights({"0.weight": w["0.weight"], "0.bias": w["0.bias"], "2.weight": w["3.weight"],
                       "2.bias": w["3.bias"]})
    np.testing.assert_array_equal(with_drop.predict(X, logits=True), plain.predict(X, logits=True))
    assert with_drop.evaluate(X, Y) == plain.evaluate(X, Y)


def test_seeded_masks():
    def train(seed):
        m = pgo.Sequential([L.Linear(6, 16), L.ReLU(), L.Dropout(0.5), L.Linear(16, 3)])
        m.build((6,), seed=0)
        m.fit(X, Y, epochs=3, batch_size=8, seed=seed, **FAST)
        return m.get_weights()

    assert same_weights(train(1), train(1))
    assert not same_weights(train(1), train(2))


def test_resuming_draws_the_same_masks(tmp_path):
    kw = dict(batch_size=8, seed=3, **FAST)

    def model():
        m = pgo.Sequential([L.Linear(6, 16), L.ReLU(), L.Dropout(0.4), L.Linear(16, 3)])
        m.build((6,), seed=0)
        return m

    straight = model()
    straight.fit(X, Y, epochs=4, **kw)
    first = model()
    first.fit(X, Y, epochs=2, callbacks=[pgo.ModelCheckpoint(tmp_path / "ckpt-{epoch}.gguf")], **kw)
    resumed = model()
    resumed.fit(X, Y, epochs=4, resume_from=tmp_path / "ckpt-2.gguf", **kw)
    assert same_weights(resumed.get_weights(), straight.get_weights())


def test_rate_zero_is_no_dropout_and_checks(tmp_path):
    a = pgo.Sequential([L.Linear(6, 3), L.Dropout(0.0)])
    b = pgo.Sequential([L.Linear(6, 3)])
    for m in (a, b):
        m.build((6,), seed=0)
        m.fit(X, Y, epochs=2, batch_size=8, **FAST)
    assert same_weights(a.get_weights(), b.get_weights())
    with pytest.raises(ValueError, match="rate must be in"):
        L.Dropout(1.0)
    m = pgo.Sequential([L.Linear(6, 3), L.Dropout(0.2)], input_shape=(6,))
    m.save(tmp_path / "d.gguf")
    back = pgo.load(tmp_path / "d.gguf")
    assert back.layers[1].rate == 0.2
    np.testing.assert_array_equal(back.predict(X), m.predict(X))


def test_shape_queries_leave_the_built_model_as_it_is():
    """Layer.infer / output_shape and Network.shapes_for are queries: asking about another input shape
    changes neither a layer nor the model (the step inputs of the training graph stay those of the
    shape the model was built for; a Dropout once took the mask shape of the last query)."""
    m = pgo.Sequential([L.Dropout(0.5), L.Flatten(), L.Linear(12, 3)], input_shape=(2, 6))
    assert m.step_inputs() == {"0.mask": (2, 6)}
    assert m.layers[0].infer((3, 4)) == L.LayerShapes((3, 4), step_inputs={"mask": (3, 4)})
    assert m.layers[0].output_shape((4, 3)) == (4, 3)
    assert m.shapes_for((3, 4)) == {"2.weight": (3, 12), "2.bias": (3,)}
    assert m.step_inputs() == {"0.mask": (2, 6)}
    x = np.random.default_rng(0).normal(size=(16, 2, 6)).astype(np.float32)
    h = m.fit(x, np.arange(16) % 3, epochs=1, batch_size=8, **FAST)
    assert np.isfinite(h["loss"]).all()
