"""Loading plugins, and the typed facade between the core and ``pm.hook``.

The core never calls ``pm.hook`` itself: it asks :class:`Plugins` for an implementation by kind
and name, and gets a typed object or a one-line :class:`~fdcore.errors.PluginError` that lists
what is installed and names the distribution to install when the name is one of ours. The hooks
are called here, through pluggy, once per plugin (``pm.subset_hook_caller``), so that every
implementation is attributed to the plugin that provides it.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import os
from collections.abc import Iterable, Sequence
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

import attrs
import pluggy

from fdcore.abc import (
    ClaimPolicy,
    Command,
    HostAdmission,
    LeaseProvider,
    Notifier,
    SlotFunction,
    Storage,
    StorageBackend,
    TableRunner,
    TakeoverPolicy,
)
from fdcore.errors import PluginError
from fdcore.plugins import hookspecs

ENTRY_POINT_GROUP = "fdcore"
# Named, not imported: the built-in implementations sit in a layer above the plugin manager
# (as pytest names its default plugins).
BUILTIN_PLUGIN = "fdcore.builtin.plugin"
DISABLE_VARIABLE = "FDCORE_DISABLE_PLUGINS"

T = TypeVar("T")


@attrs.frozen
class Kind(Generic[T]):
    """One extension point: the hook that registers it and what the user calls it."""

    label: str  # "claim policy"
    hook: str  # "fdcore_claim_policies"
    setting: str  # where agent.toml names it
    ours: dict[str, str]  # implementation name -> our distribution that provides it


STORAGE: Kind[StorageBackend] = Kind(
    "storage backend",
    "fdcore_storage_backends",
    "[agent] environment",
    {"file": "fdcore-localfs", "onelake": "fdcore-onelake", "s3": "fdcore-s3"},
)
CLAIM: Kind[ClaimPolicy] = Kind(
    "claim policy",
    "fdcore_claim_policies",
    "[pipeline] claim",
    {"always": "fdcore-claim", "when_free": "fdcore-claim"},
)
SLOT: Kind[SlotFunction] = Kind(
    "slot function",
    "fdcore_slot_functions",
    "[[schedules]]",
    {name: "fdcore-slots" for name in ("every", "cron", "daily", "weekly")},
)
TAKEOVER: Kind[TakeoverPolicy] = Kind(
    "takeover policy",
    "fdcore_takeover_policies",
    "[pipeline] takeover_policy",
    {"stale_record": "fdcore-takeover"},
)
NOTIFIER: Kind[Notifier] = Kind(
    "notifier", "fdcore_notifiers", "[notify.routes.<name>] notifier", {"teams": "fdcore-teams"}
)
LEASES: Kind[LeaseProvider] = Kind(
    "lease provider", "fdcore_lease_providers", "[pipeline] leases", {}
)
RUNNER: Kind[TableRunner] = Kind("table runner", "fdcore_table_runners", "[runner] kind", {})
COMMAND: Kind[Command] = Kind("command", "fdcore_commands", "fdcore COMMAND", {})
HOST: Kind[HostAdmission] = Kind(
    "host admission",
    "fdcore_host_admissions",
    "[agent] host_admission",
    {"slots": "fdcore-hostslots", "lanes": "fdcore-admission"},
)

KINDS: tuple[Kind[Any], ...] = (
    STORAGE,
    CLAIM,
    SLOT,
    TAKEOVER,
    NOTIFIER,
    LEASES,
    RUNNER,
    COMMAND,
    HOST,
)


def guess_storage_backend(url: str) -> str:
    """The name of the backend of ours that serves ``url``, for the error when none is installed."""
    lowered = url.lower()
    if lowered.startswith(("abfss://", "abfs://", "azurite://")) or any(
        host in lowered
        for host in (".dfs.", ".blob.", "onelake.", "devstoreaccount1", "dfs.core.windows.net")
    ):
        return "onelake"
    if lowered.startswith("memory://"):
        return "memory"
    if lowered.startswith("file://") or "://" not in lowered:
        return "file"
    return lowered.partition("://")[0]  # a scheme none of ours serves: no install advice


@attrs.frozen
class PluginInfo:
    """What ``fdcore plugins`` shows of one plugin."""

    name: str
    distribution: str | None
    version: str | None
    provides: dict[str, list[str]]  # kind label -> implementation names
    error: str | None = None  # why it failed to load, if it did


class Plugins:
    """The loaded plugins, and the one place the core asks for an implementation."""

    def __init__(self, manager: pluggy.PluginManager, infos: list[PluginInfo]) -> None:
        self.manager = manager
        self.infos = infos
        self._impls: dict[str, dict[str, tuple[Any, PluginInfo]]] = {}
        for index, info in enumerate(infos):
            if info.error:
                continue
            try:
                provided = {kind.label: self._provided_by(info.name, kind) for kind in KINDS}
            except Exception as exc:  # a plugin whose hook fails must not take the core down
                manager.unregister(name=info.name)
                infos[index] = attrs.evolve(info, error=_one_line(exc))
                continue
            for kind in KINDS:
                table = self._impls.setdefault(kind.label, {})
                for impl in provided[kind.label]:
                    if impl.name in table:
                        other = table[impl.name][1]
                        raise PluginError(
                            f"{kind.label} {impl.name!r} is provided by two plugins: "
                            f"{_describe(other)} and {_describe(info)}; "
                            f"disable one with {DISABLE_VARIABLE}"
                        )
                    table[impl.name] = (impl, info)
                if provided[kind.label]:
                    info.provides[kind.label] = [impl.name for impl in provided[kind.label]]

    def _provided_by(self, name: str, kind: Kind[Any]) -> list[Any]:
        """What the plugin called ``name`` returns from ``kind``'s hook, called through pluggy."""
        others = [plugin for other, plugin in self.manager.list_name_plugin() if other != name]
        hook = self.manager.subset_hook_caller(kind.hook, remove_plugins=others)
        found = [impl for result in hook() for impl in result]
        for impl in found:
            if not isinstance(getattr(impl, "name", None), str):
                raise TypeError(f"{kind.hook} returned {impl!r}, which has no name")
        return found

    def implementations(self, kind: Kind[T]) -> dict[str, T]:
        return {name: impl for name, (impl, _) in self._impls.get(kind.label, {}).items()}

    def provider(self, kind: Kind[Any], name: str) -> str:
        """The plugin (and its distribution) that provides ``kind`` ``name``, for messages."""
        return _describe(self._impls[kind.label][name][1])

    def get(self, kind: Kind[T], name: str) -> T:
        """The implementation of ``kind`` called ``name``, or a PluginError saying what to do."""
        found = self._impls.get(kind.label, {}).get(name)
        if found is not None:
            impl: T = found[0]
            return impl
        raise PluginError(self._missing(kind, name, f"{kind.label} {name!r}"))

    def _missing(self, kind: Kind[Any], name: str, what: str, setting: str | None = None) -> str:
        names = sorted(self._impls.get(kind.label, {}))
        installed = ", ".join(names) or "none"
        where = setting or kind.setting
        message = f"no installed plugin provides {what} ({where}; installed: {installed})"
        close = difflib.get_close_matches(name, [*names, *kind.ours], n=1)
        if close and close[0] != name:
            shown = f"{close[0]}://" if kind is STORAGE else close[0]
            return f"{message}; did you mean {shown!r}?"
        distribution = kind.ours.get(name)
        if distribution:
            broken = [i for i in self.infos if i.distribution == distribution and i.error]
            if broken:
                message += f"; {distribution} is installed but failed to load: {broken[0].error}"
            elif distribution in _disabled_names():
                message += f"; {distribution} is disabled by {DISABLE_VARIABLE}"
            else:
                message += f"; install {distribution}"
        return message

    def storage_backend(
        self, url: str, name: str | None = None, *, setting: str | None = None
    ) -> StorageBackend:
        """The backend that serves ``url``: the one called ``name``, or the first that accepts.
        ``setting`` says where the URL was given, for the error (default: agent.toml's key)."""
        if name:
            return self.get(STORAGE, name)
        for backend in self.implementations(STORAGE).values():
            if backend.accepts(url):
                return backend
        what = f"a storage backend for {url!r}"
        raise PluginError(self._missing(STORAGE, guess_storage_backend(url), what, setting))

    def open_storage(
        self,
        url: str,
        options: dict[str, str] | None = None,
        backend: str | None = None,
        *,
        create: bool = True,
        setting: str | None = None,
    ) -> Storage:
        """Open environment ``url``; with ``create=False`` only an existing one, writing nothing
        (a missing one is :class:`~fdcore.errors.EnvironmentNotFound`). ``setting`` says where
        the URL was given (a command's ``--env``), for the error."""
        chosen = self.storage_backend(url, backend, setting=setting)
        if _takes_create(chosen):
            return chosen.open(url, dict(options or {}), create=create)
        return chosen.open(url, dict(options or {}))


def _takes_create(backend: StorageBackend) -> bool:
    """Whether ``backend.open`` has the ``create`` flag: backends written before it do not, and
    keep working (opening as they always did)."""
    try:
        parameters = inspect.signature(backend.open).parameters.values()
    except (TypeError, ValueError):  # no signature to read (a builtin): pass nothing new
        return False
    return any(p.name == "create" or p.kind is p.VAR_KEYWORD for p in parameters)


def _describe(info: PluginInfo) -> str:
    return f"{info.name} ({info.distribution})" if info.distribution else info.name


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def _disabled_names() -> set[str]:
    raw = os.environ.get(DISABLE_VARIABLE, "")
    return {part.strip() for part in raw.split(",") if part.strip()}


def _entry_points() -> Sequence[EntryPoint]:
    return sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


def load_plugins(
    extra: Iterable[tuple[str, object]] = (), *, use_entry_points: bool = True
) -> Plugins:
    """Set up the plugin manager: built-ins, installed entry points, then ``extra`` plugins.

    Entry points or distributions named in ``FDCORE_DISABLE_PLUGINS`` (comma-separated) are not
    loaded. A plugin that fails to import, or whose hook raises, is recorded with its error, not
    raised: it shows in ``fdcore plugins`` and in the error for anything only it would provide.
    """
    builtin = importlib.import_module(BUILTIN_PLUGIN)
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    infos: list[PluginInfo] = []
    manager.register(builtin, name="builtin")
    infos.append(PluginInfo("builtin", "fdcore", _version("fdcore"), {}))
    disabled = _disabled_names()
    for ep in _entry_points() if use_entry_points else ():
        distribution = ep.dist.name if ep.dist else None
        if ep.name in disabled or distribution in disabled:
            continue
        version = ep.dist.version if ep.dist else None
        try:
            plugin = ep.load()
        except Exception as exc:  # any import failure must not take the core down
            infos.append(PluginInfo(ep.name, distribution, version, {}, _one_line(exc)))
            continue
        try:
            manager.register(plugin, name=ep.name)
        except pluggy.PluginValidationError as exc:
            infos.append(PluginInfo(ep.name, distribution, version, {}, str(exc).splitlines()[0]))
            continue
        infos.append(PluginInfo(ep.name, distribution, version, {}))
    for name, plugin in extra:
        manager.register(plugin, name=name)
        infos.append(PluginInfo(name, None, None, {}))
    try:
        manager.check_pending()
    except pluggy.PluginValidationError as exc:
        name = manager.get_name(exc.plugin) or repr(exc.plugin)
        raise PluginError(f"plugin {name!r} is invalid: {exc}".splitlines()[0]) from None
    return Plugins(manager, infos)


def _version(distribution: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None
