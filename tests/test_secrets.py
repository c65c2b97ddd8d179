"""No secret a person gives is ever printed, logged or written into the mailbox (DESIGN.md,
invariant 17). A secret is planted in every key that can bear one (each ``*_env`` option, the
storage keys agent.toml refuses, the variables the options name), and every output of
``fdcore config check``, ``config show``, ``agent run`` (its start-up and its log), ``doctor``
and the mailbox's files is searched for it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fdcore.cli.main import ERROR, main

pytestmark = pytest.mark.processes

SECRET = "SeCrEt0123456789"
WEBHOOK = (
    "https://prod-01.westeurope.logic.azure.com/workflows/abc/triggers/manual/paths/invoke"
    f"?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={SECRET}"
)
CONNECTION = f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={SECRET}=="
SAS = f"sv=2024-11-04&ss=b&srt=co&sp=rwdlac&se=2030-01-01&sig={SECRET}%3D"
AZURITE = "http://127.0.0.1:10000/devstoreaccount1/fdenv/prod"
LOCAL = "file:///srv/fd/prod"
REFUSED = "is not an environment variable's name: put the secret in an environment variable"


def agent_toml(environment: str, rest: str) -> str:
    return (
        f'[agent]\nname = "a"\nenvironment = "{environment}"\n[runner]\ncommand = ["true"]\n{rest}'
    )


#: A value pasted where a variable's name belongs, in every ``*_env`` option there is.
PASTED = {
    "webhook_env": agent_toml(
        LOCAL, f'[notify.routes.ops]\nnotifier = "teams"\nwebhook_env = "{WEBHOOK}"\n'
    ),
    "secret_env": agent_toml(
        LOCAL,
        '[notify.routes.ops]\nnotifier = "teams"\nwebhook_env = "TEAMS_URL"\n'
        f'secret_env = "{SAS}"\n',
    ),
    "connection_string_env": agent_toml(
        AZURITE, f'[storage]\nconnection_string_env = "{CONNECTION}"\n'
    ),
    "account_key_env": agent_toml(AZURITE, f'[storage]\naccount_key_env = "{SECRET}=="\n'),
    "sas in connection_string_env": agent_toml(
        AZURITE, f'[storage]\nconnection_string_env = "SharedAccessSignature={SAS}"\n'
    ),
}
#: Credentials written straight into [storage], which a backend refuses (never read from there).
IN_STORAGE = {
    key: agent_toml("s3://bucket/prod", f'[storage]\n{key} = "{SECRET}"\n')
    for key in (
        "secret_access_key",
        "aws_secret_access_key",
        "SessionToken",
        "session_token",
        "aws_session_token",
    )
} | {
    key: agent_toml(AZURITE, f'[storage]\n{key} = "{SECRET}"\n')
    for key in ("account_key", "connection_string", "sas_token", "AccountKey")
}


@pytest.mark.parametrize("case", sorted(PASTED))
def test_a_secret_pasted_into_an_env_option_is_refused_unrepeated(
    case: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(PASTED[case])
    for command in (["config", "check"], ["config", "show"], ["agent", "run", "--config"]):
        assert main([*command, str(path)]) == ERROR, command
        out, err = capfd.readouterr()
        assert SECRET not in out + err
        [line] = err.splitlines()
        assert line.startswith(f"fdcore: error: {path}: ") and REFUSED in line, line


@pytest.mark.parametrize("key", sorted(IN_STORAGE))
def test_a_credential_in_storage_is_refused_by_check_as_by_start_up_unrepeated(
    key: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(IN_STORAGE[key])
    lines = []
    for command in (["config", "check"], ["agent", "run", "--config"]):
        assert main([*command, str(path)]) == ERROR, command
        out, err = capfd.readouterr()
        assert SECRET not in out + err
        [line] = err.splitlines()
        assert line.startswith(f"fdcore: error: {path}: [storage] {key}: "), line
        lines.append(line)
    assert lines[0] == lines[1]  # the one check, said the same way
    assert main(["config", "show", str(path)]) == 0
    out, err = capfd.readouterr()
    assert SECRET not in out + err and f'{key} = "<hidden>"' in out


def test_doctor_never_repeats_a_pasted_secret(capfd: pytest.CaptureFixture[str]) -> None:
    for url, option in [
        (AZURITE, f"connection_string_env={CONNECTION}"),
        (AZURITE, f"account_key_env={SECRET}=="),
        (f"{AZURITE}?{SAS}", "account_key_env=KEY"),
        (LOCAL, f"secret_access_key={SECRET}"),
    ]:
        assert main(["doctor", url, "--option", option]) == ERROR
        out, err = capfd.readouterr()
        assert SECRET not in out + err and err.count("\n") == 1, err


def test_an_agent_given_secrets_in_variables_never_shows_them(tmp_path: Path) -> None:
    """A real agent whose route and whose table's process get secrets through variables: its
    start-up, its log, its check and show, and the mailbox it wrote keep them all."""
    environment = (tmp_path / "env").as_uri()
    config = tmp_path / "agent.toml"
    config.write_text(
        f'[agent]\nname = "a"\nenvironment = "{environment}"\n'
        'poll_seconds = 0.2\n[runner]\ncommand = ["true"]\n'
        '[notify.routes.ops]\nnotifier = "teams"\nwebhook_env = "TEAMS_URL"\n'
    )
    env = {**os.environ, "TEAMS_URL": WEBHOOK, "AZURE_STORAGE_CONNECTION_STRING": CONNECTION}
    outputs = []
    for command in (["config", "check"], ["config", "show"], ["config", "show", "--json"]):
        done = subprocess.run(
            [sys.executable, "-m", "fdcore.cli", *command, str(config)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout + done.stderr)
    assert main(["init", environment]) == 0
    log = tmp_path / "agent.log"
    with log.open("w") as sink:
        agent = subprocess.Popen(
            [sys.executable, "-m", "fdcore.cli", "-v", "agent", "run", "--config", str(config)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        submit = ["submit", "--env", environment, "--entities", "sales", "--wait"]
        submitted = subprocess.run(
            [sys.executable, "-m", "fdcore.cli", *submit, "--timeout", "2m"],
            capture_output=True,
            text=True,
            env=env,
            timeout=180,
        )
        assert submitted.returncode == 0, submitted.stderr + log.read_text()
        outputs.append(submitted.stdout + submitted.stderr)
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(60)
    outputs.append(log.read_text())
    assert "running on" in outputs[-1]  # its start-up was logged
    for output in outputs:
        assert SECRET not in output
    for path in (tmp_path / "env").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
