"""The request parameters every Response object repeats, and a Response made whole.

The Open Responses specification (2026-04-24, ``ResponseResource``) requires every
Response object to carry all of: ``id, object, created_at, completed_at, status,
incomplete_details, model, previous_response_id, instructions, output, error, tools,
tool_choice, truncation, parallel_tool_calls, text, top_p, presence_penalty,
frequency_penalty, top_logprobs, temperature, reasoning, usage, max_output_tokens,
max_tool_calls, store, background, service_tier, metadata, safety_identifier,
prompt_cache_key`` (plus ``user``). ``echo_request`` gives the request's part of them:
the client's values, or the specified defaults where it sent none (numbers where
numbers are required; an echoed function tool has ``description``, ``parameters`` and
``strict``, whose default is true). ``complete_response`` makes a Response that came
from elsewhere (a Responses backend, an older stored record) whole the same way, and
``complete_usage`` a ``usage`` object.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, SupportsIndex

import orjson

from toolwire.protocol import ResponsesRequest, ToolSpec, token_count
from toolwire.protocol._tool_cache import TOOL_LISTS

JSON = dict[str, Any]

# Request fields a Response echoes as they were sent, when they were (reference §4.1).
_ECHOED_AS_SENT = ("prompt_cache_retention",)
_TRUNCATIONS = ("auto", "disabled")


def echo_request(request: ResponsesRequest) -> JSON:
    """The request parameters every Response object repeats, in Responses shape."""
    extra = request.model_extra or {}
    echo: JSON = {
        "instructions": request.instructions,
        # A client that resends its tools gets the very same specs (the tool-list cache):
        # their echo is built once, and shared by every Response echoing them.
        "tools": TOOL_LISTS.derived(request.tools or (), _echoed_tools),
        "tool_choice": request.tool_choice if request.tool_choice is not None else "auto",
        "parallel_tool_calls": request.parallel_tool_calls
        if request.parallel_tool_calls is not None
        else True,
        "temperature": _number_or(request.temperature, 1.0),
        "top_p": _number_or(request.top_p, 1.0),
        "presence_penalty": _number_or(extra.get("presence_penalty"), 0.0),
        "frequency_penalty": _number_or(extra.get("frequency_penalty"), 0.0),
        "top_logprobs": _integer_or(extra.get("top_logprobs"), 0),
        "max_output_tokens": request.max_output_tokens,
        "max_tool_calls": _integer_or(extra.get("max_tool_calls"), None),
        "previous_response_id": request.previous_response_id,
        "reasoning": _reasoning(request.reasoning),
        "text": _text(request.text),
        "truncation": _one_of(extra.get("truncation"), _TRUNCATIONS, "disabled"),
        "metadata": request.metadata if request.metadata is not None else {},
        "store": request.store if request.store is not None else True,
        "background": _boolean_or(extra.get("background"), False),
        "service_tier": _string_or(extra.get("service_tier"), "default"),
        "safety_identifier": _string_or(extra.get("safety_identifier"), None),
        "prompt_cache_key": _string_or(extra.get("prompt_cache_key"), None),
        "user": request.user,
    }
    for key in _ECHOED_AS_SENT:
        if key in extra:
            echo[key] = extra[key]
    return echo


# What a complete Response's fields must be; a field missing or not of its kind is
# replaced (by the request's echo, or by the Response's own defaults below).
_Check = Callable[[Any], bool]


_NUMBERS = (int, float)  # (``int | float`` would be made again at every call)


def _number(value: Any) -> bool:
    return isinstance(value, _NUMBERS) and not isinstance(value, bool)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _boolean(value: Any) -> bool:
    return isinstance(value, bool)


def _string(value: Any) -> bool:
    return isinstance(value, str)


def _object(value: Any) -> bool:
    return isinstance(value, dict)


def _list(value: Any) -> bool:
    return isinstance(value, list)


def _anything(value: Any) -> bool:
    return True


def _error(value: Any) -> bool:
    return _object(value) and _string(value.get("code")) and _string(value.get("message"))


def _text_field(value: Any) -> bool:
    return _object(value) and "format" in value


def _truncation(value: Any) -> bool:
    return value in _TRUNCATIONS


def _or_none(check: _Check) -> _Check:
    return lambda value: value is None or check(value)


_FIELDS: Mapping[str, _Check] = {
    "id": _string,
    "object": _string,
    "created_at": _integer,
    "completed_at": _or_none(_integer),
    "status": _string,
    "incomplete_details": _or_none(_object),
    "model": _string,
    "previous_response_id": _or_none(_string),
    "instructions": _anything,  # a string, a list of messages, or null
    "output": _list,
    "error": _or_none(_error),
    "tools": _list,
    "tool_choice": _anything,
    "truncation": _truncation,
    "parallel_tool_calls": _boolean,
    "text": _text_field,
    "top_p": _number,
    "presence_penalty": _number,
    "frequency_penalty": _number,
    "top_logprobs": _integer,
    "temperature": _number,
    "reasoning": _or_none(_object),
    "usage": _or_none(_object),
    "max_output_tokens": _or_none(_integer),
    "max_tool_calls": _or_none(_integer),
    "store": _boolean,
    "background": _boolean,
    "service_tier": _string,
    "metadata": _object,
    "safety_identifier": _or_none(_string),
    "prompt_cache_key": _or_none(_string),
    "user": _or_none(_string),
}
_OWN_DEFAULTS: JSON = {
    "object": "response",
    "created_at": 0,
    "completed_at": None,
    "status": "completed",
    "incomplete_details": None,
    "model": "",
    "output": [],
    "error": None,
    "usage": None,
}


def complete_response(response: Mapping[str, Any], echo: Mapping[str, Any] | None = None) -> JSON:
    """``response`` with every field the specification requires: a missing one, or one
    not of its kind (``temperature: null``), comes from ``echo`` (the request's part:
    ``echo_request``) or the Response's own defaults; ``usage`` is made whole
    (``complete_usage``), a failure's ``error`` gets a ``code``. Other fields stay.
    Without ``echo``, the defaults of a request that set nothing."""
    echo = RESPONSE_DEFAULTS if echo is None else echo
    whole = dict(response)
    for name, check in _FIELDS.items():
        value = whole.get(name, _MISSING)
        if value is _MISSING or not check(value):
            whole[name] = _replacement(name, value, echo)
    if whole["usage"] is not None:
        whole["usage"] = complete_usage(whole["usage"])
    return whole


def complete_usage(usage: Mapping[str, Any] | None) -> JSON:
    """A ``usage`` object with every count the specification requires (0 when unknown)."""
    usage = usage or {}
    input_tokens = token_count(usage.get("input_tokens"))
    output_tokens = token_count(usage.get("output_tokens"))
    input_details = usage.get("input_tokens_details")
    output_details = usage.get("output_tokens_details")
    input_details = dict(input_details) if isinstance(input_details, dict) else {}
    output_details = dict(output_details) if isinstance(output_details, dict) else {}
    input_details["cached_tokens"] = token_count(input_details.get("cached_tokens"))
    input_details["cache_write_tokens"] = token_count(input_details.get("cache_write_tokens"))
    output_details["reasoning_tokens"] = token_count(output_details.get("reasoning_tokens"))
    total = usage.get("total_tokens")
    return {
        **usage,
        "input_tokens": input_tokens,
        "input_tokens_details": input_details,
        "output_tokens": output_tokens,
        "output_tokens_details": output_details,
        "total_tokens": token_count(total) if total is not None else input_tokens + output_tokens,
    }


_MISSING = object()


def _replacement(name: str, value: Any, echo: Mapping[str, Any]) -> Any:
    if name == "error" and isinstance(value, dict):  # a failure without a code: keep what it says
        return {
            **value,
            "code": value.get("code") if isinstance(value.get("code"), str) else "server_error",
            "message": value.get("message") if isinstance(value.get("message"), str) else "The response failed.",
        }
    if name in echo:
        return echo[name]
    return _OWN_DEFAULTS.get(name, RESPONSE_DEFAULTS.get(name))


class EchoedTools(list[JSON]):
    """The ``tools`` a Response repeats, keeping its JSON once it is written.

    Every Response object of a stream repeats the list (``response.created``,
    ``.in_progress``, ``.completed``), and the requests that resend one tool list share
    its echo (``echo_request``): written once, its JSON goes into each event as it is
    (``dumps_event``). A Codex tool list is about 9 kB. Read-only, like the specs it is
    made of.
    """

    __slots__ = ("_json",)

    def __init__(self, tools: list[JSON]) -> None:
        super().__init__(tools)
        self._json: orjson.Fragment | None = None

    def json(self) -> orjson.Fragment:
        """The list's JSON, written the first time it is asked for."""
        if self._json is None:
            self._json = orjson.Fragment(orjson.dumps(self))
        return self._json

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[type[list[JSON]], tuple[list[JSON]]]:
        """Copied or pickled, it is a plain list (its JSON cannot be pickled, and a copy may
        be changed)."""
        return list, (list(self),)


def dumps_event(event: JSON) -> bytes:
    """``orjson.dumps(event)``, the same bytes; the tools a Response in it echoes are
    written from the JSON they keep (``EchoedTools``)."""
    response = event.get("response")
    if type(response) is dict:
        tools = response.get("tools")
        if type(tools) is EchoedTools and tools:
            return orjson.dumps({**event, "response": {**response, "tools": tools.json()}})
    return orjson.dumps(event)


def _echoed_tools(tools: Sequence[ToolSpec]) -> EchoedTools:
    """The ``tools`` a Response repeats: the specs as the client sent them (read-only), a
    function tool with the fields the specification requires of it."""
    echoed = []
    for tool in tools:
        spec = tool.shared_dump()
        if spec.get("type") == "function":
            spec = {**spec, **{key: value for key, value in _FUNCTION_DEFAULTS.items() if key not in spec}}
        echoed.append(spec)
    return EchoedTools(echoed)


_FUNCTION_DEFAULTS: JSON = {"description": None, "parameters": None, "strict": True}


def _reasoning(reasoning: dict[str, Any] | None) -> JSON | None:
    if reasoning is None:
        return None
    return {"effort": None, "summary": None, **reasoning}


def _text(text: dict[str, Any] | None) -> JSON:
    if text is None:
        return {"format": {"type": "text"}}
    if isinstance(text.get("format"), dict):
        return text
    return {**text, "format": {"type": "text"}}


def _number_or(value: Any, default: float) -> float:
    return value if _number(value) else default


def _integer_or(value: Any, default: int | None) -> Any:
    return value if _integer(value) else default


def _boolean_or(value: Any, default: bool) -> bool:
    return value if isinstance(value, bool) else default


def _string_or(value: Any, default: str | None) -> Any:
    return value if isinstance(value, str) else default


def _one_of(value: Any, allowed: Sequence[str], default: str) -> str:
    return value if value in allowed else default


RESPONSE_DEFAULTS: JSON = echo_request(ResponsesRequest(model="-"))
"""The request's part of a Response when nothing is known of the request (shared: do not
change)."""
