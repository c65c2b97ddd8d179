"""``fdcore host init | set-slots N | probe | migrate``: the operator's side of a host folder."""

from __future__ import annotations

import argparse
import json
import os

import attrs

from fdcore.environment import Environment
from fdcore.errors import ConfigError, FdcoreError
from fdcore.settings.checks import Whole, add_flag
from fdcore_hostslots.errors import CapacityInvalid
from fdcore_hostslots.host import MAX_SLOTS, Host

HOST_VARIABLE = "FDCORE_HOST"


class SlotCount(Whole):
    """The slot count of ``set-slots``: read as every whole number a command takes is, refused
    with the code docs/host.md gives a bad count."""

    def __init__(self) -> None:
        super().__init__(1, MAX_SLOTS)

    def read(self, text: str) -> int:
        try:
            count: int = super().read(text)
        except ConfigError as exc:
            raise CapacityInvalid(exc.source, str(exc).removeprefix(f"{exc.source}: ")) from None
        return count


class HostCommand:
    name = "host"
    help = "set up and inspect a host folder: the execution slots this machine's agents share"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="host_action", required=True, metavar="ACTION")
        for action, text in (
            ("init", "create the host folder with one slot (never resets an existing one)"),
            ("probe", "show configured_slots, busy_slots and the live leases"),
            ("migrate", "bring an older host folder to the current layout (all idle)"),
            ("set-slots", "set how many tables this host runs at once (1..8)"),
        ):
            sub = actions.add_parser(action, help=text, description=text)
            sub.add_argument(
                "--host", help=f"the host folder (default: ${HOST_VARIABLE})", default=None
            )
            if action == "set-slots":
                add_flag(sub, "count", SlotCount(), help=f"the slot count, 1..{MAX_SLOTS}")
                sub.add_argument(
                    "--env",
                    help="the environment whose audit trail records the change (default: none)",
                )
            if action == "probe":
                sub.add_argument("--json", action="store_true", help="one JSON object")

    def run(self, args: argparse.Namespace) -> int:
        path = args.host or os.environ.get(HOST_VARIABLE)
        if not path:
            raise ConfigError(
                f"fdcore host {args.host_action}", "--host", f"missing (or set ${HOST_VARIABLE})"
            )
        host = Host(path)
        if args.host_action == "init":
            created = host.init()
            print(f"{path}: {'initialised with 1 slot' if created else 'already a host folder'}")
        elif args.host_action == "set-slots":
            print(f"{path}: {self._set_slots(host, path, args.count, args.env)} slot(s)")
        elif args.host_action == "migrate":
            print(f"{path}: {host.migrate()}")
        else:
            self._probe(host, as_json=args.json)
        return 0

    def _set_slots(self, host: Host, path: str, count: int, env: str | None) -> int:
        """Set the count; with ``env``, one event of that environment's audit trail, done or
        refused."""
        if env is None:
            return host.set_slots(count)
        with Environment.open(env, via="cli") as environment:
            before = host.slots().configured
            try:
                done = host.set_slots(count)
            except FdcoreError as exc:
                environment.record_action("set-slots", path, outcome=f"refused: {exc}")
                raise
            environment.record_action("set-slots", path, detail=f"{before} -> {done} slot(s)")
            return done

    def _probe(self, host: Host, *, as_json: bool) -> None:
        slots = host.slots()
        leases = host.leases()
        if as_json:
            rows = [
                {
                    **attrs.asdict(lease, recurse=False, filter=lambda a, v: a.name != "process"),
                    "pid": lease.process.pid,
                }
                for lease in leases
            ]
            document = {
                "configured_slots": slots.configured,
                "busy_slots": slots.busy,
                "free": slots.free > 0,
                "leases": rows,
            }
            print(json.dumps(document))
            return
        print(f"configured_slots {slots.configured}")
        print(f"busy_slots {slots.busy}")
        print(f"free {'yes' if slots.free else 'no'}")
        for lease in leases:
            print(
                f"slot {lease.slot}: {lease.scope} request {lease.request} table {lease.table} "
                f"agent {lease.holder} pid {lease.process.pid}"
            )
