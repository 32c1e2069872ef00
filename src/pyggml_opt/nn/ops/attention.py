"""Attention over sequences: causal and padding masks, rotary position embedding, scaled dot-product
attention."""
from __future__ import annotations

from ..._lib import ffi, lib
from .linalg import mul_mat
from .shape import permute, reshape
from .tensor import Tensor, add, check_tensor, contiguous, graph_context, wrap


def causal_mask(a: Tensor) -> Tensor:
    """Attention scores (..., T_q, T_k) with every key after its query set to -inf (ggml_diag_mask_inf),
    so that a softmax over the keys gives them weight 0."""
    check_tensor("a", a)
    return wrap(lib.ggml_diag_mask_inf(graph_context(a).ptr, a.ptr, 0), a)


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, mask: Tensor | None = None,
              window: int | None = None, scale_by: float | None = None) -> Tensor:
    """Scaled dot-product attention: q (n, heads, T, d_head), k and v (n, kv_heads, T, d_head) ->
    (n, heads, T, d_head), softmax(q k^T * scale_by + mask) v (``scale_by`` default 1 / sqrt(d_head)),
    with future keys masked when ``causal``, and with ``window`` (sliding-window attention) the keys
    ``window`` or more steps before the query too.

    Grouped-query attention when ``kv_heads`` < ``heads`` (a divisor of it): query head h attends with
    key / value head h // (heads / kv_heads), as llama.cpp pairs them, by ggml's broadcasting (no copy of
    the keys and values per query head: a training graph keeps them for the backward pass).

    ``mask`` (optional, no gradient flows into it) is added to the scores before the softmax: a
    padding mask of shape (n, 1, 1, T) holding 0 for the keys to attend to and a large negative number
    (``padding_mask`` gives -1e9) for padding. A query whose keys are all masked attends to them all
    equally rather than giving NaN."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, t)
        if t.ndim != 4:
            raise ValueError(f"attention: {name} must be (n, heads, T, d_head), got shape {t.shape}")
    q_shape = q.shape
    n, heads, steps, d_head = q_shape
    kv_heads = k.shape[1]
    if k.shape != v.shape or k.shape[::2] != q.shape[::2] or k.shape[3] != d_head or heads % kv_heads:
        raise ValueError(f"attention: q must be (n, heads, T, d_head) and k, v (n, kv_heads, T, d_head) with kv_heads "
                         f"dividing heads, got {q.shape}, {k.shape}, {v.shape}")
    if mask is not None:
        check_tensor("mask", mask)
        if mask.shape not in ((n, 1, 1, steps), (n, 1, steps, steps), (1, 1, steps, steps)):
            raise ValueError(f"attention: mask must be (n, 1, 1, T) or (n, 1, T, T) for q of shape {q_shape}, "
                             f"got {mask.shape}")
    factor = 1.0 / d_head ** 0.5 if scale_by is None else float(scale_by)
    scores = reshape(mul_mat(_heads_of_batch(k), _heads_of_batch(q)), n, heads, steps, steps)  # (.., T_q, T_k)
    added = score_mask(scores, causal, mask, window)
    # one SOFT_MAX node scales, masks and normalises (its backward needs its output only): the training
    # graph keeps two score-sized tensors per layer, not a scaled and a masked copy besides
    weights = wrap(lib.ggml_soft_max_ext(graph_context(scores).ptr, scores.ptr, added.ptr if added else ffi.NULL,
                                         factor, 0.0), scores)
    out = mul_mat(_heads_of_batch(permute(v, 0, 1, 3, 2)), _heads_of_batch(weights))
    return reshape(out, *q_shape)  # (n, heads, T_q, d_head)


def _heads_of_batch(t: Tensor) -> Tensor:
    """(n, heads, rows, cols) as (1, n * heads, rows, cols), sequence-major: ggml's MUL_MAT pairs query
    head h of sequence b (index b * heads + h) with key / value head (b * heads + h) // group =
    b * kv_heads + h // group, the grouped-query pairing, by broadcasting along one axis, the only one
    its backward pass sums over (a copy of the keys and values per query head is not needed)."""
    n, heads = t.shape[:2]
    return reshape(contiguous(t), 1, n * heads, *t.shape[2:])


def score_mask(scores: Tensor, causal: bool, mask: Tensor | None, window: int | None) -> Tensor | None:
    """The additive mask (1 or n, 1, T, T) of attention ``scores`` (n, heads, T, T), computed in the graph
    (no gradient): ``mask`` (n, 1, 1, T) or (n or 1, 1, T, T) where given, plus -inf where a key comes
    after its query (``causal``) and ``PAD_SCORE`` where it is ``window`` or more steps back; None where
    nothing is masked."""
    steps = scores.shape[-1]
    ctx = graph_context(scores).ptr
    parts = []
    if mask is not None:  # SOFT_MAX reads a row per query: a padding mask's one row repeated
        parts.append(mask if mask.shape[2] == steps else
                     wrap(lib.ggml_repeat_4d(ctx, mask.ptr, steps, steps, 1, mask.shape[0]), mask))
    if causal:  # DIAG_MASK_INF of a (T, T) of zeros: 0 on and below the diagonal, -inf above it
        index = lib.ggml_reshape_4d(ctx, lib.ggml_arange(ctx, 0.0, float(steps), 1.0), steps, 1, 1, 1)
        zeros = lib.ggml_scale(ctx, lib.ggml_repeat_4d(ctx, index, steps, steps, 1, 1), 0.0)
        parts.append(wrap(lib.ggml_diag_mask_inf(ctx, zeros, 0), scores))
    if window is not None and window < steps:  # else no key is that far back
        parts.append(window_mask(scores, window))
    if not parts:
        return None
    added = parts[0]  # the mask, where given, has the most rows: the others broadcast into it
    for part in parts[1:]:
        added = add(added, part)
    return contiguous(added)


def window_mask(scores: Tensor, window: int) -> Tensor:
    """The additive mask (1, 1, T, T) of a sliding window over ``scores`` (n, heads, T, T):
    ``PAD_SCORE`` where the key is ``window`` or more steps before the query (as llama.cpp's standard
    sliding window masks it), else 0; computed in the graph from the step indices (no input, no
    gradient)."""
    steps = scores.shape[-1]
    ctx = graph_context(scores).ptr
    index = lib.ggml_arange(ctx, 0.0, float(steps), 1.0)
    queries = lib.ggml_repeat_4d(ctx, lib.ggml_reshape_4d(ctx, index, 1, steps, 1, 1), steps, steps, 1, 1)
    keys = lib.ggml_reshape_4d(ctx, index, steps, 1, 1, 1)
    # query - key - (window - 1/2) is positive exactly where the key is window or more steps back
    apart = lib.ggml_step(ctx, lib.ggml_scale_bias(ctx, lib.ggml_sub(ctx, queries, keys), 1.0, 0.5 - window))
    return wrap(lib.ggml_scale(ctx, apart, PAD_SCORE), scores, ndim=4)


ROPE_MODES = {"neox": lib.GGML_ROPE_TYPE_NEOX, "norm": lib.GGML_ROPE_TYPE_NORMAL}


def rope(x: Tensor, base: float = 10000.0, mode: str = "neox", positions: Tensor | None = None) -> Tensor:
    """Rotary position embedding of x (n, T, heads, d_head): each step t rotates pairs of features by
    the angle t * base^(-2i/d_head) for pair i. ``mode`` "neox" pairs features (i, i + d_head/2) (the
    "rotate half" convention of GPT-NeoX and of Hugging Face's LLaMA; ggml's NEOX mode); "norm" pairs
    adjacent features (2i, 2i + 1) (ggml's NORM mode: llama.cpp's rope for its ``llama`` architecture).
    Positions are 0 .. T-1, made inside the graph, so the op needs no input of its own, unless
    ``positions`` gives them: int32 (T,) for every sequence (a decoding graph's steps, which start after
    the cached ones), or (n, T), each sequence its own (packed windows, restarting at each document);
    ggml differentiates ROPE."""
    check_tensor("x", x)
    if x.ndim != 4 or x.shape[3] % 2:
        raise ValueError(f"rope: x must be (n, T, heads, d_head) with an even d_head, got shape {x.shape}")
    if not base > 1.0:
        raise ValueError(f"rope: base must be > 1, got {base}")
    if mode not in ROPE_MODES:
        raise ValueError(f"rope: mode must be one of {sorted(ROPE_MODES)}, got {mode!r}")
    src = contiguous(x)
    ctx = graph_context(src).ptr
    n, steps, heads, d_head = src.shape
    if positions is not None and positions.shape == (n, steps) and positions.ptr.type == lib.GGML_TYPE_I32:
        # ggml's positions index the steps axis only: the sequences one after another along it
        flat = rope(reshape(src, 1, n * steps, heads, d_head), base, mode, reshape(contiguous(positions), n * steps))
        return reshape(flat, n, steps, heads, d_head)
    if positions is None:
        pos = lib.ggml_cast(ctx, lib.ggml_arange(ctx, 0.0, float(steps), 1.0), lib.GGML_TYPE_I32)
    elif positions.shape != (steps,) or positions.ptr.type != lib.GGML_TYPE_I32:
        raise ValueError(f"rope: positions must be int32 ({steps},) or ({n}, {steps}) for x of shape {x.shape}, "
                         f"got {positions.shape}")
    else:
        pos = positions.ptr
    return wrap(lib.ggml_rope_ext(ctx, src.ptr, pos, ffi.NULL, d_head, ROPE_MODES[mode], 0,
                                  float(base), 1.0, 0.0, 1.0, 0.0, 0.0), src)


def cache_rows(cache: Tensor, new: Tensor, positions: Tensor, n_kv: int) -> Tensor:
    """Keys of a key / value cache: writes ``new`` (n, T, heads, d_head) into rows ``positions`` (int32
    (T,)) of ``cache`` (n, context, heads * d_head) (ggml_set_rows, in place when the graph runs) and
    returns the cache's first ``n_kv`` rows after that write as a strided view (n, heads, n_kv, d_head)
    (no copy: ``cached_attention`` reads it in place)."""
    _check_cache("cache_rows", cache, new, positions, n_kv, transposed=False)
    n, steps, heads, d_head = new.shape
    rows = reshape(contiguous(new), n, steps, heads * d_head)
    ctx = graph_context(rows).ptr
    written = lib.ggml_set_rows(ctx, cache.ptr, rows.ptr, positions.ptr)
    nb = cache.ptr.nb
    # ne (d_head, n_kv, heads, n): rows n_kv apart by the cache's row stride, heads d_head floats apart
    view = lib.ggml_view_4d(ctx, written, d_head, n_kv, heads, n, nb[1], nb[0] * d_head, nb[2], 0)
    return wrap(view, rows, ndim=4)


def cache_columns(cache: Tensor, new: Tensor, positions: Tensor, n_kv: int) -> Tensor:
    """Values of a key / value cache, kept transposed (as llama.cpp keeps them without flash attention):
    writes ``new`` (n, T, heads, d_head) into columns ``positions`` (int32 (T,)) of ``cache`` (n,
    heads * d_head, context) (ggml_set_rows of one-element rows, in place when the graph runs) and
    returns the first ``n_kv`` columns after that write as a strided view (n, heads, d_head, n_kv), each
    feature's values of consecutive steps side by side: the weights' product with them
    (``cached_attention``) is then a product of contiguous rows, with no copy."""
    _check_cache("cache_columns", cache, new, positions, n_kv, transposed=True)
    n, steps, heads, d_head = new.shape
    context, width = cache.shape[2], heads * d_head
    src = contiguous(new)
    ctx = graph_context(src).ptr
    nb = cache.ptr.nb
    # both as one-element rows: the cache ne (1, context, width, n), the new values ne (1, T, width, n)
    cells = lib.ggml_view_4d(ctx, cache.ptr, 1, context, width, n, nb[0], nb[1], nb[2], 0)
    flat = lib.ggml_reshape_4d(ctx, src.ptr, 1, width, steps, n)
    written = lib.ggml_set_rows(ctx, cells, lib.ggml_permute(ctx, flat, 0, 2, 1, 3), positions.ptr)
    # ne (n_kv, d_head, heads, n): a feature's steps side by side, features one context apart
    view = lib.ggml_view_4d(ctx, written, n_kv, d_head, heads, n, nb[1], nb[1] * d_head, nb[2], 0)
    return wrap(view, src, ndim=4)


def _check_cache(op: str, cache: Tensor, new: Tensor, positions: Tensor, n_kv: int, transposed: bool) -> None:
    """ValueError unless ``cache`` is a float32 cache (n, context, width), or (n, width, context) when
    ``transposed``, for ``new`` rows (n, T, heads, d_head) at int32 ``positions`` (T,), and 0 < ``n_kv``
    <= context."""
    for name, t in (("cache", cache), ("new", new), ("positions", positions)):
        check_tensor(name, t)
    n, steps, heads, d_head = new.shape
    context, width = (0, 0) if cache.ndim != 3 else cache.shape[:0:-1] if transposed else cache.shape[1:]
    if (cache.ndim != 3 or cache.shape[0] != n or width != heads * d_head or not 0 < n_kv <= context
            or positions.shape != (steps,) or positions.ptr.type != lib.GGML_TYPE_I32
            or cache.ptr.type != lib.GGML_TYPE_F32):
        layout = "(n, heads * d_head, context)" if transposed else "(n, context, heads * d_head)"
        raise ValueError(f"{op}: cache must be float32 {layout} and positions int32 (T,) for new rows {new.shape} "
                         f"and 0 < n_kv <= context, got {cache.shape}, {positions.shape}, {n_kv}")


def cached_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor, scale_by: float | None = None) -> Tensor:
    """Scaled dot-product attention of new steps over a key / value cache: q (n, T, heads, d_head), k
    (n, kv_heads, S, d_head) (``cache_rows``) and v transposed, (n, kv_heads, d_head, S)
    (``cache_columns``): the first S rows of the cache, new steps included; ``mask`` (1, 1, T, S)
    float32 added to the scores (0: attend, -inf: a later or unwritten row) -> (n, T, heads, d_head).

    As llama.cpp computes it without flash attention: scores by one matrix product (the keys read in
    place, query head h paired with key / value head h // (heads / kv_heads) by ggml's broadcasting),
    ggml's fused masked softmax (vectorised exp), and the weights' product with the transposed values
    (rows of S contiguous floats). A one-step graph's cost then grows with S at the speed of contiguous
    dot products: ggml's FLASH_ATTN_EXT, which runs a scalar exp and two calls per cached row, made a
    token at position 1,000 cost 1.4x-1.5x one at 64 (``benchmarks/bench_generate.py``, 1 thread), this
    1.2x-1.25x, as llama.cpp's. Scores are (n, heads, T, S) float32 in memory: callers feed long prompts
    in chunks (``nn/decoding.py``). No backward pass: for inference graphs."""
    for name, t in (("q", q), ("k", k), ("v", v), ("mask", mask)):
        check_tensor(name, t)
    n, steps, heads, d_head = q.shape
    kv_heads, keys = k.shape[1], k.shape[2]
    if (v.shape != (n, kv_heads, d_head, keys) or k.shape[0] != n or k.shape[3] != d_head or heads % kv_heads
            or mask.shape != (1, 1, steps, keys)):
        raise ValueError(f"cached_attention: q (n, T, heads, d_head), k (n, kv_heads, S, d_head), v (n, kv_heads, "
                         f"d_head, S), mask (1, 1, T, S) expected, got {q.shape}, {k.shape}, {v.shape}, {mask.shape}")
    ctx = graph_context(q, k, v, mask).ptr
    heads_first = lib.ggml_permute(ctx, q.ptr, 0, 2, 1, 3)  # a view: ne (d_head, T, heads, n)
    factor = 1.0 / d_head ** 0.5 if scale_by is None else float(scale_by)
    scores = lib.ggml_mul_mat(ctx, k.ptr, heads_first)  # ne (S, T, heads, n)
    weights = lib.ggml_soft_max_ext(ctx, scores, contiguous(mask).ptr, factor, 0.0)
    out = lib.ggml_mul_mat(ctx, v.ptr, weights)  # ne (d_head, T, heads, n)
    return wrap(lib.ggml_cont(ctx, lib.ggml_permute(ctx, out, 0, 2, 1, 3)), q)


PAD_SCORE = -1e9  # added to a padding key's score: exp underflows to 0 (-inf would give NaN in 0 * -inf)


def token_mask(ids: Tensor, pad_id: int = 0) -> Tensor:
    """(n, T) float32 of int32 ids (n, T): 1 where the id is a token, 0 where it is ``pad_id``.
    Computed in the graph from the ids (no gradient)."""
    check_tensor("ids", ids)
    if ids.ptr.type != lib.GGML_TYPE_I32 or ids.ndim != 2:
        raise TypeError(f"token_mask: ids must be an int32 (n, T) tensor, got shape {ids.shape}")
    ctx = graph_context(ids).ptr
    src = contiguous(ids)
    values = lib.ggml_cast(ctx, src.ptr, lib.GGML_TYPE_F32)
    # |id - pad| - 1/2 is negative exactly at the padding (ids are integers); step() makes that 0 / 1
    distance = lib.ggml_abs(ctx, lib.ggml_scale_bias(ctx, values, 1.0, -float(pad_id)))
    return wrap(lib.ggml_step(ctx, lib.ggml_scale_bias(ctx, distance, 1.0, -0.5)), src)


def attention_mask(keep: Tensor) -> Tensor:
    """The additive attention mask (n, 1, 1, T) of a token mask (n, T) (1: attend, 0: padding): 0 for
    tokens, ``PAD_SCORE`` for padding, for ``attention(..., mask=)``."""
    check_tensor("keep", keep)
    if keep.ndim != 2:
        raise ValueError(f"attention_mask: expected a (n, T) token mask, got shape {keep.shape}")
    n, steps = keep.shape
    ctx = graph_context(keep).ptr
    mask = lib.ggml_scale_bias(ctx, keep.ptr, -PAD_SCORE, PAD_SCORE)
    return wrap(lib.ggml_reshape_4d(ctx, mask, steps, 1, 1, n), keep, ndim=4)


def document_mask(documents: Tensor) -> Tensor:
    """The additive attention mask (n, 1, T, T) of packed windows' document indices (int32 (n, T)): 0
    where a query and a key are of one document, ``PAD_SCORE`` elsewhere, so that no document attends to
    another packed beside it (``attention(..., mask=)``; the causal mask comes on top). No gradient."""
    check_tensor("documents", documents)
    if documents.ptr.type != lib.GGML_TYPE_I32 or documents.ndim != 2:
        raise TypeError(f"document_mask: documents must be an int32 (n, T) tensor, got shape {documents.shape}")
    n, steps = documents.shape
    ctx = graph_context(documents).ptr
    index = lib.ggml_cast(ctx, contiguous(documents).ptr, lib.GGML_TYPE_F32)
    queries = lib.ggml_repeat_4d(ctx, lib.ggml_reshape_4d(ctx, index, 1, steps, 1, n), steps, steps, 1, n)
    keys = lib.ggml_reshape_4d(ctx, index, steps, 1, 1, n)
    # |query's document - key's document| - 1/2 is negative exactly within a document (indices are integers)
    apart = lib.ggml_step(ctx, lib.ggml_scale_bias(ctx, lib.ggml_abs(ctx, lib.ggml_sub(ctx, queries, keys)), 1.0, -0.5))
    return wrap(lib.ggml_scale(ctx, apart, PAD_SCORE), documents, ndim=4)


def padding_mask(ids: Tensor, pad_id: int = 0) -> Tensor:
    """The additive attention mask (n, 1, 1, T) of int32 ids (n, T): 0 where the id is a token,
    ``PAD_SCORE`` where it is ``pad_id`` (``attention_mask(token_mask(ids, pad_id))``)."""
    return attention_mask(token_mask(ids, pad_id))
