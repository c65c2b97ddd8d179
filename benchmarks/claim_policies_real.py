"""Claim policies compared on real agent processes: the simulator's comparison, checked for real.

    .venv/bin/python benchmarks/claim_policies_real.py [--requests 40] [--seeds 3] [--json]

3 ``fdcore agent run`` processes x 2 workers on a local folder (default poll 5 s; a local
folder wakes agents for new requests), each claim policy the installed plugins offer in turn,
on the same seeded work: one-table requests whose table sleeps a lognormal time (median 0.3 s,
sigma 1, at most 5 s), submitted while the fleet runs

- ``uniform``: Poisson arrivals offering 80% of the fleet's workers;
- ``bursty``: the same offered work in bursts of 12 requests at once.

Figures (medians over seeds): queue wait p50/p99 (submit to the table's start, wall seconds),
makespan (first submit to last end), worker utilisation (table time over 6 workers' makespan).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from bench_fleet import HERE, _runs
from claim_policies import medians

from fdcore.cli.fleet import AgentFleet, wait_until
from fdcore.contract.layout import agent_key
from fdcore.mailbox.submit import submit
from fdcore.simulator.report import percentile
from fdcore.simulator.scenario import claim_policies

AGENTS, WORKERS = 3, 2
MEDIAN_SECONDS, SIGMA, LONGEST = 0.3, 1.0, 5.0
LOAD = 0.8
BURSTS = {"uniform": 1, "bursty": 12}


def plan(load: str, seed: int, requests: int) -> list[tuple[float, str]]:
    """(seconds after the start, table name) of each request; the name says its run time."""
    rng = random.Random(f"{seed}:real:{load}")
    mean = MEDIAN_SECONDS * math.exp(SIGMA**2 / 2)
    rate = LOAD * AGENTS * WORKERS / mean  # requests per second
    burst = BURSTS[load]
    when, planned = 0.0, []
    for n in range(requests):
        if n % burst == 0:
            when += rng.expovariate(rate / burst)
        seconds = min(rng.lognormvariate(math.log(MEDIAN_SECONDS), SIGMA), LONGEST)
        planned.append((when, f"t{n:04d}-s{seconds:.3f}"))
    return planned


def run(load: str, policy: str, seed: int, requests: int) -> dict[str, float]:
    """One fleet under one policy and one seeded load; its figures."""
    with tempfile.TemporaryDirectory(prefix="fdcore-bench-") as tmp:
        folder = Path(tmp)
        (folder / "tables").mkdir()
        fleet = AgentFleet(folder, str(folder / "env"))
        fleet.add_pythonpath(HERE)
        fleet.env["FDCORE_BENCH_LOG"] = str(folder / "tables")
        runner = {"kind": "python", "function": "noop_tables:sleepy"}
        for n in range(AGENTS):
            settings = {"concurrency": WORKERS, "stale_after": 30, "shutdown_grace": 20}
            sections = {"agent": settings, "pipeline": {"claim": policy}, "runner": runner}
            fleet.add(f"bench-{n}", sections)
        storage = fleet.mailbox.storage
        submitted: dict[str, float] = {}
        try:
            for agent in fleet:
                agent.start()
            up = wait_until(
                lambda: all(storage.read(agent_key(name)) for name in fleet.agents), 120, 0.05
            )
            if not up:
                raise SystemExit("the agents did not start within 2 minutes")
            began = time.time()
            for n, (offset, table) in enumerate(plan(load, seed, requests)):
                time.sleep(max(0.0, began + offset - time.time()))
                request = f"r{n:04d}"
                submitted[request] = time.time()
                submit(fleet.mailbox, [table], request_id=request)
            if not wait_until(lambda: len(_runs(folder)) >= requests, 600, 0.05):
                raise SystemExit(f"{policy}: the fleet did not finish {requests} requests")
        finally:
            fleet.stop_all()
            fleet.kill_all()
        runs = _runs(folder)
    waits = [r["start"] - submitted[r["request"]] for r in runs]
    makespan = max(r["end"] for r in runs) - min(submitted.values())
    busy = sum(r["end"] - r["start"] for r in runs)
    return {
        "queue_wait_p50": percentile(waits, 0.5),
        "queue_wait_p99": percentile(waits, 0.99),
        "makespan": makespan,
        "utilisation": busy / (AGENTS * WORKERS * makespan),
    }


def compare(
    loads: Iterable[str] = tuple(BURSTS),
    policies: Iterable[str] | None = None,
    *,
    requests: int = 40,
    seeds: Sequence[int] = (1, 2, 3),
) -> list[tuple[str, str, dict[str, float]]]:
    """(load, policy, medians over seeds) for every pair; the policies of a seed run in turn."""
    chosen = list(policies) if policies is not None else claim_policies()
    rows: dict[tuple[str, str], list[dict[str, float]]] = {}
    for seed in seeds:
        for load in loads:
            for policy in chosen:
                figures = run(load, policy, seed, requests)
                rows.setdefault((load, policy), []).append(figures)
                shown = ", ".join(f"{k}={v:.3g}" for k, v in figures.items())
                print(f"seed {seed} {load} {policy}: {shown}", flush=True)
    return [(load, policy, medians(found)) for (load, policy), found in rows.items()]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    results = compare(requests=args.requests, seeds=range(1, args.seeds + 1))
    if args.json:
        print(json.dumps([{"load": a, "policy": b, **f} for a, b, f in results], indent=2))
        return
    for load, policy, figures in results:
        shown = ", ".join(f"{k}={v:.3g}" for k, v in figures.items())
        print(f"{load} {policy}: {shown} (medians of {args.seeds})")


if __name__ == "__main__":
    main()
