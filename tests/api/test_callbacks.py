"""Callbacks of fit: hook order, EarlyStopping, ModelCheckpoint, ReduceLROnPlateau, LambdaCallback,
stop_training, what callbacks may not do, and interruption (KeyboardInterrupt, SIGINT).

The monitor callbacks' rules are checked as Keras's early_stopping_test.py checks them: their hooks
are called directly (``drive``) with scripted logs, on a stand-in model or a built one that is not
trained; a few tests run them inside fit end to end."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from support import FAST, X, Y, blobs, max_diff, mlp, same_weights

import pyggml_opt as pgo
from pyggml_opt.saving import load_checkpoint


class Recorder(pgo.Callback):
    """Records the weights at the end of each epoch and every hook call."""

    def __init__(self, inject=None):
        self.weights, self.events, self.inject = [], [], inject

    def on_train_begin(self, model):
        self.events.append("train_begin")

    def on_epoch_begin(self, model, epoch):
        self.events.append(f"epoch_begin {epoch}")

    def on_batch_end(self, model, batch, logs):
        self.events.append("batch")

    def on_epoch_end(self, model, epoch, logs):
        self.events.append(f"epoch_end {epoch}")
        self.weights.append(model.get_weights())
        if self.inject:
            logs.update({k: v[epoch] for k, v in self.inject.items()})

    def on_train_end(self, model):
        self.events.append("train_end")


def test_callback_hooks_order(data):
    x, y = data
    rec = Recorder()
    mlp().fit(x[:32], y[:32], epochs=2, batch_size=8, callbacks=[rec], **FAST)
    assert rec.events == (["train_begin", "epoch_begin 0"] + ["batch"] * 4 + ["epoch_end 0", "epoch_begin 1"]
                          + ["batch"] * 4 + ["epoch_end 1", "train_end"])


class StandIn:
    """What the monitor callbacks use of a model (as Keras's early_stopping_test.py's DummyModel):
    weights and ``stop_training``."""

    def __init__(self):
        self.weights, self.stop_training = {"w": np.zeros(3)}, False

    def get_weights(self):
        return {k: v.copy() for k, v in self.weights.items()}

    def set_weights(self, weights):
        self.weights = {k: np.array(v) for k, v in weights.items()}


class StandInTrainer:
    """What callbacks see of a running fit (``pgo.training.callbacks.Trainer``) around ``optimizer``."""

    def __init__(self, optimizer):
        self.optimizer, self.metrics, self.n_batches, self.epochs = optimizer, [], 1, 0


def drive(callback, model, monitored, monitor="val_loss", trainer=None):
    """Call ``callback``'s hooks as fit does for epochs whose logs report ``monitored`` (one value per
    epoch) under ``monitor``; epoch e's "training" sets every weight to e. Stops when the callback sets
    ``model.stop_training``. Returns the epochs run and, with a trainer, the lr each epoch began with."""
    model.stop_training = False
    callback.set_trainer(trainer)
    callback.on_train_begin(model)
    epochs, lrs = [], []
    for epoch, value in enumerate(monitored):
        callback.on_epoch_begin(model, epoch)
        if trainer is not None:
            lrs.append(trainer.optimizer.lr)
        model.set_weights({k: np.full_like(v, epoch) for k, v in model.get_weights().items()})
        epochs.append(epoch)
        callback.on_epoch_end(model, epoch, {"loss": 1.0, monitor: value})
        if model.stop_training:
            break
    callback.on_train_end(model)
    callback.set_trainer(None)
    return epochs, lrs


def test_early_stopping_patience_and_restore():
    # best at epoch 1, then 2 epochs without improvement = patience 2 (as Keras)
    model, es = StandIn(), pgo.EarlyStopping(monitor="val_loss", patience=2, restore_best_weights=True)
    epochs, _ = drive(es, model, [1.0, 0.5, 0.7, 0.6, 0.8, 0.4, 0.3, 0.2])
    assert epochs == [0, 1, 2, 3]
    assert es.best_epoch == 1 and es.stopped_epoch == 3 and es.best == 0.5
    assert (model.weights["w"] == 1).all()   # epoch 1's weights put back
    # without restore_best_weights the last epoch's weights stay
    model = StandIn()
    epochs, _ = drive(pgo.EarlyStopping(patience=2), model, [1.0, 0.5, 0.7, 0.6, 0.8, 0.4, 0.3, 0.2])
    assert epochs == [0, 1, 2, 3] and (model.weights["w"] == 3).all()
    # patience 0 stops at the first epoch without improvement, as patience 1 (Keras)
    for patience in (0, 1):
        epochs, _ = drive(pgo.EarlyStopping(patience=patience), StandIn(), [1.0, 0.9, 0.95, 0.5])
        assert epochs == [0, 1, 2]


def test_early_stopping_starts_afresh_in_each_training():
    es, model = pgo.EarlyStopping(patience=1, restore_best_weights=True), StandIn()
    drive(es, model, [0.1, 0.2])
    epochs, _ = drive(es, model, [5.0, 4.0, 4.5])   # 5.0 is not compared with the earlier 0.1
    assert epochs == [0, 1, 2] and es.best == 4.0 and es.best_epoch == 1 and (model.weights["w"] == 1).all()


def test_early_stopping_baseline():
    """Nothing counts as an improvement until the baseline is beaten (Keras's baseline)."""
    es = pgo.EarlyStopping(patience=2, baseline=0.85)
    epochs, _ = drive(es, StandIn(), [0.9, 0.8, 0.7, 0.6, 0.5])
    assert epochs == [0, 1, 2, 3, 4] and es.best_epoch == 4 and es.best == 0.5
    es, model = pgo.EarlyStopping(patience=2, baseline=0.1, restore_best_weights=True), StandIn()
    epochs, _ = drive(es, model, [0.9, 0.8, 0.7, 0.6, 0.5])
    assert epochs == [0, 1] and es.best_epoch is None and es.stopped_epoch == 1
    assert (model.weights["w"] == 1).all()   # no best epoch: nothing to restore


def test_early_stopping_min_delta_and_accuracy_mode():
    es = pgo.EarlyStopping(monitor="val_accuracy", patience=0, min_delta=0.01)  # mode auto -> max
    epochs, _ = drive(es, StandIn(), [0.5, 0.6, 0.605, 0.9, 0.9], monitor="val_accuracy")
    assert epochs == [0, 1, 2] and es.best_epoch == 1
    es = pgo.EarlyStopping(monitor="val_accuracy", patience=0, mode="min")   # an explicit mode wins
    epochs, _ = drive(es, StandIn(), [0.5, 0.4, 0.6], monitor="val_accuracy")
    assert epochs == [0, 1, 2] and es.best == 0.4


def test_reduce_lr_on_plateau():
    """factor after patience epochs without improvement, then cooldown epochs that do not count;
    never below min_lr."""
    cb = pgo.ReduceLROnPlateau(factor=0.5, patience=2, cooldown=2, min_lr=0.2, min_delta=0.0)
    trainer = StandInTrainer(pgo.SGD(lr=1.0))
    _, lrs = drive(cb, StandIn(), [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.5], trainer=trainer)
    # lr used in epoch e; reductions at the ends of epochs 2 (1.0 -> 0.5) and 5 (0.5 -> 0.25): epoch 3
    # is the cooldown (as in Keras, the counter is decremented at the start of an epoch's check, so
    # cooldown=2 leaves one epoch out), epochs 4 and 5 the patience
    assert lrs == [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25]
    cb, trainer = pgo.ReduceLROnPlateau(factor=0.1, patience=1, min_lr=0.05), StandInTrainer(pgo.SGD(lr=1.0))
    _, lrs = drive(cb, StandIn(), [1.0] * 6, trainer=trainer)
    assert lrs[:3] == [1.0, 1.0, pytest.approx(0.1)] and lrs[-1] == pytest.approx(0.05)
    assert trainer.optimizer.lr == pytest.approx(0.05)
    # an improvement resets the count
    cb, trainer = pgo.ReduceLROnPlateau(factor=0.5, patience=2), StandInTrainer(pgo.SGD(lr=1.0))
    _, lrs = drive(cb, StandIn(), [1.0, 1.0, 0.5, 0.5, 0.5], trainer=trainer)
    assert lrs == [1.0, 1.0, 1.0, 1.0, 1.0] and trainer.optimizer.lr == 0.5
    with pytest.raises(ValueError, match="schedule"):
        drive(pgo.ReduceLROnPlateau(), StandIn(), [1.0], trainer=StandInTrainer(pgo.SGD(lr=lambda step: 0.1)))
    with pytest.raises(ValueError, match="factor"):
        pgo.ReduceLROnPlateau(factor=1.0)


def test_monitor_callbacks_name_what_fit_does_not_report():
    for cb in (pgo.EarlyStopping(monitor="val_loss"), pgo.ModelCheckpoint("x.gguf", save_best_only=True),
               pgo.ReduceLROnPlateau()):
        with pytest.raises(ValueError, match=r"monitors 'val_loss', which fit does not report here; "
                                             r"available: \['loss'\]"):
            drive(cb, StandIn(), [float("nan")], trainer=StandInTrainer(pgo.SGD(lr=1.0)))


def test_scripted_logs_reach_the_callbacks_through_fit(data):
    """End to end: logs a callback changes in on_epoch_end are what the callbacks after it see (fit's
    History records the lr ReduceLROnPlateau set; EarlyStopping's stop ends fit)."""
    x, y = data
    rec = Recorder(inject={"val_loss": [1.0, 1.0, 1.0, 1.0, 1.0]})
    cb = pgo.ReduceLROnPlateau(factor=0.1, patience=1, min_lr=0.05)
    es = pgo.EarlyStopping(patience=3, restore_best_weights=True)
    m = mlp()
    hist = m.fit(x, y, epochs=5, batch_size=16, optimizer=pgo.SGD(lr=1.0), callbacks=[rec, cb, es], **FAST)
    assert hist["lr"] == [1.0, 1.0, pytest.approx(0.1), pytest.approx(0.05)]
    assert hist.epoch == [0, 1, 2, 3] and es.stopped_epoch == 3 and es.best_epoch == 0
    assert same_weights(m.get_weights(), rec.weights[0])


def test_early_stopping_real_metric_restores_best_epoch(data):
    x, y = data
    rec = Recorder()
    es = pgo.EarlyStopping(monitor="val_loss", patience=1, restore_best_weights=True)
    m = mlp()
    # a learning rate high enough that the validation loss stops improving quickly
    hist = m.fit(x, y, epochs=12, batch_size=8, validation_split=0.3, optimizer=pgo.SGD(lr=1.0),
                 callbacks=[rec, es], **FAST)
    best = int(np.argmin(hist["val_loss"]))
    assert es.best_epoch == best
    assert same_weights(m.get_weights(), rec.weights[best])
    if len(hist.epoch) < 12:
        assert len(hist.epoch) - 1 - best == 1  # stopped after patience epochs without improvement


def test_early_stopping_min_delta_inside_fit(data):
    x, y = data
    rec = Recorder(inject={"val_accuracy": [0.5, 0.6, 0.605, 0.9, 0.9]})
    es = pgo.EarlyStopping(monitor="val_accuracy", patience=0, min_delta=0.01)  # mode auto -> max
    hist = mlp().fit(x, y, epochs=5, batch_size=16, callbacks=[rec, es], **FAST)
    assert len(hist.epoch) == 3 and es.best_epoch == 1


def test_early_stopping_unknown_monitor_raises(data):
    x, y = data
    with pytest.raises(ValueError, match="val_loss"):
        mlp().fit(x, y, epochs=2, batch_size=16, callbacks=[pgo.EarlyStopping(monitor="val_loss")], **FAST)
    with pytest.raises(ValueError, match="mode"):
        pgo.EarlyStopping(mode="sideways")
    with pytest.raises(ValueError, match="patience"):
        pgo.EarlyStopping(patience=-1)


# ModelCheckpoint stores the optimizer state by default, through accessors that vendor/patches/0002
# adds to ggml-opt; an extension built before that patch lacks them (rebuild: pip install -e .).
HAS_OPT_STATE = hasattr(pgo.lib, "ggml_opt_get_iter")
SAVE_OPTIMIZER = [False, pytest.param(True, marks=pytest.mark.skipif(
    not HAS_OPT_STATE, reason="the compiled extension predates vendor/patches/0002; reinstall the package"))]


@pytest.mark.parametrize("save_optimizer", SAVE_OPTIMIZER)
def test_model_checkpoint_every_epoch(tmp_path, data, save_optimizer):
    x, y = data
    rec = Recorder()
    ck = pgo.ModelCheckpoint(tmp_path / "ck-{epoch}.gguf", save_optimizer=save_optimizer)
    m = mlp()
    m.fit(x, y, epochs=3, batch_size=16, callbacks=[rec, ck], **FAST)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["ck-1.gguf", "ck-2.gguf", "ck-3.gguf"]
    assert ck.saved == [str(tmp_path / f"ck-{i}.gguf") for i in (1, 2, 3)]
    for i in range(3):
        loaded = pgo.load(tmp_path / f"ck-{i + 1}.gguf")
        assert same_weights(loaded.get_weights(), rec.weights[i])
    np.testing.assert_array_equal(pgo.load(tmp_path / "ck-3.gguf").predict(x[:7]), m.predict(x[:7]))


@pytest.mark.skipif(not HAS_OPT_STATE, reason="the compiled extension predates vendor/patches/0002")
def test_optimizer_state_views_equal_copies_and_are_read_only(tmp_path, data):
    """trainer.optimizer_state(copy=False), what ModelCheckpoint writes: the AdamW moments as read-only
    views (CPU) with the values of the copies, and the checkpoint holds the copies' values."""
    x, y = data
    seen = []

    class Peek(pgo.Callback):
        def on_epoch_end(self, model, epoch, logs):
            views, copies = self.trainer.optimizer_state(copy=False), self.trainer.optimizer_state()
            seen.append(copies)  # the views are valid only until the next step
            for name, m in views.m.items():
                assert not m.flags.writeable and not views.v[name].flags.writeable
                np.testing.assert_array_equal(m, copies.m[name])
                np.testing.assert_array_equal(views.v[name], copies.v[name])
            assert (views.iter, views.step) == (copies.iter, copies.step)

    m = mlp()
    m.fit(x, y, epochs=2, batch_size=16, callbacks=[Peek(), pgo.ModelCheckpoint(tmp_path / "c{epoch}.gguf")], **FAST)
    assert len(seen) == 2 and set(seen[0].m) == set(m.get_weights())
    ck = load_checkpoint(tmp_path / "c2.gguf", m)
    for name, copy in seen[1].m.items():
        np.testing.assert_array_equal(ck.state.m[name], copy)
        np.testing.assert_array_equal(ck.state.v[name], seen[1].v[name])


def test_model_checkpoint_save_best_only(tmp_path):
    model = mlp()
    ck = pgo.ModelCheckpoint(str(tmp_path / "best-{epoch}.gguf"), save_best_only=True, save_optimizer=False)
    drive(ck, model, [3.0, 1.0, 2.0, 0.5, 0.7])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best-1.gguf", "best-2.gguf", "best-4.gguf"]
    assert all((w == 3).all() for w in pgo.load(tmp_path / "best-4.gguf").get_weights().values())
    # a fixed path keeps only the best
    ck = pgo.ModelCheckpoint(tmp_path / "best.gguf", save_best_only=True, save_optimizer=False)
    drive(ck, model, [3.0, 1.0, 2.0, 0.5, 0.7])
    assert all((w == 3).all() for w in pgo.load(tmp_path / "best.gguf").get_weights().values())
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    # min_delta: 0.45 is not better than 0.5 by more than 0.1
    ck = pgo.ModelCheckpoint(tmp_path / "d-{epoch}.gguf", save_best_only=True, min_delta=0.1, save_optimizer=False)
    drive(ck, model, [3.0, 1.0, 0.5, 0.45, 0.2])
    assert [p.rsplit("/", 1)[-1] for p in ck.saved] == ["d-1.gguf", "d-2.gguf", "d-3.gguf", "d-5.gguf"]
    # as Keras: the best value carries over to the next training with the same callback
    drive(ck, model, [0.3, 0.05])
    assert [p.rsplit("/", 1)[-1] for p in ck.saved][4:] == ["d-2.gguf"]


@pytest.mark.parametrize("save_optimizer", SAVE_OPTIMIZER)
def test_model_checkpoint_save_best_only_in_fit(tmp_path, data, save_optimizer):
    """End to end: the best epoch's weights (and optimizer state) in the file, whatever came after."""
    x, y = data
    rec = Recorder(inject={"val_loss": [3.0, 1.0, 2.0, 0.5, 0.7]})
    ck = pgo.ModelCheckpoint(tmp_path / "best.gguf", save_best_only=True, save_optimizer=save_optimizer)
    mlp().fit(x, y, epochs=5, batch_size=16, callbacks=[rec, ck], **FAST)
    assert same_weights(pgo.load(tmp_path / "best.gguf").get_weights(), rec.weights[3])
    if save_optimizer:
        assert load_checkpoint(tmp_path / "best.gguf", mlp()).epoch == 4


def test_callback_list_and_predict_from_a_callback_on_the_same_backend(data):
    """CallbackList calls callbacks in order; predict inside fit may name fit's backend in any spelling."""
    x, y = data
    seen = []
    cbs = pgo.CallbackList([pgo.LambdaCallback(on_epoch_end=lambda m, e, l: seen.append(("a", e))),
                            pgo.LambdaCallback(on_epoch_end=lambda m, e, l: seen.append(("b", e)))], None, None)
    m = mlp()
    cbs.model = m
    cbs.on_epoch_end(0, {})
    assert seen == [("a", 0), ("b", 0)]
    probe = pgo.LambdaCallback(on_batch_end=lambda mo, b, l: seen.append(mo.predict(X[:2], backend="CPU").shape))
    m.fit(X, Y, epochs=1, batch_size=16, callbacks=[probe], **FAST)
    assert seen[2:] == [(2, 3), (2, 3)]


def test_lambda_callback_stop_training_within_one_batch(data):
    x, y = data
    seen, epochs_ended = [], []

    def on_batch_end(model, batch, logs):
        seen.append(batch)
        assert set(logs) >= {"loss", "accuracy"}
        if len(seen) == 3:
            model.stop_training = True

    m = mlp()
    w0 = m.get_weights()
    hist = m.fit(x, y, epochs=5, batch_size=16, callbacks=[
        pgo.LambdaCallback(on_batch_end=on_batch_end, on_epoch_end=lambda mo, e, l: epochs_ended.append(e))], **FAST)
    assert seen == [0, 1, 2]
    assert hist.epoch == [0] and epochs_ended == [0]
    assert max_diff(m.get_weights(), w0) > 0
    # the same three steps without the callback give the same weights: nothing ran after the stop
    ref = mlp()
    ref.fit(x[:48], y[:48], epochs=1, batch_size=16, shuffle=False, **FAST)
    m2 = mlp()
    stop3 = pgo.LambdaCallback(on_batch_end=lambda mo, b, l: setattr(mo, "stop_training", b == 2))
    m2.fit(x, y, epochs=1, batch_size=16, shuffle=False, callbacks=[stop3], **FAST)
    assert same_weights(ref.get_weights(), m2.get_weights())


def test_predict_and_evaluate_from_a_callback(data):
    """Callbacks run in fit's thread: evaluating the model there works (the model lock is re-entrant)
    and sees the weights of the epoch just finished."""
    x, y = data
    xt, yt = blobs(n=50, seed=8)
    seen = []
    cb = pgo.LambdaCallback(on_epoch_end=lambda mo, e, logs: seen.append((mo.evaluate(xt, yt), mo.predict(xt[:3]),
                                                                          mo.get_weights())))
    m = mlp()
    m.fit(x, y, epochs=3, batch_size=16, validation_split=0.2, callbacks=[cb], **FAST)
    assert len(seen) == 3
    assert seen[-1][0] == m.evaluate(xt, yt)
    np.testing.assert_array_equal(seen[-1][1], m.predict(xt[:3]))
    assert same_weights(seen[-1][2], m.get_weights())
    assert seen[0][0] != seen[-1][0]


@pytest.mark.parametrize("action,exc,match", [
    (lambda m: m.close(), RuntimeError, "cannot close the model while fit is running"),
    (lambda m: m.fit(X, Y, **FAST), RuntimeError, "cannot fit the model while fit is running"),
    (lambda m: m.build((6,)), RuntimeError, "cannot build the model while fit is running"),
    (lambda m: m.predict(X, backend="cuda"), ValueError, "backend 'cuda' is not available"),
])
def test_callbacks_cannot_pull_the_model_from_under_fit(action, exc, match):
    """What would free or replace the parameters fit is using is refused from a callback."""
    def on_batch_end(model, batch, logs):
        action(model)

    m = mlp()
    with pytest.raises(exc, match=match):
        m.fit(X, Y, epochs=1, batch_size=8, callbacks=[pgo.LambdaCallback(on_batch_end=on_batch_end)], **FAST)
    assert m.predict(X[:2]).shape == (2, 3)
    m.fit(X, Y, epochs=1, batch_size=8, **FAST)


def test_keyboard_interrupt_from_callback(data):
    x, y = data
    count = {"batches": 0, "epochs": 0}

    def on_batch_end(model, batch, logs):
        count["batches"] += 1
        if count["batches"] == 2 * 15 + 4:  # 15 batches per epoch: during the third epoch
            raise KeyboardInterrupt

    m = mlp()
    cb = pgo.LambdaCallback(on_batch_end=on_batch_end,
                            on_epoch_end=lambda mo, e, l: count.__setitem__("epochs", count["epochs"] + 1))
    with pytest.raises(KeyboardInterrupt):
        m.fit(x, y, epochs=10, batch_size=16, callbacks=[cb], **FAST)
    assert count["batches"] == 34
    assert m.history.epoch == [0, 1] and count["epochs"] == 2
    assert m.predict(x[:3]).shape == (3, 3)
    m.fit(x, y, epochs=1, batch_size=16, **FAST)  # and trains again


SIGINT_CHILD = textwrap.dedent("""
    import json, signal, sys, time
    import numpy as np
    import pyggml_opt as pgo
    from pyggml_opt import layers as L

    state = {"batches": 0, "at_signal": None, "t_signal": None, "epochs": 0}

    def on_sigint(signum, frame):
        state["at_signal"], state["t_signal"] = state["batches"], time.perf_counter()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)

    def on_batch_end(model, batch, logs):
        state["batches"] += 1

    def on_epoch_end(model, epoch, logs):
        state["epochs"] += 1
        print("EPOCH", epoch, flush=True)

    rng = np.random.default_rng(0)
    x = rng.normal(size=(1024, 64)).astype(np.float32)
    y = rng.integers(0, 10, 1024)
    model = pgo.Sequential([L.Linear(64, 256), L.ReLU(), L.Linear(256, 10)])
    try:
        model.fit(x, y, epochs=10**6, batch_size=128, verbose=0, n_threads=1,
                  callbacks=[pgo.LambdaCallback(on_batch_end=on_batch_end, on_epoch_end=on_epoch_end)])
        print("RESULT", json.dumps({"error": "fit returned"}))
    except KeyboardInterrupt:
        out = dict(state, t_stop=time.perf_counter(), history=len(model.history.epoch),
                   predict_shape=list(model.predict(x[:5]).shape),
                   finite=bool(np.isfinite(model.predict(x[:5])).all()))
        print("RESULT", json.dumps(out), flush=True)
""")


def test_sigint_during_fit_stops_within_one_batch():
    proc = subprocess.Popen([sys.executable, "-c", SIGINT_CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        for line in proc.stdout:
            if line.startswith("EPOCH 1"):
                break
        else:
            pytest.fail(f"child ended early: {proc.stderr.read()}")
        time.sleep(0.05)  # land somewhere inside an epoch
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, f"child died with {proc.returncode}: {err}"
    result = json.loads(next(l for l in out.splitlines() if l.startswith("RESULT"))[len("RESULT "):])
    assert "error" not in result, result
    assert result["at_signal"] is not None
    assert result["batches"] - result["at_signal"] <= 1, result   # stopped within one batch
    assert result["t_stop"] - result["t_signal"] < 5.0, result
    # History holds the completed epochs (the signal may interrupt on_epoch_end of a completed epoch)
    assert result["epochs"] >= 2 and result["epochs"] <= result["history"] <= result["epochs"] + 1, result
    assert result["predict_shape"] == [5, 10] and result["finite"], result


SIGINT_STORM_CHILD = textwrap.dedent("""
    import signal, sys, time
    import numpy as np
    import pyggml_opt as pgo
    from pyggml_opt import layers as L

    def on_sigint(signum, frame):
        # Ctrl+C's KeyboardInterrupt wherever it lands inside the library (also in the C callbacks);
        # not in this driver loop, which would only kill the child without telling anything
        if "pyggml_opt" in frame.f_code.co_filename:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = rng.integers(0, 2, 64)
    model = pgo.Sequential([L.Linear(4, 4), L.Linear(4, 2)])
    interrupted = 0
    print("READY", flush=True)
    end = time.perf_counter() + float(sys.argv[1])
    while time.perf_counter() < end:
        try:  # batch 1: the optimizer-params callback runs at every step, so signals often land in it
            model.fit(x, y, epochs=5, batch_size=1, verbose=0, n_threads=1,
                      optimizer=pgo.AdamW(lr=lambda step: 1e-3))
        except KeyboardInterrupt:
            interrupted += 1
    print("DONE", interrupted, model.predict(x[:2]).shape, flush=True)
""")


def test_sigint_storm_never_aborts():
    """Ctrl+C at random moments, hundreds of times: a KeyboardInterrupt raised inside ggml-opt's
    optimizer-params callback must not reach ggml as a zeroed struct (ggml-opt aborts on lr == 0)."""
    duration = 3.0
    proc = subprocess.Popen([sys.executable, "-c", SIGINT_STORM_CHILD, str(duration + 2)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith("READY")
        rnd = np.random.default_rng(0)
        t0, sent = time.perf_counter(), 0
        while time.perf_counter() - t0 < duration and proc.poll() is None:
            time.sleep(rnd.uniform(0.002, 0.02))
            proc.send_signal(signal.SIGINT)
            sent += 1
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, f"child died with {proc.returncode} after {sent} SIGINTs: {err[-3000:]}"
    assert "ggml aborted" not in err
    done = [l for l in out.splitlines() if l.startswith("DONE")]
    assert done and int(done[0].split()[1]) >= 1, (sent, out)
    assert done[0].endswith("(2, 2)")
