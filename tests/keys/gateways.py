"""What the key tests do to a real gateway: issue keys over the admin API, call
``/v1/responses`` with them, read streams, wait for recorded usage, run ``toolwire keys``.

Every key issued is remembered (``Issued``), so a test can prove later that none of them
was written anywhere. Every wait has a deadline and polls a condition.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx
import orjson

from tests.support.gateway import GatewayProcess
from toolwire.protocol import SSEDecoder

T = TypeVar("T")
JSON = dict[str, Any]

STATIC_KEY = "static-key-of-the-keys-tests-0001"
ADMIN_KEY = "admin-key-of-the-keys-tests-0002"
KEY_ENV = {"TW_KEYS_STATIC": STATIC_KEY, "TW_KEYS_ADMIN": ADMIN_KEY}
KEY_ARGS = ("--api-key-env", "TW_KEYS_STATIC", "--admin-key-env", "TW_KEYS_ADMIN")


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


class Issued:
    """Keys issued during a module, and issuing them over a gateway's admin API."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def issue(self, gateway: GatewayProcess, name: str, **spec: Any) -> str:
        answer = httpx.post(gateway.url + "/admin/keys", json={"name": name, **spec}, headers=auth(ADMIN_KEY), timeout=30)
        assert answer.status_code == 201, answer.text
        key: str = answer.json()["key"]
        self.keys.append(key)
        return key

    def remember(self, key: str) -> str:
        self.keys.append(key)
        return key


def respond(gateway: GatewayProcess, key: str | None, body: JSON | None = None, **fields: Any) -> httpx.Response:
    """``POST /v1/responses`` (not streamed) with ``key``."""
    body = {"model": "m", "input": "hi", **(body or {}), **fields}
    return httpx.post(gateway.base_url + "/responses", json=body, headers=auth(key) if key else {}, timeout=60)


def stream_events(gateway: GatewayProcess, key: str, **fields: Any) -> list[JSON]:
    """A whole streamed exchange's events."""
    body = {"model": "m", "input": "hi", "stream": True, **fields}
    with httpx.stream("POST", gateway.base_url + "/responses", json=body, headers=auth(key), timeout=60) as answer:
        assert answer.status_code == 200, answer.read()
        decoder = SSEDecoder()
        events = [orjson.loads(event.data) for chunk in answer.iter_raw() for event in decoder.feed(chunk)]
    return events


@contextmanager
def open_stream(gateway: GatewayProcess, key: str, **fields: Any) -> Iterator[Callable[[str], JSON]]:
    """A streamed exchange held open: yields ``until(event_type)``, which reads events up to
    the first of that type. Leaving the block closes the connection: the client cuts it."""
    body = {"model": "m", "input": "hi", "stream": True, **fields}
    with httpx.Client(timeout=60) as client, client.stream(
        "POST", gateway.base_url + "/responses", json=body, headers=auth(key)
    ) as answer:
        assert answer.status_code == 200, answer.read()
        decoder = SSEDecoder()
        chunks = answer.iter_raw()

        def until(event_type: str) -> JSON:
            for chunk in chunks:
                for event in decoder.feed(chunk):
                    decoded: JSON = orjson.loads(event.data)
                    if decoded["type"] == event_type:
                        return decoded
            raise AssertionError(f"the stream ended before a {event_type} event")

        yield until


def usage_rows(gateway: GatewayProcess, name: str) -> list[JSON]:
    answer = httpx.get(gateway.url + "/admin/usage", params={"name": name}, headers=auth(ADMIN_KEY), timeout=30)
    assert answer.status_code == 200, answer.text
    rows: list[JSON] = answer.json()["data"]
    return rows


def wait_for(check: Callable[[], T | None], what: str, timeout: float = 15.0) -> T:
    """Poll ``check`` until it returns something other than None or False."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found is not None and found is not False:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def wait_for_requests(gateway: GatewayProcess, name: str, requests: int) -> list[JSON]:
    """The key's usage rows once they count ``requests`` requests in all."""

    def counted() -> list[JSON] | None:
        rows = usage_rows(gateway, name)
        return rows if sum(row["requests"] for row in rows) >= requests else None

    return wait_for(counted, f"{requests} recorded requests of the key '{name}'")


def keys_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``toolwire keys ARGS``, as a person would run it."""
    return subprocess.run(
        [sys.executable, "-m", "toolwire", "keys", *args], capture_output=True, text=True, timeout=120
    )


def chat_chunk(content: str, usage: JSON | None = None) -> bytes:
    """One ``data:`` line of a Chat Completions stream."""
    chunk: JSON = {
        "id": "chatcmpl-keys",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "scripted-model",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": content}, "finish_reason": None}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return b"data: " + orjson.dumps(chunk) + b"\n\n"
