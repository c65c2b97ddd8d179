from __future__ import annotations

import pytest
from agent_parts_helpers import Environment


@pytest.fixture
def env() -> Environment:
    return Environment()
