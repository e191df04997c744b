"""What the service accepts of user text and JSON, and how it prints user text.

Names and tags (of runs and sweeps) refuse control characters and the bidirectional
formatting characters that reorder what a screen shows ("Trojan Source": ``invoice\u202efdp.exe``
shows as ``invoiceexe.pdf``); notes keep newlines and tabs and refuse the rest. Whatever prints
user text to a terminal or a log passes it through ``printable``, which shows each such
character as an escape (``\\x1b``, ``\\u202e``) instead of obeying it.

Free-form JSON (a spec's ``config``, ``env.overrides``, a sweep's choices) is bounded in
depth when the request is parsed: a deeper value is a 422 on its field, never a
``RecursionError`` or a serializer's depth error (a 500) further in.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

MAX_JSON_DEPTH = 32
"""Levels of objects and arrays in one free-form JSON field (a config is 2 or 3 deep)."""

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")
"""C0 and C1 control characters, DEL, and the bidirectional marks, embeddings, overrides
and isolates."""
UNSAFE_IN_NOTES = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")
"""``UNSAFE`` less newline and tab."""


def _describe(char: str) -> str:
    return f"U+{ord(char):04X}"


def plain_text(value: str) -> str:
    """``value`` when it has no ``UNSAFE`` character; else a ``ValueError`` naming it."""
    found = UNSAFE.search(value)
    if found is not None:
        raise ValueError(
            f"must not contain control characters or bidirectional overrides "
            f"({_describe(found.group())} at index {found.start()})"
        )
    return value


def note_text(value: str) -> str:
    """``value`` (CRLF line ends as LF) when it has no ``UNSAFE_IN_NOTES`` character."""
    value = value.replace("\r\n", "\n")
    found = UNSAFE_IN_NOTES.search(value)
    if found is not None:
        raise ValueError(
            f"must not contain control characters other than newline and tab, nor "
            f"bidirectional overrides ({_describe(found.group())} at index {found.start()})"
        )
    return value


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with each ``UNSAFE`` character shown as its escape (newlines and tabs kept
    when ``keep_newlines``), for terminals and logs."""
    pattern = UNSAFE_IN_NOTES if keep_newlines else UNSAFE
    return pattern.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def json_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """The nesting depth of a JSON value (a scalar 0, ``[]`` 1), counted without recursion;
    counting stops once past ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth) for child in children)
    return deepest


def bounded_json(value: Any) -> Any:
    """``value`` when it nests at most ``MAX_JSON_DEPTH`` levels; else a ``ValueError``."""
    if json_depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    return value


PlainText = Annotated[str, AfterValidator(plain_text)]
NoteText = Annotated[str, AfterValidator(note_text)]
BoundedJson = Annotated[Any, BeforeValidator(bounded_json)]
JsonObject = Annotated[dict[str, Any], BeforeValidator(bounded_json)]
