"""pyggml_opt.sklearn: scikit-learn's own estimator checks, accuracy on load_digits, labels,
partial_fit, sample_weight, ``module=``, pickling across processes and parallel searches (joblib
processes, Dask). The CPU here has 2 cores, shared: each fit is small."""
import inspect
import os
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits, load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.utils.estimator_checks import parametrize_with_checks

import pyggml_opt as pgo
from pyggml_opt import layers as L
from pyggml_opt.sklearn import GGMLClassifier, GGMLRegressor, expected_failed_checks


@pytest.fixture(scope="module")
def digits():
    x, y = load_digits(return_X_y=True)
    return train_test_split(x / 16.0, y, random_state=0)


# one thread: ggml's workers spin at barriers, and this machine's two cores are shared with the rest
@parametrize_with_checks([GGMLClassifier(max_iter=50, n_threads=1), GGMLRegressor(max_iter=50, n_threads=1)],
                         expected_failed_checks=expected_failed_checks)
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        check(estimator)


def test_the_convergence_warning_points_at_the_callers_line():
    x, y = load_iris(return_X_y=True)
    with pytest.warns(ConvergenceWarning) as record:
        GGMLClassifier(max_iter=2, random_state=0, n_threads=1).fit(x, y); line = inspect.currentframe().f_lineno  # noqa: E702
    assert [(w.filename, w.lineno) for w in record] == [(__file__, line)]


def test_digits_accuracy(digits):
    # MLPClassifier(random_state=0) reaches 0.9711 on this split (benchmarks/compare_sklearn.py)
    x_train, x_test, y_train, y_test = digits
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = GGMLClassifier(random_state=0, n_threads=1).fit(x_train, y_train)
    assert clf.score(x_test, y_test) >= 0.96
    assert clf.n_iter_ == len(clf.loss_curve_) and clf.loss_curve_[-1] < 0.05
    assert clf.model_.count_params() == 64 * 100 + 100 + 100 * 10 + 10


def test_string_labels_and_probabilities(digits):
    x_train, x_test, y_train, _ = digits
    names = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"])
    clf = GGMLClassifier(hidden_layer_sizes=(32,), max_iter=20, random_state=0, n_threads=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(x_train, names[y_train])
    assert list(clf.classes_) == sorted(names)
    proba = clf.predict_proba(x_test)
    assert proba.shape == (len(x_test), 10) and proba.dtype == np.float64
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(clf.predict(x_test), clf.classes_[proba.argmax(axis=1)])


def test_partial_fit_continues_like_fit(digits):
    x_train, _, y_train, _ = digits
    args = dict(hidden_layer_sizes=(16,), batch_size=len(x_train), shuffle=False, random_state=3, n_threads=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        full = GGMLClassifier(max_iter=3, **args).fit(x_train, y_train)
    part = GGMLClassifier(**args)
    with pytest.raises(ValueError, match="classes must be given"):
        part.partial_fit(x_train, y_train)
    for _ in range(3):  # the optimizer state (AdamW moments, step) carries over between calls
        part.partial_fit(x_train, y_train, classes=np.arange(10))
    assert part.n_iter_ == 3 and part.loss_curve_ == full.loss_curve_
    np.testing.assert_array_equal(part.predict_proba(x_train), full.predict_proba(x_train))
    with pytest.raises(ValueError, match="labels the first call to partial_fit did not name"):
        part.partial_fit(x_train, y_train + 10)


def test_sample_weight_shifts_the_decision(digits):
    x_train, x_test, y_train, _ = digits
    args = dict(hidden_layer_sizes=(16,), max_iter=15, random_state=0, n_threads=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        plain = GGMLClassifier(**args).fit(x_train, y_train)
        heavy = GGMLClassifier(**args).fit(x_train, y_train, sample_weight=np.where(y_train == 3, 50.0, 1.0))
    assert (heavy.predict(x_test) == 3).sum() > (plain.predict(x_test) == 3).sum() + 10


def test_early_stopping_keeps_the_best_validation_score(digits):
    x_train, _, y_train, _ = digits
    clf = GGMLClassifier(early_stopping=True, n_iter_no_change=3, random_state=0, n_threads=1).fit(x_train, y_train)
    assert clf.n_iter_ < 200 and len(clf.validation_scores_) == clf.n_iter_
    assert clf.best_validation_score_ == max(clf.validation_scores_) > 0.9


def test_regressor_fits_a_smooth_function():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(400, 3))
    y = np.sin(2 * x[:, 0]) + x[:, 1] * x[:, 2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        reg = GGMLRegressor(hidden_layer_sizes=(64, 64), max_iter=150, random_state=0, n_threads=1).fit(x[:300], y[:300])
    pred = reg.predict(x[300:])
    assert pred.shape == (100,) and pred.dtype == np.float64
    assert reg.score(x[300:], y[300:]) > 0.9
    two = GGMLRegressor(hidden_layer_sizes=(8,), max_iter=5, random_state=0).fit(x, np.c_[y, -y])
    assert two.predict(x).shape == (400, 2)


def test_module_takes_any_model_and_leaves_it_untouched(digits):
    x_train, x_test, y_train, y_test = digits
    cnn = pgo.Sequential([L.Conv2d(1, 8, 3, padding=1), L.ReLU(), L.MaxPool2d(2), L.Flatten(), L.Linear(8 * 4 * 4, 10)])
    cnn.build((1, 8, 8), seed=0)
    before = cnn.get_weights()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = GGMLClassifier(module=cnn, max_iter=20, learning_rate_init=1e-2, random_state=0, n_threads=1)
        clf.fit(x_train, y_train)
    assert clf.model_.input_shape == (1, 8, 8)  # X of 64 features reshaped to the module's images
    assert clf.score(x_test, y_test) > 0.93  # 0.967 measured
    assert all(np.array_equal(before[k], v) for k, v in cnn.get_weights().items())
    built = GGMLClassifier(module=lambda n_in, n_out: pgo.Sequential([L.Linear(n_in, n_out)]), max_iter=2).fit(x_train, y_train)
    assert built.model_.param_shapes == {"0.weight": (10, 64), "0.bias": (10,)}
    with pytest.raises(ValueError, match="module gives 10 outputs per sample, the data needs 3"):
        GGMLClassifier(module=pgo.Sequential([L.Linear(64, 10)]), max_iter=1).fit(x_train, y_train % 3)
    with pytest.raises(TypeError, match="module must be a pyggml_opt model"):
        GGMLClassifier(module="mlp").fit(x_train, y_train)


CHILD = """
import pickle, sys
import numpy as np
clf, x = pickle.load(open(sys.argv[1], "rb"))
np.save(sys.argv[2], clf.predict_proba(x))
clf.partial_fit(x, clf.predict(x))   # the optimizer state came along: training continues
np.save(sys.argv[3], clf.predict_proba(x))
"""


def test_a_fitted_estimator_pickles_into_another_process(digits, tmp_path):
    x_train, x_test, y_train, _ = digits
    clf = GGMLClassifier(hidden_layer_sizes=(16,), max_iter=3, shuffle=False, batch_size=len(x_test),
                         random_state=0, n_threads=1)
    clf.partial_fit(x_train, y_train, classes=np.arange(10))
    (tmp_path / "clf.pkl").write_bytes(pickle.dumps((clf, x_test)))
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    subprocess.run([sys.executable, str(script), str(tmp_path / "clf.pkl"), str(tmp_path / "a.npy"),
                    str(tmp_path / "b.npy")], check=True, timeout=120)
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), clf.predict_proba(x_test))
    clf.partial_fit(x_test, clf.predict(x_test))
    np.testing.assert_array_equal(np.load(tmp_path / "b.npy"), clf.predict_proba(x_test))


def test_grid_search_in_joblib_processes(digits):
    x_train, x_test, y_train, y_test = digits
    grid = GridSearchCV(GGMLClassifier(max_iter=30, random_state=0, n_threads=1), {"hidden_layer_sizes": [(16,), (64,)]},
                        cv=3, n_jobs=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        grid.fit(x_train, y_train)
    # measured in one process: cross-validated 0.78 for (16,), 0.91 for (64,); 0.927 on the test split
    assert grid.best_params_ == {"hidden_layer_sizes": (64,)} and grid.score(x_test, y_test) > 0.9


def test_workers_train_with_the_threads_they_are_granted():
    from joblib import Parallel, delayed
    # loky gives each of n_jobs workers OMP_NUM_THREADS = cores // n_jobs
    cores = len(os.sched_getaffinity(0))
    got = Parallel(n_jobs=2)(delayed(pgo.default_n_threads)() for _ in range(2))
    assert got == [max(cores // 2, 1)] * 2


def test_grid_search_on_a_dask_cluster(digits):
    import distributed  # the test extra installs dask[distributed]
    from joblib import parallel_backend
    x_train, _, y_train, _ = digits
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        threads = client.run(pgo.default_n_threads)  # Dask starts its workers with OMP_NUM_THREADS=1
        assert sorted(threads.values()) == [1, 1]
        grid = GridSearchCV(GGMLClassifier(max_iter=20, random_state=0), {"alpha": [0.0, 1e-3]}, cv=2)
        with parallel_backend("dask"), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            grid.fit(x_train, y_train)
    assert len(grid.cv_results_["mean_test_score"]) == 2 and grid.best_score_ > 0.85  # 0.884 measured
