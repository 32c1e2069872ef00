"""Chat templates (pgo.text.ChatTemplate, GGUFTokenizer.apply_chat_template) against their judges:
every template of llama.cpp's source (``models/templates/*.jinja`` of the llama-cpp-python 0.3.36 sdist,
70 of real models) renders each conversation of a set (one turn, a system prompt, several turns, one
ending with the assistant, non-ASCII text, tools; the generation prompt on and off) to the text
llama-cpp-python's ``Jinja2ChatFormatter`` renders with the same bos / eos tokens, or both refuse it
(a template that needs what the formatter lacks is compared with transformers' renderer). Measured:
every conversation renders equal (or is refused by both, with the template's reason) on all 70; the
assistant spans of each template hold the assistant's words and none of the user's; the ids of a
conversation equal llama.cpp's tokenizer's on the vocabularies that carry a template; hostile templates
are refused, never crash or hang."""
from __future__ import annotations

import time

import numpy as np
import pytest

import pyggml_opt as pgo
from pyggml_opt.text.chat_template import ChatTemplate
from pyggml_opt.text.llama_special import EOG_TEXTS
from support import import_or_skip
from support.hf_models import llama_cpp_source

llama_cpp = import_or_skip("llama_cpp", "llama-cpp-python judges the chat templates")
import_or_skip("jinja2", "chat templates render in Jinja2")
from llama_cpp.llama_chat_format import Jinja2ChatFormatter  # noqa: E402

BOS, EOS = "<s>", "</s>"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
CONVERSATIONS = {
    "one turn": [{"role": "user", "content": "Hello, how are you?"}],
    "system": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a colour."}],
    "several": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a colour."},
                {"role": "assistant", "content": "Blue."}, {"role": "user", "content": "Another?"}],
    "ends with the assistant": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}],
    "non-ASCII": [{"role": "user", "content": "Grüße, 世界 😀"}, {"role": "assistant", "content": "Привет! ¿Qué tal?"},
                  {"role": "user", "content": "नमस्ते"}],
}


# templates whose tools are not OpenAI's {"type": "function", ...}: what they take instead
COHERE_TOOLS = [{"name": "get_weather", "description": "The weather in a city.",
                 "parameter_definitions": {"city": {"description": "A city.", "type": "str", "required": True}}}]
TOOL_FORMATS = {"CohereForAI-c4ai-command-r-plus-tool_use": {"tools": COHERE_TOOLS},
                "fireworks-ai-llama-3-firefunction-v2": {"functions": '[{"name": "get_weather"}]', "datetime": "2026-12-07"},
                "llama-cpp-deepseek-r1": {}}  # its tools filter gives a generator tojson refuses


def templates() -> list:
    return sorted((llama_cpp_source() / "models" / "templates").glob("*.jinja"))


def outcome(render):
    try:
        return render()
    except Exception as exc:  # a refusal: compared by kind, not by message
        return ("refused", type(exc).__name__)


def transformers_render(source, messages, add_generation_prompt, kwargs):
    from transformers.utils.chat_template_utils import render_jinja_template
    rendered, _ = render_jinja_template([messages], chat_template=source, add_generation_prompt=add_generation_prompt,
                                        bos_token=BOS, eos_token=EOS, **kwargs)
    return rendered[0]


@pytest.mark.parametrize("path", templates(), ids=lambda p: p.stem)
def test_every_conversation_renders_as_the_judges_render_it(path):
    source = path.read_text(encoding="utf-8")
    ours = ChatTemplate(source, BOS, EOS, name=path.name)
    rendered = refused = 0
    variants = [{}, {"tools": TOOLS}] + ([TOOL_FORMATS[path.stem]] if TOOL_FORMATS.get(path.stem) else [])
    for kwargs in variants:
        for name, messages in CONVERSATIONS.items():
            for gen in (False, True):
                mine = outcome(lambda: ours.render(messages, add_generation_prompt=gen, **kwargs))
                formatter = Jinja2ChatFormatter(source, EOS, BOS, add_generation_prompt=gen)
                theirs = outcome(lambda: formatter(messages=messages, **kwargs).prompt)
                if isinstance(mine, tuple) != isinstance(theirs, tuple):  # one side lacks something: ask transformers
                    theirs = outcome(lambda: transformers_render(source, messages, gen, kwargs))
                if isinstance(mine, tuple):
                    assert isinstance(theirs, tuple), (name, gen, kwargs, mine, theirs[:300])
                    refused += 1
                else:
                    assert mine == theirs, (name, gen, kwargs)
                    rendered += 1
    assert rendered >= 10, (rendered, refused)  # most render all; a few refuse a system turn or absent tools


@pytest.mark.parametrize("path", templates(), ids=lambda p: p.stem)
def test_assistant_spans_hold_the_assistants_words_only(path):
    template = ChatTemplate(path.read_text(encoding="utf-8"), BOS, EOS, name=path.name, end_of_turn=EOG_TEXTS)
    messages = [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."},
                {"role": "user", "content": "Another?"}, {"role": "assistant", "content": "Green, or perhaps red."}]
    kwargs = TOOL_FORMATS.get(path.stem, {"tools": TOOLS})
    text, spans = template.spans(messages, **kwargs)
    assert text == template.render(messages, **kwargs)
    assert len(spans) == 2 and all(0 <= a < b <= len(text) for a, b in spans) and spans[0][1] <= spans[1][0]
    inside = [text[a:b] for a, b in spans]
    assert "Blue." in inside[0] and "Green, or perhaps red." in inside[1]
    assert not any(user in piece for piece in inside for user in ("Name a colour.", "Another?"))


@pytest.mark.parametrize("name", ["qwen2", "qwen35", "phi-3", "gemma-4", "command-r"])
def test_a_vocabularys_template_tokenizes_as_llama_cpp(name):
    path = llama_cpp_source() / "models" / f"ggml-vocab-{name}.gguf"
    tok = pgo.text.GGUFTokenizer.from_file(path)
    llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a colour, 世界."},
                {"role": "assistant", "content": "Blue."}, {"role": "user", "content": "Another?"},
                {"role": "assistant", "content": "Green, or perhaps red."}]
    try:
        text = tok.apply_chat_template(messages, tokenize=False)
        ids = tok.apply_chat_template(messages)
        assert ids.tolist() == llm.tokenize(text.encode(), add_bos=False, special=True)
        assert tok.apply_chat_template(messages[:2], add_generation_prompt=True, tokenize=False).startswith(
            tok.apply_chat_template(messages[:2], tokenize=False)[:20])
        same, mask = tok.apply_chat_template(messages, return_assistant_mask=True)
        np.testing.assert_array_equal(same, ids)
        learned = tok.decode(ids[mask == 1], special=True)
        assert "Blue." in learned and "Green, or perhaps red." in learned and "Another" not in learned
        assert any(tok.tokens[i] in learned for i in tok.eog_ids)  # the model learns to end its turn
    finally:
        llm.close()


GENERATION = ("{% for m in messages %}<|{{ m.role }}|>{% if m.role == 'assistant' %}{% generation %}"
              "{{ m.content }}<|end|>{% endgeneration %}{% else %}{{ m.content }}<|end|>{% endif %}{% endfor %}"
              "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def test_generation_marks_give_transformers_spans():
    from transformers.utils.chat_template_utils import render_jinja_template
    messages = CONVERSATIONS["non-ASCII"] + [{"role": "assistant", "content": "ok"}]
    text, spans = ChatTemplate(GENERATION).spans(messages)
    rendered, indices = render_jinja_template([messages], chat_template=GENERATION, return_assistant_tokens_mask=True)
    assert text == rendered[0] and spans == [tuple(x) for x in indices[0]]
    assert [text[a:b] for a, b in spans] == ["Привет! ¿Qué tal?<|end|>", "ok<|end|>"]


HOSTILE = {
    "class": "{{ messages.__class__.__mro__ }}",
    "globals": "{{ raise_exception.__globals__ }}",
    "os": "{{ cycler.__init__.__globals__.os.system('true') }}",
    "mutation": "{% for m in messages %}{{ messages.append(m) }}{% endfor %}",
    "endless": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "huge string": "{{ 'x' * 10000000000 }}",
    "doubling": "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
    "huge output": "{% for i in range(100000) %}{% for j in range(1000) %}xxxxxxxxxx{% endfor %}{% endfor %}",
    "power": "{{ 7 ** 123456789 }}",
    "refusal": "{{ raise_exception('only user turns') }}",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_templates_are_refused_in_bounded_time(kind):
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="tokenizer.chat_template|chat template"):
        ChatTemplate(HOSTILE[kind]).render(CONVERSATIONS["several"])
    assert time.monotonic() - t0 < 30  # TIME_LIMIT is 10 s


def test_a_template_that_does_not_parse_names_the_file_key():
    with pytest.raises(ValueError, match="tokenizer.chat_template does not parse: .*"):
        ChatTemplate("{% for m in messages %}{{ m.content }")
    with pytest.raises(TypeError, match="messages must be a list of dicts"):
        ChatTemplate("{{ messages }}").render("hello")
