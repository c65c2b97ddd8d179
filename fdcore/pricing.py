"""What store operations cost: a price table per store, and a bill for counted operations.

Operations are counted by kind as the simulator's store and the agent's counters name them:
``read`` (GET or HEAD of one key), ``list`` (one page of a listing), ``create`` and
``replace`` (a PUT), ``delete``. Each table gives the price of one operation of each kind in
US dollars (docs/operations.md, "What a fleet costs", cites each figure and its date). A file
may replace any figure (:func:`load_prices`)::

    [s3]
    list = 0.000005       # dollars per operation
    [onelake]
    cu_hour = 0.18        # OneLake bills capacity units: the price of one CU-hour
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from fdcore.errors import ConfigError
from fdcore.tomlfile import read_toml

KINDS = ("read", "list", "create", "replace", "delete")
#: Seconds in the month the figures are quoted for (30 days).
MONTH_SECONDS = 30 * 24 * 3600

# S3 Standard, us-east-1 (2026 list prices): PUT/COPY/POST/LIST $0.005 per 1,000, GET/HEAD
# $0.0004 per 1,000, DELETE free.
_S3 = {"read": 0.0004e-3, "list": 0.005e-3, "create": 0.005e-3, "replace": 0.005e-3, "delete": 0.0}
# ADLS Gen2 (hierarchical namespace), hot, LRS: write $0.065 and read $0.0052 per 10,000 (each
# per 4 MiB), iterative read (a listing) $0.065 per 10,000, delete free.
_ADLS = {
    "read": 0.0052e-4,
    "list": 0.065e-4,
    "create": 0.065e-4,
    "replace": 0.065e-4,
    "delete": 0.0,
}
# OneLake capacity-unit seconds per operation: read 104 and write 1,626 per 10,000 (per 4 MB),
# iterative read 1,626 per 10,000, other operations (a delete) 104 per 10,000.
ONELAKE_CU_SECONDS = {
    "read": 104e-4,
    "list": 1626e-4,
    "create": 1626e-4,
    "replace": 1626e-4,
    "delete": 104e-4,
}
#: Fabric pay-as-you-go, one capacity unit for an hour (US regions).
CU_HOUR = 0.18


def _onelake(cu_hour: float) -> dict[str, float]:
    return {kind: cu * cu_hour / 3600 for kind, cu in ONELAKE_CU_SECONDS.items()}


PRICES: dict[str, dict[str, float]] = {"s3": _S3, "adls": _ADLS, "onelake": _onelake(CU_HOUR)}


def store_of(url: str) -> str | None:
    """The price table for a store's URL (None for a local folder, or a store without one)."""
    lowered = url.lower()
    if lowered.startswith("s3://"):
        return "s3"
    if "onelake" in lowered:
        return "onelake"
    if lowered.startswith(("abfss://", "abfs://")) or ".dfs.core.windows.net" in lowered:
        return "adls"
    return None


def cost(operations: Mapping[str, float], prices: Mapping[str, float]) -> float:
    """Dollars for ``operations`` (counts by kind; other keys are ignored) at ``prices``."""
    return sum(operations.get(kind, 0) * prices[kind] for kind in KINDS)


def load_prices(path: Path) -> dict[str, dict[str, float]]:
    """The built-in tables with the figures ``path`` (TOML) gives instead; a clear error names
    the file and the value that is wrong."""
    data = read_toml(path, "a price table")
    prices = {store: dict(table) for store, table in PRICES.items()}
    for store, table in data.items():
        if store not in prices or not isinstance(table, dict):
            raise ConfigError(str(path), f"[{store}]", f"not a store ({', '.join(PRICES)})")
        if store == "onelake" and "cu_hour" in table:
            prices[store] = _onelake(_price(path, store, "cu_hour", table.pop("cu_hour")))
        for kind, value in table.items():
            if kind not in KINDS:
                raise ConfigError(
                    str(path), f"[{store}] {kind}", f"not an operation ({', '.join(KINDS)})"
                )
            prices[store][kind] = _price(path, store, kind, value)
    return prices


def _price(path: Path, store: str, kind: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e6:
        raise ConfigError(str(path), f"[{store}] {kind}", f"{value!r}: expected dollars, 0 or more")
    return float(value)
