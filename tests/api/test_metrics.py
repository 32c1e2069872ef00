"""fit(metrics=...) and evaluate(metrics=...): top-k accuracy (per sample and per token), mae and mse
against float64 numpy on the outputs of the training step and of the trained model, their
uncertainties, evaluate's return forms, the callbacks' monitors, the progress line, metrics of one's
own and bad metrics; evaluate's mean per-token cross-entropy in nats on sequence outputs."""
import math

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import layers as L
from support import FAST, blobs, max_diff, mlp

C = 6  # classes: more than top_k_accuracy's k = 5


def classification(n=60, seed=0):
    # spread 3: overlapping blobs, so that neither accuracy is 0 or 1
    return blobs(n=n, n_features=6, n_classes=C, seed=seed, spread=3.0)


def top_k(z, ids, k):
    """Keras's sparse_top_k_categorical_accuracy per item: the target's output among the k largest."""
    target = np.take_along_axis(z, ids[..., None], axis=-1)
    return ((z > target).sum(axis=-1) < k).ravel()


def test_training_metrics_come_from_the_training_step_and_validation_from_the_trained_model():
    x, y = classification()
    m = mlp(n_out=C)
    z0 = m.predict(x[:45], logits=True).astype(np.float64)   # the outputs of the one training step below
    # one full-batch step over the first 45 samples; the last 15 validate
    h = m.fit(x, y, epochs=1, batch_size=45, shuffle=False, validation_split=0.25, optimizer=pgo.SGD(lr=0.1),
              metrics=["accuracy", "top_k_accuracy", pgo.TopKAccuracy(2)], **FAST)
    assert [k for k in h.keys() if not k.endswith("_unc")] == [
        "loss", "accuracy", "top_k_accuracy", "top2_accuracy", "val_loss", "val_accuracy", "val_top_k_accuracy",
        "val_top2_accuracy", "time", "lr"]
    # counts of samples: exact fractions (ties within float32 rounding have probability ~0 here)
    assert h["accuracy"][0] == (z0.argmax(axis=1) == y[:45]).mean()
    assert h["top_k_accuracy"][0] == top_k(z0, y[:45], 5).mean()
    assert h["top2_accuracy"][0] == top_k(z0, y[:45], 2).mean()
    assert 0 < h["top2_accuracy"][0] < 1
    zv = m.predict(x[45:], logits=True).astype(np.float64)
    assert h["val_top2_accuracy"][0] == top_k(zv, y[45:], 2).mean()
    assert h["val_top_k_accuracy"][0] == top_k(zv, y[45:], 5).mean()
    # the uncertainty of a fraction p of n is ggml-opt's binomial one, sqrt(p (1 - p) / (n - 1))
    p = h["top2_accuracy"][0]
    assert h["top2_accuracy_unc"][0] == pytest.approx(math.sqrt(p * (1 - p) / 44), rel=1e-12)


def test_metrics_accumulate_over_physical_batches_and_epochs_reset_them():
    x, y = classification()
    m = mlp(n_out=C)
    z0 = m.predict(x, logits=True)
    # lr 0: the weights stay, so every physical batch of both epochs sees the outputs z0
    h = m.fit(x, y, epochs=2, batch_size=20, physical_batch_size=5, optimizer=pgo.SGD(lr=1e-30),
              metrics=[pgo.TopKAccuracy(3)], **FAST)
    assert h["top3_accuracy"] == [top_k(z0, y, 3).mean()] * 2


def regression(n, n_in, n_out, seed):
    """Samples, float targets and a built linear model."""
    rng = np.random.default_rng(seed)
    m = pgo.Sequential([L.Linear(n_in, n_out)])
    m.build((n_in,), seed=seed)
    return rng.normal(size=(n, n_in)).astype(np.float32), rng.normal(size=(n, n_out)), m


def test_regression_metrics_match_numpy():
    x, t, m = regression(40, 5, 3, seed=2)
    z0 = m.predict(x[:30]).astype(np.float64)
    h = m.fit(x, t, epochs=1, batch_size=30, shuffle=False, validation_split=0.25, loss="huber",
              optimizer=pgo.SGD(lr=0.1), metrics=["mae", "mse"], **FAST)
    # float32 outputs of values of order 1: a relative 1e-6 is some float32 ulps
    mae, mse = np.abs(z0 - t[:30]).mean(axis=1), ((z0 - t[:30]) ** 2).mean(axis=1)
    assert h["mae"][0] == pytest.approx(mae.mean(), rel=1e-6)
    assert h["mse"][0] == pytest.approx(mse.mean(), rel=1e-6)
    assert h["mae_unc"][0] == pytest.approx(mae.std(ddof=1) / math.sqrt(30), rel=1e-5)
    zv = m.predict(x[30:]).astype(np.float64)
    assert h["val_mae"][0] == pytest.approx(np.abs(zv - t[30:]).mean(), rel=1e-6)
    assert h["val_mse"][0] == pytest.approx(((zv - t[30:]) ** 2).mean(), rel=1e-6)
    assert "accuracy" not in h   # only the metrics asked for


def test_metrics_other_than_accuracy_train_the_same_weights():
    """They make fit end the graph with its own cross-entropy (to read the outputs): the same training."""
    x, y = classification(n=96)
    a, b = mlp(n_out=C), mlp(n_out=C)
    ha = a.fit(x, y, epochs=3, batch_size=16, optimizer=pgo.AdamW(lr=1e-2), **FAST)
    hb = b.fit(x, y, epochs=3, batch_size=16, optimizer=pgo.AdamW(lr=1e-2), metrics=["accuracy", "top_k_accuracy"],
               **FAST)
    assert max_diff(a.get_weights(), b.get_weights()) < 1e-5   # float32 rounding of two loss graphs
    np.testing.assert_allclose(hb["loss"], ha["loss"], rtol=1e-5)
    assert hb["accuracy"] == ha["accuracy"]


def test_metrics_are_unweighted():
    x, y = classification()
    w = np.linspace(0.0, 2.0, len(x))
    m = mlp(n_out=C)
    z0 = m.predict(x, logits=True)
    h = m.fit(x, y, epochs=1, batch_size=len(x), sample_weight=w, optimizer=pgo.SGD(lr=0.1),
              metrics=["accuracy", pgo.TopKAccuracy(2)], **FAST)
    assert h["accuracy"][0] == (z0.argmax(axis=1) == y).mean()
    assert h["top2_accuracy"][0] == top_k(z0.astype(np.float64), y, 2).mean()


def test_top_k_per_token_of_sequence_outputs():
    vocab, steps, n = 7, 5, 12
    rng = np.random.default_rng(0)
    x = rng.integers(0, vocab, (n, steps))
    y = (x * 3 + 1) % vocab
    m = pgo.Sequential([L.Embedding(vocab, 4), L.Linear(4, vocab)])
    m.build((steps,), seed=1)
    z0 = m.predict(x, logits=True).astype(np.float64)
    h = m.fit(x, y, epochs=1, batch_size=n, optimizer=pgo.SGD(lr=0.5), metrics=[pgo.TopKAccuracy(3), "accuracy"],
              **FAST)
    assert h["top3_accuracy"][0] == top_k(z0, y, 3).mean()   # over the n * T tokens
    assert h["accuracy"][0] == (z0.argmax(axis=-1) == y).mean()
    z1 = m.predict(x, logits=True).astype(np.float64)
    _, top3, top3_unc = m.evaluate(x, y, metrics=[pgo.TopKAccuracy(3)], return_uncertainty=True)[1:]
    assert top3 == top_k(z1, y, 3).mean()
    assert top3_unc == pytest.approx(top_k(z1, y, 3).std(ddof=1) / math.sqrt(n * steps), rel=1e-9)


def log_softmax64(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def test_evaluate_cross_entropy_on_sequences_is_the_mean_per_token_in_nats():
    """As PyTorch's F.cross_entropy(logits.reshape(-1, V), ids.reshape(-1)): the mean over every token."""
    vocab, steps, n = 9, 6, 23
    rng = np.random.default_rng(5)
    x = rng.integers(0, vocab, (n, steps))
    y = rng.integers(0, vocab, (n, steps))
    m = pgo.Sequential([L.Embedding(vocab, 8), L.Linear(8, 16), L.ReLU(), L.Linear(16, vocab)])
    m.build((steps,), seed=3)
    w = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    z = np.maximum(w["0.weight"][x] @ w["1.weight"].T + w["1.bias"], 0) @ w["3.weight"].T + w["3.bias"]
    nats = -np.take_along_axis(log_softmax64(z), y[..., None], axis=-1)[..., 0]
    # batches of 5 leave a last batch of 3: the mean stays over tokens; float32 logits of order 1
    loss, acc = m.evaluate(x, y, loss="cross_entropy", batch_size=5)
    assert loss == pytest.approx(nats.mean(), rel=1e-6)
    assert acc == (z.argmax(axis=-1) == y).mean()
    assert m.evaluate(x, y, loss="cross_entropy", return_dict=True, return_uncertainty=True)["loss_unc"] == \
        pytest.approx(nats.mean(axis=1).std(ddof=1) / math.sqrt(n), rel=1e-5)


def test_evaluate_return_forms(trained, data):
    x, y = data
    loss, acc = trained.evaluate(x, y)
    assert trained.evaluate(x, y, metrics=["accuracy"]) == (loss, acc)
    l2, top3, acc2 = trained.evaluate(x, y, metrics=[pgo.TopKAccuracy(3, name="top3"), "accuracy"])
    assert (l2, acc2, top3) == (loss, acc, 1.0)   # 3 classes: always among the 3 largest
    assert trained.evaluate(x, y, metrics=[]) == (loss,)
    full = trained.evaluate(x, y, return_uncertainty=True)
    assert len(full) == 4 and full[0::2] == (loss, acc)
    assert trained.evaluate(x, y, return_dict=True) == {"loss": loss, "accuracy": acc}
    d = trained.evaluate(x, y, metrics=["accuracy"], return_dict=True, return_uncertainty=True)
    assert list(d) == ["loss", "loss_unc", "accuracy", "accuracy_unc"] and tuple(d.values()) == full


def test_monitors_of_metrics_pick_their_direction():
    assert pgo.EarlyStopping(monitor="val_top_k_accuracy").mode == "max"
    assert pgo.ModelCheckpoint("unused.gguf", monitor="top3_accuracy").mode == "max"
    assert pgo.ReduceLROnPlateau(monitor="val_mae").mode == "min"
    assert pgo.EarlyStopping(monitor="mse").mode == "min"


def test_a_metric_of_ones_own_gives_its_direction_to_monitors():
    class Hits(pgo.Metric):
        name, direction = "hits", "max"

        def values(self, outputs, targets):
            return outputs.argmax(axis=1) == targets.argmax(axis=1)

    es = pgo.EarlyStopping(monitor="val_hits", patience=5)
    assert es.mode == "min"   # by its name until a fit says which metric it is
    modes = []
    watch = pgo.LambdaCallback(on_epoch_end=lambda model, epoch, logs: modes.append(es.mode))
    x, y = classification(n=40)
    h = mlp(n_out=C).fit(x, y, epochs=3, metrics=[Hits()], validation_split=0.25, callbacks=[es, watch], **FAST)
    assert modes == ["max"] * 3 and es.best == max(h["val_hits"])   # the best is the largest


def test_early_stopping_watches_a_metric():
    x, _, m = regression(80, 4, 2, seed=4)
    t = x @ np.random.default_rng(4).normal(size=(4, 2))
    es = pgo.EarlyStopping(monitor="val_mae", patience=50)
    h = m.fit(x, t, epochs=6, batch_size=16, loss="mse", validation_split=0.25, metrics=["mae"], callbacks=[es],
              optimizer=pgo.AdamW(lr=1e-2), **FAST)
    assert es.best == min(h["val_mae"]) and es.best_epoch == int(np.argmin(h["val_mae"]))


def test_the_progress_line_shows_the_metrics(capsys):
    x, y = classification()
    mlp(n_out=C).fit(x, y, epochs=1, batch_size=20, validation_split=0.25, metrics=[pgo.TopKAccuracy(2)],
                     verbose=2, n_threads=1)
    line = capsys.readouterr().out
    assert "top2_accuracy" in line and "val_top2_accuracy" in line and "%" in line and "acc " not in line


class MaxError(pgo.Metric):
    """A metric of one's own: the largest absolute error of a sample."""

    name = "max_error"

    def values(self, outputs, targets):
        return np.abs(outputs - targets).max(axis=1)


def test_a_metric_of_ones_own():
    x, t, m = regression(30, 3, 2, seed=1)
    z0 = m.predict(x).astype(np.float64)
    h = m.fit(x, t, epochs=1, batch_size=30, loss="mse", metrics=[MaxError()], optimizer=pgo.SGD(lr=0.1), **FAST)
    assert h["max_error"][0] == pytest.approx(np.abs(z0 - t).max(axis=1).mean(), rel=1e-6)
    assert m.evaluate(x, t, metrics=[MaxError(name="worst")], return_dict=True)["worst"] == pytest.approx(
        np.abs(m.predict(x).astype(np.float64) - t).max(axis=1).mean(), rel=1e-6)


@pytest.mark.parametrize("loss, metrics, error, match", [
    ("cross_entropy", ["nope"], ValueError, r"unknown metric 'nope'; known: \['accuracy', 'mae', 'mse', "
                                            r"'top_k_accuracy'\]"),
    ("mse", ["top_k_accuracy"], ValueError, "metric 'top_k_accuracy' needs classes"),
    ("mse", ["accuracy"], ValueError, "metric 'accuracy' needs classes"),
    ("cross_entropy", ["mae"], ValueError, "metric 'mae' compares outputs with targets of their shape"),
    ("binary_cross_entropy", ["mse"], ValueError, "metric 'mse' compares outputs"),
    ("cross_entropy", [pgo.TopKAccuracy(7)], ValueError, "k=7 exceeds the 6 classes"),
    ("mean", ["mae"], ValueError, "loss 'mean' takes none"),
    ("cross_entropy", "accuracy", TypeError, "metrics must be a list"),
    ("cross_entropy", [len], TypeError, "metric names or Metric objects, got builtin_function_or_method"),
    ("cross_entropy", ["accuracy", pgo.Accuracy()], ValueError, r"the same name: \['accuracy'\]"),
])
def test_bad_metrics(loss, metrics, error, match):
    x, y = classification(n=20)
    if loss in ("mse", "binary_cross_entropy"):
        y = np.eye(C)[y]
    m = mlp(n_out=C)
    w0 = m.get_weights()
    with pytest.raises(error, match=match):
        m.fit(x, y, epochs=1, loss=loss, metrics=metrics, **FAST)
    assert max_diff(m.get_weights(), w0) == 0 and m.history is None   # refused before training
    if loss != "mean":
        with pytest.raises(error, match=match):
            m.evaluate(x, y, loss=loss, metrics=metrics)


def test_bad_metric_names():
    with pytest.raises(ValueError, match="k must be an int >= 1"):
        pgo.TopKAccuracy(0)
    with pytest.raises(ValueError, match="cannot be named 'loss'"):
        pgo.Accuracy(name="loss")
    with pytest.raises(ValueError, match="cannot be named 'val_x'"):
        MaxError(name="val_x")
    renamed = MaxError()
    renamed.name = "mae_unc"   # after construction: fit checks again
    x, t = np.zeros((4, 3), np.float32), np.zeros((4, 2))
    with pytest.raises(ValueError, match="cannot be named 'mae_unc'"):
        pgo.Sequential([L.Linear(3, 2)]).fit(x, t, loss="mse", metrics=[renamed], **FAST)
