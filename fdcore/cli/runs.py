"""``fdcore runs``: every table run with the identity it ran as and the release that ran it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from fdcore.cli.config import add_environment_flags
from fdcore.cli.output import format_table
from fdcore.environment import Environment, RunStory, run_story

#: The fields of a run ``fdcore runs --json`` prints, beside its request.
FIELDS = ("table", "attempt", "agent", "run_as", "release", "outcome", "started_at", "ended_at")


def _json(request: str, run: RunStory) -> dict[str, Any]:
    shown = run.to_json()
    return {"request": request, **{name: shown[name] for name in FIELDS}}


class Runs:
    name = "runs"
    help = "table runs: who ran each, as which identity, with which release"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_environment_flags(parser)
        parser.add_argument("--request", help="only this request's runs (live or archived)")
        parser.add_argument("--json", action="store_true", help="machine-readable output")

    def run(self, args: argparse.Namespace) -> int:
        with Environment.open(args.env) as environment:
            if args.request is not None:
                story = environment.request(args.request)
                runs = [(story.id, run) for run in story.runs]
            else:  # the live requests' runs, from the environment's one look
                ids = sorted(row.id for row in environment.queue().rows)
                runs = [(id, run_story(run)) for id in ids for run in environment.table_runs(id)]
        runs.sort(key=lambda found: (found[0], found[1].attempt, found[1].started_at))
        if args.json:
            print(json.dumps({"runs": [_json(id, run) for id, run in runs]}, indent=2))
            return 0
        table = [("REQUEST", "TABLE", "ATTEMPT", "AGENT", "RUN AS", "FDCORE", "OUTCOME", "ENDED")]
        for id, run in runs:
            table.append(
                (
                    id,
                    run.table,
                    str(run.attempt),
                    run.agent,
                    run.run_as or "-",
                    run.version or "-",
                    run.outcome,
                    f"{run.ended_at:%Y-%m-%d %H:%M:%S}",
                )
            )
        print(format_table(table))
        return 0
