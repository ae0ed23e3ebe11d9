"""A Chat stream's plain chunks read from their bytes (``SSEBatches`` with
``PlainContentFrames``) give exactly what decoding and parsing every event gives: the same
objects in the same batches, and through the translator the same answer, in fewer text
deltas. Whatever the server's shape of chunk, its SSE framing, and wherever the network
cut the reads."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import orjson
import pytest
from aiohttp import StreamReader
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolwire.errors import UpstreamError, UpstreamLimitError
from toolwire.protocol import (
    PlainChunks,
    PlainContentFrames,
    StreamItem,
    WholeAnswer,
    parse_request,
)
from toolwire.translate import ChatStreamTranslator, translate_request
from toolwire.upstream import UpstreamLimits
from toolwire.upstream._sse_batches import QUIET, SSEBatches, parse_json_object

JSON = dict[str, Any]
WHERE = "http://upstream.test/v1"
TOOL = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}


class _Content(StreamReader):
    """The body of an upstream's answer, as ``aiohttp``'s ``StreamReader`` hands it on:
    these reads, then ``b""`` (the end). Nothing is ever buffered (each read is made as it
    is asked for), so each comes from ``readany`` as it is; no read waits, so none can stall."""

    def __init__(self, reads: list[bytes]) -> None:
        super().__init__(asyncio.Protocol(), 2**16, loop=asyncio.get_running_loop())
        self._reads = iter(reads)

    async def readany(self) -> bytes:
        return next(self._reads, b"")

    def set_exception(self, exc: BaseException, exc_cause: BaseException | None = None) -> None:
        raise AssertionError(f"a read that does not wait stalled: {exc!r}")


class _Response:
    content_type = "text/event-stream"

    def __init__(self, reads: list[bytes]) -> None:
        self.content = _Content(reads)


def read_batches(reads: list[bytes], *, plain: bool, limits: UpstreamLimits | None = None) -> tuple[list[list[StreamItem]], bool]:
    """The batches ``SSEBatches`` makes of ``reads`` (``plain``: as the Chat backend reads)."""

    async def read() -> tuple[list[list[StreamItem]], bool]:
        frames = PlainContentFrames() if plain else None
        batches = SSEBatches(_Response(reads), 5.0, parse_json_object, limits=limits, frames=frames, where=WHERE)  # type: ignore[arg-type]
        return [batch async for batch in batches], batches.ended_cleanly

    return asyncio.run(read())


def objects(batch: list[StreamItem]) -> list[JSON]:
    return [o for item in batch for o in (item.objects() if isinstance(item, PlainChunks) else [item])]


def translated(batches: list[list[StreamItem]], *, tools: bool) -> tuple[list[JSON], JSON, list[str]]:
    request = parse_request({"model": "m", "input": "hi", "tools": [TOOL] if tools else []})
    machine = ChatStreamTranslator(request, translate_request(request).tools, response_id="resp_1", created_at=1, model="m")
    events = machine.start()
    for batch in batches:
        for item in batch:
            events += machine.feed(item)
    events += machine.finish(completed_at=2)
    return [dict(event) for event in events], machine.response, machine.conversions


def text_deltas_joined(events: list[JSON]) -> list[JSON]:
    """``events`` with each run of text deltas of one part as one delta, numbered again."""
    joined: list[JSON] = []
    for event in events:
        last = joined[-1] if joined else None
        if (
            last is not None
            and event["type"] == last["type"] == "response.output_text.delta"
            and (event["item_id"], event["content_index"]) == (last["item_id"], last["content_index"])
        ):
            joined[-1] = {**last, "delta": last["delta"] + event["delta"]}
        else:
            joined.append(event)
    return [{**event, "sequence_number": n} for n, event in enumerate(joined)]


def failure(reads: list[bytes], *, plain: bool) -> tuple[str, str] | None:
    try:
        read_batches(reads, plain=plain)
    except UpstreamError as error:
        return type(error).__name__, error.message
    return None


def assert_same_on_both_paths(reads: list[bytes], *, tools: bool = True) -> list[list[StreamItem]]:
    failed = failure(reads, plain=False)
    assert failure(reads, plain=True) == failed
    if failed:
        return []
    plain, plain_clean = read_batches(reads, plain=True)
    full, full_clean = read_batches(reads, plain=False)
    assert [objects(batch) for batch in plain] == full
    assert plain_clean == full_clean
    plain_events, plain_response, plain_conversions = translated(plain, tools=tools)
    full_events, full_response, full_conversions = translated(full, tools=tools)
    assert text_deltas_joined(plain_events) == text_deltas_joined(full_events)
    assert plain_response == full_response
    assert plain_conversions == full_conversions
    return plain


# ------------------------------------------------------------ what servers send

OPENAI = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7, "model": "m", "system_fingerprint": "fp"}


def openai_chunk(delta: JSON, finish: str | None = None) -> JSON:
    return {**OPENAI, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}


def vllm_chunk(delta: JSON, finish: str | None = None) -> JSON:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish, "stop_reason": None}
    return {"id": "chatcmpl-v", "object": "chat.completion.chunk", "created": 7, "model": "qwen", "choices": [choice]}


def ollama_chunk(delta: JSON, finish: str | None = None) -> JSON:
    choice = {"index": 0, "delta": {"role": "assistant", **delta}, "finish_reason": finish}
    return {"id": "chatcmpl-o", "object": "chat.completion.chunk", "created": 7, "model": "llama", "system_fingerprint": "fp_ollama",
            "choices": [choice]}  # fmt: skip


def llama_cpp_chunk(delta: JSON, finish: str | None = None) -> JSON:
    return {"choices": [{"finish_reason": finish, "index": 0, "delta": delta}], "created": 7, "id": "chatcmpl-l",
            "model": "gguf", "system_fingerprint": "b1", "object": "chat.completion.chunk"}  # fmt: skip


SHAPES = {"openai": openai_chunk, "vllm": vllm_chunk, "ollama": ollama_chunk, "llama.cpp": llama_cpp_chunk}
WORDS = ["Hello", " there", ", \"quoted\"", " \\ back", " caf\u00e9", " \U0001f600", "\n\n", " done."]


def frames_of(chunks: list[JSON], *, done: bool = True) -> bytes:
    framed = b"".join(b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks)
    return framed + (b"data: [DONE]\n\n" if done else b"")


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reads", ["one read per event", "the whole answer in one read"])
def test_each_server_shape_is_read_from_its_bytes(shape: str, reads: str) -> None:
    make = SHAPES[shape]
    chunks = [make({"role": "assistant", "content": ""}), *(make({"content": word}) for word in WORDS)]
    chunks += [make({}, "stop"), {**make({}), "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}]
    body = frames_of(chunks)
    split = [frame + b"\n\n" for frame in body.split(b"\n\n")[:-1]] if reads == "one read per event" else [body]
    batches = assert_same_on_both_paths(split)
    plain = [item for batch in batches for item in batch if isinstance(item, PlainChunks)]
    assert "".join(item.text for item in plain) == "".join(WORDS[1:])  # the first teaches the shape
    assert len(plain) == (len(WORDS) - 1 if reads == "one read per event" else 1)


def test_a_server_that_changes_its_bytes_every_chunk_is_read_in_full() -> None:
    chunks = [{**openai_chunk({"content": f"w{n} "}), "obfuscation": "x" * n} for n in range(12)]
    batches = assert_same_on_both_paths([frames_of(chunks)])
    assert not any(isinstance(item, PlainChunks) for batch in batches for item in batch)


def test_a_read_that_begins_inside_an_event_is_read_from_its_next_blank_line() -> None:
    body = frames_of([openai_chunk({"content": word}) for word in WORDS])
    cut = body.index(b"\n\n", body.index(b"\n\n") + 2) - 5  # inside the second frame
    batches = assert_same_on_both_paths([body[:cut], body[cut:]])
    assert [type(item).__name__ for item in batches[1]] == ["dict", "PlainChunks"]


@pytest.mark.parametrize("pending", [b'data: {"pending": 1}\n', b"data: [1,\n", b"data:", b"event: x\n"])
def test_a_frame_of_the_shape_that_ends_an_event_begun_before_is_decoded_with_it(pending: bytes) -> None:
    """The decoder holds part of an event at the end of a read; the next read begins with a
    frame of the learned shape: its line is the rest of that event, not a chunk alone."""
    learned = frames_of([openai_chunk({"content": "a"})], done=False)
    after = frames_of([openai_chunk({"content": "b"}), openai_chunk({"content": "c"})])
    assert_same_on_both_paths([learned + pending, after])


def test_runs_of_plain_frames_are_read_wherever_they_are_in_a_read() -> None:
    """Between other events, after a blank line, at the start and at the end of a read."""
    learned = frames_of([openai_chunk({"content": "a"})], done=False)
    run = frames_of([openai_chunk({"content": "b"}), openai_chunk({"content": "c"})], done=False)
    other = frames_of([{**openai_chunk({"content": "d"}), "usage": {"total_tokens": 1}}], done=False)
    batches = assert_same_on_both_paths([learned, b"\n\n" + run + other + run + b": ping\n\n" + run, run + b"data: [DONE]\n\n"])
    kinds = [[type(item).__name__ for item in batch] for batch in batches]
    assert kinds == [["dict"], ["PlainChunks", "dict", "PlainChunks", "PlainChunks"], ["PlainChunks"]]
    assert [item.text for item in batches[1] if isinstance(item, PlainChunks)] == ["bc", "bc", "bc"]


def test_a_frame_of_the_shape_over_the_event_limit_is_the_decoders_to_refuse() -> None:
    long_word = "x" * 600
    body = frames_of([openai_chunk({"content": "a"}), openai_chunk({"content": long_word})])
    limits = UpstreamLimits(max_event_bytes=500)
    with pytest.raises(UpstreamLimitError, match="upstream_max_event_bytes"):
        read_batches([body], plain=True, limits=limits)
    batches, _ = read_batches([body], plain=True, limits=UpstreamLimits(max_line_bytes=2048))
    assert objects(batches[0])[1]["choices"][0]["delta"]["content"] == long_word


def test_nothing_after_the_end_marker_is_read() -> None:
    body = frames_of([openai_chunk({"content": "a"}), openai_chunk({"content": "b"})]) + frames_of(
        [openai_chunk({"content": "c"})]
    )
    batches, clean = read_batches([body], plain=True)
    assert clean and [o["choices"][0]["delta"]["content"] for o in objects(batches[0])] == ["a", "b"]


# ------------------------------------------------------------ any stream, any cut

_TEXT = st.sampled_from(["Hi", " there", "", " `code`", "<tool_call>", '{"name": "get_weather", "arguments": {}}',
                         "</tool_call>", "<think>", "hm", "</think>", "\u00e9\U0001f600", '"\\', "\n"])  # fmt: skip


_BLANKS = st.sampled_from([b"", b" ", b"\t", b"\r", b" \t", b"\r "])


@st.composite
def stream_bytes(draw: st.DrawFn) -> bytes:
    make = SHAPES[draw(st.sampled_from(sorted(SHAPES)))]
    chunks: list[JSON] = []
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(["text"] * 6 + ["role", "reasoning", "call", "usage", "null field", "empty"]))
        if kind == "text":
            chunks.append(make({"content": draw(_TEXT)}))
        elif kind == "role":
            chunks.append(make({"role": "assistant", "content": draw(_TEXT)}))
        elif kind == "reasoning":
            chunks.append(make({"reasoning_content": "thinking"}))
        elif kind == "call":
            call = {"index": 0, "id": "call_1", "function": {"name": "get_weather", "arguments": "{}"}}
            chunks.append(make({"tool_calls": [call]}))
        elif kind == "usage":
            chunks.append({**make({"content": "u"}), "usage": {"prompt_tokens": 1, "completion_tokens": 1}})
        elif kind == "null field":
            chunks.append(make({"content": draw(_TEXT), "reasoning_content": None}))
        else:
            chunks.append(make({}))
    chunks.append(make({}, draw(st.sampled_from(["stop", "length", "tool_calls"]))))
    frames: list[bytes] = []
    for chunk in chunks:
        how = draw(st.sampled_from(["compact"] * 8 + ["spaced", "no space", "crlf", "two lines", "comment", "named", "blanks"]))
        data = json.dumps(chunk).encode() if how == "spaced" else orjson.dumps(chunk)
        if how == "blanks":  # around the content's string, a CR among them ending the line there
            content = b'"content":' + orjson.dumps(chunk["choices"][0]["delta"].get("content"))
            before, after = draw(_BLANKS), draw(_BLANKS)
            data = data.replace(content, content[:10] + before + content[10:] + after, 1)
        if how == "no space":
            frames.append(b"data:" + data + b"\n\n")
        elif how == "crlf":
            frames.append(b"data: " + data + b"\r\n\r\n")
        elif how == "two lines":
            cut = data.index(b",") + 1
            frames.append(b"data: " + data[:cut] + b"\ndata: " + data[cut:] + b"\n\n")
        elif how == "comment":
            frames.append(b": keep-alive\n\ndata: " + data + b"\n\n")
        elif how == "named":
            frames.append(b"event: message\ndata: " + data + b"\n\n")
        else:
            frames.append(b"data: " + data + b"\n\n")
    ending = draw(st.sampled_from([b"data: [DONE]\n\n", b"data: [DONE]\n\ndata: {}\n\n", b"", b"data: {\"x\""]))
    bom = draw(st.sampled_from([b"", b"\xef\xbb\xbf"]))
    return bom + b"".join(frames) + ending


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=stream_bytes(), cuts=st.lists(st.integers(0, 4000), max_size=8), tools=st.booleans())
def test_any_stream_cut_anywhere_reads_the_same_on_both_paths(body: bytes, cuts: list[int], tools: bool) -> None:
    points = sorted({min(cut, len(body)) for cut in cuts})
    reads = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True) if b > a]
    assert_same_on_both_paths(reads, tools=tools)


def test_a_reading_left_between_batches_goes_on_where_it_stopped() -> None:
    # The second loop over the same batches continues the one reading (its decoder holds
    # the half event the first read ended in), as the Responses backend reads a stream.
    whole = frames_of([openai_chunk({"content": "one"}), openai_chunk({"content": "two"})])
    cut = whole.index(b"two") - 3

    async def read() -> list[list[StreamItem]]:
        batches = SSEBatches(_Response([whole[:cut], whole[cut:]]), 5.0, parse_json_object, where=WHERE)  # type: ignore[arg-type]
        seen = []
        async for batch in batches:
            seen.append(batch)
            break
        seen += [batch async for batch in batches]
        await batches.aclose()
        return seen

    read_in_two = [chunk for batch in asyncio.run(read()) for chunk in objects(batch)]
    assert read_in_two == [chunk for batch in read_batches([whole], plain=False)[0] for chunk in objects(batch)]
    assert [chunk["choices"][0]["delta"]["content"] for chunk in read_in_two] == ["one", "two"]


@pytest.mark.parametrize("plain", [False, True], ids=["events", "plain chunks"])
def test_the_watch_s_comment_before_the_first_bytes_is_no_part_of_the_answer(plain: bool) -> None:
    """Read alone, it is an empty batch and the answer is still to be sniffed; read with the
    answer's first bytes (they came right after it), it is taken off them first: a whole
    JSON answer, even one that said it was an event stream, is still known as one."""
    whole = orjson.dumps({"id": "chatcmpl-1", "choices": [{"index": 0, "message": {"content": "hi"}}]})
    batches, clean = read_batches([QUIET, QUIET + whole], plain=plain)
    assert batches[0] == [] and len(batches) == 2 and clean
    [answered] = batches[1]
    assert isinstance(answered, WholeAnswer) and answered.answer == orjson.loads(whole)
    chunk = {"choices": [{"index": 0, "delta": {"content": "x"}}]}
    batches, clean = read_batches([QUIET, QUIET + b"data: " + orjson.dumps(chunk) + b"\n\ndata: [DONE]\n\n"], plain=plain)
    assert batches[0] == [] and [o for batch in batches[1:] for o in objects(batch)] == [chunk] and clean
