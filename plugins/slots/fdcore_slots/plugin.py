"""Entry point of fdcore-slots: registers the ``every``, ``cron``, ``daily`` and ``weekly`` slot
functions."""

from __future__ import annotations

from collections.abc import Sequence

from fdcore import hookimpl
from fdcore.abc import SlotFunction
from fdcore_slots.interval import Every
from fdcore_slots.local import Cron, Daily, Weekly


@hookimpl
def fdcore_slot_functions() -> Sequence[SlotFunction]:
    return [Every(), Cron(), Daily(), Weekly()]
