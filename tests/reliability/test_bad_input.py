"""Malformed requests over real HTTP: a 4xx with an OpenAI-shaped error naming the place,
never a 5xx or a stack trace, and nothing sent upstream; bodies over the limit get 413
without being read whole.

The table runs against the session gateway. Where a row's problem has a field, the
error's ``param`` is that field's path and the message quotes it; where it has none
(the body itself), ``param`` is null and the message says what is wrong with the body.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import orjson
import pytest

from tests.support.chat_upstream import ChatUpstream, Text
from tests.support.gateway import GatewayProcess

from .conftest import StartGateway
from .helpers import (
    assert_openai_error,
    at_depth,
    deepest_accepted_depth,
    http_request,
    read_answer,
    read_events,
    responses_url,
    terminal,
)

USER = {"type": "message", "role": "user", "content": "hi"}
CALL = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}
TOOL_F = {"type": "function", "name": "f", "parameters": {"type": "object"}}


def nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


@dataclass(frozen=True)
class Bad:
    body: bytes | dict[str, Any]
    param: str | None
    says: str = ""
    """A phrase the message must contain (case-insensitive), beyond the param."""

    def raw(self) -> bytes:
        return self.body if isinstance(self.body, bytes) else json.dumps(self.body).encode()


def with_model(**fields: Any) -> dict[str, Any]:
    return {"model": "m", "input": "hi", **fields}


BAD_REQUESTS: dict[str, Bad] = {
    # ---- the body itself
    "empty body": Bad(b"", None, "not valid JSON"),
    "truncated JSON": Bad(b'{"model": "m", "input": "hi"', None, "not valid JSON"),
    "garbage after the object": Bad(b'{"model": "m", "input": "hi"} {}', None, "not valid JSON"),
    "a JSON array": Bad(b'[{"model": "m"}]', None, "JSON object"),
    "a JSON string": Bad(b'"hello"', None, "JSON object"),
    "JSON null": Bad(b"null", None, "JSON object"),
    "invalid UTF-8": Bad(b'{"model": "m", "input": "caf\xe9 \xff"}', None, "UTF-8"),
    "a lone surrogate escape": Bad(b'{"model": "m", "input": "\\ud800"}', None, "surrogate"),
    "NaN": Bad(b'{"model": "m", "input": "hi", "temperature": NaN}', None, "not valid JSON"),
    "a number too big for a double": Bad(b'{"model": "m", "input": "hi", "temperature": 1e999}', None, "not valid JSON"),
    "100000 nested arrays": Bad(b'{"model": "m", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", None, "depth"),
    "300 nested arrays in metadata": Bad(with_model(metadata={"deep": nested(300)}), None, "nested deeper"),
    # ---- model
    "model null": Bad({"model": None, "input": "hi"}, "model"),
    "model a number": Bad({"model": 5, "input": "hi"}, "model"),
    # ---- input
    "input a number": Bad({"model": "m", "input": 5}, "input"),
    "input an object": Bad({"model": "m", "input": {"role": "user"}}, "input"),
    "input item a string": Bad({"model": "m", "input": [USER, "hi"]}, "input[1]"),
    "item type a number": Bad({"model": "m", "input": [{"type": 7}]}, "input[0].type"),
    "message role unknown": Bad({"model": "m", "input": [{**USER, "role": "wizard"}]}, "input[0].role", "wizard"),
    "message content a number": Bad({"model": "m", "input": [USER, {**USER, "content": 5}]}, "input[1].content"),
    "content part text a number": Bad(
        {"model": "m", "input": [{**USER, "content": [{"type": "input_text", "text": 5}]}]}, "input[0].content[0].text"
    ),
    "content part without type": Bad(
        {"model": "m", "input": [{**USER, "content": [{"text": "x"}]}]}, "input[0].content[0].type", "missing"
    ),
    "arguments an object": Bad(
        {"model": "m", "input": [USER, USER, USER, {**CALL, "arguments": {"cmd": "ls"}}]}, "input[3].arguments"
    ),
    "output without call_id": Bad(
        {"model": "m", "input": [USER, CALL, {"type": "function_call_output", "output": "ok"}]}, "input[2].call_id", "missing"
    ),
    "call without name": Bad({"model": "m", "input": [{k: v for k, v in CALL.items() if k != "name"}]}, "input[0].name", "missing"),
    "call_id a number": Bad({"model": "m", "input": [{**CALL, "call_id": 7}]}, "input[0].call_id"),
    "output a number": Bad(
        {"model": "m", "input": [CALL, {"type": "function_call_output", "call_id": "call_1", "output": 5}]}, "input[1].output"
    ),
    "custom call input an object": Bad(
        {"model": "m", "input": [{"type": "custom_tool_call", "call_id": "c", "name": "apply_patch", "input": {}}]},
        "input[0].input",
    ),
    "reasoning summary a string": Bad({"model": "m", "input": [{"type": "reasoning", "summary": "x"}]}, "input[0].summary"),
    "image by file id only": Bad(
        {"model": "m", "input": [{**USER, "content": [{"type": "input_image", "file_id": "file-1"}]}]},
        "input[0].content[0]",
        "file_id",
    ),
    "file by file id only": Bad(
        {"model": "m", "input": [{**USER, "content": [{"type": "input_file", "file_id": "file-1"}]}]},
        "input[0].content[0]",
        "file_id",
    ),
    "additional_tools with tools a string": Bad(
        {"model": "m", "input": [{"type": "additional_tools", "tools": "x"}]}, "input[0].tools"
    ),
    # ---- tools
    "tools an object": Bad(with_model(tools={"f": TOOL_F}), "tools"),
    "tool a string": Bad(with_model(tools=["f"]), "tools[0]"),
    "tool without type": Bad(with_model(tools=[{"name": "f"}]), "tools[0].type", "missing"),
    "a Chat Completions tool shape": Bad(
        with_model(tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}]), "tools[0].name", "missing"
    ),
    "function parameters a list": Bad(with_model(tools=[{**TOOL_F, "parameters": [1]}]), "tools[0].parameters"),
    "function strict a string": Bad(with_model(tools=[{**TOOL_F, "strict": "yes"}]), "tools[0].strict"),
    "namespace tools a string": Bad(with_model(tools=[{"type": "namespace", "name": "n", "tools": "x"}]), "tools[0].tools"),
    "namespace tool a number": Bad(with_model(tools=[{"type": "namespace", "name": "n", "tools": [5]}]), "tools[0].tools[0]"),
    "grammar without syntax": Bad(
        with_model(tools=[{"type": "custom", "name": "c", "format": {"type": "grammar", "definition": "x"}}]),
        "tools[0].format.syntax",
    ),
    "two tools with one name": Bad(with_model(tools=[TOOL_F, {**TOOL_F, "description": "another"}]), "tools", "tools[1]"),
    # ---- everything else
    "tool_choice an undeclared tool": Bad(
        with_model(tools=[TOOL_F], tool_choice={"type": "function", "name": "g"}), "tool_choice", "g"
    ),
    "tool_choice a number": Bad(with_model(tool_choice=5), "tool_choice"),
    "tool_choice an unknown word": Bad(with_model(tools=[TOOL_F], tool_choice="sometimes"), "tool_choice", "sometimes"),
    "temperature a string": Bad(with_model(temperature="hot"), "temperature"),
    "max_output_tokens a string": Bad(with_model(max_output_tokens="many"), "max_output_tokens"),
    "max_output_tokens beyond 64 bits": Bad(
        b'{"model": "m", "input": "hi", "max_output_tokens": 18446744073709551616}', "max_output_tokens"
    ),
    "stream a string": Bad(with_model(stream="yes"), "stream"),
    "parallel_tool_calls a string": Bad(with_model(parallel_tool_calls="maybe"), "parallel_tool_calls"),
    "metadata a list": Bad(with_model(metadata=[1]), "metadata"),
    "include a string": Bad(with_model(include="reasoning.encrypted_content"), "include"),
    "instructions a number": Bad(with_model(instructions=5), "instructions"),
    "previous_response_id a number": Bad(with_model(previous_response_id=5), "previous_response_id"),
    "text.format a string": Bad(with_model(text={"format": "json"}), "text.format"),
    "json_schema schema a string": Bad(
        with_model(text={"format": {"type": "json_schema", "name": "x", "schema": "object"}}), "text.format.schema"
    ),
    "reasoning a string": Bad(with_model(reasoning="high"), "reasoning"),
}


def post_raw(gateway: GatewayProcess, body: bytes, **kwargs: Any) -> httpx.Response:
    return httpx.post(
        responses_url(gateway), content=body, headers={"content-type": "application/json"}, timeout=30, **kwargs
    )


@pytest.mark.parametrize("case", list(BAD_REQUESTS.values()), ids=list(BAD_REQUESTS))
@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
def test_malformed_request_gets_a_4xx_naming_the_place(
    gateway: GatewayProcess, upstream: ChatUpstream, case: Bad, streaming: bool
) -> None:
    body = case.raw()
    if streaming and isinstance(case.body, dict) and "stream" not in case.body:
        body = json.dumps({**case.body, "stream": True}).encode()
    response = post_raw(gateway, body)
    error = assert_openai_error(response, 400)
    assert error["type"] == "invalid_request_error", error
    assert error["param"] == case.param, error
    if case.param is not None:
        assert f"'{case.param}'" in error["message"] or case.param in error["message"], error
    assert case.says.lower() in error["message"].lower(), error
    assert upstream.requests == []


def test_invalid_utf8_message_says_where_the_bad_byte_is(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    """'What is wrong and where': the offset of the first byte that is not UTF-8.

    orjson reports every UTF-8 error at "line 1 column 1 (char 0)", wherever the bad byte is.
    """
    body = b'{"model": "m", "input": "\xff"}'
    offset = body.index(b"\xff")
    error = assert_openai_error(post_raw(gateway, body), 400)
    assert "UTF-8" in error["message"], error
    assert str(offset) in error["message"] or str(offset + 1) in error["message"], error
    assert upstream.requests == []


DEPTH_LIMIT = deepest_accepted_depth()

# Where a client can nest values, each with a body that holds the place (nesting goes there).
NESTING_PLACES: dict[str, tuple[dict[str, Any], tuple[str | int, ...]]] = {
    "metadata": ({"model": "m", "input": "hi"}, ("metadata", "k")),
    "function parameters": (
        {"model": "m", "input": "hi", "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]},
        ("tools", 0, "parameters", "properties", "x"),
    ),
    "json_schema format": (
        {"model": "m", "input": "hi", "text": {"format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}}}},
        ("text", "format", "schema", "properties", "x"),
    ),
}


@pytest.mark.parametrize("place", list(NESTING_PLACES))
@pytest.mark.parametrize("streaming", [False, True], ids=["json", "stream"])
def test_a_body_nested_to_the_depth_limit_is_refused_or_served_whole(
    gateway: GatewayProcess, upstream: ChatUpstream, place: str, streaming: bool
) -> None:
    """A body exactly as deep as the gateway accepts, the depth being in ``place``.

    The gateway wraps what the client sent one or two levels deeper (a tool as
    ``{"type": "function", "function": ...}`` upstream; metadata, tools and text echoed
    in every ``response`` object). Either it refuses the body up front (4xx naming the
    nesting) or it serves it: a whole JSON answer, or a stream that ends in exactly one
    terminal event. Never a 500, never a cut stream.
    """
    template, path = NESTING_PLACES[place]
    body = at_depth(json.loads(json.dumps(template)), path, DEPTH_LIMIT)
    body["stream"] = streaming
    upstream.enqueue(Text("served"))
    try:
        with httpx.stream("POST", responses_url(gateway), content=json.dumps(body).encode(), timeout=30) as response:
            raw = b"".join(response.iter_raw()) if response.status_code == 200 else response.read()
    except httpx.RemoteProtocolError as exc:
        pytest.fail(f"the gateway answered 200 and then cut the stream with no terminal event: {exc}")
    if response.status_code != 200:
        error = assert_openai_error(response)
        assert "deep" in error["message"].lower() or "nest" in error["message"].lower(), error
    elif streaming:
        assert terminal(read_events([raw]))["type"] == "response.completed"
    else:
        assert orjson.loads(raw)["status"] == "completed"


def test_empty_model_is_a_missing_model(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    """``"model": ""`` names no model: 400 on ``model``, not a request upstream for model ''."""
    response = httpx.post(responses_url(gateway), json={"model": "", "input": "hi"}, timeout=30)
    error = assert_openai_error(response, 400)
    assert error["param"] == "model", error
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("GET", "/v1/responses", 405), ("PUT", "/v1/responses", 405), ("POST", "/v1/response", 404), ("POST", "/v2/responses", 404)],
)
def test_wrong_method_or_path_gets_an_openai_error(
    gateway: GatewayProcess, upstream: ChatUpstream, method: str, path: str, status: int
) -> None:
    response = httpx.request(method, gateway.url + path, json={"model": "m", "input": "hi"}, timeout=30)
    assert_openai_error(response, status)
    assert upstream.requests == []


@pytest.mark.parametrize(
    "framing",
    [{"Content-Length": "abc"}, {"Content-Length": "-5"}, {"Content-Length": "5", "Transfer-Encoding": "chunked"}],
    ids=["length-not-a-number", "negative-length", "length-and-chunked"],
)
def test_broken_http_framing_gets_a_4xx(gateway: GatewayProcess, upstream: ChatUpstream, framing: dict[str, str]) -> None:
    """Framing errors are refused by the HTTP server before the app runs: 4xx, no upstream call.

    (The body here is uvicorn's plain text, not an OpenAI error: the request never reached
    the gateway's code.)
    """
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
        sock.sendall(http_request("/v1/responses", b'{"model": "m", "input": "hi"}', headers=framing))
        answer = read_answer(sock)
    assert 400 <= answer.status < 500, answer
    assert b"Traceback" not in answer.body
    assert upstream.requests == []


# ---------------------------------------------------------------- the size limit

SMALL_LIMIT = 4096


@pytest.fixture(scope="module")
def small_gateway(_session_upstream: ChatUpstream, start_module_gateway: StartGateway) -> Iterator[GatewayProcess]:
    yield start_module_gateway(_session_upstream.base_url, "--max-body-bytes", str(SMALL_LIMIT))


def assert_too_large(status: int, body: bytes, limit: int) -> None:
    assert status == 413, (status, body)
    error = orjson.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert error["code"] == "request_too_large", error
    assert str(limit) in error["message"], error


def test_a_body_under_the_limit_is_served(small_gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("fits"))
    body = orjson.dumps({"model": "m", "input": "x" * (SMALL_LIMIT - 100)})
    assert len(body) <= SMALL_LIMIT
    response = post_raw(small_gateway, body)
    assert response.status_code == 200, response.text


def test_a_declared_oversized_body_is_refused_before_it_is_sent(
    small_gateway: GatewayProcess, upstream: ChatUpstream
) -> None:
    """Content-Length says 1 GiB and not one byte of body is sent: the 413 still comes."""
    with socket.create_connection(("127.0.0.1", small_gateway.port), timeout=10) as sock:
        sock.sendall(http_request("/v1/responses", b"", headers={"Content-Length": str(2**30)}))
        answer = read_answer(sock)
    assert_too_large(answer.status, answer.body, SMALL_LIMIT)
    assert upstream.requests == []


def test_a_chunked_upload_is_refused_while_still_uploading(
    small_gateway: GatewayProcess, upstream: ChatUpstream
) -> None:
    """A chunked upload with no declared size, 1.5 times the limit, whose final chunk is
    never sent: the gateway can only answer if it stops reading past the limit."""
    chunk = b"x" * 1024
    framed = b"%x\r\n%s\r\n" % (len(chunk), chunk)
    with socket.create_connection(("127.0.0.1", small_gateway.port), timeout=10) as sock:
        sock.sendall(http_request("/v1/responses", b"", headers={"Transfer-Encoding": "chunked"}))
        for _ in range(SMALL_LIMIT * 3 // 2 // len(chunk)):
            sock.sendall(framed)
        answer = read_answer(sock, timeout=20)  # the upload is still open: no "0\r\n\r\n"
    assert_too_large(answer.status, answer.body, SMALL_LIMIT)
    assert upstream.requests == []


def test_the_default_limit_is_32_mib(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    """The session gateway runs with the default: a body declared one byte over 32 MiB gets 413."""
    limit = 32 * 2**20
    with socket.create_connection(("127.0.0.1", gateway.port), timeout=10) as sock:
        sock.sendall(http_request("/v1/responses", b"", headers={"Content-Length": str(limit + 1)}))
        answer = read_answer(sock)
    assert_too_large(answer.status, answer.body, limit)
    assert upstream.requests == []


def test_the_gateway_still_serves_after_all_that(gateway: GatewayProcess, upstream: ChatUpstream) -> None:
    upstream.enqueue(Text("still here"))
    response = httpx.post(responses_url(gateway), json={"model": "m", "input": "hi"}, timeout=30)
    assert response.status_code == 200, response.text
