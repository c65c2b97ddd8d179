"""An S3 environment exists only where ``fdcore init`` marked it: init proves the store on the
emulator before it marks, every command and ``Environment.open`` refuse a folder it did not
mark, and each failure of init or doctor is one line."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from fdcore_s3.plugin import S3Backend
from fdcore_s3.testing import S3Emulator

from fdcore import Environment
from fdcore.cli.main import main
from fdcore.errors import EnvironmentNotFound
from fdcore.testing.servers import free_port

pytestmark = pytest.mark.processes

BUCKET = "fdcore-tests"  # the session's bucket (conftest.py)


def fdcore(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def options(s3: S3Emulator) -> list[str]:
    return [f"--option={key}={value}" for key, value in s3.options.items()]


@pytest.fixture
def typo_url(s3: S3Emulator, monkeypatch: pytest.MonkeyPatch) -> str:
    """A folder no init ran in; every command reaches the emulator through AWS_ENDPOINT_URL."""
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint_url)
    return s3.url(BUCKET, f"prdo-{uuid.uuid4().hex[:8]}")


def objects(s3: S3Emulator, url: str) -> list[str]:
    client = s3.client()
    try:
        folder = url.split("/", 3)[3] + "/"
        page = client.list_objects_v2(Bucket=BUCKET, Prefix=folder)
        return [item["Key"][len(folder) :] for item in page.get("Contents", ())]
    finally:
        client.close()


def test_a_typod_folder_is_not_found_by_commands_and_open(
    typo_url: str, s3: S3Emulator, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (
        ("queue", "--env", typo_url),
        ("submit", "--env", typo_url, "--entities", "sales"),
        ("agents", "--env", typo_url),
        ("show", "--env", typo_url, "r1"),
    ):
        code, out, err = fdcore(capsys, *argv)
        assert code == 2 and out == "", (argv, out, err)
        assert err.startswith(f"fdcore: error: environment not found: {typo_url}"), (argv, err)
        assert err.count("\n") == 1 and f"fdcore init {typo_url}" in err
    with pytest.raises(EnvironmentNotFound):
        Environment.open(typo_url, **s3.options)
    assert objects(s3, typo_url) == []  # the submission landed nowhere


def test_init_marks_the_folder_once_then_commands_work(
    s3: S3Emulator, capsys: pytest.CaptureFixture[str]
) -> None:
    url = s3.url(BUCKET, f"fresh-{uuid.uuid4().hex[:8]}")
    assert fdcore(capsys, "init", url, *options(s3)) == (0, f"{url}: created\n", "")
    again = fdcore(capsys, "init", "--env", url, *options(s3))
    assert again == (0, f"{url}: already an environment\n", "")
    assert objects(s3, url) == [".fdcore/environment.json"]  # the probe key was removed
    with Environment.open(url, **s3.options) as environment:
        request = environment.submit(["sales"], id="r1")
        assert [row.id for row in environment.queue().rows] == [request.id]
        assert list(environment.mailbox.storage.list("requests/")) == ["requests/r1.json"]


@pytest.mark.parametrize(
    ("url", "option", "named"),
    [
        ("s3://no-such-bucket-here/env", None, "bucket 'no-such-bucket-here' does not exist"),
        (None, "endpoint_url=http://127.0.0.1:{port}", "Could not connect to the endpoint URL"),
    ],
)
def test_init_that_cannot_use_the_store_is_one_line(
    s3: S3Emulator,
    capsys: pytest.CaptureFixture[str],
    url: str | None,
    option: str | None,
    named: str,
) -> None:
    url = url or s3.url(BUCKET, "never")
    argv = ["init", url, *options(s3)]
    if option:
        argv.append("--option=" + option.format(port=free_port()))
    code, out, err = fdcore(capsys, *argv)
    assert (code, out) == (2, ""), err
    assert err.startswith("fdcore: error: ") and err.count("\n") == 1 and named in err, err


def test_init_without_credentials_exits_2_with_one_line(
    s3: S3Emulator, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role to ask for
    url = s3.url(BUCKET, f"nocreds-{uuid.uuid4().hex[:8]}")
    code, out, err = fdcore(capsys, "init", url, *options(s3))
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert "no credentials" in err and "AWS_ACCESS_KEY_ID" in err
    assert objects(s3, url) == []


@pytest.mark.parametrize("where", ["dead endpoint", "missing bucket", "no environment"])
def test_doctor_ends_in_one_line_before_any_probe(
    environment_url: str, s3: S3Emulator, where: str
) -> None:
    """A store doctor cannot use ends it at once: no probe, no process, one line."""
    url, endpoint = environment_url, s3.endpoint_url
    if where == "dead endpoint":
        endpoint = f"http://127.0.0.1:{free_port()}"
    elif where == "missing bucket":
        url = "s3://no-such-bucket-here/env"
    else:
        url = s3.url(BUCKET, "never-initialised")
    result = subprocess.run(
        [sys.executable, "-m", "fdcore", "doctor", url, f"--option=endpoint_url={endpoint}"],
        capture_output=True,
        text=True,
        timeout=60,  # at the defaults a probe run takes minutes: this bounds "before any probe"
    )
    lines = (result.stdout + result.stderr).strip().splitlines()
    assert len(lines) == 1 and result.returncode in (1, 2), lines
    assert "PASS" not in lines[0] and "doctor-" not in lines[0]
    expected = {
        "dead endpoint": "Could not connect to the endpoint URL",
        "missing bucket": "bucket 'no-such-bucket-here' does not exist",
        "no environment": "environment not found",
    }
    assert expected[where] in lines[0], lines


# -- one way to name an environment with its options --------------------------------------------


@pytest.fixture
def named(s3: S3Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A named environment ``prod`` whose options reach the emulator (no AWS_ENDPOINT_URL)."""
    url = s3.url(BUCKET, f"named-{uuid.uuid4().hex[:8]}")
    environments = tmp_path / "environments.toml"
    environments.write_text(
        f'[prod]\nurl = "{url}"\n[prod.storage]\nendpoint_url = "{s3.endpoint_url}"\n'
        'region = "us-east-1"\naddressing_style = "path"\n'
    )
    monkeypatch.setenv("FDCORE_ENVIRONMENTS", str(environments))
    return url


def test_a_named_environment_reaches_every_command_and_open(
    named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert fdcore(capsys, "init", "--env", "prod") == (0, f"{named}: created\n", "")
    code, out, err = fdcore(capsys, "submit", "--env", "prod", "--entities", "sales", "--id", "r1")
    assert (code, out, err) == (0, "r1\n", "")
    code, out, err = fdcore(capsys, "queue", "--env", "prod", "--json")
    assert code == 0 and '"id": "r1"' in out, err
    code, out, err = fdcore(capsys, "show", "--env", "prod", "r1")
    assert code == 0 and "r1" in out, err
    with Environment.open("prod") as environment:
        assert environment.url == named
        assert [row.id for row in environment.queue().rows] == ["r1"]


def test_an_agent_toml_names_the_environment_and_its_options(
    s3: S3Emulator, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = s3.url(BUCKET, f"config-{uuid.uuid4().hex[:8]}")
    config = tmp_path / "agent.toml"
    config.write_text(
        f'[agent]\nname = "etl-01"\nenvironment = "{url}"\n'
        f'[storage]\nendpoint_url = "{s3.endpoint_url}"\nregion = "us-east-1"\n'
        '[runner]\nkind = "command"\ncommand = ["true"]\n'
    )
    assert fdcore(capsys, "init", "--config", str(config)) == (0, f"{url}: created\n", "")
    code, out, err = fdcore(capsys, "submit", "--config", str(config), "--entities", "sales")
    assert code == 0 and out.strip(), err
    request = out.strip()
    code, out, err = fdcore(capsys, "queue", "--config", str(config), "--json")
    assert code == 0 and f'"id": "{request}"' in out, err
    with Environment.open(config=config) as environment:
        assert environment.url == url
        assert [row.id for row in environment.queue().rows] == [request]


def test_sdk_log_lines_only_under_verbose(named: str, s3: S3Emulator) -> None:
    def queue(*flags: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "fdcore", *flags, "queue", "--env", "prod"],
            capture_output=True,
            text=True,
            timeout=60,
        )

    S3Backend().open(named, s3.options, create=True).close()
    quiet = queue()
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr
    verbose = queue("-v")
    assert verbose.returncode == 0 and "botocore" in verbose.stderr
