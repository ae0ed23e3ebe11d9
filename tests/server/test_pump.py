"""``pump`` and ``Answer`` over a transport that keeps what it is told: a real Chat stream
translator fed scripted upstream batches, and what reaches the client, delivery by
delivery. The whole gateway does the same in tests/server/test_gateway.py; here each way
a stream can end is taken on its own: its end in the same delivery as its last batch,
when it finished, a body that just stopped, an upstream that breaks, a translator that
fails, and what an answer given says to the shutdown path and the client's watch."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from tests.support.transport import KeptTransport, answer_on, nothing_to_keep
from toolwire.config import GatewayConfig
from toolwire.errors import UpstreamError
from toolwire.protocol import parse_request
from toolwire.server import GatewaySettings, build_router
from toolwire.server import _answer as answer_module
from toolwire.server._answer import pump
from toolwire.server._exchange import Exchange
from toolwire.server._pipeline import ExchangePipeline, _ClientWatch
from toolwire.translate import ChatStreamTranslator, translate_request

KEY = "upstream-key-7Fq2w"  # no well-known prefix: only the configured-secret path hides it
LONG_AGO = 1_000_000_000  # created_at of the translators here: 2001
MOCK_ONLY = GatewayConfig.model_validate(
    {"server": {"store": "none"}, "upstreams": [{"name": "mock", "kind": "mock", "default": True}]}
)  # the pipeline's own tests: an answer with no upstream behind it


class Upstream:
    """``StreamBatches`` that end as ``end`` says: ``"done"``, cleanly with the last batch
    (as an SSE stream does when the read holding ``[DONE]`` comes); ``"stopped"``, a body
    that just stopped; an ``UpstreamError``, a connection that broke after the batches."""

    def __init__(self, batches: list[list[dict[str, Any]]], end: str | UpstreamError = "done") -> None:
        self._batches = batches
        self._end = end
        self.ended_cleanly = False

    async def _iterate(self) -> AsyncIterator[list[dict[str, Any]]]:
        for number, batch in enumerate(self._batches, 1):
            self.ended_cleanly = self._end == "done" and number == len(self._batches)
            yield batch
        if isinstance(self._end, UpstreamError):
            raise self._end

    def __aiter__(self) -> AsyncIterator[list[dict[str, Any]]]:
        return self._iterate()


class PlantedFault(ChatStreamTranslator):
    """The Chat translator, failing on a chunk that says ``boom``."""

    def feed(self, item: dict[str, Any], /) -> list[Any]:
        if item.get("boom"):
            raise RuntimeError("planted fault")
        return super().feed(item)


def text(content: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": content}}]}


def finish(reason: str = "stop") -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}


def translator(kind: type[ChatStreamTranslator] = ChatStreamTranslator) -> ChatStreamTranslator:
    request = parse_request(orjson.dumps({"model": "m", "input": "hi", "stream": True}))
    return kind(request, translate_request(request).tools, response_id="resp_1", created_at=LONG_AGO, model="m")


async def test_the_last_batch_and_the_end_of_the_stream_go_out_in_one_delivery() -> None:
    transport = KeptTransport()
    await pump(answer_on(transport), Upstream([[text("Hel")], [text("lo"), finish()]]), translator(), nothing_to_keep)
    first, last = transport.event_deliveries()
    assert first == (
        ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
         "response.output_text.delta"],
        False,
    )  # fmt: skip
    assert last[0][:1] == ["response.output_text.delta"] and last[0][-1] == "response.completed" and last[1] is True
    assert transport.deliveries[0] == ("open",) and len(transport.deliveries) == 3


async def test_a_stream_is_completed_when_it_ended_not_when_it_began() -> None:
    transport = KeptTransport()
    before = int(time.time())
    await pump(answer_on(transport), Upstream([[text("Hello"), finish()]]), translator(), nothing_to_keep)
    response = transport.events()[-1]["response"]
    assert response["status"] == "completed"
    assert response["created_at"] == LONG_AGO
    assert before <= response["completed_at"] <= int(time.time())


@pytest.mark.parametrize("every", [answer_module.KEEP_ALIVE_EVERY, 0.0])
async def test_an_upstream_that_only_keeps_its_stream_alive_is_told_in_progress_at_most_every_so_often(every: float) -> None:
    """Empty batches are the upstream's keep-alives: each may tell the client the response
    is in progress, once ``KEEP_ALIVE_EVERY`` has passed since the stream began or it was
    last told (none within the default's 10 s; with 0, each)."""
    transport = KeptTransport()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(answer_module, "KEEP_ALIVE_EVERY", every)
        await pump(answer_on(transport), Upstream([[], [], [], [text("Hi"), finish()]]), translator(), nothing_to_keep)
    opening, *beats = [kinds for kinds, _ in transport.event_deliveries()[:-1]]
    assert opening == ["response.created", "response.in_progress"]  # (with the first keep-alive)
    assert beats == ([] if every else [["response.in_progress"], ["response.in_progress"]])
    assert transport.events()[-1]["type"] == "response.completed"


async def test_a_stream_that_ended_cleanly_without_a_finish_reason_is_complete() -> None:
    """Some servers send ``[DONE]`` and no ``finish_reason``: the answer is whole."""
    transport = KeptTransport()
    await pump(answer_on(transport), Upstream([[text("Hello")]]), translator(), nothing_to_keep)
    completed = transport.events()[-1]
    assert completed["type"] == "response.completed"
    assert completed["response"]["output"][0]["content"][0]["text"] == "Hello"


async def test_a_body_that_just_stopped_fails_rather_than_pass_as_complete() -> None:
    transport = KeptTransport()
    await pump(answer_on(transport), Upstream([[text("Hel")], [text("lo")]], "stopped"), translator(), nothing_to_keep)
    failed = transport.events()[-1]
    assert failed["type"] == "response.failed"
    assert failed["response"]["error"]["message"] == (
        "The upstream stream ended before it finished (no finish reason, no [DONE])."
    )


async def test_an_upstream_that_breaks_at_once_still_opens_the_response_it_fails() -> None:
    transport = KeptTransport()
    broken = Upstream([], UpstreamError("The upstream connection broke: reset by peer."))
    await pump(answer_on(transport), broken, translator(), nothing_to_keep)
    assert transport.event_deliveries() == [
        (["response.created", "response.in_progress", "error", "response.failed"], True)
    ]
    assert transport.events()[-1]["response"]["error"]["message"] == "The upstream connection broke: reset by peer."


async def test_a_translator_that_fails_mid_stream_fails_the_response_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    transport = KeptTransport()
    caplog.set_level(logging.ERROR, logger="toolwire.server")
    await pump(answer_on(transport), Upstream([[text("Hel"), {"boom": True}]]), translator(PlantedFault),
               nothing_to_keep)  # fmt: skip
    [(types, last)] = transport.event_deliveries()
    assert types == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "error", "response.failed",
    ] and last  # fmt: skip
    message = "The gateway failed while translating the stream."
    assert transport.events()[-2]["message"] == message
    assert transport.events()[-1]["response"]["error"] == {"code": "server_error", "message": message}
    [record] = [r for r in caplog.records if r.name == "toolwire.server"]
    assert record.getMessage() == "stream translation failed"
    assert record.exc_info is not None and str(record.exc_info[1]) == "planted fault"


async def test_only_failure_events_are_redacted_the_model_s_text_passes_as_it_is() -> None:
    """An upstream may echo its key in an error; what the model wrote is the model's,
    in the stream's last delivery too."""
    transport = KeptTransport()
    whole = Upstream([[text(f"the key is {KEY}"), finish()]])
    await pump(answer_on(transport, secrets=(KEY,)), whole, translator(), nothing_to_keep)
    [(_, last)] = transport.event_deliveries()
    assert last
    events = transport.events()
    assert [e["delta"] for e in events if e["type"] == "response.output_text.delta"] == [f"the key is {KEY}"]
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == f"the key is {KEY}"

    transport = KeptTransport()
    broken = Upstream([[text("Hello")]], UpstreamError(f"The upstream said: invalid key {KEY}."))
    await pump(answer_on(transport, secrets=(KEY,)), broken, translator(), nothing_to_keep)
    events = transport.events()
    assert events[-2]["message"] == "The upstream said: invalid key [redacted]."
    assert events[-1]["response"]["error"]["message"] == "The upstream said: invalid key [redacted]."
    assert KEY not in orjson.dumps(events).decode()


@pytest.mark.parametrize(("response", "outcome"), [({"status": "incomplete"}, "incomplete"), ({}, "completed")])
async def test_a_whole_response_is_recorded_by_its_status(response: dict[str, Any], outcome: str) -> None:
    answer = answer_on(KeptTransport())
    await answer.response({"id": "resp_1", "object": "response", **response})
    assert answer.exchange.outcome == outcome


async def test_after_an_error_the_shutdown_path_sends_nothing_more() -> None:
    transport = KeptTransport()
    answer = answer_on(transport)
    await answer.error(UpstreamError("The upstream is down."))
    await answer.cut_short()
    [(kind, error)] = transport.deliveries
    assert kind == "error" and error.status == 502
    assert error.body["error"]["message"] == "The upstream is down."


@pytest.mark.parametrize("given", ["error", "response", "stream"])
async def test_a_client_leaving_after_its_whole_answer_does_not_cancel_the_exchange(given: str) -> None:
    """The exchange may still be closing its upstream stream: the watch leaves it be.
    Before the answer is out, the same watch cancels it."""
    answer = answer_on(KeptTransport())
    exchange_task = asyncio.ensure_future(asyncio.sleep(30))
    watch = _ClientWatch(exchange_task, answer)
    watch()
    assert exchange_task.cancelling() == 1 and watch.left  # nothing was out yet
    exchange_task.uncancel()
    watch = _ClientWatch(exchange_task, answer)
    if given == "error":
        await answer.error(UpstreamError("The upstream is down."))
    elif given == "response":
        await answer.response({"id": "resp_1", "object": "response", "status": "completed"})
    else:
        await answer.events([{"type": "response.completed", "response": {}}], last=True)
    watch()
    assert exchange_task.cancelling() == 0 and not watch.left
    exchange_task.cancel()


class BrokenTransport(KeptTransport):
    """A transport whose event deliveries fail as a bug would (not as a client leaving)."""

    async def send_events(self, events: list[Any], *, last: bool) -> None:
        raise RuntimeError("planted transport fault")


async def test_an_exchange_that_fails_unexpectedly_is_logged_and_gives_its_place_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pipeline = ExchangePipeline(build_router(MOCK_ONLY), GatewaySettings(max_streams=1))
    caplog.set_level(logging.ERROR, logger="toolwire.server")
    exchange = await pipeline.serve(orjson.dumps({"model": "m", "input": "hi", "stream": True}), BrokenTransport())
    assert exchange is not None and exchange.finished_at is not None
    failed = [r for r in caplog.records if r.getMessage() == f"exchange {exchange.request_id} failed"]
    assert len(failed) == 1 and failed[0].exc_info is not None and str(failed[0].exc_info[1]) == "planted transport fault"
    assert pipeline.streams.in_progress == 0
    assert exchange.outcome == "failed"  # the translator had ended the response as failed before it broke again


class BrokenOpening(KeptTransport):
    """A transport that fails as a bug would when the stream is to be opened."""

    async def open_stream(self) -> None:
        raise RuntimeError("planted opening fault")


async def test_a_fault_of_the_gateway_is_recorded_as_an_error_not_as_the_client_leaving(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pipeline = ExchangePipeline(build_router(MOCK_ONLY), GatewaySettings())
    caplog.set_level(logging.INFO, logger="toolwire.server")
    exchange = await pipeline.serve(orjson.dumps({"model": "m", "input": "hi", "stream": True}), BrokenOpening())
    assert exchange is not None
    assert (exchange.outcome, exchange.error_kind) == ("error", "RuntimeError")
    assert exchange.error == "The gateway failed while answering (RuntimeError)."
    messages = [r.getMessage() for r in caplog.records]
    assert f"exchange {exchange.request_id} failed" in messages
    assert not [m for m in messages if m.startswith("client left")]


class FailingObserver:
    """An observer with a bug: its ``finished`` raises."""

    wants_traffic = False

    def started(self, exchange: Exchange) -> None:
        pass

    def finished(self, exchange: Exchange) -> None:
        raise RuntimeError("planted observer fault")


@dataclass
class SeenObserver:
    finished_ids: list[str] = field(default_factory=list)
    wants_traffic: bool = False

    def started(self, exchange: Exchange) -> None:
        pass

    def finished(self, exchange: Exchange) -> None:
        self.finished_ids.append(exchange.request_id)


async def test_an_observer_that_fails_is_logged_and_the_others_still_see_the_exchange(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failing, seen = FailingObserver(), SeenObserver()
    pipeline = ExchangePipeline(build_router(MOCK_ONLY), GatewaySettings(), observers=[failing, seen])
    caplog.set_level(logging.ERROR, logger="toolwire.server")
    transport = KeptTransport()
    exchange = await pipeline.serve(orjson.dumps({"model": "m", "input": "hi", "stream": True}), transport)
    assert exchange is not None and exchange.outcome == "completed"
    assert transport.events()[-1]["type"] == "response.completed"
    assert seen.finished_ids == [exchange.request_id]
    [record] = [r for r in caplog.records if r.name == "toolwire.server"]
    assert record.getMessage() == f"observer {failing!r} failed"
    assert record.exc_info is not None and str(record.exc_info[1]) == "planted observer fault"


class Stalled(Upstream):
    """The batches, then an upstream that sends nothing more; ``stalled`` is set once
    the gateway has taken every batch and waits for the next."""

    def __init__(self, batches: list[list[dict[str, Any]]]) -> None:
        super().__init__(batches, "stopped")
        self.stalled = asyncio.Event()

    async def _iterate(self) -> AsyncIterator[list[dict[str, Any]]]:
        for batch in self._batches:
            yield batch
        self.stalled.set()
        await asyncio.Event().wait()
        yield []  # never reached


async def test_a_client_that_leaves_is_charged_the_usage_the_upstream_already_reported() -> None:
    answer = answer_on(KeptTransport())
    usage = {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}}
    upstream = Stalled([[text("Hello")], [finish(), usage]])
    pumping = asyncio.create_task(pump(answer, upstream, translator(), nothing_to_keep))
    await asyncio.wait_for(upstream.stalled.wait(), 10)
    pumping.cancel()  # the client left: its exchange is cancelled
    with pytest.raises(asyncio.CancelledError):
        await pumping
    answer.conclude()
    exchange = answer.exchange
    assert exchange.outcome == "disconnected"
    assert (exchange.usage["input_tokens"], exchange.usage["output_tokens"]) == (11, 3)
