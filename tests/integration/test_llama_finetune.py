"""Full fine-tuning against llama.cpp's own trainer (``llama-finetune``'s steps through llama-cpp-python's
libraries: tests/support/llama_trainer.py) on one F32 file: a llama over Llama 2's vocabulary (llama.cpp's
``ggml-vocab-llama-spm.gguf``) with random weights, windows of Debian's fortunes every n_ctx / 2 ids as
llama-finetune cuts them, every tensor but the token embedding trained (llama.cpp never trains it),
AdamW, one step per window, in order; and the fine-tuned model saved for llama.cpp runs there with
pyggml_opt's logits.

One optimizer step is compared: the loss before it and after it are llama.cpp's to 1e-5. Later steps
differ by design of the reference: upstream ggml-opt, which llama.cpp's trainer runs, never resets the
gradient accumulators of its allocation-based graphs, so each of its steps applies the sum of every
gradient since the first (vendor/patches/0038 fixes that here; tests/ggml/test_opt_alloc_graphs.py).
"""
from __future__ import annotations

import numpy as np
import pytest

import pyggml_opt as pgo
from support import fortunes_or_skip, import_or_skip
from support.hf_models import vocab_keys
from support.llama_trainer import llama_finetune, pyggml_finetune

llama_cpp = import_or_skip("llama_cpp", "llama.cpp's trainer and runtime are llama-cpp-python's")
import_or_skip("tokenizers", "GGUFTokenizer runs its merges in Hugging Face tokenizers")

CONTEXT = 256  # llama.cpp pads a context to a multiple of 256: its windows are that long
LR = 1e-3


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """(path of the F32 file, windows x, next ids y)."""
    texts = fortunes_or_skip()
    keys = vocab_keys("llama-spm")
    tok = pgo.text.GGUFTokenizer(keys)
    model = pgo.models.llama(tok.vocab_size, CONTEXT, 32, 2, 4)
    model.file_keys = dict(keys)
    path = tmp_path_factory.mktemp("llama_finetune") / "base-f32.gguf"
    model.save(path, format="llama.cpp")
    x, y = pgo.data.sliding_windows(tok.encode("\n%\n".join(texts[:40])), CONTEXT, CONTEXT // 2)
    return path, x, y


def test_one_adamw_step_of_every_tensor_equals_llama_finetune(base):
    path, x, y = base
    theirs = [loss for loss, _ in llama_finetune(str(path), x[:1], y[:1], epochs=2, lr=LR, n_threads=1)]
    _, ours = pyggml_finetune(str(path), x[:1], y[:1], 2, LR, 1)
    assert theirs[1] < theirs[0] - 0.01   # the step changed the model
    np.testing.assert_allclose([loss for loss, _ in ours], theirs, rtol=1e-5)


def test_a_fully_fine_tuned_model_runs_in_llama_cpp_with_our_logits(base, tmp_path):
    path, x, y = base
    model, losses = pyggml_finetune(str(path), x[:4], y[:4], 2, LR, 1)
    assert losses[1][0] < losses[0][0]
    out = tmp_path / "tuned.gguf"
    model.save(out, format="llama.cpp")
    llm = llama_cpp.Llama(str(out), n_ctx=CONTEXT, logits_all=True, type_k=0, type_v=0, n_threads=1,
                          n_batch=CONTEXT, verbose=False)
    try:
        prompt = x[5, :100]
        llm.reset()
        llm.eval(prompt.tolist())
        theirs = np.array(llm.scores[:len(prompt)], np.float32)
    finally:
        llm.close()
    ours = model.predict(prompt[None], logits=True)[0]
    assert np.abs(ours - theirs).max() / np.abs(theirs).max() < 1e-4
