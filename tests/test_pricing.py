"""Store prices: the built-in tables, a file that replaces some figures, and its errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fdcore.errors import ConfigError
from fdcore.pricing import PRICES, cost, load_prices


def test_an_idle_agent_of_three_lists_a_poll_costs_what_the_docs_say_on_s3() -> None:
    # 3 lists every 5 s for 30 days: the figure docs/operations.md starts from.
    month = {"list": 3 * 30 * 24 * 3600 / 5}
    assert cost(month, PRICES["s3"]) == pytest.approx(7.776)


def test_a_file_replaces_the_figures_it_names(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text("[s3]\nlist = 0.00001\n[onelake]\ncu_hour = 0.36\n")
    prices = load_prices(path)
    assert prices["s3"]["list"] == 0.00001
    assert prices["s3"]["read"] == PRICES["s3"]["read"]
    assert prices["onelake"]["read"] == pytest.approx(2 * PRICES["onelake"]["read"])


@pytest.mark.parametrize(
    ("text", "wrong"),
    [
        ("[gcs]\nlist = 1\n", "[gcs]: not a store"),
        ("[s3]\nscan = 1\n", "[s3] scan: not an operation"),
        ("[s3]\nlist = -1\n", "[s3] list: -1"),
        ("[s3]\nlist = 'cheap'\n", "[s3] list: 'cheap'"),
        ("[s3\n", "not valid TOML"),
        ("[s3]\nlist = 1 \udcff".encode("utf-8", "surrogateescape"), "not UTF-8 text"),
        ("# prices\n".encode("utf-16"), "not UTF-8 text"),
        ("x = " + "[" * 100_000 + "]" * 100_000 + "\n", "nested deeper than 32 levels"),
        ("x = " + "{a = " * 1_000 + "1" + "}" * 1_000 + "\n", "nested deeper than 32 levels"),
    ],
)
def test_a_bad_price_file_is_one_line_naming_the_file_and_value(
    tmp_path: Path, text: str | bytes, wrong: str
) -> None:
    path = tmp_path / "prices.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_prices(path)
    assert str(path) in str(caught.value) and wrong in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_docs_example_price_file_is_read(tmp_path: Path) -> None:
    page = (Path(__file__).parents[1] / "docs" / "operations.md").read_text()
    blocks = [b for b in re.findall(r"```toml\n(.*?)```", page, re.S) if b.startswith("# prices")]
    assert len(blocks) == 1
    path = tmp_path / "prices.toml"
    path.write_text(blocks[0])
    prices = load_prices(path)
    assert prices["s3"]["list"] == 0.0000055
    assert prices["onelake"]["read"] == pytest.approx(PRICES["onelake"]["read"] * 0.20 / 0.18)
