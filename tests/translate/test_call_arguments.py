"""The arguments a client gets for a call whose JSON the model got wrong (``_calls``,
``_json_repair``): a ``strict`` function's arguments are repaired into valid JSON (the
SDK parses them), or replaced by ``{}`` when nothing sensible can be recovered; a
non-strict function's, or a cut-off call's, are passed as the model wrote them; a
tool search's arguments are an object. Read through a whole Chat completion, the way a
non-streamed answer reaches the client.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from toolwire.protocol import parse_request
from toolwire.tools import ToolCatalog
from toolwire.translate import ChatStreamTranslator, UpstreamToolTable

JSON = dict[str, Any]
STRICT = {
    "type": "function",
    "name": "get_weather",
    "strict": True,
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False},
}
REQUEST = parse_request(
    orjson.dumps({"model": "m", "input": "hi", "tools": [STRICT, {**STRICT, "name": "loose", "strict": False}, {"type": "tool_search", "execution": "client"}]})
)
REPAIRED = ["tool arguments repaired"]
REPLACED = ["tool arguments replaced with {}"]
LONGEST = 100_000


def call(arguments: str, name: str = "get_weather", finish_reason: str = "tool_calls") -> tuple[Any, list[str]]:
    """The arguments of the call item the client gets, and the conversions noted."""
    completion = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}]},
                "finish_reason": finish_reason,
            }
        ]
    }
    translator = ChatStreamTranslator(REQUEST, UpstreamToolTable(ToolCatalog.from_request(REQUEST)), response_id="resp_1", created_at=1, model="m")
    [item] = translator.translate_whole(completion)["output"]
    return item["arguments"], translator.conversions


@pytest.mark.parametrize(
    ("written", "sent", "conversions"),
    [
        ('{"city": "Paris"}', '{"city": "Paris"}', []),
        ("  ", "{}", []),
        ('{"city": "Paris"', '{"city":"Paris"}', REPAIRED),
        ('```json\n{"city": "Paris"}\n```', '{"city":"Paris"}', REPAIRED),
        ('Sure: {"city": "Paris",} ok', '{"city":"Paris"}', REPAIRED),
        ('Here: {"a": {"b": 1}} done', '{"a":{"b":1}}', REPAIRED),
        ('x {"a": {}, "b": 2} y', '{"a":{},"b":2}', REPAIRED),
        ('{"city": "Paris"} hope this helps', '{"city":"Paris"}', REPAIRED),
        ('{"city": "Paris"}.', '{"city":"Paris"}', REPAIRED),
        ('Here: {"city": "Paris"', '{"city":"Paris"}', REPAIRED),
        ('{"city": "x"} {"b"', '{"city":"x"}', REPAIRED),
        ("}{", "{}", REPAIRED),
        ('{"city": "Pa\\', '{"city":"Pa"}', REPAIRED),
        ('{"a": "\\"', '{"a":"\\""}', REPAIRED),
        ('{"a": "x\\\\', '{"a":"x\\\\"}', REPAIRED),
        ('{"city": "Paris", "n": [1, 2,', '{"city":"Paris","n":[1,2]}', REPAIRED),
        ('{"a": [1, 2], "b": 3', '{"a":[1,2],"b":3}', REPAIRED),
        ('{"a": {"b": [1, "]"', '{"a":{"b":[1,"]"]}}', REPAIRED),
        ("[1, 2", "[1,2]", REPAIRED),
        ('{"city": ', '{"city":null}', REPAIRED),
        ('{"a": 1, ', '{"a":1}', REPAIRED),
        ('{"city": "Par\nis"}', '{"city":"Par\\nis"}', REPAIRED),
        ('{"city": "é"', '{"city":"é"}', REPAIRED),
        ("{'city': 'Paris', 'ok': True}", '{"city":"Paris","ok":true}', REPAIRED),
        ("['a']", '["a"]', REPAIRED),
        ('{"code": "f(a,]", "b": 1,}', '{"code":"f(a,]","b":1}', REPAIRED),
        # JSON's own literals (no Python literal reads them): only the comma removal repairs
        ('{"a": true, "b": [1, 2,], "s": "x,}", }', '{"a":true,"b":[1,2],"s":"x,}"}', REPAIRED),
        ('{"q": "say \\"hi,\\" ]", "n": [null,],}', '{"q":"say \\"hi,\\" ]","n":[null]}', REPAIRED),
        ('{"q": "a\\",]", "n": [null,],}', '{"q":"a\\",]","n":[null]}', REPAIRED),
        ("'just a string'", "{}", REPLACED),
        ("nothing", "{}", REPLACED),
        ('{"a": NaN', "{}", REPLACED),
        ('{"a": 1e999', "{}", REPLACED),
        ('{"a": {1, 2}}', "{}", REPLACED),
    ],
)
def test_a_strict_functions_arguments_are_valid_json(written: str, sent: str, conversions: list[str]) -> None:
    assert call(written) == (sent, conversions)


def test_repair_stops_at_a_size() -> None:
    longest = '{"a": "' + "x" * (LONGEST - 8) + '"'
    assert call(longest) == ('{"a":"' + "x" * (LONGEST - 8) + '"}', REPAIRED)
    assert call(longest + "x") == ("{}", REPLACED)


@pytest.mark.parametrize(("name", "finish_reason"), [("loose", "tool_calls"), ("get_weather", "length")])
def test_a_loose_or_cut_off_calls_arguments_are_passed_as_written(name: str, finish_reason: str) -> None:
    assert call('{"city": "Paris"', name, finish_reason) == ('{"city": "Paris"', [])


@pytest.mark.parametrize(
    ("written", "sent", "conversions"),
    [
        ('{"query": "q"}', {"query": "q"}, []),
        ("", {}, []),
        ('{"query": "x"', {"query": "x"}, REPAIRED),
        ("[1]", {}, REPLACED),
        ("nope", {}, REPLACED),
    ],
)
def test_a_tool_searchs_arguments_are_an_object(written: str, sent: JSON, conversions: list[str]) -> None:
    assert call(written, "tool_search") == (sent, conversions)
