"""How commands print: the one table format every listing command uses. (The live view and the
progress line, which the simulator's command uses too, are :mod:`fdcore.terminal`.)"""

from __future__ import annotations

from collections.abc import Sequence


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns, two spaces apart: the human output of every listing command."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return "\n".join(lines)
