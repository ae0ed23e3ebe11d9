"""The pure core's cost, in process, without any I/O.

    python -m bench.core [--quick]

Per request body: ``parse_request`` (bytes -> typed request), ``translate_request``
(-> the Chat Completions dict) and ``orjson.dumps`` of that dict (what the upstream
client sends), each timed alone with ``time.perf_counter_ns`` over many iterations; the
median is reported.

Per turn of a long session (``history_cost``): for a Codex session growing one tool turn
per request from 0, 50, 200 and 800 turns of history (``bodies.session_series``), what
each request costs when it continues the one before it (the gateway keeps the history:
only the new items are parsed, translated and serialized), against what the same
request costs parsed, translated and serialized whole (the first request of a session,
or with the history cache off).

The same turns again with the processor's caches evicted before each request
(``evict_caches``: a buffer larger than the last-level cache written through), its steps
then taken back to back, and the request let go after another eviction: the memory-bound
part of a turn, which the hot figures hide. A long session's turn passes over its
history's items several times (the item list of the request and of the kept history, the
Chat messages of the translation, their freeing: thousands of objects each time) and over
its bytes (the comparison of the known prefix, the Chat body's copy); hot, those passes
hit the cache. Cold, this is an upper bound: the code and the interpreter's own objects
are evicted too, which a served turn partly finds in cache. Inside a serving gateway on
2026-12-06 (marks around the calls, medians over 600 continuing 800-turn turns) the parse
took 264 us and the translation 250 us: between the hot figures (142, 77) and the cold
ones (453, 247) measured here the same hour.

Per stream chunk: a fresh ``ChatStreamTranslator`` per iteration gets ``start()``, every
chunk of the canned upstream answer through ``feed`` (timed as one loop, divided by the
number of chunks), then ``finish()``. "Pipeline" adds what the gateway does around
``feed`` for each chunk: ``orjson.loads`` of the SSE data line, and ``orjson.dumps`` +
``encode_event`` of every event it returns; it is the CPU cost of one upstream chunk,
from bytes in to bytes out, minus the sockets. The answer is the text reply and, as a
second row, the tool-call reply (the tool the canned upstream would call).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import orjson

from . import upstream as canned
from .bodies import Body, build_all, session_series

_NS = 1e-3  # ns -> us


@dataclass
class RequestCost:
    body: str
    body_bytes: int
    chat_bytes: int
    parse_us: float
    translate_us: float
    dumps_us: float
    total_us: float  # parse + translate + dumps, timed together
    iterations: int


@dataclass
class StreamCost:
    body: str
    reply: str  # "text" / "tool call"
    chunks: int  # upstream chunks fed (role, fragments, finish, usage)
    events: int  # Responses events produced (start + feed + finish)
    feed_us_per_chunk: float
    pipeline_us_per_chunk: float
    start_finish_us: float
    iterations: int


@dataclass
class TurnCost:
    turns: int  # tool turns in the history of the first request of the series
    body_bytes: int
    items: int
    chat_bytes: int
    # each request continuing the one before (medians over the series, several passes)
    parse_us: float
    translate_us: float
    serialize_us: float  # orjson.dumps of what goes upstream (TranslatedRequest.wire_body)
    total_us: float
    # the same request whole, no history kept
    whole_parse_us: float
    whole_translate_us: float
    whole_serialize_us: float
    whole_total_us: float
    requests: int  # continuing requests measured
    # each continuing request again, from evicted caches (evict_caches; _continuing_turns)
    cold_parse_us: float = 0.0
    cold_translate_us: float = 0.0
    cold_serialize_us: float = 0.0
    cold_free_us: float = 0.0  # the request, its translation and its Chat body let go
    cold_total_us: float = 0.0  # parse + translate + serialize + free


EVICTION_BYTES = 128 * 1024 * 1024
"""Larger than any last-level cache of the machines the bench runs on (32 MB on the AMD
EPYC host; 2026-12-06)."""
_CACHE_LINE = 64
_eviction_buffer = bytearray()


def evict_caches() -> None:
    """Push this process's data out of the processor's caches: write one byte in every
    cache line of a buffer larger than the last-level cache (about 10 ms)."""
    global _eviction_buffer
    if not _eviction_buffer:
        _eviction_buffer = bytearray(EVICTION_BYTES)
    _eviction_buffer[::_CACHE_LINE] = bytes([_eviction_buffer[0] ^ 1]) * (EVICTION_BYTES // _CACHE_LINE)


def _median_ns(function: Callable[[], Any], iterations: int, warmup: int) -> float:
    for _ in range(warmup):
        function()
    samples = []
    clock = time.perf_counter_ns
    for _ in range(iterations):
        started = clock()
        function()
        samples.append(clock() - started)
    return float(statistics.median(samples))


def translator_parts() -> tuple[Any, Any, Any, Any]:
    from toolwire.protocol import encode_event, parse_request
    from toolwire.translate import ChatStreamTranslator, translate_request

    return parse_request, translate_request, ChatStreamTranslator, encode_event


def chat_body(body: Body) -> bytes:
    """The Chat Completions body toolwire sends upstream for ``body`` (the direct run's body)."""
    parse_request, translate_request, _, _ = translator_parts()
    return orjson.dumps(translate_request(parse_request(body.data)).chat)


def tool_reply_chunks(chat: dict[str, Any], chunks: int = 40) -> list[dict[str, Any]]:
    """The tool-call answer the canned upstream gives to this Chat request."""
    return canned.Upstream(reply="tool", chunks=chunks)._tool_call_for(orjson.dumps(chat))


def request_cost(body: Body, iterations: int) -> RequestCost:
    parse_request, translate_request, _, _ = translator_parts()
    data = body.data
    request = parse_request(data)
    chat = translate_request(request).chat
    warmup = max(3, iterations // 10)
    parse = _median_ns(lambda: parse_request(data), iterations, warmup)
    translate = _median_ns(lambda: translate_request(request), iterations, warmup)
    dumps = _median_ns(lambda: orjson.dumps(chat), iterations, warmup)
    total = _median_ns(lambda: orjson.dumps(translate_request(parse_request(data)).chat), iterations, warmup)
    return RequestCost(
        body=body.name, body_bytes=len(data), chat_bytes=len(orjson.dumps(chat)),
        parse_us=parse * _NS, translate_us=translate * _NS, dumps_us=dumps * _NS, total_us=total * _NS,
        iterations=iterations,
    )


def stream_cost(body: Body, reply: str, iterations: int, chunk_count: int = 40) -> StreamCost:
    parse_request, translate_request, translator_class, encode_event = translator_parts()
    request = parse_request(body.data)
    translated = translate_request(request)
    chunks = canned.text_chunks(chunk_count) if reply == "text" else tool_reply_chunks(translated.chat, chunk_count)
    lines = [orjson.dumps(chunk) for chunk in chunks]  # the SSE data lines the gateway reads
    dumps, loads = orjson.dumps, orjson.loads
    clock = time.perf_counter_ns

    def new() -> Any:
        return translator_class(request, translated.tools, response_id="resp_bench", created_at=1796000000,
                                model=request.model)

    events_count = 0
    feed_samples: list[float] = []
    pipeline_samples: list[float] = []
    edge_samples: list[float] = []
    warmup = max(3, iterations // 10)
    for index in range(warmup + iterations):
        # feed only
        parsed = [loads(line) for line in lines]
        translator = new()
        started = clock()
        events = translator.start()
        edge = clock() - started
        started = clock()
        for chunk in parsed:
            events += translator.feed(chunk)
        fed = clock() - started
        started = clock()
        events += translator.finish()
        edge += clock() - started
        # the whole per-chunk pipeline: decode, feed, encode each event
        translator = new()
        for event in translator.start():
            encode_event(dumps(event), event["type"])
        started = clock()
        for line in lines:
            for event in translator.feed(loads(line)):
                encode_event(dumps(event), event["type"])
        piped = clock() - started
        for event in translator.finish():
            encode_event(dumps(event), event["type"])
        if index >= warmup:
            feed_samples.append(fed / len(chunks))
            pipeline_samples.append(piped / len(chunks))
            edge_samples.append(edge)
            events_count = len(events)
    return StreamCost(
        body=body.name, reply="text" if reply == "text" else "tool call", chunks=len(chunks), events=events_count,
        feed_us_per_chunk=statistics.median(feed_samples) * _NS,
        pipeline_us_per_chunk=statistics.median(pipeline_samples) * _NS,
        start_finish_us=statistics.median(edge_samples) * _NS,
        iterations=iterations,
    )


HISTORY_LENGTHS = (0, 50, 200, 800)


def history_cost(turns: int, series: int, passes: int) -> TurnCost:
    """Per-turn cost of a session growing from ``turns`` tool turns, over ``series`` requests
    sent ``passes`` times (each pass starts the session over: its first request is whole)."""
    from toolwire.protocol import KNOWN_HISTORIES

    parse_request, translate_request, _, _ = translator_parts()
    bodies = [body.data for body in session_series(turns, series + 1)]
    median = _continuing_turns(bodies, passes, cold=False)
    cold = _continuing_turns(bodies, passes, cold=True)
    whole_data = bodies[-1]
    capacity = KNOWN_HISTORIES.max_bytes
    KNOWN_HISTORIES.configure(KNOWN_HISTORIES.max_entries, 0)  # no history: every request whole
    try:
        request = parse_request(whole_data)
        chat = translate_request(request).chat
        iterations = max(3, passes)
        whole_parse = _median_ns(lambda: parse_request(whole_data), iterations, 1)
        whole_translate = _median_ns(lambda: translate_request(request), iterations, 1)
        whole_serialize = _median_ns(lambda: orjson.dumps(chat), iterations, 1)
    finally:
        KNOWN_HISTORIES.configure(KNOWN_HISTORIES.max_entries, capacity)
    return TurnCost(
        turns=turns, body_bytes=len(whole_data), items=len(request.input_items()), chat_bytes=len(orjson.dumps(chat)),
        parse_us=median["parse"], translate_us=median["translate"], serialize_us=median["serialize"],
        total_us=median["total"],
        whole_parse_us=whole_parse * _NS, whole_translate_us=whole_translate * _NS,
        whole_serialize_us=whole_serialize * _NS,
        whole_total_us=(whole_parse + whole_translate + whole_serialize) * _NS,
        requests=passes * (len(bodies) - 1),
        cold_parse_us=cold["parse"], cold_translate_us=cold["translate"], cold_serialize_us=cold["serialize"],
        cold_free_us=cold["free"], cold_total_us=cold["total"],
    )


def _continuing_turns(bodies: list[bytes], passes: int, *, cold: bool) -> dict[str, float]:
    """Each of ``bodies`` after the first continuing the one before, ``passes`` times (each
    pass starts the session over: its first request is whole, not measured): the medians of
    parse, translate, serialize and their total, in microseconds. ``cold``: each request
    timed from ``evict_caches`` (its steps back to back, as a served turn takes them), then
    let go after another, timed too ("free", in the total); hot, the one before is let go
    as the next is parsed."""
    from toolwire.protocol import KNOWN_HISTORIES

    parse_request, translate_request, _, _ = translator_parts()
    clock = time.perf_counter_ns
    samples: dict[str, list[float]] = {"parse": [], "translate": [], "serialize": [], "total": []}
    if cold:
        samples["free"] = []
    KNOWN_HISTORIES.clear()
    for _ in range(passes):
        parse_request(bodies[0]).history()  # the session starts: learned whole, not measured
        translate_request(parse_request(bodies[0]))
        for data in bodies[1:]:
            if cold:
                evict_caches()
            started = clock()
            request = parse_request(data)
            parsed = clock()
            translated = translate_request(request)
            translated_at = clock()
            chat = orjson.dumps(translated.wire_body())
            done = clock()
            samples["parse"].append(parsed - started)
            samples["translate"].append(translated_at - parsed)
            samples["serialize"].append(done - translated_at)
            total = done - started
            if cold:
                evict_caches()  # (a served request is let go after its answer streamed)
                freeing = clock()
                del request, translated, chat
                freed = clock() - freeing
                samples["free"].append(freed)
                total += freed
            samples["total"].append(total)
        KNOWN_HISTORIES.clear()
    return {name: statistics.median(values) * _NS for name, values in samples.items()}


def measure(bodies: list[Body], quick: bool = False) -> dict[str, list[dict[str, Any]]]:
    request_iterations = 40 if quick else 400
    stream_iterations = 40 if quick else 1000
    gc.collect()
    requests = [asdict(request_cost(body, request_iterations)) for body in bodies]
    streams = [
        asdict(stream_cost(body, reply, stream_iterations)) for body in bodies for reply in ("text", "tool")
    ]
    history = [asdict(history_cost(turns, 8 if quick else 16, 2 if quick else 5)) for turns in HISTORY_LENGTHS]
    return {"requests": requests, "streams": streams, "history": history}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.core", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    result = measure(build_all(), args.quick)
    for row in result["requests"]:
        print(
            f"{row['body']}: {row['body_bytes']} B -> chat {row['chat_bytes']} B: parse {row['parse_us']:.0f} us, "
            f"translate {row['translate_us']:.0f} us, dumps {row['dumps_us']:.0f} us, total {row['total_us']:.0f} us"
        )
    for row in result["streams"]:
        print(
            f"{row['body']} {row['reply']}: {row['chunks']} chunks -> {row['events']} events: feed "
            f"{row['feed_us_per_chunk']:.2f} us/chunk, pipeline {row['pipeline_us_per_chunk']:.2f} us/chunk, "
            f"start+finish {row['start_finish_us']:.0f} us"
        )
    for row in result["history"]:
        print(
            f"session after {row['turns']} turns ({row['body_bytes']} B, {row['items']} items): per turn parse "
            f"{row['parse_us']:.0f} us, translate {row['translate_us']:.0f} us, serialize {row['serialize_us']:.0f} us,"
            f" total {row['total_us']:.0f} us; whole {row['whole_total_us']:.0f} us; cold caches: parse "
            f"{row['cold_parse_us']:.0f} us, translate {row['cold_translate_us']:.0f} us, serialize "
            f"{row['cold_serialize_us']:.0f} us, free {row['cold_free_us']:.0f} us, total {row['cold_total_us']:.0f} us"
        )


if __name__ == "__main__":
    main()
