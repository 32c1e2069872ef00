"""ggml-opt's two graph modes, as pyggml_opt uses them: static graphs (fit's training graph, built
once for the physical batch) and allocation-based graphs (predict / evaluate: a graph per batch, any
batch size). Both against a numpy reference; misuse is a ValueError, not a ggml abort."""
from __future__ import annotations

import numpy as np
import pytest
from support import FAST, X, Y

import pyggml_opt as pgo
from pyggml_opt import layers as L
from pyggml_opt import ops
from pyggml_opt._lib import lib
from pyggml_opt.core import OptContext, Result, Scheduler
from pyggml_opt.nn import ForwardGraph


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
        graph = ForwardGraph(m, store, 5)
        opt = OptContext(sched, "sum", static=(graph.ctx_compute, graph.inputs, graph.outputs), forward_only=True,
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
        opt = OptContext(sched, "sum", forward_only=True)
        with pytest.raises(ValueError, match="prepare_alloc"):
            opt.alloc(backward=False)
        for n in (1, 7, 3, 64):
            x = np.random.default_rng(n).standard_normal((n, 6)).astype(np.float32)
            graph = ForwardGraph(m, store, n, static=False)
            opt.prepare_alloc(graph.ctx_compute, graph.gf, graph.inputs, graph.outputs, keep_alive=graph)
            opt.alloc(backward=False)
            graph.set_input(x)
            opt.eval()
            np.testing.assert_allclose(graph.output(), _reference(x, w, b), rtol=1e-5, atol=1e-5)
        opt.close()
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
