"""Compressed request bodies: ``Content-Encoding: zstd`` (as Codex sends them) and ``gzip``.

The decoder is checked as a table, chunk by chunk (the pure part), then the real gateway
process answers compressed requests: the same answer as uncompressed, 413 for a body that
only passes the limit once decoded (a decompression bomb, refused without inflating it),
400 for one that is not what its header says, 415 for a coding it does not decode.
"""

from __future__ import annotations

import gzip
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.reliability.helpers import assert_openai_error, output_text
from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import GatewayProcess
from toolwire.errors import RequestError
from toolwire.server._content_coding import BodyDecoder, body_decoder

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

LIMIT = 64 * 1024
Compress = Callable[[bytes], bytes]
CODECS: dict[str, Compress] = {"gzip": gzip.compress, "zstd": zstd.compress}


def pieces(data: bytes, size: int) -> Iterator[bytes]:
    return (data[i : i + size] for i in range(0, len(data), size))


def decode_all(decoder: BodyDecoder, data: bytes, chunk: int) -> bytes:
    return b"".join(decoder.decode(piece) for piece in pieces(data, chunk)) + decoder.flush()


# --------------------------------------------------------------------------- the decoder


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
@pytest.mark.parametrize("chunk", [1, 7, 4096, 10**6])
def test_decodes_in_any_chunking(coding: str, chunk: int) -> None:
    body = orjson.dumps({"model": "m", "input": "x" * 5000 + "".join(map(str, range(2000)))})
    decoder = body_decoder(coding.encode(), LIMIT)
    assert decoder is not None
    assert decode_all(decoder, CODECS[coding](body), chunk) == body


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_several_members_or_frames_follow_one_another(coding: str) -> None:
    compress = CODECS[coding]
    decoder = body_decoder(coding.encode(), LIMIT)
    assert decoder is not None
    assert decode_all(decoder, compress(b"first half, ") + compress(b"second half"), 5) == b"first half, second half"


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
@pytest.mark.parametrize("size", [LIMIT, LIMIT + 1])
@pytest.mark.parametrize("chunk", [1, 100])
def test_the_limit_applies_to_the_decoded_size(coding: str, size: int, chunk: int) -> None:
    decoder = body_decoder(coding.encode(), LIMIT)
    assert decoder is not None
    compressed = CODECS[coding](b"a" * size)
    if size <= LIMIT:
        assert len(decode_all(decoder, compressed, chunk)) == size
        return
    with pytest.raises(RequestError) as refused:
        decode_all(decoder, compressed, chunk)
    assert (refused.value.status, refused.value.code) == (413, "request_too_large")
    assert refused.value.message == (
        f"The request body is larger than the gateway's limit of {LIMIT} bytes once decompressed ({coding})."
    )


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_an_empty_body_is_empty_in_any_coding(coding: str) -> None:
    decoder = body_decoder(coding.encode(), LIMIT)
    assert decoder is not None
    assert decoder.decode(b"") == b"" and decoder.flush() == b""


def test_a_zlib_stream_is_not_gzip() -> None:
    decoder = body_decoder(b"gzip", LIMIT)
    assert decoder is not None
    with pytest.raises(RequestError) as refused:
        decode_all(decoder, zlib.compress(b'{"model": "m"}'), 100)
    assert refused.value.status == 400 and "not valid gzip" in refused.value.message


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_a_bomb_is_refused_before_it_inflates(coding: str) -> None:
    """64 MiB of zeros, compressed to a few kB: refused having produced at most the limit."""
    bomb = CODECS[coding](bytes(64 * 1024**2))
    decoder = body_decoder(coding.encode(), LIMIT)
    assert decoder is not None
    with pytest.raises(RequestError) as refused:
        decoder.decode(bomb)
    assert refused.value.status == 413
    assert decoder.decoded == LIMIT + 1


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_a_bomb_that_starts_small_is_refused_at_the_limit_too(coding: str) -> None:
    """The room left shrinks with what was decoded: the piece that passes the limit is
    decoded to one byte over it, never more."""
    limit = 1_000_003  # above a zstd block (128 KiB), which comes out whole
    bomb = CODECS[coding](bytes(64 * 1024**2))
    decoder = body_decoder(coding.encode(), limit)
    assert decoder is not None
    start = 0
    while decoder.decoded == 0:  # a few bytes at a time, until some of it is out
        decoder.decode(bomb[start : start + 4])
        start += 4
    assert 0 < decoder.decoded < limit
    with pytest.raises(RequestError):
        decoder.decode(bomb[start:])
    assert decoder.decoded == limit + 1


@pytest.mark.parametrize(
    ("coding", "data", "detail"),
    [
        ("gzip", b"this is not gzip", "not valid gzip"),
        ("zstd", b"this is not zstd either", "not valid zstd"),
        ("gzip", gzip.compress(b"cut short " * 100)[:-12], "ends before"),
        ("zstd", zstd.compress(b"cut short " * 100)[:-6], "ends before"),
    ],
    ids=["gzip-garbage", "zstd-garbage", "gzip-truncated", "zstd-truncated"],
)
def test_a_body_that_is_not_its_coding_is_a_400(coding: str, data: bytes, detail: str) -> None:
    decoder = body_decoder(coding.encode(), LIMIT)
    assert decoder is not None
    with pytest.raises(RequestError) as refused:
        decode_all(decoder, data, 16)
    assert refused.value.status == 400 and detail in refused.value.message
    assert (refused.value.code, refused.value.param) == ("invalid_content_encoding", "content-encoding")


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_the_400_says_what_the_decompressor_found(coding: str) -> None:
    garbage = b"this is not compressed at all"
    try:
        zlib.decompressobj(wbits=31).decompress(garbage) if coding == "gzip" else zstd.decompress(garbage)
    except (zlib.error, zstd.ZstdError) as exc:
        found = str(exc)
    decoder = body_decoder(coding.encode(), LIMIT)
    assert decoder is not None
    with pytest.raises(RequestError) as refused:
        decoder.decode(garbage)
    assert refused.value.message == f"The request body is not valid {coding} (Content-Encoding: {coding}): {found}."
    truncated = body_decoder(coding.encode(), LIMIT)
    assert truncated is not None
    truncated.decode(CODECS[coding](b"cut short " * 100)[:20])
    with pytest.raises(RequestError) as cut:
        truncated.flush()
    assert cut.value.message == (
        f"The request body is not valid {coding} (Content-Encoding: {coding}): it ends before its compressed data does."
    )


@pytest.mark.parametrize(("header", "decoded"), [(b"identity", False), (b"", False), (b"GZIP", True), (b" zstd ", True), (b"x-gzip", True)])
def test_header_values(header: bytes, decoded: bool) -> None:
    assert (body_decoder(header, LIMIT) is not None) is decoded


@pytest.mark.parametrize("header", [b"br", b"deflate", b"gzip, zstd"])
def test_other_codings_are_a_415(header: bytes) -> None:
    with pytest.raises(RequestError) as refused:
        body_decoder(header, LIMIT)
    assert refused.value.status == 415 and refused.value.code == "unsupported_content_encoding"


# --------------------------------------------------------------------------- the gateway


@pytest.fixture(scope="module")
def small_gateway(_session_upstream: ChatUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    log_path: Path = tmp_path_factory.mktemp("coding") / "gateway.log"
    with GatewayProcess(_session_upstream.base_url, log_path, "--max-body-bytes", str(LIMIT)) as gateway:
        yield gateway


def post(gateway: GatewayProcess, body: bytes, coding: str) -> httpx.Response:
    headers = {"Content-Type": "application/json", "Content-Encoding": coding}
    return httpx.post(gateway.base_url + "/responses", content=body, headers=headers, timeout=30)


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_a_compressed_request_is_answered(small_gateway: GatewayProcess, upstream: ChatUpstream, coding: str) -> None:
    upstream.enqueue(Text("Decompressed and understood."))
    body = orjson.dumps({"model": "m", "input": "a compressed question " * 100})
    answer = post(small_gateway, CODECS[coding](body), coding)
    assert answer.status_code == 200, answer.text
    assert output_text(answer.json()) == "Decompressed and understood."
    [chat] = upstream.chat_requests
    assert chat["messages"][-1]["content"] == "a compressed question " * 100


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
def test_a_bomb_is_a_413(small_gateway: GatewayProcess, upstream: ChatUpstream, coding: str) -> None:
    padding = " " * (8 * 1024**2)  # JSON whitespace: a valid body, 8 MiB once decoded
    body = b'{"model": "m", "input": "hi"' + padding.encode() + b"}"
    compressed = CODECS[coding](body)
    assert len(compressed) < LIMIT
    error = assert_openai_error(post(small_gateway, compressed, coding), 413)
    assert "decompressed" in error["message"] and error["code"] == "request_too_large"
    assert upstream.requests == []


def test_a_body_that_is_not_its_coding_is_a_400_and_another_coding_a_415(small_gateway: GatewayProcess) -> None:
    error = assert_openai_error(post(small_gateway, b'{"model": "m", "input": "plain"}', "zstd"), 400)
    assert error["code"] == "invalid_content_encoding" and error["param"] == "content-encoding"
    error = assert_openai_error(post(small_gateway, b"{}", "br"), 415)
    assert "'br'" in error["message"]
