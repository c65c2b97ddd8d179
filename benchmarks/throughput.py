"""Real throughput: K real agents draining N zero-work requests, against the store's ceiling.

    .venv/bin/python benchmarks/throughput.py [--agents 1 3 6] [--requests 200]
        [--azurite-requests 60] [--runs 3] [--no-azurite] [--s3] [--json]

K = 1, 3 and 6 ``fdcore agent run`` processes with default settings (nothing tuned: poll 5 s,
one worker, ``claim = "when_free"``; the python runner with the zero-work table of
``noop_tables.py``) drain N one-table requests queued before they start, on a local folder, on
Azurite (the OneLake backend) and, with ``--s3``, on the S3 emulator. In every run, next to the
fleets, the backend's raw conditional-create rate is measured from one client
(``bench_fleet.creates_per_second``):
divided by the store writes one request costs, it is the ceiling a fleet's requests/s is set
against. The writes per request are the simulator's for the same fleet and work (the same agent
code, counted per operation), computed in the same run, so a change to what agents write moves
the ceiling with it. Requests/s is counted from the first table's start to the last table's end
(agent start-up left out). Figures are medians over ``--runs``; every K of a run comes one after
another on one backend, so a noisy neighbour on the machine hits them alike.

The ceiling counts writes only; a request also reads and lists. So beside it, the store bound:
the raw creates per second of K clients at once (K processes, their rates summed), divided by
every operation the fleet made per request (the agents' own counts, logged as they stop). A
fleet of K cannot pass it unless the store serves its reads for less than a create; its share
of the ceiling is the most the fleet's share could be.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
from bench_fleet import (
    CONTAINER,
    RUNNER,
    Place,
    creates_per_second,
    drain_fleet,
    kept_folder,
    logged_by_kind,
    noop_fleet,
)
from fdcore_onelake.testing import Azurite
from fdcore_s3.testing import S3Emulator

from fdcore.mailbox.submit import submit
from fdcore.simulator import Scenario, simulate


def logged_operations(log: Path) -> int:
    """The store operations (every kind) an agent's log says it made, at its last count."""
    return sum(logged_by_kind(log).values())


def drain_counted(agents: int, requests: int, place: Place) -> tuple[float, float]:
    """Requests per second of ``agents`` default agents draining ``requests`` queued ones, and
    the store operations the fleet made per request (the agents' own counts, logged as they
    stop: start-up, idle looks and heartbeats included)."""
    folder = kept_folder(f"{agents}-agents-")
    url, storage = place.environment(folder)
    fleet = noop_fleet(folder, url, storage)
    for n in range(agents):
        fleet.add(f"bench-{n}", {"agent": {}, "runner": RUNNER})  # defaults: nothing tuned
    for n in range(requests):
        submit(fleet.mailbox, [f"t{n}"], request_id=f"bench-{n:05d}")
    runs = drain_fleet(fleet, requests, f"{agents} agents, {requests} requests")
    span: float = max(r["end"] for r in runs) - min(r["start"] for r in runs)
    operations = sum(logged_operations(agent.log) for agent in fleet)
    return requests / span, operations / requests


def writes_per_request(agents: int, requests: int) -> float:
    """Store writes per completed request of the same fleet and work, in the simulator."""
    work = Scenario(
        seed=1,
        agents=agents,
        requests=requests,
        concurrency=1,
        claim="when_free",  # the agents' default
        arrival="all",
        max_tables=1,
        table_pool=max(requests, 1),
        table_median=0.01,
        table_sigma=0.0,
    )
    return simulate(work).writes_per_completed


@attrs.frozen
class Row:
    backend: str
    agents: int
    requests: int
    requests_per_s: float  # median over runs
    creates_per_s: float  # median over runs, measured between the fleets
    writes_per_request: float
    runs: tuple[float, ...]  # each run's requests/s
    # K clients creating at once (K = agents), their rates summed: what the store serves a
    # fleet's worth of clients, and every operation a request costs (reads, listings too).
    creates_per_s_together: float = 0.0
    operations_per_request: float = 0.0

    @property
    def ceiling(self) -> float:
        return self.creates_per_s / self.writes_per_request

    @property
    def share_of_ceiling(self) -> float:
        return self.requests_per_s / self.ceiling

    @property
    def store_bound(self) -> float:
        """Requests/s if K clients did nothing but this request's operations, each at a create's
        price: a fleet of K could not go faster unless the store's reads are cheaper."""
        return self.creates_per_s_together / self.operations_per_request

    @property
    def bound_share(self) -> float:
        """The store bound as a share of the ceiling: the best share a fleet of K could reach."""
        return self.store_bound / self.ceiling


def measure(
    agent_counts: Sequence[int] = (1, 3, 6),
    *,
    requests: int = 200,
    azurite_requests: int = 60,
    runs: int = 3,
    azurite: bool = True,
    s3: bool = False,
) -> list[Row]:
    """Every K on the local folder, on Azurite (``azurite``) and on the S3 emulator (``s3``,
    as many requests as on Azurite), ``runs`` times; medians."""
    rows = []
    with contextlib.ExitStack() as stack:
        places = {"local folder": (Place(), requests)}
        if azurite:
            emulator = stack.enter_context(Azurite())
            emulator.create_container(CONTAINER)
            places["Azurite"] = (Place(emulator), azurite_requests)
        if s3:
            server = stack.enter_context(S3Emulator())
            server.create_bucket(CONTAINER)
            places["S3 emulator"] = (Place(s3=server), azurite_requests)
        for backend, (place, count) in places.items():
            rates: dict[int, list[float]] = {k: [] for k in agent_counts}
            together: dict[int, list[float]] = {k: [] for k in agent_counts}
            counted: dict[int, list[float]] = {k: [] for k in agent_counts}
            creates = []
            for run in range(runs):
                creates.append(creates_per_second(place))
                for k in agent_counts:
                    together[k].append(creates_per_second(place, clients=k))
                    rate, operations = drain_counted(k, count, place)
                    rates[k].append(rate)
                    counted[k].append(operations)
                    shown = f"{rates[k][-1]:.1f} requests/s"
                    print(f"{backend} run {run + 1} K={k}: {shown}", flush=True)
            for k in agent_counts:
                writes = writes_per_request(k, count)
                operations = statistics.median(counted[k])
                rows.append(
                    Row(
                        backend,
                        k,
                        count,
                        statistics.median(rates[k]),
                        statistics.median(creates),
                        writes,
                        tuple(rates[k]),
                        statistics.median(together[k]),
                        operations,
                    )
                )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[1, 3, 6])
    parser.add_argument("--requests", type=int, default=200, help="on the local folder")
    parser.add_argument("--azurite-requests", type=int, default=60)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-azurite", action="store_true")
    parser.add_argument("--s3", action="store_true", help="the S3 emulator (moto) as well")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.getLogger("fdcore").setLevel(logging.ERROR)  # agents log every claim
    started = time.monotonic()
    rows = measure(
        args.agents,
        requests=args.requests,
        azurite_requests=args.azurite_requests,
        runs=args.runs,
        azurite=not args.no_azurite,
        s3=args.s3,
    )
    if args.json:
        data: list[dict[str, Any]] = [
            {
                **attrs.asdict(row),
                "ceiling": row.ceiling,
                "share": row.share_of_ceiling,
                "store_bound": row.store_bound,
                "bound_share": row.bound_share,
            }
            for row in rows
        ]
        print(json.dumps(data, indent=2))
        return
    for row in rows:
        print(
            f"{row.backend} K={row.agents}: {row.requests_per_s:.1f} requests/s, ceiling "
            f"{row.ceiling:.1f} ({row.creates_per_s:.0f} creates/s / {row.writes_per_request:.1f} "
            f"writes per request): {100 * row.share_of_ceiling:.0f}%; store bound "
            f"{row.store_bound:.1f} ({row.creates_per_s_together:.0f} creates/s from {row.agents} "
            f"clients / {row.operations_per_request:.1f} operations per request): "
            f"{100 * row.bound_share:.0f}% of the ceiling"
        )
    print(f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
