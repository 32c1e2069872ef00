"""Float64 numpy forward passes of llama.cpp's ``llama``, ``gemma3`` and ``gpt2`` files (read with gguf's own
GGUFReader, not pyggml_opt's), the references of kernels/test_llama.py and integration/test_llama_cpp.py."""
from __future__ import annotations

import numpy as np


def read_file(path):
    """(hyperparameters by key, tensors by name as float64 numpy arrays) of a GGUF file."""
    from gguf import GGUFReader

    r = GGUFReader(str(path))
    keys = {}
    for name, field in r.fields.items():
        if len(field.types) == 1 and field.data:
            value = field.parts[field.data[0]]
            keys[name] = bytes(value).decode() if field.types[0].name == "STRING" else value.item()
    tensors = {t.name: np.array(t.data, np.float64).reshape([int(n) for n in reversed(t.shape)]) for t in r.tensors}
    return keys, tensors


def rms_norm(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def layer_norm(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * w + b


def rope_norm(x, base):
    """llama.cpp's rope for arch llama (NORM): x (T, heads, d), pairs (2i, 2i+1) rotated by t * base^(-2i/d)."""
    steps, _, d = x.shape
    angle = np.arange(steps)[:, None, None] * base ** (-np.arange(0, d, 2) / d)[None, None, :]
    c, s = np.cos(angle), np.sin(angle)
    out = np.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s
    out[..., 1::2] = x[..., 0::2] * s + x[..., 1::2] * c
    return out


def rope_neox(x, base):
    """ggml's NEOX rope (llama.cpp's qwen2 / qwen3): x (T, heads, d), pairs (i, i + d/2) rotated by t * base^(-2i/d)."""
    steps, _, d = x.shape
    angle = np.arange(steps)[:, None, None] * base ** (-np.arange(0, d, 2) / d)[None, None, :]
    c, s = np.cos(angle), np.sin(angle)
    a, b = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([a * c - b * s, a * s + b * c], axis=-1)


def attend(q, k, v, window=None, scale=None):
    """Causal attention of q (T, H, d) over k, v (T, KV, d): head h uses key head h // (H / KV); scores
    times ``scale`` (default 1 / sqrt(d)); with ``window``, keys ``window`` or more steps back masked."""
    steps, heads, d = q.shape
    k, v = (np.repeat(t, heads // t.shape[1], axis=1) for t in (k, v))
    back = np.arange(steps)[:, None] - np.arange(steps)[None, :]
    hidden = (back < 0) | (back >= (window or steps + 1))
    s = np.einsum("thd,shd->hts", q, k) * (scale or d ** -0.5) + np.where(hidden, -np.inf, 0.0)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("hts,shd->thd", p, v).reshape(steps, heads * d)


def llama_logits(keys, t, ids, rope=None):
    """Logits (T, vocab) of a file of llama.cpp's ``llama``, ``qwen2`` or ``qwen3`` (``general.architecture``,
    default llama) for one sequence of ids. Heads of ``<arch>.attention.key_length`` (default embedding /
    heads); the tensors ``attn_q.bias`` ... (Qwen2) and ``attn_q_norm`` / ``attn_k_norm`` (Qwen3's RMSNorm
    per head) where the file has them; ``rope``: NEOX for Qwen's, NORM for llama unless given."""
    arch = keys.get("general.architecture", "llama")
    rope = rope or (rope_norm if arch == "llama" else rope_neox)
    heads = keys[f"{arch}.attention.head_count"]
    kv = keys.get(f"{arch}.attention.head_count_kv", heads)
    eps, base = keys[f"{arch}.attention.layer_norm_rms_epsilon"], keys.get(f"{arch}.rope.freq_base", 10000.0)
    x = t["token_embd.weight"][ids]
    steps, dim = x.shape
    d = keys.get(f"{arch}.attention.key_length", dim // heads)
    for i in range(keys[f"{arch}.block_count"]):
        b = lambda n: t[f"blk.{i}.{n}.weight"]  # noqa: E731

        def project(n, count):
            y = (h @ b(n).T + t.get(f"blk.{i}.{n}.bias", 0.0)).reshape(steps, count, d)
            norm = t.get(f"blk.{i}.{n}_norm.weight")
            return y if norm is None else rms_norm(y, norm, eps)

        h = rms_norm(x, b("attn_norm"), eps)
        q = rope(project("attn_q", heads), base)
        k = rope(project("attn_k", kv), base)
        v = project("attn_v", kv)
        x = x + attend(q, k, v) @ b("attn_output").T
        h = rms_norm(x, b("ffn_norm"), eps)
        g = h @ b("ffn_gate").T
        x = x + (g / (1 + np.exp(-g)) * (h @ b("ffn_up").T)) @ b("ffn_down").T
    return rms_norm(x, t["output_norm.weight"], eps) @ t.get("output.weight", t["token_embd.weight"]).T


def gemma3_logits(keys, t, ids):
    """Logits (T, vocab) of a gemma3 file for one sequence of ids: embedding times sqrt(dim), RMSNorms
    before and after attention and the GELU-gated MLP, per-head query / key norms, NEOX rope, every
    ``sliding_window_pattern``-th layer global (rope ``freq_base``), the others local (sliding window,
    rope ``freq_base_swa``)."""
    g = lambda k, default=None: keys.get(f"gemma3.{k}", default)  # noqa: E731
    heads, kv, eps = g("attention.head_count"), g("attention.head_count_kv"), g("attention.layer_norm_rms_epsilon")
    window, pattern = g("attention.sliding_window", 0) or None, g("attention.sliding_window_pattern", 6)
    x = t["token_embd.weight"][ids] * np.sqrt(t["token_embd.weight"].shape[1])
    steps = len(ids)
    d = g("attention.key_length")
    gelu = lambda u: 0.5 * u * (1 + np.tanh(np.sqrt(2 / np.pi) * (u + 0.044715 * u ** 3)))  # noqa: E731
    for i in range(g("block_count")):
        b = lambda n: t[f"blk.{i}.{n}.weight"]  # noqa: E731
        local = window is not None and (pattern == 0 or i % pattern < pattern - 1)
        base = g("rope.freq_base_swa", 10000.0) if local else g("rope.freq_base", 10000.0)
        h = rms_norm(x, b("attn_norm"), eps)
        q = rope_neox(rms_norm((h @ b("attn_q").T).reshape(steps, heads, d), b("attn_q_norm"), eps), base)
        k = rope_neox(rms_norm((h @ b("attn_k").T).reshape(steps, kv, d), b("attn_k_norm"), eps), base)
        v = (h @ b("attn_v").T).reshape(steps, kv, d)
        x = x + rms_norm(attend(q, k, v, window if local else None) @ b("attn_output").T, b("post_attention_norm"), eps)
        h = rms_norm(x, b("ffn_norm"), eps)
        u = gelu(h @ b("ffn_gate").T) * (h @ b("ffn_up").T)
        x = x + rms_norm(u @ b("ffn_down").T, b("post_ffw_norm"), eps)
    return rms_norm(x, t["output_norm.weight"], eps) @ t.get("output.weight", t["token_embd.weight"]).T


def gpt2_logits(keys, t, ids):
    """Logits (T, vocab) of a gpt2 file for one sequence of ids (GELU with the tanh approximation)."""
    heads, eps = keys["gpt2.attention.head_count"], keys["gpt2.attention.layer_norm_epsilon"]
    steps = len(ids)
    x = t["token_embd.weight"][ids] + t["position_embd.weight"][:steps]
    dim = x.shape[1]
    for i in range(keys["gpt2.block_count"]):
        b = lambda n, p="weight": t[f"blk.{i}.{n}.{p}"]  # noqa: E731
        h = layer_norm(x, b("attn_norm"), b("attn_norm", "bias"), eps)
        q, k, v = np.split(h @ b("attn_qkv").T + b("attn_qkv", "bias"), 3, axis=1)
        o = attend(*(z.reshape(steps, heads, dim // heads) for z in (q, k, v)))
        x = x + o @ b("attn_output").T + b("attn_output", "bias")
        h = layer_norm(x, b("ffn_norm"), b("ffn_norm", "bias"), eps)
        u = h @ b("ffn_up").T + b("ffn_up", "bias")
        u = 0.5 * u * (1 + np.tanh(np.sqrt(2 / np.pi) * (u + 0.044715 * u ** 3)))
        x = x + u @ b("ffn_down").T + b("ffn_down", "bias")
    h = layer_norm(x, t["output_norm.weight"], t["output_norm.bias"], eps)
    return h @ t.get("output.weight", t["token_embd.weight"]).T
