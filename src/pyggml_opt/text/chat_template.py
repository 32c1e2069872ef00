"""Chat templates (a GGUF file's ``tokenizer.chat_template``): a conversation rendered into the text the
model was trained on, as transformers' ``apply_chat_template`` and llama-cpp-python's
``Jinja2ChatFormatter`` render it, and which characters of it an assistant wrote.

A template is Jinja2 code from a file someone else made, so it runs in Jinja2's
``ImmutableSandboxedEnvironment`` (no attribute of Python's internals, no mutation of the messages)
with the environment those renderers give it (``trim_blocks``, ``lstrip_blocks``, loop controls; the
globals ``raise_exception``, ``strftime_now``, ``bos_token`` / ``eos_token``, ``tools`` / ``documents``;
transformers' ``tojson``, which does not escape HTML) and bounds of its own: ``MAX_CHARS`` characters of
output or of any string or list it builds (``*``, ``+``, ``~``), and ``TIME_LIMIT`` seconds (the
template's Python code is traced while it runs), so that a template that loops without end or doubles a
string is a ValueError, not a hang or a MemoryError.

Assistant spans: a template that marks what the assistant wrote (``{% generation %}`` ...
``{% endgeneration %}``, as transformers' ``return_assistant_tokens_mask`` reads it) gives its marks;
for the others, each assistant message's span is what rendering the conversation up to and with that
message adds to the conversation before it with the generation prompt (the message and its
end-of-turn text, what a model must learn to write), when the longer text extends the shorter one
(50 of llama.cpp's 70 templates); where it does not (a template whose generation prompt opens a
thinking block, or that renders the last turn otherwise), the message's content found in order,
widened back to where the text leaves the generation prompt and on over its end-of-turn marker.
"""
from __future__ import annotations

import contextvars
import json
import os
import sys
import time
from datetime import datetime
from typing import Any, Callable, Mapping, Sequence

from .extra import text_extra

MAX_CHARS = 1 << 24   # characters of a rendered conversation, or of a string or list a template builds
TIME_LIMIT = 10.0     # seconds one rendering may take
Span = tuple[int, int]
OPEN, CLOSE = "\x00<generation>\x00", "\x00</generation>\x00"  # around a generation block's output when spans are asked


def _jinja() -> Any:
    text_extra("jinja2.ext", "a chat template")
    text_extra("jinja2.sandbox", "a chat template")
    return text_extra("jinja2", "a chat template")


def _too_big(value: Any) -> bool:
    return isinstance(value, (str, list, tuple)) and len(value) > MAX_CHARS


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    """transformers' tojson: json.dumps, without Jinja's HTML escaping."""
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _raise_exception(message: str) -> None:
    raise ValueError(f"the chat template refused the conversation: {message}")


def _environment() -> Any:
    """The sandboxed environment the templates run in (made once)."""
    global _ENV
    if _ENV is not None:
        return _ENV
    jinja2 = _jinja()
    from jinja2.compiler import CodeGenerator

    class Generator(CodeGenerator):
        """Jinja's code generator, its ``~`` joins checked for size."""

        def visit_Concat(self, node: Any, frame: Any) -> None:
            self.write("environment.checked_join((")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write("))")

    class Generation(jinja2.ext.Extension):  # type: ignore[name-defined]  # jinja2 is imported at run time
        """``{% generation %}`` ... ``{% endgeneration %}``: the block's output, its span recorded."""

        tags = {"generation"}

        def parse(self, parser: Any) -> Any:
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_mark"), [], [], body).set_lineno(lineno)

        def _mark(self, caller: Callable[[], str]) -> str:
            text = caller()
            return f"{OPEN}{text}{CLOSE}" if _MARKING.get() else text

    class Sandbox(jinja2.sandbox.ImmutableSandboxedEnvironment):  # type: ignore[name-defined]
        code_generator_class = Generator
        intercepted_binops = frozenset(("*", "**", "+"))

        def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
            if operator == "**" and isinstance(right, int) and abs(right) > 64 and abs(left) > 1:
                raise jinja2.exceptions.SecurityError(f"{left} ** {right} is too large for a chat template")
            if operator == "*" and (isinstance(left, (str, list, tuple)) and isinstance(right, int) and len(left) * right > MAX_CHARS
                                    or isinstance(right, (str, list, tuple)) and isinstance(left, int)
                                    and len(right) * left > MAX_CHARS):
                raise jinja2.exceptions.SecurityError(f"a chat template built more than {MAX_CHARS} characters")
            result = super().call_binop(context, operator, left, right)
            if _too_big(result):
                raise jinja2.exceptions.SecurityError(f"a chat template built more than {MAX_CHARS} characters")
            return result

        def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
            # refused at once (Jinja's sandbox gives an undefined value that prints as nothing)
            raise jinja2.exceptions.SecurityError(f"access to attribute {attribute!r} of a {type(obj).__name__} is unsafe")

        @staticmethod
        def checked_join(parts: Sequence[Any]) -> str:
            text = "".join(map(str, parts))
            if len(text) > MAX_CHARS:
                raise jinja2.exceptions.SecurityError(f"a chat template built more than {MAX_CHARS} characters")
            return text

    env = Sandbox(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
    _ENV = env
    return env


_ENV: Any = None
_MARKING = contextvars.ContextVar("marking", default=False)  # generation blocks mark their output (spans)


class ChatTemplate:
    """A chat template: ``render`` a conversation (a list of {"role", "content", ...} dicts) into text,
    ``spans``: which characters of it the assistant wrote. ``source``: the Jinja2 text; ``name``: where it
    came from (in error messages); ``bos_token`` / ``eos_token`` (and other ``special`` names) as the
    template sees them; ``end_of_turn``: the texts that end an assistant's turn (the vocabulary's
    end-of-generation tokens), for the spans of templates that render a last turn otherwise. ValueError
    for a template that does not parse."""

    def __init__(self, source: str, bos_token: str = "", eos_token: str = "", name: str = "tokenizer.chat_template",
                 end_of_turn: Sequence[str] = (), **special: str) -> None:
        if not isinstance(source, str):
            raise TypeError(f"{name} must be a str, got {type(source).__name__}")
        jinja2 = _jinja()
        self.source, self.name, self.end_of_turn = source, name, tuple(end_of_turn)
        self.special = {"bos_token": bos_token, "eos_token": eos_token, **special}
        try:
            self._template = _environment().from_string(source)
        except jinja2.exceptions.TemplateError as exc:
            raise ValueError(f"{name} does not parse: {exc}") from None
        self.marks_generation = "generation" in source and "endgeneration" in source

    def render(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool = False,
               tools: Sequence[Any] | None = None, documents: Sequence[Any] | None = None, **kwargs: Any) -> str:
        """The text of ``messages`` (with the assistant's turn opened after it when
        ``add_generation_prompt``), ``tools`` / ``documents`` and any other ``kwargs`` passed to the
        template as transformers passes them. ValueError where the template refuses the conversation or
        breaks a bound."""
        return self._render(messages, add_generation_prompt, tools, documents, kwargs, False)

    def _render(self, messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool, tools: Any, documents: Any,
                kwargs: Mapping[str, Any], marking: bool) -> str:
        _check_messages(messages)
        jinja2 = _jinja()
        deadline = time.monotonic() + TIME_LIMIT

        def tracer(frame: Any, event: str, arg: Any) -> Any:
            if time.monotonic() > deadline:
                raise TimeoutError
            return tracer

        variables = {**self.special, **kwargs, "messages": [dict(m) for m in messages],
                     "add_generation_prompt": bool(add_generation_prompt), "tools": tools, "documents": documents}
        before = sys.gettrace()
        marked = _MARKING.set(marking)
        out: list[str] = []
        size = 0
        try:
            sys.settrace(tracer)
            for piece in self._template.generate(**variables):
                size += len(piece)
                if size > MAX_CHARS:
                    raise ValueError(f"{self.name} wrote more than {MAX_CHARS} characters")
                out.append(piece)
        except TimeoutError:
            raise ValueError(f"{self.name} ran for over {TIME_LIMIT} s") from None
        except jinja2.exceptions.SecurityError as exc:
            raise ValueError(f"{self.name} broke the sandbox's rules: {exc}") from None
        except jinja2.exceptions.TemplateError as exc:
            raise ValueError(f"{self.name} failed: {exc}") from None
        except (TypeError, KeyError, AttributeError, IndexError, ZeroDivisionError, RecursionError) as exc:
            raise ValueError(f"{self.name} failed on this conversation: {type(exc).__name__}: {exc}") from None
        finally:
            sys.settrace(before)
            _MARKING.reset(marked)
        return "".join(out)

    def spans(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> tuple[str, list[Span]]:
        """The text of ``messages`` (``render(messages, add_generation_prompt=False, **kwargs)``) and the
        character spans [start, end) the assistant wrote, in order (see the module for how they are
        found)."""
        if self.marks_generation:
            marked = self._render(messages, False, kwargs.pop("tools", None), kwargs.pop("documents", None), kwargs, True)
            return _strip_marks(marked)
        text = self.render(messages, **kwargs)
        spans: list[Span] = []
        done = 0  # the text before this is accounted for
        for i, message in enumerate(messages):
            if message.get("role") != "assistant":
                continue
            before = self.render(messages[:i], add_generation_prompt=True, **kwargs)
            upto = self.render(messages[:i + 1], **kwargs)
            if upto.startswith(before) and text.startswith(upto) and len(before) >= done:
                spans.append((len(before), len(upto)))  # what this turn adds: the common case
                done = len(upto)
                continue
            # a template that renders the last turn (or the generation prompt) otherwise: the content
            # found in order, from where the text leaves the generation prompt's, to where the turn
            # ends (the text up to it, or its end-of-turn marker)
            content = message.get("content")
            if not isinstance(content, str) or not content or text.find(content, done) < 0:
                raise ValueError(f"{self.name}: assistant message {i} is not in the rendered text")
            at = text.find(content, done)
            floor = done  # not before the message the assistant answers (a template may move the system prompt)
            previous = messages[i - 1].get("content") if i else None
            if isinstance(previous, str) and previous and text.rfind(previous, done, at) >= 0:
                floor = text.rfind(previous, done, at) + len(previous)
            start = min(max(len(os.path.commonprefix([before, text])), floor), at)
            end = at + len(content)
            marker = next((m for m in self.end_of_turn if m and text.startswith(m, end)), None)
            if marker is not None:
                end += len(marker)
            elif text.startswith(upto) and len(upto) > end:
                end = len(upto)
            spans.append((start, end))
            done = end
        return text, spans


def _strip_marks(marked: str) -> tuple[str, list[Span]]:
    """Text without the generation blocks' marks, and the spans they enclosed."""
    text, spans, pos = [], [], 0
    for n, part in enumerate(marked.split(OPEN)):
        if n:
            inside, _, after = part.partition(CLOSE)
            spans.append((pos, pos + len(inside)))
            text.append(inside)
            pos += len(inside)
            part = after
        text.append(part)
        pos += len(part)
    return "".join(text), spans


def _check_messages(messages: Any) -> None:
    if not isinstance(messages, (list, tuple)) or not all(isinstance(m, Mapping) for m in messages):
        raise TypeError(f"messages must be a list of dicts, got {type(messages).__name__}")
    for i, m in enumerate(messages):
        if not isinstance(m.get("role"), str):
            raise ValueError(f"message {i} has no str 'role': {dict(m)!r:.100}")
