"""``fdcore monthly-slots "1 02:00"``: print when a monthly schedule is next due.

An example of a command a plugin adds to the ``fdcore`` command line (``fdcore_commands``): it
lets an operator check a ``monthly`` timing before putting it in agent.toml.
"""

from __future__ import annotations

import argparse
from datetime import datetime, timezone

from fdcore.errors import ConfigError
from fdcore.settings.checks import Whole, add_flag
from fdcore_plugin_template.monthly import Monthly

WHERE = "fdcore monthly-slots"


class MonthlySlots:
    name = "monthly-slots"
    help = "print when a monthly schedule is next due"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("spec", help='day of month and time, like "1 02:00"')
        parser.add_argument("--timezone", default="UTC", help="IANA time zone (UTC)")
        add_flag(parser, "--count", Whole(1, 1000), default=3, help="how many due times (3)")
        parser.add_argument("--after", help="ISO 8601 time to start from (now)")

    def run(self, args: argparse.Namespace) -> int:
        try:
            timetable = Monthly().parse(args.spec, {"timezone": args.timezone})
        except ValueError as exc:
            raise ConfigError(WHERE, "SPEC", str(exc)) from None
        now = _time(args.after) if args.after else datetime.now(timezone.utc)
        for _ in range(args.count):
            slot = timetable.next_due(now)
            local = slot.due_at.astimezone(timetable.zone)
            print(
                f"{slot.id}  {local:%Y-%m-%d %H:%M %Z}  deadline {slot.deadline:%Y-%m-%d %H:%M} UTC"
            )
            now = slot.due_at
        return 0


def _time(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(WHERE, "--after", f"not an ISO 8601 time: {text!r}") from None
    if when.tzinfo is None:
        raise ConfigError(WHERE, "--after", f"needs a time zone, like {text}Z")
    return when
