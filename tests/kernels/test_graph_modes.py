"""ggml-opt's two graph modes, as pyggml_opt uses them: static graphs (fit's training graph, built
once for the physical batch) and allocation-based graphs (predict / evaluate: a graph per batch, any
batch size; and training graphs of any batch shape). Both against a numpy reference; misuse is a
ValueError, not a ggml abort."""
from __future__ import annotations

import numpy as np
import pytest
from support import FAST, X, Y, check_gradients

import pyggml_opt as pgo
from pyggml_opt import layers as L
from pyggml_opt import ops
from pyggml_opt._lib import lib
from pyggml_opt.core import OptContext, OptLoss, Result, Scheduler, tensor_data
from pyggml_opt.nn import AllocGraph, StaticGraph, check_backward


def _linear_model():
    m = pgo.Sequential([L.Linear(6, 4)], input_shape=(6,))
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((4, 6)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    m.set_weights({"0.weight": w, "0.bias": b})
    return m, w, b


def _reference(x, w, b):
    return x.astype(np.float64) @ w.T.astype(np.float64) + b


def test_static_graph_evaluates_the_same_graph_many_times():
    """ggml-opt computes a copy of a static graph: the outputs are read through its loss ("sum")."""
    m, w, b = _linear_model()
    with Scheduler.for_device("cpu", 1) as sched:
        store = m.params_on(sched.main)
        graph = StaticGraph(m, store, 5)
        opt = OptContext(sched, OptLoss.SUM, static=(graph.ctx_compute, graph.inputs, graph.outputs), forward_only=True,
                         keep_alive=(graph,))
        with pytest.raises(ValueError, match="static graphs"):
            opt.prepare_alloc(graph.ctx_compute, None, graph.inputs, graph.outputs)
        for seed in range(3):
            x = np.random.default_rng(seed).standard_normal((5, 6)).astype(np.float32)
            opt.alloc(backward=False)
            graph.set_input(x)
            with Result() as r:
                opt.eval(r)
                assert r.loss()[0] == pytest.approx(_reference(x, w, b).sum(), rel=1e-5, abs=1e-5)
            with pytest.raises(ValueError, match="has no memory"):
                graph.output()
        opt.close()
        graph.close()
    m.close()


def test_allocation_based_graphs_take_any_batch_size():
    m, w, b = _linear_model()
    with Scheduler.for_device("cpu", 1) as sched:
        store = m.params_on(sched.main)
        opt = OptContext(sched, OptLoss.SUM, forward_only=True)
        with pytest.raises(ValueError, match="prepare_alloc"):
            opt.alloc(backward=False)
        for n in (1, 7, 3, 64):
            x = np.random.default_rng(n).standard_normal((n, 6)).astype(np.float32)
            graph = AllocGraph(m, store, n)
            opt.prepare_alloc(graph.ctx_compute, graph.gf, graph.inputs, graph.outputs, keep_alive=graph)
            opt.alloc(backward=False)
            graph.set_input(x)
            opt.eval()
            np.testing.assert_allclose(graph.output(), _reference(x, w, b), rtol=1e-5, atol=1e-5)
        opt.close()
    m.close()


def _mlp_forward64(w, x, mask):
    """Linear(6, 5), ReLU, Dropout with ``mask``, Linear(5, 3) in float64: outputs and what backprop needs."""
    z1 = x @ w["0.weight"].T + w["0.bias"]
    d = np.maximum(z1, 0) * mask
    return d @ w["3.weight"].T + w["3.bias"], z1, d


def _mse_gradients64(w, x, mask, y):
    """The float64 gradients of ggml-opt's mse loss, mean((out - y)^2) over every output value."""
    out, z1, d = _mlp_forward64(w, x, mask)
    g_out = 2 * (out - y) / out.size
    g_z1 = (g_out @ w["3.weight"]) * mask * (z1 > 0)
    return {"0.weight": g_z1.T @ x, "0.bias": g_z1.sum(0), "3.weight": g_out.T @ d, "3.bias": g_out.sum(0)}


def _one_sgd_step(m, x, mask, y):
    """One step of SGD (lr 1, no weight decay: w - gradient) through an allocation-based training graph
    for the batch ``x``; returns the gradients read back as (weights before) - (weights after)."""
    before = m.get_weights()
    with Scheduler.for_device("cpu", 1) as sched:
        store = m.params_on(sched.main)
        opt = OptContext(sched, OptLoss.MEAN_SQUARED_ERROR, pgo.SGD(lr=1.0))
        graph = AllocGraph(m, store, x.shape[0], training=True)
        assert set(graph.step_inputs) == {"2.mask"} and graph.step_inputs["2.mask"].shape == (x.shape[0], 5)
        check_backward(graph.outputs)
        opt.prepare_alloc(graph.ctx_compute, graph.gf, graph.inputs, graph.outputs, keep_alive=graph)
        opt.alloc(backward=True)
        graph.set_input(x.astype(np.float32))
        tensor_data.set(graph.step_inputs["2.mask"].ptr, mask.astype(np.float32))
        tensor_data.set(opt.labels, y.astype(np.float32))
        opt.eval()
        after = m.get_weights()
        opt.close()
    return {k: before[k].astype(np.float64) - after[k] for k in before}


@pytest.mark.parametrize("n", [1, 7, 33])
def test_allocation_based_training_graphs_give_the_float64_gradients(n):
    """An allocation-based graph built for training (``AllocGraph(training=True)``: the network's
    training form with its step inputs, gradients by ggml-opt's ggml_build_backward_expand) for batches
    of any size: the gradients of one optimizer step equal the float64 ones, which central finite
    differences confirm. One step per context: ggml-opt 0.15.3 does not reset an allocation-based
    graph's gradient accumulators between steps (issue 29), so later steps are not checked here.
    Tolerance: float32 forward and backward passes over sums of <= 33 terms (relative ~1e-6), read
    back through w - (w - g) in float32 (absolute ~3e-8 for weights below 0.5)."""
    m = pgo.Sequential([L.Linear(6, 5), L.ReLU(), L.Dropout(0.5), L.Linear(5, 3)], input_shape=(6,))
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal((n, 6)), rng.standard_normal((n, 3))
    mask = (rng.random((n, 5)) >= 0.5) * 2.0   # Dropout(0.5)'s values: 0, or 1 / (1 - 0.5)
    w0 = {k: v.astype(np.float64) for k, v in m.get_weights().items()}
    got = _one_sgd_step(m, x, mask, y)
    ref = _mse_gradients64(w0, x, mask, y)
    for name in ref:
        np.testing.assert_allclose(got[name], ref[name], rtol=1e-5, atol=1e-6, err_msg=name)

    def loss64(w):
        return float(np.mean((_mlp_forward64(w, x, mask)[0] - y) ** 2))

    check_gradients(loss64, w0, got, ref, eps=1e-6, tol=1e-5)
    m.close()


def _train_steps(m, batches, optimizer, opt_period, alloc):
    """The weights after training ``m`` on ``batches`` (x, y) with mse through one ggml-opt context of
    static graphs (one graph for the batch shape) or of allocation-based ones (a graph per batch)."""
    with Scheduler.for_device("cpu", 1) as sched:
        store = m.params_on(sched.main)
        n = batches[0][0].shape[0]
        static = None if alloc else StaticGraph(m, store, n, training=True)
        opt = OptContext(sched, OptLoss.MEAN_SQUARED_ERROR, optimizer, opt_period=opt_period, keep_alive=(static,),
                         static=None if static is None else (static.ctx_compute, static.inputs, static.outputs))
        for x, y in batches:
            graph = static or AllocGraph(m, store, n, training=True)
            if alloc:
                opt.prepare_alloc(graph.ctx_compute, graph.gf, graph.inputs, graph.outputs, keep_alive=graph)
            opt.alloc(backward=True)
            graph.set_input(x)
            tensor_data.set(opt.labels, y)
            opt.eval()
        weights = m.get_weights()
        opt.close()
    m.close()
    return weights


@pytest.mark.parametrize("opt_period", [1, 2])
@pytest.mark.parametrize("optimizer", [lambda: pgo.SGD(lr=0.1), lambda: pgo.AdamW(lr=0.01)], ids=["sgd", "adamw"])
def test_allocation_based_training_equals_static_training(optimizer, opt_period):
    """Six physical batches through allocation-based training graphs take the optimizer steps static
    graphs take (the same graph, allocated per batch). Tolerance: the same float32 ops in the same
    order, up to the allocator's placement of intermediate tensors (none expected)."""
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((8, 6)).astype(np.float32), rng.standard_normal((8, 3)).astype(np.float32))
               for _ in range(6)]
    models = [pgo.Sequential([L.Linear(6, 5), L.ReLU(), L.Linear(5, 3)], input_shape=(6,)) for _ in range(2)]
    static = _train_steps(models[0], batches, optimizer(), opt_period, alloc=False)
    alloc = _train_steps(models[1], batches, optimizer(), opt_period, alloc=True)
    for name in static:
        np.testing.assert_allclose(alloc[name], static[name], rtol=1e-6, atol=1e-7, err_msg=name)


def test_allocation_based_training_graphs_update_buffers():
    """The nodes that update a network's buffers (BatchNorm's running statistics) are part of an
    allocation-based training graph: one evaluation moves them by momentum 0.1 towards the batch's
    mean and unbiased variance, as in fit's static training graph."""
    m = pgo.Sequential([L.BatchNorm1d(4), L.Linear(4, 2)], input_shape=(4,))
    x = np.random.default_rng(0).normal(3.0, 2.0, (9, 4)).astype(np.float32)
    with Scheduler.for_device("cpu", 1) as sched:
        store = m.params_on(sched.main)
        opt = OptContext(sched, OptLoss.SUM, pgo.SGD(lr=1e-9))
        graph = AllocGraph(m, store, 9, training=True)
        assert len(graph.side_effects) == 2
        opt.prepare_alloc(graph.ctx_compute, graph.gf, graph.inputs, graph.outputs, keep_alive=graph)
        opt.alloc(backward=True)
        graph.set_input(x)
        opt.eval()
        w = m.get_weights()
        opt.close()
    np.testing.assert_allclose(w["0.running_mean"], 0.1 * x.mean(0), rtol=1e-5)
    np.testing.assert_allclose(w["0.running_var"], 0.9 + 0.1 * x.var(0, ddof=1), rtol=1e-5)
    m.close()


@pytest.mark.parametrize("batch_size", [1, 7, 32, 1000])
def test_predict_batches_of_any_size_agree(batch_size, trained, data):
    """Every sample's outputs are the same whatever the batch it is computed in (no padding)."""
    x = data[0][:45]
    np.testing.assert_allclose(trained.predict(x, batch_size=batch_size, logits=True),
                               trained.predict(x, batch_size=45, logits=True), rtol=1e-5, atol=1e-6)


def test_integer_outputs_beside_a_trainable_path_train():
    """ARGMAX (an I32 output that ggml's backward pass skips) next to trainable tensors: accepted and
    trained, as ggml_build_backward_expand allows; the gradient flows through GET_ROWS' table."""
    def forward(x, p):
        h = ops.linear(x, p["w"])
        idx = ops.wrap(lib.ggml_argmax(ops.graph_context(h).ptr, h.ptr), h, ndim=1)
        picked = ops.wrap(lib.ggml_get_rows(ops.graph_context(h).ptr, p["table"].ptr, idx.ptr), h, ndim=2)
        return ops.add(h, picked)

    m = pgo.FunctionModel(forward, {"w": (3, 6), "table": (3, 3)}, input_shape=(6,))
    t0 = m.get_weights()["table"]
    hist = m.fit(X, Y, epochs=3, batch_size=8, **FAST)
    assert np.isfinite(hist["loss"]).all()
    assert not np.array_equal(m.get_weights()["table"], t0)


def test_ops_without_backward_on_a_trainable_path_are_refused():
    def forward(x, p):
        h = ops.linear(x, p["w"])
        return ops.wrap(lib.ggml_elu(ops.graph_context(h).ptr, h.ptr), h)  # ggml's ELU has no backward

    m = pgo.FunctionModel(forward, {"w": (3, 6)}, input_shape=(6,))
    with pytest.raises(ValueError, match="no backward pass for the unary op ELU"):
        m.fit(X, Y, epochs=1, batch_size=8, **FAST)
    assert m.predict(X[:2]).shape == (2, 3)  # forward-only use is fine


def test_opt_context_takes_ggml_opt_loss_types_only():
    with Scheduler.for_device("CPU", 1) as sched:
        with pytest.raises(TypeError, match="loss must be an OptLoss"):
            OptContext(sched, "cross_entropy", forward_only=True)
