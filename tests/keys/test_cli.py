"""``toolwire keys``, run as a person runs it, on a SQLite file: what it prints, where it
finds the store, and how it fails."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from .gateways import keys_cli

KEY = re.compile(r"twk_[a-z0-9]{8}_[A-Za-z0-9]{40}")


@pytest.fixture
def store(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state' / 'toolwire.sqlite3'}"


def test_create_prints_the_key_once_alone_on_the_last_line(store: str, tmp_path: Path) -> None:
    made = keys_cli(
        "create", "alice", "--models", "cheap, fast", "--rpm", "60", "--tpm", "10000", "--max-concurrent", "2",
        "--budget-tokens", "1000000", "--expires", "30d", "--store", store,
    )
    assert made.returncode == 0, made.stderr
    *told, last = made.stdout.splitlines()
    assert KEY.fullmatch(last)
    assert last not in "\n".join(told) and last[13:] not in made.stdout.replace(last, "")
    assert f"Created the key 'alice' ({last[:12]})" in told[0]
    assert "models cheap, fast; 60 requests/min; 10000 tokens/min; 2 at once; budget 1000000 tokens; expires" in told[0]
    database = tmp_path / "state" / "toolwire.sqlite3"
    assert database.stat().st_mode & 0o777 == 0o600
    stored = b"".join(path.read_bytes() for path in database.parent.iterdir())
    assert last.encode() not in stored and last[13:].encode() not in stored


def test_list_revoke_and_usage(store: str) -> None:
    first = keys_cli("create", "alice", "--store", store).stdout.splitlines()[-1]
    keys_cli("create", "bob", "--models", "m", "--store", store)
    listed = keys_cli("list", "--store", store)
    assert listed.returncode == 0
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["NAME", "PREFIX", "STATUS", "CREATED", "EXPIRES", "RULES"]
    assert [row.split()[:3] for row in rows] == [["alice", first[:12], "active"], ["bob", rows[1].split()[1], "active"]]
    assert first not in listed.stdout
    revoked = keys_cli("revoke", "alice", "--store", store)
    assert (revoked.returncode, revoked.stdout.strip()) == (0, f"Revoked the key 'alice' ({first[:12]}).")
    again = keys_cli("revoke", "alice", "--store", store)
    assert (again.returncode, again.stderr.strip()) == (1, "error: No active key is named 'alice'.")
    reissued = keys_cli("create", "alice", "--store", store)
    assert reissued.returncode == 0
    described = {(key["name"], key["status"]) for key in orjson.loads(keys_cli("list", "--json", "--store", store).stdout)}
    assert described == {("alice", "revoked"), ("alice", "active"), ("bob", "active")}
    assert orjson.loads(keys_cli("usage", "--json", "--store", store).stdout) == []
    assert keys_cli("usage", "--store", store).stdout.strip() == "No usage yet."
    missing = keys_cli("usage", "carol", "--store", store)
    assert (missing.returncode, missing.stderr.strip()) == (1, "error: No key is named 'carol'.")


def test_a_name_in_use_is_refused(store: str) -> None:
    assert keys_cli("create", "alice", "--store", store).returncode == 0
    taken = keys_cli("create", "alice", "--store", store)
    assert taken.returncode == 1 and taken.stdout == ""
    assert "A key named 'alice' is already active" in taken.stderr


def test_the_store_comes_from_the_config_file_as_for_serve(tmp_path: Path) -> None:
    database = tmp_path / "from-config.sqlite3"
    config = tmp_path / "toolwire.toml"
    config.write_text(f'[server]\nstore = "sqlite:///{database}"\n')
    assert keys_cli("create", "alice", "--config", str(config)).returncode == 0
    assert "alice" in keys_cli("list", "--store", f"sqlite:///{database}").stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["create", "bad name"], "NAME: 'bad name' is not a key name"),
        (["create", "alice", "--rpm", "0"], "--rpm: Input should be greater than or equal to 1"),
        (["create", "alice", "--expires", "soon"], "--expires: 'soon' is not a duration"),
        (["create", "alice", "--models", " , "], "--models: models must name at least one model"),
        (["list", "--store", "memory://"], "--store: a memory:// store lives inside one gateway process"),
        (["list", "--store", "none"], "the gateway keeps no store (store = 'none')"),
        (["list", "--store", "ftp://x"], "--store: unknown store 'ftp'"),
    ],
)
def test_bad_usage_says_what_is_wrong(args: list[str], message: str, store: str) -> None:
    ran = keys_cli(*args, *([] if "--store" in args else ["--store", store]))
    assert ran.returncode == 2, ran.stdout
    assert message in ran.stderr and "Traceback" not in ran.stderr
