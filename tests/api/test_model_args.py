"""Language models carry their arguments (``ModelArgs``, a frozen dataclass per family) and the GGUF
architectures are one table (``pyggml_opt.models.lm``): what a model is comes from its arguments, not
from guessing, and a new architecture is one entry."""
import dataclasses
import json
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt.data import CharTokenizer
from pyggml_opt.models import GPTArgs, LanguageModel, LlamaArgs, ModelArgs
from support import child_env

TOK = CharTokenizer("abcdefghij")
V, T = TOK.vocab_size, 8


def test_builders_give_language_models_with_their_checked_frozen_args():
    m = pgo.models.llama(V, T, 16, 2, 4, n_kv_heads=2, tie_embeddings=np.bool_(True))
    assert isinstance(m, LanguageModel)
    assert m.args == LlamaArgs(V, T, 16, 2, 4, True, 2, 64, 10000.0, 1e-5)   # ffn_dim resolved: default_ffn_dim(16)
    assert type(m.args.tie_embeddings) is bool
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.args.dim = 32
    assert m.args.replace(n_layers=3).n_layers == 3
    with pytest.raises(ValueError, match="n_kv_heads"):
        m.args.replace(n_kv_heads=0)
    g = pgo.models.gpt(V, T, 16, 1, 2, positions="rope")
    assert g.args == GPTArgs(V, T, 16, 1, 2, positions="rope") and g.args.family == "gpt"


def test_args_round_trip_through_configs_files_and_pickles(tmp_path):
    m = pgo.models.llama(V, T, 16, 2, 4, n_kv_heads=2, rope_theta=5e5)
    assert ModelArgs.from_config(json.loads(json.dumps(m.args.to_config()))) == m.args
    m.save(tmp_path / "m.gguf")                       # pyggml_opt's own layout: the configuration holds the args
    m.save(tmp_path / "c.gguf", tokenizer=TOK)        # llama.cpp's: its keys (and the exact values beside them)
    x = np.arange(2 * T, dtype=np.int32).reshape(2, T) % V
    for other in (pgo.load(tmp_path / "m.gguf"), pgo.load(tmp_path / "c.gguf"), pickle.loads(pickle.dumps(m)), m.clone()):
        assert isinstance(other, LanguageModel) and other.args == m.args
        np.testing.assert_array_equal(other.predict(x, logits=True), m.predict(x, logits=True))
    with pytest.raises(ValueError, match="family"):
        ModelArgs.from_config({"family": "mamba"})
    with pytest.raises(ValueError, match="no fields \\['heads'\\]"):
        ModelArgs.from_config({**m.args.to_config(), "heads": 3})


def test_a_plain_sequential_of_a_builders_layers_still_saves_for_llama_cpp(tmp_path):
    """Files and pickles of earlier versions hold a plain Sequential: its arguments are read off its
    layers (configurations compared, no weights made), and it saves and loads as the language model."""
    m = pgo.models.llama(V, T, 16, 1, 4)
    plain = pgo.Sequential(m.layers, input_shape=(T,))
    plain.set_weights(m.get_weights())
    assert pgo.models.lm.args_of(plain) == m.args
    plain.save(tmp_path / "p.gguf", tokenizer=TOK)
    back = pgo.load(tmp_path / "p.gguf")
    assert isinstance(back, LanguageModel) and back.args == m.args
    x = np.arange(T, dtype=np.int32).reshape(1, T) % V
    np.testing.assert_array_equal(back.predict(x, logits=True), m.predict(x, logits=True))


def test_a_new_architecture_is_one_table_entry(tmp_path):
    """An entry for llama's family in pyggml_opt's own layout, under other tensor names: save writes it,
    load reads it back (in a child: the table is the process's)."""
    code = textwrap.dedent(f"""
        import numpy as np
        import pyggml_opt as pgo
        from pyggml_opt.models.lm import LLAMA, Architecture, Key, LlamaArgs, TensorMap, register_architecture
        from pyggml_opt.core import GGUFFile
        arch = Architecture("test-llama", "pyggml_opt", LlamaArgs,
                            LLAMA.keys, TensorMap({{**LLAMA.tensors.names, "tok.weight": "embeddings"}}, LLAMA.tensors.block),
                            exact_args=True)
        register_architecture(arch)
        m = pgo.models.llama(12, 8, 16, 1, 4)
        m.save({str(tmp_path / 't.gguf')!r})
        with GGUFFile.read({str(tmp_path / 't.gguf')!r}) as f:
            assert f.get("general.architecture") == "test-llama", f.get("general.architecture")
            assert "embeddings" in f.tensor_names() and f.get("test-llama.block_count") == 1
        back = pgo.load({str(tmp_path / 't.gguf')!r})
        x = np.arange(8, dtype=np.int32).reshape(1, 8)
        assert back.args == m.args and np.array_equal(back.predict(x), m.predict(x))
        try:
            register_architecture(arch)
        except ValueError as exc:
            assert "already" in str(exc)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=300)
    assert out.stdout.strip() == "ok", out.stderr


def test_save_takes_the_format_explicitly(tmp_path):
    """format= names the layout; a tokenizer alone still means llama.cpp's (the default of earlier
    versions), and pyggml_opt's own format keeps a tokenizer too; layout= is format='s former name."""
    m = pgo.models.llama(V, T, 16, 1, 4)
    m.save(tmp_path / "own.gguf", format="pyggml_opt", tokenizer=TOK)
    m.save(tmp_path / "cpp.gguf", tokenizer=TOK)
    meta = {name: pgo.saving.load_metadata(tmp_path / name) for name in ("own.gguf", "cpp.gguf")}
    assert meta["own.gguf"]["general.architecture"] == "pyggml_opt" and meta["own.gguf"]["tokenizer.ggml.model"] == "t5"
    assert meta["cpp.gguf"]["general.architecture"] == "llama"
    assert pgo.saving.load_vocab(tmp_path / "own.gguf").chars == TOK.chars
    with pytest.warns(DeprecationWarning, match="format"):
        m.save(tmp_path / "old.gguf", tokenizer=TOK, layout="llama.cpp")
    assert pgo.saving.load_metadata(tmp_path / "old.gguf")["general.architecture"] == "llama"
    with pytest.raises(ValueError, match="give format alone"), pytest.warns(DeprecationWarning):
        m.save(tmp_path / "x.gguf", tokenizer=TOK, layout="llama.cpp", format="pyggml_opt")


def test_projections_named_as_earlier_versions_named_them_still_load(tmp_path):
    """Before the attention and MLP projections were Linear children, files, checkpoints and pickles
    named them ``blk0.attn.wq``, ``blk0.attn.bq``, ``blk0.ffn.w_gate`` (``legacy_names``): they load
    into today's parameters ``blk0.attn.wq.weight`` ..."""
    from pyggml_opt.core import GGUFFile
    x = np.arange(2 * T, dtype=np.int32).reshape(2, T) % V
    for m in (pgo.models.llama(V, T, 16, 1, 4, n_kv_heads=2), pgo.models.gpt(V, T, 16, 1, 2)):
        legacy = m.legacy_names()
        assert legacy["blk0.attn.wq.weight"] == "blk0.attn.wq"
        assert legacy.get("blk0.attn.wq.bias", "blk0.attn.bq") == "blk0.attn.bq"
        m.save(tmp_path / "new.gguf")
        with GGUFFile.read(tmp_path / "new.gguf") as f, GGUFFile() as old:
            for k in f.keys():
                old.set(k, f.get(k))
            for name in f.tensor_names():
                old.add_tensor(legacy.get(name, name), f.tensor(name))
            old.write(tmp_path / "old.gguf")
        back = pgo.load(tmp_path / "old.gguf")
        np.testing.assert_array_equal(back.predict(x, logits=True), m.predict(x, logits=True))
        rebuild, args = m.__reduce__()  # a pickle's weights under the earlier names
        cls, config, shape, weights, *rest = args
        old_pickle = rebuild(cls, config, shape, {legacy.get(k, k): v for k, v in weights.items()}, *rest)
        np.testing.assert_array_equal(old_pickle.predict(x, logits=True), m.predict(x, logits=True))


@pytest.mark.parametrize("arch, variant", [("qwen2", dict(rope_mode="neox", qkv_bias=True)),
                                           ("qwen3", dict(rope_mode="neox", qk_norm=True, head_dim=8))])
def test_qwen_builders_are_llama_with_their_attention_options(tmp_path, arch, variant):
    """Each architecture's module owns its builder: qwen2 / qwen3 are the llama block with the options
    their llama.cpp graphs use, Qwen's defaults (rope base 1e6, norm eps 1e-6), saved under their name."""
    head_dim = variant.get("head_dim")
    m = getattr(pgo.models, arch)(V, T, 16, 1, 4, n_kv_heads=2, head_dim=head_dim)
    assert m.args == pgo.models.llama(V, T, 16, 1, 4, n_kv_heads=2, rope_theta=1e6, norm_eps=1e-6, **variant).args
    m.build((T,), seed=0)
    m.save(tmp_path / "q.gguf", tokenizer=TOK)
    with pgo.core.GGUFFile.read(tmp_path / "q.gguf") as f:
        assert f.get("general.architecture") == arch and f.get(f"{arch}.rope.freq_base") == 1e6
    back = pgo.load(tmp_path / "q.gguf")
    assert back.args == m.args
    x = np.arange(T, dtype=np.int32).reshape(1, T) % V
    np.testing.assert_array_equal(back.predict(x, logits=True), m.predict(x, logits=True))
