"""parse_request and parse_item: a body decoded once, and errors that name the bad field."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from pydantic import ValidationError

from toolwire.errors import ClientError, RequestError
from toolwire.protocol import (
    AdditionalToolsItem,
    FunctionCallItem,
    MessageItem,
    ResponsesRequest,
    parse_item,
    parse_request,
)
from toolwire.protocol._request import MAX_JSON_DEPTH

OK_CALL = {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{}"}
OK_OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "done"}
USER = {"role": "user", "content": "hi"}


def request_with(*items: Any) -> dict[str, Any]:
    return {"model": "gpt-5.4", "input": list(items)}


# (id, body, expected param)
ERROR_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("arguments-object-not-string", request_with(USER, USER, OK_CALL, {**OK_CALL, "arguments": {"cmd": "ls"}}), "input[3].arguments"),
    ("call-id-missing", request_with(USER, {"type": "function_call_output", "output": "x"}), "input[1].call_id"),
    ("function-call-name-missing", request_with({"type": "function_call", "call_id": "c", "arguments": "{}"}), "input[0].name"),
    ("function-call-namespace-int", request_with({**OK_CALL, "namespace": 3}), "input[0].namespace"),
    ("content-part-text-int", request_with({"role": "user", "content": [{"type": "input_text", "text": 5}]}), "input[0].content[0].text"),
    ("second-content-part-text-missing", request_with({"role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "output_text"}]}), "input[0].content[1].text"),
    ("refusal-missing", request_with({"role": "assistant", "content": [{"type": "refusal"}]}), "input[0].content[0].refusal"),
    ("content-part-type-missing", request_with({"role": "user", "content": [{"text": "a"}]}), "input[0].content[0].type"),
    ("content-int", request_with({"role": "user", "content": 5}), "input[0].content"),
    ("role-missing", request_with({"type": "message", "content": "x"}), "input[0].role"),
    ("message-type-null", request_with({"type": None, "role": "user", "content": "x"}), "input[0].type"),
    ("reasoning-summary-missing", request_with({"type": "reasoning"}), "input[0].summary"),
    ("reasoning-summary-text-int", request_with({"type": "reasoning", "summary": [{"type": "summary_text", "text": 1}]}), "input[0].summary[0].text"),
    ("reasoning-part-type-unhashable", request_with({"type": "reasoning", "summary": [{"type": ["summary_text"]}]}), "input[0].summary[0].type"),
    ("reasoning-encrypted-content-int", request_with({"type": "reasoning", "summary": [], "encrypted_content": 1}), "input[0].encrypted_content"),
    ("output-int", request_with(OK_CALL, {**OK_OUTPUT, "output": 5}), "input[1].output"),
    ("output-part-text-missing", request_with(OK_CALL, {**OK_OUTPUT, "output": [{"type": "input_text"}]}), "input[1].output[0].text"),
    ("custom-input-missing", request_with({"type": "custom_tool_call", "call_id": "c", "name": "exec"}), "input[0].input"),
    ("custom-output-call-id-int", request_with({"type": "custom_tool_call_output", "call_id": 1, "output": "x"}), "input[0].call_id"),
    ("tool-search-output-tool-name-int", request_with({"type": "tool_search_output", "tools": [{"type": "function", "name": 3}]}), "input[0].tools[0].name"),
    ("additional-tools-missing", request_with({"type": "additional_tools", "role": "developer"}), "input[0].tools"),
    (
        "additional-tools-grammar-syntax",
        request_with({"type": "additional_tools", "tools": [{"type": "namespace", "name": "functions", "tools": [
            {"type": "custom", "name": "exec", "format": {"type": "grammar", "syntax": "ebnf", "definition": "x"}},
        ]}]}),
        "input[0].tools[0].tools[0].format.syntax",
    ),
    ("web-search-action-string", request_with({"type": "web_search_call", "action": "search"}), "input[0].action"),
    ("local-shell-action-missing", request_with({"type": "local_shell_call", "call_id": "c"}), "input[0].action"),
    ("compaction-content-missing", request_with({"type": "compaction"}), "input[0].encrypted_content"),
    ("item-reference-id-missing", request_with({"type": "item_reference"}), "input[0].id"),
    ("item-type-int", request_with(USER, {"type": 5}), "input[1].type"),
    ("item-not-object", request_with(USER, USER, 5), "input[2]"),
    ("input-int", {"model": "m", "input": 5}, "input"),
    ("model-missing", {"input": "hi"}, "model"),
    ("model-int", {"model": 1}, "model"),
    ("tools-not-list", {"model": "m", "tools": {"type": "function"}}, "tools"),
    ("top-level-tool-name-missing", {"model": "m", "tools": [{"type": "web_search"}, {"type": "function"}]}, "tools[1].name"),
    ("stream-string", {"model": "m", "stream": "yes"}, "stream"),
    ("max-output-tokens-zero", {"model": "m", "max_output_tokens": 0}, "max_output_tokens"),
    ("max-output-tokens-negative", {"model": "m", "max_output_tokens": -5}, "max_output_tokens"),
    ("max-output-tokens-float", {"model": "m", "max_output_tokens": 16.0}, "max_output_tokens"),
]


@pytest.mark.parametrize(("body", "param"), [pytest.param(b, p, id=i) for i, b, p in ERROR_CASES])
def test_invalid_field_is_a_request_error_naming_it(body: dict[str, Any], param: str) -> None:
    with pytest.raises(RequestError) as caught:
        parse_request(orjson.dumps(body))
    error = caught.value
    assert error.param == param
    assert error.status == 400
    assert f"'{param}'" in error.message
    assert error.to_body() == {
        "error": {"message": error.message, "type": "invalid_request_error", "param": param, "code": "invalid_request"}
    }
    assert isinstance(error.__cause__, ValidationError)  # the cause is kept


def test_missing_field_says_so() -> None:
    with pytest.raises(RequestError, match=r"Invalid 'input\[1\].call_id': missing required field"):
        parse_request(request_with(USER, {"type": "function_call_output", "output": "x"}))


@pytest.mark.parametrize(
    ("where", "param"),
    [("input[3]", "input[3].arguments"), ("item", "item.arguments"), ("response.output[2]", "response.output[2].arguments")],
)
def test_parse_item_names_the_field_under_its_own_path(where: str, param: str) -> None:
    with pytest.raises(RequestError) as caught:
        parse_item({**OK_CALL, "arguments": {}}, where=where)
    assert caught.value.param == param


def test_parse_item_path_of_nested_field() -> None:
    with pytest.raises(RequestError) as caught:
        parse_item({"role": "user", "content": [{"type": "input_text", "text": 1}]}, where="input[4]")
    assert caught.value.param == "input[4].content[0].text"
    with pytest.raises(RequestError) as caught:
        parse_item(5, where="input[4]")
    assert caught.value.param == "input[4]"


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"{", "invalid_json"),
        (b"\xff\xfe{}", "invalid_utf8"),
        (b"[]", "invalid_json"),
        (b'"model"', "invalid_json"),
        (b"", "invalid_json"),
        (b'{"model": "m", "metadata": ' + b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1) + b"}", "too_deep"),
    ],
)
def test_unreadable_body_is_a_request_error(body: bytes, code: str) -> None:
    with pytest.raises(RequestError) as caught:
        parse_request(body)
    assert caught.value.code == code
    assert caught.value.status == 400
    assert isinstance(caught.value, ClientError)


CODEX_LIKE_BODY: dict[str, Any] = {
    "model": "gpt-5.6-terra",
    "input": [
        {"type": "additional_tools", "role": "developer", "tools": [{"type": "namespace", "name": "functions", "description": "", "tools": []}]},
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<instructions>"}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
        OK_CALL,
        OK_OUTPUT,
    ],
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "reasoning": {"effort": "medium", "context": "all_turns"},
    "store": False,
    "stream": True,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "0199a213-81c0-7800-8aa1-bbab2a035a53",
    "client_metadata": {"x-codex-installation-id": "abc", "session_id": "s"},
    "text": {"verbosity": "low"},
}


@pytest.mark.parametrize("as_type", ["bytes", "str", "dict"])
def test_request_round_trips_exactly(as_type: str) -> None:
    raw = orjson.dumps(CODEX_LIKE_BODY)
    body: Any = {"bytes": raw, "str": raw.decode(), "dict": CODEX_LIKE_BODY}[as_type]
    request = parse_request(body)
    assert isinstance(request, ResponsesRequest)
    assert request.dump() == CODEX_LIKE_BODY
    assert request.model_extra is not None and request.model_extra["prompt_cache_key"].startswith("0199")
    items = request.input_items()
    assert isinstance(items[0], AdditionalToolsItem)
    assert isinstance(items[3], FunctionCallItem)
    assert request.tools is None


def test_string_input_is_one_user_message() -> None:
    request = parse_request({"model": "m", "input": "hello"})
    [item] = request.input_items()
    assert isinstance(item, MessageItem)
    assert (item.role, item.content) == ("user", "hello")
    assert request.dump() == {"model": "m", "input": "hello"}


# The message is what a client shows its user: the whole text is part of the contract.
MESSAGE_CASES: list[tuple[str, bytes | dict[str, Any], str]] = [
    ("not-json", b"{", "The request body is not valid JSON: unexpected end of data: line 1 column 2 (char 1)."),
    (
        "not-utf8",
        b'{"model": "\xff"}',
        "The request body is not valid UTF-8: byte 11 (0xff) cannot start or continue a character.",
    ),
    ("not-an-object", b"[1]", "The request body must be a JSON object."),
    (
        "not-representable",
        {"model": "m", "metadata": {"at": object()}},
        "The request body cannot be represented as JSON: Type is not JSON serializable: object.",
    ),
    (
        "union-field-every-branch",
        orjson.dumps(request_with({"role": "user", "content": 5})),
        "Invalid 'input[0].content': input should be a valid string or input should be a valid list.",
    ),
    (
        "deep-error-not-the-shallow-branch",
        orjson.dumps(request_with({"type": "reasoning", "summary": "x"})),
        "Invalid 'input[0].summary': input should be a valid list.",
    ),
    (
        "nested-part",
        orjson.dumps(request_with({"role": "user", "content": [{"type": "input_text", "text": 5}]})),
        "Invalid 'input[0].content[0].text': input should be a valid string.",
    ),
]


@pytest.mark.parametrize(("body", "message"), [pytest.param(b, m, id=i) for i, b, m in MESSAGE_CASES])
def test_a_bad_body_is_reported_in_plain_words(body: bytes | dict[str, Any], message: str) -> None:
    with pytest.raises(RequestError) as caught:
        parse_request(body)
    assert caught.value.message == message


def test_parse_item_reports_every_branch_under_its_own_path() -> None:
    with pytest.raises(RequestError) as caught:
        parse_item({"role": "user", "content": 5}, where="input[3]")
    assert caught.value.message == (
        "Invalid 'input[3].content': input should be a valid string or input should be a valid list."
    )


def test_an_item_parsed_on_its_own_is_called_item() -> None:
    with pytest.raises(RequestError) as caught:
        parse_item({**OK_CALL, "arguments": {}})
    assert (caught.value.param, caught.value.message) == (
        "item.arguments",
        "Invalid 'item.arguments': input should be a valid string.",
    )


def test_requests_are_equal_when_their_fields_and_extra_fields_are() -> None:
    request = parse_request(request_with(USER))
    assert request == parse_request(orjson.dumps(request_with(USER)))  # parsed another way
    assert request != parse_request({**request_with(USER), "model": "other"})
    assert request != parse_request({**request_with(USER), "x_extra": 1})
    assert parse_request({**request_with(USER), "x_extra": 1}) != parse_request({**request_with(USER), "x_extra": 2})
