"""The storage conformance probes, in the order doctor runs them.

A probe is a plain function ``probe(ctx) -> Observation``. The pytest suite
(:mod:`fdcore.testing.storage_suite`) asserts each observation passed; ``fdcore doctor`` runs the
same functions against a live environment and prints them. Both share this one code path, so
what the suite proves on a vendor's laptop is what doctor proves on a tenant.

The probes live by family: :mod:`.basics` (one key at a time), :mod:`.races` (many writers at
once), :mod:`.after_write` (what a reader sees while another process writes) and
:mod:`.listing` (prefixes, pages, sizes, names, versions). :mod:`.framework` holds what a probe
is made of, :mod:`.crew` the multi-process race harness, :mod:`.payloads` the self-checking
values. Every key a probe writes lies under ``ctx.prefix``.
"""

from __future__ import annotations

from fdcore.conformance.after_write import (
    probe_list_after_write,
    probe_no_partial_reads,
    probe_read_after_write,
)
from fdcore.conformance.basics import (
    probe_absent_key,
    probe_create_existing_refused,
    probe_create_read_delete,
    probe_replace_etag,
    probe_stale_etag_refused,
)
from fdcore.conformance.framework import (
    PROBES_BY_NAME,
    Observation,
    Probe,
    ProbeContext,
    StorageFactory,
    UrlStorageFactory,
)
from fdcore.conformance.listing import (
    OPTIONAL_PROTOCOLS,
    for_each_key,
    probe_distinct_keys,
    probe_exact_prefix,
    probe_invalid_keys,
    probe_large_payload,
    probe_list_by_prefix,
    probe_list_paging,
    probe_listing_changes,
    probe_optional_protocols,
    probe_size_bound,
    probe_unusual_keys,
    probe_versioned_listing,
)
from fdcore.conformance.payloads import check_payload, make_payload
from fdcore.conformance.races import (
    probe_create_if_absent,
    probe_delete_if_match,
    probe_no_lost_updates,
    probe_replace_if_match,
)

__all__ = [
    "OPTIONAL_PROTOCOLS",
    "PROBES",
    "PROBES_BY_NAME",
    "Observation",
    "Probe",
    "ProbeContext",
    "StorageFactory",
    "UrlStorageFactory",
    "check_payload",
    "for_each_key",
    "make_payload",
    "probe_absent_key",
    "probe_create_existing_refused",
    "probe_create_if_absent",
    "probe_create_read_delete",
    "probe_delete_if_match",
    "probe_distinct_keys",
    "probe_exact_prefix",
    "probe_invalid_keys",
    "probe_large_payload",
    "probe_list_after_write",
    "probe_list_by_prefix",
    "probe_list_paging",
    "probe_listing_changes",
    "probe_no_lost_updates",
    "probe_no_partial_reads",
    "probe_optional_protocols",
    "probe_read_after_write",
    "probe_replace_etag",
    "probe_replace_if_match",
    "probe_size_bound",
    "probe_stale_etag_refused",
    "probe_unusual_keys",
    "probe_versioned_listing",
]

#: Every probe, in the order doctor runs them (cheap first, so a broken store fails fast).
PROBES: tuple[Probe, ...] = (
    probe_create_read_delete,
    probe_replace_etag,
    probe_stale_etag_refused,
    probe_absent_key,
    probe_create_existing_refused,
    probe_invalid_keys,
    probe_unusual_keys,
    probe_distinct_keys,
    probe_exact_prefix,
    probe_large_payload,
    probe_size_bound,
    probe_read_after_write,
    probe_list_after_write,
    probe_list_by_prefix,
    probe_list_paging,
    probe_create_if_absent,
    probe_replace_if_match,
    probe_delete_if_match,
    probe_no_lost_updates,
    probe_no_partial_reads,
    probe_optional_protocols,
    probe_versioned_listing,
    probe_listing_changes,
)
