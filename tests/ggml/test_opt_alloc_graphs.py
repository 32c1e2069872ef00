"""Training through ggml-opt's allocation-based graphs (``OptContext.prepare_alloc`` / ``alloc`` /
``eval``, a new forward graph per evaluation) as a user of ``pyggml_opt.core`` writes it: step by step
the same weights as static graphs and as gradient descent in float64 (vendor patch 0038: before it the
gradients of every step were added to all earlier ones); and a caller's compute context needs room
for the caller's own tensors only (ggml-opt ran out of room in it: ggml_new_object's abort, or a
segfault)."""
from __future__ import annotations

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt._lib import lib
from pyggml_opt.core import Buffer, Context, OptContext, OptLoss, Scheduler, tensor_data

N_IN, N_OUT, BATCH = 4, 3, 5
N_STEPS = 6  # optimizer steps
GRAPH = 64   # size of the allocation-based forward graphs

_rng = np.random.default_rng(29)
W0 = _rng.standard_normal((N_OUT, N_IN)).astype(np.float32)
W_TRUE = _rng.standard_normal((N_OUT, N_IN))
X = _rng.standard_normal((3, BATCH, N_IN)).astype(np.float32)  # physical batches, used in turn
T = (X.astype(np.float64) @ W_TRUE.T).astype(np.float32)


def _optimizer(name: str) -> pgo.Optimizer:
    return pgo.SGD(lr=0.05) if name == "sgd" else pgo.AdamW(lr=0.05)


def _train_ggml(optimizer: str, opt_period: int, static: bool) -> list[np.ndarray]:
    """W after each optimizer step of y = W x with mean squared error, through ggml-opt."""
    weights = []
    with Scheduler.for_device("cpu", 1) as sched:
        ctx_params = Context(2)
        w = lib.ggml_new_tensor_2d(ctx_params.ptr, lib.GGML_TYPE_F32, N_IN, N_OUT)
        lib.ggml_set_param(w)
        x_static = lib.ggml_new_tensor_2d(ctx_params.ptr, lib.GGML_TYPE_F32, N_IN, BATCH)
        buf = Buffer(ctx_params, sched.main)
        tensor_data.set(w, W0)
        if static:
            ctx_static = Context(1)  # the outputs alone: ggml-opt builds in a context of its own
            y = lib.ggml_mul_mat(ctx_static.ptr, w, x_static)
            opt = OptContext(sched, OptLoss.MEAN_SQUARED_ERROR, _optimizer(optimizer), static=(ctx_static, x_static, y),
                             opt_period=opt_period, keep_alive=(buf,))
        else:
            opt = OptContext(sched, OptLoss.MEAN_SQUARED_ERROR, _optimizer(optimizer), opt_period=opt_period, keep_alive=(buf,))
        for i in range(N_STEPS * opt_period):
            x = x_static
            if not static:
                ctx = Context(2, graph_size=GRAPH)  # x, y and the graph
                x = lib.ggml_new_tensor_2d(ctx.ptr, lib.GGML_TYPE_F32, N_IN, BATCH)
                y = lib.ggml_mul_mat(ctx.ptr, w, x)
                gf = lib.ggml_new_graph_custom(ctx.ptr, GRAPH, False)
                lib.ggml_build_forward_expand(gf, y)
                opt.prepare_alloc(ctx, gf, x, y)
            opt.alloc(backward=True)
            tensor_data.set(x, X[i % len(X)])
            tensor_data.set(opt.labels, T[i % len(X)])
            opt.eval()
            if (i + 1) % opt_period == 0:
                weights.append(tensor_data.get(w, 2).copy())
        opt.close()
        buf.close()
    return weights


def _train_float64(optimizer: str, opt_period: int) -> list[np.ndarray]:
    """The same training as gradient descent in float64 (ggml-opt's AdamW: PyTorch's, bias-corrected)."""
    opt = _optimizer(optimizer)
    w = W0.astype(np.float64)
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    grad = np.zeros_like(w)
    weights = []
    for i in range(N_STEPS * opt_period):
        x, t = X[i % len(X)].astype(np.float64), T[i % len(X)].astype(np.float64)
        # ggml-opt's mse: the mean over the batch's outputs, divided by opt_period per physical batch
        grad += 2.0 * (x @ w.T - t).T @ x / (t.size * opt_period)
        if (i + 1) % opt_period:
            continue
        step = len(weights) + 1
        if optimizer == "sgd":
            w = w - opt.lr * grad
        else:
            m = opt.beta1 * m + (1 - opt.beta1) * grad
            v = opt.beta2 * v + (1 - opt.beta2) * grad * grad
            mh, vh = m / (1 - opt.beta1 ** step), v / (1 - opt.beta2 ** step)
            w = w - opt.lr * mh / (np.sqrt(vh) + opt.eps)
        grad[:] = 0.0
        weights.append(w.copy())
    return weights


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
@pytest.mark.parametrize("opt_period", [1, 3])
def test_allocation_based_graphs_train_as_static_graphs_and_float64_descent(optimizer, opt_period):
    alloc = _train_ggml(optimizer, opt_period, static=False)
    static = _train_ggml(optimizer, opt_period, static=True)
    ref = _train_float64(optimizer, opt_period)
    assert len(alloc) == len(static) == len(ref) == N_STEPS
    for step, (a, s, r) in enumerate(zip(alloc, static, ref), 1):
        # the same ops on the same data: the graph modes differ only in when the graph is built
        np.testing.assert_array_equal(a, s, err_msg=f"optimizer step {step}")
        # float32 against float64 over at most 6 steps of |W| ~ 1: rounding of ~1e-7 per op; before
        # the fix the weights were off by 0.05-1 from the second step on
        np.testing.assert_allclose(a, r, rtol=0, atol=2e-6, err_msg=f"optimizer step {step}")


def _mlp_graph(ctx: Context, w: object, n_layers: int = 3) -> tuple[object, object, object]:
    """A forward graph of ``n_layers`` square layers with ReLU and a scaled skip connection in ``ctx``."""
    x = lib.ggml_new_tensor_2d(ctx.ptr, lib.GGML_TYPE_F32, N_IN, BATCH)
    h = x
    for _ in range(n_layers):
        h = lib.ggml_relu(ctx.ptr, lib.ggml_mul_mat(ctx.ptr, w, h))
        h = lib.ggml_add(ctx.ptr, lib.ggml_scale(ctx.ptr, h, 0.5), h)
    gf = lib.ggml_new_graph_custom(ctx.ptr, GRAPH, False)
    lib.ggml_build_forward_expand(gf, h)
    return x, h, gf


@pytest.fixture
def square_weight():
    with Scheduler.for_device("cpu", 1) as sched:
        ctx_params = Context(1)
        w = lib.ggml_new_tensor_2d(ctx_params.ptr, lib.GGML_TYPE_F32, N_IN, N_IN)
        lib.ggml_set_param(w)
        buf = Buffer(ctx_params, sched.main)
        tensor_data.set(w, np.eye(N_IN, dtype=np.float32))
        yield sched, w
        buf.close()


def _free(ctx: Context) -> int:
    return lib.ggml_get_mem_size(ctx.ptr) - lib.ggml_used_mem(ctx.ptr)


N_GRAPH_TENSORS = 1 + 4 * 3  # _mlp_graph's x and 4 ops per layer


@pytest.mark.parametrize("loss", [OptLoss.SUM, OptLoss.CROSS_ENTROPY], ids=["sum", "cross_entropy"])
@pytest.mark.parametrize("forward_only", [False, True])
def test_a_context_with_room_for_the_forward_graph_alone_is_enough(square_weight, loss, forward_only):
    """ggml-opt builds its loss, gradient and optimizer graphs in a context of its own: the caller's
    context, full after its forward graph, stays as it is (this aborted in ggml_new_object before)."""
    sched, w = square_weight
    opt = OptContext(sched, loss, None if forward_only else pgo.AdamW(lr=0.01), forward_only=forward_only)
    for backward in (False, True, True):
        ctx = Context(N_GRAPH_TENSORS, graph_size=GRAPH)
        x, out, gf = _mlp_graph(ctx, w)
        assert _free(ctx) == 0
        opt.prepare_alloc(ctx, gf, x, out)
        opt.alloc(backward=backward and not forward_only)
        assert _free(ctx) == 0
        tensor_data.set(x, np.ones((BATCH, N_IN), np.float32))
        if loss == OptLoss.CROSS_ENTROPY:
            tensor_data.set(opt.labels, np.eye(N_IN, dtype=np.float32)[np.zeros(BATCH, int)])  # class 0
        opt.eval()
    if not forward_only:
        assert not np.array_equal(tensor_data.get(w, 2), np.eye(N_IN))  # optimizer steps were taken
    with pytest.raises(ValueError, match="call prepare_alloc before each alloc"):
        opt.alloc(backward=False)  # ggml-opt forgot the graph at eval
    opt.close()


def test_a_static_graph_context_with_room_for_the_outputs_alone_is_enough(square_weight):
    sched, w = square_weight
    ctx_in = Context(1)
    x = lib.ggml_new_tensor_2d(ctx_in.ptr, lib.GGML_TYPE_F32, N_IN, BATCH)
    buf = Buffer(ctx_in, sched.main)
    ctx = Context(1)
    out = lib.ggml_mul_mat(ctx.ptr, w, x)
    assert _free(ctx) == 0
    opt = OptContext(sched, OptLoss.SUM, pgo.SGD(lr=0.01), static=(ctx, x, out), keep_alive=(buf,))
    opt.alloc(backward=True)
    tensor_data.set(x, np.ones((BATCH, N_IN), np.float32))
    opt.eval()
    # d sum(W x) / dW = 1 x^T over the batch: every weight moves by -lr * BATCH
    np.testing.assert_allclose(tensor_data.get(w, 2), np.eye(N_IN) - 0.01 * BATCH, rtol=0, atol=1e-6)
    opt.close()
