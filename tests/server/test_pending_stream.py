"""``PendingStream``: a streamed answer's translator is made while the upstream works on
the request, not before the request leaves. Through the served gateway, the real aiohttp
client and the scripted Chat upstream: the order of the request's write and the
translator's making. Directly, with scripted openings: a translator that cannot be made,
an upstream that cannot be opened, a client that leaves while the upstream is asked."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import orjson
import pytest

from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import UPSTREAM_KEY, UPSTREAM_KEY_ENV
from tests.support.served import chat_config, gateway_client, sse_events
from tests.support.transport import KeptTransport, answer_on, nothing_to_keep
from toolwire.errors import RequestError, UpstreamError
from toolwire.protocol import parse_request
from toolwire.server._pipeline import PendingStream, TranslatorMeanwhile
from toolwire.translate import AnswerTranslator, ChatStreamTranslator, translate_request
from toolwire.upstream import ListBatches, StreamBatches
from toolwire.upstream.kinds import chat as chat_kind

STREAMED = {"model": "m", "input": "hi", "stream": True}


def chat_translator() -> ChatStreamTranslator:
    request = parse_request(orjson.dumps(STREAMED))
    return ChatStreamTranslator(request, translate_request(request).tools, response_id="resp_1", created_at=1, model="m")


class Opening:
    """An upstream stream's opening: ``turns`` loop turns to open (the POST, the wait for
    the head), then the ``batches``, or ``failure``; says whether it was closed."""

    def __init__(self, batches: list[list[Any]], *, turns: int = 3, failure: Exception | None = None) -> None:
        self.batches = batches
        self.turns = turns
        self.failure = failure
        self.closed = False

    @contextlib.asynccontextmanager
    async def __call__(self) -> AsyncIterator[StreamBatches]:
        for _ in range(self.turns):
            await asyncio.sleep(0)
        if self.failure is not None:
            raise self.failure
        try:
            yield ListBatches(self.batches)
        finally:
            self.closed = True


class CountedTranslator:
    """Makes a translator (``make``), counting the times it was asked."""

    def __init__(self, make: Callable[[], AnswerTranslator] = chat_translator) -> None:
        self.make = make
        self.made = 0

    def __call__(self) -> AnswerTranslator:
        self.made += 1
        return self.make()


def answered(text: str) -> list[list[Any]]:
    return [[
        {"choices": [{"index": 0, "delta": {"content": text}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]]  # fmt: skip


@pytest.fixture
async def loop_errors() -> AsyncIterator[list[dict[str, Any]]]:
    """What reaches the event loop's exception handler (a callback's uncaught failure)."""
    caught: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda loop, context: caught.append(context))
    yield caught
    loop.set_exception_handler(handler)


async def test_the_translator_is_made_after_the_request_has_gone_upstream(
    upstream: ChatUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """aiohttp writes a request's body in a task of its own: the translator (with the
    request's echo) is made after that task, not before the body leaves. (On a new
    connection the body waits for the connect, and the translator is made first: the
    second request is the one that shows it.)"""
    monkeypatch.setenv(UPSTREAM_KEY_ENV, UPSTREAM_KEY)
    said: list[str] = []
    write_bytes = aiohttp.ClientRequest.write_bytes

    async def noted_write(self: aiohttp.ClientRequest, *args: Any, **kwargs: Any) -> None:
        await write_bytes(self, *args, **kwargs)
        said.append("request written")

    class NotedTranslator(ChatStreamTranslator):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            said.append("translator made")
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(aiohttp.ClientRequest, "write_bytes", noted_write)
    monkeypatch.setattr(chat_kind, "ChatStreamTranslator", NotedTranslator)
    upstream.enqueue(Text("first"), Text("second"))
    async with gateway_client(chat_config(upstream.base_url)) as client:
        await client.post("/v1/responses", json=STREAMED)
        said.clear()  # (the first request's connection was new)
        response = await client.post("/v1/responses", json=STREAMED)
    assert said == ["request written", "translator made"]
    events = sse_events(response.content)
    assert [event["type"] for event in events[:2]] == ["response.created", "response.in_progress"]
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == "second"


async def test_the_translator_is_made_while_the_upstream_is_opened_and_its_opening_events_go_first(
    loop_errors: list[dict[str, Any]],
) -> None:
    opening, translator = Opening(answered("Hello")), CountedTranslator()
    transport = KeptTransport()
    pending = PendingStream(opening(), translator, nothing_to_keep)
    running = asyncio.ensure_future(pending.run(answer_on(transport)))
    for _ in range(3):  # the exchange's first step (the POST sent), then two turns
        await asyncio.sleep(0)
    assert translator.made == 1 and transport.deliveries == [], "made while the upstream is still being opened"
    await running
    assert translator.made == 1
    [(first, _), *_, (last, ended)] = transport.event_deliveries()
    assert first[:2] == ["response.created", "response.in_progress"]
    assert (last[-1], ended) == ("response.completed", True)
    assert [event["sequence_number"] for event in transport.events()] == list(range(len(transport.events())))
    assert opening.closed and loop_errors == []


async def test_an_upstream_opened_at_once_has_its_translator_made_then() -> None:
    opening, translator = Opening(answered("Hi"), turns=0), CountedTranslator()
    transport = KeptTransport()
    await PendingStream(opening(), translator, nothing_to_keep).run(answer_on(transport))
    for _ in range(3):
        await asyncio.sleep(0)
    assert translator.made == 1, "made when the stream opened, and not again on the turns scheduled for it"
    assert transport.events()[-1]["type"] == "response.completed"


async def test_a_translator_that_cannot_be_made_is_an_error_answer_and_the_upstream_stream_is_closed(
    loop_errors: list[dict[str, Any]],
) -> None:
    def broken() -> AnswerTranslator:
        raise RuntimeError("planted fault")

    opening = Opening(answered("never read"))
    transport = KeptTransport()
    answer = answer_on(transport)
    await PendingStream(opening(), broken, nothing_to_keep).run(answer)
    [(kind, error)] = transport.deliveries
    assert (kind, error.status) == ("error", 500)
    assert "planted fault" not in str(error.body), "no internals reach the client"
    assert opening.closed, "the upstream's connection does not outlive the exchange"
    assert loop_errors == [], "the failure is the exchange's, not a stray callback's"
    assert answer.exchange.outcome == "error"


async def test_the_failure_to_make_the_translator_is_the_one_answered() -> None:
    def refused() -> AnswerTranslator:
        raise RequestError("the planted refusal", param="tools")

    transport = KeptTransport()
    await PendingStream(Opening(answered("never read"))(), refused, nothing_to_keep).run(answer_on(transport))
    [(kind, error)] = transport.deliveries
    assert (kind, error.status, error.body["error"]["message"]) == ("error", 400, "the planted refusal")


async def test_an_upstream_that_cannot_be_opened_has_no_translator_made() -> None:
    failure = UpstreamError("The upstream answered 503.", status=503)
    opening, translator = Opening([], turns=0, failure=failure), CountedTranslator()
    transport = KeptTransport()
    await PendingStream(opening(), translator, nothing_to_keep).run(answer_on(transport))
    for _ in range(3):
        await asyncio.sleep(0)
    [(kind, error)] = transport.deliveries
    assert (kind, error.status) == ("error", 503)
    assert translator.made == 0


async def test_an_exchange_cancelled_while_the_upstream_is_opened_makes_no_translator() -> None:
    opening, translator = Opening(answered("late"), turns=100), CountedTranslator()
    running = asyncio.ensure_future(PendingStream(opening(), translator, nothing_to_keep).run(answer_on(KeptTransport())))
    await asyncio.sleep(0)  # its first step: the turns are scheduled
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    for _ in range(3):
        await asyncio.sleep(0)
    assert translator.made == 0


async def test_a_pending_stream_runs_once() -> None:
    pending = PendingStream(Opening(answered("once"))(), CountedTranslator(), nothing_to_keep)
    await pending.run(answer_on(KeptTransport()))
    with pytest.raises(RuntimeError, match=r"^a pending stream runs once$"):
        await pending.run(answer_on(KeptTransport()))


async def test_the_translator_made_is_handed_over_once() -> None:
    meanwhile = TranslatorMeanwhile(chat_translator)
    machine, events = meanwhile.made()
    assert [event["type"] for event in events] == ["response.created", "response.in_progress"]
    assert machine.start() == [], "its opening events were taken with it"
    with pytest.raises(RuntimeError, match=r"^the translator was handed over already$"):
        meanwhile.made()


async def test_a_translator_no_longer_wanted_is_never_made() -> None:
    translator = CountedTranslator()
    meanwhile = TranslatorMeanwhile(translator)
    meanwhile.cancel()
    for _ in range(3):
        await asyncio.sleep(0)
    assert translator.made == 0
    with pytest.raises(RuntimeError, match=r"^the translator was handed over already$"):
        meanwhile.made()
