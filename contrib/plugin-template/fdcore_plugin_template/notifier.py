"""The ``jsonl`` notifier: each notification appended as one JSON line to a file.

```toml
[notify.routes.audit]
notifier = "jsonl"
path = "/var/log/fdcore/notifications.jsonl"
```

A real notifier (Teams, e-mail) has the same shape: check the options in ``open`` (no I/O there),
deliver in ``send`` and let a failure raise; the core turns it into a failed delivery.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from fdcore.abc import Notification


class JsonLinesChannel:
    """One route's channel: appends to the route's file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def send(self, notification: Notification) -> None:
        line = json.dumps(attrs.asdict(notification), sort_keys=True, default=str)  # times
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")


class JsonLinesNotifier:
    """``notifier = "jsonl"``, with the option ``path`` (the file to append to)."""

    name = "jsonl"

    def open(self, route: str, options: dict[str, Any]) -> JsonLinesChannel:
        unknown = sorted(set(options) - {"path"})
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown option (the jsonl notifier takes path)")
        path = options.get("path")
        if not isinstance(path, str) or not path:
            raise ValueError(f"path: expected the file to append to, got {path!r}")
        return JsonLinesChannel(Path(path))
