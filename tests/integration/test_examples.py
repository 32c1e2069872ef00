"""Every script in examples/ runs as a user runs it (a subprocess of ``python examples/<script>``),
and so does the package's demo (``python -m pyggml_opt.demo``): each trains, prints its test accuracy
and writes a GGUF file that ``pyggml_opt.load`` reads back with the same accuracy.

Data: Debian's Fashion-MNIST (``dataset-fashion-mnist``, installed by CI), one epoch. Without it the
examples run on the small subset shipped in the package, written as IDX files (5 epochs), unless
``PYGGML_OPT_REQUIRE_C_TESTS=1`` (CI), where its absence is a failure.

The accuracy bounds sit ~5 points below what seed 0 gives (the training is deterministic; other CPUs
differ in rounding only, by ~0.1 point after 4 epochs in benchmarks/CPU_SPEED.md) and far above chance
(10 %): full data, 1 epoch: MLP 79.6 %, CNN 71.5 %; the subset, 5 epochs: MLP 74.4 %, CNN 65.5 %.
One thread each (the test machine's two cores are shared): MLP ~2 s, CNN ~15 s (full data) on 2 cores.
The text example and the demo's GPT train on Debian's fortunes and must get below the unigram entropy.
"""
from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import data
from pyggml_opt.core import GGUFFile
from support import fortunes_or_skip, import_or_skip

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
REQUIRE = os.environ.get("PYGGML_OPT_REQUIRE_C_TESTS") == "1"

# script -> (the GGUF layout it writes, minimum test accuracy on the full data after 1 epoch, on the
# bundled subset after 5 epochs)
CASES = {
    "fashion_mnist_mlp.py": ("mnist-fc", 0.75, 0.68),
    "fashion_mnist_cnn.py": ("mnist-cnn", 0.65, 0.58),
}


TEXT_EXAMPLES = ["char_gpt.py", "llama_fortunes.py"]  # tested below on Debian's fortunes
CHAT_EXAMPLES = ["chat.py"]  # tested in tests/integration/test_chat.py on a model with a real chat template


def test_every_example_is_tested():
    scripts = sorted(p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_"))
    assert scripts == sorted([*CASES, *TEXT_EXAMPLES, *CHAT_EXAMPLES]), \
        f"examples/ has {scripts}; add the new ones to tests/integration/test_examples.py"


@pytest.fixture(scope="module")
def fashion(tmp_path_factory):
    """(IDX folder, epochs, which bound applies, test images and labels)."""
    if data.fashion_mnist_available():
        _, (x_test, y_test) = data.load_fashion_mnist(flatten=True)
        return str(data.DEBIAN_FASHION_MNIST_DIR), 1, 1, x_test, y_test
    if REQUIRE:
        pytest.fail("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist; "
                    "PYGGML_OPT_REQUIRE_C_TESTS=1)")
    folder = data.raw_idx_dir(small=True, dest=tmp_path_factory.mktemp("fashion-small"))
    _, (x_test, y_test) = data.load_fashion_mnist(folder, flatten=True)
    return str(folder), 5, 2, x_test, y_test


def _run(args: list[str], cwd: Path, timeout: int = 300) -> str:
    proc = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout


def _test_accuracy(stdout: str) -> str:
    """The test accuracy a script printed last ("test loss 0.57, test accuracy 79.57 %" or the demo's
    "test: loss 0.57, accuracy 79.57 %"), as printed."""
    found = re.findall(r"^test\b.*\baccuracy ([0-9]+\.[0-9]+) %$", stdout, flags=re.M)
    assert found, f"no test accuracy in the output:\n{stdout[-3000:]}"
    return found[-1]


def _check_saved(path: Path, architecture: str, printed: str, x_test, y_test) -> None:
    assert path.is_file(), f"{path} was not written"
    with GGUFFile.read(path) as f:
        assert f.get("general.architecture") == architecture  # ggml's layout: its mnist-eval reads the file
    model = pgo.load(path)
    loss, accuracy = model.evaluate(x_test, y_test, n_threads=1)
    assert math.isfinite(loss)
    assert f"{100 * accuracy:.2f}" == printed, f"the saved model's accuracy {100 * accuracy} % != the printed {printed} %"


@pytest.mark.parametrize("script", sorted(CASES))
def test_example_trains_and_saves(script, fashion, tmp_path):
    folder, epochs, which, x_test, y_test = fashion
    architecture, bound = CASES[script][0], CASES[script][which]
    out = tmp_path / "model.gguf"
    # run from the repository root, as the examples' docstrings show
    stdout = _run([str(EXAMPLES / script), folder, "--epochs", str(epochs), "--threads", "1", "--out", str(out)],
                  cwd=ROOT)
    assert f"trained {epochs} epochs" in stdout
    printed = _test_accuracy(stdout)
    assert float(printed) / 100 >= bound, f"{script}: test accuracy {printed} % < {100 * bound} % after {epochs} epoch(s)"
    _check_saved(out, architecture, printed, x_test, y_test)


def test_demo_on_the_bundled_subset(tmp_path):
    # the small subset shipped in the package: 6000 training images, 3 epochs of batch 1000
    out = tmp_path / "demo.gguf"
    stdout = _run(["-m", "pyggml_opt.demo", "--small", "--epochs", "3", "--threads", "1", "--verbose", "2",
                   "--out", str(out)], cwd=tmp_path)
    assert "Fashion-MNIST subset (bundled)" in stdout
    printed = _test_accuracy(stdout)
    assert float(printed) >= 64.0, f"demo: test accuracy {printed} % after 3 epochs"  # seed 0 gives 69.9 %
    _, (x_test, y_test) = data.load_fashion_mnist_small(flatten=True)
    _check_saved(out, "mnist-fc", printed, x_test, y_test)


@pytest.fixture(scope="module")
def unigram_entropy():
    """Nats per character of the fortunes' character frequencies: what a model that ignores the
    context scores at best (3.30 nats). A language model must get below it."""
    if not data.DEBIAN_FORTUNES_DIR.is_dir():
        if REQUIRE:
            pytest.fail("Debian's fortunes are not installed (apt-get install fortunes; PYGGML_OPT_REQUIRE_C_TESTS=1)")
        pytest.skip("Debian's fortunes are not installed")
    texts, _, _ = data.load_fortunes()
    _, x, _ = data.char_windows(texts, 64)
    p = np.bincount(x.ravel()) / x.size
    p = p[p > 0]
    return float(-(p * np.log(p)).sum())


def _validation_loss(stdout: str, unit: str = "character") -> float:
    found = re.findall(rf"^validation:? loss ([0-9]+\.[0-9]+) nats per {unit}", stdout, flags=re.M)
    assert found, f"no validation loss in the output:\n{stdout[-3000:]}"
    return float(found[-1])


def test_char_gpt_learns_generates_and_round_trips(unigram_entropy, tmp_path):
    out = tmp_path / "gpt.gguf"
    # one layer of width 32, 150 steps of 32 windows of 32 characters at lr 3e-3: seed 0 gives a
    # validation loss of 2.877 nats per character, well under the unigram entropy (3.30)
    stdout = _run([str(EXAMPLES / "char_gpt.py"), "--steps", "150", "--layers", "1", "--dim", "32", "--heads", "2",
                   "--context", "32", "--lr", "3e-3", "--samples", "2", "--length", "40", "--threads", "1",
                   "--out", str(out)], cwd=ROOT)
    loss = _validation_loss(stdout)
    assert loss < unigram_entropy - 0.3, f"validation loss {loss} is not below the unigram entropy {unigram_entropy}"
    assert stdout.count("--- sample") == 2 and "generates the same samples" in stdout
    meta = pgo.saving.load_metadata(out)
    assert meta["general.architecture"] == "pyggml-gpt" and meta["pyggml-gpt.block_count"] == 1
    assert meta["tokenizer.pyggml_opt.chars"] == data.CharTokenizer.from_metadata(meta).chars
    tokenizer = data.CharTokenizer.from_metadata(meta)
    texts, _, _ = data.load_fortunes()
    _, x, y = data.char_windows(texts, 32)
    n_val = len(x) // 20
    assert f"{pgo.load(out).evaluate(x[-n_val:], y[-n_val:], n_threads=1)[0]:.4f}" == f"{loss:.4f}"
    assert tokenizer.vocab_size == pgo.load(out).output_shape[-1]


def test_demo_trains_a_gpt_on_the_fortunes(unigram_entropy, tmp_path):
    out = tmp_path / "demo-gpt.gguf"
    stdout = _run(["-m", "pyggml_opt.demo", "--model", "gpt", "--steps", "40", "--threads", "1", "--verbose", "0",
                   "--out", str(out)], cwd=tmp_path)
    # 40 steps of the 4-layer, width-128 model: seed 0 gives 2.797 nats per character
    assert _validation_loss(stdout) < unigram_entropy
    assert stdout.count("---\nThe ") == 3
    assert pgo.saving.load_metadata(out)["general.architecture"] == "pyggml-gpt"


def test_llama_fortunes_runs_in_llama_cpp_as_in_pyggml_opt(tmp_path):
    import_or_skip("llama_cpp", "the example generates with llama.cpp")
    import_or_skip("tokenizers", "BPETokenizer trains with it")
    fortunes_or_skip()
    out = tmp_path / "llama.gguf"
    # four fortune files (94 kB), a 300-token BPE, one block of width 32, 30 steps of 16 windows of 64
    # ids: seed 0 gives a validation loss of 4.823 nats per token (a uniform guess: ln 300 = 5.70); ~6 s
    stdout = _run([str(EXAMPLES / "llama_fortunes.py"), "--categories", "love", "riddles", "medicine", "food",
                   "--vocab", "300", "--steps", "30", "--dim", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
                   "--context", "64", "--length", "30", "--threads", "1", "--out", str(out)], cwd=ROOT)
    assert _validation_loss(stdout, "token") < math.log(300) - 0.5
    # the example itself fails unless llama.cpp's greedy ids from each file are pyggml_opt's
    assert "llama.cpp generates pyggml_opt's greedy text from both files" in stdout
    assert "--- pyggml_opt, Q8_0, greedy ---" in stdout and "--- llama.cpp, Q8_0, greedy: the first 30 of 30" in stdout
    meta = pgo.saving.load_metadata(out)
    assert meta["general.architecture"] == "llama" and meta["llama.block_count"] == 1
    assert pgo.saving.load_vocab(out).vocab_size == 300 == pgo.load(out).output_shape[-1]
    q8 = tmp_path / "llama-q8_0.gguf"
    assert q8.stat().st_size < 0.4 * out.stat().st_size  # 41,056 of 133,536 bytes measured
