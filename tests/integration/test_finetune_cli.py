"""Fine-tuning in one command (``python -m pyggml_opt.finetune``) and one call (``finetune``): a GGUF base
over Qwen2.5's real vocabulary and chat template (llama.cpp's ``ggml-vocab-qwen2.gguf`` from the
llama-cpp-python 0.3.36 sdist) with random weights, trained on conversations made of Debian's fortunes.
Checked: the validation loss falls, the adapter file loads back onto the base, a run resumed from its
epoch-1 checkpoint ends with the same adapter bit for bit, the base is never written, and bad input
ends with exit status 2 and a message before anything trains."""
from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt.core import GGUFFile
from pyggml_opt.data.text import DEBIAN_FORTUNES_DIR, load_fortunes
from pyggml_opt.finetune import finetune
from pyggml_opt.saving.checkpoint import load_checkpoint
from support import import_or_skip
from support.hf_models import vocab_keys

import_or_skip("jinja2", "chat templates render in Jinja2")
import_or_skip("tokenizers", "GGUFTokenizer runs its merges in Hugging Face tokenizers")
if not DEBIAN_FORTUNES_DIR.is_dir():
    pytest.skip("Debian's fortunes package is not installed", allow_module_level=True)

COMMAND = [sys.executable, "-m", "pyggml_opt.finetune"]
QUICK = dict(epochs=2, batch_size=4, learning_rate=1e-2, lora_rank=4, lora_alpha=8, n_threads=1, verbose=0,
             log=lambda line: None)


def conversations(texts):
    return [{"messages": [{"role": "user", "content": "Tell me a fortune."},
                          {"role": "assistant", "content": t}]} for t in texts]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """(base, data directory): a llama over Qwen2.5's vocabulary saved for llama.cpp, and
    train.jsonl / valid.jsonl of short fortunes as answers."""
    root = tmp_path_factory.mktemp("finetune")
    keys = vocab_keys("qwen2")
    model = pgo.models.llama(len(keys["tokenizer.ggml.tokens"]), 128, 16, 1, 2)
    model.file_keys = dict(keys)
    base = root / "base.gguf"
    model.save(base, format="llama.cpp")
    texts, _, _ = load_fortunes(["computers"])
    short = [t for t in texts if len(t) < 120][:48]
    data = root / "data"
    data.mkdir()
    for name, part in (("train", short[:40]), ("valid", short[40:])):
        (data / f"{name}.jsonl").write_text("".join(json.dumps(c) + "\n" for c in conversations(part)))
    return base, data


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_finetune_lowers_the_validation_loss_and_writes_a_loadable_adapter(files, tmp_path):
    base, data = files
    before_hash = digest(base)
    result = finetune(base, data, output=tmp_path / "adapter.gguf", pack=True, **QUICK)
    assert result.after < result.before - 0.15   # adapters alone on a random base of 151,936 tokens: 0.25 measured
    assert len(result.history["loss"]) == 2 and result.history["val_loss"][-1] == pytest.approx(result.after)
    assert result.data["train"].format == "chat" and len(result.data["valid"]) == 8
    again = pgo.load(base)
    again.load_adapter(tmp_path / "adapter.gguf")
    x, y, w = result.data["valid"].windows()
    assert again.evaluate(x, y, sample_weight=w, metrics=[])[0] == pytest.approx(result.after, rel=1e-5)
    assert digest(base) == before_hash


def test_a_resumed_run_ends_where_an_uninterrupted_one_does(files, tmp_path):
    base, data = files
    whole = finetune(base, data, output=tmp_path / "whole.gguf", checkpoint=tmp_path / "ckpt-{epoch}.gguf", **QUICK)
    resumed = finetune(base, data, output=tmp_path / "resumed.gguf", resume=tmp_path / "ckpt-1.gguf", **QUICK)
    for k, v in whole.model.get_weights().items():
        np.testing.assert_array_equal(resumed.model.get_weights()[k], v, err_msg=k)
    assert resumed.history["loss"] == whole.history["loss"]
    with GGUFFile.read(tmp_path / "whole.gguf") as a, GGUFFile.read(tmp_path / "resumed.gguf") as b:
        assert sorted(a.tensor_names()) == sorted(b.tensor_names())
        for name in a.tensor_names():
            np.testing.assert_array_equal(a.tensor(name), b.tensor(name), err_msg=name)


def test_the_command_line_trains_and_reports(files, tmp_path):
    base, data = files
    out = tmp_path / "adapter.gguf"
    proc = subprocess.run([*COMMAND, str(base), "--data", str(data), "-o", str(out), "--epochs", "1",
                           "--learning-rate", "1e-2", "--lora-rank", "4", "--targets", "attn_q", "attn_v", "--quiet",
                           "--threads", "1"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "train: 40 examples (chat)" in proc.stdout and "validation loss after" in proc.stdout
    assert f"wrote the adapter to {out}" in proc.stdout
    with GGUFFile.read(out) as f:
        assert f.get("adapter.type") == "lora"
        assert {n.split(".")[2] for n in f.tensor_names()} == {"attn_q", "attn_v"}


def test_help_reads_like_a_manual():
    proc = subprocess.run([*COMMAND, "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    for words in ("--lora-rank", "--no-mask-prompt", "--pack", "--resume", '{"prompt": "...", "completion": "..."}',
                  "exit status: 0 done, 2 bad input"):
        assert words in proc.stdout


@pytest.mark.parametrize("case, match", [
    ("missing data", "data '.*missing' does not exist"),
    ("bad line", r"bad.jsonl:2: not JSON"),
    ("not a language model", "holds a Sequential, not a language model"),
    ("output is the base", "is the base model: the base is never written"),
    ("unknown target", "wizard_proj"),
])
def test_bad_input_exits_with_status_2_and_a_message(files, tmp_path, case, match):
    base, data = files
    args = [str(base), "--data", str(data), "-o", str(tmp_path / "a.gguf")]
    if case == "missing data":
        args[2] = str(tmp_path / "missing")
    elif case == "bad line":
        (tmp_path / "bad.jsonl").write_text('{"text": "fine"}\n{"text": \n')
        args[2] = str(tmp_path / "bad.jsonl")
    elif case == "not a language model":
        mlp = pgo.Sequential([pgo.layers.Linear(3, 2)], input_shape=(3,))
        mlp.save(tmp_path / "mlp.gguf")
        args[0] = str(tmp_path / "mlp.gguf")
    elif case == "output is the base":
        args[-1] = str(base)
    elif case == "unknown target":
        args += ["--targets", "wizard_proj"]
    before_hash = digest(base)
    proc = subprocess.run([*COMMAND, *args, "--quiet"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert re.search(match, proc.stderr), proc.stderr
    assert digest(base) == before_hash
    assert not (tmp_path / "a.gguf").exists()


def test_full_fine_tuning_trains_f16_weights_as_float32_copies_and_refuses_quantized_ones(files, tmp_path):
    base, data = files
    model = pgo.load(base)
    model.save(tmp_path / "f16.gguf", format="llama.cpp", quantize="f16")
    assert "f16" in pgo.load(tmp_path / "f16.gguf").quantized().values()
    lines = []
    result = finetune(tmp_path / "f16.gguf", data, full=True, output=tmp_path / "full.gguf",
                      **{**QUICK, "log": lines.append})
    assert any("F16 / BF16 weights trained as float32 master copies" in line for line in lines)
    assert result.after < result.before - 0.5 and not result.model.quantized() and not result.model.frozen()
    tuned = pgo.load(tmp_path / "full.gguf")   # float32, the trained weights as they are
    for k, v in result.model.get_weights().items():
        np.testing.assert_array_equal(tuned.get_weights()[k], v, err_msg=k)
    model.save(tmp_path / "q8.gguf", format="llama.cpp", quantize="q8_0")
    with pytest.raises(ValueError, match="full fine-tuning trains float32 weights .* holds 1 quantized "
                                         r"\(blk0.ffn.w_down.weight \(q8_0\)\): train LoRA adapters"):
        finetune(tmp_path / "q8.gguf", data, full=True, output=tmp_path / "full.gguf", **QUICK)


def test_ctrl_c_ends_with_status_130_and_the_last_checkpoint_whole(files, tmp_path):
    base, data = files
    ckpt = tmp_path / "ckpt.gguf"
    proc = subprocess.Popen([*COMMAND, str(base), "--data", str(data), "-o", str(tmp_path / "a.gguf"), "--epochs", "500",
                             "--checkpoint", str(ckpt), "--quiet", "--threads", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while not ckpt.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert ckpt.exists(), proc.stderr.read() if proc.poll() is not None else "no checkpoint in 300 s"
        time.sleep(1.0)   # into a later epoch
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "interrupted; the last checkpoint is" in err, err
    assert "Traceback" not in err
    point = load_checkpoint(ckpt, pgo.load(ckpt))
    assert point.epoch >= 1 and point.state.m   # the weights and the optimizer state, whole
    assert not (tmp_path / "a.gguf").exists()


def test_training_from_the_cache_equals_training_in_memory(files, tmp_path):
    base, data = files
    cached = finetune(base, data, output=None, cache=tmp_path / "cache", pack=True, **QUICK)
    memory = finetune(base, data, output=None, pack=True, **QUICK)
    assert cached.data["train"].folder is not None and memory.data["train"].folder is None
    steps = max(int(ex.lengths().max()) for ex in cached.data.values()) - 1
    assert sorted(p.name for p in cached.data["train"].folder.iterdir()) == [   # tokens, windows, manifest
        "examples.json", "ids.bin", f"packed-{steps}-x.npy", f"packed-{steps}-y.npy", "starts.npy", "trained.bin"]
    for k, v in memory.model.get_weights().items():
        np.testing.assert_array_equal(cached.model.get_weights()[k], v, err_msg=k)
    assert cached.history["loss"] == memory.history["loss"] and cached.after == memory.after
