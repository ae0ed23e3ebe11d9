"""Compactions shared between gateway processes: two ``toolwire serve`` on one SQLite file,
and two on one real Redis, open each other's compaction items; a gateway with a store of
its own cannot, and says so. A compaction belongs to the client key that made it, and
what making it cost is counted to that key.
"""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from tests.keys.gateways import KEY_ARGS, KEY_ENV, STATIC_KEY, Issued, auth, wait_for_requests
from tests.store.redis_server import RedisServer
from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import GatewayProcess
from toolwire.compaction import KEY_FILE_SUFFIX

JSON = dict[str, Any]
CONVERSATION: list[JSON] = [
    {"type": "message", "role": "user", "content": "Plan the migration."},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Step one: back up."}]},
]
USAGE = {"prompt_tokens": 2000, "completion_tokens": 30, "total_tokens": 2030}


def compact(gateway: GatewayProcess, upstream: ChatUpstream, summary: str, key: str | None = None) -> JSON:
    """``compaction_trigger`` through ``gateway``: its one compaction item."""
    upstream.enqueue(Text(summary, usage=USAGE))
    body = {"model": "m", "input": [*CONVERSATION, {"type": "compaction_trigger"}], "store": False}
    answer = httpx.post(gateway.base_url + "/responses", json=body, headers=auth(key) if key else {}, timeout=30)
    assert answer.status_code == 200, answer.text
    [item] = answer.json()["output"]
    assert item["type"] == "compaction"
    return item


def continue_with(gateway: GatewayProcess, item: JSON, key: str | None = None) -> httpx.Response:
    body = {"model": "m", "input": [item, {"role": "user", "content": "Next step?"}], "store": False}
    return httpx.post(gateway.base_url + "/responses", json=body, headers=auth(key) if key else {}, timeout=30)


def summary_reached_backend(upstream: ChatUpstream, summary: str) -> bool:
    return summary in orjson.dumps(upstream.chat_requests[-1]["messages"]).decode()


@pytest.fixture(scope="module")
def shared_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("compaction-shared") / "shared.sqlite3"


@pytest.fixture(scope="module")
def sqlite_pair(_session_upstream: ChatUpstream, shared_sqlite: Path) -> Iterator[tuple[GatewayProcess, GatewayProcess]]:
    """Two gateways with client keys on one SQLite file."""
    folder = shared_sqlite.parent
    args = (*KEY_ARGS, "--store", f"sqlite:///{shared_sqlite}")
    first = GatewayProcess(_session_upstream.base_url, folder / "first.log", *args, env=KEY_ENV)
    second = GatewayProcess(_session_upstream.base_url, folder / "second.log", *args, env=KEY_ENV)
    with first, second:
        yield first, second


def test_gateways_on_one_sqlite_file_open_each_others_compactions(
    sqlite_pair: tuple[GatewayProcess, GatewayProcess], upstream: ChatUpstream, shared_sqlite: Path
) -> None:
    first, second = sqlite_pair
    for maker, opener, summary in ((first, second, "Made by the first."), (second, first, "Made by the second.")):
        item = compact(maker, upstream, summary, STATIC_KEY)
        upstream.enqueue(Text("Step two."))
        answer = continue_with(opener, item, STATIC_KEY)
        assert answer.status_code == 200, answer.text
        assert summary_reached_backend(upstream, summary)
    key_file = shared_sqlite.with_name(shared_sqlite.name + KEY_FILE_SUFFIX)
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_a_compaction_belongs_to_the_key_that_made_it_and_is_counted_to_it(
    sqlite_pair: tuple[GatewayProcess, GatewayProcess], upstream: ChatUpstream
) -> None:
    first, second = sqlite_pair
    issued = Issued()
    alice = issued.issue(first, "alice-compacts")
    bob = issued.issue(first, "bob-compacts")
    item = compact(first, upstream, "Alice's private plan.", alice)
    [row] = wait_for_requests(first, "alice-compacts", 1)
    assert (row["input_tokens"], row["output_tokens"]) == (2000, 30)
    for other in (bob, STATIC_KEY):
        answer = continue_with(second, item, other)
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert "belongs to another client key" in error["message"] and error["param"] == "input[0].encrypted_content"
    assert not summary_reached_backend(upstream, "Alice's private plan.")
    upstream.enqueue(Text("Step two."))
    assert continue_with(second, item, alice).status_code == 200
    assert summary_reached_backend(upstream, "Alice's private plan.")


def test_a_gateway_with_another_store_cannot_open_them(
    sqlite_pair: tuple[GatewayProcess, GatewayProcess], upstream: ChatUpstream, tmp_path: Path
) -> None:
    item = compact(sqlite_pair[0], upstream, "Elsewhere.", STATIC_KEY)
    with GatewayProcess(upstream.base_url, tmp_path / "alone.log") as alone:
        answer = continue_with(alone, item)
    assert answer.status_code == 400, answer.text
    assert "another compaction key" in answer.json()["error"]["message"]


def test_gateways_on_one_redis_open_each_others_compactions(
    upstream: ChatUpstream, redis_server: RedisServer, tmp_path: Path
) -> None:
    args = ("--store", redis_server.url)
    with GatewayProcess(upstream.base_url, tmp_path / "a.log", *args) as first, \
         GatewayProcess(upstream.base_url, tmp_path / "b.log", *args) as second:
        item = compact(first, upstream, "Shared through Redis.")
        upstream.enqueue(Text("Step two."))
        answer = continue_with(second, item)
        assert answer.status_code == 200, answer.text
        assert summary_reached_backend(upstream, "Shared through Redis.")
