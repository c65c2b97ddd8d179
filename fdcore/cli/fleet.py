"""Real agent processes on this machine: write agent.toml files, start, signal and stop agents.

Used by ``fdcore demo`` and, through the ``fdcore_fleet`` fixture of :mod:`fdcore.testing`, by
tests that run a fleet of real agents.
"""

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

from fdcore.mailbox.access import Mailbox
from fdcore.plugins.manager import load_plugins


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
    # What runs ``agent run --config ...``: the fdcore CLI, or a wrapper of it (a benchmark's).
    launcher: list[str] = attrs.field(factory=lambda: [sys.executable, "-m", "fdcore.cli"])

    def start(self) -> AgentProcess:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [*self.launcher, "agent", "run", "--config", str(self.config)],
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
    """Agents of one environment, each with its own config file and log in ``folder``.

    ``storage`` holds the backend's options: every agent's config gets them as its ``[storage]``
    (a section an agent gives merges over them), and :attr:`mailbox` opens with them. ``env`` is
    what agent processes start with; change it before starting them.
    """

    folder: Path
    environment: str
    storage: dict[str, str] = attrs.field(factory=dict)
    env: dict[str, str] = attrs.field(factory=lambda: dict(os.environ))
    agents: dict[str, AgentProcess] = attrs.field(factory=dict)
    _mailbox: Mailbox | None = attrs.field(default=None, init=False)

    @property
    def mailbox(self) -> Mailbox:
        """The environment's mailbox as this process sees it (opened, so created, on first use)."""
        if self._mailbox is None:
            self._mailbox = Mailbox(load_plugins().open_storage(self.environment, self.storage))
        return self._mailbox

    def add(self, name: str, sections: Mapping[str, Any]) -> AgentProcess:
        config = self.folder / f"{name}.toml"
        merged = dict(sections)
        merged["agent"] = {"name": name, "environment": self.environment, **sections["agent"]}
        if self.storage or "storage" in sections:
            merged["storage"] = {**self.storage, **sections.get("storage", {})}
        config.write_text(agent_toml(merged))
        self.mailbox  # noqa: B018  # the environment the agents share exists before they start
        agent = AgentProcess(name, config, self.folder / f"{name}.log", self.env)
        self.agents[name] = agent
        return agent

    def add_pythonpath(self, *folders: Path) -> None:
        """Let agents import modules from ``folders`` (a python runner's table functions)."""
        paths = [str(folder) for folder in folders]
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [*paths, self.env.get("PYTHONPATH")]))

    def stop_all(self) -> dict[str, int]:
        return {name: agent.stop() for name, agent in self.agents.items()}

    def kill_all(self) -> None:
        """SIGKILL every agent still running (clean-up after a test, whatever it left behind)."""
        for agent in self.agents.values():
            if agent.alive():
                agent.kill()

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
