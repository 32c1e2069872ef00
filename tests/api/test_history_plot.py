"""``History.plot()``: loss and metrics per epoch with matplotlib (an optional extra), rendered to PNG."""
import math
import struct
import sys

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt.training import History
from support import FAST, blobs, mlp


@pytest.fixture
def plt():
    import matplotlib  # the plot extra (the test extra installs it)
    matplotlib.use("Agg")  # no display: render to files only
    import matplotlib.pyplot as plt
    yield plt
    plt.close("all")


@pytest.fixture(scope="module")
def history_with_validation():
    x, y = blobs()
    return mlp().fit(x, y, epochs=3, batch_size=16, validation_split=0.25, optimizer=pgo.AdamW(lr=1e-2), **FAST)


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def finite(values) -> bool:
    return any(math.isfinite(v) for v in values)


def test_plot_training_and_validation(plt, history_with_validation, tmp_path):
    h = history_with_validation
    assert all(finite(h[k]) for k in ("loss", "accuracy", "val_loss", "val_accuracy"))
    fig = h.plot()
    path = tmp_path / "history.png"
    fig.savefig(path, dpi=100)
    assert png_size(path) == (1000, 400)  # two subplots of 5 x 4 inches at 100 dpi
    image = plt.imread(path)
    assert image.shape[:2] == (400, 1000) and image.std() > 0  # something was drawn

    assert [ax.get_title() for ax in fig.axes] == ["loss", "accuracy"]
    for ax, name in zip(fig.axes, ("loss", "accuracy")):
        train, val = ax.get_lines()
        assert (train.get_label(), train.get_linestyle()) == ("training", "-")
        assert (val.get_label(), val.get_linestyle()) == ("validation", "--")
        np.testing.assert_array_equal(train.get_xdata(), [1, 2, 3])
        np.testing.assert_array_equal(val.get_xdata(), [1, 2, 3])
        np.testing.assert_array_equal(train.get_ydata(), h[name])
        np.testing.assert_array_equal(val.get_ydata(), h[f"val_{name}"])
        # one uncertainty band per series that has a finite uncertainty
        assert len(ax.collections) == sum(finite(h[f"{k}_unc"]) for k in (name, f"val_{name}"))
        assert [t.get_text() for t in ax.get_legend().get_texts()] == ["training", "validation"]


def test_plot_options(plt, history_with_validation):
    h = history_with_validation
    fig = h.plot(metrics="loss", uncertainty=False, figsize=(3, 2))
    (ax,) = fig.axes
    assert len(ax.get_lines()) == 2 and not ax.collections
    assert tuple(fig.get_size_inches()) == (3, 2)
    # lr is no metric of the model: plotted only when asked for, and it has no validation series
    fig = h.plot(metrics=["loss", "lr"])
    assert [ax.get_title() for ax in fig.axes] == ["loss", "lr"]
    np.testing.assert_array_equal(fig.axes[1].get_lines()[0].get_ydata(), h["lr"])
    assert len(fig.axes[1].get_lines()) == 1
    with pytest.raises(KeyError, match="no metric 'f1'"):
        h.plot(metrics=["f1"])


def test_plot_into_given_axes(plt, history_with_validation):
    fig, axes = plt.subplots(2, 1)
    assert history_with_validation.plot(axes=axes) is fig
    assert [ax.get_title() for ax in axes] == ["loss", "accuracy"]
    fig, ax = plt.subplots()
    assert history_with_validation.plot("accuracy", axes=ax) is fig
    assert len(ax.get_lines()) == 2
    with pytest.raises(ValueError, match="got 1 axes for 2 metrics"):
        history_with_validation.plot(axes=[ax])


def test_plot_without_validation(plt, tmp_path):
    # No validation data: the val_* series are all NaN and left out; each subplot has one line.
    x, y = blobs(n=64)
    h = mlp().fit(x, y, epochs=2, batch_size=16, **FAST)
    assert not finite(h["val_loss"])
    fig = h.plot()
    assert [ax.get_title() for ax in fig.axes] == ["loss", "accuracy"]
    for ax, name in zip(fig.axes, ("loss", "accuracy")):
        (line,) = ax.get_lines()
        np.testing.assert_array_equal(line.get_ydata(), h[name])
    path = tmp_path / "history.png"
    fig.savefig(path, dpi=50)
    assert png_size(path) == (500, 200)


def test_plot_regression_has_no_accuracy(plt):
    # mse has no accuracy (NaN every epoch): one subplot, the loss.
    x, _ = blobs(n=64)
    targets = x[:, :3] * 0.5
    h = mlp().fit(x, targets, epochs=2, batch_size=16, loss="mse", validation_split=0.25, **FAST)
    assert not finite(h["accuracy"]) and not finite(h["val_accuracy"])
    fig = h.plot()
    (ax,) = fig.axes
    assert ax.get_title() == "loss"
    np.testing.assert_array_equal(ax.get_lines()[1].get_ydata(), h["val_loss"])


def test_plot_of_a_restored_history(plt):
    h = History.from_dict({"epoch": [0, 1, 2], "history": {"loss": [1.0, 0.5, 0.25], "val_loss": [1.5, 1.0, 0.75],
                                                           "accuracy": [math.nan] * 3}})
    (ax,) = h.plot().axes
    assert [list(line.get_ydata()) for line in ax.get_lines()] == [[1.0, 0.5, 0.25], [1.5, 1.0, 0.75]]
    with pytest.raises(ValueError, match="nothing to plot"):
        History().plot()


def test_plot_without_matplotlib(monkeypatch):
    # A None entry in sys.modules makes the import fail, as if matplotlib were not installed.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.ticker", None)
    with pytest.raises(ImportError, match=r"pip install pyggml_opt\[plot\]"):
        History.from_dict({"epoch": [0], "history": {"loss": [1.0]}}).plot()
