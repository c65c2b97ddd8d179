"""What the command runner tells a table process: its ``FDCORE_*`` variables, declared once.

Each field of :class:`TableVariables` is one variable: its name, its kind and bounds, and its
default for a process started by an older agent that did not set it. The runner writes them
(:meth:`fdcore.abc.TableJob.environ`, through :func:`table_environ`) and a table process reads
them back (:func:`read_table_variables`; the fenced write of :mod:`fdcore.table` does), so a
name, a bound or a default is written here alone. A bad value is a one-line ConfigError naming
the variable.

The agent's ``[storage]`` options travel too (``FDCORE_STORAGE_OPTIONS``, JSON), so a table
process opens the environment as its agent does (an S3 endpoint, a OneLake credential's
variable name). They are never secrets: agent.toml names the variables that hold secrets, and
the table process inherits those from its agent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from fdcore.contract.limits import MAX_FILE_BYTES
from fdcore.errors import ConfigError
from fdcore.settings.checks import Check, FileBound, Whole

__all__ = [
    "DEFAULT_LEASES",
    "TableVariables",
    "Variable",
    "read_table_variables",
    "table_environ",
    "variables",
]

#: The lease provider of a table process started without ``FDCORE_LEASES`` (an older agent's).
DEFAULT_LEASES = "mailbox"

Kind = Literal["text", "whole", "options"]


@attrs.frozen
class Variable:
    """One variable of a table process: its name, what it holds, and the check of a number."""

    name: str
    kind: Kind = "text"
    check: Check | None = None  # a whole number's

    def read(self, text: str) -> Any:
        """The value ``text`` gives, or a ConfigError naming the variable."""
        if self.kind == "text":
            if not text:
                raise self.error("is empty")
            return text
        if self.kind == "options":
            return self._options(text)
        assert self.check is not None, f"{self.name}: a whole number needs its check"
        return self.check.bind(self.source, None).read(text)

    def write(self, value: Any) -> str | None:
        """The variable's text for ``value``; None leaves it unset (nothing to say)."""
        if value is None or (self.kind != "whole" and not value):
            return None
        if self.kind == "options":
            return json.dumps(dict(value), sort_keys=True)
        return str(value)

    @property
    def source(self) -> str:
        return f"environment variable {self.name}"

    def error(self, message: str) -> ConfigError:
        return ConfigError(self.source, None, message)

    def _options(self, text: str) -> dict[str, str]:
        try:
            value = json.loads(text)
        except ValueError:
            raise self.error(f"expected a JSON object, got {text[:40]!r}") from None
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise self.error("expected a JSON object of texts (the [storage] options)")
        return value


def variable(
    name: str,
    kind: Kind = "text",
    check: Check | None = None,
    **field: Any,
) -> Any:
    """A field of :class:`TableVariables` carried by variable ``name``, with its kind and bounds;
    ``field`` are attrs's (a ``default`` or ``factory`` when an older runner may not set it)."""
    return attrs.field(metadata={"variable": Variable(name, kind, check)}, **field)


def _declared(field: attrs.Attribute[Any]) -> Variable:
    declared: Variable = field.metadata["variable"]
    return declared


@attrs.frozen
class TableVariables:
    """What a table process is told: field names are :class:`fdcore.abc.TableJob`'s."""

    request: str = variable("FDCORE_REQUEST")
    table: str = variable("FDCORE_TABLE")
    attempt: int = variable("FDCORE_ATTEMPT", "whole", Whole(1))
    fencing_token: int = variable(
        "FDCORE_FENCING_TOKEN", "whole", Whole(0)
    )  # the lease's generation
    agent: str = variable("FDCORE_AGENT")
    environment: str = variable("FDCORE_ENVIRONMENT")  # the environment's URL
    leases: str = variable("FDCORE_LEASES", default=DEFAULT_LEASES)  # the lease provider
    # the agent's bound of a mailbox file: a fenced write reads and writes within it
    max_file_bytes: int = variable(
        "FDCORE_MAX_FILE_BYTES", "whole", FileBound(), default=MAX_FILE_BYTES
    )
    run_as: str | None = variable("FDCORE_RUN_AS", default=None)  # ``[runner] run_as``
    storage_backend: str | None = variable("FDCORE_STORAGE_BACKEND", default=None)
    storage_options: Mapping[str, str] = variable(
        "FDCORE_STORAGE_OPTIONS", "options", factory=dict, hash=False
    )


def variables() -> dict[str, Variable]:
    """Field name -> its variable, in declaration order."""
    return {field.name: _declared(field) for field in attrs.fields(TableVariables)}


def read_table_variables(environ: Mapping[str, str]) -> TableVariables:
    """A table process's variables from ``environ`` (``os.environ``); a missing required one or
    a bad value is a ConfigError naming the variable."""
    values = {}
    for field in attrs.fields(TableVariables):
        declared = _declared(field)
        text = environ.get(declared.name)
        if text is not None:
            values[field.name] = declared.read(text)
        elif field.default is attrs.NOTHING:
            raise declared.error("not set: is this process a table the command runner started?")
    return TableVariables(**values)


def table_environ(job: object) -> dict[str, str]:
    """The variables for ``job`` (a :class:`fdcore.abc.TableJob`: every field of
    :class:`TableVariables`), each unset one left out."""
    found = {}
    for name, declared in variables().items():
        text = declared.write(getattr(job, name))
        if text is not None:
            found[declared.name] = text
    return found
