"""The documentation site (mkdocs.yml, docs/) builds with warnings as errors, as CI builds it
(``scripts/build_docs.sh``: ``mkdocs build --strict``), and its API reference is generated from the
docstrings of src/pyggml_opt.

Needs the docs extra (``pip install ".[docs]"``): without it the test fails, naming what is missing.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# import name -> the distribution that provides it
DOCS_PACKAGES = {"mkdocs": "mkdocs", "material": "mkdocs-material", "mkdocstrings": "mkdocstrings",
                 "mkdocstrings_handlers.python": "mkdocstrings-python"}


def _missing_docs_packages() -> list[str]:
    missing = []
    for module, dist in DOCS_PACKAGES.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:  # the parent package of a dotted name is missing
            found = False
        if not found:
            missing.append(dist)
    return missing


def test_docs_build_strict_with_the_api_reference(tmp_path):
    missing = _missing_docs_packages()
    if missing and sys.version_info < (3, 11):
        pytest.skip("the documentation tools' releases need Python >= 3.11 (the test extra installs them there)")
    if missing:
        pytest.fail(f"the documentation tools are not installed ({', '.join(missing)} missing): install the "
                    f"docs extra, pip install \".[docs]\", in the environment of {sys.executable}")
    site = tmp_path / "site"
    env = dict(os.environ, PYTHON=sys.executable)
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "build_docs.sh"), str(site)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"

    def page(path: str) -> str:
        file = site / path / "index.html"
        assert file.is_file(), f"the site has no page {path}/"
        return file.read_text(encoding="utf-8")

    # every page of the navigation was built
    for path in ("getting-started", "guide/layers", "guide/fit", "guide/saving", "guide/backends", "guide/sklearn",
                 "guide/performance", "architecture"):
        page(path)
    assert (site / "search" / "search_index.json").is_file()

    # the API reference holds the real symbols, with their docstrings
    callbacks = page("api/callbacks")
    for name in ("EarlyStopping", "ModelCheckpoint", "ReduceLROnPlateau", "LambdaCallback"):
        assert f'id="pyggml_opt.training.callbacks.{name}"' in callbacks, name
    assert "restore_best_weights" in callbacks
    models = page("api/models")
    for name in ("Model.fit", "Model.evaluate", "Model.predict", "Model.save", "Sequential", "FunctionModel"):
        assert f'id="pyggml_opt.models.{name}"' in models, name
    assert "physical_batch_size" in models  # fit's signature and docstring, as a method of Model
    assert "Layers applied in order" in models  # Sequential's docstring (assigned from nn.SequentialNetwork)
    layers = page("api/layers")
    for name in ("Linear", "Conv2d", "MaxPool2d", "ReLU", "GELU", "LayerNorm"):
        assert f'id="pyggml_opt.nn.layers.{name}"' in layers, name
    top = page("api/pyggml_opt")
    for name in ("fit", "evaluate", "predict", "load", "save", "devices"):
        assert f'id="pyggml_opt.{name}"' in top, name
    assert 'id="pyggml_opt.data.load_fashion_mnist_small"' in page("api/data")
    assert 'id="pyggml_opt.saving.load_checkpoint"' in page("api/saving")
    assert 'id="pyggml_opt.training.optimizers.AdamW"' in page("api/optimizers")
    assert 'id="pyggml_opt.training.history.History"' in page("api/history")
    assert 'id="pyggml_opt.nn.ops.relu"' in page("api/ops")  # made by _unary at import time
    sklearn = page("api/sklearn")
    assert 'id="pyggml_opt.sklearn.GGMLClassifier"' in sklearn and 'id="pyggml_opt.sklearn.GGMLRegressor"' in sklearn
