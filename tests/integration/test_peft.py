"""LoRA against PyTorch + PEFT on the same model: a ``transformers`` Llama with random weights (Llama 2's
SentencePiece vocabulary, llama.cpp's ggml-vocab-llama-spm), converted by llama.cpp's
``convert_hf_to_gguf.py``; a PEFT adapter directory loads onto the GGUF base (``load_adapter``; the q /
k rows of B permuted as the converter permuted the base's) and computes PEFT's logits, so does the
adapter file llama.cpp's ``convert_lora_to_gguf.py`` makes of it (in pyggml_opt and in llama-cpp-python);
from the same initial adapters, 50 AdamW steps on the same batches of fortunes give PEFT's losses."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import pyggml_opt as pgo
from support import fortunes_or_skip, import_or_skip
from support.hf_models import convert, llama_cpp_source, save_hf_model

torch = import_or_skip("torch", "PyTorch + PEFT judge the adapters")
transformers = import_or_skip("transformers", "the test model is a transformers Llama")
peft = import_or_skip("peft", "PyTorch + PEFT judge the adapters")
llama_cpp = import_or_skip("llama_cpp", "llama.cpp applies the converted adapter")

T = 64  # the model's context: fit trains on whole windows


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """(the transformers model's folder, its F32 GGUF, windows of T + 1 token ids of fortunes)."""
    fortunes_or_skip()
    folder = tmp_path_factory.mktemp("peft")
    config = transformers.LlamaConfig(vocab_size=32000, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False)
    hf_dir = save_hf_model(config, "llama-spm", folder / "hf", seed=0)
    gguf = convert(hf_dir, folder / "base.gguf")
    tok = pgo.text.GGUFTokenizer(pgo.load(gguf).file_keys)
    texts, _, _ = pgo.data.load_fortunes()
    ids = tok.encode("\n".join(texts[:300]), add_special=False)
    windows = ids[:len(ids) // (T + 1) * (T + 1)].reshape(-1, T + 1)
    return hf_dir, gguf, windows


def peft_model(hf_dir, seed, random_b):
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0)
    model = peft.get_peft_model(model, config)
    if random_b:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.1)
    return model


def test_a_peft_adapter_computes_peft_logits_here_and_in_llama_cpp(base, tmp_path):
    hf_dir, gguf, windows = base
    theirs_model = peft_model(hf_dir, seed=1, random_b=True)
    theirs_model.save_pretrained(tmp_path / "adapter")
    ids = windows[:2, :T]
    with torch.no_grad():
        theirs = theirs_model(torch.tensor(ids, dtype=torch.long)).logits.numpy()
    ours_model = pgo.load(gguf)
    assert len(ours_model.load_adapter(tmp_path / "adapter")) == 14  # 7 projections x 2 blocks
    ours = ours_model.predict(ids.astype(np.int32), logits=True)
    # float32 on both sides through 2 blocks: measured max |difference| ~2e-6 of logits ~0.3
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4 * np.abs(theirs).max())
    # llama.cpp's converter of PEFT adapters, read here and applied by llama.cpp
    source = llama_cpp_source()
    done = subprocess.run([sys.executable, str(source / "convert_lora_to_gguf.py"), "--base", str(hf_dir), "--outfile",
                           str(tmp_path / "adapter.gguf"), "--outtype", "f32", str(tmp_path / "adapter")],
                          capture_output=True, text=True, env={"PYTHONPATH": str(source / "gguf-py"), "PATH": ""})
    assert done.returncode == 0, done.stderr[-3000:]
    converted = pgo.load(gguf)
    converted.load_adapter(tmp_path / "adapter.gguf")
    np.testing.assert_allclose(converted.predict(ids.astype(np.int32), logits=True), ours, rtol=0, atol=1e-5)
    llm = llama_cpp.Llama(str(gguf), lora_path=str(tmp_path / "adapter.gguf"), n_ctx=T, logits_all=True, type_k=0,
                          type_v=0, n_threads=1, verbose=False)
    try:
        llm.eval([int(i) for i in ids[0]])
        cpp = np.array(llm.scores[:T])
    finally:
        llm.close()
    assert np.abs(cpp - ours[0]).max() <= 1e-3 * np.abs(cpp).max()


def test_fifty_adamw_steps_give_pefts_losses(base, tmp_path):
    """Rank 4, alpha 8, all-linear, PEFT's own initial adapters (A Kaiming-uniform, B zero) carried over
    through its adapter directory, AdamW lr 1e-3 without weight decay, 50 batches of 4 windows in
    order: every step's loss within 1e-3 relative (float32 on both sides; measured 1.9e-7)."""
    hf_dir, gguf, windows = base
    x, y = windows[:200, :T], windows[:200, 1:]
    theirs_model = peft_model(hf_dir, seed=2, random_b=False)
    theirs_model.save_pretrained(tmp_path / "initial")
    opt = torch.optim.AdamW([p for p in theirs_model.parameters() if p.requires_grad], lr=1e-3, betas=(0.9, 0.999),
                            eps=1e-8, weight_decay=0.0)
    theirs = []
    for i in range(0, 200, 4):
        logits = theirs_model(torch.tensor(x[i:i + 4], dtype=torch.long)).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 torch.tensor(y[i:i + 4], dtype=torch.long).reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        theirs.append(loss.item())
    ours_model = pgo.load(gguf)
    ours_model.load_adapter(tmp_path / "initial")
    means = []
    record = pgo.LambdaCallback(on_batch_end=lambda model, batch, logs: means.append(logs["loss"]))
    ours_model.fit(x.astype(np.int32), y.astype(np.int32), epochs=1, batch_size=4, shuffle=False,
                   optimizer=pgo.AdamW(lr=1e-3), callbacks=[record], verbose=0, n_threads=2)
    running = np.array(means) * np.arange(1, len(means) + 1)
    ours = np.diff(running, prepend=0.0)  # each batch's loss, from the running means
    assert len(ours) == 50 and theirs[-1] < theirs[0] - 0.05
    np.testing.assert_allclose(ours, theirs, rtol=1e-3)
