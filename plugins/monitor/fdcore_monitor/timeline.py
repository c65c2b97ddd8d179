"""A request's table runs as an SVG timeline, drawn on the server: one lane per agent.

Each attempt is a thin bar along its agent's lane (to now while it runs); each table run, from
its run record, a block on it, coloured by outcome, with its times in a tooltip. The picture
scales to its container (``viewBox``), so it reads on a phone as on a desktop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from html import escape

from fdcore.environment import AttemptStory, RunStory

WIDTH = 960
LABEL = 130  # the agents' names, left of the lanes
LANE = 40
AXIS = 24
TICKS = 4  # steps along the axis, about
#: The axis's units: seconds under 3 minutes, minutes under 3 hours, hours beyond.
UNITS = ((180.0, "s", 1.0), (10800.0, "min", 60.0), (math.inf, "h", 3600.0))


def axis_ticks(span: float) -> list[tuple[float, str]]:
    """The axis's ticks over ``span`` seconds: (seconds from the start, label), a round step
    apart: 1, 2 or 5 times a power of ten of one unit, the one giving closest to
    :data:`TICKS` steps (``0 s``, ``+0.5 s``, ``+1 s``, ``+1.5 s``)."""
    _, unit, size = next(u for u in UNITS if span < u[0])
    length = span / size
    power = math.floor(math.log10(length / TICKS))
    steps = [m * 10.0**p for p in (power - 1, power, power + 1) for m in (1, 2, 5)]
    step = min(steps, key=lambda step: (abs(length / step - TICKS), -step))
    count = math.floor(length / step * (1 + 1e-9))
    return [(0.0, "0 s")] + [
        (min(k * step * size, span), f"+{round(k * step, 9):g} {unit}") for k in range(1, count + 1)
    ]


def _seconds(value: float) -> str:
    if value >= 120:
        return f"{value / 60:.1f} min"
    return f"{value:.1f} s"


def timeline_svg(attempts: Sequence[AttemptStory], runs: Sequence[RunStory], now: datetime) -> str:
    """The SVG element (a string) of a request's attempts and table runs (those of its
    :class:`~fdcore.environment.RequestStory`); a short note if there is none yet."""
    # (attempt, its start): an attempt of an old status may not say when it started; its runs
    # still show
    timed = [(a, a.started_at) for a in attempts if a.started_at is not None]
    if not timed and not runs:
        return '<p class="empty">No attempt yet: no agent has claimed this request.</p>'
    lanes = list(dict.fromkeys([a.agent for a, _ in timed] + [r.agent for r in runs]))
    starts = [began for _, began in timed] + [r.started_at for r in runs]
    ends = [a.ended_at or now for a, _ in timed] + [r.ended_at for r in runs]
    start, end = min(starts), max(max(ends), min(starts))
    span = max((end - start).total_seconds(), 1e-3)
    plot = WIDTH - LABEL - 10

    def x(moment: datetime) -> float:
        return LABEL + plot * (moment - start).total_seconds() / span

    height = AXIS + LANE * len(lanes) + 6
    parts = [
        f'<svg class="timeline" viewBox="0 0 {WIDTH} {height}" role="img" '
        f'preserveAspectRatio="xMinYMin meet" aria-label="table runs by agent">'
    ]
    for offset, label in axis_ticks(span):
        at = LABEL + plot * offset / span
        parts.append(
            f'<line class="tick" x1="{at:.1f}" y1="{AXIS - 6}" x2="{at:.1f}" y2="{height}"/>'
        )
        anchor = "start" if offset == 0 else "end" if at > WIDTH - 40 else "middle"
        parts.append(
            f'<text class="axis" x="{at:.1f}" y="{AXIS - 10}" text-anchor="{anchor}">{label}</text>'
        )
    for index, agent in enumerate(lanes):
        top = AXIS + LANE * index
        parts.append(
            f'<g class="lane" data-agent="{escape(agent)}">'
            f'<text class="agent" x="4" y="{top + LANE / 2 + 4:.1f}">{escape(agent)}</text>'
            f'<line class="lane-line" x1="{LABEL}" y1="{top + LANE - 2}" x2="{WIDTH - 10}" '
            f'y2="{top + LANE - 2}"/>'
        )
        for attempt, began in ((a, b) for a, b in timed if a.agent == agent):
            left, right = x(began), x(attempt.ended_at or now)
            tip = (
                f"attempt {attempt.number} by {agent}: {attempt.outcome}, "
                f"{began:%H:%M:%S} - "
                f"{f'{attempt.ended_at:%H:%M:%S}' if attempt.ended_at else 'now'}"
            )
            parts.append(
                f'<rect class="attempt {escape(attempt.outcome)}" x="{left:.1f}" '
                f'y="{top + LANE - 8}" width="{max(right - left, 2):.1f}" height="5">'
                f"<title>{escape(tip)}</title></rect>"
            )
        for run in (r for r in runs if r.agent == agent):
            left, right = x(run.started_at), x(run.ended_at)
            width = max(right - left, 3)
            exit_code = "" if run.exit_code is None else f", exit code {run.exit_code}"
            tip = (
                f"{run.table} (attempt {run.attempt}, fencing token {run.fencing_token}): "
                f"{run.outcome} in {_seconds(run.seconds)}{exit_code}, "
                f"{run.started_at:%H:%M:%S} - {run.ended_at:%H:%M:%S}"
            )
            parts.append(
                f'<g class="run {escape(run.outcome)}" data-table="{escape(run.table)}">'
                f'<rect x="{left:.1f}" y="{top + 6}" width="{width:.1f}" height="22" rx="3">'
                f"<title>{escape(tip)}</title></rect>"
            )
            if width > 8 * len(run.table) + 6:
                parts.append(f'<text x="{left + 4:.1f}" y="{top + 21}">{escape(run.table)}</text>')
            parts.append("</g>")
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)
