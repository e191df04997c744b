"""User text (run and sweep names, tags, notes) made safe to print on a terminal.

The service refuses control characters and bidirectional overrides in names and tags, but a
run stored by an older service, or notes, may still hold some; printed as they are, an
escape sequence would drive the terminal (clear it, recolour it, retitle it) and a U+202E
would show ``invoice\u202efdp.exe`` as ``invoiceexe.pdf``. ``printable`` shows each such
character as its escape instead.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 and C1 controls, DEL and the bidirectional formatting characters: the characters the
service refuses in names and tags (``server.user_text.UNSAFE``)."""


def printable(text: str) -> str:
    """``text`` with each control or bidirectional formatting character as its escape."""
    return _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
