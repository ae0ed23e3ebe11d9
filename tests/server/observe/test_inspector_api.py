"""The inspector's JSON API and page, answer by answer: bodies, statuses and headers in full,
who is let in (static keys, a store that holds keys, loopback clients), the list's
``limit``, and the ring's own bounds. The routes are served by a Starlette app over a
``RecentExchanges`` filled by hand (tests/server/observe/test_inspector.py drives a gateway)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import orjson
import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from tests.support.observed import exchange
from toolwire.server._exchange import Exchange
from toolwire.server._siblings import LocalSiblings
from toolwire.server.observe._inspector import RecentExchanges, inspector_routes

API_HEADERS = {"cache-control": "no-store", "x-content-type-options": "nosniff"}
PAGE_HEADERS = {
    "cache-control": "no-cache",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
}
KEY_ERROR = {"message": "Send 'Authorization: Bearer <key>' with a client key.", "code": "invalid_api_key"}


@contextmanager
def inspector(
    recent: RecentExchanges,
    keys: tuple[bytes, ...] = (),
    requires_key: Callable[[], Awaitable[bool]] | None = None,
    host: str = "127.0.0.1",
) -> Iterator[TestClient]:
    app = Starlette(routes=inspector_routes(recent, keys, requires_key))
    with TestClient(app, client=(host, 50000)) as client:
        yield client


def kept(*request_ids: str) -> RecentExchanges:
    recent = RecentExchanges(max_exchanges=5, max_bytes=1_000_000)
    for request_id in request_ids:
        recent.finished(exchange(request_id))
    return recent


def has_headers(response_headers: object, expected: dict[str, str]) -> bool:
    return all(response_headers.get(name) == value for name, value in expected.items())  # type: ignore[attr-defined]


def test_the_list_in_full() -> None:
    recent = kept("resp_1", "resp_2", "resp_3")
    with inspector(recent) as client:
        listing = client.get("/ui/api/exchanges")
        limited = client.get("/ui/api/exchanges", params={"limit": "2"})
        none = client.get("/ui/api/exchanges", params={"limit": "-1"})
        bad = client.get("/ui/api/exchanges", params={"limit": "two"})
    assert listing.status_code == 200 and has_headers(listing.headers, API_HEADERS)
    assert listing.headers["content-type"] == "application/json"
    body = listing.json()
    assert [summary["request_id"] for summary in body["data"]] == ["resp_3", "resp_2", "resp_1"]
    assert body["object"] == "list"
    assert body["kept"] == {"exchanges": 3, "bytes": recent.kept_bytes, "max_exchanges": 5, "max_bytes": 1_000_000}
    assert [summary["request_id"] for summary in limited.json()["data"]] == ["resp_3", "resp_2"]
    assert none.json()["data"] == []
    assert bad.status_code == 400 and has_headers(bad.headers, API_HEADERS)
    assert bad.json() == {"error": {"message": "limit must be an integer", "code": "invalid_limit"}}


def test_one_exchange_in_full_and_one_no_longer_kept() -> None:
    with inspector(kept("resp_1")) as client:
        found = client.get("/ui/api/exchanges/resp_1")
        gone = client.get("/ui/api/exchanges/resp_gone")
    assert found.status_code == 200 and has_headers(found.headers, API_HEADERS)
    assert found.headers["content-type"] == "application/json"
    assert orjson.loads(found.content)["request_id"] == "resp_1"
    assert gone.status_code == 404 and has_headers(gone.headers, API_HEADERS)
    assert gone.json() == {
        "error": {"message": "No exchange resp_gone is kept (the inspector keeps the last 5).", "code": "not_found"}
    }


def test_the_page_and_its_assets_carry_the_page_headers() -> None:
    with inspector(kept()) as client:
        redirect = client.get("/ui", follow_redirects=False)
        answers = {path: client.get(path) for path in ("/ui/", "/ui/inspector.css", "/ui/inspector.js")}
    assert redirect.status_code == 307 and redirect.headers["location"] == "/ui/"
    for path, response in answers.items():
        assert response.status_code == 200 and has_headers(response.headers, PAGE_HEADERS), path
    assert answers["/ui/"].headers["content-type"] == "text/html; charset=utf-8"
    assert answers["/ui/inspector.css"].headers["content-type"] == "text/css; charset=utf-8"
    assert answers["/ui/inspector.js"].headers["content-type"] == "text/javascript; charset=utf-8"


@pytest.mark.parametrize(
    ("authorization", "allowed"),
    [
        (None, False),
        ("Bearer wrong", False),
        ("Bearer", False),
        ("Basic client-key-beta", False),
        ("client-key-beta", False),
        ("Bearer client-key-beta", True),
        ("bearer  client-key-alpha ", True),
    ],
)
def test_with_keys_only_a_bearer_of_one_opens_the_api(authorization: str | None, allowed: bool) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    with inspector(kept("resp_1"), keys=(b"client-key-alpha", b"client-key-beta"), host="192.0.2.10") as client:
        answers = [client.get("/ui/api/exchanges", headers=headers), client.get("/ui/api/exchanges/resp_1", headers=headers)]
    for answer in answers:
        if allowed:
            assert answer.status_code == 200
        else:
            assert (answer.status_code, answer.json()) == (401, {"error": KEY_ERROR})
            assert has_headers(answer.headers, {**API_HEADERS, "www-authenticate": "Bearer"})


def test_an_empty_bearer_never_matches_an_empty_key() -> None:
    with inspector(kept(), keys=(b"",)) as client:
        assert client.get("/ui/api/exchanges", headers={"Authorization": "Bearer "}).status_code == 401


def test_a_store_holding_keys_closes_the_api_to_everyone_without_a_static_key() -> None:
    asked: list[bool] = []

    async def holds_keys() -> bool:
        asked.append(True)
        return True

    with inspector(kept("resp_1"), requires_key=holds_keys) as client:
        answers = [client.get("/ui/api/exchanges"), client.get("/ui/api/exchanges/resp_1")]
    for answer in answers:
        assert answer.status_code == 401 and has_headers(answer.headers, {**API_HEADERS, "www-authenticate": "Bearer"})
        assert answer.json() == {
            "error": {
                "message": "This gateway has client keys, which do not open the inspector (it shows every key's "
                "traffic): start it with --admin-key-env VAR and send 'Authorization: Bearer <admin key>'.",
                "code": "invalid_api_key",
            }
        }
    assert len(asked) == 2


@pytest.mark.parametrize(("host", "status"), [("127.0.0.1", 200), ("::1", 200), ("192.0.2.10", 403)])
def test_without_keys_only_loopback_clients(host: str, status: int) -> None:
    async def holds_none() -> bool:
        return False

    with inspector(kept("resp_1"), requires_key=holds_none, host=host) as client:
        answers = [client.get("/ui/api/exchanges"), client.get("/ui/api/exchanges/resp_1")]
    for answer in answers:
        assert answer.status_code == status
        if status == 403:
            assert has_headers(answer.headers, API_HEADERS) and "www-authenticate" not in answer.headers
            assert answer.json() == {
                "error": {
                    "message": "The inspector answers only loopback clients when the gateway has no client keys "
                    "(--api-key-env).",
                    "code": "forbidden",
                }
            }


@pytest.mark.parametrize(("max_exchanges", "max_bytes"), [(0, 1), (1, 0)])
def test_the_ring_needs_room(max_exchanges: int, max_bytes: int) -> None:
    with pytest.raises(ValueError, match=r"^max_exchanges must be at least 1 and max_bytes positive$"):
        RecentExchanges(max_exchanges=max_exchanges, max_bytes=max_bytes)


def test_the_smallest_ring_keeps_one_exchange_and_a_quarter_of_its_bytes_per_record() -> None:
    recent = RecentExchanges(max_exchanges=1, max_bytes=4000)
    assert recent.max_record_bytes == 1000
    recent.finished(exchange("resp_1"))
    recent.finished(exchange("resp_2"))
    assert [summary["request_id"] for summary in recent.summaries()] == ["resp_2"]
    record = recent.record("resp_2")
    assert record is not None and orjson.loads(record)["request_id"] == "resp_2"


def test_one_record_over_the_byte_bound_is_still_kept() -> None:
    """Records are evicted for bytes only while more than one is kept: the newest stays."""
    recent = RecentExchanges(max_bytes=600, max_record_bytes=10_000)
    recent.finished(exchange("resp_1"))
    recent.finished(exchange("resp_2"))
    assert len(recent) == 1 and recent.kept_bytes > 600
    assert [summary["request_id"] for summary in recent.summaries()] == ["resp_2"]


@pytest.mark.usefixtures("stack_room")
def test_a_record_that_cannot_be_redacted_is_shown_without_its_traffic() -> None:
    deep = b'{"model":"m","input":' + b"[" * 253 + b'{"api_key":"k"}' + b"]" * 253 + b"}"
    recent = kept()
    recent.finished(exchange("resp_deep", client_request=deep))
    record = recent.record("resp_deep")
    assert record is not None
    shown = orjson.loads(record)
    assert (shown["request_id"], shown["traffic_omitted"]) == ("resp_deep", "not redactable")
    assert "client_request" not in shown


def test_a_record_that_cannot_be_encoded_is_kept_without_its_traffic() -> None:
    recent = kept()
    recent.finished(exchange("resp_big_int", upstream_chunks=[{"n": 2**70}]))  # past what orjson writes
    record = recent.record("resp_big_int")
    assert record is not None
    shown = orjson.loads(record)
    assert shown["request_id"] == "resp_big_int" and shown["traffic_omitted"].startswith("not encodable: ")


def at(request_id: str, second: int, outcome: str = "completed") -> Exchange:
    made = exchange(request_id, outcome=outcome)
    made.received_at = 1_700_000_000.0 + second
    return made


def test_with_other_workers_the_list_holds_theirs_and_a_record_opens_wherever_it_is_kept() -> None:
    siblings = LocalSiblings.group(3)
    rings = [RecentExchanges(max_exchanges=5, max_bytes=1_000_000) for _ in siblings]
    for ring, (request_id, second) in zip([*rings, rings[0]], [("resp_1", 1), ("resp_2", 2), ("resp_3", 3), ("resp_4", 4)], strict=True):
        ring.finished(at(request_id, second))
    running = at("resp_5", 0, outcome="pending")
    rings[2].started(running)
    apps = [Starlette(routes=inspector_routes(ring, siblings=worker)) for ring, worker in zip(rings, siblings, strict=True)]
    with TestClient(apps[0], client=("127.0.0.1", 50000)) as client:
        listing = client.get("/ui/api/exchanges").json()
        limited = client.get("/ui/api/exchanges", params={"limit": "2"}).json()
        records = {request_id: client.get(f"/ui/api/exchanges/{request_id}") for request_id in ("resp_2", "resp_5")}
        missing = client.get("/ui/api/exchanges/resp_9")
        asked = list(siblings[0].asked)
        siblings[1].absent = True  # (starting again)
        without = client.get("/ui/api/exchanges").json()
        gone = client.get("/ui/api/exchanges/resp_2")
    assert [s["request_id"] for s in listing["data"]] == ["resp_5", "resp_4", "resp_3", "resp_2", "resp_1"]
    assert listing["kept"] == {
        "exchanges": 4, "bytes": sum(ring.kept_bytes for ring in rings), "max_exchanges": 15, "max_bytes": 3_000_000,
    }  # fmt: skip
    assert [s["request_id"] for s in limited["data"]] == ["resp_5", "resp_4"]
    assert records["resp_2"].status_code == 200 and orjson.loads(records["resp_2"].content)["request_id"] == "resp_2"
    assert has_headers(records["resp_2"].headers, API_HEADERS)
    assert orjson.loads(records["resp_5"].content)["outcome"] == "pending"
    assert missing.status_code == 404
    assert [s["request_id"] for s in without["data"]] == ["resp_5", "resp_4", "resp_3", "resp_1"]
    assert gone.status_code == 404
    # The limit is asked for, so that another worker sends no more than that.
    assert asked == [("exchanges", ""), ("exchanges", "2"), *(("exchange", f"resp_{n}") for n in (2, 5, 9))]


async def test_another_worker_answers_with_at_most_the_summaries_asked_for() -> None:
    siblings = LocalSiblings.group(2)
    inspector_routes(kept("resp_1", "resp_2", "resp_3"), siblings=siblings[1])
    for argument, expected in [("", 3), ("2", 2), ("0", 0), ("-1", 0), ("two", 3)]:
        ((_, answer),) = await siblings[0].ask("exchanges", argument, max_bytes=1_000_000)
        listing = orjson.loads(answer)
        assert len(listing["data"]) == expected and listing["kept"]["exchanges"] == 3, argument
    ((_, record),) = await siblings[0].ask("exchange", "resp_2", max_bytes=1_000_000)
    assert orjson.loads(record)["request_id"] == "resp_2"
    assert await siblings[0].ask("exchange", "resp_9", max_bytes=1_000_000) == []


def test_another_workers_list_that_cannot_be_read_is_left_out(caplog: pytest.LogCaptureFixture) -> None:
    siblings = LocalSiblings.group(5)
    ring = kept("resp_1")
    broken = [b"not json", b'{"data": [], "kept": {"exchanges": "1"}}', b'{"data": [1], "kept": {}}', b'{"data": [], "kept": []}']
    for worker, answer in zip(siblings[1:], broken, strict=True):
        worker.answer("exchanges", lambda argument, answer=answer: answer)
    with TestClient(Starlette(routes=inspector_routes(ring, siblings=siblings[0])), client=("127.0.0.1", 1)) as client:
        listing = client.get("/ui/api/exchanges").json()
    assert [s["request_id"] for s in listing["data"]] == ["resp_1"]
    assert listing["kept"]["exchanges"] == 1
    assert [record.getMessage() for record in caplog.records] == [
        f"worker {n} answered with a list of exchanges that cannot be read; left out" for n in (1, 2, 3, 4)
    ]


def test_an_id_that_cannot_be_asked_of_other_workers_is_not_found() -> None:
    siblings = LocalSiblings.group(2)
    rings = [kept(), kept("resp_1")]
    apps = [Starlette(routes=inspector_routes(ring, siblings=worker)) for ring, worker in zip(rings, siblings, strict=True)]
    with TestClient(apps[0], client=("127.0.0.1", 1)) as client:
        assert client.get("/ui/api/exchanges/resp_1").status_code == 200
        assert client.get("/ui/api/exchanges/resp_1%0Aexchange%20resp_1").status_code == 404
        assert client.get("/ui/api/exchanges/resp%201").status_code == 404
        assert client.get("/ui/api/exchanges/resp_1%0D").status_code == 404
