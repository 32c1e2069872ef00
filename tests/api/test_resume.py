"""Resume: training stopped after epoch k and resumed from its checkpoint ends with the same weights as
uninterrupted training (same data, seed and hyperparameters), for AdamW (moments + iteration restored
through vendor/patches/0002) and SGD."""
import numpy as np
import pytest

import pyggml_opt as pgo


def _data():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((300, 12)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] * x[:, 2] > 0).astype(np.int64) + (x[:, 3] > 0.5)
    return x, y


def _model():
    return pgo.Sequential([pgo.layers.Linear(12, 16), pgo.layers.GELU(), pgo.layers.Linear(16, 3)])


@pytest.mark.parametrize("make_opt,shuffle", [(lambda: pgo.AdamW(lr=lambda step: 1e-2 / (1 + 0.1 * step)), True),
                                              (lambda: pgo.SGD(lr=0.05, weight_decay=0.01), True),
                                              (lambda: pgo.AdamW(lr=1e-2), 10)], ids=["adamw", "sgd", "adamw-runs-of-10"])
def test_resume_from_checkpoint_matches_uninterrupted_training(tmp_path, make_opt, shuffle):
    x, y = _data()
    kw = dict(batch_size=64, physical_batch_size=32, validation_split=0.1, seed=5, verbose=0, n_threads=1,
              shuffle=shuffle)

    straight = _model()
    straight.fit(x, y, epochs=4, optimizer=make_opt(), **kw)

    first = _model()
    ckpt = tmp_path / "ckpt-{epoch}.gguf"
    first.fit(x, y, epochs=2, optimizer=make_opt(), callbacks=[pgo.ModelCheckpoint(ckpt)], **kw)
    resumed = _model()
    hist = resumed.fit(x, y, epochs=4, optimizer=make_opt(), resume_from=tmp_path / "ckpt-2.gguf", **kw)

    # the history goes on from the checkpoint's: the same metrics as the uninterrupted run
    assert hist.epoch == [0, 1, 2, 3] and resumed.history is hist
    assert hist["loss"] == straight.history["loss"] and hist["val_loss"] == straight.history["val_loss"]
    a, b = straight.get_weights(), resumed.get_weights()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])  # bit-identical on the CPU backend


def test_checkpoint_is_a_loadable_model_and_plain_models_are_not_checkpoints(tmp_path):
    x, y = _data()
    m = _model()
    m.fit(x, y, epochs=1, batch_size=50, verbose=0, callbacks=[pgo.ModelCheckpoint(tmp_path / "c.gguf")])
    loaded = pgo.load(tmp_path / "c.gguf")
    np.testing.assert_array_equal(loaded.predict(x), m.predict(x))
    m.save(tmp_path / "plain.gguf")
    with pytest.raises(ValueError, match="not a training checkpoint"):
        _model().fit(x, y, epochs=2, batch_size=50, verbose=0, resume_from=tmp_path / "plain.gguf")
    other = _model().build((12,))
    w0 = other.get_weights()
    with pytest.raises(ValueError, match="adamw"):
        other.fit(x, y, epochs=2, batch_size=50, verbose=0, optimizer=pgo.SGD(lr=0.1), resume_from=tmp_path / "c.gguf")
    assert all(np.array_equal(w0[k], v) for k, v in other.get_weights().items())  # refused before any change
    assert other.loss is None
