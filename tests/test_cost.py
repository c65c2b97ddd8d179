"""Cost by run: each run record carries the store operations its agent made for that table and
the agent's compute rate; ``fdcore cost`` and ``Environment.cost`` price and group them, with a
``not in any run`` row so the rows add up to what the agents counted."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import threading
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from fdcore.builtin.memory import MemoryStorage
from fdcore.cli import cost as cost_command
from fdcore.cli.fleet import AgentFleet
from fdcore.cli.main import main
from fdcore.contract.codec import encode
from fdcore.contract.layout import agent_key, run_key
from fdcore.contract.models import AgentRecord, Outcome, RunRecord
from fdcore.environment import COST_GROUPS, NOT_IN_ANY_RUN, CostReport, CostRow, Environment
from fdcore.mailbox.counting import CountingStore
from fdcore.mailbox.submit import submit
from fdcore.pricing import PRICES, cost
from fdcore.testing.memory_fleet import START, MemoryFleet

TOML = """
[agent]
name = "etl-01"
environment = "x"
owner = "team-a"
compute_per_hour = 3.6
concurrency = 2
[runner]
run_as = "svc-etl"
[[schedules]]
id = "hourly"
every = "1h"
entities = ["sales"]
owner = "team-b"
run_as = "svc-hourly"
[[schedules]]
id = "daily"
daily = "02:00"
entities = ["stock"]
"""


def counted_fleet(fleet: MemoryFleet) -> CountingStore:
    return fleet.wrap_storage(CountingStore)


def run_all(fleet: MemoryFleet, polls: int = 4, step: float = 30.0) -> None:
    """Poll every agent, end their runs, move the clock; ``polls`` times."""
    for _ in range(polls):
        for agent in fleet.agents.values():
            agent.poll()
        fleet.finish_runs()
        fleet.clock.advance(step)


def commands_open(fleet: MemoryFleet, module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command of ``fdcore.cli.<module>`` opens the fleet's mailbox, whatever its --env."""
    monkeypatch.setattr(
        f"fdcore.cli.{module}.Environment.open", classmethod(lambda cls, url: cls(fleet.mailbox))
    )


def record_of(fleet: MemoryFleet, name: str) -> AgentRecord:
    found = fleet.mailbox.agent(name)
    assert found is not None
    return found.value


def test_a_store_counts_a_blocks_calls_to_its_account_on_that_thread_only() -> None:
    store = CountingStore(MemoryStorage.fresh("charged"))
    account: Counter[str] = Counter()
    with store.charged_to(account):
        store.create("a.json", b"{}")
        store.read("a.json")
        other = threading.Thread(target=lambda: store.read("a.json"))
        other.start()
        other.join()
        with store.charged_to(None):
            store.read("a.json")  # suspended: the agent's own, not the table's
        list(store.list(""))
    store.read("a.json")
    assert account == Counter({"create": 1, "read": 1, "list": 1})
    assert store.by_kind() == Counter({"create": 1, "read": 4, "list": 1})


def test_each_run_record_carries_its_tables_operations_and_the_rows_add_up(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    store = counted_fleet(fleet)
    agent = fleet.agent_from_toml(TOML)
    submit(fleet.mailbox, ["sales", "stock"], request_id="adhoc", now=START)
    run_all(fleet)
    records = {(r.request, r.table): r for r in fleet.mailbox.runs("adhoc")}
    assert set(records) == {("adhoc", "sales"), ("adhoc", "stock")}
    for record in records.values():
        assert record.operations is not None and record.compute_per_hour == 3.6
        # its own record created; its lease taken and let go and its status changed
        writes = record.operations["create"] + record.operations.get("replace", 0)
        assert record.operations["create"] >= 1 and writes >= 3
        assert record.operations["read"] >= 1 and "list" not in record.operations
    fleet.clock.advance(60)
    agent.poll()  # a heartbeat after every run: the record counts them all
    counted = record_of(fleet, "etl-01").operations
    assert counted is not None and sum(counted.values()) <= sum(store.by_kind().values())
    report = Environment(fleet.mailbox).cost(by="run", store="s3")
    assert [row.key for row in report.rows][-1] == NOT_IN_ANY_RUN
    assert {row.key for row in report.rows[:-1]} >= {"adhoc/1/sales", "adhoc/1/stock"}
    # every operation the agent counted is in one row: its runs' or the one of no run
    assert dict(report.total.operations) == {kind: counted.get(kind, 0) for kind in PRICES["s3"]}
    for row in report.rows:
        assert row.store_dollars == pytest.approx(cost(row.operations, PRICES["s3"]))
        assert row.compute_dollars == pytest.approx(row.seconds / 3600 * 3.6)
    assert report.total.runs == len(fleet.runs)


def test_runs_group_by_request_schedule_owner_and_agent(fdcore_memory_fleet: MemoryFleet) -> None:
    fleet = fdcore_memory_fleet
    counted_fleet(fleet)
    fleet.agent_from_toml(TOML)  # at START (02:00): hourly's and daily's slots are due
    submit(fleet.mailbox, ["orders"], request_id="adhoc", now=START)
    run_all(fleet)
    environment = Environment(fleet.mailbox)
    keys = {
        by: [row.key for row in environment.cost(by=by, store="adls").rows] for by in COST_GROUPS
    }
    assert set(keys["schedule"]) == {"hourly", "daily", "-", NOT_IN_ANY_RUN}
    # hourly names its owner; daily's is the agent's, as is a submitted request's
    assert sorted(keys["owner"][:-1]) == ["team-a", "team-b"]
    assert keys["agent"] == ["etl-01", NOT_IN_ANY_RUN]
    assert len(keys["request"]) == 4 and len(keys["run"]) == 4
    by_schedule = environment.cost(by="schedule", store="adls")
    [hourly] = [row for row in by_schedule.rows if row.key == "hourly"]
    assert hourly.runs == 1 and hourly.total_operations > 0
    only = environment.cost(by="run", request="adhoc", store="s3")
    assert [row.key for row in only.rows] == ["adhoc/1/orders"]  # no fleet-wide row


def test_a_schedules_run_as_reaches_the_runner_and_fdcore_runs(
    fdcore_memory_fleet: MemoryFleet,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fleet = fdcore_memory_fleet
    fleet.agent_from_toml(TOML)
    submit(fleet.mailbox, ["orders"], request_id="adhoc", now=START)
    run_all(fleet)
    given = {run.job.table: run.job for run in fleet.runs}
    assert given["sales"].run_as == "svc-hourly"  # hourly's own
    assert given["sales"].environ()["FDCORE_RUN_AS"] == "svc-hourly"
    assert given["stock"].run_as == given["orders"].run_as == "svc-etl"  # [runner] run_as
    commands_open(fleet, "runs", monkeypatch)
    assert main(["runs", "--env", fleet.storage.url, "--json"]) == 0
    shown = {run["table"]: run["run_as"] for run in json.loads(capsys.readouterr().out)["runs"]}
    assert shown == {"sales": "svc-hourly", "stock": "svc-etl", "orders": "svc-etl"}


def test_a_restarted_agent_counts_on_from_its_last_record(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    counted_fleet(fleet)
    fleet.agent("etl-01").poll()
    first = record_of(fleet, "etl-01")
    assert first.operations and first.operations_since == START
    fleet.clock.advance(600)
    fleet.wrap_storage(CountingStore)  # a new process: its own count from zero
    fleet.agent("etl-01").poll()
    second = record_of(fleet, "etl-01")
    assert second.operations_since == START
    assert second.operations is not None
    for kind, n in first.operations.items():
        assert second.operations[kind] >= n
    assert sum(second.operations.values()) > sum(first.operations.values())


def test_since_keeps_later_runs_and_leaves_the_fleets_row_out(
    fdcore_memory_fleet: MemoryFleet,
) -> None:
    fleet = fdcore_memory_fleet
    counted_fleet(fleet)
    fleet.agent("etl-01")
    submit(fleet.mailbox, ["a"], request_id="early", now=START)
    run_all(fleet)
    later = fleet.clock.now()
    submit(fleet.mailbox, ["b"], request_id="late", now=later)
    run_all(fleet)
    report = Environment(fleet.mailbox).cost(by="request", since=later, store="s3")
    assert [row.key for row in report.rows] == ["late"]
    with pytest.raises(ValueError, match="no time zone"):
        Environment(fleet.mailbox).cost(since=later.replace(tzinfo=None), store="s3")
    with pytest.raises(ValueError, match="by must be one of"):
        Environment(fleet.mailbox).cost(by="table", store="s3")
    unpriced = Environment(fleet.mailbox).cost()  # a memory store: no price table of its own
    assert unpriced.store is None and unpriced.total.store_dollars == 0
    assert unpriced.total.total_operations > 0


def write(folder: Path, key: str, data: bytes) -> None:
    path = folder / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_the_command_reads_older_and_hostile_records_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = str(tmp_path / "fd")
    assert main(["init", url]) == 0
    with Environment.open(url) as environment:
        environment.submit(["sales"], id="r1")
    older = RunRecord(
        "r1", "sales", "etl-old", 1, 3, START, START + timedelta(hours=1), Outcome.SUCCEEDED
    )
    write(tmp_path / "fd", run_key("r1", 1, "sales"), encode(older))
    hostile = json.loads(encode(older))
    hostile.update(table="stock", operations={"read": -5})
    write(tmp_path / "fd", run_key("r1", 1, "stock"), json.dumps(hostile).encode())
    agent = AgentRecord("etl-old", START, 60.0, operations={"read": 10}, operations_since=START)
    write(tmp_path / "fd", agent_key("etl-old"), encode(agent))
    capsys.readouterr()
    assert main(["cost", "--env", url, "--by", "agent", "--store", "s3"]) == 0
    out = capsys.readouterr().out
    assert "etl-old" in out and NOT_IN_ANY_RUN in out
    assert "1 runs by older agents count no operations" in out
    assert main(["cost", "--env", url, "--csv", "--store", "s3"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [row["key"] for row in rows] == ["r1", NOT_IN_ANY_RUN]  # the hostile record left out
    assert rows[1]["read"] == "10" and rows[0]["uncounted_runs"] == "1"
    assert list(rows[0]) == list(cost_command.CSV_COLUMNS)


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--since", "yesterday-ish"], "fdcore cost: --since: expected an ISO 8601 time"),
        (["--store", "s3", "--prices", "missing.toml"], "missing.toml"),
    ],
)
def test_a_bad_flag_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], says: str
) -> None:
    url = str(tmp_path / "fd")
    assert main(["init", url]) == 0
    capsys.readouterr()
    assert main(["cost", "--env", url, *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1, err


# The simulator's standard day: three agents sharing two schedules (hourly and every 15 minutes)
# and 100 submitted requests over 24 virtual hours, nothing archived.
STANDARD_DAY = [
    "--agents", "3", "--take-over", "--schedule", "every=1h", "--schedule", "every=15m",
    "--requests", "100", "--archive-after", "0", "--max-hours", "24", "--seed", "1",
]  # fmt: skip


@pytest.mark.slow
def test_cost_by_schedule_over_the_standard_day_adds_up_to_the_simulators_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = tmp_path / "day"
    assert main(["simulate", *STANDARD_DAY, "--json", "--mailbox", str(kept)]) == 0
    simulated = json.loads(capsys.readouterr().out)["store_operations"]
    assert main(["cost", "--env", str(kept), "--by", "schedule", "--csv", "--store", "s3"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {row["key"] for row in rows} == {"s1", "s2", "-", NOT_IN_ANY_RUN}
    total = sum(int(row["operations"]) for row in rows)
    assert abs(total - simulated["total"]) <= 0.01 * simulated["total"], (total, simulated)
    for kind in ("read", "list", "create", "replace"):
        assert sum(int(row[kind]) for row in rows) <= simulated[kind] * 1.01
    assert all(int(row["runs"]) > 0 for row in rows if row["key"] != NOT_IN_ANY_RUN)


def test_simulate_keeps_a_mailbox_only_in_a_new_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    small = ["--agents", "1", "--requests", "2"]
    assert main(["simulate", *small, "--mailbox", str(tmp_path / "full")]) == 2
    assert "--mailbox: " in capsys.readouterr().err
    assert main(["simulate", *small, "--runs", "2", "--mailbox", str(tmp_path / "new")]) == 2
    assert "not with --runs" in capsys.readouterr().err
    assert main(["simulate", *small, "--mailbox", str(tmp_path / "new")]) == 0
    with Environment.open(str(tmp_path / "new")) as environment:
        report = environment.cost(store="onelake")
    assert isinstance(report, CostReport) and report.total.runs >= 2
    assert all(isinstance(row, CostRow) for row in report.rows)


@pytest.mark.processes
def test_a_real_agents_runs_carry_their_cost_and_add_up_to_its_count(
    fdcore_fleet: AgentFleet,
) -> None:
    fleet, url = fdcore_fleet, fdcore_fleet.environment
    fleet.env["FDCORE_TEST_TABLE_SECONDS"] = "0.5"
    agent = {"poll_seconds": 0.5, "stale_after": 5, "owner": "team-a", "compute_per_hour": 36}
    runner = {"kind": "python", "function": "fdcore.testing.tables:sleep_table"}
    fleet.add("etl-01", {"agent": agent, "runner": runner}).start()
    with Environment.open(url) as environment:
        handle = environment.submit(["sales", "stock"], id="r1")
        try:
            assert handle.wait(timeout=60).state == "succeeded"
        finally:
            assert fleet.stop_all() == {"etl-01": 0}  # a clean stop: its last record counts all
        report = environment.cost(by="run", store="s3")
        record = environment.mailbox.agent("etl-01")
    assert record is not None and record.value.operations is not None
    runs = {row.key: row for row in report.rows}
    assert set(runs) == {"r1/1/sales", "r1/1/stock", NOT_IN_ANY_RUN}
    for key in ("r1/1/sales", "r1/1/stock"):
        assert runs[key].operations["create"] >= 1 and runs[key].seconds >= 0.5
        assert runs[key].compute_dollars == pytest.approx(runs[key].seconds / 100)
    assert runs[NOT_IN_ANY_RUN].operations["list"] > 0  # its polls
    counted = record.value.operations
    assert dict(report.total.operations) == {kind: counted.get(kind, 0) for kind in PRICES["s3"]}
    by_owner = fdcore_cost(url, "--by", "owner")
    assert [row["key"] for row in by_owner["rows"]] == ["team-a", NOT_IN_ANY_RUN]


def fdcore_cost(url: str, *flags: str) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fdcore.cli",
            "cost",
            "--env",
            url,
            "--store",
            "s3",
            "--json",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_show_gives_each_runs_operations_and_an_older_agents_run_none(
    fdcore_memory_fleet: MemoryFleet,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fleet = fdcore_memory_fleet
    counted_fleet(fleet)
    fleet.agent_from_toml(TOML)
    submit(fleet.mailbox, ["sales"], request_id="adhoc", now=START)
    run_all(fleet)
    [record] = fleet.mailbox.runs("adhoc")
    assert record.operations
    # an older agent's record of a second attempt: no operations, no compute rate
    older = RunRecord(
        request="adhoc",
        table="stock",
        agent="etl-00",
        attempt=2,
        generation=1,
        started_at=START,
        ended_at=START + timedelta(seconds=4),
        outcome=Outcome.SUCCEEDED,
    )
    fleet.storage.create(run_key("adhoc", 2, "stock"), encode(older))
    commands_open(fleet, "actions", monkeypatch)
    assert main(["show", "adhoc", "--env", fleet.storage.url, "--json"]) == 0
    runs = {run["table"]: run for run in json.loads(capsys.readouterr().out)["runs"]}
    assert runs["sales"]["operations"] == record.operations
    assert runs["sales"]["compute_per_hour"] == 3.6
    assert runs["stock"]["operations"] is None and runs["stock"]["compute_per_hour"] is None
    assert main(["show", "adhoc", "--env", fleet.storage.url]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    header = lines[lines.index("TABLE RUNS") + 1]
    rows = {line.split()[0]: line for line in lines if line.startswith(("sales ", "stock "))}
    column = header.index("STORE OPS")
    assert rows["sales"][column:].split()[0] == str(sum(record.operations.values()))
    assert rows["stock"][column:].split()[0] == "-"
