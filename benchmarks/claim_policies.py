"""Claim policies compared on the simulator: every installed policy under three kinds of load.

    .venv/bin/python benchmarks/claim_policies.py [--requests 300] [--seeds 3] [--json]

The policies are the ones the installed plugins offer (``always`` and ``when_free`` from
fdcore-claim, and any other a plugin adds), asked of the plugin manager, not listed here. Each
(load, policy) pair runs on the same seeds, so the policies get the same work, and the figures
are medians over the seeds:

- ``uniform``: 3 agents x 2 workers, Poisson arrivals offering 80% of the workers;
- ``bursty``: the same offered work arriving in bursts of 30 requests at once;
- ``skewed``: one agent with 8 workers beside two with 2, one of them running its tables at
  half speed, and tables of very different lengths (lognormal sigma 2: the slowest 1% take
  about 100 times the median).

The figures: queue wait p50/p99 (creation to first table start), makespan (virtual time until
every request is final), worker utilisation, stranded requests (a request waiting on a busy
agent while another has a free worker), and store operations per completed request by kind.
``make bench-report`` writes them into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from fdcore.simulator import Report, Scenario, simulate
from fdcore.simulator.scenario import claim_policies

# The fleet and work every load shares: 1,000 tables, so lease contention stays small and the
# policies are compared on where requests wait, not on tables they share.
BASE: dict[str, Any] = {"agents": 3, "concurrency": 2, "table_pool": 1000}

LOADS: dict[str, dict[str, Any]] = {
    "uniform": {"arrival": "poisson", "load": 0.8},
    "bursty": {"arrival": "bursty", "burst": 30, "load": 0.8},
    "skewed": {
        "arrival": "poisson",
        "load": 0.8,
        "table_sigma": 2.0,
        "agent_concurrency": (("agent-1", 8),),
        "agent_speeds": (("agent-3", 0.5),),
    },
}

OPERATIONS = ("read", "list", "create", "replace", "delete")
# The figures of one run, and how a table shows each.
FIGURES = (
    "queue_wait_p50",
    "queue_wait_p99",
    "makespan_hours",
    "utilisation",
    "stranded",
    "operations_per_request",
    "writes_per_request",
    *(f"{kind}_per_request" for kind in OPERATIONS),
    "requests_per_wall_second",
)


def scenario(shape: str, policy: str, seed: int, requests: int, **change: Any) -> Scenario:
    """The scenario of one run: the shared fleet, the load's shape (a key of LOADS), the policy,
    the seed; ``change`` sets any other Scenario field (``load=0.9``)."""
    fields = {**BASE, **LOADS[shape], **change}
    return Scenario(seed=seed, requests=requests, claim=policy, **fields)


def figures(report: Report) -> dict[str, float]:
    """What one run is compared on, per completed (succeeded) request where it is a count."""
    done = report.requests.get("succeeded", 0) or 1
    ops = report.store_operations
    row = {
        "queue_wait_p50": report.queue_wait_p50,
        "queue_wait_p99": report.queue_wait_p99,
        "makespan_hours": report.virtual_seconds / 3600,
        "utilisation": report.worker_utilisation,
        "stranded": float(report.stranded),
        "operations_per_request": (ops["total"] - ops["errors"]) / done,
        "writes_per_request": report.writes_per_completed,
        "requests_per_wall_second": report.requests_per_wall_second,
    }
    row.update({f"{kind}_per_request": ops[kind] / done for kind in OPERATIONS})
    return row


def medians(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(row[key] for row in rows) for key in rows[0]}


@attrs.frozen
class Result:
    load: str
    policy: str
    seeds: tuple[int, ...]
    figures: dict[str, float]  # medians over the seeds
    unfinished: int  # requests not final at the time limit, over every seed


def compare(
    loads: Iterable[str] = tuple(LOADS),
    policies: Iterable[str] | None = None,
    *,
    requests: int = 300,
    seeds: Sequence[int] = (1, 2, 3),
    **change: Any,
) -> list[Result]:
    """Every (load, policy) pair on the same seeds; the medians of their figures."""
    chosen = list(policies) if policies is not None else claim_policies()
    results = []
    for shape in loads:
        for policy in chosen:
            runs = [scenario(shape, policy, seed, requests, **change) for seed in seeds]
            reports = [simulate(run) for run in runs]
            results.append(
                Result(
                    shape,
                    policy,
                    tuple(seeds),
                    medians([figures(report) for report in reports]),
                    sum(report.requests.get("unfinished", 0) for report in reports),
                )
            )
    return results


def queue_wait_against_load(
    offered: Sequence[float],
    policies: Iterable[str] | None = None,
    *,
    requests: int = 300,
    seeds: Sequence[int] = (1, 2, 3),
) -> dict[str, list[tuple[float, float, float]]]:
    """Per policy, (offered load, queue wait p50, p99) on the uniform fleet, medians of seeds."""
    chosen = list(policies) if policies is not None else claim_policies()
    curves: dict[str, list[tuple[float, float, float]]] = {}
    for policy in chosen:
        points = []
        for load in offered:
            (result,) = compare(["uniform"], [policy], requests=requests, seeds=seeds, load=load)
            waits = result.figures
            points.append((load, waits["queue_wait_p50"], waits["queue_wait_p99"]))
        curves[policy] = points
    return curves


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 1..N per pair")
    parser.add_argument("--loads", nargs="+", choices=sorted(LOADS), default=list(LOADS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    logging.getLogger("fdcore").setLevel(logging.ERROR)  # agents log every claim
    if args.seeds < 1:
        parser.error(f"--seeds: must be >= 1, got {args.seeds}")
    seeds = range(1, args.seeds + 1)
    results = compare(args.loads, requests=args.requests, seeds=seeds)
    if args.json:
        print(json.dumps([attrs.asdict(result) for result in results], indent=2))
        return
    for result in results:
        shown = ", ".join(f"{key}={value:.3g}" for key, value in result.figures.items())
        print(f"{result.load} {result.policy}: {shown}; unfinished={result.unfinished}")


if __name__ == "__main__":
    main()
