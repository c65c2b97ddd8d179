"""``make bench-report``: regenerate docs/benchmarks.md's tables and the PNG plots under docs/.

    .venv/bin/python benchmarks/docs_report.py [--only SECTION ...] [--seeds 3] [--requests 500]

Each generated table sits between two marker comments in docs/benchmarks.md,

    <!-- bench-report: claim-policies -->
    ...replaced on every run...
    <!-- /bench-report: claim-policies -->

so the hand-written text around them stays. Sections: ``claim-policies`` and
``operations-by-kind`` (the simulator, :mod:`claim_policies`), ``claim-policies-real`` (real
agent processes, :mod:`claim_policies_real`), ``idle-cost`` (an idle fleet's monthly bill by
store, the simulator), ``simulator-speed`` (a
10,000-request comparison of the policies, timed), ``throughput`` (real agents,
:mod:`throughput`), and ``plots`` (every producer in :data:`PLOTS`). Figures are medians over
``--seeds`` seeds (or runs). matplotlib comes from the core's ``bench`` extra, which
``make bench-report`` installs; nothing else here needs it.
"""

from __future__ import annotations

import argparse
import fcntl
import functools
import logging
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import claim_policies
import claim_policies_real
import poll_history
import throughput

from fdcore.pricing import MONTH_SECONDS, PRICES, cost
from fdcore.simulator import Report, Scenario, simulate
from fdcore.simulator.scenario import claim_policies as installed_claim_policies

DOCS = Path(__file__).resolve().parent.parent / "docs"
PAGE = DOCS / "benchmarks.md"


@attrs.frozen
class Options:
    """What every section is generated with."""

    seeds: tuple[int, ...] = (1, 2, 3)
    requests: int = 300  # per simulated run of the claim-policy tables and the plot
    speed_requests: int = 10_000
    runs: int = 3  # real-process runs
    azurite: bool = True
    fleet: tuple[int, ...] = ()  # the fleet sizes of the fleet-size section (FLEET)


#: A plot producer: measures what it draws, writes ``docs/<name>.png``, returns the path. A new
#: plot is one more entry here (and its image embedded in docs/benchmarks.md).
PlotProducer = Callable[[Options, Path], Path]


def replace_section(text: str, name: str, body: str, where: str = "docs/benchmarks.md") -> str:
    """``text`` with the lines between the markers of section ``name`` replaced by ``body``."""
    begin, end = (re.escape(f"<!-- {mark}bench-report: {name} -->") for mark in ("", "/"))
    pattern = re.compile(rf"({begin}\n).*?({end})", re.DOTALL)
    if len(pattern.findall(text)) != 1:
        raise ValueError(
            f"{where}: expected one '<!-- bench-report: {name} -->' ... "
            f"'<!-- /bench-report: {name} -->' pair of markers"
        )
    return pattern.sub(lambda m: m.group(1) + body.rstrip("\n") + "\n" + m.group(2), text)


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _seconds(value: float) -> str:
    return f"{value:,.1f} s"


def _stamp(options: Options, command: str) -> str:
    seeds = ", ".join(map(str, options.seeds))
    return f"\n\n_`{command}`, {time.strftime('%Y-%m-%d')}, seeds {seeds}, medians._\n"


def claim_policy_tables(options: Options) -> dict[str, str]:
    """The ``claim-policies`` and ``operations-by-kind`` sections."""
    results = claim_policies.compare(requests=options.requests, seeds=options.seeds)
    main_rows, kind_rows = [], []
    for r in results:
        f = r.figures
        main_rows.append(
            [
                r.load,
                f"`{r.policy}`",
                _seconds(f["queue_wait_p50"]),
                _seconds(f["queue_wait_p99"]),
                f"{f['makespan_hours']:.2f} h",
                f"{100 * f['utilisation']:.1f}%",
                f"{f['stranded']:.0f}",
                f"{r.unfinished}",
            ]
        )
        kind_rows.append(
            [r.load, f"`{r.policy}`"]
            + [f"{f[f'{kind}_per_request']:.1f}" for kind in claim_policies.OPERATIONS]
            + [f"{f['operations_per_request']:.1f}", f"{f['writes_per_request']:.1f}"]
        )
    header = ["load", "policy", "queue wait p50", "p99", "makespan", "utilisation"]
    header += ["stranded", "unfinished"]
    command = f"benchmarks/claim_policies.py --requests {options.requests}"
    command += f" --seeds {len(options.seeds)}"
    kinds = ["load", "policy", *claim_policies.OPERATIONS, "all operations", "writes"]
    return {
        "claim-policies": table(header, main_rows) + _stamp(options, command),
        "operations-by-kind": table(kinds, kind_rows) + _stamp(options, command),
    }


def real_claim_policy_table(options: Options) -> dict[str, str]:
    """The ``claim-policies-real`` section: the comparison on real agent processes."""
    results = claim_policies_real.compare(seeds=options.seeds)
    rows = [
        [
            load,
            f"`{policy}`",
            f"{f['queue_wait_p50']:.2f} s",
            f"{f['queue_wait_p99']:.2f} s",
            f"{f['makespan']:.1f} s",
            f"{100 * f['utilisation']:.0f}%",
        ]
        for load, policy, f in results
    ]
    header = ["load", "policy", "queue wait p50", "p99", "makespan", "utilisation"]
    command = f"benchmarks/claim_policies_real.py --seeds {len(options.seeds)}"
    return {"claim-policies-real": table(header, rows) + _stamp(options, command)}


def speed_scenario(policy: str, requests: int) -> Scenario:
    """The 10,000-request comparison whose speed docs/benchmarks.md reports."""
    return Scenario(
        seed=7,
        agents=4,
        concurrency=4,
        requests=requests,
        table_pool=1000,
        table_median=10.0,
        table_sigma=1.5,
        load=0.8,
        archive_after=300.0,
        claim=policy,
    )


def speed_table(options: Options) -> dict[str, str]:
    """The ``simulator-speed`` section: requests of virtual work per wall second."""
    rows = []
    for policy in installed_claim_policies():
        cpu = time.process_time()
        report = simulate(speed_scenario(policy, options.speed_requests))
        cpu = time.process_time() - cpu
        rows.append(
            [
                f"`{policy}`",
                f"{options.speed_requests:,}",
                f"{report.virtual_seconds / 3600:.1f} h",
                f"{report.wall_seconds:.1f} s",
                f"{report.requests_per_wall_second:,.0f}",
                f"{cpu:.1f} s",
                f"{options.speed_requests / cpu:,.0f}",
            ]
        )
    # On a shared machine the wall time counts the neighbours too: the CPU time is this run's.
    header = ["policy", "requests", "virtual time", "wall", "requests per wall second"]
    header += ["CPU", "requests per CPU second"]
    command = "benchmarks/docs_report.py --only simulator-speed"
    stamp = f"\n\n_`{command}`, {time.strftime('%Y-%m-%d')}, seed 7, one run per policy._\n"
    return {"simulator-speed": table(header, rows) + stamp}


#: The fleet sizes the ``fleet-size`` section and plot sweep (docs/benchmarks.md, issue 20).
FLEET = (3, 10, 30, 100)


def fleet_scenario(agents: int) -> Scenario:
    """A fleet of ``agents`` taking 40 requests each over, with no lease contention (one table
    each from a pool of 100,000), so only the fleet's size changes."""
    return Scenario(
        seed=5,
        agents=agents,
        requests=40 * agents,
        take_over=True,
        table_pool=100_000,
        max_tables=1,
    )


@functools.cache
def fleet_runs(fleet: tuple[int, ...] = FLEET) -> list[tuple[int, Report, float]]:
    """(agents, report, CPU seconds) of each fleet size: once per process, for table and plot."""
    runs = []
    for agents in fleet:
        cpu = time.process_time()
        report = simulate(fleet_scenario(agents))
        runs.append((agents, report, time.process_time() - cpu))
        print(f"fleet of {agents}: {report.wall_seconds:.1f} s wall", flush=True)
    return runs


def fleet_table(options: Options) -> dict[str, str]:
    """The ``fleet-size`` section: what a poll costs each agent as the fleet grows."""
    rows = []
    for agents, report, cpu in fleet_runs(options.fleet or FLEET):
        rate, poll = report.operations_per_agent_second, report.operations_per_poll
        rows.append(
            [
                str(agents),
                f"{40 * agents:,}",
                f"{rate['read']:.2f}",
                f"{rate['list']:.2f}",
                f"{poll['read']:.2f}",
                f"{poll['list']:.2f}",
                f"{poll['total']:.2f}",
                f"{report.wall_seconds:.1f} s",
                f"{cpu:.1f} s",
            ]
        )
    header = ["agents", "requests", "reads per agent-second", "lists per agent-second"]
    header += ["reads per poll", "lists per poll", "operations per poll", "wall", "CPU"]
    command = "benchmarks/docs_report.py --only fleet-size"
    if options.fleet and options.fleet != FLEET:
        command += " --fleet " + " ".join(map(str, options.fleet))
    stamp = f"\n\n_`{command}`, {time.strftime('%Y-%m-%d')}, seed 5, one run per size._\n"
    return {"fleet-size": table(header, rows) + stamp}


def fleet_plot(options: Options, docs: Path) -> Path:
    """docs/fleet-size.png: store reads and lists per agent per virtual second, and the
    simulation's CPU time, against the fleet's size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = fleet_runs(options.fleet or FLEET)
    sizes = [agents for agents, _report, _cpu in runs]
    figure, (per_agent, cost) = plt.subplots(1, 2, figsize=(10, 4))
    for kind in ("read", "list"):
        rates = [report.operations_per_agent_second[kind] for _a, report, _c in runs]
        per_agent.plot(sizes, rates, marker="o", label=f"{kind}s")
    cost.plot(sizes, [cpu for _a, _r, cpu in runs], marker="o", label="CPU")
    panels = (
        (per_agent, "store operations per agent per virtual second", "operations"),
        (cost, "simulation CPU time (40 requests per agent)", "seconds"),
    )
    title = "fdcore simulate --take-over --table-pool 100000 --max-tables 1, seed 5"
    for axes, _name, _unit in panels:
        axes.set_xscale("log")
        axes.set_xticks(sizes, [str(size) for size in sizes])
        axes.minorticks_off()
    return _save(figure, panels, "agents in the fleet", title, docs / "fleet-size.png")


def _save(
    figure: Any, panels: Sequence[tuple[Any, str, str]], x: str, title: str, path: Path
) -> Path:
    """Label each (axes, title, unit) of ``panels`` on a log x axis; save ``figure`` at ``path``."""
    import matplotlib.pyplot as plt

    for axes, name, unit in panels:
        axes.set_title(name)
        axes.set_xlabel(x)
        axes.set_ylabel(unit)
        if axes.get_xscale() != "log":
            axes.set_xscale("log")
        axes.grid(True, alpha=0.3)
        axes.legend()
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path


def throughput_table(options: Options) -> dict[str, str]:
    """The ``throughput`` section: real agents against the backend's ceiling."""
    rows = throughput.measure(runs=options.runs, azurite=options.azurite)
    shown = [
        [
            row.backend,
            str(row.agents),
            str(row.requests),
            f"**{row.requests_per_s:.1f}** ({', '.join(f'{v:.1f}' for v in row.runs)})",
            f"{row.creates_per_s:.0f}",
            f"{row.writes_per_request:.1f}",
            f"{row.ceiling:.1f}",
            f"{100 * row.share_of_ceiling:.0f}%",
            f"{row.operations_per_request:.1f}",
            f"{row.creates_per_s_together:.0f}",
            f"{100 * row.bound_share:.0f}%",
        ]
        for row in rows
    ]
    header = ["backend", "K agents", "requests", "requests/s (runs)", "raw creates/s"]
    header += ["writes per request", "ceiling, requests/s", "share of ceiling"]
    header += ["operations per request", "creates/s, K clients", "store bound's share"]
    command = f"benchmarks/throughput.py --runs {options.runs}"
    stamp = f"\n\n_`{command}`, {time.strftime('%Y-%m-%d')}, medians of {options.runs} runs._\n"
    return {"throughput": table(header, shown) + stamp}


def queue_wait_plot(options: Options, docs: Path) -> Path:
    """docs/queue-wait-by-load.png: queue wait p50 and p99 against offered load, per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    offered = (0.5, 0.65, 0.8, 0.9, 0.95)
    curves = claim_policies.queue_wait_against_load(
        offered, requests=options.requests, seeds=options.seeds
    )
    figure, (p50, p99) = plt.subplots(1, 2, figsize=(10, 4))
    for policy, points in curves.items():
        loads = [load for load, _median, _tail in points]
        p50.plot(loads, [median for _load, median, _tail in points], marker="o", label=policy)
        p99.plot(loads, [tail for _load, _median, tail in points], marker="o", label=policy)
    for axes, title in ((p50, "queue wait p50"), (p99, "queue wait p99")):
        axes.set_title(title)
        axes.set_xlabel("offered load (share of the fleet's workers)")
        axes.set_ylabel("virtual seconds")
        axes.set_yscale("log")
        axes.grid(True, alpha=0.3)
        axes.legend()
    figure.suptitle(
        f"3 agents x 2 workers, Poisson arrivals, {options.requests} requests, "
        f"medians of {len(options.seeds)} seeds"
    )
    figure.tight_layout()
    path = docs / "queue-wait-by-load.png"
    figure.savefig(path, dpi=80)
    plt.close(figure)
    return path


#: Finished requests the poll-cost plot measures over (a local folder; 100,000 is `make
#: bench-history`'s, minutes to write).
HISTORY = (0, 1_000, 10_000, 30_000)


def poll_cost_plot(options: Options, docs: Path) -> Path:
    """docs/poll-cost-by-history.png: one idle agent's poll against the finished requests the
    mailbox holds, retention off and on (``poll_history.poll_cost`` on a local folder)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (cpu, listed) = plt.subplots(1, 2, figsize=(10, 4))
    for retention in (False, True):
        rows = [poll_history.poll_cost("localfs", n, retention, polls=12) for n in HISTORY]
        label = "retention on" if retention else "retention off"
        xs = [max(row["finished"], 1) for row in rows]  # 0 drawn at 1 on the log axis
        cpu.plot(xs, [row["cpu_ms_mean"] for row in rows], marker="o", label=label)
        listed.plot(xs, [row["listed_keys_per_poll"] + 1 for row in rows], marker="o", label=label)
    panels = (
        (cpu, "CPU per poll", "ms (mean of 12 polls)"),
        (listed, "keys listed per poll (+1)", "keys"),
    )
    for axes, _name, _unit in panels:
        axes.set_yscale("log")
    return _save(
        figure,
        panels,
        "finished requests in the mailbox (0 drawn at 1)",
        "One idle agent over a local folder, default retention (keep 7d) after its run",
        docs / "poll-cost-by-history.png",
    )


#: Every plot ``make bench-report`` draws.

#: The fleet sizes of the idle-cost section and plot.
IDLE_FLEET = (1, 3, 10, 30)


@functools.cache
def idle_runs(fleet: tuple[int, ...] = IDLE_FLEET) -> list[tuple[int, Report]]:
    """(agents, report) of an idle fleet of each size: nothing submitted, one virtual hour,
    the defaults (poll 5 s, stale_after 60, take_over)."""
    runs = []
    for agents in fleet:
        report = simulate(Scenario(seed=1, agents=agents, requests=0, take_over=True, max_hours=1))
        runs.append((agents, report))
        print(f"idle fleet of {agents}: {report.wall_seconds:.1f} s wall", flush=True)
    return runs


def idle_cost_table(options: Options) -> dict[str, str]:
    """The ``idle-cost`` section: what an idle fleet costs a month on each store."""
    rows = []
    for agents, report in idle_runs():
        costs = report.costs()
        rate = report.operations_per_agent_second
        rows.append(
            [
                str(agents),
                f"{rate['read']:.3f}",
                f"{rate['list']:.3f}",
                f"{rate['create'] + rate['replace']:.3f}",
                *(f"${costs[store]['dollars_per_agent_month'] * agents:,.2f}" for store in STORES),
            ]
        )
    header = ["agents", "reads / agent-s", "lists / agent-s", "writes / agent-s"]
    header += [f"fleet $ / month, {store}" for store in STORES]
    command = "fdcore simulate --agents N --requests 0 --max-hours 1 --take-over --seed 1"
    stamp = f"\n\n_`{command}`, {time.strftime('%Y-%m-%d')}; a 30-day month at its rate._\n"
    return {"idle-cost": table(header, rows) + stamp}


#: The stores the cost figures are given for (fdcore.pricing's tables).
STORES = ("s3", "adls", "onelake")


def idle_cost_plot(options: Options, docs: Path) -> Path:
    """docs/idle-cost.png: an idle fleet's monthly cost against its size, per store, beside
    what three lists a poll and a heartbeat every stale_after / 4 cost (the previous release)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = idle_runs()
    sizes = [agents for agents, _report in runs]
    figure, axes = plt.subplots(1, 1, figsize=(7, 4.5))
    for store in STORES:
        per_agent = [report.costs()[store]["dollars_per_agent_month"] for _a, report in runs]
        axes.plot(
            sizes, [n * c for n, c in zip(sizes, per_agent, strict=True)], marker="o", label=store
        )
        # Before the signal: 3 lists every 5 s and a heartbeat every 15 s (landing 2.5 s late).
        before = cost(
            {"list": 3 * MONTH_SECONDS / 5, "replace": MONTH_SECONDS / 17.5}, PRICES[store]
        )
        axes.plot(
            sizes,
            [n * before for n in sizes],
            linestyle="--",
            alpha=0.6,
            label=f"{store}, 3 lists a poll",
        )
    axes.set_yscale("log")
    axes.set_xticks(sizes, [str(size) for size in sizes])
    axes.minorticks_off()
    panels = ((axes, "an idle fleet's store operations, per month", "dollars"),)
    title = "fdcore simulate --requests 0 --max-hours 1 --take-over, defaults"
    return _save(figure, panels, "agents in the fleet", title, docs / "idle-cost.png")


PLOTS: list[PlotProducer] = [queue_wait_plot, poll_cost_plot, fleet_plot, idle_cost_plot]

SECTIONS: dict[str, Callable[[Options], dict[str, str]]] = {
    "claim-policies": claim_policy_tables,  # gives operations-by-kind as well
    "claim-policies-real": real_claim_policy_table,
    "simulator-speed": speed_table,
    "fleet-size": fleet_table,
    "idle-cost": idle_cost_table,
    "throughput": throughput_table,
}


def write_sections(page: Path, sections: dict[str, str]) -> None:
    """Replace each named section of ``page`` between its markers; the rest stays as it is.

    Under a lock, so sections generated by several invocations at once all land."""
    with open(page, "r+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        text = handle.read()
        for name, body in sections.items():
            text = replace_section(text, name, body, str(page))
        handle.seek(0)
        handle.write(text)
        handle.truncate()


def generate(
    options: Options,
    only: Sequence[str] = (*SECTIONS, "plots"),
    *,
    page: Path = PAGE,
    plots: Sequence[PlotProducer] = PLOTS,
) -> list[Path]:
    """Run the chosen sections, write their tables into ``page`` and their plots beside it."""
    for name in only:
        if name in SECTIONS:
            write_sections(page, SECTIONS[name](options))
            print(f"{page.name}: {name} written", flush=True)
    drawn = []
    if "plots" in only:
        for produce in plots:
            drawn.append(produce(options, page.parent))
            print(f"{drawn[-1].name} drawn", flush=True)
    return drawn


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    choices = [*SECTIONS, "plots"]
    parser.add_argument("--only", nargs="+", choices=choices, default=choices)
    parser.add_argument("--seeds", type=int, default=3, help="seeds 1..N (runs, for real ones)")
    parser.add_argument("--requests", type=int, default=300, help="per simulated run")
    parser.add_argument("--speed-requests", type=int, default=10_000)
    parser.add_argument("--no-azurite", action="store_true")
    parser.add_argument("--fleet", type=int, nargs="+", default=FLEET, help="fleet sizes")
    args = parser.parse_args(argv)
    logging.getLogger("fdcore").setLevel(logging.ERROR)  # agents log every claim
    if args.seeds < 1:
        parser.error(f"--seeds: must be >= 1, got {args.seeds}")
    options = Options(
        seeds=tuple(range(1, args.seeds + 1)),
        requests=args.requests,
        speed_requests=args.speed_requests,
        runs=args.seeds,
        azurite=not args.no_azurite,
        fleet=tuple(args.fleet),
    )
    generate(options, args.only)


if __name__ == "__main__":
    main()
