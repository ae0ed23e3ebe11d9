"""ChatStreamTranslator: upstream chunk sequences in, Responses events out.

Every case runs through ``verify``, which checks the stream the way its clients read it:

* each event is validated by the official SDK exactly as a client built with
  ``_strict_response_validation=True`` does (``openai._models.validate_type`` on the
  ``ResponseStreamEvent`` union);
* the validated events are fed to the SDK's own accumulator, ``ResponseStreamState``
  (what ``client.responses.stream()`` uses), which must not raise and, on
  ``response.completed``, must produce the terminal output (and parse the arguments of
  every strict tool, as ``get_final_response()`` does);
* the stream invariants: sequence numbers 0, 1, 2, ...; created and in_progress first;
  exactly one terminal event, last; items sequential and added in output_index order;
  every added item done (unless the response failed); the terminal output is exactly
  the done items; ids and call_ids unique.

``sdk_client`` also serves the encoded SSE bytes to a real ``openai.OpenAI`` client
through an httpx mock transport, for end-to-end checks of the two streaming APIs.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai import omit
from openai._models import validate_type
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.responses import Response

from toolwire.protocol import TERMINAL_EVENT_TYPES, PlainChunks, encode_event, parse_request
from toolwire.tools import ToolCatalog
from toolwire.translate import ChatStreamTranslator, UpstreamToolTable, open_reasoning
from toolwire.translate.chat import stream as chat_stream

from ..sdk import sdk_event, strict_checkable, without_parsed
from ..test_custom_input import APPLY_PATCH_GRAMMAR, EXEC_DESCRIPTION, EXEC_GRAMMAR, PATCH

JSON = dict[str, Any]

# ---------------------------------------------------------------- the request: Codex-like tools

GET_WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get weather",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
EXEC_COMMAND = {
    "type": "function",
    "name": "exec_command",
    "description": "Runs a command.",
    "strict": False,
    "parameters": {
        "type": "object",
        "properties": {"cmd": {"type": "string"}},
        "required": ["cmd"],
    },
}
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "The `apply_patch` tool can be used to edit files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": APPLY_PATCH_GRAMMAR},
}
FUNCTIONS = {
    "type": "namespace",
    "name": "functions",
    "description": "",
    "tools": [
        {
            "type": "custom",
            "name": "exec",
            "description": EXEC_DESCRIPTION,
            "format": {"type": "grammar", "syntax": "lark", "definition": EXEC_GRAMMAR},
        },
        {
            "type": "function",
            "name": "wait",
            "strict": False,
            "parameters": {"type": "object", "properties": {"cell_id": {"type": "string"}}},
        },
    ],
}
COLLABORATION = {
    "type": "namespace",
    "name": "collaboration",
    "description": "Tools for sub-agents.",
    "tools": [
        {
            "type": "function",
            "name": "list_agents",
            "strict": False,
            "parameters": {"type": "object", "properties": {}},
        }
    ],
}
TOOL_SEARCH = {
    "type": "tool_search",
    "execution": "client",
    "description": "Search for tools.",
    "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "number"}},
        "required": ["query"],
    },
}
TOOLS = [GET_WEATHER, EXEC_COMMAND, APPLY_PATCH, FUNCTIONS, COLLABORATION, TOOL_SEARCH]
BODY: JSON = {
    "model": "qwen3-coder",
    "input": [{"role": "user", "content": "hi"}],
    "instructions": "Be brief.",
    "tools": TOOLS,
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "store": False,
    "text": {"verbosity": "low"},
    "prompt_cache_key": "session-1",
    "include": ["reasoning.encrypted_content"],
    "stream": True,
}
RESPONSE_ID = "resp_0123456789abcdef"
CREATED_AT = 1_750_000_000


def make_translator(body: JSON = BODY, *, response_id: str = RESPONSE_ID) -> ChatStreamTranslator:
    request = parse_request(body)
    return ChatStreamTranslator(
        request,
        UpstreamToolTable(ToolCatalog.from_request(request)),
        response_id=response_id,
        created_at=CREATED_AT,
        model=body["model"],
    )


@dataclass
class Run:
    events: list[JSON]
    translator: ChatStreamTranslator

    @property
    def response(self) -> JSON:
        return self.translator.response

    @property
    def output(self) -> list[JSON]:
        return list(self.response["output"])


def run(chunks: list[JSON], body: JSON = BODY, *, end: str | None = "finish") -> Run:
    """Feed ``chunks``; end with ``finish()`` (the default), ``fail(<end>)`` or nothing."""
    translator = make_translator(body)
    events: list[JSON] = [dict(e) for e in translator.start()]
    for chunk in chunks:
        events += [dict(e) for e in translator.feed(chunk)]
    if end == "finish":
        events += [dict(e) for e in translator.finish()]
    elif end is not None:
        events += [dict(e) for e in translator.fail(end)]
    return Run(events, translator)


# ---------------------------------------------------------------- upstream chunks


def chunk(finish_reason: str | None = None, **delta: Any) -> JSON:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "upstream-model",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }


def finish(reason: str) -> JSON:
    return chunk(reason)


def usage_chunk(prompt: int = 10, completion: int = 20, **extra: Any) -> JSON:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "choices": [],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            **extra,
        },
    }


def call_start(index: int, call_id: str | None, name: str, arguments: str = "") -> JSON:
    """OpenAI style: id, type and name on a call's first delta."""
    entry: JSON = {
        "index": index,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
    if call_id is not None:
        entry["id"] = call_id
    return chunk(tool_calls=[entry])


def call_args(index: int, arguments: str) -> JSON:
    return chunk(tool_calls=[{"index": index, "function": {"arguments": arguments}}])


def whole_call(index: int, call_id: str, name: str, arguments: Any) -> JSON:
    """Ollama style: the whole call in one chunk, with role and empty content."""
    return chunk(
        role="assistant",
        content="",
        tool_calls=[
            {
                "id": call_id,
                "index": index,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
        ],
    )


def fragments(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def openai_call(index: int, call_id: str, name: str, arguments: str) -> list[JSON]:
    return [call_start(index, call_id, name)] + [
        call_args(index, part) for part in fragments(arguments)
    ]


# ---------------------------------------------------------------- what a client sees


def verify(events: list[JSON], body: JSON = BODY) -> JSON:
    """Check every invariant of a finished stream; return the terminal Response object."""
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
    terminals = [e for e in events if e["type"] in TERMINAL_EVENT_TYPES]
    assert len(terminals) == 1 and terminals[0] is events[-1]
    terminal = terminals[0]
    response = terminal["response"]
    assert {e["response"]["id"] for e in events if "response" in e} == {RESPONSE_ID}
    for lifecycle in events[:2]:
        assert lifecycle["response"]["output"] == [] and lifecycle["response"]["usage"] is None
        assert lifecycle["response"]["status"] == "in_progress"

    # Items: sequential, added in output_index order, each done once with the same identity.
    added: list[JSON] = []
    done: dict[int, JSON] = {}
    open_index: int | None = None
    for event in events:
        if event["type"] == "response.output_item.added":
            assert open_index is None, "an item was added while another was open"
            assert event["output_index"] == len(added)
            added.append(event["item"])
            open_index = event["output_index"]
        elif "output_index" in event:
            assert event["output_index"] == open_index, f"{event['type']} outside its item"
            if event["type"] == "response.output_item.done":
                item = event["item"]
                assert (item["type"], item["id"], item.get("call_id")) == (
                    added[open_index]["type"],
                    added[open_index]["id"],
                    added[open_index].get("call_id"),
                )
                done[open_index] = item
                open_index = None
    if terminal["type"] != "response.failed":
        assert open_index is None and len(done) == len(added), "an added item was never done"
    assert response["output"] == [done[i] for i in sorted(done)]
    assert all(
        a is b for a, b in zip(response["output"], [done[i] for i in sorted(done)], strict=True)
    )
    ids = [item["id"] for item in added]
    assert len(set(ids)) == len(ids)
    call_ids = [item["call_id"] for item in added if "call_id" in item]
    assert len(set(call_ids)) == len(call_ids)
    assert all(item["id"].startswith(("msg_", "rs_", "fc_", "ctc_", "tsc_")) for item in added)

    # What the official SDK makes of it: strict validation, then its stream accumulator.
    state: ResponseStreamState[None] = ResponseStreamState(
        input_tools=body.get("tools", []), text_format=omit
    )
    for event in events:
        state.handle_event(sdk_event(strict_checkable(event)))
    if terminal["type"] == "response.completed":
        final = state._completed_response
        assert final is not None
        assert without_parsed(final.to_dict()["output"]) == response["output"]
        for item in final.output:
            if item.type == "function_call" and _is_strict(body, item.name, item.namespace):
                assert item.parsed_arguments == json.loads(item.arguments)
    else:
        assert state._completed_response is None
    return dict(response)


def _is_strict(body: JSON, name: str, namespace: str | None) -> bool:
    tools = body.get("tools", [])
    if namespace is not None:
        tools = next(
            (t["tools"] for t in tools if t["type"] == "namespace" and t["name"] == namespace), []
        )
    return any(
        t["type"] == "function" and t["name"] == name and t.get("strict") is True for t in tools
    )


def sse_bytes(events: list[JSON]) -> bytes:
    return b"".join(encode_event(json.dumps(e), e["type"]) for e in events)


def sdk_client(events: list[JSON]) -> openai.OpenAI:
    """A strict SDK client whose server answers every request with ``events``."""

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=sse_bytes(events)
        )

    return openai.OpenAI(
        base_url="http://gateway.test/v1",
        api_key="test",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
        _strict_response_validation=True,
        max_retries=0,
    )


def sdk_kwargs(body: JSON) -> JSON:
    return {k: v for k, v in body.items() if k not in ("stream",)}


def summarize(item: JSON) -> tuple[Any, ...]:
    """An item in a form short enough for a table."""
    kind = item["type"]
    if kind == "message":
        parts = [(p["type"], p.get("text", p.get("refusal"))) for p in item["content"]]
        return (
            ("message", parts[0][1])
            if len(parts) == 1 and parts[0][0] == "output_text"
            else ("message", parts)
        )
    if kind == "reasoning":
        return ("reasoning", item["content"][0]["text"])
    if kind == "function_call":
        return ("function_call", item.get("namespace"), item["name"], item["arguments"])
    if kind == "custom_tool_call":
        return ("custom_tool_call", item.get("namespace"), item["name"], item["input"])
    if kind == "tool_search_call":
        return ("tool_search_call", item["arguments"])
    raise AssertionError(kind)


# ---------------------------------------------------------------- the table


def js_exec(arguments: JSON) -> str:
    call = json.dumps(arguments, separators=(",", ":"))
    return (
        f"const result = await tools.exec_command({call});\n"
        'text(typeof result === "string" ? result : JSON.stringify(result));'
    )


@dataclass
class Case:
    id: str
    chunks: list[JSON]
    output: list[tuple[Any, ...]]
    status: str = "completed"
    conversions: list[str] = field(default_factory=list)
    incomplete_reason: str | None = None
    error_code: str | None = None
    item_status: str | None = None

    def param(self) -> Any:
        return pytest.param(self, id=self.id)


WEATHER = '{"city": "Paris"}'
CASES = [
    Case(
        "text-openai",
        [
            chunk(role="assistant", content=""),
            chunk(content="Hel"),
            chunk(content="lo"),
            finish("stop"),
            usage_chunk(),
        ],
        [("message", "Hello")],
    ),
    Case(
        "text-ollama",
        [
            chunk(role="assistant", content="Hel"),
            chunk(role="assistant", content="lo"),
            chunk("stop", role="assistant", content=""),
        ],
        [("message", "Hello")],
    ),
    Case(
        "function-openai-fragments",
        [
            chunk(role="assistant", content=None),
            *openai_call(0, "call_abc", "get_weather", WEATHER),
            finish("tool_calls"),
        ],
        [("function_call", None, "get_weather", WEATHER)],
    ),
    Case(
        "function-ollama-whole",
        [whole_call(0, "call_1", "get_weather", WEATHER), finish("tool_calls")],
        [("function_call", None, "get_weather", WEATHER)],
    ),
    Case(
        "function-arguments-as-object",
        [whole_call(0, "call_1", "get_weather", {"city": "Paris"}), finish("tool_calls")],
        [("function_call", None, "get_weather", '{"city":"Paris"}')],
    ),
    Case(
        "parallel-openai",
        [
            *openai_call(0, "call_a", "get_weather", WEATHER),
            *openai_call(1, "call_b", "get_weather", '{"city": "Oslo"}'),
            finish("tool_calls"),
        ],
        [
            ("function_call", None, "get_weather", WEATHER),
            ("function_call", None, "get_weather", '{"city": "Oslo"}'),
        ],
    ),
    Case(
        "parallel-ollama",
        [
            whole_call(0, "call_a", "exec_command", '{"cmd": "ls"}'),
            whole_call(1, "call_b", "apply_patch", json.dumps({"input": PATCH})),
            finish("tool_calls"),
        ],
        [
            ("function_call", None, "exec_command", '{"cmd": "ls"}'),
            ("custom_tool_call", None, "apply_patch", PATCH),
        ],
        conversions=["custom apply_patch restored"],
    ),
    Case(
        "interleaved-indices",
        [
            call_start(0, "call_a", "get_weather"),
            call_start(1, "call_b", "exec_command"),
            call_args(1, '{"cmd": '),
            call_args(0, '{"city": '),
            call_args(1, '"ls"}'),
            call_args(0, '"Paris"}'),
            finish("tool_calls"),
        ],
        [
            ("function_call", None, "get_weather", WEATHER),
            ("function_call", None, "exec_command", '{"cmd": "ls"}'),
        ],
    ),
    Case(
        "three-interleaved-whole-and-fragments",
        [
            call_start(0, "call_a", "exec_command", '{"cmd"'),
            whole_call(1, "call_b", "get_weather", WEATHER),
            whole_call(2, "call_c", "get_weather", '{"city": "Oslo"}'),
            call_args(0, ': "ls"}'),
            finish("tool_calls"),
        ],
        [
            ("function_call", None, "exec_command", '{"cmd": "ls"}'),
            ("function_call", None, "get_weather", WEATHER),
            ("function_call", None, "get_weather", '{"city": "Oslo"}'),
        ],
    ),
    Case(
        "stop-with-calls",
        [*openai_call(0, "call_a", "get_weather", WEATHER), finish("stop")],
        [("function_call", None, "get_weather", WEATHER)],
    ),
    Case(
        "text-then-call",
        [
            chunk(content="Let me check."),
            *openai_call(0, "call_a", "exec_command", '{"cmd": "ls"}'),
            finish("tool_calls"),
        ],
        [("message", "Let me check."), ("function_call", None, "exec_command", '{"cmd": "ls"}')],
    ),
    Case(
        "name-arrives-late",
        [
            chunk(
                tool_calls=[
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"arguments": '{"cmd": '},
                    }
                ]
            ),
            chunk(
                tool_calls=[
                    {"index": 0, "function": {"name": "exec_command", "arguments": '"ls"}'}}
                ]
            ),
            finish("tool_calls"),
        ],
        [("function_call", None, "exec_command", '{"cmd": "ls"}')],
    ),
    Case(
        "index-reused-without-ids",
        [
            chunk(
                tool_calls=[{"index": 0, "function": {"name": "get_weather", "arguments": WEATHER}}]
            ),
            chunk(
                tool_calls=[{"index": 0, "function": {"name": "exec_command", "arguments": "{}"}}]
            ),
            finish("tool_calls"),
        ],
        [
            ("function_call", None, "get_weather", WEATHER),
            ("function_call", None, "exec_command", "{}"),
        ],
    ),
    Case(
        "name-repeated-on-every-delta",
        [
            chunk(
                tool_calls=[
                    {
                        "index": 0,
                        "id": "call_a",
                        "function": {"name": "get_weather", "arguments": '{"city"'},
                    }
                ]
            ),
            chunk(
                tool_calls=[
                    {
                        "index": 0,
                        "id": "call_a",
                        "function": {"name": "get_weather", "arguments": ': "Paris"}'},
                    }
                ]
            ),
            finish("tool_calls"),
        ],
        [("function_call", None, "get_weather", WEATHER)],
    ),
    Case(
        "index-reused-for-a-new-call",
        [
            whole_call(0, "call_a", "get_weather", WEATHER),
            whole_call(0, "call_b", "exec_command", '{"cmd": "ls"}'),
        ],
        [
            ("function_call", None, "get_weather", WEATHER),
            ("function_call", None, "exec_command", '{"cmd": "ls"}'),
        ],
    ),
    Case(
        "no-index",
        [
            chunk(
                tool_calls=[
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            ),
            chunk(tool_calls=[{"function": {"arguments": WEATHER}}]),
            chunk(
                tool_calls=[
                    {
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "exec_command", "arguments": "{}"},
                    }
                ]
            ),
            finish("tool_calls"),
        ],
        [
            ("function_call", None, "get_weather", WEATHER),
            ("function_call", None, "exec_command", "{}"),
        ],
    ),
    Case(
        "legacy-function-call-delta",
        [
            chunk(function_call={"name": "exec_command", "arguments": '{"cmd": "ls"}'}),
            finish("function_call"),
        ],
        [("function_call", None, "exec_command", '{"cmd": "ls"}')],
    ),
    Case(  # the id comes after the call began at its index; a later piece has only the id
        "call-id-after-its-index",
        [
            chunk(tool_calls=[{"index": 0, "type": "function", "function": {"name": "exec_command", "arguments": ""}}]),
            chunk(tool_calls=[{"index": 0, "id": "call_a", "function": {"arguments": '{"cmd": '}}]),
            chunk(tool_calls=[{"id": "call_a", "function": {"arguments": '"ls"}'}}]),
            finish("tool_calls"),
        ],
        [("function_call", None, "exec_command", '{"cmd": "ls"}')],
    ),
    Case(  # streamed in pieces, each naming the function again, as some servers do
        "legacy-function-call-in-pieces",
        [
            chunk(function_call={"name": "exec_command", "arguments": ""}),
            chunk(function_call={"name": "exec_command", "arguments": '{"cmd": '}),
            chunk(function_call={"arguments": '"ls"}'}),
            finish("function_call"),
        ],
        [("function_call", None, "exec_command", '{"cmd": "ls"}')],
    ),
    Case(
        "missing-finish-with-content",
        [chunk(content="Hello")],
        [("message", "Hello")],
    ),
    Case(
        "missing-finish-with-call",
        [*openai_call(0, "call_a", "get_weather", WEATHER)],
        [("function_call", None, "get_weather", WEATHER)],
    ),
    Case(
        "missing-finish-no-content",
        [chunk(role="assistant", content=""), usage_chunk()],
        [],
        status="failed",
        error_code="server_error",
    ),
    Case("empty-stop", [finish("stop")], []),
    Case(
        "unknown-finish-with-content",
        [chunk(content="Hi"), finish("eos_token")],
        [("message", "Hi")],
    ),
    Case(
        "unknown-finish-no-content",
        [finish("abort")],
        [],
        status="failed",
        error_code="server_error",
    ),
    Case(
        "finish-error",
        [chunk(content="Hi"), finish("error")],
        [],
        status="failed",
        error_code="server_error",
    ),
    Case(
        "length",
        [chunk(content="Once upon a"), finish("length"), usage_chunk()],
        [("message", "Once upon a")],
        status="incomplete",
        incomplete_reason="max_output_tokens",
        item_status="incomplete",
    ),
    Case(
        "length-during-call",
        [*openai_call(0, "call_a", "get_weather", '{"city": "Par'), finish("length")],
        [("function_call", None, "get_weather", '{"city": "Par')],
        status="incomplete",
        incomplete_reason="max_output_tokens",
        item_status="incomplete",
    ),
    Case(
        "content-filter",
        [chunk(content="Some"), finish("content_filter")],
        [("message", "Some")],
        status="incomplete",
        incomplete_reason="content_filter",
        item_status="incomplete",
    ),
    Case(
        "in-stream-error-vllm",
        [
            chunk(content="Hel"),
            {
                "error": {
                    "message": "Internal server error",
                    "type": "InternalServerError",
                    "param": None,
                    "code": 500,
                }
            },
        ],
        [],
        status="failed",
        error_code="server_error",
    ),
    Case(
        "in-stream-error-flat",
        [{"object": "error", "message": "boom", "type": "InternalServerError", "code": 500}],
        [],
        status="failed",
        error_code="server_error",
    ),
    Case(
        "context-length-error",
        [
            {
                "error": {
                    "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",
                    "type": "BadRequestError",
                    "code": 400,
                }
            }
        ],
        [],
        status="failed",
        error_code="context_length_exceeded",
    ),
    Case(
        "context-length-error-llama-cpp",
        [
            chunk(content="a"),
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size",
                    "type": "exceed_context_size_error",
                }
            },
        ],
        [],
        status="failed",
        error_code="context_length_exceeded",
    ),
    Case(
        "error-after-done-items",
        [*openai_call(0, "call_a", "get_weather", WEATHER), chunk(content="x"), {"error": "gone"}],
        [("function_call", None, "get_weather", WEATHER)],
        status="failed",
        error_code="server_error",
    ),
    Case(
        "reasoning-content-deepseek",
        [
            chunk(role="assistant", content=None, reasoning_content="Let me"),
            chunk(content=None, reasoning_content=" think."),
            chunk(content="Answer", reasoning_content=None),
            finish("stop"),
            usage_chunk(prompt_cache_hit_tokens=4),
        ],
        [("reasoning", "Let me think."), ("message", "Answer")],
    ),
    Case(
        "reasoning-field-vllm-ollama",
        [
            chunk(role="assistant", reasoning="Think", reasoning_content=None),
            chunk(reasoning="ing", content=""),
            chunk(content="\n\nDone"),
            finish("stop"),
        ],
        [("reasoning", "Thinking"), ("message", "Done")],
    ),
    Case(
        "both-reasoning-fields-same-text",
        [chunk(reasoning="Hm", reasoning_content="Hm"), chunk(content="Ok"), finish("stop")],
        [("reasoning", "Hm"), ("message", "Ok")],
    ),
    Case(
        "think-tags-split",
        [
            chunk(content="\n<th"),
            chunk(content="ink>I should"),
            chunk(content=" greet.</thi"),
            chunk(content="nk>\n"),
            chunk(content="\nHello"),
            finish("stop"),
        ],
        [("reasoning", "I should greet."), ("message", "Hello")],
        conversions=["think tags split into reasoning"],
    ),
    Case(
        "think-then-call",
        [
            chunk(content="<think>plan</think>"),
            *openai_call(0, "call_a", "exec_command", '{"cmd": "ls"}'),
            finish("stop"),
        ],
        [("reasoning", "plan"), ("function_call", None, "exec_command", '{"cmd": "ls"}')],
        conversions=["think tags split into reasoning"],
    ),
    Case(
        "unclosed-think",
        [chunk(content="<think>still thinking"), finish("length")],
        [("reasoning", "still thinking")],
        status="incomplete",
        incomplete_reason="max_output_tokens",
        conversions=["think tags split into reasoning"],
    ),
    Case(
        "think-like-text-is-text",
        [chunk(content="<thought> is a tag"), finish("stop")],
        [("message", "<thought> is a tag")],
    ),
    Case(
        "interleaved-thinking",
        [
            chunk(reasoning_content="First."),
            *openai_call(0, "call_a", "exec_command", '{"cmd": "ls"}'),
            chunk(reasoning_content="Then."),
            *openai_call(1, "call_b", "exec_command", '{"cmd": "pwd"}'),
            finish("tool_calls"),
        ],
        [
            ("reasoning", "First."),
            ("function_call", None, "exec_command", '{"cmd": "ls"}'),
            ("reasoning", "Then."),
            ("function_call", None, "exec_command", '{"cmd": "pwd"}'),
        ],
    ),
    Case(
        "refusal",
        [
            chunk(role="assistant", content=None, refusal="I can't"),
            chunk(refusal=" help."),
            finish("stop"),
        ],
        [("message", [("refusal", "I can't help.")])],
    ),
    Case(
        "text-then-refusal-then-text",
        [chunk(content="Well. "), chunk(refusal="No."), chunk(content=" Sorry."), finish("stop")],
        [("message", [("output_text", "Well. "), ("refusal", "No."), ("output_text", " Sorry.")])],
    ),
    Case(
        "apply-patch-openai-fragments",
        [
            *openai_call(0, "call_p", "apply_patch", json.dumps({"input": PATCH})),
            finish("tool_calls"),
        ],
        [("custom_tool_call", None, "apply_patch", PATCH)],
        conversions=["custom apply_patch restored"],
    ),
    *[
        Case(
            f"apply-patch-{name}",
            [whole_call(0, "call_p", "apply_patch", arguments), finish("tool_calls")],
            [("custom_tool_call", None, "apply_patch", PATCH)],
            conversions=["custom apply_patch restored", conversion],
        )
        for name, arguments, conversion in [
            ("json-string", json.dumps(PATCH), "custom input was a JSON string"),
            ("other-key", json.dumps({"patch": PATCH}), "custom input unwrapped from 'patch'"),
            ("raw", PATCH, "custom input was raw text"),
            (
                "fenced",
                json.dumps({"input": "```diff\n" + PATCH + "```"}),
                "markdown fences stripped",
            ),
        ]
    ],
    *[
        Case(
            f"exec-{name}",
            [whole_call(0, "call_e", "functions__exec", arguments), finish("tool_calls")],
            [("custom_tool_call", "functions", "exec", code)],
            conversions=["custom exec restored", "namespace functions restored", *conversion],
        )
        for name, arguments, code, conversion in [
            ("wrapper", '{"input": "text(1)"}', "text(1)", []),
            (
                "legacy-cmd",
                '{"cmd": "pwd"}',
                js_exec({"cmd": "pwd"}),
                ["legacy exec JSON rewritten"],
            ),
            (
                "legacy-workdir",
                '{"cmd": "ls", "workdir": "/tmp"}',
                js_exec({"cmd": "ls", "workdir": "/tmp"}),
                ["legacy exec JSON rewritten"],
            ),
            (
                "legacy-argv",
                '{"command": ["bash", "-lc", "ls"]}',
                js_exec({"cmd": "ls"}),
                ["legacy exec JSON rewritten"],
            ),
            ("raw-js", "text(2)", "text(2)", ["custom input was raw text"]),
            ("json-string", '"text(3)"', "text(3)", ["custom input was a JSON string"]),
        ]
    ],
    Case(
        "native-custom-call",
        [
            chunk(
                tool_calls=[
                    {
                        "index": 0,
                        "id": "call_n",
                        "type": "custom",
                        "custom": {"name": "apply_patch", "input": PATCH},
                    }
                ]
            ),
            finish("tool_calls"),
        ],
        [("custom_tool_call", None, "apply_patch", PATCH)],
        conversions=["custom apply_patch restored"],
    ),
    Case(
        "namespace-restored",
        [whole_call(0, "call_l", "collaboration__list_agents", "{}"), finish("tool_calls")],
        [("function_call", "collaboration", "list_agents", "{}")],
        conversions=["namespace collaboration restored"],
    ),
    Case(
        "bare-inner-name-resolved",
        [whole_call(0, "call_l", "list_agents", "{}"), finish("tool_calls")],
        [("function_call", "collaboration", "list_agents", "{}")],
        conversions=[
            "tool name list_agents resolved to collaboration.list_agents",
            "namespace collaboration restored",
        ],
    ),
    Case(
        "tool-search",
        [
            whole_call(0, "call_s", "tool_search", '{"query": "calendar", "limit": 3}'),
            finish("tool_calls"),
        ],
        [("tool_search_call", {"query": "calendar", "limit": 3})],
    ),
    Case(
        "tool-search-fragments",
        [*openai_call(0, "call_s", "tool_search", '{"query": "mail"}'), finish("tool_calls")],
        [("tool_search_call", {"query": "mail"})],
    ),
    Case(
        "unknown-tool",
        [whole_call(0, "call_u", "browse_web", '{"url": "x"}'), finish("tool_calls")],
        [("function_call", None, "browse_web", '{"url": "x"}')],
    ),
    Case(
        "empty-arguments",
        [call_start(0, "call_a", "list_agents"), finish("tool_calls")],
        [("function_call", "collaboration", "list_agents", "{}")],
        conversions=[
            "tool name list_agents resolved to collaboration.list_agents",
            "namespace collaboration restored",
        ],
    ),
    Case(
        "strict-arguments-repaired",
        [whole_call(0, "call_w", "get_weather", '{"city": "Paris",}'), finish("tool_calls")],
        [("function_call", None, "get_weather", '{"city":"Paris"}')],
        conversions=["tool arguments repaired"],
    ),
    Case(
        "strict-arguments-unclosed",
        [whole_call(0, "call_w", "get_weather", '```json\n{"city": "Par'), finish("tool_calls")],
        [("function_call", None, "get_weather", '{"city":"Par"}')],
        conversions=["tool arguments repaired"],
    ),
    Case(
        "strict-arguments-python",
        [whole_call(0, "call_w", "get_weather", "{'city': 'Paris'}"), finish("tool_calls")],
        [("function_call", None, "get_weather", '{"city":"Paris"}')],
        conversions=["tool arguments repaired"],
    ),
    Case(
        "strict-arguments-unrecoverable",
        [whole_call(0, "call_w", "get_weather", "Paris please"), finish("tool_calls")],
        [("function_call", None, "get_weather", "{}")],
        conversions=["tool arguments replaced with {}"],
    ),
    Case(
        "non-strict-invalid-arguments-kept",
        [whole_call(0, "call_x", "exec_command", '{"cmd": "ls"'), finish("tool_calls")],
        [("function_call", None, "exec_command", '{"cmd": "ls"')],
    ),
    Case(
        "usage-details",
        [
            chunk(content="Hi"),
            finish("stop"),
            usage_chunk(
                100,
                50,
                prompt_tokens_details={"cached_tokens": 60},
                completion_tokens_details={"reasoning_tokens": 30},
            ),
        ],
        [("message", "Hi")],
    ),
]


@pytest.mark.parametrize("case", [case.param() for case in CASES])
def test_stream_case(case: Case) -> None:
    result = run(case.chunks)
    response = verify(result.events)
    assert [summarize(item) for item in response["output"]] == case.output
    assert response["status"] == case.status
    assert result.translator.finished
    assert result.translator.conversions == case.conversions
    if case.incomplete_reason is not None:
        assert response["incomplete_details"] == {"reason": case.incomplete_reason}
    else:
        assert response["incomplete_details"] is None
    if case.error_code is not None:
        assert response["error"]["code"] == case.error_code
        errors = [e for e in result.events if e["type"] == "error"]
        assert len(errors) == 1 and errors[0]["code"] == case.error_code
        assert errors[0]["error"]["code"] == case.error_code
        assert errors[0]["message"] == errors[0]["error"]["message"] == response["error"]["message"]
    else:
        assert response["error"] is None
    if case.status == "completed":
        assert response["completed_at"] == CREATED_AT
    if case.item_status is not None:
        assert response["output"][-1]["status"] == case.item_status


# ---------------------------------------------------------------- specific behaviour


def test_lifecycle_echoes_the_request() -> None:
    events = make_translator().start()
    created = events[0]["response"]
    assert created == events[1]["response"]
    assert created["id"] == RESPONSE_ID and created["object"] == "response"
    assert created["created_at"] == CREATED_AT and created["model"] == "qwen3-coder"
    assert created["instructions"] == "Be brief."
    assert created["tools"] == TOOLS
    assert created["tool_choice"] == "auto" and created["parallel_tool_calls"] is True
    assert created["reasoning"] == {"effort": "medium", "summary": "auto"}
    assert created["text"] == {"verbosity": "low", "format": {"type": "text"}}
    assert created["store"] is False and created["metadata"] == {}
    assert created["prompt_cache_key"] == "session-1"
    assert (
        created["output"] == [] and created["usage"] is None and created["status"] == "in_progress"
    )
    validate_type(type_=Response, value=created)


def test_defaults_for_a_minimal_request() -> None:
    translator = make_translator({"model": "m", "input": "hi"})
    created = translator.start()[0]["response"]
    assert created["tools"] == [] and created["tool_choice"] == "auto"
    assert created["parallel_tool_calls"] is True and created["store"] is True
    assert created["metadata"] == {} and created["text"] == {"format": {"type": "text"}}
    # The specification's defaults where the client sent none: numbers, not nulls.
    assert (created["temperature"], created["top_p"]) == (1.0, 1.0)
    assert (created["presence_penalty"], created["frequency_penalty"], created["top_logprobs"]) == (0.0, 0.0, 0)
    assert (created["background"], created["service_tier"], created["truncation"]) == (False, "default", "disabled")
    assert created["max_output_tokens"] is None and created["max_tool_calls"] is None
    assert created["reasoning"] is None and created["prompt_cache_key"] is None
    validate_type(type_=Response, value=created)


def test_start_is_implied_and_only_once() -> None:
    translator = make_translator()
    events = translator.feed(chunk(content="Hi"))
    assert [e["type"] for e in events[:2]] == ["response.created", "response.in_progress"]
    assert translator.start() == []


def test_after_the_terminal_event_everything_returns_nothing() -> None:
    translator = make_translator()
    translator.start()
    translator.feed(chunk(content="Hi"))
    assert translator.finish()[-1]["type"] == "response.completed"
    assert translator.feed(chunk(content="more")) == []
    assert translator.finish() == []
    assert translator.fail("late") == []
    assert translator.response["output"][0]["content"][0]["text"] == "Hi"


def test_fail_before_anything_is_a_complete_stream() -> None:
    translator = make_translator()
    events = [dict(e) for e in translator.fail("connect timeout")]
    response = verify(events)
    assert [e["type"] for e in events] == [
        "response.created",
        "response.in_progress",
        "error",
        "response.failed",
    ]
    assert response["error"] == {"code": "server_error", "message": "connect timeout"}


def test_transport_cut_mid_call_leaves_the_call_unfinished() -> None:
    result = run(
        [
            chunk(content="Sure."),
            *openai_call(0, "call_a", "exec_command", '{"cmd": "rm -rf /tmp/bu'),
        ],
        end="connection reset",
    )
    response = verify(result.events)
    assert response["status"] == "failed"
    assert [summarize(item) for item in response["output"]] == [("message", "Sure.")]
    added = [e for e in result.events if e["type"] == "response.output_item.added"]
    assert added[-1]["item"]["type"] == "function_call"  # added, never done, never executed


def test_fail_with_a_code() -> None:
    result = run([chunk(content="Hi")], end=None)
    events = [dict(e) for e in result.translator.fail("too long", code="context_length_exceeded")]
    response = verify(result.events + events)
    assert response["error"]["code"] == "context_length_exceeded"
    assert events[0]["error"]["type"] == "invalid_request_error"


def test_usage_mapping() -> None:
    response = run(CASES_BY_ID["usage-details"].chunks).response
    assert response["usage"] == {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 60, "cache_write_tokens": 0},
        "output_tokens": 50,
        "output_tokens_details": {"reasoning_tokens": 30},
        "total_tokens": 150,
    }
    deepseek = run(CASES_BY_ID["reasoning-content-deepseek"].chunks).response
    assert deepseek["usage"]["input_tokens_details"]["cached_tokens"] == 4
    assert run([chunk(content="Hi"), finish("stop")]).response["usage"] is None


def test_usage_survives_a_failure() -> None:
    response = run([chunk(content="Hi"), usage_chunk(3, 4)], end="cut").response
    assert response["usage"]["total_tokens"] == 7


def test_reasoning_item_seals_its_text() -> None:
    response = run(CASES_BY_ID["reasoning-content-deepseek"].chunks).response
    reasoning = response["output"][0]
    assert reasoning["summary"] == [] and reasoning["content"] == [
        {"type": "reasoning_text", "text": "Let me think."}
    ]
    assert open_reasoning(reasoning["encrypted_content"]) == "Let me think."


def test_function_call_events() -> None:
    result = run(CASES_BY_ID["function-openai-fragments"].chunks)
    events = result.events
    added = next(e for e in events if e["type"] == "response.output_item.added")
    assert added["item"] == {
        "id": added["item"]["id"],
        "type": "function_call",
        "status": "in_progress",
        "call_id": "call_abc",
        "name": "get_weather",
        "arguments": "",
    }
    deltas = [e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert "".join(deltas) == WEATHER and len(deltas) > 1
    done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert done["arguments"] == WEATHER and done["name"] == "get_weather"


def test_namespaced_function_call_item() -> None:
    item = run(CASES_BY_ID["namespace-restored"].chunks).output[0]
    assert item["namespace"] == "collaboration" and item["name"] == "list_agents"
    plain = run(CASES_BY_ID["function-ollama-whole"].chunks).output[0]
    assert "namespace" not in plain


def test_custom_call_events() -> None:
    events = run(CASES_BY_ID["exec-legacy-cmd"].chunks).events
    types = [e["type"] for e in events[2:]]
    assert types == [
        "response.output_item.added",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.output_item.done",
        "response.completed",
    ]
    added, delta, done, item_done = events[2:6]
    assert added["item"]["input"] == "" and added["item"]["id"].startswith("ctc_")
    assert delta["delta"] == done["input"] == item_done["item"]["input"] == js_exec({"cmd": "pwd"})
    assert (
        item_done["item"]["namespace"] == "functions" and item_done["item"]["call_id"] == "call_e"
    )


def test_tool_search_item() -> None:
    item = run(CASES_BY_ID["tool-search"].chunks).output[0]
    assert item == {
        "id": item["id"],
        "type": "tool_search_call",
        "status": "completed",
        "call_id": "call_s",
        "execution": "client",
        "arguments": {"query": "calendar", "limit": 3},
    }
    assert item["id"].startswith("tsc_")


@pytest.mark.parametrize(
    ("upstream_ids", "kept"),
    [
        (["call_a", "call_b"], [True, True]),
        (["call_a", "call_a"], [True, False]),
        (["chatcmpl-tool-" + "f" * 32, "functions.exec:0"], [False, False]),
        (["", "x" * 40], [False, True]),
    ],
    ids=["safe", "duplicate", "unsafe", "empty-and-longest"],
)
def test_call_ids(upstream_ids: list[str], kept: list[bool]) -> None:
    chunks = [
        whole_call(i, upstream_id, "exec_command", "{}")
        for i, upstream_id in enumerate(upstream_ids)
    ]
    result = run(chunks)
    verify(result.events)
    call_ids = [item["call_id"] for item in result.output]
    for upstream_id, call_id, keep in zip(upstream_ids, call_ids, kept, strict=True):
        if keep:
            assert call_id == upstream_id
        else:
            assert call_id != upstream_id and call_id.startswith("call_") and len(call_id) <= 40
    replaced = sum(
        1 for upstream_id, keep in zip(upstream_ids, kept, strict=True) if upstream_id and not keep
    )
    assert result.translator.conversions.count("upstream call id replaced") == replaced


def test_ids_differ_between_responses_and_repeat_for_the_same_one() -> None:
    chunks = CASES_BY_ID["parallel-ollama"].chunks
    first = run(chunks).output
    again = run(chunks).output
    assert first == again
    other = make_translator(response_id="resp_other")
    for c in chunks:
        other.feed(c)
    other.finish()
    assert {i["id"] for i in first}.isdisjoint(i["id"] for i in other.response["output"])


def test_late_fragment_for_a_closed_call_is_dropped_and_counted() -> None:
    result = run(
        [
            whole_call(0, "call_a", "get_weather", WEATHER),
            whole_call(1, "call_b", "get_weather", WEATHER),
            call_args(0, "garbage"),
            finish("tool_calls"),
        ]
    )
    verify(result.events)
    assert [item["arguments"] for item in result.output] == [WEATHER, WEATHER]
    assert result.translator.conversions == ["late tool-call fragment dropped"]


def test_whitespace_before_a_call_is_not_a_message() -> None:
    result = run(
        [chunk(content="\n\n"), whole_call(0, "call_a", "exec_command", "{}"), finish("tool_calls")]
    )
    assert [item["type"] for item in verify(result.events)["output"]] == ["function_call"]


def test_a_nameless_call_is_dropped() -> None:
    result = run([chunk(content="Hi"), call_args(3, '{"x": 1}'), finish("tool_calls")])
    assert [summarize(i) for i in verify(result.events)["output"]] == [("message", "Hi")]
    assert result.translator.conversions == ["tool call without a name dropped"]


def test_only_choice_zero_counts() -> None:
    two = chunk(content="A")
    two["choices"].append({"index": 1, "delta": {"content": "B"}, "finish_reason": None})
    two["choices"].reverse()
    assert [summarize(i) for i in run([two, finish("stop")]).output] == [("message", "A")]


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "codex"


@pytest.mark.parametrize(
    ("fixture", "chunks", "expected"),
    [
        pytest.param(
            "gpt-5.4/turn-1.json",
            [
                *openai_call(0, "call_1", "exec_command", '{"cmd": "ls"}'),
                whole_call(1, "call_2", "multi_agent_v1__spawn_agent", '{"message": "go"}'),
            ],
            [
                ("function_call", None, "exec_command", '{"cmd": "ls"}'),
                ("function_call", "multi_agent_v1", "spawn_agent", '{"message": "go"}'),
            ],
            id="gpt-5.4",
        ),
        pytest.param(
            "gpt-5.5/turn-1.json",
            [
                whole_call(0, "call_1", "apply_patch", json.dumps({"input": PATCH})),
                whole_call(1, "call_2", "tool_search", '{"query": "goal", "limit": 2}'),
            ],
            [
                ("custom_tool_call", None, "apply_patch", PATCH),
                ("tool_search_call", {"query": "goal", "limit": 2}),
            ],
            id="gpt-5.5",
        ),
        pytest.param(
            "gpt-5.6-terra/turn-1.json",
            [
                whole_call(0, "call_1", "functions__exec", '{"cmd": "pwd"}'),
                whole_call(1, "call_2", "collaboration__list_agents", "{}"),
                whole_call(2, "call_3", "wait", '{"cell_id": "1"}'),
            ],
            [
                ("custom_tool_call", "functions", "exec", js_exec({"cmd": "pwd"})),
                ("function_call", "collaboration", "list_agents", "{}"),
                ("function_call", "functions", "wait", '{"cell_id": "1"}'),
            ],
            id="gpt-5.6-terra",
        ),
    ],
)
def test_codex_requests(fixture: str, chunks: list[JSON], expected: list[tuple[Any, ...]]) -> None:
    """Recorded Codex bodies: echoed in SDK shape, and calls restored to Codex's own tools."""
    body = json.loads((FIXTURES / fixture).read_text())
    result = run([*chunks, finish("tool_calls")], body)
    response = verify(result.events, body)
    assert [summarize(item) for item in response["output"]] == expected
    validate_type(type_=Response, value=response)


def test_response_snapshot_before_the_end() -> None:
    translator = make_translator()
    translator.feed(whole_call(0, "call_a", "get_weather", WEATHER))
    translator.feed(whole_call(1, "call_b", "get_weather", WEATHER))
    snapshot = translator.response
    assert snapshot["status"] == "in_progress" and len(snapshot["output"]) == 1
    assert not translator.finished


# ---------------------------------------------------------------- real SDK clients, end to end


@pytest.mark.parametrize(
    "case_id",
    [
        "text-openai",
        "parallel-ollama",
        "reasoning-content-deepseek",
        "think-tags-split",
        "strict-arguments-repaired",
        "tool-search",
        "exec-legacy-cmd",
        "namespace-restored",
        "refusal",
    ],
)
def test_sdk_stream_helper_get_final_response(case_id: str) -> None:
    case = CASES_BY_ID[case_id]
    result = run(case.chunks)
    client = sdk_client(result.events)
    with client.responses.stream(**sdk_kwargs(BODY)) as stream:
        seen = [event.type for event in stream]
        final = stream.get_final_response()
    assert seen == [e["type"] for e in result.events]
    assert without_parsed(final.to_dict()["output"]) == result.output
    assert final.output_text == "".join(
        p["text"]
        for i in result.output
        if i["type"] == "message"
        for p in i["content"]
        if p["type"] == "output_text"
    )
    for item in final.output:
        if item.type == "function_call" and item.name == "get_weather":
            assert item.parsed_arguments == json.loads(item.arguments)


def test_sdk_raw_stream_strict() -> None:
    result = run(CASES_BY_ID["interleaved-thinking"].chunks)
    client = sdk_client(result.events)
    events = list(client.responses.create(**sdk_kwargs(BODY), stream=True))
    assert [e.sequence_number for e in events] == list(range(len(result.events)))
    assert events[-1].type == "response.completed"


@pytest.mark.parametrize("case_id", ["length", "content-filter"])
def test_sdk_stream_helper_incomplete(case_id: str) -> None:
    result = run(CASES_BY_ID[case_id].chunks)
    client = sdk_client(result.events)
    with client.responses.stream(**sdk_kwargs(BODY)) as stream:
        events = list(stream)
        assert events[-1].type == "response.incomplete"
        with pytest.raises(RuntimeError, match=r"Didn't receive a `response\.completed` event"):
            stream.get_final_response()


def test_sdk_raises_on_the_error_event() -> None:
    result = run(CASES_BY_ID["in-stream-error-vllm"].chunks)
    client = sdk_client(result.events)
    with pytest.raises(openai.APIError, match="Internal server error"):
        list(client.responses.create(**sdk_kwargs(BODY), stream=True))


# ---------------------------------------------------------------- properties

CASES_BY_ID = {case.id: case for case in CASES}

_texts = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30
).filter(lambda t: t.strip() != "")
_arguments = st.dictionaries(
    st.text(max_size=8), st.one_of(st.integers(), st.text(max_size=12), st.booleans()), max_size=3
).map(json.dumps)
_tool_names = st.sampled_from(
    [
        "get_weather",
        "exec_command",
        "collaboration__list_agents",
        "mystery_tool",
        "apply_patch",
        "tool_search",
    ]
)


@st.composite
def scripts(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """A model turn: reasoning, text and calls in some order (calls last, as models do)."""
    pieces: list[tuple[str, Any]] = []
    if draw(st.booleans()):
        pieces.append(("reasoning", draw(_texts)))
    if draw(st.booleans()):
        pieces.append(("text", draw(_texts)))
    for _ in range(draw(st.integers(0, 3))):
        name = draw(_tool_names)
        arguments = (
            json.dumps({"input": draw(_texts)}) if name == "apply_patch" else draw(_arguments)
        )
        pieces.append(("call", (name, arguments)))
    return pieces


def split(draw: st.DrawFn, text: str) -> list[str]:
    cuts = sorted(draw(st.sets(st.integers(1, max(len(text) - 1, 1)), max_size=5)))
    bounds = [0, *[c for c in cuts if c < len(text)], len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if a < b] or [text]


def render(script: list[tuple[str, Any]], draw: st.DrawFn | None) -> list[JSON]:
    """OpenAI-style chunks for ``script``; ``draw`` splits every text at random points."""
    pieces: Iterator[str]
    chunks: list[JSON] = [chunk(role="assistant", content="")]
    index = 0
    for kind, value in script:
        if kind == "call":
            name, arguments = value
            parts = split(draw, arguments) if draw else [arguments]
            chunks.append(call_start(index, f"call_{index}", name, parts[0]))
            chunks += [call_args(index, part) for part in parts[1:]]
            index += 1
            continue
        pieces = iter(split(draw, value) if draw else [value])
        key = "reasoning_content" if kind == "reasoning" else "content"
        chunks += [chunk(**{key: piece}) for piece in pieces]
    chunks += [finish("tool_calls" if index else "stop"), usage_chunk()]
    return chunks


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=scripts(), data=st.data())
def test_splitting_fragments_does_not_change_the_output(
    script: list[tuple[str, Any]], data: st.DataObject
) -> None:
    whole = run(render(script, None))
    pieces = run(render(script, data.draw))
    assert verify(pieces.events)["output"] == verify(whole.events)["output"]
    assert pieces.translator.conversions == whole.translator.conversions
    assert len(whole.output) == len(script)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    calls=st.lists(
        st.tuples(st.sampled_from(["get_weather", "exec_command"]), _arguments),
        min_size=2,
        max_size=4,
    ),
    data=st.data(),
)
def test_interleaved_calls_each_become_one_item(
    calls: list[tuple[str, str]], data: st.DataObject
) -> None:
    """Any interleaving of the calls' fragments (each call's own fragments in order)."""
    queues = [
        [call_start(i, f"call_{i}", name, "")]
        + [call_args(i, part) for part in split(data.draw, arguments)]
        for i, (name, arguments) in enumerate(calls)
    ]
    chunks: list[JSON] = []
    first_seen: list[int] = []
    while any(queues):
        i = data.draw(st.sampled_from([i for i, q in enumerate(queues) if q]))
        if i not in first_seen:
            first_seen.append(i)
        chunks.append(queues[i].pop(0))
    result = run([*chunks, finish("tool_calls")])
    output = verify(result.events)["output"]
    assert [(item["call_id"], item["name"], item["arguments"]) for item in output] == [
        (f"call_{i}", calls[i][0], calls[i][1]) for i in first_seen
    ]
    assert result.translator.conversions == []


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    pieces=st.lists(
        st.one_of(
            st.tuples(st.just("content"), st.text(max_size=12)),
            st.tuples(st.just("reasoning"), st.text(max_size=6)),
            st.tuples(st.just("refusal"), st.text(max_size=6)),
            st.tuples(
                st.just("call"),
                st.tuples(
                    st.integers(0, 2),
                    st.sampled_from([None, "call_x", "get_weather"]),
                    st.text(max_size=8),
                ),
            ),
            st.tuples(
                st.just("finish"),
                st.sampled_from(["stop", "length", "tool_calls", "content_filter", "weird"]),
            ),
            st.tuples(st.just("error"), st.text(max_size=10)),
        ),
        max_size=12,
    ),
    end=st.sampled_from(["finish", "fail", "finish"]),
)
def test_any_chunk_sequence_gives_a_valid_stream(pieces: list[tuple[str, Any]], end: str) -> None:
    """Garbage in, a well-formed stream out: every invariant ``verify`` checks holds."""
    chunks: list[JSON] = []
    for kind, value in pieces:
        if kind == "call":
            index, name_or_id, arguments = value
            entry: JSON = {"index": index, "function": {"arguments": arguments}}
            if name_or_id == "get_weather":
                entry["function"]["name"] = name_or_id
            elif name_or_id is not None:
                entry["id"] = name_or_id
            chunks.append(chunk(tool_calls=[entry]))
        elif kind == "finish":
            chunks.append(finish(value))
        elif kind == "error":
            chunks.append({"error": {"message": value}})
        else:
            chunks.append(chunk(**{"reasoning_content" if kind == "reasoning" else kind: value}))
    result = run(chunks, end="finish" if end == "finish" else "transport cut")
    verify(result.events)


_CONTENT_PIECES = st.sampled_from(
    ["Hel", "lo ", "", " ", "\n", "<think>", "</think>", "<tool_call>", '{"name": "get_weather", "arguments": {"city": "Oslo"}}',
     "</tool_call>", "`", "```", "x" * 7, "é", '[TOOL_CALLS]get_weather{"city": "Rome"}']
)  # fmt: skip
_BESIDE_CONTENT = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["assistant", None]),
        "reasoning_content": st.sampled_from(["so", None, ""]),
        "reasoning": st.sampled_from(["hmm", None]),
        "refusal": st.sampled_from(["no", None]),
        "tool_calls": st.sampled_from([None, [{"index": 0, "id": "call_q", "function": {"name": "get_weather", "arguments": "{}"}}]]),
    },
)  # fmt: skip


@st.composite
def busy_chunks(draw: st.DrawFn) -> JSON:
    """A chunk of content alone about half the time, else with anything else a chunk can say."""
    delta: JSON = {"content": draw(st.one_of(_CONTENT_PIECES, _CONTENT_PIECES, st.none()))}
    delta.update(draw(st.one_of(st.just({}), st.just({"role": "assistant"}), _BESIDE_CONTENT)))
    made = chunk(draw(st.sampled_from([None, None, None, None, "stop", "length", ""])), **delta)
    choice = made["choices"][0]
    choice["index"] = draw(st.sampled_from([0] * 7 + [1]))
    odd = draw(st.sampled_from([None] * 6 + ["second choice", "usage", "usage", "error", "null error", "error object"]))
    if odd == "second choice":
        made["choices"].append({**choice, "index": 1 - choice["index"], "delta": {"content": "other choice"}})
    elif odd == "usage":
        made["usage"] = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    elif odd == "error":
        made["error"] = {"message": "upstream broke"}
    elif odd == "null error":
        made["error"] = None
    elif odd == "error object":
        made["object"] = "error"
    return made


def on_both_paths(chunks: list[JSON], body: JSON = BODY) -> tuple[Run, Run]:
    """``chunks`` read as the translator reads them, and with every chunk read in full."""
    short = run(chunks, body)
    full_path = pytest.MonkeyPatch()
    full_path.setattr(chat_stream, "plain_content", lambda chunk: None)
    try:
        full = run(chunks, body)
    finally:
        full_path.undo()
    return short, full


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chunks=st.lists(busy_chunks(), max_size=10), tools=st.booleans())
def test_plain_text_chunks_read_on_the_short_path_as_on_the_full_one(chunks: list[JSON], tools: bool) -> None:
    """Most chunks carry only a few characters of the answer and are read on a short path;
    any chunk, whatever else it carries, gives the same events as when every chunk is read
    in full."""
    short, full = on_both_paths(chunks, BODY if tools else {**BODY, "tools": []})
    assert short.events == full.events
    assert short.translator.conversions == full.translator.conversions


_USAGE = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}


@pytest.mark.parametrize(
    "then",
    [
        [chunk(content="")],
        [chunk(content=" there", role="assistant")],
        [chunk(content=" there", reasoning_content=None)],
        [{**chunk(content=" there"), "usage": _USAGE}],
        [{**chunk(content=" there"), "object": "error"}],
        [{**chunk(content=" there"), "error": None}],
        [{**chunk(content=" there"), "error": {"message": "broke"}}],
        [{"object": "chat.completion.chunk", "choices": []}, chunk(content=" there")],
        [{"object": "chat.completion.chunk", "choices": [
            {"index": 1, "delta": {"content": " other"}}, {"index": 0, "delta": {"content": " there"}}]}],
        [{"object": "chat.completion.chunk", "choices": [{"index": 1, "delta": {"content": " other"}}]}],
        [chunk("length", content=" there")],
        [chunk(content="\n"), chunk(content="<tool_call>"), chunk(content='{"name": "get_weather", "arguments": {"city": "Oslo"}}'),
         chunk(content="</tool_call>")],
        [chunk(content=" `<tool_call>` is a tag")],
    ],
    ids=["empty", "with its role", "with a null field", "with usage", "an error object", "a null error", "an error",
         "no choice", "two choices", "another choice only", "with a finish reason", "a call written in the text",
         "a tag in code"],
)  # fmt: skip
def test_what_keeps_a_chunk_off_the_short_path(then: list[JSON]) -> None:
    short, full = on_both_paths([chunk(role="assistant", content=""), chunk(content="Hi"), *then, finish("stop"), usage_chunk()])
    assert short.events == full.events
    assert short.translator.conversions == full.translator.conversions


def test_reasoning_in_think_tags_is_sent_as_soon_as_no_closing_tag_can_be_starting() -> None:
    events = run([chunk(content="<think>abc"), chunk(content="d</thi"), chunk(content="nk>hi"), finish("stop")]).events
    deltas = [event["delta"] for event in events if event["type"] == "response.reasoning_text.delta"]
    assert deltas == ["abc", "d"]


def test_a_delta_or_a_finish_reason_of_the_wrong_type_says_nothing() -> None:
    odd = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": "garbage", "finish_reason": 7}]}
    result = run([chunk(content="hi"), odd])
    assert result.translator.response["status"] == "completed"
    assert [item["content"][0]["text"] for item in result.output] == ["hi"]
    # The body stopped without [DONE]: with no finish reason, the answer was cut short.
    cut = run([chunk(content="hi"), odd], end=None)
    cut.events.extend(cut.translator.finish(ended_cleanly=False))
    assert cut.translator.response["status"] == "failed"


def plain_chunks(*chunks: JSON) -> PlainChunks:
    """``chunks`` as the Chat backend hands on plain chunks that came in one read."""
    text = "".join(c["choices"][0]["delta"]["content"] for c in chunks)
    return PlainChunks(text, b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks))


@pytest.mark.parametrize("opened", [True, False], ids=["a message open", "nothing open yet"])
def test_plain_chunks_that_pass_are_one_text_delta(opened: bool) -> None:
    """Once the answer's text has begun; before, whether a ``<think>`` block leads is yet to
    be seen, and they are read one by one."""
    before = [chunk(role="assistant", content="Hi")] if opened else []
    words = [chunk(content=" there"), chunk(content=", how"), chunk(content=" are you?")]
    one_by_one = run([*before, *words, finish("stop")])
    together = make_translator()
    events = together.start() + [e for c in before for e in together.feed(c)] + together.feed(plain_chunks(*words))
    events += together.feed(finish("stop")) + together.finish()
    deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
    assert deltas == (["Hi", " there, how are you?"] if opened else [" there", ", how", " are you?"])
    assert together.response["output"] == one_by_one.response["output"]
    verify([dict(e) for e in events])


@pytest.mark.parametrize(
    "words",
    [
        ["Let me check. ", "<tool_call>", '{"name": "get_weather", "arguments": {"city": "Oslo"}}', "</tool_call>"],
        ["<think>", "hm", "</think>", "Hi"],
    ],
    ids=["a call written in the text", "think tags"],
)
def test_plain_chunks_that_do_not_pass_are_read_one_by_one(words: list[str]) -> None:
    chunks = [chunk(content=word) for word in words]
    one_by_one = run([*chunks, finish("stop")])
    together = run([plain_chunks(*chunks), finish("stop")])  # type: ignore[list-item]
    assert together.events == one_by_one.events
    assert together.translator.conversions == one_by_one.translator.conversions


def test_keep_alive_says_in_progress_within_the_stream_and_nothing_outside_it() -> None:
    """While the upstream only pings: ``response.in_progress`` with the Response so far,
    its output left out (the client has the items from their own events), numbered in
    the stream; nothing once the terminal event is written."""
    translator = make_translator()
    events = [*translator.start(), *translator.feed(chunk(content="Hel"))]
    [beat] = translator.keep_alive()
    assert beat["type"] == "response.in_progress" and beat["sequence_number"] == len(events)
    assert beat["response"] == {**events[0]["response"], "output": []}
    after = translator.feed(chunk(content="lo"))
    assert after[0]["sequence_number"] == beat["sequence_number"] + 1
    translator.feed(chunk(finish_reason="stop"))
    translator.finish()
    assert translator.keep_alive() == []
    assert translator.response["output"][0]["content"][0]["text"] == "Hello"
