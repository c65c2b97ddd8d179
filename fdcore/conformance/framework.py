"""What every probe is made of: the context it runs in, what it observed, how it is registered.

A probe is a plain function ``probe(ctx) -> Observation``, registered by the name of the
property it checks. Its body returns a pass summary or raises :class:`Violation` with what
it observed; any other error is an observation too, never a crash of the suite or doctor.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TypeVar

import attrs

from fdcore.abc import (
    Blob,
    Storage,
)
from fdcore.plugins.manager import Plugins, load_plugins

#: A picklable zero-argument callable returning a new handle on one environment. Every call
#: opens the same environment, so workers in other processes see what the caller wrote.
StorageFactory = Callable[[], Storage]

E = TypeVar("E", bound=BaseException)


def _options(value: Mapping[str, str] | None) -> dict[str, str]:
    return dict(value or {})


@functools.cache
def _installed_plugins() -> Plugins:
    # Once per process: race workers open many stores, loading entry points each time is waste.
    return load_plugins()


@attrs.frozen
class UrlStorageFactory:
    """Open ``url`` through the installed plugins; picklable, so race workers can reopen it."""

    url: str
    options: dict[str, str] = attrs.field(default=None, converter=_options)
    backend: str | None = None
    create: bool = True  # False: an existing environment only (doctor: one check per open)

    def __call__(self) -> Storage:
        plugins = _installed_plugins()
        return plugins.open_storage(self.url, self.options, self.backend, create=self.create)


@attrs.frozen
class Observation:
    """What one probe saw: ``detail`` summarises a pass, or says what was observed on a fail."""

    name: str
    passed: bool
    detail: str

    def __str__(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'} {self.name}: {self.detail}"


def _token() -> str:
    return uuid.uuid4().hex[:12]


@attrs.frozen
class ProbeContext:
    """Where and how hard the probes work."""

    factory: StorageFactory
    prefix: str = ""  # every key a probe writes starts with it ("" or e.g. "doctor-<hex>/")
    multiprocess: bool = True  # race in processes (False: threads, for in-process stores)
    processes: int = 16  # racers per round
    create_rounds: int = 200
    replace_rounds: int = 100
    max_payload: int = 1 << 20
    listing_size: int = 10_000
    threads: int = 8  # handles writing or removing many keys at once (see for_each_key)
    # the most keys one request of the store's listing returns; None: the store's own
    # ``list_page_size`` attribute if it has one, else DEFAULT_LIST_PAGE
    list_page_size: int | None = None
    storm_workers: int = 4  # processes of the replace storm and of the delete race
    storm_writes: int = 25  # replaces each storm worker lands
    delete_rounds: int = 10  # rounds of the delete-if-match race
    # optional protocols the store is declared to offer (OPTIONAL_PROTOCOLS' names): one that
    # is missing fails optional-protocols instead of going untested
    offers: tuple[str, ...] = ()
    token: str = attrs.field(factory=_token)  # unique per run, for names outside the prefix

    def key(self, rest: str) -> str:
        return self.prefix + rest


Probe = Callable[[ProbeContext], Observation]


class Violation(Exception):
    """A probe observed the store break the property it checks."""


def expect(condition: bool, observed: str) -> None:
    if not condition:
        raise Violation(observed)


def expect_raises(error: type[E], call: Callable[[], object], what: str) -> E:
    try:
        call()
    except error as exc:
        return exc
    except Exception as exc:
        raise Violation(
            f"{what} raised {type(exc).__name__}: {exc}, expected {error.__name__}"
        ) from None
    raise Violation(f"{what} succeeded, expected {error.__name__}")


def show_blob(blob: Blob | None) -> str:
    if blob is None:
        return "nothing (absent)"
    data = blob.data if len(blob.data) <= 40 else blob.data[:40] + b"..."
    return f"{data!r} etag {blob.etag}"


#: Every probe by the name of the property it checks (its doctor line), e.g. "exact-prefix".
PROBES_BY_NAME: dict[str, Probe] = {}


def registered(name: str) -> Callable[[Callable[[ProbeContext], str]], Probe]:
    """Turn a body that returns a pass summary or raises Violation into a probe."""

    def wrap(body: Callable[[ProbeContext], str]) -> Probe:
        @functools.wraps(body)
        def probe(ctx: ProbeContext) -> Observation:
            try:
                detail = body(ctx)
            except Violation as exc:
                return Observation(name, False, f"observed {exc}")
            except Exception as exc:  # any other error is an observation too, not a crash
                return Observation(name, False, f"observed {type(exc).__name__}: {exc}")
            return Observation(name, True, detail)

        PROBES_BY_NAME[name] = probe
        return probe

    return wrap


@contextmanager
def opened(ctx: ProbeContext) -> Iterator[Storage]:
    storage = ctx.factory()
    try:
        yield storage
    finally:
        storage.close()
