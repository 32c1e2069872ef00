"""Property-based fuzzing of the public API: random shapes, dtypes, values and hyperparameters.

Hypothesis draws cases; each runs in a child process (tests/integration/fuzz_worker.py, reused across cases for
speed and restarted after a crash). A case passes if the child survives it and it either trains or
raises ValueError / TypeError; a signal (abort, segfault) or any other exception fails. The example
database is kept in tests/integration/hypothesis-db (committed), so a failure found once replays first.
"""
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from support.children import tallied_worker

HERE = Path(__file__).resolve().parent
N_CASES = 2000


OUTCOMES: dict = {}


@pytest.fixture(scope="module")
def worker():
    yield from tallied_worker(HERE / "fuzz_worker.py", OUTCOMES, "trained", N_CASES // 5)


MUTATIONS = ["x_dtype", "x_nan", "y_inf", "y_range", "len", "features", "batch0", "physical", "val", "lr", "beta",
             "wd", "loss", "backend", "empty", "epochs", "y_dtype", "batch_type", "token_range", "weights", "metrics",
             "loss_fn"]
# fit's metrics: names, {"top_k": k} for TopKAccuracy(k) (k may exceed the classes: a ValueError), or None
METRICS = [None, None, [], ["accuracy"], ["top_k_accuracy"], [{"top_k": 1}], [{"top_k": 3}], ["mae"], ["mse"],
           ["mae", "mse"], ["accuracy", {"top_k": 2}]]


@st.composite
def cases(draw):
    """A valid training case, then 0-2 mutations that make it invalid (about half stay valid)."""
    n = draw(st.integers(min_value=1, max_value=40))
    classes = draw(st.integers(2, 5))
    # "fn:..." a loss function of fuzz_worker.LOSS_FUNCTIONS on float label rows
    loss = draw(st.sampled_from(["cross_entropy", "cross_entropy", "mse", "mean", "sum", "mae", "huber",
                                 "binary_cross_entropy", "fn:squares", "fn:mean_squares", "fn:log_cosh"]))
    kind = draw(st.sampled_from(["mlp", "mlp", "cnn", "tokens", "function"]))
    vocab = draw(st.integers(1, 12))
    function = None
    if kind == "mlp":  # MLP on (n, f)
        f, h = draw(st.integers(1, 8)), draw(st.integers(1, 8))
        act = draw(st.sampled_from(["relu", "tanh", "gelu", "layernorm", "batchnorm"]))
        layers = [("linear", f, h), (act, h, 0), ("linear", h, classes)]
        # a registered custom layer first, with or without its size in get_config (see "copy")
        custom = draw(st.sampled_from([None, None, "scale", "scale_config"]))
        if custom:
            layers.insert(0, (custom, f, 0))
        tail = [f]
    elif kind == "tokens":  # token ids (n, T) -> Embedding [-> a sequence layer] -> mean over T -> Linear
        steps, dim = draw(st.integers(1, 6)), draw(st.integers(1, 5))
        embedding = draw(st.sampled_from(["embedding", "embedding_masked"]))  # mask_zero: id 0 is padding
        middle = {"none": [], "pos": [("posemb", steps, dim)], "block": [("block", dim, 1)],
                  "mha": [("mha", dim, 1)]}[draw(st.sampled_from(["none", "pos", "block", "mha"]))]
        layers = [(embedding, vocab, dim), *middle, ("gap", 0, 0), ("linear", dim, classes)]
        tail = [steps]
    elif kind == "function":  # FunctionModel: ids as floats (n, f), cast to int32 and embedded in its graph
        steps, dim = draw(st.integers(1, 4)), draw(st.integers(1, 4))
        tail = [steps + draw(st.integers(0, 2))]
        layers = []
        # added to the ids inside the graph: most shifts move ids that x holds in range out of the table,
        # where only the graph can see them (the CPU's GET_ROWS fails the graph: a ValueError)
        shift = draw(st.sampled_from([0, 0, 0, -1, vocab, -2**31, 1e10]))
        function = {"vocab": vocab, "dim": dim, "steps": steps, "classes": classes, "shift": shift,
                    "input_shape": tail}
    else:  # CNN on (n, c, hw, hw)
        c, k, hw = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(2, 6))
        layers = [("conv", c, k), ("relu", 0, 0), ("pool", 2, 0), ("flatten", 0, 0),
                  ("linear", k * (hw // 2) ** 2, classes)]
        tail = [c, hw, hw]
    y_tail = [] if loss == "cross_entropy" and draw(st.booleans()) else [classes]
    x = {"kind": "tokens" if kind == "tokens" else "float_ids" if kind == "function" else
         draw(st.sampled_from(["float32", "float64", "int", "list"])),
         "shape": [n, *tail], "fill": "", "scale": 1.0, "seed": draw(st.integers(0, 2**16)), "vocab": vocab,
         "offset": 0}
    y = {"kind": "ids" if not y_tail else "onehot" if loss == "cross_entropy" else
         "unit" if loss == "binary_cross_entropy" else "float32",
         "shape": [n, *y_tail], "fill": "", "scale": 1.0, "seed": draw(st.integers(0, 2**16)), "classes": classes}
    physical = draw(st.integers(1, max(1, n)))
    case = {"x": x, "y": y, "layers": layers, "epochs": draw(st.integers(0, 2)),
            "batch": physical * draw(st.integers(1, 3)), "physical": physical,
            "val": draw(st.sampled_from([0.0, 0.0, 0.2])), "loss": loss, "opt": draw(st.sampled_from(["adamw", "sgd"])),
            "lr": draw(st.sampled_from([1e-3, 0.1, 1.0])), "beta1": draw(st.sampled_from([0.9, 0.0, 0.999])),
            "wd": draw(st.sampled_from([0.0, 0.5, 1.0])), "backend": "cpu", "mutations": [],
            "weights": draw(st.sampled_from(["none", "none", "random"])) if loss not in ("mean", "sum") else "none",
            "metrics": draw(st.sampled_from(METRICS)), "function": function,
            "threads": draw(st.sampled_from([1, 2])) if function else 1,
            # after training, a copy of the model (a FunctionModel's local forward function cannot be
            # pickled: Python's AttributeError, not a case to draw)
            "copy": draw(st.sampled_from([None, None, "deepcopy", "clone", "save"] + ([] if function else ["pickle"])))}
    if n * (1 - case["val"]) < 1:
        case["val"] = 0.0
    for m in draw(st.lists(st.sampled_from(MUTATIONS), max_size=2).filter(lambda l: len(l) != 1 or draw(st.booleans()))):
        case["mutations"].append(m)
        if m == "x_dtype":
            x["kind"] = draw(st.sampled_from(["str", "object", "complex", "none", "bool"]))
        elif m == "x_nan":
            x["fill"] = draw(st.sampled_from(["nan", "inf"]))
            x["kind"] = "float32"
        elif m == "y_inf":
            y["fill"], y["kind"] = "inf", "float32"
        elif m == "y_range":
            y["classes"] = classes + draw(st.integers(1, 3))
            y["kind"], y["shape"] = "ids", [n]
        elif m == "len":
            y["shape"][0] = n + draw(st.sampled_from([-1, 1, 5]))
        elif m == "features":
            x["shape"][-1] += 1
        elif m == "batch0":
            case["batch"] = draw(st.sampled_from([0, -1]))
        elif m == "physical":  # larger than the batch (after "batch_type" the batch is not an int)
            base = case["batch"] if type(case["batch"]) is int else case["physical"]
            case["physical"] = base + 1
        elif m == "val":
            case["val"] = draw(st.sampled_from([1.0, -0.1, 2.0, float("nan")]))
        elif m == "lr":
            case["lr"] = draw(st.sampled_from([0.0, -1.0, float("nan"), float("inf")]))
        elif m == "beta":
            case["beta1"] = draw(st.sampled_from([1.5, -0.1, float("nan")]))
        elif m == "wd":
            case["wd"] = draw(st.sampled_from([2.0, -0.5, float("nan")]))
        elif m == "loss":
            case["loss"] = draw(st.sampled_from(["hinge", "", "MSE"]))
        elif m == "backend":
            case["backend"] = draw(st.sampled_from(["cuda", "nope", ""]))
        elif m == "empty":
            x["shape"][0] = 0
            y["shape"][0] = 0
        elif m == "epochs":
            case["epochs"] = -1
        elif m == "y_dtype":
            y["kind"] = draw(st.sampled_from(["str", "object", "none"]))
        elif m == "batch_type":
            case["batch"] = draw(st.sampled_from([1.5, "8", None]))
        elif m == "token_range":  # ids out of range in x: checked by Python (tokens) or the graph (function)
            x["offset"] = draw(st.sampled_from([-1, vocab, 2**31]))
        elif m == "weights":
            case["weights"] = draw(st.sampled_from(["negative", "short", "zeros", "nan", "str"]))
        elif m == "metrics":
            case["metrics"] = draw(st.sampled_from([["nope"], "mae", [42], ["mae", "mae"], ["accuracy", "accuracy"],
                                                    [{"top_k": 0}], [{"top_k": 99}]]))
        elif m == "loss_fn":  # a loss function that fails, returns no Tensor or the wrong shape
            case["loss"] = draw(st.sampled_from(["fn:raises", "fn:not_a_tensor", "fn:elementwise", "fn:labels_only"]))
    return case


@seed(20261130)
@settings(max_examples=N_CASES, deadline=None, derandomize=False, print_blob=True,
          database=DirectoryBasedExampleDatabase(str(HERE / "hypothesis-db")),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_public_api_never_aborts(worker, case):
    result = worker.run(case)
    key = "trained" if result["ok"] and result["error"] is None else str(result["error"])
    OUTCOMES[key] = OUTCOMES.get(key, 0) + 1
    assert result["ok"], f"case {json.dumps(case)} -> {result['error']}"
