"""Child process for tests/integration/test_fuzz_api.py: runs public-API cases read from stdin, one JSON per line
(``support.children.serve``: "BEGIN", then {"ok": bool, "error": type name or null}). The parent treats
any exception other than ValueError / TypeError as a failure, and a dead child (a signal) as a crash of
the case it was running.
"""
import copy
import logging
import os
import pickle
import tempfile

import numpy as np

logging.disable(logging.CRITICAL)
import pyggml_opt as pgo  # noqa: E402
from support.children import ALLOWED, serve  # noqa: E402


@pgo.nn.register
class FuzzScale(pgo.layers.Layer):
    """A custom layer (x * w, w of ``n`` values) whose ``get_config`` misses ``n``: rebuilt from its
    configuration it has the default n=4, whatever it had (a copy must refuse it unless n is 4)."""

    def __init__(self, n: int = 4, name=None) -> None:
        super().__init__(name)
        self.n = n

    def infer(self, input_shape):
        return pgo.layers.LayerShapes(input_shape, {"w": (self.n,)})

    def init(self, pname, shape, rng):
        return rng.uniform(0.5, 1.5, size=shape).astype(np.float32)

    def forward(self, x, params):
        return x * params["w"]


@pgo.nn.register
class FuzzScaleConfig(FuzzScale):
    """The same layer with ``n`` in its configuration: every copy rebuilds it."""

    def get_config(self) -> dict:
        return {**super().get_config(), "n": self.n}


def _array(spec):
    kind, shape, fill = spec["kind"], tuple(spec["shape"]), spec["fill"]
    rng = np.random.default_rng(spec["seed"])
    base = rng.standard_normal(shape) * spec["scale"]
    if fill == "nan" and base.size:
        base.flat[0] = np.nan
    elif fill == "inf" and base.size:
        base.flat[-1] = np.inf
    if kind == "tokens":
        return rng.integers(0, spec["vocab"], size=shape) + spec["offset"]
    if kind == "float_ids":  # ids as floats, for a FunctionModel that casts them in its graph
        return (rng.integers(0, spec["vocab"], size=shape) + spec["offset"]).astype(np.float32)
    if kind == "unit":
        return rng.uniform(size=shape).astype(np.float32)
    if kind == "ids":
        return rng.integers(0, spec["classes"], size=shape)
    if kind == "onehot":
        return np.eye(shape[1], dtype=np.float32)[rng.integers(0, shape[1], size=shape[0])]
    if kind == "float32":
        return base.astype(np.float32)
    if kind == "float64":
        return base
    if kind == "int":
        return np.round(np.nan_to_num(base, posinf=1, neginf=-1)).astype(np.int64)
    if kind == "bool":
        return base > 0
    if kind == "str":
        return np.full(shape, "x")
    if kind == "object":
        return np.empty(shape, dtype=object)
    if kind == "complex":
        return base.astype(np.complex64)
    if kind == "list":
        return np.nan_to_num(base).tolist()
    if kind == "none":
        return None
    raise AssertionError(kind)


def _layers(spec):
    out = []
    for kind, a, b in spec:
        if kind == "linear":
            out.append(pgo.layers.Linear(a, b))
        elif kind == "relu":
            out.append(pgo.layers.ReLU())
        elif kind == "tanh":
            out.append(pgo.layers.Tanh())
        elif kind == "gelu":
            out.append(pgo.layers.GELU())
        elif kind == "layernorm":
            out.append(pgo.layers.LayerNorm(a))
        elif kind == "flatten":
            out.append(pgo.layers.Flatten())
        elif kind == "conv":
            out.append(pgo.layers.Conv2d(a, b, 3, padding=1))
        elif kind == "pool":
            out.append(pgo.layers.MaxPool2d(a))
        elif kind == "reshape":
            out.append(pgo.layers.Reshape((a, b, b)))
        elif kind == "embedding":
            out.append(pgo.layers.Embedding(a, b))
        elif kind == "embedding_masked":
            out.append(pgo.layers.Embedding(a, b, mask_zero=True))
        elif kind == "posemb":
            out.append(pgo.layers.PositionalEmbedding(a, b))
        elif kind == "block":
            out.append(pgo.layers.TransformerBlock(a, b))
        elif kind == "mha":
            out.append(pgo.layers.MultiHeadAttention(a, b))
        elif kind == "batchnorm":
            out.append(pgo.layers.BatchNorm1d(a))
        elif kind == "gap":
            out.append(pgo.layers.GlobalAveragePooling1D())
        elif kind == "scale":
            out.append(FuzzScale(a))
        elif kind == "scale_config":
            out.append(FuzzScaleConfig(a))
    return out


def _function_model(vocab, dim, steps, classes, shift, input_shape):
    """A FunctionModel with in-graph index ops: its first ``steps`` input values plus ``shift``, cast to
    int32 in the graph (ids that only the graph knows), pick rows of a (vocab, dim) table; a linear layer
    maps them to ``classes`` outputs."""
    ops = pgo.ops

    def forward(x, p):
        ids = ops.to_int32(ops.scale(ops.columns(x, 0, steps), 1.0, float(shift)))
        rows = ops.embedding(ids, p["emb"])
        return ops.linear(ops.flatten(rows), p["w"], p["b"])

    return pgo.FunctionModel(forward, {"emb": (vocab, dim), "w": (classes, steps * dim), "b": (classes,)},
                             input_shape=input_shape)


# the loss functions a case names as "fn:<name>", defined at module level so that a model trained with
# one pickles (pickle stores a function by its qualified name)
def squares(o, y):
    return pgo.ops.mean(pgo.ops.sqr(o - y))


def mean_squares(o, y):
    return pgo.ops.scale(pgo.ops.sum(pgo.ops.sqr(o - y)), 1.0 / (o.shape[0] * o.shape[1]))


def log_cosh(o, y):
    return pgo.ops.mean(pgo.ops.softplus(pgo.ops.scale(o - y, -2.0)) + (o - y))


def raises(o, y):
    raise RuntimeError("a bug in the loss function")


def not_a_tensor(o, y):
    return 0.0


def elementwise(o, y):
    return o - y


def labels_only(o, y):
    return pgo.ops.mean(y)


LOSS_FUNCTIONS = {f.__name__: f for f in (squares, mean_squares, log_cosh, raises, not_a_tensor, elementwise,
                                          labels_only)}


def _loss(name):
    return LOSS_FUNCTIONS[name[3:]] if name.startswith("fn:") else name


def _metrics(spec):
    if not isinstance(spec, list):
        return spec
    return [pgo.TopKAccuracy(m["top_k"]) if isinstance(m, dict) else m for m in spec]


def _weights(kind, n):
    """fit's sample_weight for a case: none, valid, or one of the invalid kinds."""
    rng = np.random.default_rng(n)
    return {"none": None, "random": rng.uniform(0.1, 2.0, n), "negative": -np.ones(n), "short": np.ones(n + 1),
            "zeros": np.zeros(n), "nan": np.full(n, np.nan), "str": ["w"] * n}[kind]


def _copied(model, how):
    """``model`` through pickle, deepcopy, clone or a save and load."""
    if how == "pickle":
        return pickle.loads(pickle.dumps(model))
    if how == "deepcopy":
        return copy.deepcopy(model)
    if how == "clone":
        return model.clone()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.gguf")
        model.save(path)
        return pgo.load(path)


def run(case):
    """Run one case; the name of the first ValueError / TypeError it raised, or None."""
    function = case.get("function")
    model = _function_model(**function) if function else pgo.Sequential(_layers(case["layers"]))
    x, y = _array(case["x"]), _array(case["y"])
    threads = case.get("threads", 1)
    opt = pgo.AdamW(lr=case["lr"], beta1=case["beta1"], weight_decay=case["wd"]) if case["opt"] == "adamw" \
        else pgo.SGD(lr=case["lr"], weight_decay=case["wd"])
    metrics = _metrics(case.get("metrics"))
    error = None
    if function:  # predict and evaluate meet the in-graph ids before fit, and their graphs run after it
        for call in (lambda: model.predict(x, n_threads=threads),
                     lambda: model.evaluate(x, y, loss=_loss(case["loss"]), n_threads=threads)):
            try:
                call()
            except ALLOWED as e:
                error = error or type(e).__name__
    model.fit(x, y, epochs=case["epochs"], batch_size=case["batch"], physical_batch_size=case["physical"],
              validation_split=case["val"], loss=_loss(case["loss"]), optimizer=opt, verbose=0,
              backend=case["backend"], n_threads=threads,
              sample_weight=_weights(case["weights"], len(x) if x is not None else 0), metrics=metrics)
    batch = max(1, case["batch"]) if isinstance(case["batch"], int) else 7
    outputs = model.predict(x, batch_size=batch)
    model.evaluate(x, y, metrics=metrics, return_dict=True)
    if case.get("copy"):  # a copy either is refused or predicts exactly what the model predicts
        twin = _copied(model, case["copy"])
        if not np.array_equal(twin.predict(x, batch_size=batch), outputs, equal_nan=True):
            raise AssertionError(f"the model's {case['copy']} predicts other values than the model")
    return error


if __name__ == "__main__":
    serve(run)
