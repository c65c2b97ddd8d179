"""``fdcore doctor <environment-url>``: prove a live environment keeps storage's promises.

It opens an existing environment (it never creates one) through the installed plugins, runs the
conformance probes of :mod:`fdcore.conformance.probes` (the very functions the vendor suite runs)
under a scratch prefix ``doctor-<hex>/``, then removes every key it wrote, even when a probe
failed or the run was interrupted. One line per property; exit 0 when every one passed, 1 on any
failure, 2 on a usage or configuration error or an environment that is missing or unusable.
Round counts default lower than the suite's, so a remote store answers in seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import uuid
from collections.abc import Callable

from fdcore.abc import Storage
from fdcore.cli.config import storage_option
from fdcore.conformance.probes import (
    PROBES,
    Observation,
    ProbeContext,
    UrlStorageFactory,
    for_each_key,
)
from fdcore.contract.codec import FILE_BYTES_RANGE
from fdcore.environment.named import resolve
from fdcore.errors import NotFound, StorageUnavailable
from fdcore.plugins.manager import load_plugins
from fdcore.settings.checks import Whole, add_flag
from fdcore.terminal import Progress

Report = Callable[[Observation], None]


def scratch_prefix() -> str:
    """A prefix no mailbox file uses, unique to one run."""
    return f"doctor-{uuid.uuid4().hex[:16]}/"


def diagnose(ctx: ProbeContext, report: Report = lambda observation: None) -> list[Observation]:
    """Run every probe under ``ctx.prefix``, then remove what they wrote; ``report`` each result.

    The cleanup is itself an observation: keys left behind mean list or delete misbehaved.
    """
    if not ctx.prefix.endswith("/"):
        raise ValueError(f"doctor needs a scratch folder prefix ending in '/', not {ctx.prefix!r}")
    observations: list[Observation] = []
    try:
        for probe in PROBES:
            observation = probe(ctx)
            observations.append(observation)
            report(observation)
    finally:
        observation = _clean_up(ctx)
        observations.append(observation)
        report(observation)
    return observations


def _clean_up(ctx: ProbeContext) -> Observation:
    def delete(store: Storage, key: str) -> None:
        with contextlib.suppress(NotFound):  # already gone: a probe removed it
            store.delete(key)

    try:
        store = ctx.factory()
        try:
            written = list(store.list(ctx.prefix))
            for_each_key(ctx, written, delete)
            left = list(store.list(ctx.prefix))
        finally:
            store.close()
    except Exception as exc:
        return Observation("cleanup", False, f"observed {type(exc).__name__}: {exc}")
    if left:
        return Observation(
            "cleanup", False, f"observed {len(left)} keys left under {ctx.prefix}, e.g. {left[0]}"
        )
    return Observation("cleanup", True, f"removed the {len(written)} keys left under {ctx.prefix}")


# -- the command ---------------------------------------------------------------------------------


#: ``fdcore doctor --help``: this module's first paragraph.
DESCRIPTION = __doc__.split("\n\n")[0] if __doc__ else None


class Doctor:
    name = "doctor"
    help = "prove an environment's storage: conditional writes, races, listing, keys"
    description = DESCRIPTION

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "environment", help="environment URL, e.g. file:///srv/fd or https://..."
        )
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        add_flag(
            parser,
            "--rounds",
            Whole(1, 100_000),
            default=50,
            help="rounds of each race (default 50)",
        )
        add_flag(
            parser, "--processes", Whole(1, 256), default=16, help="racing processes (default 16)"
        )
        add_flag(
            parser,
            "--keys",
            Whole(1, 100_000),
            default=500,
            help="keys written to test listing (default 500)",
        )
        add_flag(
            parser,
            "--page-size",
            Whole(1, 100_000),
            default=None,
            help="keys per page of the store's listing; 2N+1 keys test paging "
            "(default: what the backend says, else 1000)",
        )
        add_flag(
            parser,
            "--max-payload",
            Whole(1, FILE_BYTES_RANGE[1]),
            default=1 << 20,
            help="largest value to round-trip, in bytes (default 1 MiB)",
        )
        add_flag(
            parser,
            "--threads",
            Whole(1, 256),
            default=8,
            help="requests in flight when writing or removing many keys (default 8)",
        )
        parser.add_argument(
            "--option",
            type=storage_option,
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="a backend option, as under [storage] in agent.toml (repeatable)",
        )

    def run(self, args: argparse.Namespace) -> int:
        return run(args)


def run(args: argparse.Namespace) -> int:
    target = resolve(args.environment)  # a URL, a named environment or an agent.toml
    options = {**target.options, **dict(args.option)}
    factory = UrlStorageFactory(target.url, options, target.backend, create=False)
    try:
        # Opening first, without creating, turns a bad URL, a missing plugin and a missing or
        # unusable environment into one error line (exit 2) before any process starts. A store
        # that cannot be reached (a dead endpoint, a missing bucket, refused credentials) is
        # the failed "open" property: one line, before any probe.
        load_plugins().open_storage(
            target.url, options, target.backend, create=False, setting="fdcore doctor URL"
        ).close()
    except StorageUnavailable as exc:
        observation = Observation("open", False, f"observed {type(exc).__name__}: {exc}")
        _print([observation], args)
        return 1
    ctx = ProbeContext(
        factory,
        prefix=scratch_prefix(),
        processes=args.processes,
        create_rounds=args.rounds,
        replace_rounds=args.rounds,
        max_payload=args.max_payload,
        listing_size=args.keys,
        threads=args.threads,
        list_page_size=args.page_size,
    )
    started = time.monotonic()
    progress = Progress()  # on a terminal only: piped output is the observations alone
    total = len(PROBES) + 1  # and the cleanup

    def report(observation: Observation) -> None:
        progress.done()
        if not args.json:
            print(observation, flush=True)
        checked.append(observation)
        if len(checked) < total:
            progress.update(f"doctor: {len(checked)} of {total} properties checked...")

    checked: list[Observation] = []
    progress.update(f"doctor: probing {args.environment} with {args.processes} processes...")
    observations = diagnose(ctx, report=report)
    progress.done()
    if args.json:
        _print(observations, args, seconds=time.monotonic() - started)
    return 0 if all(o.passed for o in observations) else 1


def _print(observations: list[Observation], args: argparse.Namespace, seconds: float = 0) -> None:
    if not args.json:
        for observation in observations:
            print(observation)
        return
    document = {
        "environment": args.environment,
        "passed": all(o.passed for o in observations),
        "seconds": round(seconds, 3),
        "properties": [
            {"name": o.name, "passed": o.passed, "detail": o.detail} for o in observations
        ],
    }
    json.dump(document, sys.stdout, indent=2)
    print()
