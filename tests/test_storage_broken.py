"""The storage suite has teeth: it fails every deliberately broken store of fdcore.testing.broken,
naming the promise broken. (plugins/localfs/tests/test_conformance.py runs the same around a
local folder, its races in real processes, as a vendor would around their backend.)
"""

from __future__ import annotations

import uuid

import attrs
import pytest

from fdcore.conformance.probes import PROBES_BY_NAME, ProbeContext, UrlStorageFactory
from fdcore.errors import StorageUnavailable
from fdcore.testing.broken import BROKEN_STORES, BrokenStorage, catch

#: What each failure must say: the promise's probe name and the observation that shows it.
OBSERVED = {
    "LikeListing": "list of prefix 'a' gave ['A/B.json', 'A/b/y', 'a%b/x'",
    "GlobListing": "list of prefix 'a*' gave ['a%b/x', 'a*', 'a*b', 'a-b'",
    "FolderListing": "list of prefix 'a' gave ['a/b.json', 'a/b.json.bak', 'a/b/y', 'a/bc/x',",
    "UnsortedListing": "same keys, other order or repeated",
    "FirstPageListing": "list gave 100 of 201 keys (pages of 100)",
    "StaleList": "another handle listed [], expected ['consistency/list/value.json']",
    "StaleListedEtag": "'versions/a.json' was listed with etag",
    "ListingTimeModified": "a second listing with no write between gave other times",
    "NaiveModified": "expected an aware UTC time",
    "FirstPageVersions": "list_versions gave 100 of 201 keys (pages of 100)",
    "OverwritingCreate": "second create succeeded, expected AlreadyExists",
    "CheckThenCreate": "winners (workers",
    "EtagBlindReplace": "replace with stale etag succeeded, expected PreconditionFailed",
    "CheckThenReplace": "were each replaced by more than one writer",
    "EtagBlindDelete": "delete with a replaced etag succeeded, expected PreconditionFailed",
    "SameEtagAfterReplace": "already used before",
    "TornReplace": "a partial value",
    "StaleRead": "another handle read nothing (absent), expected b'v1'",
    "UnboundedRead": "read_bounded(1048576) of a 1048577-byte value succeeded",
    "CappedValues": "65537-byte value read back as 65536 bytes",
    "CaseFoldingKeys": "create of 'case/key.json' beside 'case/Key.json' raised AlreadyExists",
    "NormalisingKeys": "create of 'nf/e\\u0301.json' beside 'nf/\\xe9.json' raised AlreadyExists",
    "LaxKeys": "read('') succeeded, expected InvalidKey",
}


def memory_context() -> ProbeContext:
    return ProbeContext(
        UrlStorageFactory(f"memory://broken-{uuid.uuid4().hex}"),
        multiprocess=False,
        processes=8,
        create_rounds=20,
        replace_rounds=20,
        listing_size=100,
    )


def test_every_broken_store_breaks_a_promise_the_suite_checks() -> None:
    assert {kind.__name__ for kind in BROKEN_STORES} == set(OBSERVED)
    for kind in BROKEN_STORES:
        assert kind.promise in PROBES_BY_NAME, kind


@pytest.mark.parametrize("kind", BROKEN_STORES, ids=lambda kind: kind.__name__)
def test_the_suite_fails_a_broken_store_naming_the_promise(kind: type[BrokenStorage]) -> None:
    observation = catch(memory_context(), kind)
    assert str(observation).startswith(f"FAIL {kind.promise}: observed "), observation
    assert OBSERVED[kind.__name__] in observation.detail
    # The same probe passes on the sound store: it is the broken promise that was caught.
    assert PROBES_BY_NAME[kind.promise](memory_context()).passed


def test_a_protocol_declared_but_missing_fails_optional_protocols() -> None:
    declared = attrs.evolve(memory_context(), offers=("ChangeCheck",))
    observation = PROBES_BY_NAME["optional-protocols"](declared)
    assert str(observation) == (
        "FAIL optional-protocols: observed a store declared to offer ['ChangeCheck'] does not "
        "(it has ['ListingChanges', 'VersionedListing'])"
    )
    misspelt = attrs.evolve(memory_context(), offers=("Bounded",))
    assert (
        "offers names ['Bounded'], not among"
        in PROBES_BY_NAME["optional-protocols"](misspelt).detail
    )


class UnreachableOnCreate(BrokenStorage):
    """Every create fails as if the connection dropped."""

    promise = "create-if-absent"

    def create(self, key: str, data: bytes) -> str:
        raise StorageUnavailable(key, "connection reset")


def test_a_race_names_the_error_a_racer_met() -> None:
    observation = catch(memory_context(), UnreachableOnCreate)
    assert not observation.passed
    assert "create raised StorageUnavailable" in observation.detail
