"""Models in other processes (pickle: architecture, weights, loss, history and optimizer state), fit
continuing an optimizer state, and the thread count a process gets by default."""
import copy
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pyggml_opt as pgo
from support import FAST, X, Y, child_env, mlp, same_weights

CHILD = textwrap.dedent("""
    import pickle, sys
    import numpy as np
    from support import FAST, X, Y
    model = pickle.load(open(sys.argv[1], "rb"))
    out = {"built": model.built, "loss": model.loss, "history": model.history["loss"] if model.history else None}
    model.fit(X, Y, epochs=1, batch_size=8, shuffle=False, optimizer_state=model.optimizer_state, **FAST)
    out["weights"] = model.get_weights()
    out["predict"] = model.predict(X)
    pickle.dump(out, open(sys.argv[2], "wb"))
""")


def run_child(tmp_path, obj) -> dict:
    """Unpickle ``obj`` in a fresh interpreter, train it one more epoch there and bring back the result."""
    (tmp_path / "in.pkl").write_bytes(pickle.dumps(obj))
    (tmp_path / "child.py").write_text(CHILD)
    subprocess.run([sys.executable, str(tmp_path / "child.py"), str(tmp_path / "in.pkl"), str(tmp_path / "out.pkl")],
                   check=True, timeout=120, env=child_env())
    return pickle.loads((tmp_path / "out.pkl").read_bytes())


def test_a_trained_model_continues_in_another_process_as_here(tmp_path):
    m = mlp()
    m.fit(X, Y, epochs=2, batch_size=8, shuffle=False, **FAST)
    child = run_child(tmp_path, m)
    assert child["built"] and child["loss"] == "cross_entropy" and child["history"] == m.history["loss"]
    m.fit(X, Y, epochs=1, batch_size=8, shuffle=False, optimizer_state=m.optimizer_state, **FAST)
    assert same_weights(child["weights"], m.get_weights())  # the AdamW moments and step came along
    np.testing.assert_array_equal(child["predict"], m.predict(X))


def test_an_unbuilt_model_pickles_too(tmp_path):
    child = run_child(tmp_path, mlp(build=False))
    assert child["built"] is False and child["loss"] is None
    fresh = mlp(build=False)
    fresh.fit(X, Y, epochs=1, batch_size=8, shuffle=False, **FAST)
    assert same_weights(child["weights"], fresh.get_weights())


def test_continuing_the_optimizer_state_equals_one_longer_fit():
    a, b = mlp(), mlp()
    sched = pgo.AdamW(lr=lambda step: 1e-2 / (1 + step))  # the schedule's clock continues too
    a.fit(X, Y, epochs=4, batch_size=8, shuffle=False, optimizer=sched, **FAST)
    for _ in range(2):
        b.fit(X, Y, epochs=2, batch_size=8, shuffle=False, optimizer=pgo.AdamW(lr=lambda step: 1e-2 / (1 + step)),
              optimizer_state=b.optimizer_state, **FAST)
    assert same_weights(a.get_weights(), b.get_weights())
    assert a.optimizer_state.iter == b.optimizer_state.iter == 1 + 4 * 4  # 32 samples, batches of 8
    fresh = mlp()
    fresh.fit(X, Y, epochs=2, batch_size=8, shuffle=False, **FAST)
    fresh.fit(X, Y, epochs=2, batch_size=8, shuffle=False, **FAST)  # without it: a new optimizer
    assert not same_weights(a.get_weights(), fresh.get_weights())


def test_a_second_fit_with_the_same_optimizer_starts_a_fresh_state_schedule_included():
    """One optimizer object, two fits: each starts at step 0 of its schedule with fresh moments (as a
    new object would), unless it is given the first's optimizer_state, which continues both."""
    steps = []

    def lr(step):
        steps.append(step)
        return 1e-2 / (1 + step)

    opt = pgo.AdamW(lr=lr)
    kw = dict(epochs=2, batch_size=8, shuffle=False, **FAST)
    a, b = mlp(), mlp()
    a.fit(X, Y, optimizer=opt, **kw)
    a.fit(X, Y, optimizer=opt, **kw)
    assert steps == [*range(8), *range(8)]   # 32 samples, batches of 8, 2 epochs: steps 0-7 twice
    assert a.optimizer_state.iter == 1 + 8
    b.fit(X, Y, optimizer=pgo.AdamW(lr=lambda step: 1e-2 / (1 + step)), **kw)
    b.fit(X, Y, optimizer=pgo.AdamW(lr=lambda step: 1e-2 / (1 + step)), **kw)
    assert same_weights(a.get_weights(), b.get_weights())   # the same object did what two new ones do
    steps.clear()
    a.fit(X, Y, optimizer=opt, optimizer_state=a.optimizer_state, **kw)
    assert steps == list(range(8, 16)) and a.optimizer_state.iter == 1 + 16


def test_copies_own_their_optimizer_state():
    m = mlp()
    m.fit(X, Y, epochs=1, batch_size=8, **FAST)
    for c in (copy.deepcopy(m), m.clone(), pickle.loads(pickle.dumps(m))):
        assert (c.optimizer_state.iter, c.optimizer_state.step) == (m.optimizer_state.iter, m.optimizer_state.step)
        for name, moment in c.optimizer_state.m.items():
            np.testing.assert_array_equal(moment, m.optimizer_state.m[name])
            assert not np.shares_memory(moment, m.optimizer_state.m[name])


def test_a_state_that_does_not_fit_is_refused(tmp_path):
    m = mlp()
    m.fit(X, Y, epochs=1, batch_size=8, optimizer="sgd", **FAST)
    with pytest.raises(ValueError, match="trained with 'sgd', this fit uses 'adamw'"):
        m.fit(X, Y, epochs=1, optimizer="adamw", optimizer_state=m.optimizer_state, **FAST)
    other = mlp(n_hidden=8)
    other.fit(X, Y, epochs=1, batch_size=8, **FAST)
    with pytest.raises(ValueError, match=r"moments of '0.weight' have shape \(8, 6\), the parameter \(16, 6\)"):
        mlp().fit(X, Y, epochs=1, optimizer_state=other.optimizer_state, **FAST)
    with pytest.raises(TypeError, match="optimizer_state must be a model's optimizer_state, got dict"):
        m.fit(X, Y, epochs=1, optimizer_state={}, **FAST)
    with pytest.raises(ValueError, match="resume_from or optimizer_state"):
        m.fit(X, Y, epochs=1, resume_from=tmp_path / "x.gguf", optimizer_state=m.optimizer_state, **FAST)


THREADS = "import pyggml_opt as pgo; print(pgo.default_n_threads())"


@pytest.mark.parametrize("env, expect", [
    ({}, "cores"),
    ({"OMP_NUM_THREADS": "1"}, 1),
    ({"OMP_NUM_THREADS": "1", "PYGGML_OPT_NUM_THREADS": "2"}, 2),
    ({"OMP_NUM_THREADS": "64"}, "cores"),       # never more than the cores this process may use
    ({"OMP_NUM_THREADS": "many"}, "cores"),     # not a positive integer: ignored
    ({"OMP_NUM_THREADS": "0"}, "cores"),
])
def test_default_threads_follow_the_environment(env, expect):
    cores = len(os.sched_getaffinity(0))
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "PYGGML_OPT_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", THREADS], env={**clean, **env}, check=True, capture_output=True,
                         text=True, timeout=60).stdout
    assert int(out) == (cores if expect == "cores" else min(expect, cores))


def test_default_threads_follow_the_affinity_mask():
    out = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", THREADS], check=True, capture_output=True,
                         text=True, timeout=60,
                         env={k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}).stdout
    assert int(out) == 1


def test_nn_networks_carry_no_training_state_and_copies_keep_the_models():
    """nn's networks know nothing of training: what fit leaves (history, optimizer state, session ...)
    is a model's (training.trainable.Trainable), and only a model trains; copies keep it."""
    net = pgo.nn.SequentialNetwork([pgo.layers.Linear(6, 3)], input_shape=(6,))
    assert not any(hasattr(net, a) for a in ("history", "optimizer_state", "stop_training", "busy", "session"))
    with pytest.raises(TypeError, match="must be a pyggml_opt model, got SequentialNetwork"):
        pgo.fit(net, X, Y, **FAST)
    assert pickle.loads(pickle.dumps(net)).get_weights().keys() == net.get_weights().keys()
    m = mlp()
    m.fit(X, Y, epochs=1, batch_size=8, **FAST)
    assert m.session is not None
    c = pickle.loads(pickle.dumps(m))
    assert c.session is None and c.history["loss"] == m.history["loss"] and c.optimizer_state.iter == 1 + 4
    m.close()
    assert m.session is None
