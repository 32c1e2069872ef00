"""Fine-tuning windows (``data.Examples.windows``) and what fit makes of them: one example per row, its
padding neither trained nor seen; a language model trains on windows shorter than its context (its
LoRA dropout masks sized to them); the loss is the mean over the targets' tokens, equal to a float64
reference computed on every example alone, at its own length."""
import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt.data import Examples
from pyggml_opt.nn.losses import IGNORE_INDEX
from support import FAST

VOCAB, CONTEXT = 40, 32


def examples(lengths=(9, 5, 14, 7), seed=0) -> Examples:
    """Examples of random ids whose first ~third (a prompt) is not trained."""
    rng = np.random.default_rng(seed)
    ids = [rng.integers(1, VOCAB, n).astype(np.int32) for n in lengths]
    trained = [np.arange(n) >= n // 3 for n in lengths]
    starts = np.r_[0, np.cumsum(lengths)]
    return Examples(np.concatenate(ids), np.concatenate(trained), starts, "completions")


def model(seed=0, **lora):
    m = pgo.models.llama(VOCAB, CONTEXT, 16, 2, 2)
    m.build((CONTEXT,), seed=seed)
    if lora:
        m.enable_lora(**lora)
    return m


def log_softmax64(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def test_windows_are_the_examples_padded_after_their_end():
    ex = examples()
    x, y, w = ex.windows(pad_id=0)
    assert x.shape == y.shape == (4, 13) and x.dtype == y.dtype == np.int32
    for i in range(4):
        ids, trained = ex.example(i)
        n = len(ids) - 1
        np.testing.assert_array_equal(x[i, :n], ids[:-1])
        np.testing.assert_array_equal(y[i, :n], np.where(trained[1:], ids[1:], IGNORE_INDEX))
        assert (x[i, n:] == 0).all() and (y[i, n:] == IGNORE_INDEX).all()
        assert w[i] == trained[1:].sum()
    assert w.sum() == ex.n_targets
    assert ex.windows(20)[0].shape == (4, 20)
    with pytest.raises(ValueError, match="an example has 14 tokens, more than windows of 10 steps hold"):
        ex.windows(10)


def test_the_loss_of_padded_windows_is_every_examples_own_and_padding_does_not_matter():
    ex = examples()
    m = model()
    x, y, w = ex.windows(pad_id=0)
    # the reference: each example alone at its own length, float64 log-softmax of its logits
    nll, count = 0.0, 0
    for i in range(len(ex)):
        ids, trained = ex.example(i)
        z = m.predict(ids[None, :-1], logits=True)[0].astype(np.float64)
        picked = np.take_along_axis(log_softmax64(z), ids[1:, None], axis=-1)[:, 0]
        nll -= picked[trained[1:]].sum()
        count += int(trained[1:].sum())
    sgd = dict(epochs=1, batch_size=4, shuffle=False, optimizer=pgo.SGD(lr=0.1), **FAST)
    h = m.fit(x, y, sample_weight=w, **sgd)
    assert h["loss"][0] == pytest.approx(nll / count, rel=1e-5)
    # other padding ids (which the model sees after each example's end) train bit-identically
    other = model()
    x2 = x.copy()
    x2[y == IGNORE_INDEX] = np.where(np.arange(x.shape[1]) >= ex.lengths()[:, None] - 1, 7, x)[y == IGNORE_INDEX]
    assert not np.array_equal(x2, x)
    other.fit(x2, y, sample_weight=w, **sgd)
    for k, v in m.get_weights().items():
        np.testing.assert_array_equal(other.get_weights()[k], v, err_msg=k)


def test_a_language_model_trains_and_validates_on_windows_shorter_than_its_context():
    ex = examples(lengths=(6, 9, 11, 8))
    x, y, w = ex.windows()
    assert x.shape[1] == 10 < CONTEXT
    m = model(rank=4, alpha=8, dropout=0.1, seed=0)   # dropout masks of the windows' length
    h = m.fit(x, y, sample_weight=w, epochs=20, batch_size=2, validation_data=(x, y),
              optimizer=pgo.AdamW(lr=1e-2), **FAST)
    assert h["val_loss"][-1] < 0.6 * h["val_loss"][0]   # the adapters alone learn the examples
    assert m.predict(x).shape == (4, 10, VOCAB)
    with pytest.raises(ValueError, match="validation_data\\[0\\] has samples of shape \\(8,\\), x of \\(10,\\)"):
        m.fit(x, y, validation_data=(x[:, :8], y[:, :8]), **FAST)
    with pytest.raises(ValueError, match="sequences of 33 ids, longer than the model's context of 32"):
        m.fit(np.zeros((2, CONTEXT + 1), np.int32), np.zeros((2, CONTEXT + 1), np.int32), **FAST)


def test_packed_windows_hold_every_example_once_at_its_own_positions():
    ex = examples(lengths=(9, 5, 14, 7, 3, 11, 6))
    x, y, w = ex.packed(16)
    assert x.shape == (4, 3, 16) and y.shape == (4, 16) and w.sum() == ex.n_targets
    found = []
    for r in range(len(x)):
        ids, positions, documents = x[r]
        for d in np.unique(documents):
            steps = np.flatnonzero(documents == d)
            assert (np.diff(steps) == 1).all()   # a document's steps are one run
            if (y[r, steps] == IGNORE_INDEX).all() and (ids[steps] == 0).all():
                continue  # the padding, after the documents
            np.testing.assert_array_equal(positions[steps], np.arange(len(steps)))
            found.append((tuple(ids[steps]), tuple(y[r, steps])))
    want = []
    for i in range(len(ex)):
        ids, trained = ex.example(i)
        want.append((tuple(ids[:-1]), tuple(np.where(trained[1:], ids[1:], IGNORE_INDEX))))
    assert sorted(found) == sorted(want)


@pytest.mark.parametrize("family", ["llama", "gpt"])
def test_packed_windows_train_and_predict_as_every_example_alone(family):
    """No example attends to another packed beside it, and each sees its own positions (rotary ones in a
    llama, a gpt's learnt ones): one SGD step on packed windows equals one on padded windows, and
    predict's logits of a packed example are those of the example alone."""
    ex = examples(lengths=(9, 5, 14, 7, 3, 11, 6))
    make = {"llama": lambda: pgo.models.llama(VOCAB, CONTEXT, 16, 2, 2),
            "gpt": lambda: pgo.models.gpt(VOCAB, CONTEXT, 16, 2, 2)}[family]
    runs = []
    for x, y, w in (ex.windows(16), ex.packed(16)):
        m = make()
        h = m.fit(x, y, sample_weight=w, epochs=1, batch_size=len(x), shuffle=False, optimizer=pgo.SGD(lr=0.1),
                  **FAST)
        runs.append((h["loss"][0], m))
    (padded_loss, padded), (packed_loss, packed) = runs
    assert packed_loss == pytest.approx(padded_loss, rel=1e-6)
    for k, v in padded.get_weights().items():
        np.testing.assert_allclose(packed.get_weights()[k], v, rtol=0, atol=1e-6, err_msg=k)
    x, _, _ = ex.packed(16)
    logits = packed.predict(x, logits=True)
    documents = x[0, 2]
    for d in np.unique(documents)[:-1]:
        steps = np.flatnonzero(documents == d)
        alone = packed.predict(x[0, 0, steps][None], logits=True)[0]
        np.testing.assert_allclose(logits[0, steps], alone, rtol=0, atol=1e-5)


def test_bad_packed_windows_are_refused():
    m = model()
    x, y, _ = examples().packed(16)
    bad = x.copy()
    bad[0, 1, 0] = CONTEXT
    with pytest.raises(ValueError, match=r"positions \(row 1\) must be in \[0, 32\)"):
        m.fit(bad, y, **FAST)
    bad = x.copy()
    bad[0, 2, 0] = -1
    with pytest.raises(ValueError, match=r"document indices \(row 2\) must be >= 0"):
        m.predict(bad)
    with pytest.raises(ValueError, match=r"samples of shape \(3, 33\)"):
        m.predict(np.zeros((1, 3, CONTEXT + 1), np.int32))
    with pytest.raises(ValueError, match=r"samples of shape \(2, 16\)"):
        m.predict(x[:, :2])
    with pytest.raises(ValueError, match="packed windows of 12 steps cannot hold an example of 14 tokens"):
        examples().packed(12)
