"""Poll cost against history: one idle agent's poll over a mailbox holding N finished requests,
with retention on (they are archived first, as the retention run does it) and off.

    .venv/bin/python benchmarks/poll_history.py                      # local folder, N = 0, 100000
    .venv/bin/python benchmarks/poll_history.py --azurite --finished 0 1000 10000
    .venv/bin/python benchmarks/poll_history.py --azurite --finished 100000 --retention on \
        --archive-locally                         # archived on a local folder, then uploaded
    .venv/bin/python benchmarks/poll_history.py --json               # the rows as JSON
    make bench-history                                               # both, as in docs

Each row is :func:`poll_cost` (``backend``, ``finished``, ``retention``): the real
:class:`fdcore.agent.core.Agent` over a real store (``fdcore-localfs`` in a temporary folder,
or ``fdcore-onelake`` against an Azurite this script starts), counting every store operation
and every key a listing returns, and timing each poll (wall and CPU). The agent's clock is
virtual (5 s a poll) so the retention run falls inside the measured polls; the store is real.
``bench-report`` generators call :func:`poll_cost` for the "poll cost against history" series.

History is N requests finished 30 days ago (request, final status, one run record each),
written with parallel creates. With retention on, a retention run (the same
:func:`fdcore.agent.retention.retire` the agent calls, in parallel workers) moves them to
``archive/`` before the agent starts; its time and operations are reported too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from fdcore.abc import Blob, Listed, ListedChanges, Storage, TableJob, TableRun, read_mailbox_file
from fdcore.agent.components import build_components
from fdcore.agent.core import Agent
from fdcore.agent.retention import protected_requests, retire
from fdcore.clock import ManualClock
from fdcore.contract.layout import request_key, run_key, status_key
from fdcore.contract.models import Attempt, Outcome, Request, RunRecord, State, Status
from fdcore.errors import StorageUnavailable
from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import load_plugins
from fdcore.settings.agent_toml import AgentConfig, RetentionConfig

# The agent's virtual clock starts at the real time: a store's clock far from it would make
# the agent report clock skew (harmless here, but noise in the output).
NOW = datetime.now(timezone.utc).replace(microsecond=0)
FINISHED_AT = NOW - timedelta(days=30)
POLL_SECONDS = 5.0
STALE_AFTER = 60.0
CONTAINER = "fdcore-bench"


class CountingStorage:
    """A store that counts its operations by kind, and the keys its listings return."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.url = storage.url
        self.counts: Counter[str] = Counter()
        if hasattr(storage, "list_changes"):  # offered only where the store offers it
            self.list_changes = self._list_changes

    def __getattr__(self, name: str) -> Any:  # last_write_time and the like, uncounted
        return getattr(self.storage, name)

    def read(self, key: str) -> Blob | None:
        self.counts["read"] += 1
        return self.storage.read(key)

    def read_bounded(self, key: str, max_bytes: int) -> Blob | None:
        self.counts["read"] += 1
        return read_mailbox_file(self.storage, key)

    def create(self, key: str, data: bytes) -> str:
        self.counts["create"] += 1
        return self.storage.create(key, data)

    def replace(self, key: str, data: bytes, etag: str) -> str:
        self.counts["replace"] += 1
        return self.storage.replace(key, data, etag)

    def delete(self, key: str, etag: str | None = None) -> None:
        self.counts["delete"] += 1
        self.storage.delete(key, etag)

    def list(self, prefix: str = "") -> Iterator[str]:
        self.counts["list"] += 1
        keys = list(self.storage.list(prefix))
        self.counts["listed_keys"] += len(keys)
        return iter(keys)

    def list_versions(self, prefix: str = "") -> Iterator[Listed]:
        self.counts["list"] += 1
        listed = list(self.storage.list_versions(prefix))  # type: ignore[attr-defined]
        self.counts["listed_keys"] += len(listed)
        return iter(listed)

    def _list_changes(self, prefix: str, cursor: object | None = None) -> ListedChanges:
        self.counts["list"] += 1
        changes: ListedChanges = self.storage.list_changes(prefix, cursor)  # type: ignore[attr-defined]
        self.counts["listed_keys"] += len(changes.listed) + len(changes.removed)
        return changes

    def close(self) -> None:
        self.storage.close()


def write_history(storage: Storage, finished: int, workers: int) -> float:
    """N finished requests, in parallel creates; the seconds it took."""
    mailbox = Mailbox(storage)
    started = FINISHED_AT - timedelta(minutes=2)

    def write(number: int) -> None:
        request_id = f"req-{number:07d}"
        mailbox.create(
            request_key(request_id),
            Request(id=request_id, entities=["sales"], created_at=started),
        )
        mailbox.create(
            run_key(request_id, 1, "sales"),
            RunRecord(request_id, "sales", "etl-00", 1, 1, started, FINISHED_AT, Outcome.SUCCEEDED),
        )
        mailbox.create(
            status_key(request_id),
            Status(
                request=request_id,
                state=State.SUCCEEDED,
                updated_at=FINISHED_AT,
                agent="etl-00",
                attempts=[Attempt(1, "etl-00", started, FINISHED_AT, Outcome.SUCCEEDED)],
                tables_done=["sales"],
            ),
        )

    begin = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        for _ in pool.map(write, range(finished), chunksize=64):
            pass
    return time.perf_counter() - begin


def archive_history(
    storage: CountingStorage, settings: RetentionConfig, workers: int
) -> dict[str, Any]:
    """A retention run over everything, its requests shared out to parallel workers."""
    mailbox = Mailbox(storage)
    before = Counter(storage.counts)
    begin = time.perf_counter()
    protected = protected_requests(mailbox)
    ids = sorted(mailbox.status_ids())

    def move(request_id: str) -> int:
        # A store error leaves the move for a later run, as in the agent: retried below.
        try:
            return len(retire(mailbox, request_id, NOW, settings, 60.0, protected).moved)
        except StorageUnavailable:
            return 0

    moved = 0
    for _ in range(3):
        with ThreadPoolExecutor(workers) as pool:
            moved += sum(pool.map(move, ids, chunksize=64))
        ids = sorted(mailbox.status_ids())
        if not ids:
            break
    seconds = time.perf_counter() - begin
    operations = Counter(storage.counts)
    operations.subtract(before)
    return {"moved": moved, "seconds": round(seconds, 2), "operations": dict(operations)}


def upload(source: Storage, target: Storage, workers: int) -> dict[str, Any]:
    """Every file of ``source`` created byte for byte in ``target``, in parallel creates."""
    keys = [key for key in source.list("") if not key.startswith(".")]

    def copy(key: str) -> None:
        blob = source.read(key)
        assert blob is not None, key
        target.create(key, blob.data)

    begin = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        for _ in pool.map(copy, keys, chunksize=64):
            pass
    return {"files": len(keys), "seconds": round(time.perf_counter() - begin, 2)}


def archived_history(
    target: Storage, finished: int, settings: RetentionConfig, workers: int
) -> dict[str, Any]:
    """Retention's result over ``finished`` requests, built on a local folder by the same run
    as :func:`archive_history` and uploaded into ``target``: through Azurite here an archive run
    moves about ten requests a second, so 100,000 would take hours; what the polls then meet is
    the same files either way."""
    with open_backend("localfs") as local:
        built = {"history_seconds": round(write_history(local, finished, workers), 2)}
        built["archive_run"] = archive_history(CountingStorage(local), settings, workers)
        built["upload"] = upload(local, target, workers)
    return built


def _no_tables(job: TableJob) -> TableRun:
    raise AssertionError(f"an idle mailbox gave the agent {job.request}")


def measure_polls(storage: CountingStorage, retention: bool, polls: int) -> dict[str, Any]:
    """One agent's polls: the first (start-up) alone, then ``polls`` more, 5 virtual s apart."""
    config = AgentConfig(
        name="bench-01",
        environment=storage.url,
        poll_seconds=POLL_SECONDS,
        stale_after=STALE_AFTER,
        # The virtual clock runs ahead of the store's (5 s a poll against milliseconds): a grace
        # this long keeps that from reading as clock skew, which would hold retention back.
        grace_seconds=3600.0,
        retention=RetentionConfig(enabled=retention),
    )
    clock = ManualClock(NOW)
    plugins = load_plugins()
    agent = Agent(
        config,
        Mailbox(storage),
        build_components(config, plugins, storage, _no_tables),
        clock,
        previous_process_gone=lambda record: True,
    )
    rows = []
    for _ in range(polls + 1):
        before = Counter(storage.counts)
        wall, cpu = time.perf_counter(), time.process_time()
        agent.poll()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        used = Counter(storage.counts)
        used.subtract(before)
        rows.append({"wall": wall, "cpu": cpu, **{k: v for k, v in used.items() if v}})
        clock.advance(POLL_SECONDS)
    agent.stop()
    agent.close()
    first, steady = rows[0], rows[1:]

    def ops(row: dict[str, Any]) -> int:
        return sum(
            v for k, v in row.items() if k in ("read", "create", "replace", "delete", "list")
        )

    return {
        "first_poll": {**first, "operations": ops(first)},
        "polls": len(steady),
        "operations_per_poll": statistics.fmean(ops(row) for row in steady),
        "listed_keys_per_poll": statistics.fmean(row.get("listed_keys", 0) for row in steady),
        "wall_ms_median": 1000 * statistics.median(row["wall"] for row in steady),
        "wall_ms_mean": 1000 * statistics.fmean(row["wall"] for row in steady),
        "cpu_ms_mean": 1000 * statistics.fmean(row["cpu"] for row in steady),
        "max_operations_in_a_poll": max(ops(row) for row in steady),
        "wall_ms_max": 1000 * max(row["wall"] for row in steady),
        # every poll, to tell a slow store answer from a poll that did more
        "each_poll": [
            {"wall_ms": round(1000 * row["wall"], 1), "operations": ops(row)} for row in steady
        ],
    }


@contextlib.contextmanager
def open_backend(backend: str, azurite: Any = None) -> Iterator[Storage]:
    """A fresh, empty environment on ``backend`` (``localfs`` or ``azurite``)."""
    if backend == "localfs":
        from fdcore_localfs import LocalFolderStorage

        with tempfile.TemporaryDirectory(prefix="fdcore-poll-history-") as folder:
            storage = LocalFolderStorage(Path(folder) / "env")
            yield storage
            storage.close()
    elif backend == "azurite":
        from fdcore_onelake import open_storage

        if azurite is None:
            raise ValueError("backend 'azurite' needs a running Azurite (azurite=...)")
        storage = open_storage(azurite.url(CONTAINER, f"env-{uuid.uuid4().hex[:12]}"))
        yield storage
        storage.close()
    else:
        raise ValueError(f"unknown backend {backend!r}: use localfs or azurite")


def poll_cost(
    backend: str,
    finished: int,
    retention: bool,
    *,
    polls: int = 24,
    workers: int = 8,
    azurite: Any = None,
    archive_locally: bool = False,
) -> dict[str, Any]:
    """One row of the series: an idle agent's poll over ``finished`` finished requests on
    ``backend`` ("localfs" or "azurite", which needs ``azurite``: a running
    ``fdcore_onelake.testing.Azurite`` with container ``fdcore-bench``).

    ``archive_locally`` (with retention): build the archived history on a local folder and
    upload it (:func:`archived_history`) instead of running retention through ``backend``."""
    with open_backend(backend, azurite) as opened:
        storage = CountingStorage(opened)
        row: dict[str, Any] = {"backend": backend, "finished": finished, "retention": retention}
        if retention and finished and archive_locally:
            row["built_locally"] = archived_history(opened, finished, RetentionConfig(), workers)
        else:
            row["history_seconds"] = round(write_history(opened, finished, workers), 2)
        if retention and finished and not archive_locally:
            row["archive_run"] = archive_history(storage, RetentionConfig(), workers)
        storage.counts.clear()
        # Write back what history and archiving left dirty first: else the polls' fsyncs pay
        # for the journal of a million file operations just made.
        os.sync()
        row.update(measure_polls(storage, retention, polls))
    if finished:
        # The same agent over an empty mailbox, measured right after under the same load: the
        # wall time of a poll swings with the machine's load, the ratio much less.
        with open_backend(backend, azurite) as opened:
            empty = measure_polls(CountingStorage(opened), retention, polls)
        row["empty"] = {key: empty[key] for key in _COMPARED}
        row["ratio_to_empty"] = {key: round(row[key] / empty[key], 2) for key in _COMPARED}
    return row


_COMPARED = ("operations_per_poll", "wall_ms_median", "cpu_ms_mean")


def _print(rows: list[dict[str, Any]]) -> None:
    print(
        f"{'backend':8} {'finished':>8} {'retention':>9} {'ops/poll':>8} {'keys/poll':>9} "
        f"{'wall ms':>8} {'cpu ms':>7} {'1st poll ops':>12} {'archive run':>14} "
        f"{'x empty (ops, wall, cpu)':>24}"
    )
    for row in rows:
        archive = row.get("archive_run") or row.get("built_locally", {}).get("archive_run")
        archived = f"{archive['seconds']:.0f} s" if archive else "-"
        print(
            f"{row['backend']:8} {row['finished']:>8} {row['retention']!s:>9} "
            f"{row['operations_per_poll']:>8.2f} {row['listed_keys_per_poll']:>9.0f} "
            f"{row['wall_ms_median']:>8.2f} {row['cpu_ms_mean']:>7.2f} "
            f"{row['first_poll']['operations']:>12} {archived:>14} "
            f"{' '.join(str(x) for x in row.get('ratio_to_empty', {}).values()) or '-':>24}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--azurite", action="store_true", help="OneLake's backend on Azurite")
    parser.add_argument("--finished", type=int, nargs="+", default=[0, 100_000])
    parser.add_argument("--polls", type=int, default=24, help="polls measured after the first")
    parser.add_argument("--workers", type=int, default=8, help="parallel writers of history")
    parser.add_argument(
        "--retention", choices=("both", "on", "off"), default="both", help="which rows to measure"
    )
    parser.add_argument(
        "--archive-locally",
        action="store_true",
        help="retention rows: archive on a local folder with the same run, then upload the files",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    with contextlib.ExitStack() as stack:
        azurite = None
        if args.azurite:
            from fdcore_onelake.testing import Azurite

            azurite = stack.enter_context(Azurite())
            azurite.create_container(CONTAINER)
        backend = "azurite" if args.azurite else "localfs"
        for finished in args.finished:
            for retention in {"both": (False, True), "on": (True,), "off": (False,)}[
                args.retention
            ]:
                row = poll_cost(
                    backend,
                    finished,
                    retention,
                    polls=args.polls,
                    workers=args.workers,
                    azurite=azurite,
                    archive_locally=args.archive_locally,
                )
                rows.append(row)
                print(json.dumps(row), file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        _print(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
