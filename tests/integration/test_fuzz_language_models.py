"""Property-based fuzzing of the language-model surface: ``pgo.models.llama`` / ``gpt`` arguments and
``generate``'s, valid and hostile (zero, negative, non-int, NaN, out-of-range, mistyped), drawn by
Hypothesis. Each case runs in a child (tests/integration/fuzz_lm_worker.py, restarted after a crash):
it passes if the child survives and either generates what generate promises (shape, dtype, the prompt
kept, ids in the vocabulary, a stream equal to the ids) or raises ValueError / TypeError. The example
database is tests/integration/hypothesis-db (committed): a failure found once replays first."""
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from support.children import tallied_worker

HERE = Path(__file__).resolve().parent
N_CASES = 400
OUTCOMES: dict = {}

# Python source of each argument's values: (valid ones, hostile ones); a case takes a hostile value for
# each argument with probability 1/8, so that about a third of the cases are valid throughout
MODEL = {"vocab_size": (["12"], ["1", "0", "12.0", "2**31", "True"]),
         "context": (["8", "4", "1"], ["0", "-3", "2**21", "8.5", "None"]),
         "dim": (["8", "16"], ["6", "7", "0", "-8"]),
         "n_layers": (["1", "2"], ["0", "1.0", "'1'"]),
         "n_heads": (["2", "4", "1"], ["3", "0", "16", "np.float32(2)"])}
LLAMA = {"n_kv_heads": (["None", "1", "2"], ["3", "0", "-2"]), "rope_theta": (["10000.0", "500.0"], ["1.0", "0.0", "nan", "-1"]),
         "norm_eps": (["1e-5", "1e-6"], ["0.0", "nan", "2.0", "'1e-5'"])}
GPT = {"positions": (["'learned'", "'rope'"], ["'alibi'", "None"]), "head_bias": (["True", "False"], ["'no'", "1"]),
       "dropout": (["0.0", "0.1"], ["1.0", "nan", "-0.1"])}
PROMPT = (["[2, 3, 4]", "[5]", "np.arange(20) % 12", "np.array([[2, 3], [4, 5]], np.int32)", "np.array([2, 3], np.uint64)"],
          ["''", "[]", "[2, 12]", "[-1]", "[1.0, 2.0]", "[[2, 3], [2, 3, 4]]", "np.zeros((1, 2, 3), np.int32)", "[True]",
           "None", "[2**40]", "5", "'abc'"])
GENERATE = {"max_new_tokens": (["0", "1", "5", "12"], ["-1", "2.0", "None", "True"]),
            "temperature": (["1.0", "0", "0.7", "1e-300", "1e300"], ["-1", "nan", "inf", "'1'"]),
            "top_k": (["None", "1", "3", "12"], ["0", "13", "-1", "2.5"]),
            "top_p": (["1.0", "0.9", "1e-300"], ["0", "1.5", "nan", "None"]),
            "seed": (["0", "1", "None", "2**70"], ["-1", "1.5", "'a'", "[1, 2]"]),
            "stop": (["()", "None", "2"], ["[2, 'ab']", "'j'", "b'ab'", "[1.0]", "[None]", "''", "-1", "99", "{1: 2}"]),
            "tokenizer": (["None"], ["tok", "'abc'", "pgo.data.CharTokenizer('abc')"])}


@st.composite
def cases(draw):
    def pick(values):
        valid, hostile = values
        return draw(st.sampled_from(hostile if draw(st.integers(0, 7)) == 0 else valid))

    builder = draw(st.sampled_from(["llama", "gpt"]))
    model = {k: pick(v) for k, v in {**MODEL, **(LLAMA if builder == "llama" else GPT)}.items()}
    generate = {k: pick(v) for k, v in {**GENERATE, "prompt": PROMPT}.items()}
    return {"builder": builder, "model": model, "generate": generate}


@pytest.fixture(scope="module")
def worker():
    yield from tallied_worker(HERE / "fuzz_lm_worker.py", OUTCOMES, "generated", N_CASES // 10)


@seed(20261203)
@settings(max_examples=N_CASES, deadline=None, print_blob=True,
          database=DirectoryBasedExampleDatabase(str(HERE / "hypothesis-db")),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=cases())
def test_language_models_never_abort_nor_return_garbage(worker, case):
    result = worker.run(case)
    key = str(result["error"])
    OUTCOMES[key] = OUTCOMES.get(key, 0) + 1
    assert result["ok"], f"case {json.dumps(case)} -> {result['error']}"
