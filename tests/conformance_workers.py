"""A race worker for test_conformance_workers.py, importable by the probes' worker processes."""

from __future__ import annotations

import os
from typing import Any


def environment_value(index: int, crew: Any, name: str) -> str | None:
    """What a race worker sees of the environment variable ``name``."""
    return os.environ.get(name)
