"""``open_store``: which store each URL names, and which URLs and limits are refused."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from toolwire.keys import open_key_store
from toolwire.store import (
    DEFAULT_STORE_URL,
    MemoryResponseStore,
    ResponseStore,
    SQLiteResponseStore,
    default_sqlite_path,
    open_store,
    redact_url,
)
from toolwire.store._redis import RedisResponseStore


@pytest.fixture(autouse=True)
def _state_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


async def opened(url: str) -> ResponseStore:
    store = open_store(url, ttl_seconds=60, max_entries=10)
    await store.aclose()
    return store


async def test_the_default_is_sqlite_under_the_state_directory(tmp_path: Path) -> None:
    store = await opened(DEFAULT_STORE_URL)
    assert isinstance(store, SQLiteResponseStore)
    assert store.path == tmp_path / "state" / "toolwire" / "responses.sqlite3"
    assert not store.path.parent.exists()  # created on first use, not on open


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite://", "{state}/toolwire/responses.sqlite3"),
        ("sqlite:///var/lib/toolwire/r.db", "/var/lib/toolwire/r.db"),
        ("SQLITE:///var/lib/toolwire/r.db", "/var/lib/toolwire/r.db"),
        ("sqlite:///srv/with%20space.db", "/srv/with space.db"),
        ("sqlite://~/r.db", "{home}/r.db"),
        ("sqlite:relative/r.db", "relative/r.db"),
    ],
)
async def test_sqlite_urls(url: str, expected: str, tmp_path: Path) -> None:
    store = await opened(url)
    assert isinstance(store, SQLiteResponseStore)
    assert str(store.path) == expected.format(state=tmp_path / "state", home=tmp_path / "home")


def test_a_relative_state_home_is_ignored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")
    assert default_sqlite_path() == tmp_path / "home" / ".local" / "state" / "toolwire" / "responses.sqlite3"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert default_sqlite_path() == tmp_path / "home" / ".local" / "state" / "toolwire" / "responses.sqlite3"


@pytest.mark.parametrize("url", ["memory://", "memory:", "MEMORY://"])
async def test_memory_urls(url: str) -> None:
    assert isinstance(await opened(url), MemoryResponseStore)


@pytest.mark.parametrize(
    "url", ["redis://localhost:6379/0", "redis://:pw@cache.internal:6380/3", "rediss://user:pw@cache:6379/0"]
)
async def test_redis_urls(url: str) -> None:
    store = await opened(url)
    assert isinstance(store, RedisResponseStore)
    assert "pw" not in repr(store)


@pytest.mark.parametrize(
    ("url", "complaint"),
    [
        ("responses.db", "not a store URL"),
        ("postgres://db/responses", "unknown store"),
        ("memory://somewhere", "no host or path"),
        ("sqlite://host/path.db", "sqlite:///absolute/path"),
        ("sqlite:///r.db?mode=ro", "no query"),
        ("redis://", "needs a host"),
    ],
)
def test_urls_that_name_no_store_are_refused(url: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        open_store(url)


@pytest.mark.parametrize("open_one", [open_store, open_key_store])
def test_a_store_of_an_unknown_kind_is_refused_without_repeating_its_url(open_one: Callable[[str], object]) -> None:
    """Its URL may hold a password (valkey://:password@cache:6379/0), and the refusal is printed."""
    with pytest.raises(ValueError) as refused:
        open_one("valkey://:s3cret-pw@cache:6379/0")
    assert str(refused.value) == "unknown store 'valkey': use sqlite://[/path], memory:// or redis://host:port/db"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("memory://:s3cret-pw@somewhere", "memory://:***@somewhere: a memory store takes no host or path; use memory://"),
        ("sqlite://me:s3cret-pw@dbhost/responses", "sqlite://me:***@dbhost/responses: write a sqlite file path as "
         "sqlite:///absolute/path or sqlite://~/path"),
        ("sqlite://me:s3cret-pw@dbhost/r.db?mode=ro", "sqlite://me:***@dbhost/r.db: a sqlite store URL takes no query or fragment"),
    ],
)  # fmt: skip
def test_a_store_url_refused_is_shown_without_its_password(url: str, words: str) -> None:
    """As a database URL of another kind would be written (postgresql://user:password@host/db)."""
    for open_one in (open_store, open_key_store) if url.startswith("sqlite:") else (open_store,):
        with pytest.raises(ValueError) as refused:
            open_one(url)
        assert str(refused.value) == words


@pytest.mark.parametrize(
    ("ttl_seconds", "max_entries", "max_bytes", "complaint"),
    [
        (0, 10, None, "time to live must be positive"),
        (-1, 10, None, "time to live must be positive"),
        (60, 0, None, "number of entries must be at least 1, not 0"),
        (60, 10, 0, "maximum bytes must be at least 1, not 0"),
        (None, None, None, "needs a time to live, a maximum number of entries or of bytes"),
    ],
)
def test_limits_that_make_no_sense_are_refused(
    ttl_seconds: float | None, max_entries: int | None, max_bytes: int | None, complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        open_store("memory://", ttl_seconds=ttl_seconds, max_entries=max_entries, max_bytes=max_bytes)


@pytest.mark.parametrize(("ttl_seconds", "max_entries", "max_bytes"), [(60, None, None), (None, 10, None), (None, None, 1)])
def test_any_one_limit_bounds_a_store(ttl_seconds: float | None, max_entries: int | None, max_bytes: int | None) -> None:
    store = open_store("memory://", ttl_seconds=ttl_seconds, max_entries=max_entries, max_bytes=max_bytes)
    assert isinstance(store, MemoryResponseStore)
    assert (store.ttl_seconds, store.max_entries, store.max_bytes) == (ttl_seconds, max_entries, max_bytes)


def test_the_default_limits_are_thirty_days_ten_thousand_responses_and_a_gibibyte() -> None:
    store = open_store("memory://")
    assert isinstance(store, MemoryResponseStore)
    assert (store.ttl_seconds, store.max_entries, store.max_bytes) == (30 * 24 * 3600, 10_000, 1 << 30)


def test_the_smallest_limits_are_allowed() -> None:
    assert isinstance(open_store("memory://", ttl_seconds=0.001, max_entries=1, max_bytes=1), MemoryResponseStore)


def test_lifting_every_limit_is_refused_saying_what_is_needed() -> None:
    with pytest.raises(ValueError) as caught:
        open_store("memory://", ttl_seconds=None, max_entries=None, max_bytes=None)
    assert str(caught.value) == "a response store needs a time to live, a maximum number of entries or of bytes"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:secret@/0", "redis://:***@/0"),
        ("redis://cache:notaport/0", "redis://cache/0"),
    ],
    ids=["no-host", "a-port-that-is-no-number"],
)
def test_redact_url_of_an_odd_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


async def test_one_limit_may_be_lifted() -> None:
    assert isinstance(open_store("memory://", ttl_seconds=None, max_entries=5), MemoryResponseStore)
    assert isinstance(open_store("memory://", ttl_seconds=5, max_entries=None), MemoryResponseStore)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://localhost:6379/0", "redis://localhost:6379/0"),
        ("redis://:secret@localhost:6379/0", "redis://:***@localhost:6379/0"),
        ("redis://admin:secret@localhost/1", "redis://admin:***@localhost/1"),
        ("redis://admin@localhost:6379", "redis://admin@localhost:6379"),
        ("rediss://u:p%40ss@[::1]:6380/0?password=other", "rediss://u:***@[::1]:6380/0"),
    ],
)
def test_redact_url_hides_passwords(url: str, shown: str) -> None:
    assert redact_url(url) == shown
