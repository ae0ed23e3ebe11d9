"""The app a worker builds from a configuration (``build_app``), served in this process:
``/v1/models`` in both forms, the request body's bounds and codings, and what each
setting of ``[server]`` turns on."""

from __future__ import annotations

import asyncio
import gzip
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from backports import zstd

from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import UPSTREAM_KEY, UPSTREAM_KEY_ENV
from tests.support.served import chat_config, gateway_app, gateway_client, serving
from toolwire.codex_config import (
    DEFAULT_CONTEXT_WINDOW,
    DEFAULT_INSTRUCTIONS,
    CodexModel,
    model_entry,
)
from toolwire.errors import RequestError
from toolwire.keys import KeySpec, create_key, open_key_store
from toolwire.server import GatewaySettings, build_router, create_app
from toolwire.server._asgi import ClientDisconnected, read_body

JSON = dict[str, Any]
MODELS = [
    {"name": "qwen3-coder", "upstream": "local"},
    {"name": "deepseek-r1", "upstream": "local", "context_window": 64000, "reasoning": True},
]


@pytest.fixture(autouse=True)
def upstream_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(UPSTREAM_KEY_ENV, UPSTREAM_KEY)


async def test_models_as_an_openai_list_and_as_codexs_catalog(upstream: ChatUpstream) -> None:
    async with gateway_client(chat_config(upstream.base_url, models=MODELS)) as client:
        listed = (await client.get("/v1/models")).json()
        catalog = await client.get("/v1/models", params={"client_version": "0.171.0"})
        base_url = str(client.base_url).rstrip("/") + "/v1"
    assert listed == {
        "object": "list",
        "data": [
            {"id": "qwen3-coder", "object": "model", "created": 0, "owned_by": "local"},
            {"id": "deepseek-r1", "object": "model", "created": 0, "owned_by": "local"},
        ],
    }
    assert catalog.json() == {
        "models": [
            model_entry(CodexModel("qwen3-coder", context_window=DEFAULT_CONTEXT_WINDOW), base_url=base_url,
                        instructions=DEFAULT_INSTRUCTIONS, priority=1),
            model_entry(CodexModel("deepseek-r1", context_window=64000, reasoning=True), base_url=base_url,
                        instructions=DEFAULT_INSTRUCTIONS, priority=2),
        ]
    }  # fmt: skip


async def test_models_of_a_gateway_with_only_a_default_upstream(upstream: ChatUpstream) -> None:
    async with gateway_client(chat_config(upstream.base_url)) as client:
        assert (await client.get("/v1/models")).json() == {"object": "list", "data": []}
        catalog = (await client.get("/v1/models?client_version=1")).json()
    assert catalog == {"models": []}


async def test_models_of_an_app_made_without_their_descriptions(upstream: ChatUpstream) -> None:
    """``create_app`` without ``codex_models``: Codex's catalog names each routed model,
    with the catalog's defaults; the list says which upstream serves it."""
    config = chat_config(upstream.base_url, models=MODELS)
    app = create_app(build_router(config), GatewaySettings())
    async with serving(app) as url, httpx.AsyncClient(base_url=url) as client:
        listed = (await client.get("/v1/models")).json()
        catalog = (await client.get("/v1/models", params={"client_version": "0.171.0"})).json()
    assert [(m["id"], m["owned_by"]) for m in listed["data"]] == [("qwen3-coder", "local"), ("deepseek-r1", "local")]
    assert catalog == {
        "models": [
            model_entry(CodexModel(name), base_url=url + "/v1", instructions=DEFAULT_INSTRUCTIONS, priority=priority)
            for priority, name in enumerate(["qwen3-coder", "deepseek-r1"], start=1)
        ]
    }


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data)


@pytest.mark.parametrize(("coding", "encode"), [("gzip", gzipped), ("zstd", zstd.compress)])
async def test_a_compressed_request_is_served(upstream: ChatUpstream, coding: str, encode: Any) -> None:
    upstream.enqueue(Text("decoded"))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        body = b'{"model": "m", "input": "compressed hello"}'
        response = await client.post("/v1/responses", content=encode(body), headers={"Content-Encoding": coding})
    assert response.status_code == 200, response.text
    assert upstream.chat_requests[0]["messages"][-1]["content"] == "compressed hello"


async def test_a_request_body_over_the_limit(upstream: ChatUpstream) -> None:
    async with gateway_client(chat_config(upstream.base_url, max_body_bytes=1000)) as client:
        declared = await client.post("/v1/responses", content=b"x" * 1001)

        async def chunks() -> Any:
            for _ in range(20):
                yield b"x" * 100

        chunked = await client.post("/v1/responses", content=chunks())
        bomb = await client.post("/v1/responses", content=gzipped(b" " * 5000), headers={"Content-Encoding": "gzip"})
        at_the_limit = await client.post("/v1/responses", content=b" " * 990 + b'{"a":1}')
        metrics = (await client.get("/metrics")).text
    for refused in (declared, chunked):
        assert refused.status_code == 413
        assert refused.json()["error"] == {
            "message": "The request body is larger than the gateway's limit of 1000 bytes.",
            "type": "invalid_request_error", "param": None, "code": "request_too_large",
        }  # fmt: skip
    assert bomb.status_code == 413 and "once decompressed (gzip)" in bomb.json()["error"]["message"]
    assert at_the_limit.status_code == 400, "a body of the limit is read (and then found not to be a request)"
    assert re.search(r'^toolwire_limits_tripped_total\{limit="max_body_bytes"\} [2-9]', metrics, re.MULTILINE)
    assert upstream.requests == []


async def test_a_coding_the_gateway_does_not_decode(upstream: ChatUpstream) -> None:
    async with gateway_client(chat_config(upstream.base_url)) as client:
        refused = await client.post("/v1/responses", content=b"{}", headers={"Content-Encoding": "br"})
    assert refused.status_code == 415 and refused.headers["content-type"] == "application/json"
    assert refused.json()["error"] == {
        "message": "The request body's Content-Encoding 'br' is not supported; send it as it is, or compressed with "
        "gzip or zstd.",
        "type": "invalid_request_error", "param": "content-encoding", "code": "unsupported_content_encoding",
    }  # fmt: skip


async def body_of(headers: list[tuple[bytes, bytes]], messages: list[JSON], limit: int = 100) -> bytes:
    queue = list(messages)

    async def receive() -> JSON:
        return queue.pop(0)

    return await read_body({"type": "http", "headers": headers}, receive, limit)


async def test_read_body_alone() -> None:
    parts = [{"type": "http.request", "body": b"ab", "more_body": True}, {"type": "http.request", "body": b"c"}]
    assert await body_of([(b"content-length", b"3")], parts) == b"abc"
    assert await body_of([], [{"type": "http.request"}]) == b""
    with pytest.raises(RequestError) as invalid:
        await body_of([(b"content-length", b"lots")], parts)
    assert (invalid.value.message, invalid.value.param, invalid.value.status) == (
        "Invalid Content-Length header.", "content-length", 400,
    )  # fmt: skip
    with pytest.raises(RequestError) as declared:
        await body_of([(b"content-length", b"101")], [])  # refused before anything is read
    assert declared.value.status == 413
    exactly = [{"type": "http.request", "body": b"x" * 100}]
    assert await body_of([(b"content-length", b"100")], exactly) == b"x" * 100
    with pytest.raises(ClientDisconnected):
        await body_of([], [{"type": "http.request", "body": b"a", "more_body": True}, {"type": "http.disconnect"}])
    encoded = [{"type": "http.request", "body": gzipped(b"hello")}]
    assert await body_of([(b"content-encoding", b"gzip")], encoded) == b"hello"
    with pytest.raises(RequestError, match="ends before its compressed data does"):
        await body_of([(b"content-encoding", b"gzip")], [{"type": "http.request", "body": gzipped(b"hello")[:-4]}])


async def test_the_inspector_setting(upstream: ChatUpstream) -> None:
    async with gateway_client(chat_config(upstream.base_url)) as client:
        off = await client.get("/ui")
        off_slash = await client.get("/ui/")
    assert off.status_code == 404 and off_slash.status_code == 404
    assert "The inspector is off." in off.text and off.headers["content-type"].startswith("text/html")
    async with gateway_client(chat_config(upstream.base_url, inspector=True)) as client:
        on = await client.get("/ui/")
    assert on.status_code == 200 and "<html" in on.text.lower()


async def test_client_keys_from_the_environment_and_the_websocket_bound(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TW_APP_TEST_KEYS", "k1, k2")
    upstream.enqueue(Text("ok"))
    config = chat_config(upstream.base_url, api_key_env="TW_APP_TEST_KEYS", store="none")
    async with gateway_client(config) as client:
        refused = await client.post("/v1/responses", json={"model": "m", "input": "hi"})
        served = await client.post("/v1/responses", json={"model": "m", "input": "hi"}, headers={"Authorization": "Bearer k2"})
    assert (refused.status_code, served.status_code) == (401, 200)


async def test_key_variables_that_are_not_set_hold_no_keys(upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TW_APP_TEST_UNSET_KEYS", raising=False)
    monkeypatch.delenv("TW_APP_TEST_UNSET_ADMIN", raising=False)
    upstream.enqueue(Text("open"))
    config = chat_config(
        upstream.base_url, api_key_env="TW_APP_TEST_UNSET_KEYS", admin_key_env="TW_APP_TEST_UNSET_ADMIN", store="none"
    )
    async with gateway_client(config) as client:
        served = await client.post("/v1/responses", json={"model": "m", "input": "hi"})
        admin = await client.get("/admin/keys", headers={"Authorization": "Bearer anything"})
    assert served.status_code == 200, served.text
    assert admin.status_code == 404 and admin.json()["error"]["code"] == "admin_api_off"


async def test_the_inspector_opens_to_a_static_client_key_or_an_admin_key(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TW_APP_TEST_KEYS", "client-key-1")
    monkeypatch.setenv("TW_APP_TEST_ADMIN", "admin-key-1")
    config = chat_config(
        upstream.base_url, inspector=True, api_key_env="TW_APP_TEST_KEYS", admin_key_env="TW_APP_TEST_ADMIN", store="none"
    )
    async with gateway_client(config) as client:
        answers = {
            key: (await client.get("/ui/api/exchanges", headers={"Authorization": f"Bearer {key}"} if key else {}))
            for key in ("", "client-key-1", "admin-key-1", "another-key")
        }
    assert {key: answer.status_code for key, answer in answers.items()} == {
        "": 401, "client-key-1": 200, "admin-key-1": 200, "another-key": 401,
    }  # fmt: skip


@pytest.mark.parametrize("stored_keys", [0, 1])
async def test_keys_in_the_store_close_the_inspector(upstream: ChatUpstream, tmp_path: Path, stored_keys: int) -> None:
    """Keys made with ``toolwire keys`` (in the store, not in the environment) do not open
    the inspector, which shows every key's traffic: once there are any, it needs an admin key."""
    store_url = f"sqlite:///{tmp_path / 'toolwire.sqlite3'}"
    key_store = open_key_store(store_url)
    for n in range(stored_keys):
        await create_key(key_store, KeySpec(name=f"key-{n}"))
    await key_store.aclose()
    async with gateway_client(chat_config(upstream.base_url, inspector=True, store=store_url)) as client:
        answer = await client.get("/ui/api/exchanges")
    if stored_keys:
        assert answer.status_code == 401
        assert answer.json()["error"]["message"].startswith("This gateway has client keys, which do not open the inspector")
    else:
        assert answer.status_code == 200 and answer.json()["object"] == "list"


async def test_the_store_keeps_as_many_responses_as_the_server_section_says(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("first"), Text("second"))
    async with gateway_client(chat_config(upstream.base_url, store_max_entries=1)) as client:
        ids = [(await client.post("/v1/responses", json={"model": "m", "input": "hi"})).json()["id"] for _ in range(2)]
        found = [(await client.get(f"/v1/responses/{response_id}")).status_code for response_id in ids]
    assert found == [404, 200]


async def test_the_store_keeps_as_many_bytes_as_the_server_section_says(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("one"), Text("two"), Text("six"))
    async with gateway_client(chat_config(upstream.base_url, store_max_bytes=30_000)) as client:
        ids = [(await client.post("/v1/responses", json={"model": "m", "input": "x" * 10_000})).json()["id"] for _ in range(3)]
        found = [(await client.get(f"/v1/responses/{response_id}")).status_code for response_id in ids]
        metrics = (await client.get("/metrics")).text
    assert found == [404, 200, 200]  # each record: its 10 kB input and a few kB more; two fit in 30 kB, not three
    assert re.search(r"^toolwire_store_max_bytes 30000\.0$", metrics, re.M)
    held = re.search(r"^toolwire_store_bytes (\S+)$", metrics, re.M)
    assert held and 20_000 < float(held[1]) <= 30_000, metrics[-2000:]  # the two records it holds


async def test_the_store_forgets_responses_after_the_server_sections_ttl(upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("brief"))
    async with gateway_client(chat_config(upstream.base_url, store_ttl_seconds=0.2)) as client:
        response_id = (await client.post("/v1/responses", json={"model": "m", "input": "hi"})).json()["id"]
        deadline = time.monotonic() + 10
        while (found := (await client.get(f"/v1/responses/{response_id}")).status_code) == 200:
            assert time.monotonic() < deadline, "the response outlived its 0.2 s TTL by 10 s"
            await asyncio.sleep(0.05)
    assert found == 404


def test_caps_that_do_not_fit_the_open_files_are_refused(upstream: ChatUpstream) -> None:
    with pytest.raises(ValueError, match=r"connections \(max_connections\).*raise the limit, or set lower caps"):
        gateway_app(chat_config(upstream.base_url, max_connections=10_000_000))


@pytest.mark.parametrize(("store", "kept"), [("sqlite", True), ("memory", False)])
async def test_responses_are_kept_in_the_store_the_server_section_names(
    upstream: ChatUpstream, tmp_path: Path, store: str, kept: bool
) -> None:
    """A response made before a restart is still there after it on SQLite, and gone from memory."""
    upstream.enqueue(Text("kept on disk"))
    url = f"sqlite:///{tmp_path / 'responses.sqlite3'}" if store == "sqlite" else "memory://"
    config = chat_config(upstream.base_url, store=url)
    async with gateway_client(config) as client:
        response_id = (await client.post("/v1/responses", json={"model": "m", "input": "hi"})).json()["id"]
    async with gateway_client(config) as client:
        found = await client.get(f"/v1/responses/{response_id}")
    if kept:
        assert found.status_code == 200, found.text
        assert found.json()["output"][0]["content"][0]["text"] == "kept on disk"
    else:
        assert found.status_code == 404, found.text
