"""Invariant (1), shared schedules: each due slot has exactly one request and at most one
successful run.

Every agent is given the scenario's shared schedules (``--schedule every=1h``: same id, entities
and timing, so the same fingerprint); agent-1 alone is also given the unshared ones (see
:mod:`fdcore.simulator.plan`). What the agents create comes from their own slot functions (the
installed plugins, or a broken one a test plugs in); :class:`SharedSchedules` judges the trace
against the installed slot function's timetable for the same spec, and against the rules of
docs/schedules.md ("Shared schedules on agents"), not against the agent's code. What it judges
and the figures it reports: docs/simulator.md, "Shared schedules (invariant 1)".
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, defaultdict
from datetime import timedelta
from typing import Any

from fdcore.abc import Slot
from fdcore.simulator.invariants import Checker, Violation
from fdcore.simulator.plan import SimSchedule
from fdcore.simulator.scenario import EPOCH, seconds
from fdcore.simulator.trace import ScheduleCreate, Trace
from fdcore.simulator.world import World

# what the report counts of the judged slots, shared and unshared apart
FIGURES = ("judged", "with a request", "missed, all agents down", "missed, no poll in window")


def _down_intervals(trace: Trace, agent: str) -> list[tuple[float, float]]:
    """True-time stretches in which the agent was not polled (not started yet, crashed and
    not restarted, paused), merged and sorted."""
    starts = sorted(s.time for s in trace.starts if s.agent == agent)
    spans = [(float("-inf"), starts[0] if starts else float("inf"))]
    for crash in trace.crashes:
        if crash.agent == agent:
            later = [t for t in starts if t >= crash.time]
            spans.append((crash.time, later[0] if later else float("inf")))
    crashed = {c.incarnation: c.time for c in trace.crashes if c.agent == agent}
    for pause in trace.pauses:
        if pause.agent == agent:
            # A pause that a crash cut short (no resume) ends with the crash.
            ended = pause.end if pause.resume_seq is not None else crashed.get(pause.incarnation)
            spans.append((pause.start, pause.end if ended is None else min(ended, pause.end)))
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _down_throughout(down: list[tuple[float, float]], start: float, end: float) -> bool:
    index = bisect.bisect_right(down, (start, float("inf"))) - 1
    return index >= 0 and down[index][0] <= start and down[index][1] >= end


class SharedSchedules(Checker):
    """(1) Each due slot has exactly one request and at most one successful run.

    Every create of a schedule's request, landed or not, must name the slot due by its agent's
    clock (``sched-<id>-<slot>``, plus ``-<agent>`` if unshared), carry that slot's
    ``schedule {id, slot}``, due time, deadline and entities, and come before the deadline by
    that clock. One agent process writes a slot's request at most once (again only after a
    store error). A request id lands once. A slot left without a request is judged from the
    trace: if an agent given the schedule polled inside the slot's window (by its own clock)
    with no store error, it is a violation; otherwise it is counted as missed with every agent
    down throughout, or as missed with no poll inside the window (an agent was up for less than
    a poll interval of it). At most one successful run is :class:`SucceedsOnce` and
    :class:`RunsOncePerRequest`, which check every request.
    """

    invariant = "1"
    title = "each due slot has exactly one request and at most one successful run"

    def __init__(self, schedules: list[SimSchedule]) -> None:
        self.schedules = {schedule.config.id: schedule for schedule in schedules}
        self.figures: dict[str, Any] = {}

    def finish(self, world: World) -> list[Violation]:
        if not self.schedules:
            return []
        trace = world.trace
        landed: dict[str, list[ScheduleCreate]] = defaultdict(list)
        by_process: dict[tuple[str, str, int], list[ScheduleCreate]] = defaultdict(list)
        for create in trace.schedule_creates:
            by_process[(create.request, create.agent, create.incarnation)].append(create)
            if create.landed:
                landed[create.request].append(create)
        found, made, attempts = self._judge_creates(trace.schedule_creates)
        found.extend(self._slots_with_many(made, landed))
        found.extend(self._created_twice(landed))
        found.extend(self._judge_processes(by_process))
        found.extend(self._judge_slots(world, made, attempts))
        per_agent: dict[tuple[str, str], list[int]] = defaultdict(list)  # -> creates by process
        for (request, agent, _incarnation), creates in by_process.items():
            per_agent[(request, agent)].append(len(creates))
        writes = [trace.schedule_writes[request] for request in landed]
        self.figures.update(
            {
                "slot creates per agent process max": max(map(len, by_process.values()), default=0),
                "slot creates per agent max": max(map(sum, per_agent.values()), default=0),
                "slots written by two processes of one agent": sum(
                    1 for processes in per_agent.values() if len(processes) > 1
                ),
                "slot landed writes per request": round(sum(writes) / len(writes), 2)
                if writes
                else 0.0,
            }
        )
        return found

    def _judge_creates(
        self, creates: list[ScheduleCreate]
    ) -> tuple[list[Violation], dict[tuple[str, str], set[str]], Counter[tuple[str, str]]]:
        """Each create on its own; with the requests that landed for each (schedule, slot) and
        the creates tried for each."""
        found: list[Violation] = []
        made: dict[tuple[str, str], set[str]] = defaultdict(set)  # (schedule, slot) -> ids
        attempts: Counter[tuple[str, str]] = Counter()  # (schedule, slot) -> creates
        for create in creates:
            schedule = self.schedules.get(create.schedule or "")
            if schedule is None:
                found.append(
                    Violation(
                        self.invariant,
                        create.time,
                        f"{create.agent} created {create.request}, which names no schedule "
                        f"of the scenario (schedule {create.schedule!r})",
                    )
                )
                continue
            expected = schedule.timetable.latest_due(create.clock)
            found.extend(self._judge_create(schedule, create, expected))
            if expected is not None:
                attempts[(schedule.config.id, expected.id)] += 1
                if create.landed:
                    made[(schedule.config.id, expected.id)].add(create.request)
        return found, made, attempts

    def _slots_with_many(
        self, made: dict[tuple[str, str], set[str]], landed: dict[str, list[ScheduleCreate]]
    ) -> list[Violation]:
        """A slot has one request at most."""
        found = []
        for (schedule_id, slot), requests in made.items():
            if len(requests) > 1:
                first = min(c.time for r in requests for c in landed[r])
                found.append(
                    Violation(
                        self.invariant,
                        first,
                        f"slot {slot} of schedule {schedule_id} has {len(requests)} requests: "
                        + ", ".join(sorted(requests)),
                    )
                )
        return found

    def _created_twice(self, landed: dict[str, list[ScheduleCreate]]) -> list[Violation]:
        """A request id lands once."""
        return [
            Violation(
                self.invariant,
                creates[1].time,
                f"{request} was created {len(creates)} times, by "
                + ", ".join(f"{c.agent} at t={c.time:.1f}s" for c in creates),
            )
            for request, creates in landed.items()
            if len(creates) > 1
        ]

    def _judge_create(
        self, schedule: SimSchedule, create: ScheduleCreate, expected: Slot | None
    ) -> list[Violation]:
        who = f"{create.agent} (process {create.incarnation})"
        at = f"at t={create.time:.1f}s (its clock {create.clock:%Y-%m-%dT%H:%M:%S.%f}Z)"

        def violation(text: str) -> Violation:
            return Violation(
                self.invariant, create.time, f"{who} created {create.request} {at}: {text}"
            )

        if not schedule.given_to(create.agent):
            return [violation(f"schedule {schedule.config.id} is not {create.agent}'s")]
        if expected is None:
            return [violation("before the schedule's first slot")]
        problems = []
        want = schedule.request_id(expected.id)
        if create.request != want:
            problems.append(f"the slot due by its clock is {expected.id} ({want})")
        if create.slot != expected.id:
            problems.append(f"its schedule slot is {create.slot!r}, not {expected.id!r}")
        if create.created_at != expected.due_at:
            problems.append(
                f"created_at {create.created_at:%Y-%m-%dT%H:%M:%S}Z is not the slot's due time "
                f"{expected.due_at:%Y-%m-%dT%H:%M:%S}Z"
            )
        if create.deadline != expected.deadline:
            shown = f"{create.deadline:%Y-%m-%dT%H:%M:%S}Z" if create.deadline else "none"
            problems.append(
                f"deadline {shown} is not the slot's {expected.deadline:%Y-%m-%dT%H:%M:%S}Z"
            )
        if create.clock > expected.deadline:
            problems.append(f"past the slot's deadline {expected.deadline:%Y-%m-%dT%H:%M:%S}Z")
        if create.entities != schedule.config.entities:
            problems.append(
                f"entities {list(create.entities)} are not {list(schedule.config.entities)}"
            )
        return [violation("; ".join(problems))] if problems else []

    def _judge_processes(
        self, by_process: dict[tuple[str, str, int], list[ScheduleCreate]]
    ) -> list[Violation]:
        """One process writes a slot's request once; again only after that write raised (a
        store error: it cannot tell whether the write landed)."""
        found = []
        for (request, agent, incarnation), creates in by_process.items():
            for earlier, later in itertools.pairwise(creates):
                if not earlier.raised:
                    found.append(
                        Violation(
                            self.invariant,
                            later.time,
                            f"{agent} (process {incarnation}) wrote {request} again at "
                            f"t={later.time:.1f}s after its write at t={earlier.time:.1f}s "
                            f"({earlier.outcome})",
                        )
                    )
        return found

    def _judge_slots(
        self,
        world: World,
        made: dict[tuple[str, str], set[str]],
        attempts: Counter[tuple[str, str]],
    ) -> list[Violation]:
        trace = world.trace
        skews = trace.skews
        widest = max((abs(skew) for skew in skews.values()), default=0.0)
        until = world.scenario.schedule_hours * 3600
        clocks: dict[str, list[float]] = defaultdict(list)  # clean polls, by agent, in order
        for poll in trace.polls:
            if not poll.errors:
                clocks[poll.agent].append(poll.clock)
        down = {agent: _down_intervals(trace, agent) for agent in skews}
        found: list[Violation] = []
        counts: Counter[str] = Counter()
        for schedule in self.schedules.values():
            holders = [agent for agent in skews if schedule.given_to(agent)]
            kind = "slots" if schedule.owner is None else "unshared slots"
            for slot in schedule.slots(until):
                if seconds(slot.deadline) + widest > world.now:
                    continue  # its window is not over everywhere: not judged
                counts[f"{kind} judged"] += 1
                counts[f"{kind} creates"] += attempts[(schedule.config.id, slot.id)]
                if made.get((schedule.config.id, slot.id)):
                    counts[f"{kind} with a request"] += 1
                    continue
                missed = self._judge_missed(schedule, slot, holders, clocks, skews, down)
                if isinstance(missed, Violation):
                    found.append(missed)
                else:
                    counts[f"{kind} missed, {missed}"] += 1
        self._slot_figures(counts)
        return found

    def _judge_missed(
        self,
        schedule: SimSchedule,
        slot: Slot,
        holders: list[str],
        clocks: dict[str, list[float]],
        skews: dict[str, float],
        down: dict[str, list[tuple[float, float]]],
    ) -> Violation | str:
        """A slot left without a request: a violation if a holder polled in its window with no
        store error; else why it was missed."""
        due, deadline = seconds(slot.due_at), seconds(slot.deadline)
        poller = next(
            ((agent, clock) for agent in holders for clock in _clocks_within(clocks[agent], slot)),
            None,
        )
        if poller is not None:
            agent, clock = poller
            return Violation(
                self.invariant,
                clock - skews[agent],
                f"slot {slot.id} of schedule {schedule.config.id} (due t={due:.0f}s, "
                f"deadline t={deadline:.0f}s) has no request, though {agent} "
                f"polled inside its window (clock t={clock:.1f}s) with no store error",
            )
        if all(
            _down_throughout(down[agent], due - skews[agent], deadline - skews[agent])
            for agent in holders
        ):
            return "all agents down"
        return "no poll in window"

    def _slot_figures(self, counts: Counter[str]) -> None:
        for kind in ("slots", "unshared slots"):
            judged = counts[f"{kind} judged"]
            if kind != "slots" and not judged:
                continue
            for figure in FIGURES:
                self.figures[f"{kind} {figure}"] = counts[f"{kind} {figure}"]
            creates = counts[f"{kind} creates"]
            per_slot = round(creates / judged, 2) if judged else 0.0
            self.figures[f"{kind.removesuffix('s')} creates per slot"] = per_slot

    def summary(self) -> dict[str, Any]:
        return dict(self.figures)


def _clocks_within(clocks: list[float], slot: Slot) -> list[float]:
    """The poll clocks (virtual seconds) that fall in [due, deadline) as the agent sees them."""
    start = bisect.bisect_left(clocks, seconds(slot.due_at) - 0.001)
    end = bisect.bisect_left(clocks, seconds(slot.deadline) + 0.001)
    return [
        clock
        for clock in clocks[start:end]
        if slot.due_at <= EPOCH + timedelta(seconds=clock) < slot.deadline
    ]
