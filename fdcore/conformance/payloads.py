"""Self-checking payloads: values that say on their own whether they arrived whole."""

from __future__ import annotations

import hashlib
import random


def make_payload(tag: str, size: int) -> bytes:
    """``size`` bytes (at least the header) that :func:`check_payload` can verify on their own."""
    body = random.Random(tag).randbytes(max(size - 80, 0))
    header = f"fdcore-probe {len(body)} {hashlib.sha256(body).hexdigest()}\n".encode()
    return header + body


def check_payload(data: bytes) -> str | None:
    """None if ``data`` is a complete payload; else what is wrong with it (empty, torn, mixed)."""
    if not data:
        return "an empty value"
    head, newline, body = data.partition(b"\n")
    parts = head.split(b" ")
    if not newline or len(parts) != 3 or parts[0] != b"fdcore-probe" or not parts[1].isdigit():
        return f"a value without its header ({len(data)} bytes, starting {data[:24]!r})"
    if len(body) != int(parts[1]):
        return f"a partial value ({len(body)} of {int(parts[1])} body bytes)"
    if hashlib.sha256(body).hexdigest().encode() != parts[2]:
        return f"a value whose content does not match its hash ({len(body)} bytes)"
    return None
