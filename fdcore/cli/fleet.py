"""Real agent processes for tests: write agent.toml files, start, signal and stop agents."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs


def toml_value(value: Any) -> str:
    """A TOML literal for the simple values agent.toml holds."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    raise TypeError(f"no TOML literal for {value!r}")


def agent_toml(sections: Mapping[str, Any]) -> str:
    """agent.toml text: a mapping is a ``[table]``, a list of mappings an ``[[array]]``."""
    lines = []
    for section, values in sections.items():
        tables = values if isinstance(values, list) else [values]
        header = f"[[{section}]]" if isinstance(values, list) else f"[{section}]"
        for table in tables:
            lines.append(header)
            lines.extend(f"{key} = {toml_value(value)}" for key, value in table.items())
            lines.append("")
    return "\n".join(lines)


@attrs.define
class AgentProcess:
    """One ``fdcore agent run`` process."""

    name: str
    config: Path
    log: Path
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> AgentProcess:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "fdcore.cli", "agent", "run", "--config", str(self.config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.wait(10)

    def stop(self, timeout: float = 30) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.signal(signal.SIGTERM)
        return self.wait(timeout)

    def wait(self, timeout: float) -> int:
        assert self.process is not None
        return self.process.wait(timeout=timeout)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


@attrs.define
class AgentFleet:
    """Agents of one environment, each with its own config file and log, all stopped at the end."""

    folder: Path
    environment: str
    env: dict[str, str] = attrs.field(factory=lambda: dict(os.environ))
    agents: dict[str, AgentProcess] = attrs.field(factory=dict)

    def add(self, name: str, sections: Mapping[str, Any]) -> AgentProcess:
        config = self.folder / f"{name}.toml"
        merged = dict(sections)
        merged["agent"] = {"name": name, "environment": self.environment, **sections["agent"]}
        config.write_text(agent_toml(merged))
        agent = AgentProcess(name, config, self.folder / f"{name}.log", self.env)
        self.agents[name] = agent
        return agent

    def stop_all(self) -> dict[str, int]:
        return {name: agent.stop() for name, agent in self.agents.items()}

    def __iter__(self) -> Iterator[AgentProcess]:
        return iter(self.agents.values())


def wait_until(condition: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    """Poll ``condition`` until true or ``timeout`` seconds pass; return whether it came true."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()
