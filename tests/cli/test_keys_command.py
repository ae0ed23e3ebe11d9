"""``toolwire keys`` in this process, on a SQLite file: the tables and lines it prints,
where it finds the store, and how it refuses.

tests/keys/test_cli.py runs the same commands as a separate process, as a person does;
here every column, rule and message is read.
"""

from __future__ import annotations

import asyncio
import datetime
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner, Result

from toolwire.cli import app
from toolwire.keys import KeyGate, TokenUsage, open_key_store

WHEN = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ")


def keys(*args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(app, ["keys", *args], env=env)


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'toolwire.sqlite3'}"


def moment(text: str) -> float:
    return datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%SZ").replace(tzinfo=datetime.UTC).timestamp()


def table(stdout: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of an aligned table: each column starts where its header does."""
    header, *rows = stdout.splitlines()
    columns = list(re.finditer(r"\S+(?: \S+)*", header))
    starts = [column.start() for column in columns]
    cells = []
    for row in rows:
        assert row == row.rstrip(), "no trailing spaces"
        bounds = [*starts[1:], None]
        cells.append([row[start:end].strip() for start, end in zip(starts, bounds, strict=True)])
        for start in starts[1:]:
            assert row[start - 2 : start] == "  " and row[start] != " ", (row, start)
    return [column[0] for column in columns], cells


def test_create_describes_every_rule_and_prints_the_key_last(store: str) -> None:
    made = keys(
        "create", "alice", "--models", "cheap,fast", "--rpm", "60", "--tpm", "10000", "--max-concurrent", "2",
        "--budget-tokens", "1000000", "--expires", "30d", "--store", store,
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    described, notice, key = made.stdout.splitlines()
    match = re.fullmatch(
        r"Created the key 'alice' \((twk_[a-z0-9]{8})\): models cheap, fast; 60 requests/min; 10000 tokens/min; "
        r"2 at once; budget 1000000 tokens; expires (.+)\.",
        described,
    )
    assert match is not None, described
    assert key.startswith(match[1] + "_")
    assert notice == "This is the only time the key is shown; give it to its holder now:"
    [listed] = orjson.loads(keys("list", "--json", "--store", store).stdout)
    assert WHEN.fullmatch(match[2]) and moment(match[2]) == int(listed["expires_at"])
    assert listed["expires_at"] - listed["created_at"] == 30 * 24 * 3600


def test_create_with_no_rules(store: str) -> None:
    made = keys("create", "bob", "--store", store)
    assert made.exit_code == 0, made.output
    assert re.fullmatch(r"Created the key 'bob' \(twk_[a-z0-9]{8}\): every model\.", made.stdout.splitlines()[0])


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--rpm", "0"], "error: --rpm: Input should be greater than or equal to 1\n"),
        (["--max-concurrent", "0"], "error: --max-concurrent: Input should be greater than or equal to 1\n"),
        (["--models", "a,,b"], "error: --models: models must name at least one model, and no empty one\n"),
    ],
)
def test_create_refuses_flags_naming_them(store: str, flags: list[str], message: str) -> None:
    made = keys("create", "alice", *flags, "--store", store)
    assert (made.exit_code, made.stderr) == (2, message)


def test_create_refuses_a_bad_name(store: str) -> None:
    made = keys("create", "-x-", "--store", store)  # typer reads it as an option
    assert made.exit_code == 2
    made = keys("create", "a b", "--store", store)
    assert made.exit_code == 2
    assert made.stderr.startswith("error: NAME: 'a b' is not a key name: use 1 to 64 letters")


def test_a_name_in_use_is_refused_by_the_store(store: str) -> None:
    keys("create", "alice", "--store", store)
    again = keys("create", "alice", "--store", store)
    assert again.exit_code == 1
    assert again.stderr.startswith("error: ") and "alice" in again.stderr
    assert again.stdout == ""


@pytest.fixture
def new_york(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A machine whose local time is not UTC."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("new_york")
def test_list_is_an_aligned_table(store: str) -> None:
    assert keys("list", "--store", store).stdout == "No keys yet.\n"
    alice = keys("create", "alice", "--store", store).stdout.splitlines()[-1]
    keys("create", "build-bot-with-a-long-name", "--models", "m1", "--rpm", "5", "--expires", "1w", "--store", store)
    listed = keys("list", "--store", store)
    assert listed.exit_code == 0, listed.output
    header, rows = table(listed.stdout)
    assert header == ["NAME", "PREFIX", "STATUS", "CREATED", "EXPIRES", "RULES"]
    assert [row[:3] for row in rows] == [["alice", alice[:12], "active"], ["build-bot-with-a-long-name", rows[1][1], "active"]]
    described = orjson.loads(keys("list", "--json", "--store", store).stdout)
    assert [moment(row[3]) for row in rows] == [int(key["created_at"]) for key in described]  # in UTC
    assert rows[0][4:] == ["-", "every model"]
    assert moment(rows[1][4]) - moment(rows[1][3]) == pytest.approx(7 * 24 * 3600, abs=1)
    assert rows[1][5] == "models m1; 5 requests/min"  # the expiry has its own column


def test_list_json_is_what_the_admin_api_gives(store: str) -> None:
    keys("create", "alice", "--tpm", "7", "--store", store)
    listed = orjson.loads(keys("list", "--json", "--store", store).stdout)
    assert [(key["name"], key["status"], key["tpm"], key["models"]) for key in listed] == [("alice", "active", 7, None)]
    assert "digest" not in listed[0] and "salt" not in listed[0]


def test_revoke(store: str) -> None:
    key = keys("create", "alice", "--store", store).stdout.splitlines()[-1]
    revoked = keys("revoke", "alice", "--store", store)
    assert (revoked.exit_code, revoked.stdout) == (0, f"Revoked the key 'alice' ({key[:12]}).\n")
    again = keys("revoke", "alice", "--store", store)
    assert (again.exit_code, again.stderr) == (1, "error: No active key is named 'alice'.\n")


def use(store: str, key: str, model: str, usage: TokenUsage) -> None:
    """A request of ``key`` on ``model``, charged as a gateway charges it."""

    async def run() -> None:
        gate = KeyGate(open_key_store(store))
        try:
            principal = await gate.authenticate(b"Bearer " + key.encode())
            await gate.record(await gate.admit(principal, model), usage)
        finally:
            await gate.aclose()

    asyncio.run(run())


def test_usage_per_key_and_model(store: str) -> None:
    assert keys("usage", "--store", store).stdout == "No usage yet.\n"
    alice = keys("create", "alice", "--store", store).stdout.splitlines()[-1]
    use(store, alice, "m1", TokenUsage(input_tokens=100, output_tokens=20, cached_tokens=30))
    use(store, alice, "m1", TokenUsage(input_tokens=1, output_tokens=2))
    report = keys("usage", "--store", store)
    assert report.exit_code == 0, report.output
    header, rows = table(report.stdout)
    assert header == ["NAME", "PREFIX", "MODEL", "REQUESTS", "INPUT", "OUTPUT", "CACHED", "LAST USED"]
    [row] = rows
    assert row[:7] == ["alice", alice[:12], "m1", "2", "101", "22", "30"]
    assert WHEN.fullmatch(row[7])
    as_json: list[dict[str, Any]] = orjson.loads(keys("usage", "alice", "--json", "--store", store).stdout)
    assert [(r["name"], r["model"], r["requests"], r["input_tokens"]) for r in as_json] == [("alice", "m1", 2, 101)]
    missing = keys("usage", "carol", "--store", store)
    assert (missing.exit_code, missing.stderr) == (1, "error: No key is named 'carol'.\n")


def test_the_store_comes_from_the_flag_then_the_config_file_then_the_default(tmp_path: Path, store: str) -> None:
    config = tmp_path / "toolwire.toml"
    config.write_text(f'[server]\nstore = "{store}"\n')
    keys("create", "from-flag", "--store", store)
    names = [key["name"] for key in orjson.loads(keys("list", "--json", "--config", str(config)).stdout)]
    assert names == ["from-flag"]
    state = tmp_path / "state"
    made = keys("create", "from-default", env={"XDG_STATE_HOME": str(state)})
    assert made.exit_code == 0, made.output
    assert (state / "toolwire" / "responses.sqlite3").exists()
    other = tmp_path / "other.sqlite3"
    both = keys("list", "--json", "--store", f"sqlite:///{other}", "--config", str(config))
    assert orjson.loads(both.stdout) == []  # --store wins over the file


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--store", "none"], "error: the gateway keeps no store (store = 'none'): keys need sqlite:// or redis://\n"),
        (["--store", "memory://"], "error: --store: a memory:// store lives inside one gateway process"),
        (["--store", "bogus://x"], "error: --store: unknown store 'bogus'"),
    ],
)
def test_stores_that_cannot_hold_keys(args: list[str], message: str) -> None:
    listed = keys("list", *args)
    assert listed.exit_code == 2
    assert listed.stderr.startswith(message)


def test_a_config_file_that_cannot_be_read(tmp_path: Path) -> None:
    listed = keys("list", "--config", str(tmp_path / "missing.toml"))
    assert listed.exit_code == 2
    assert listed.stderr == f"error: {tmp_path / 'missing.toml'}: cannot read the configuration file: No such file or directory\n"


def test_an_unreachable_store_fails_with_1() -> None:
    listed = keys("list", "--store", "redis://127.0.0.1:1/0")
    assert listed.exit_code == 1
    assert listed.stderr.startswith("error: ") and listed.stdout == ""
