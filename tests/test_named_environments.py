"""Naming an environment once: a name of the user's environments file, or an agent.toml, stands
for the URL and its storage options wherever an environment is opened; a bad file is one line."""

from __future__ import annotations

import re
import sys
import textwrap
from pathlib import Path

import pytest

from fdcore import Environment
from fdcore.cli.main import main
from fdcore.environment.named import Target, environments_file, resolve
from fdcore.errors import ConfigError, EnvironmentNotFound

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


@pytest.fixture
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("FDCORE_ENVIRONMENTS", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    (tmp_path / "config" / "fdcore").mkdir(parents=True)
    return tmp_path / "config" / "fdcore" / "environments.toml"


def test_a_name_of_the_xdg_file_stands_for_its_url_and_options(config_home: Path) -> None:
    config_home.write_text('[prod]\nurl = "s3://acme/prod"\n[prod.storage]\nregion = "eu-west-1"\n')
    assert environments_file() == config_home
    assert resolve("prod") == Target("s3://acme/prod", {"region": "eu-west-1"})
    assert resolve("./prod") == Target("./prod")  # a path is always a path
    assert resolve("staging") == Target("staging")  # a name the file lacks: a local folder


def test_the_variable_moves_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = tmp_path / "mine.toml"
    chosen.write_text(f'[dev]\nurl = "{tmp_path / "dev"}"\n')
    monkeypatch.setenv("FDCORE_ENVIRONMENTS", str(chosen))
    assert environments_file() == chosen
    assert fdcore_init("dev") == 0
    with Environment.open("dev") as environment:
        assert environment.url == str(tmp_path / "dev")


def fdcore_init(env: str) -> int:
    return main(["init", "--env", env])


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[prod\n", "not valid TOML"),
        ("prod = 3\n", "expected a table"),
        ("[prod]\nurl = 3\n", "url: missing"),
        ("[prod]\nurl = 's3://a/b'\nregoin = 'x'\n", "regoin: unknown key"),
        ("[prod]\nurl = 's3://a/b'\n[prod.storage]\nregion = 1\n", "[storage] region: expected"),
    ],
)
def test_a_bad_environments_file_is_one_line_naming_it(
    config_home: Path, text: str, named: str
) -> None:
    config_home.write_text(text)
    with pytest.raises(ConfigError) as caught:
        resolve("prod")
    message = str(caught.value)
    assert str(config_home) in message and named in message and "\n" not in message


def test_an_unmarked_name_or_path_is_not_found(
    config_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_home.write_text(f'[prod]\nurl = "{tmp_path / "prod"}"\n')
    assert main(["queue", "--env", "prod"]) == 2
    assert f"environment not found: {tmp_path / 'prod'}" in capsys.readouterr().err
    with pytest.raises(EnvironmentNotFound):
        Environment.open("prod")


def test_an_agent_toml_gives_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text(f'[agent]\nname = "a"\nenvironment = "{tmp_path / "env"}"\n')
    assert main(["init", "--config", str(config)]) == 0
    with Environment.open(config=config) as environment:
        assert environment.url == str(tmp_path / "env")
    with pytest.raises(ConfigError, match="give the environment once"):
        Environment.open(str(tmp_path / "env"), config=config)
    with pytest.raises(ConfigError, match="missing"):
        Environment.open()
    (tmp_path / "empty.toml").write_text("[agent]\n")
    with pytest.raises(ConfigError, match=r"\[agent\] environment: missing"):
        Environment.open(config=tmp_path / "empty.toml")


def test_env_and_config_together_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["queue", "--env", str(tmp_path), "--config", str(tmp_path / "agent.toml")])
    assert exited.value.code == 2
    assert "--config" in capsys.readouterr().err


def test_init_takes_the_url_or_env_and_refuses_two_that_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    assert main(["init", first]) == 0 and main(["init", "--env", first]) == 0
    assert capsys.readouterr().out == f"{first}: created\n{first}: already an environment\n"
    assert main(["init", first, "--env", second]) == 2
    assert "differs from URL" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()
    assert main(["init"]) == 2
    assert "--env: missing" in capsys.readouterr().err


def test_incidents_read_a_named_environment(
    config_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_home.write_text(f'[ops]\nurl = "{tmp_path / "ops"}"\n')
    assert main(["init", "--env", "ops"]) == 0
    capsys.readouterr()
    for argv in (["evaluate"], ["list"]):
        assert main(["incidents", *argv, "--env", "ops"]) == 0, capsys.readouterr().err
    assert main(["incidents", "list", "--env", "nowhere"]) == 2
    assert "environment not found" in capsys.readouterr().err


def _docs_environments_files() -> list[tuple[str, str]]:
    """Every example of the environments file in docs/ (a toml block opening with its name)."""
    found = []
    for page in sorted((Path(__file__).parents[1] / "docs").glob("*.md")):
        for block in re.findall(r"```toml\n(.*?)```", page.read_text(), re.S):
            text = textwrap.dedent(block)
            if text.startswith("# environments.toml"):
                found.append((page.name, text))
    return found


DOCS_FILES = _docs_environments_files()


@pytest.mark.parametrize(("page", "text"), DOCS_FILES, ids=[page for page, _ in DOCS_FILES])
def test_every_environments_file_of_the_docs_reads(
    page: str, text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "environments.toml").write_text(text)
    monkeypatch.setenv("FDCORE_ENVIRONMENTS", str(tmp_path / "environments.toml"))
    for name, table in tomllib.loads(text).items():
        assert resolve(name) == Target(table["url"], table.get("storage", {})), (page, name)


def test_the_docs_show_the_environments_file() -> None:
    assert {page for page, _ in DOCS_FILES} == {"s3.md", "onelake.md"}
