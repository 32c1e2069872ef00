"""Index ops never abort the interpreter (issue 26): ids computed inside a model's graph that fall
outside their table make predict, evaluate, fit, generate and the scikit-learn estimators raise
ValueError (vendor patch 0037: the CPU's GET_ROWS fails the graph instead of asserting). The failed
call leaves the weights as they were, and the model keeps working with good input.

Each case runs in a child process (this file run as a script): where ggml aborts, the child dies and
the case fails with its signal instead of killing pytest."""
import subprocess
import sys

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt import ops

VOCAB, DIM = 5, 3
# column 0 holds the ids (as floats), column 1 is not read
X_GOOD = np.array([[0, 0.5], [4, 1.0], [2, -1.0], [1, 0.0]], np.float32)
Y = np.linspace(-1, 1, 4 * DIM, dtype=np.float32).reshape(4, DIM)
BAD_IDS = (7, -1)
MATCH = "index outside its table"


def embed_first_column(x, p):
    """(n, 2) floats -> the rows of ``p["emb"]`` picked by column 0, cast to int32 in the graph: (n, DIM)."""
    ids = ops.to_int32(ops.columns(x, 0, 1))
    return ops.reshape(ops.embedding(ids, p["emb"]), x.shape[0], p["emb"].shape[1])


def embedding_model(dim=DIM):
    return pgo.FunctionModel(embed_first_column, {"emb": (VOCAB, dim)}, input_shape=(2,))


def with_id(bad, row=2):
    x = X_GOOD.copy()
    x[row, 0] = bad
    return x


def assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


# ---- the cases, run in the child -----------------------------------------------------------------------

def case_predict(threads):
    m = embedding_model()
    table = m.get_weights()["emb"]
    for bad in BAD_IDS:
        # one batch (a graph built for it), then batches of 2 (a static graph cached for the size)
        for batch_size in (4, 2):
            with pytest.raises(ValueError, match=MATCH):
                m.predict(with_id(bad), batch_size=batch_size, n_threads=threads)
    for batch_size in (4, 2):
        out = m.predict(X_GOOD, batch_size=batch_size, n_threads=threads)
        np.testing.assert_array_equal(out, table[X_GOOD[:, 0].astype(int)])


def case_evaluate(threads):
    m = embedding_model()
    squares = lambda o, y: ops.mean(ops.sqr(o - y))  # noqa: E731 - a loss function: graphs with labels
    for bad in BAD_IDS:
        for loss in ("mse", squares):
            with pytest.raises(ValueError, match=MATCH):
                m.evaluate(with_id(bad), Y, loss=loss, n_threads=threads)
    want = np.mean((m.get_weights()["emb"][X_GOOD[:, 0].astype(int)] - Y) ** 2)
    for loss in ("mse", squares):
        assert m.evaluate(X_GOOD, Y, loss=loss, n_threads=threads)[0] == pytest.approx(want, rel=1e-5)


def case_fit(threads):
    m = embedding_model()
    before = m.get_weights()
    for bad in BAD_IDS:
        # gathered by the graph from x's memory, by numpy per batch, and a step accumulated over two
        # physical batches (whichever holds the bad id, no step is taken)
        for kw in ({"gather": "graph"}, {"gather": "host"}, {"physical_batch_size": 2}):
            with pytest.raises(ValueError, match=MATCH):
                m.fit(with_id(bad), Y, epochs=2, batch_size=4, loss="mse", optimizer=pgo.SGD(lr=0.1),
                      n_threads=threads, verbose=0, **kw)
            assert_same_weights(m.get_weights(), before)
    m.fit(X_GOOD, Y, epochs=3, batch_size=4, loss="mse", optimizer=pgo.SGD(lr=0.1), n_threads=threads, verbose=0)
    after = m.get_weights()["emb"]
    assert np.isfinite(after).all() and not np.array_equal(after, before["emb"])
    np.testing.assert_array_equal(m.predict(X_GOOD, n_threads=threads), after[X_GOOD[:, 0].astype(int)])


def case_generate(threads):
    # a head of 8 ids over an embedding of 5: a sampled id the embedding has no row for comes back as input
    m = pgo.Sequential([pgo.layers.Embedding(VOCAB, 4), pgo.layers.Linear(4, 8)]).build((3,))
    w = m.get_weights()
    w["1.weight"][:] = 0
    w["1.bias"][:] = 0
    w["1.bias"][7] = 1
    m.set_weights(w)
    with pytest.raises(ValueError, match=MATCH):
        pgo.generate(m, [1, 2], 2, temperature=0, n_threads=threads)
    w["1.bias"][:] = 0
    w["1.bias"][3] = 1
    m.set_weights(w)
    np.testing.assert_array_equal(pgo.generate(m, [1, 2], 2, temperature=0, n_threads=threads), [1, 2, 3, 3])


def case_sklearn(threads):
    from pyggml_opt.sklearn import GGMLRegressor

    est = GGMLRegressor(module=lambda n_in, n_out: embedding_model(n_out), max_iter=2, batch_size=4,
                        n_threads=threads, random_state=0)
    with pytest.raises(ValueError, match=MATCH):
        est.fit(with_id(7), Y)
    with pytest.warns(Warning):  # scikit-learn's ConvergenceWarning after max_iter epochs
        est.fit(X_GOOD, Y)
    fitted = est.model_.get_weights()
    with pytest.raises(ValueError, match=MATCH):
        est.predict(with_id(-1))
    with pytest.raises(ValueError, match=MATCH):
        est.partial_fit(with_id(-1), Y)
    assert_same_weights(est.model_.get_weights(), fitted)
    assert est.predict(X_GOOD).shape == Y.shape


CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}


# ---- the tests, in pytest's process ------------------------------------------------------------------

@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", sorted(CASES))
def test_out_of_range_ids_raise_without_abort(case, threads):
    child = subprocess.run([sys.executable, __file__, case, str(threads)], capture_output=True, text=True,
                           timeout=300)
    assert child.returncode == 0, (f"case {case} on {threads} thread(s): the child exited with "
                                   f"{child.returncode}\n{child.stdout[-3000:]}\n{child.stderr[-3000:]}")
    assert child.stdout.strip().endswith("OK")


if __name__ == "__main__":
    CASES[sys.argv[1]](int(sys.argv[2]))
    print("OK")
