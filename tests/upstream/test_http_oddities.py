"""``HttpEndpoint`` against answers no well-behaved server sends (tests/upstream/raw_upstream.py),
a proxy that carries its requests, a server that accepts nothing, one that never answers
a readiness check, and cookies set under a host name."""

from __future__ import annotations

import asyncio
import gzip
import ssl
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import aiohttp.client_proto
import aiohttp.connector
import aiohttp.http_exceptions
import aiohttp.http_parser
import orjson
import pytest
import yarl

from tests.support.chat_upstream import ChatUpstream, HttpError, Raw, Text
from tests.support.forward_proxy import ForwardProxy
from tests.support.hanging import hanging_port
from tests.support.tls_authority import certified
from toolwire.errors import UpstreamError, UpstreamLimitError, UpstreamProtocolError
from toolwire.protocol import WholeAnswer
from toolwire.upstream import (
    HttpEndpoint,
    ListBatches,
    Proxy,
    RetryPolicy,
    UpstreamLimits,
    _sse_batches,
)
from toolwire.upstream._connector import MalformedBody
from toolwire.upstream._sse_batches import StreamStalled, parse_json_object

from .raw_upstream import HOLD, raw_upstream

BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})
ONCE = RetryPolicy(attempts=1)


def causes(error: BaseException) -> list[BaseException]:
    """``error`` and the chain of its causes, in order."""
    chain: list[BaseException] = []
    cause: BaseException | None = error
    while cause is not None:
        chain.append(cause)
        cause = cause.__cause__
    return chain


async def timed_failure(call: Any) -> tuple[UpstreamError, float]:
    """The error ``call`` fails with, and the seconds it took to fail."""
    started = asyncio.get_running_loop().time()
    error = await failure(call)
    return error, asyncio.get_running_loop().time() - started


async def failure(call: Any) -> UpstreamError:
    with pytest.raises(UpstreamError) as raised:
        await call
    return raised.value


@pytest.fixture
async def closing() -> AsyncIterator[list[HttpEndpoint]]:
    made: list[HttpEndpoint] = []
    yield made
    for endpoint in made:
        await endpoint.aclose()


def endpoint(closing: list[HttpEndpoint], url: str, **options: Any) -> HttpEndpoint:
    options.setdefault("retry", ONCE)
    made = HttpEndpoint(url, "/chat/completions", **options)
    closing.append(made)
    return made


def answer(status: bytes, body: bytes, *extra: bytes) -> list[Any]:
    head = status + b"\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
    return [head + b"".join(extra) + b"\r\n" + body]


async def test_a_head_that_is_not_http(closing: list[HttpEndpoint]) -> None:
    async with raw_upstream([b"SMTP ready\r\n\r\n"]) as url:
        error = await failure(endpoint(closing, url).post_for_json(BODY))
    assert type(error) is UpstreamProtocolError and error.__cause__ is not None
    assert error.message.startswith(f"The upstream at {url} answered with a response the gateway cannot read: ")
    assert "\n" not in error.message
    # the parser's own error stays at the end of the chain, for the log
    assert isinstance(causes(error)[-1], aiohttp.http_exceptions.BadStatusLine)


async def test_a_head_the_parser_refuses_is_told_on_one_line(closing: list[HttpEndpoint]) -> None:
    """aiohttp's C parser writes the bytes it stopped at, and a caret, under its message:
    the error says them on one line."""
    both = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
    async with raw_upstream([both]) as url:
        error = await failure(endpoint(closing, url).post_for_json(BODY))
    assert error.message == (
        f"The upstream at {url} answered with a response the gateway cannot read: "
        "Content-Length can't be present with Transfer-Encoding: b'Content-Length: 5'."
    )


async def test_a_whole_answer_that_breaks_off(closing: list[HttpEndpoint]) -> None:
    async with raw_upstream([b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"choices\""]) as url:
        error = await failure(endpoint(closing, url).post_for_json(BODY))
    assert error.message.startswith("The upstream connection broke: ") and error.message != "The upstream connection broke: None."
    assert error.__cause__ is not None


async def test_an_error_answer_that_breaks_off_and_one_without_a_reason(closing: list[HttpEndpoint]) -> None:
    broken = [b"HTTP/1.1 503 Busy Now\r\nContent-Length: 100\r\n\r\n{\"error\":"]
    no_reason = [b"HTTP/1.1 418 \r\nContent-Length: 0\r\n\r\n"]
    async with raw_upstream(broken, no_reason) as url:
        cut = await failure(endpoint(closing, url).post_for_json(BODY))
        bare = await failure(endpoint(closing, url).post_for_json(BODY))
    assert (cut.message, cut.status) == ("The upstream answered HTTP 503 Busy Now.", 503)
    assert (bare.message, bare.status) == ("The upstream answered HTTP 418.", 418)


async def test_an_error_body_that_is_not_utf8(closing: list[HttpEndpoint]) -> None:
    async with raw_upstream(answer(b"HTTP/1.1 400 Bad Request", b"bad \xff\xfe input")) as url:
        error = await failure(endpoint(closing, url).post_for_json(BODY))
    assert error.message == "bad \ufffd\ufffd input"


async def test_an_error_body_in_pieces_is_read_whole(closing: list[HttpEndpoint]) -> None:
    body = orjson.dumps({"error": {"message": "assembled from pieces"}})
    pieces = [b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n" % len(body), body[:10], 0.2, body[10:]]
    async with raw_upstream(pieces) as url:
        error = await failure(endpoint(closing, url).post_for_json(BODY))
    assert error.message == "assembled from pieces"


async def test_a_declared_length_over_the_limit_is_not_read(closing: list[HttpEndpoint]) -> None:
    huge = [b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n{", HOLD]
    async with raw_upstream(huge) as url:
        slow = endpoint(closing, url, limits=UpstreamLimits(max_body_bytes=4096), timeout=30)
        error = await asyncio.wait_for(failure(slow.post_for_json(BODY)), 20)
    assert type(error) is UpstreamLimitError and error.limit == "upstream_max_body_bytes"


async def test_a_body_exactly_at_the_limit_is_read(closing: list[HttpEndpoint]) -> None:
    body = orjson.dumps({"choices": [], "pad": "x" * 5000})
    chunked = [
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"%x\r\n%s\r\n" % (3000, body[:3000]), 0.2, b"%x\r\n%s\r\n" % (len(body) - 3000, body[3000:]), b"0\r\n\r\n",
    ]
    declared = answer(b"HTTP/1.1 200 OK", body)
    over = [chunked[0], b"%x\r\n%s\r\n" % (3000, body[:3000]), 0.2, b"%x\r\n%s\r\n" % (3000, b" " * 3000), b"0\r\n\r\n"]
    async with raw_upstream(chunked, declared, over) as url:
        limited = endpoint(closing, url, limits=UpstreamLimits(max_body_bytes=len(body)))
        assert (await limited.post_for_json(BODY))["pad"] == "x" * 5000  # in two pieces, joined as they came
        assert (await limited.post_for_json(BODY))["choices"] == []
        too_much = await failure(endpoint(closing, url, limits=UpstreamLimits(max_body_bytes=len(body))).post_for_json(BODY))
    assert type(too_much) is UpstreamLimitError  # 6000 bytes in two reads of 3000 each


async def test_data_that_is_a_long_list(closing: list[HttpEndpoint], upstream: ChatUpstream) -> None:
    data = orjson.dumps(list(range(200)))
    upstream.enqueue(Raw([b"data: " + data + b"\n\n"]))
    streaming = endpoint(closing, upstream.base_url)
    with pytest.raises(UpstreamProtocolError) as refused:
        async with streaming.stream(BODY, parse_json_object) as batches:
            async for _ in batches:
                pass
    assert refused.value.message == f"The upstream sent stream data that is not an object: {data.decode()[:200]!r}."


async def test_bytes_that_stall(closing: list[HttpEndpoint], upstream: ChatUpstream) -> None:
    async with raw_upstream([b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: 1\n\n", HOLD]) as url:
        stalling = endpoint(closing, url, timeout=0.3)
        with pytest.raises(UpstreamError) as stalled:
            async with stalling.stream_bytes(BODY) as chunks:
                async for _ in chunks:
                    pass
    assert (stalled.value.message, stalled.value.code) == ("The upstream stream stalled for more than 0.3 s.", "upstream_timeout")


async def test_a_body_held_open_after_its_end_marker_is_let_go(closing: list[HttpEndpoint], upstream: ChatUpstream) -> None:
    upstream.enqueue(Raw([b'data: {"n": 1}\n\n', b"data: [DONE]\n\n"], linger=60.0))
    streaming = endpoint(closing, upstream.base_url)
    async with asyncio.timeout(30):  # let go after a moment of draining, not when the upstream closes
        async with streaming.stream(BODY, parse_json_object) as batches:
            read = [batch async for batch in batches]
    assert read == [[{"n": 1}]] and batches.ended_cleanly


async def test_a_connect_that_hangs_times_out_and_is_retried() -> None:
    """A listening socket that accepts nothing: once its queue is full, a new connection
    hangs in the handshake (the kernel drops the SYN), as an unreachable host does."""
    retry = CountedRetries(attempts=2)
    with hanging_port() as port:
        url = f"http://127.0.0.1:{port}/v1"
        hung = HttpEndpoint(url, "/x", connect_timeout=0.3, retry=retry)
        try:
            error = await asyncio.wait_for(failure(hung.post_for_json(BODY)), 30)
        finally:
            await hung.aclose()
    assert (error.status, error.code) == (502, "upstream_unreachable")
    assert error.message == f"Cannot reach the upstream at {url}: no connection within 0.3 s."
    assert isinstance(error.__cause__, aiohttp.ConnectionTimeoutError)
    assert retry.waits == [0]  # one wait, before the second attempt


@dataclass(frozen=True)
class CountedRetries(RetryPolicy):
    """Retries without waiting, each wait noted (the attempt it follows)."""

    waits: list[int] = field(default_factory=list)

    def delay(self, attempt: int) -> float:
        self.waits.append(attempt)
        return 0.0


async def test_a_readiness_check_that_gets_no_answer_gives_up(closing: list[HttpEndpoint]) -> None:
    async with raw_upstream([HOLD]) as url:
        silent = HttpEndpoint(url, "/x", check_timeout=0.3)
        closing.append(silent)
        error = await asyncio.wait_for(failure(silent.check()), 30)
    assert error.message == f"Cannot reach the upstream at {url}: no answer to GET /models within 0.3 s."
    assert isinstance(error.__cause__, TimeoutError)


async def test_the_default_connect_and_readiness_check_timeouts() -> None:
    """An endpoint given no bounds gives up a connect that hangs after 10 s, and a readiness
    check (its connect hanging too) after 5 s; each message says which bound it was."""
    with hanging_port() as port:
        url = f"http://127.0.0.1:{port}/v1"
        hung = HttpEndpoint(url, "/x", retry=ONCE)
        try:
            (connect, connect_waited), (check, check_waited) = await asyncio.wait_for(
                asyncio.gather(timed_failure(hung.post_for_json(BODY)), timed_failure(hung.check())), 60
            )
        finally:
            await hung.aclose()
    assert connect.message == f"Cannot reach the upstream at {url}: no connection within 10 s."
    assert check.message == f"Cannot reach the upstream at {url}: no answer to GET /models within 5 s."
    assert connect_waited >= 9.5 and check_waited >= 4.5, (connect_waited, check_waited)


async def test_the_default_read_timeout() -> None:
    assert HttpEndpoint("http://127.0.0.1:9/v1", "/x").read_timeout == 300.0


@pytest.fixture
def proxy(upstream: ChatUpstream) -> Iterator[ForwardProxy]:
    with ForwardProxy(upstream.port) as running:
        yield running


async def test_requests_and_checks_go_through_the_proxy(
    closing: list[HttpEndpoint], upstream: ChatUpstream, proxy: ForwardProxy
) -> None:
    remote = f"http://upstream.invalid:{upstream.port}/v1"
    upstream.enqueue(Text("proxied"))
    through = endpoint(closing, remote, proxy=Proxy(proxy.url, {"Proxy-Authorization": "Basic dTpw"}))
    answer = await through.post_for_json(BODY)
    await through.check()
    assert answer["choices"][0]["message"]["content"] == "proxied"
    assert [(r.url, r.proxy_authorization) for r in proxy.requests] == [
        (f"{remote}/chat/completions", "Basic dTpw"),
        (f"{remote}/models", "Basic dTpw"),
    ]
    assert "proxy-authorization" not in upstream.requests[0].headers


async def test_an_https_upstreams_requests_carry_the_proxy_credentials_on_the_tunnel_alone(
    closing: list[HttpEndpoint], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a proxy, an https upstream is reached by a CONNECT tunnel: the proxy's
    credentials go on the CONNECT, and never inside the tunnel, where the upstream reads them."""
    certificate = certified("upstream.invalid", tmp_path)
    # aiohttp's verifying context, made once at its import, trusting the test's authority
    trusted = ssl.create_default_context(cafile=str(certificate.authority_file))
    monkeypatch.setattr(aiohttp.connector, "_SSL_CONTEXT_VERIFIED", trusted)
    with ChatUpstream(ssl_context=certificate.server_context) as tls_upstream, ForwardProxy(tls_upstream.port) as proxy:
        tls_upstream.enqueue(Text("tunnelled"))
        port = tls_upstream.port
        remote = f"https://upstream.invalid:{port}/v1"
        through = endpoint(closing, remote, proxy=Proxy(proxy.tunnel_url, {"Proxy-Authorization": "Basic dTpw"}))
        answer = await through.post_for_json(BODY)
        tunnels, sent = proxy.requests, tls_upstream.requests
    assert answer["choices"][0]["message"]["content"] == "tunnelled"
    assert [(t.method, t.url, t.proxy_authorization) for t in tunnels] == [
        ("CONNECT", f"upstream.invalid:{port}", "Basic dTpw")
    ]
    assert [r.path for r in sent] == ["/v1/chat/completions"]
    assert "proxy-authorization" not in sent[0].headers


async def test_a_cookie_set_under_a_host_name_is_not_sent_back(closing: list[HttpEndpoint], upstream: ChatUpstream) -> None:
    upstream.enqueue(HttpError(400, {"error": {"message": "no"}}, headers={"Set-Cookie": "session=alice; Path=/"}), Text("ok"))
    named = endpoint(closing, f"http://localhost:{upstream.port}/v1")
    await failure(named.post_for_json(BODY))
    await named.post_for_json(BODY)
    assert "cookie" not in upstream.requests[1].headers


async def test_batches_in_memory_end_cleanly_only_at_their_end() -> None:
    batches = ListBatches([[{"n": 1}], [{"n": 2}]])
    seen = []
    async for batch in batches:
        seen.append((batch, batches.ended_cleanly))
    assert seen == [([{"n": 1}], False), ([{"n": 2}], False)] and batches.ended_cleanly


async def test_a_compressed_answer_is_decompressed(closing: list[HttpEndpoint]) -> None:
    import gzip

    body = gzip.compress(orjson.dumps({"choices": [], "said": "compressed"}))
    async with raw_upstream(answer(b"HTTP/1.1 200 OK", body, b"Content-Encoding: gzip\r\n")) as url:
        assert (await endpoint(closing, url).post_for_json(BODY))["said"] == "compressed"


async def test_an_answer_that_cannot_be_read_is_not_retried(closing: list[HttpEndpoint]) -> None:
    valid = answer(b"HTTP/1.1 200 OK", orjson.dumps({"choices": []}))
    async with raw_upstream([b"SMTP ready\r\n\r\n"], valid) as url:
        twice = endpoint(closing, url, retry=RetryPolicy(attempts=2, backoff_seconds=0.0))
        assert type(await failure(twice.post_for_json(BODY))) is UpstreamProtocolError


def test_a_url_shown_without_its_credentials() -> None:
    from toolwire.upstream._failures import without_credentials

    assert without_credentials("http://u:p@h/a@b") == "http://h/a@b"  # an @ in the path is the path's
    assert without_credentials("http://u:p@h/x?next=http://y") == "http://h/x?next=http://y"
    assert without_credentials("http://h?to=a@b") == "http://h?to=a@b"  # an @ in the query is the query's
    assert without_credentials("http://u:p@h#a@b") == "http://h#a@b"
    # A password holding an @ not escaped: the credentials end at the last @, as aiohttp reads them.
    assert without_credentials("http://u:p@ss@h:8000/v1") == "http://h:8000/v1"
    assert without_credentials("http://u:p@ss@h") == "http://h"
    assert yarl.URL("http://u:p@ss@h:8000/v1").password == "p@ss"


async def test_only_the_first_64_kib_of_an_error_are_read(closing: list[HttpEndpoint], upstream: ChatUpstream) -> None:
    """An error body is read for its message only: past 64 KiB it is left unread, so a huge
    one is shown as the text it begins with, never parsed whole."""
    huge = {"error": {"message": "short", "padding": "x" * 200_000}}
    upstream.enqueue(HttpError(400, huge))
    error = await failure(endpoint(closing, upstream.base_url).post_for_json(BODY))
    assert error.message == orjson.dumps(huge).decode()[:2000]


async def test_a_compressed_answer_is_bounded_by_its_size_once_decompressed(closing: list[HttpEndpoint]) -> None:
    # A small answer's gzip form is larger than the answer: its declared length is over
    # the limit, what it decompresses to is not.
    body = b'{"ok":true}'
    packed = gzip.compress(body)
    assert len(body) < 16 < len(packed)
    head = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
    async with raw_upstream([head + b"Content-Length: %d\r\n\r\n" % len(packed) + packed]) as url:
        small = endpoint(closing, url, limits=UpstreamLimits(max_body_bytes=16))
        assert await small.post_for_json(BODY) == {"ok": True}


async def test_an_error_answer_that_never_ends_is_read_only_as_far_as_its_message_needs(
    closing: list[HttpEndpoint],
) -> None:
    # 80 KiB in small pieces, then nothing more while the connection stays open: the first
    # 64 KiB are all that is read of an error, so the answer is not waited for.
    pieces: list[Any] = [b"HTTP/1.1 400 Bad Request\r\nContent-Length: 1000000\r\n\r\n"]
    for _ in range(20):
        pieces += [b"x" * 4096, 0.005]
    async with raw_upstream([*pieces, HOLD]) as url:
        async with asyncio.timeout(30):
            error = await failure(endpoint(closing, url).post_for_json(BODY))
    assert (error.status, error.message) == (400, "x" * 2000)


async def test_a_body_cut_short_after_its_end_marker_costs_nothing(closing: list[HttpEndpoint]) -> None:
    sse = b'data: {"n": 1}\n\ndata: [DONE]\n\n'
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % (len(sse) + 100)
    async with raw_upstream([head + sse]) as url:  # then the connection closes, 100 bytes short
        streaming = endpoint(closing, url)
        async with streaming.stream(BODY, parse_json_object) as batches:
            read = [batch async for batch in batches]
    assert read == [[{"n": 1}]] and batches.ended_cleanly


MALFORMED_CHUNK = b"zz\r\n"
"""A chunk size that is not hexadecimal: no HTTP parser reads on past it."""


@pytest.mark.parametrize("parser", ["C", "pure Python"])
@pytest.mark.parametrize("reader", ["stream", "stream_bytes", "post_for_json"])
async def test_a_body_that_breaks_http_framing_fails_at_once_and_says_so(
    closing: list[HttpEndpoint], monkeypatch: pytest.MonkeyPatch, parser: str, reader: str
) -> None:
    """A chunked body whose next chunk size is not hex, the connection then held open: the
    read fails as soon as those bytes arrive, as a body that breaks HTTP's framing (aiohttp's
    C parser gives up on the body without telling its reader, which then waited for its
    timeout and read as a stall), whichever parser aiohttp runs."""
    parsers = {"C": aiohttp.http_parser.HttpResponseParserC, "pure Python": aiohttp.http_parser.HttpResponseParserPy}
    monkeypatch.setattr(aiohttp.client_proto, "HttpResponseParser", parsers[parser])
    kind = b"application/json" if reader == "post_for_json" else b"text/event-stream"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n\r\n" % kind
    first = b'{"id": ' if reader == "post_for_json" else b'data: {"n": 1}\n\n'
    answer = [head, b"%x\r\n%s\r\n" % (len(first), first), 0.05, MALFORMED_CHUNK, HOLD]
    async with raw_upstream(answer) as url:
        reading = endpoint(closing, url, timeout=60)
        async with asyncio.timeout(30):  # well inside the read timeout: no stall is waited for
            with pytest.raises(UpstreamProtocolError) as broken:
                if reader == "post_for_json":
                    await reading.post_for_json(BODY)
                elif reader == "stream":
                    async with reading.stream(BODY, parse_json_object) as batches:
                        assert [batch async for batch in batches] == [[{"n": 1}]]
                else:
                    async with reading.stream_bytes(BODY) as chunks:
                        assert [chunk async for chunk in chunks] == [first]
    said = "Invalid character in chunk size: b'zz'" if parser == "C" else "TransferEncodingError: zz"
    assert broken.value.message == f"The upstream's answer has a body the gateway cannot read: {said}."
    assert broken.value.status == 502
    # the error, then what the body's reader was told, then what the parser raised
    told = [type(cause) for cause in causes(broken.value)[1:]]
    assert told == ([MalformedBody, aiohttp.http_exceptions.HttpProcessingError] if parser == "C" else [aiohttp.http_exceptions.TransferEncodingError])


@pytest.mark.parametrize("reader", ["stream", "post_for_json"])
async def test_a_body_that_does_not_decompress_says_so(closing: list[HttpEndpoint], reader: str) -> None:
    """A gzip body whose data is not deflate (a reserved block type) fails as a body that
    cannot be read, not as a connection closed early."""
    kind = b"application/json" if reader == "post_for_json" else b"text/event-stream"
    head = b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n" % kind
    gzip_header = gzip.compress(b"")[:10]
    answer = [head, b"%x\r\n%s\r\n" % (len(gzip_header), gzip_header), 0.05, b"4\r\n\x07\x07\x07\x07\r\n", HOLD]
    async with raw_upstream(answer) as url:
        reading = endpoint(closing, url, timeout=60)
        async with asyncio.timeout(30):
            with pytest.raises(UpstreamProtocolError) as broken:
                if reader == "post_for_json":
                    await reading.post_for_json(BODY)
                else:
                    async with reading.stream(BODY, parse_json_object) as batches:
                        assert [batch async for batch in batches] == []
    assert broken.value.message == (
        "The upstream's answer has a body the gateway cannot read: "
        "ContentEncodingError: Can not decode content-encoding: gzip."
    )


@pytest.mark.parametrize("status", [300, 301, 302, 307, 308])
@pytest.mark.parametrize("key_header", ["bearer", "x-api-key"])
async def test_a_redirect_is_not_followed_so_the_request_and_its_key_go_nowhere_else(
    closing: list[HttpEndpoint], status: int, key_header: Any
) -> None:
    """An upstream that redirects: the gateway says where to, and sends nothing there (aiohttp
    would follow, dropping ``Authorization`` for another host but not ``x-api-key``, and
    resend the prompt either way); neither does its readiness check. Nor is the request
    sent again (a retry would find the answer queued after the redirect)."""
    ok = [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"]
    async with raw_upstream(ok) as elsewhere:
        moved = b"HTTP/1.1 %d Moved\r\nLocation: %s/chat/completions\r\nContent-Length: 0\r\n\r\n" % (status, elsewhere.encode())
        async with raw_upstream([moved], ok) as url, raw_upstream([moved]) as checked:
            redirecting = endpoint(closing, url, api_key="sk-secret", key_header=key_header,
                                   retry=RetryPolicy(attempts=2, backoff_seconds=0.0))  # a 5xx would be retried
            error = await failure(redirecting.post_for_json(BODY))
            await endpoint(closing, checked, api_key="sk-secret", key_header=key_header).check()  # any answer will do
        other = endpoint(closing, elsewhere)
        assert await other.post_for_json(BODY) == {}, "the place redirected to got nothing before"
    assert error.message == (
        f"The upstream at {url} answered HTTP {status}, redirecting to {elsewhere}/chat/completions: the gateway "
        "follows no redirect (the request and its key would go elsewhere); set the upstream's address to where it points."
    )
    assert (error.status, error.code) == (502, "upstream_redirect")


@pytest.mark.filterwarnings("ignore:Sending a large body directly:ResourceWarning")  # aiohttp's, past 1 MiB
async def test_an_upstream_that_takes_none_of_the_request_is_given_up_on(closing: list[HttpEndpoint]) -> None:
    """An upstream that accepts the connection and never reads: a body larger than the
    sockets' buffers cannot be sent, and aiohttp bounds no sending. The request is given
    the connect and read timeouts and its body's time to send, then fails, not retried."""
    accepted: list[asyncio.StreamWriter] = []

    async def never_read(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        await reader.read(0)  # and nothing more, until the client goes

    server = await asyncio.start_server(never_read, "127.0.0.1", 0, limit=1024)
    port = server.sockets[0].getsockname()[1]
    try:
        body = b"x" * (32 * 2**20)
        silent = endpoint(closing, f"http://127.0.0.1:{port}", timeout=0.25, connect_timeout=0.25,
                          min_transfer_rate=len(body) * 2, retry=RetryPolicy(attempts=3, backoff_seconds=0.0))
        async with asyncio.timeout(30):
            error = await failure(silent.post(body))
    finally:
        for writer in accepted:
            writer.close()
        server.close()
    assert error.message == (
        f"The upstream at http://127.0.0.1:{port} did not take the request ({len(body)} bytes) and answer it within 1 s "
        "(the connect and read timeouts, and the time to send the body at the slowest rate allowed)."
    )
    assert (error.status, error.code, len(accepted)) == (504, "upstream_timeout", 1)
    assert isinstance(error.__cause__, TimeoutError)


async def test_an_answers_head_written_a_byte_at_a_time_is_bounded_as_a_whole(closing: list[HttpEndpoint]) -> None:
    """Each of the head's bytes comes within the read timeout, which aiohttp counts from
    the last byte: the head as a whole is bounded by the time a request is given (its
    connect and read timeouts, its body's time to send), or such an upstream would hold
    the request for as long as it liked."""
    trickled: list[Any] = [b"HTTP/1.1 200 OK\r\n"]
    for _ in range(40):
        trickled += [0.1, b"X-Slow: y\r\n"]
    trickled.append(b"Content-Length: 2\r\n\r\n{}")
    async with raw_upstream(trickled) as url:
        error, waited = await timed_failure(endpoint(closing, url, timeout=0.3, connect_timeout=0.3).post_for_json(BODY))
    assert error.message == (
        f"The upstream at {url} did not take the request ({len(BODY)} bytes) and answer it within 1 s "
        "(the connect and read timeouts, and the time to send the body at the slowest rate allowed)."
    )
    assert (error.status, error.code) == (504, "upstream_timeout") and isinstance(error.__cause__, TimeoutError)
    assert waited < 3.5, f"the head's 4 s were waited for ({waited:.1f} s)"


WEB_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title> Open WebUI </title><style>body { color: red }</style>"
    b"<script>if (a < b) { load() }</script></head><body><!-- the app --><p>Sign\n   in</p>" + b"<i>x</i>" * 500 + b"</body></html>\n"
)


@pytest.mark.parametrize("status", [200, 404, 405])
@pytest.mark.parametrize("streamed", [True, False])
@pytest.mark.parametrize(
    ("page", "named"),
    [
        (WEB_PAGE, ' ("' + ("Open WebUI Sign in " + " ".join(["x"] * 500))[:200] + '")'),
        (b"\n<html><body><h1>Not\n Caf\xe9</h1></body></html>", ' ("Not Caf\ufffd")'),  # not UTF-8: read as far as it goes
        (b"<html></html>", ""),
        (b"Sign in first", ' ("Sign in first")'),  # no markup, but it says it is HTML
    ],
)
async def test_a_web_page_instead_of_the_api_is_named_not_passed_on(
    closing: list[HttpEndpoint], status: int, streamed: bool, page: bytes, named: str
) -> None:
    """A base URL that reaches a web page (a UI in front of the API, a path without /v1):
    the error names the page and asks whether the address is right, instead of passing
    the page's HTML on as the upstream's message (a 404) or failing as a stream that ended
    early, or a body that is not JSON (a 200)."""
    head = b"HTTP/1.1 %d Whatever\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: %d\r\n\r\n" % (status, len(page))
    async with raw_upstream([head + page]) as url:
        reaching = endpoint(closing, url)
        if streamed:
            with pytest.raises(UpstreamError) as raised:
                async with reaching.stream(BODY, parse_json_object) as batches:
                    [batch async for batch in batches]
            error = raised.value
        else:
            error = await failure(reaching.post_for_json(BODY))
    what = f"answered HTTP {status} Whatever with an HTML page{named}" if status != 200 else (
        f"answered a streamed request with an HTML page{named}" if streamed else f"answered with an HTML page{named}"
    )
    assert error.message == f"The upstream at {url} {what}, not an API's answer: is that the API's address (often ending in /v1)?"
    assert error.status == (502 if status == 200 else status)


async def test_a_web_page_answering_a_stream_is_named_by_its_words_after_a_blank_read(closing: list[HttpEndpoint]) -> None:
    """Blank bytes read alone before the page: nothing is told of it until its words come."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n"
    async with raw_upstream([head, b"\r\n", 0.05, b"<html><body>Sign in</body></html>"]) as url:
        with pytest.raises(UpstreamError) as raised:
            async with endpoint(closing, url).stream(BODY, parse_json_object) as batches:
                [batch async for batch in batches]
    assert raised.value.message == (
        f'The upstream at {url} answered a streamed request with an HTML page ("Sign in"), not an API\'s answer: '
        "is that the API's address (often ending in /v1)?"
    )


@pytest.mark.parametrize("content_type", [b"text/plain", b"application/json"])
async def test_a_web_page_is_known_by_its_first_mark_whatever_its_type_says(
    closing: list[HttpEndpoint], content_type: bytes
) -> None:
    """A page served as another type (a proxy's own page, a static file server) is known
    by its first character past any blank: ``<``."""
    page = b" \r\n\t<html><body>Not here</body></html>"
    head = b"HTTP/1.1 404 Whatever\r\nContent-Type: %b\r\nContent-Length: %d\r\n\r\n" % (content_type, len(page))
    async with raw_upstream([head + page]) as url:
        error = await failure(endpoint(closing, url).post_for_json(BODY))
    assert error.message == (
        f'The upstream at {url} answered HTTP 404 Whatever with an HTML page ("Not here"), not an API\'s answer: '
        "is that the API's address (often ending in /v1)?"
    )


@pytest.mark.parametrize("status", [404, 405])
@pytest.mark.parametrize(
    ("content_type", "body", "named"),
    [
        (b"text/plain; charset=utf-8", b"404 page not found", ' ("404 page not found")'),  # Go's, Ollama's
        (b"application/json", b'{"detail":"Not Found"}', ' ("Not Found")'),  # FastAPI's: vLLM's, SGLang's
        (b"application/json", b"", ""),
        (b"text/plain", b"no\n  such\tpath " + b"x" * 300, ' ("no such path ' + "x" * 187 + '")'),
    ],
)
async def test_a_servers_own_no_such_path_is_named_not_passed_on(
    closing: list[HttpEndpoint], status: int, content_type: bytes, body: bytes, named: str
) -> None:
    """A base URL missing its /v1 reaches the server, not the API: its 404 or 405 says no
    such path in the server's own words, which passed on alone leave the user guessing."""
    head = b"HTTP/1.1 %d Nope\r\nContent-Type: %b\r\nContent-Length: %d\r\n\r\n" % (status, content_type, len(body))
    async with raw_upstream([head + body]) as url:
        error = await failure(endpoint(closing, url).post_for_json(BODY))
    assert error.message == (
        f"The upstream at {url} answered HTTP {status} Nope{named}, not an API's answer: "
        "is that the API's address (often ending in /v1)?"
    )
    assert (error.status, error.upstream_status, error.code) == (status, status, None)


@pytest.mark.parametrize(
    ("body", "message", "code"),
    [
        (b'{"error":{"message":"The model `x` does not exist.","code":"model_not_found"}}',
         "The model `x` does not exist.", "model_not_found"),
        (b'{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","code":404}',
         "The model `x` does not exist.", None),  # vLLM's
        (b'{"error":"model \'x\' not found"}', "model 'x' not found", None),  # Ollama's own API
    ],
)  # fmt: skip
async def test_an_apis_own_404_is_passed_on(closing: list[HttpEndpoint], body: bytes, message: str, code: str | None) -> None:
    head = b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    async with raw_upstream([head + body]) as url:
        error = await failure(endpoint(closing, url).post_for_json(BODY))
    assert (error.message, error.code, error.status) == (message, code, 404)


JSON, HTML, TEXT = b"application/json", b"text/html", b"text/plain"


@pytest.mark.parametrize(
    ("head", "kind", "body", "key", "doubt"),
    [
        (b"200 OK", JSON, b'{"object":"list","data":[]}', None, None),
        (b"500 Internal Server Error", JSON, b'{"error":{"message":"busy"}}', None, None),  # there: its requests will tell
        (b"404 Not Found", JSON, b'{"error":{"message":"no models here"}}', None, None),  # the API's own answer
        (b"401 Unauthorized", JSON, b'{"error":{"message":"Incorrect API key provided: sk-w***ng"}}', "sk-wrong",
         'it refuses the key the gateway sends (GET /models answered HTTP 401 Unauthorized ("Incorrect API key '
         'provided: sk-w***ng"))'),
        (b"401 Unauthorized", JSON, b"", None,
         "it wants a key, and the gateway sends none (GET /models answered HTTP 401 Unauthorized)"),
        (b"401", JSON, b"", "sk-x", "it refuses the key the gateway sends (GET /models answered HTTP 401)"),  # no reason
        (b"403 Forbidden", HTML, b"<html><title>Denied</title></html>", "sk-x",
         'it refuses the key the gateway sends (GET /models answered HTTP 403 Forbidden with an HTML page ("Denied"))'),
        (b"403 Forbidden", HTML, b"Access denied", "sk-x",  # a page by its type alone
         'it refuses the key the gateway sends (GET /models answered HTTP 403 Forbidden with an HTML page '
         '("Access denied"))'),
        (b"404 Not Found", TEXT, b"404 page not found", None,
         "GET /models answered HTTP 404 Not Found (\"404 page not found\"), not an API's answer: "
         "is that the API's address (often ending in /v1)?"),
        (b"404 Not Found", HTML, b"Not here", None,
         'GET /models answered HTTP 404 Not Found with an HTML page ("Not here"), not an API\'s answer: '
         "is that the API's address (often ending in /v1)?"),
    ],
)  # fmt: skip
async def test_a_check_answered_says_what_may_keep_requests_from_being_served(
    closing: list[HttpEndpoint], head: bytes, kind: bytes, body: bytes, key: str | None, doubt: str | None
) -> None:
    """``toolwire serve`` warns of it at start; any answer still counts as the upstream there."""
    answer = b"HTTP/1.1 %b\r\nContent-Type: %b\r\nContent-Length: %d\r\n\r\n%b" % (head, kind, len(body), body)
    async with raw_upstream([answer]) as url:
        assert await endpoint(closing, url, api_key=key).check() == doubt


async def test_a_page_answering_with_a_server_error_is_named_by_its_type_alone(closing: list[HttpEndpoint]) -> None:
    page = b"Sign in first"
    head = b"HTTP/1.1 503 Busy\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(page)
    async with raw_upstream([head + page]) as url:
        error = await failure(endpoint(closing, url).post_for_json(BODY))
    assert error.message == f'The upstream at {url} answered HTTP 503 Busy with an HTML page ("Sign in first").'


async def test_a_pages_words_are_looked_for_in_its_first_16_kib(closing: list[HttpEndpoint]) -> None:
    """A page of megabytes is not read through for its words: the first visible one here
    begins at byte 16,384, one past what is looked at."""
    page = b"<p " + b"a" * (16384 - 4) + b">Hidden words</p>"
    assert page.index(b"Hidden") == 16384
    head = b"HTTP/1.1 404 Whatever\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(page)
    async with raw_upstream([head + page]) as url:
        error = await failure(endpoint(closing, url).post_for_json(BODY))
    assert error.message == (
        f"The upstream at {url} answered HTTP 404 Whatever with an HTML page, not an API's answer: "
        "is that the API's address (often ending in /v1)?"
    )


def test_a_broken_stream_says_what_broke_it_in_at_most_500_characters() -> None:
    assert _sse_batches.stream_error(OSError("x" * 600), 1.0).message == "The upstream stream broke: " + "x" * 500 + "."
    assert _sse_batches.stream_error(OSError(), 1.0).message == "The upstream stream broke: OSError."


async def test_a_server_error_page_keeps_its_words_without_asking_for_the_address(closing: list[HttpEndpoint]) -> None:
    page = b"<html><head><title>502 Bad Gateway</title></head><body><center>nginx</center></body></html>"
    head = b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(page)
    async with raw_upstream(*[[head + page]] * 3) as url:
        error = await failure(endpoint(closing, url).post_for_json(BODY))
    assert error.message == f'The upstream at {url} answered HTTP 502 Bad Gateway with an HTML page ("502 Bad Gateway nginx").'


@pytest.mark.parametrize(
    ("location", "shown"),
    [
        (None, "nowhere it says"),
        (b"https://user:secret@elsewhere.example/v1/chat/completions", "https://elsewhere.example/v1/chat/completions"),
        (b"https://elsewhere.example/" + b"a" * 600, "https://elsewhere.example/" + "a" * 474),
    ],
)
async def test_where_a_redirect_points_is_said_without_credentials_and_bounded(
    closing: list[HttpEndpoint], location: bytes | None, shown: str
) -> None:
    moved = b"HTTP/1.1 307 Moved\r\n" + (b"Location: " + location + b"\r\n" if location else b"") + b"Content-Length: 0\r\n\r\n"
    async with raw_upstream([moved]) as url:
        error = await failure(endpoint(closing, url).post_for_json(BODY))
    assert f"answered HTTP 307, redirecting to {shown}: the gateway follows no redirect" in error.message
    assert "secret" not in error.message


@pytest.mark.parametrize("size", ["at the bound", "a byte over it", "the bound, then a blank byte"])
async def test_a_whole_answer_to_a_streamed_request_read_over_several_reads(closing: list[HttpEndpoint], size: str) -> None:
    """Its pieces arrive apart (each read waited for, as a stream's), the whole bounded by
    ``upstream_max_body_bytes``: as large as the bound is read, a byte more is refused,
    even one that comes after the object is complete."""
    whole = orjson.dumps({"id": "chatcmpl-1", "choices": [{"index": 0, "message": {"content": "x" * 300}}]})
    after = b"\n" if size == "the bound, then a blank byte" else b""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (len(whole) + 2 + len(after))
    answer = [head, b"\r\n", 0.05, whole[:7], 0.05, whole[7:200], 0.05, whole[200:], 0.05, after]
    bound = len(whole) - (size == "a byte over it")  # (the blank line before it is no part of it)
    async with raw_upstream(answer) as url:
        reading = endpoint(closing, url, limits=UpstreamLimits(max_body_bytes=bound))
        if size != "at the bound":
            with pytest.raises(UpstreamLimitError):
                async with reading.stream(BODY, parse_json_object) as batches:
                    [batch async for batch in batches]
            return
        async with reading.stream(BODY, parse_json_object) as batches:
            read = [batch async for batch in batches]
    assert len(read) == 1 and len(read[0]) == 1
    [answered] = read[0]
    assert isinstance(answered, WholeAnswer) and answered.answer == orjson.loads(whole) and batches.ended_cleanly


async def test_a_whole_answer_taken_slowly_leaves_the_watch_looking_on_quietly(closing: list[HttpEndpoint]) -> None:
    """The reader holds the whole answer's batch past the watch's next look: the watch
    finds it not waiting, and nothing goes wrong in the event loop."""
    whole = orjson.dumps({"id": "chatcmpl-1", "choices": [{"index": 0, "message": {"content": "hi"}}]})
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(whole)
    loop = asyncio.get_running_loop()
    troubles: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: troubles.append(context))
    try:
        async with (
            raw_upstream([head, whole[:9], 0.05, whole[9:]]) as url,
            endpoint(closing, url, timeout=0.2).stream(BODY, parse_json_object) as batches,
        ):
            async for batch in batches:
                assert isinstance(batch[0], WholeAnswer)
                await asyncio.sleep(0.5)  # two of the watch's looks
    finally:
        loop.set_exception_handler(None)
    assert troubles == [] and batches.ended_cleanly


async def test_a_whole_answer_that_stops_coming_stalls(closing: list[HttpEndpoint]) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    async with raw_upstream([head, b'{"id": ', HOLD]) as url:
        with pytest.raises(UpstreamError) as stalled:
            async with endpoint(closing, url, timeout=0.3).stream(BODY, parse_json_object) as batches:
                [batch async for batch in batches]
    assert stalled.value.message == "The upstream stream stalled for more than 0.3 s."


def trickled_json(status: bytes, pieces: int) -> list[Any]:
    """An answer whose head comes at once and whose JSON body comes a few bytes every 0.1 s."""
    text = orjson.dumps({"error": {"message": "slow " + "x" * (8 * pieces)}})
    head = status + b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(text)
    step = -(-len(text) // pieces)
    answer: list[Any] = [head]
    for start in range(0, len(text), step):
        answer += [text[start : start + step], 0.1]
    return answer


async def test_a_whole_answer_written_a_few_bytes_at_a_time_is_bounded_as_a_whole(closing: list[HttpEndpoint]) -> None:
    """Each piece comes within the read timeout; the body as a whole is given the read
    timeout and the time the largest body allowed takes at the slowest rate allowed."""
    async with raw_upstream(trickled_json(b"HTTP/1.1 200 OK", 40)) as url:
        slow = endpoint(closing, url, timeout=0.3, min_transfer_rate=3840, limits=UpstreamLimits(max_body_bytes=2048))
        error, waited = await timed_failure(slow.post_for_json(BODY))
    assert error.message == (  # 0.3 s, and 2048 bytes at 3840 a second: 0.833 s, told to a tenth
        f"The upstream at {url} did not send its whole answer within 0.8 s of its head (the read timeout, "
        "and the time to receive the largest answer allowed at the slowest rate allowed)."
    )
    assert (error.status, error.code) == (504, "upstream_timeout") and isinstance(error.__cause__, TimeoutError)
    assert waited < 3.5, f"the body's 4 s were waited for ({waited:.1f} s)"


async def test_an_error_answer_written_a_few_bytes_at_a_time_is_told_without_its_body(closing: list[HttpEndpoint]) -> None:
    """The part of an error answer read for its message is bounded as a whole answer's
    body is: what did not come in time is not waited for, and the status is still told."""
    async with raw_upstream(trickled_json(b"HTTP/1.1 429 Too Many", 40)) as url:
        slow = endpoint(closing, url, timeout=0.3, min_transfer_rate=64 * 1024)
        error, waited = await timed_failure(slow.post_for_json(BODY))
    assert (error.message, error.status) == ("The upstream answered HTTP 429 Too Many.", 429)
    assert waited < 3.5, f"the body's 4 s were waited for ({waited:.1f} s)"


async def test_a_whole_answer_to_a_streamed_request_written_a_few_bytes_at_a_time_is_one_event(
    closing: list[HttpEndpoint],
) -> None:
    """A streamed request answered whole, the answer coming a few bytes every 0.1 s: each
    piece comes within the read timeout, and the whole, one event, must come within the
    event timeout."""
    async with raw_upstream(trickled_json(b"HTTP/1.1 200 OK", 40)) as url:
        slow = endpoint(closing, url, timeout=0.3, event_timeout=1.0)
        with pytest.raises(UpstreamError) as ended:
            async with slow.stream(BODY, parse_json_object) as batches:
                [batch async for batch in batches]
    assert ended.value.message == (
        "The upstream stream brought no event for more than 1 s (only keep-alive comments, or an event that never ended)."
    )
    assert isinstance(ended.value.__cause__, StreamStalled) and ended.value.__cause__.kept_alive


STREAM_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


async def test_a_stream_kept_alive_with_nothing_else_ends_after_the_event_timeout(closing: list[HttpEndpoint]) -> None:
    """An SSE server's keep-alive comments are bytes, not an answer: a stream of nothing
    else, one every 0.1 s, would never have stalled; it ends once ``event_timeout`` passes
    with no event heard, and says why. Each keep-alive read is an empty batch (the reader
    may tell its client the upstream is alive); the read timeout, shorter, does not end it."""
    pings = [piece for _ in range(40) for piece in (b": ping\n\n", 0.1)]
    async with raw_upstream([STREAM_HEAD, b'data: {"n": 1}\n\n', *pings]) as url:
        loop = asyncio.get_running_loop()
        read: list[list[Any]] = []
        with pytest.raises(UpstreamError) as ended:
            async with endpoint(closing, url, timeout=0.3, event_timeout=1.0).stream(BODY, parse_json_object) as batches:
                async for batch in batches:
                    read.append(batch)
                    if len(read) == 1:
                        started = loop.time()
        waited = loop.time() - started
    assert ended.value.message == (
        "The upstream stream brought no event for more than 1 s (only keep-alive comments, or an event that never ended)."
    )
    assert ended.value.code == "upstream_timeout"
    assert isinstance(ended.value.__cause__, StreamStalled) and ended.value.__cause__.kept_alive
    assert 0.95 <= waited < 2.5, waited  # at the bound, not at the stream's end 4 s on
    assert read[0] == [{"n": 1}] and len(read) >= 5 and not any(read[1:]), read


async def test_a_silent_stream_stalls_at_the_read_timeout_however_long_the_event_timeout(
    closing: list[HttpEndpoint],
) -> None:
    async with raw_upstream([STREAM_HEAD, b": ping\n\n", HOLD]) as url:
        read: list[list[Any]] = []
        with pytest.raises(UpstreamError) as ended:
            async with endpoint(closing, url, timeout=0.3, event_timeout=60.0).stream(BODY, parse_json_object) as batches:
                async for batch in batches:
                    read.append(batch)
    assert ended.value.message == "The upstream stream stalled for more than 0.3 s."
    assert read == [[]]  # the one keep-alive


@pytest.mark.parametrize("read", ["to its end", "not at all"])
async def test_a_stream_let_go_closes_its_reading_at_once(closing: list[HttpEndpoint], read: str) -> None:
    """The reading stops at ``[DONE]`` suspended after its last batch: leaving the stream
    closes it then (its watch's timer stopped), not when the event loop finalizes it; a
    stream never read is left as cleanly."""
    async with (
        raw_upstream([STREAM_HEAD, b'data: {"n": 1}\n\ndata: [DONE]\n\n']) as url,
        endpoint(closing, url).stream(BODY, parse_json_object) as batches,
    ):
        if read == "to its end":
            async for batch in batches:  # as a reader does: done once the stream says it ended
                assert batch == [{"n": 1}] and batches.ended_cleanly
                break
            reading = batches._reading
            assert reading is not None and reading.ag_frame is not None  # suspended, not closed yet
    if read == "to its end":
        assert reading.ag_frame is None  # closed
    else:
        assert batches._reading is None


async def test_events_between_keep_alives_keep_a_long_stream_going(closing: list[HttpEndpoint]) -> None:
    """Each event heard restarts the count: a stream three times as long as the read timeout,
    an event every 0.3 s among keep-alives, is read to its end. (A whole answer is one
    event: test_a_whole_answer_to_a_streamed_request_written_a_few_bytes_at_a_time_is_one_event.)"""
    events = [p for n in range(8) for p in (b": ping\n\n", 0.15, b'data: {"n": %d}\n\n' % n, 0.15)]
    async with raw_upstream([STREAM_HEAD, *events, b"data: [DONE]\n\n"]) as url:
        reading = endpoint(closing, url, timeout=0.5, event_timeout=0.5)
        async with reading.stream(BODY, parse_json_object) as batches:
            streamed = [item async for batch in batches for item in batch]
    assert streamed == [{"n": n} for n in range(8)] and batches.ended_cleanly


@pytest.fixture
def quiet_every(monkeypatch: pytest.MonkeyPatch) -> float:
    """The watch wakes a silent stream's reader every 0.2 s (15 s in service)."""
    monkeypatch.setattr(_sse_batches, "QUIET_EVERY", 0.2)
    return 0.2


async def read_timed(reading: HttpEndpoint) -> tuple[list[tuple[float, list[Any]]], tuple[float, BaseException] | None]:
    """Each batch with when it came, and the error that ended the reading, if one did, with when."""
    loop = asyncio.get_running_loop()
    started, read = loop.time(), []
    try:
        async with reading.stream(BODY, parse_json_object) as batches:
            async for batch in batches:
                read.append((loop.time() - started, batch))
    except UpstreamError as exc:
        return read, (loop.time() - started, exc)
    return read, None


async def test_a_silent_stream_s_reader_hears_so_and_the_silence_still_stalls(
    closing: list[HttpEndpoint], quiet_every: float
) -> None:
    """Before its first byte and after an event alike, a silent event stream is woken with
    empty batches, one per ``QUIET_EVERY``; the silence they break still counts from its
    start: the stream stalls at the read timeout, not later."""
    async with raw_upstream([STREAM_HEAD, 0.5, b'data: {"n": 1}\n\n', HOLD]) as url:
        read, ended = await read_timed(endpoint(closing, url, timeout=1.0))
    assert ended is not None
    stalled_at, error = ended
    assert isinstance(error, UpstreamError) and error.message == "The upstream stream stalled for more than 1 s."
    batches = [batch for _, batch in read]
    first = batches.index([{"n": 1}])
    assert 1 <= first <= 3 and not any(batches[:first]), batches  # woken about twice in the first 0.5 s
    assert 3 <= len(batches) - first - 1 <= 5 and not any(batches[first + 1 :]), batches
    event_at = read[first][0]
    assert 0.95 <= stalled_at - event_at < 1.4, (event_at, stalled_at)  # 1 s after the event: the wakes do not put it off


async def test_the_watch_never_wakes_a_reader_inside_an_event_or_a_whole_answer(
    closing: list[HttpEndpoint], quiet_every: float
) -> None:
    """A comment fed in the middle of an event would become part of it; before the first
    bytes of an answer that does not say it is an event stream, it could be a whole JSON
    answer's first bytes. Neither is woken: the event and the answer arrive whole."""
    whole = orjson.dumps({"id": "chatcmpl-1", "choices": [{"index": 0, "message": {"content": "hi"}}]})
    json_head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(whole)
    halves = [STREAM_HEAD, b'data: {"text": "a', 0.7, b'b"}\n\n', b"data: [DONE]\n\n"]
    async with raw_upstream(halves, [json_head, 0.7, whole]) as url:
        reading = endpoint(closing, url, timeout=5.0)
        event, _ = await read_timed(reading)
        answer, _ = await read_timed(reading)
    assert [batch for _, batch in event] == [[{"text": "ab"}]]
    [(_, [answered])] = answer
    assert isinstance(answered, WholeAnswer) and answered.answer == orjson.loads(whole)


async def test_a_whole_answer_said_to_be_an_event_stream_is_not_woken_and_still_stalls(
    closing: list[HttpEndpoint], quiet_every: float
) -> None:
    """A whole JSON answer whose content type says event stream, coming slowly (each piece
    in time, the whole longer than the read timeout and than the watch's wakes), then
    stopping: no comment is fed into it, and the stop stalls at the read timeout."""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 1000\r\n\r\n"
    pieces = [piece for n in range(6) for piece in (b'{"id": "x"' if n == 0 else b" " * 10, 0.25)]
    async with raw_upstream([head, *pieces, HOLD]) as url:
        reading = endpoint(closing, url, timeout=0.7, event_timeout=5.0)
        async with asyncio.timeout(10):
            read, ended = await read_timed(reading)
    assert read == [] and ended is not None
    stalled_at, error = ended
    assert error.message == "The upstream stream stalled for more than 0.7 s."  # type: ignore[attr-defined]
    assert 1.9 <= stalled_at < 2.6, stalled_at  # the last piece at 1.25 s, then 0.7 s
