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
from fdcore.settings.agent_toml import OUR_SLOT_FUNCTIONS

ENTRY_POINT_GROUP = "fdcore"
# Named, not imported: the core's own plugins sit in layers above the plugin manager (as pytest
# names its default plugins): ``builtin``, the implementations in the core (memory store,
# runners...), and ``commands``, fdcore's own commands (``queue``, ``agent``...). Neither can be
# disabled.
BUILTIN_PLUGINS = {"builtin": "fdcore.builtin.plugin", "commands": "fdcore.cli.plugin"}
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
    {name: "fdcore-slots" for name in OUR_SLOT_FUNCTIONS},
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
    problems: list[str] = attrs.field(factory=list)  # names refused, each with the fix


class Plugins:
    """The loaded plugins, and the one place the core asks for an implementation."""

    def __init__(self, manager: pluggy.PluginManager, infos: list[PluginInfo]) -> None:
        self.manager = manager
        self.infos = infos
        self._impls: dict[str, dict[str, tuple[Any, PluginInfo]]] = {}
        # A name two plugins provide is nobody's: asking for it is this error, naming both.
        self._clashes: dict[str, dict[str, str]] = {}
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
                kept = [impl for impl in provided[kind.label] if self._add(kind, impl, info)]
                if kept:
                    info.provides[kind.label] = [impl.name for impl in kept]

    def _add(self, kind: Kind[Any], impl: Any, info: PluginInfo) -> bool:
        """Record ``info``'s implementation ``impl``; False if its name is already taken (by
        fdcore's own plugins: theirs stays; by another plugin: the name becomes a clash)."""
        table = self._impls.setdefault(kind.label, {})
        clashes = self._clashes.setdefault(kind.label, {})
        found = table.get(impl.name)
        if found is not None and found[1].name in BUILTIN_PLUGINS:
            info.problems.append(
                f"{kind.label} {impl.name!r} is fdcore's own ({_describe(found[1])}): rename it, "
                f"or disable the plugin with {DISABLE_VARIABLE}={_id(info)}"
            )
            return False
        if impl.name in clashes:  # a third plugin with the name
            info.problems.append(clashes[impl.name])
            return False
        if found is not None:
            other = found[1]
            problem = clashes[impl.name] = (
                f"{kind.label} {impl.name!r} is provided by two plugins: {_describe(other)} and "
                f"{_describe(info)}; disable one with {DISABLE_VARIABLE}"
            )
            del table[impl.name]
            names = other.provides.get(kind.label, [])
            other.provides[kind.label] = [n for n in names if n != impl.name]
            if not other.provides[kind.label]:
                del other.provides[kind.label]
            other.problems.append(problem)
            info.problems.append(problem)
            return False
        table[impl.name] = (impl, info)
        return True

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
        """Every usable implementation of ``kind`` by name (a clashing name is none of them)."""
        return {name: impl for name, (impl, _) in self._impls.get(kind.label, {}).items()}

    def clashes(self, kind: Kind[Any]) -> dict[str, str]:
        """The names of ``kind`` two plugins provide, each with the error that names both."""
        return dict(self._clashes.get(kind.label, {}))

    def provider(self, kind: Kind[Any], name: str) -> str:
        """The plugin (and its distribution) that provides ``kind`` ``name``, for messages."""
        return _describe(self._impls[kind.label][name][1])

    def get(self, kind: Kind[T], name: str) -> T:
        """The implementation of ``kind`` called ``name``, or a PluginError saying what to do."""
        found = self._impls.get(kind.label, {}).get(name)
        if found is not None:
            impl: T = found[0]
            return impl
        clash = self._clashes.get(kind.label, {}).get(name)
        if clash is not None:
            raise PluginError(clash)
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

    def check_storage(
        self,
        url: str,
        options: dict[str, str] | None = None,
        backend: str | None = None,
        *,
        setting: str | None = None,
    ) -> StorageBackend:
        """The backend that serves ``url``, once it accepted ``url`` and ``options`` without
        any I/O (its ``check_options``, if it has one): what opening checks first, and all
        ``fdcore config check`` checks of the storage."""
        chosen = self.storage_backend(url, backend, setting=setting)
        check = getattr(chosen, "check_options", None)
        if callable(check):
            check(url, dict(options or {}))
        return chosen

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
        chosen = self.check_storage(url, options, backend, setting=setting)
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


def _id(info: PluginInfo) -> str:
    """What ``FDCORE_DISABLE_PLUGINS`` takes to disable the plugin: its distribution, if any."""
    return info.distribution or info.name


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
    manager = pluggy.PluginManager(hookspecs.PROJECT)
    manager.add_hookspecs(hookspecs)
    infos: list[PluginInfo] = []
    for name, module in BUILTIN_PLUGINS.items():
        manager.register(importlib.import_module(module), name=name)
        infos.append(PluginInfo(name, "fdcore", _version("fdcore"), {}))
    disabled = _disabled_names()
    for ep in _entry_points() if use_entry_points else ():
        distribution = ep.dist.name if ep.dist else None
        if ep.name in disabled or distribution in disabled:
            continue
        info = PluginInfo(ep.name, distribution, ep.dist.version if ep.dist else None, {})
        try:
            plugin = ep.load()
        except Exception as exc:  # any import failure must not take the core down
            infos.append(attrs.evolve(info, error=_one_line(exc)))
            continue
        try:
            manager.register(plugin, name=ep.name)
        except (ValueError, pluggy.PluginValidationError) as exc:  # nor a registration failure
            error = _registration_error(manager, infos, ep.name, plugin, exc, given=False)
            info = attrs.evolve(info, error=error)
            if manager.get_plugin(ep.name) is plugin:  # pluggy left it half registered
                manager.unregister(name=ep.name)
        infos.append(info)
    for name, plugin in extra:
        try:
            manager.register(plugin, name=name)
        except ValueError as exc:  # given, so the caller's mistake: one line saying which
            error = _registration_error(manager, infos, name, plugin, exc, given=True)
            raise PluginError(f"load_plugins(extra=...): {error}") from None
        infos.append(PluginInfo(name, None, None, {}))
    _leave_out_unknown_hooks(manager, infos, [name for name, _ in extra])
    return Plugins(manager, infos)


def _registration_error(
    manager: pluggy.PluginManager,
    infos: list[PluginInfo],
    name: str,
    plugin: object,
    exc: Exception,
    *,
    given: bool,
) -> str:
    """Why ``plugin`` could not be registered as ``name``, as one line naming the plugin already
    there and the fix (``given``: passed to ``load_plugins(extra=...)``, else an entry point)."""
    if not isinstance(exc, ValueError):  # a hook whose arguments its hookspec does not have
        return _one_line(exc)
    if manager.has_plugin(name):
        there = _describe(next(info for info in infos if info.name == name))
        if given:
            fix = f"pass another name, or disable it with {DISABLE_VARIABLE}"
            return f"the name {name!r} is taken by plugin {there}: {fix}"
        return f"entry point name {name!r} is taken by plugin {there}: rename one of the two"
    # the module is registered already, under another name
    there = _describe(next(info for info in infos if info.name == manager.get_name(plugin)))
    if given:
        fix = f"leave it out, or disable the installed one with {DISABLE_VARIABLE}"
        return f"{name!r} is already loaded as plugin {there}: {fix}"
    return f"its module is already loaded as plugin {there}: remove one of the two entry points"


def _leave_out_unknown_hooks(
    manager: pluggy.PluginManager, infos: list[PluginInfo], given: list[str]
) -> None:
    """A plugin implementing a hook that does not exist (a misspelt ``fdcore_claim_policy``) is
    left out with that error, or, when passed to ``load_plugins(extra=...)``, refused."""
    hooks = [name for name in vars(hookspecs) if name.startswith("fdcore_")]
    while True:
        try:
            manager.check_pending()
            return
        except pluggy.PluginValidationError as exc:
            name = manager.get_name(exc.plugin) or repr(exc.plugin)
            unknown = [
                caller.name
                for caller in manager.get_hookcallers(exc.plugin) or []
                if not caller.has_spec()
            ]
            error = f"unknown hook {unknown[0]!r}" if unknown else _one_line(exc)
            close = difflib.get_close_matches(unknown[0], hooks, n=1) if unknown else []
            if close:
                error += f" (did you mean {close[0]!r}?)"
            if name in given:
                raise PluginError(f"plugin {name!r} is invalid: {error}") from None
            manager.unregister(exc.plugin)
            index = next(i for i, info in enumerate(infos) if info.name == name)
            infos[index] = attrs.evolve(infos[index], error=error)


def _version(distribution: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None
