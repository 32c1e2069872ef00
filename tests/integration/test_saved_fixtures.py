"""Files saved by an earlier version still load, predict what that version predicted, and resume.

The files in fixtures/ were written by main at 2c1f895 (fixtures/make_fixtures.py make), before
issue 28 moved losses, optimizer state and training state; ``expected.npz`` holds that version's
outputs. Tolerances: the same computation in float32 on another CPU (ggml picks its kernels by the
instruction set: AVX2 and AVX-512 sum in other orders) differs in the last bits, ~1e-6 relative for
one forward pass; a resumed training compounds that over its steps (1e-4 absolute on weights of
size ~1; on the machine that wrote them the results are bit-identical, which ``make_fixtures.py
check`` shows for training)."""
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest

import pyggml_opt as pgo

HERE = Path(__file__).resolve().parent / "fixtures"
EXPECTED = np.load(HERE / "expected.npz")
FORWARD = dict(rtol=1e-5, atol=1e-6)
TRAINED = dict(rtol=1e-4, atol=1e-4)

import sys  # noqa: E402 - the fixture script's data and models

sys.path.insert(0, str(HERE))
import make_fixtures as mf  # noqa: E402


@pytest.mark.parametrize("name,x", [("mlp_cross_entropy", mf.blobs()[0][:8]),
                                    ("mlp_binary_cross_entropy", mf.blobs()[0][:8]),
                                    ("mlp_huber", mf.blobs()[0][:8]),
                                    ("mlp_loss_function", mf.blobs()[0][:8]),
                                    ("cnn_batchnorm", mf.images()[0][:8]),
                                    ("gpt_tiny", mf.tokens()[0][:2])])
def test_saved_model_predicts_as_when_saved(name, x):
    model = pgo.load(HERE / f"{name}.gguf")
    got = model.predict(x, n_threads=1)
    want = EXPECTED[f"{name}.predict"]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, **FORWARD)


def test_saved_loss_function_model_needs_its_function_again():
    model = pgo.load(HERE / "mlp_loss_function.gguf")
    x, _ = mf.blobs()
    yr = mf.regression_targets(x)
    with pytest.raises(ValueError, match="squared_error"):
        model.evaluate(x, yr)
    got = model.evaluate(x, yr, loss=mf.squared_error, metrics=["mae"], n_threads=1)
    np.testing.assert_allclose(got, EXPECTED["mlp_loss_function.evaluate"], **FORWARD)


def test_saved_gpt_generates_the_same_ids():
    model = pgo.load(HERE / "gpt_tiny.gguf")
    x, _ = mf.tokens()
    ids = model.generate(x[0, :4], 6, temperature=0.8, top_k=5, seed=0)
    np.testing.assert_array_equal(ids, EXPECTED["gpt_tiny.generate"])


@pytest.mark.parametrize("name,run", [("mlp", mf.mlp_ckpt_run), ("gpt", mf.gpt_ckpt_run)])
def test_saved_checkpoint_resumes_into_the_uninterrupted_run(name, run):
    make_model, x, y, kw, epochs, at = run()
    path = HERE / f"checkpoint_{name}.gguf"
    loaded = pgo.load(path)  # a checkpoint is also a model file
    assert loaded.count_params() == make_model().build(x.shape[1:]).count_params()
    resumed = mf.run_fit(make_model, x, y, kw, epochs, resume_from=path)
    assert resumed.history.epoch == list(range(epochs))
    np.testing.assert_allclose(resumed.history["loss"], EXPECTED[f"checkpoint_{name}.final_history_loss"], **TRAINED)
    earlier = resumed.legacy_names()  # the record names parameters as that version did
    for k, v in resumed.get_weights().items():
        np.testing.assert_allclose(v, EXPECTED[f"checkpoint_{name}.final.{earlier.get(k, k)}"], **TRAINED, err_msg=k)


def test_pickled_model_loads_with_history_and_optimizer_state_and_trains_on():
    model = pickle.loads((HERE / "mlp_trained.pkl").read_bytes())
    x, y = mf.blobs()
    np.testing.assert_allclose(model.predict(x[:8], n_threads=1), EXPECTED["mlp_cross_entropy.predict"], **FORWARD)
    np.testing.assert_array_equal(model.history["loss"], EXPECTED["mlp_trained.history_loss"])
    before = model.get_weights()
    model.fit(x, y, epochs=1, batch_size=16, optimizer_state=model.optimizer_state, verbose=0, n_threads=1)
    assert any(not np.array_equal(before[k], v) for k, v in model.get_weights().items())


def test_pickled_sklearn_estimator_predicts_as_when_saved():
    pytest.importorskip("sklearn")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # InconsistentVersionWarning under another scikit-learn
        clf = pickle.loads((HERE / "sklearn_classifier.pkl").read_bytes())
    x, y = mf.blobs()
    np.testing.assert_allclose(clf.predict_proba(x[:8]), EXPECTED["sklearn_classifier.predict_proba"], **FORWARD)
    clf.partial_fit(x, y)
    assert clf.predict(x).shape == (len(x),)
