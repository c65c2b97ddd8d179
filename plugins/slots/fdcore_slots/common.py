"""What every slot function shares: UTC handling, error messages and the common options."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from fdcore.durations import parse_duration
from fdcore.errors import DurationError

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def setting(key: str, value: object) -> str:
    """``key = "value"`` as the user wrote it in agent.toml, for the start of an error message."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    # json leaves line breaks such as U+2028 as they are: escape them to keep one line
    return f"{key} = " + "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)


def spec_error(key: str, spec: object, reason: str) -> ValueError:
    return ValueError(f"{setting(key, spec)}: {reason}")


def require_text(key: str, spec: object, example: str) -> str:
    if not isinstance(spec, str):
        raise spec_error(key, spec, f'must be a text like "{example}"')
    return spec


def as_utc(now: datetime) -> datetime:
    """``now`` in UTC. A naive time is refused: guessing its zone would shift every slot."""
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"now must be timezone-aware, got naive {now.isoformat()}")
    return now.astimezone(UTC)


def duration_setting(key: str, value: object) -> float:
    """Seconds of a duration option, or a ValueError naming the option."""
    if not isinstance(value, str):
        raise spec_error(key, value, 'must be a text like "2h"')
    if not value.isascii():
        # the duration syntax is ASCII: other scripts' digits and spaces are refused here
        raise spec_error(key, value, 'use ASCII digits and units, like "2h"')
    try:
        return parse_duration(value)
    except DurationError as exc:
        raise spec_error(key, value, exc.reason) from None


def zone_option(options: dict[str, Any]) -> ZoneInfo:
    """The schedule's ``timezone`` (an IANA name), UTC when not given."""
    name = options.get("timezone", "UTC")
    if not isinstance(name, str) or not name:
        raise spec_error("timezone", name, 'must be an IANA time zone name like "Europe/Berlin"')
    try:
        return ZoneInfo(name)
    # OSError: a folder of the zone database ("Europe"), a name too long for a file name
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise spec_error(
            "timezone", name, 'unknown time zone (use an IANA name like "Europe/Berlin" or "UTC")'
        ) from None


def refuse_options(key: str, options: dict[str, Any], reasons: dict[str, str]) -> None:
    """Refuse options that mean nothing to this timing, rather than silently ignore them."""
    for option, reason in reasons.items():
        if option in options:
            raise spec_error(option, options[option], f"not used by {key} schedules: {reason}")
