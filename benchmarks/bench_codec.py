"""The codec's encode and decode, before and after a change, side by side in one process.

    .venv/bin/python benchmarks/bench_codec.py [--before main] [--number 2000] [--rounds 9]

``--before`` is a git revision: its ``fdcore/contract/codec.py`` is loaded beside this checkout's
under another name (same models, its own cattrs converter). Each round times ``--number`` calls
of each codec in turn, for three files an agent writes and reads on every poll or claim: a status
with three attempts, an agent record with a schedule, a request. Prints the median time of a call
and the ratio before/after; first checks that both give the same bytes and the same models.
Results: docs/benchmarks.md, "The codec".
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
import timeit
import types
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from functools import partial
from pathlib import Path
from typing import Any

from fdcore.contract import codec
from fdcore.contract.models import (
    AgentRecord,
    Attempt,
    Outcome,
    Request,
    ScheduleInfo,
    ScheduleRef,
    State,
    Status,
)

REPO = Path(__file__).resolve().parents[1]
T0 = datetime(2027, 1, 15, 2, 0, 0, 123000, tzinfo=timezone.utc)


def load_before(revision: str) -> types.ModuleType:
    source = subprocess.run(
        ["git", "show", f"{revision}:fdcore/contract/codec.py"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    module = types.ModuleType("codec_before")
    exec(compile(source, f"{revision}:fdcore/contract/codec.py", "exec"), module.__dict__)
    return module


def files() -> dict[str, Any]:
    at = [T0 + timedelta(seconds=s) for s in range(0, 400, 40)]
    attempts = [
        Attempt(1, "etl-01", at[0], at[1], Outcome.LOST, "agent etl-01 stopped reporting", "a1"),
        Attempt(2, "etl-02", at[2], at[3], Outcome.LOST, "agent etl-02 stopped reporting", "b2"),
        Attempt(3, "etl-03", at[4], instance="c3d4e5f6a7b8"),
    ]
    status = Status(
        "r-20270115-0042",
        State.RUNNING,
        at[5],
        agent="etl-03",
        attempt=3,
        attempts=attempts,
        tables_done=["sales", "customers"],
    )
    schedule = ScheduleInfo("hourly-sales", True, "every 3600s", ["sales", "customers"], "3f1c2a9b")
    record = AgentRecord(
        name="etl-03",
        updated_at=at[6],
        stale_after=60.0,
        version="0.1.0",
        instance="5f0c8e3b9a2d4c1e8f7a6b5c4d3e2f1a",
        host="worker-3",
        pid=4242,
        started_at=at[0],
        concurrency=2,
        running=1,
        requests=["r-20270115-0042"],
        claim="when_free",
        take_over=True,
        schedules=[schedule],
        clock_skew=0.012,
    )
    request = Request(
        "r-20270115-0042",
        ["sales", "customers", "orders"],
        at[0],
        created_by="etl-01",
        deadline=at[9],
        schedule=ScheduleRef("hourly-sales", "496752"),
        max_attempts=3,
    )
    return {"status": status, "agent record": record, "request": request}


def microseconds(call: Callable[[], object], number: int) -> float:
    # CPU time of this thread: on a shared machine, time spent descheduled is not counted
    return timeit.Timer(call, timer=time.thread_time).timeit(number) / number * 1e6


def forgetting_times(call: Callable[[], object]) -> object:
    """``call`` with the codec's remembered times forgotten first: every time is new to it."""
    codec._time_of_text.cache_clear()
    codec._text_of_utc_datetime.cache_clear()
    return call()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default="main", help="git revision of the before codec")
    parser.add_argument("--number", type=int, default=2000, help="calls per timing")
    parser.add_argument("--rounds", type=int, default=9, help="timings per codec (median)")
    args = parser.parse_args()
    before = load_before(args.before)
    print(f"{'file':<14} {'':<18} {'before':>9} {'after':>9} {'ratio':>6}")
    for name, model in files().items():
        cls = type(model)
        data = before.encode(model)
        assert codec.encode(model) == data, f"{name}: the bytes differ"
        assert codec.decode(cls, data, name) == before.decode(cls, data, name) == model
        encode = partial(codec.encode, model)
        decode = partial(codec.decode, cls, data, name)
        calls = {
            "encode": (partial(before.encode, model), encode),
            "decode": (partial(before.decode, cls, data, name), decode),
            "encode, new times": (partial(before.encode, model), partial(forgetting_times, encode)),
            "decode, new times": (
                partial(before.decode, cls, data, name),
                partial(forgetting_times, decode),
            ),
        }
        for op, (old, new) in calls.items():
            times: tuple[list[float], list[float]] = ([], [])
            for _ in range(args.rounds):  # alternating, so load on the machine meets both
                times[0].append(microseconds(old, args.number))
                times[1].append(microseconds(new, args.number))
            old_us, new_us = statistics.median(times[0]), statistics.median(times[1])
            print(f"{name:<14} {op:<18} {old_us:7.1f}us {new_us:7.1f}us {old_us / new_us:5.2f}x")
        print(f"{'':<14} {len(data)} bytes")


if __name__ == "__main__":
    main()
