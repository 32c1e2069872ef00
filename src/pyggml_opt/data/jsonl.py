"""Fine-tuning records from JSONL files, in the formats MLX-LM and TRL read, checked line by line.

One JSON object per line, every line of a file in one format:
  - ``{"text": ...}``: a document, every token trained;
  - ``{"prompt": ..., "completion": ...}``: an exchange, the completion trained;
  - ``{"messages": [{"role": ..., "content": ...}, ...]}`` (optionally ``"tools"``): a conversation,
    the assistant's turns trained.
A data directory holds ``train.jsonl`` and optionally ``valid.jsonl`` / ``test.jsonl``, as MLX-LM lays
them out. The file is read as a stream (one line at a time). Every problem is a ValueError naming the
file and the line: a line that is not a JSON object, a missing or mistyped field, an unknown role, an
empty conversation, a line of another format than the file's first.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

FORMATS = {"text": ("text",), "completions": ("prompt", "completion"), "chat": ("messages",)}
ROLES = ("system", "developer", "user", "assistant", "tool")
SPLITS = ("train", "valid", "test")


def split_files(data: str | os.PathLike[str]) -> dict[str, Path]:
    """The JSONL files of ``data``: a file is the training split; a directory gives its ``train.jsonl``
    (required), ``valid.jsonl`` and ``test.jsonl`` (where present), by split name."""
    path = Path(data)
    if path.is_file():
        return {"train": path}
    if not path.exists():
        raise ValueError(f"data {str(path)!r} does not exist")
    if not path.is_dir():
        raise ValueError(f"data {str(path)!r} is neither a JSONL file nor a directory")
    files = {split: path / f"{split}.jsonl" for split in SPLITS if (path / f"{split}.jsonl").is_file()}
    if "train" not in files:
        raise ValueError(f"the data directory {str(path)!r} has no train.jsonl (it may hold train.jsonl, "
                         "valid.jsonl and test.jsonl)")
    return files


def record_format(record: dict[str, Any]) -> str | None:
    """The format of one record ("text", "completions" or "chat"), or None for none of them."""
    for name, fields in FORMATS.items():
        if all(f in record for f in fields):
            return name
    return None


def read_records(path: str | os.PathLike[str]) -> Iterator[tuple[int, str, dict[str, Any]]]:
    """(line number, format, record) for each non-blank line of the JSONL file ``path``, checked as the
    module says; ValueError naming ``path`` and the line for the first problem."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"data file {str(path)!r} does not exist")
    first: str | None = None
    with open(path, encoding="utf-8", errors="strict") as f:
        line_no = 0
        while True:
            where = f"{path}:{line_no + 1}"
            try:
                line = f.readline()
            except UnicodeDecodeError as exc:
                raise ValueError(f"{where}: not UTF-8 text ({exc.reason})") from None
            if not line:
                return
            line_no += 1
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
            kind = record_format(record)
            if kind is None:
                raise ValueError(f"{where}: a record needs the field 'text', 'prompt' and 'completion', or "
                                 f"'messages'; this one has {sorted(record)}")
            if first is None:
                first = kind
            elif kind != first:
                raise ValueError(f"{where}: a {kind} record in a file of {first} records (one format per file)")
            check_record(kind, record, where)
            yield line_no, kind, record


def check_record(kind: str, record: dict[str, Any], where: str) -> None:
    """ValueError naming ``where`` for a record of format ``kind`` whose fields are not as it needs."""
    if kind != "chat":
        for field in FORMATS[kind]:
            if not isinstance(record[field], str):
                raise ValueError(f"{where}: '{field}' must be a string, got {type(record[field]).__name__}")
        return
    messages = record["messages"]
    if not isinstance(messages, list):
        raise ValueError(f"{where}: 'messages' must be a list, got {type(messages).__name__}")
    if not messages:
        raise ValueError(f"{where}: an empty conversation")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise ValueError(f"{where}: message {i} must be an object, got {type(m).__name__}")
        role = m.get("role")
        if role not in ROLES:
            raise ValueError(f"{where}: message {i} has the role {role!r}; expected one of {list(ROLES)}")
        content = m.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise ValueError(f"{where}: message {i}'s 'content' must be a string, got {type(content).__name__}")
        if content is None and "tool_calls" not in m:
            raise ValueError(f"{where}: message {i} has no 'content'")
    tools = record.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise ValueError(f"{where}: 'tools' must be a list, got {type(tools).__name__}")
