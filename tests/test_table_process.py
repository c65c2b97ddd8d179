"""A table process's variables: declared once, written by the runner, read back typed."""

from __future__ import annotations

import attrs
import pytest

from fdcore.abc import TableJob
from fdcore.contract.limits import MAX_FILE_BYTES
from fdcore.errors import ConfigError
from fdcore.settings.table_process import TableVariables, read_table_variables

JOB = TableJob(
    "r1",
    "sales",
    2,
    7,
    "etl-01",
    "s3://bucket/env",
    leases="ledger",
    max_file_bytes=8192,
    run_as="svc-etl",
    storage_backend="s3",
    storage_options={"endpoint_url": "http://127.0.0.1:9000", "region": "us-east-1"},
)


def test_what_the_runner_writes_a_table_process_reads_back() -> None:
    told = read_table_variables(JOB.environ())
    assert attrs.asdict(told) == {
        name: getattr(JOB, name) for name in attrs.fields_dict(TableVariables)
    }


def test_a_job_without_storage_options_sets_what_it_always_set() -> None:
    assert TableJob("r1", "sales", 1, 5, "etl-01", "file:///env").environ() == {
        "FDCORE_REQUEST": "r1",
        "FDCORE_TABLE": "sales",
        "FDCORE_ATTEMPT": "1",
        "FDCORE_FENCING_TOKEN": "5",
        "FDCORE_AGENT": "etl-01",
        "FDCORE_ENVIRONMENT": "file:///env",
        "FDCORE_LEASES": "mailbox",
        "FDCORE_MAX_FILE_BYTES": "1048576",
    }


def test_the_storage_options_travel_as_json() -> None:
    environ = JOB.environ()
    assert environ["FDCORE_STORAGE_BACKEND"] == "s3"
    assert environ["FDCORE_STORAGE_OPTIONS"] == (
        '{"endpoint_url": "http://127.0.0.1:9000", "region": "us-east-1"}'
    )


def test_each_variable_is_a_job_field_with_the_same_default() -> None:
    job = attrs.fields_dict(TableJob)
    for field in attrs.fields(TableVariables):
        assert field.name in job
        assert job[field.name].default == field.default, field.name


def test_a_process_of_an_older_runner_reads_the_defaults() -> None:
    environ = JOB.environ()
    for name in ("LEASES", "MAX_FILE_BYTES", "RUN_AS", "STORAGE_BACKEND", "STORAGE_OPTIONS"):
        del environ[f"FDCORE_{name}"]
    told = read_table_variables(environ)
    assert (told.leases, told.max_file_bytes, told.run_as) == ("mailbox", MAX_FILE_BYTES, None)
    assert (told.storage_backend, told.storage_options) == (None, {})


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("FDCORE_MAX_FILE_BYTES", "12", "must be 4096..67108864 bytes, got 12"),
        ("FDCORE_MAX_FILE_BYTES", "1e6", "expected a whole number, got '1e6'"),
        ("FDCORE_FENCING_TOKEN", "-1", "must be at least 0, got -1"),
        ("FDCORE_ATTEMPT", "0", "must be at least 1, got 0"),
        ("FDCORE_AGENT", "", "is empty"),
        ("FDCORE_STORAGE_OPTIONS", "{", "expected a JSON object, got '{'"),
        ("FDCORE_STORAGE_OPTIONS", '{"region": 1}', "expected a JSON object of texts"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(name: str, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        read_table_variables({**JOB.environ(), name: text})
    assert str(caught.value).startswith(f"environment variable {name}: {message}")
    assert "\n" not in str(caught.value)


def test_a_missing_variable_is_named() -> None:
    environ = JOB.environ()
    del environ["FDCORE_TABLE"]
    with pytest.raises(ConfigError, match=r"^environment variable FDCORE_TABLE: not set"):
        read_table_variables(environ)
