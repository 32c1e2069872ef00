"""Which graphs ggml can differentiate: ``check_backward`` refuses, with a ValueError naming the op,
a graph that ``ggml_build_backward_expand`` would abort on, before ggml sees it."""
from __future__ import annotations

from .._lib import CData, c_str, ffi, lib

# ggml ops with a backward pass (ggml.c, ggml_compute_backward at 0.25.3, the same set as at 0.15.3;
# CONCAT by vendor patch 0013, the unary SIGMOID and TANH by 0016, NORM by 0020, the unary GELU by
# 0022, CONV_2D by 0023, BATCH_NORM by 0025).
BACKWARD_OPS = {
    "NONE", "DUP", "ADD", "ADD1", "ACC", "SUB", "MUL", "DIV", "SQR", "SQRT", "LOG", "SIN", "COS", "SUM",
    "SUM_ROWS", "MEAN", "REPEAT", "REPEAT_BACK", "CONCAT", "NORM", "RMS_NORM", "MUL_MAT", "SCALE", "SET", "CPY", "CONT",
    "RESHAPE", "VIEW", "PERMUTE", "TRANSPOSE", "GET_ROWS", "DIAG_MASK_INF", "DIAG_MASK_ZERO", "SOFT_MAX",
    "ROPE", "IM2COL", "CONV_2D", "POOL_2D", "CROSS_ENTROPY_LOSS", "CROSS_ENTROPY_IDS", "BATCH_NORM",
}
BACKWARD_UNARY = {"ABS", "SGN", "NEG", "STEP", "RELU", "SILU", "EXP", "EXPM1", "SOFTPLUS", "SIGMOID", "TANH", "GELU"}
BACKWARD_GLU = {"SWIGLU"}

# Sources whose gradient ggml_build_backward_expand ignores: (op, unary op or None) -> source slots.
_IGNORED_SRC = {
    (lib.GGML_OP_IM2COL, None): (0,), (lib.GGML_OP_IM2COL_BACK, None): (0,),  # used for their shape only
    (lib.GGML_OP_CPY, None): (1,), (lib.GGML_OP_GET_ROWS, None): (1,),         # targets, row ids, positions
    (lib.GGML_OP_GET_ROWS_BACK, None): (1,), (lib.GGML_OP_ROPE, None): (1,),
    (lib.GGML_OP_CROSS_ENTROPY_IDS, None): (1,),  # class ids (vendor patch 0045)
    (lib.GGML_OP_UNARY, lib.GGML_UNARY_OP_SGN): (0,), (lib.GGML_OP_UNARY, lib.GGML_UNARY_OP_STEP): (0,),
    (lib.GGML_OP_BATCH_NORM_STATS, None): (0,),  # differentiated through BATCH_NORM of the same tensor
}


def _key(t: CData) -> int:
    return int(ffi.cast("uintptr_t", t))


def _sources(t: CData) -> list[CData]:
    """The sources of ``t`` through which a gradient flows, as ggml_build_backward_expand sees them."""
    unary = lib.ggml_get_unary_op(t) if t.op == lib.GGML_OP_UNARY else None
    ignored = _IGNORED_SRC.get((t.op, unary), _IGNORED_SRC.get((t.op, None), ()))
    return [t.src[i] for i in range(lib.GGML_MAX_SRC) if t.src[i] != ffi.NULL and i not in ignored]


def _topological(outputs: CData) -> list[CData]:
    """Every node reachable from ``outputs``, sources before their users."""
    order, seen, stack = [], set(), [(outputs, False)]
    while stack:
        t, expanded = stack.pop()
        if expanded:
            order.append(t)
            continue
        if _key(t) in seen:
            continue
        seen.add(_key(t))
        stack.append((t, True))
        stack.extend((t.src[i], False) for i in range(lib.GGML_MAX_SRC) if t.src[i] != ffi.NULL)
    return order


def check_backward(outputs: CData) -> None:
    """Raise ValueError naming the first op on a parameter's path that ggml cannot differentiate.

    Mirrors ggml_build_backward_expand: a node needs a gradient when it is a parameter or one of
    its differentiable sources needs one; integer outputs (ARGMAX, COUNT_EQUAL ...) never do, so a
    graph that only reads them off a trainable path trains."""
    order = _topological(outputs)
    if not any(t.flags & lib.GGML_TENSOR_FLAG_PARAM for t in order):
        # ggml_build_backward_expand asserts (aborts) on a graph without parameters
        raise ValueError("the model's output does not depend on any trainable parameter: nothing to train")
    needs: set[int] = set()
    users: dict[int, int] = {}
    for t in order:
        if t.type == lib.GGML_TYPE_I32:
            continue
        if t.flags & lib.GGML_TENSOR_FLAG_PARAM or any(_key(s) in needs for s in _sources(t)):
            needs.add(_key(t))
            for s in _sources(t):
                users[_key(s)] = users.get(_key(s), 0) + 1
    for t in order:
        if _key(t) in needs and t.op != lib.GGML_OP_NONE:
            _check_op(t, users, needs)


def _check_op(t: CData, users: dict[int, int], needs: set[int]) -> None:
    op = c_str(lib.ggml_op_name(t.op))
    if t.op == lib.GGML_OP_UNARY:
        u = c_str(lib.ggml_unary_op_name(lib.ggml_get_unary_op(t)))
        if u not in BACKWARD_UNARY:
            raise ValueError(f"ggml has no backward pass for the unary op {u} (used on a trainable path); "
                             "build it from differentiable ops (see pyggml_opt.ops: gelu, sigmoid, tanh, silu, ...)")
    elif t.op == lib.GGML_OP_GLU:
        g = c_str(lib.ggml_glu_op_name(lib.ggml_get_glu_op(t)))
        if g not in BACKWARD_GLU:
            raise ValueError(f"ggml has no backward pass for the GLU op {g} (used on a trainable path)")
    elif op not in BACKWARD_OPS:
        raise ValueError(f"ggml has no backward pass for the op {op} (used on a trainable path); "
                         "build it from differentiable ops (see pyggml_opt.ops)")
    elif t.op == lib.GGML_OP_BATCH_NORM and _key(t.src[1]) in needs:
        # a batch's own statistics never need one (their gradient is part of BATCH_NORM's): these are given
        raise ValueError("ggml's batch norm has no gradient for given statistics (running_mean / running_var "
                         "computed from trainable values); keep them out of the trainable path")
    elif t.op == lib.GGML_OP_MEAN and users.get(_key(t.src[0]), 0) > 1:
        # ggml's MEAN backward adds its gradient with ggml_add1, which asserts a scalar: it aborts
        # when the input also gets a gradient from another user (x - mean(x), as in layer_norm)
        raise ValueError("ggml's backward pass for MEAN (ggml_mean) fails when its input has other users "
                         "on a trainable path; use pyggml_opt.ops.mean (sum_rows * 1/n) instead")
