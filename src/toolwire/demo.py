"""``toolwire demo``: one tool-calling exchange through the gateway, both sides at once.

The gateway runs in this process on a free loopback port, in front of the built-in mock
model (``MockChatBackend``: a user line ``call <tool> <json>`` makes it call that tool),
and the official ``openai`` SDK drives it through two turns: a turn where the model calls
a custom (freeform) tool and a namespaced function, then the turn that sends their
outputs back and gets the final answer. For each turn the transcript shows, side by
side, what the client sent (Responses) and what the backend got (Chat Completions), then
what the backend streamed and what the client received, then the output the SDK built.

An ``ExchangeObserver`` that records traffic supplies the middle of the picture, the
same record the gateway's logs and metrics read. The summaries are pure functions of
those records; only ``run_demo`` does I/O.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from toolwire.server import GatewaySettings, create_app
from toolwire.server._exchange import Exchange
from toolwire.server._routing import ModelRouter
from toolwire.translate import GENERIC
from toolwire.upstream import MockChatBackend

__all__ = [
    "DemoTurn",
    "demo_command",
    "render_turn",
    "run_demo",
    "summarize_chat_request",
    "summarize_chat_stream",
    "summarize_events",
    "summarize_output",
    "summarize_responses_request",
]

JSON = dict[str, Any]
MODEL = "demo-model"

EXEC_GRAMMAR = (
    "start: pragma_source | plain_source\npragma_source: PRAGMA_LINE NEWLINE SOURCE\n"
    "plain_source: SOURCE\nPRAGMA_LINE: /[ \\t]*\\/\\/ @exec:[^\\r\\n]*/\nNEWLINE: /\\r?\\n/\n"
    "SOURCE: /[\\s\\S]+/\n"
)
# The tools Codex declares in its V2 protocol, in small: a namespace holding the custom
# code-mode ``exec`` tool, and another holding a plain function.
TOOLS: list[JSON] = [
    {
        "type": "namespace",
        "name": "functions",
        "description": "",
        "tools": [
            {
                "type": "custom",
                "name": "exec",
                "description": "Run JavaScript code to orchestrate tool calls.",
                "format": {"type": "grammar", "syntax": "lark", "definition": EXEC_GRAMMAR},
            }
        ],
    },
    {
        "type": "namespace",
        "name": "collaboration",
        "description": "Tools for sub-agents.",
        "tools": [
            {
                "type": "function",
                "name": "list_agents",
                "description": "List the running sub-agents.",
                "parameters": {"type": "object", "properties": {}},
            }
        ],
    },
]
SCRIPT = 'const files = await tools.exec_command({cmd: "ls"});\ntext(files);'
PROMPT = f"call exec {json.dumps({'input': SCRIPT})}\ncall list_agents {{}}"
TOOL_OUTPUTS = {"exec": "README.md  src  tests", "list_agents": "[]"}


# ---------------------------------------------------------------- recording


@dataclass(slots=True)
class DemoTurn:
    """One turn as each side saw it."""

    title: str
    exchange: Exchange
    sdk_output: list[JSON] = field(default_factory=list)


class _Recorder:
    """An ``ExchangeObserver`` that keeps every finished exchange, traffic included."""

    wants_traffic = True

    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []

    def started(self, exchange: Exchange) -> None:
        return None

    def finished(self, exchange: Exchange) -> None:
        self.exchanges.append(exchange)


async def run_demo() -> list[DemoTurn]:
    """Serve the gateway on the mock, run both turns with the openai SDK, return them."""
    import openai
    import uvicorn

    recorder = _Recorder()
    router = ModelRouter({"mock": (MockChatBackend(), GENERIC)}, {}, default_upstream="mock")
    app = create_app(router, GatewaySettings(), observers=[recorder])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    )
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if serving.done():
                serving.result()  # start-up failed: raise its error
            await asyncio.sleep(0.01)
        client = openai.AsyncOpenAI(
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key="demo",
            max_retries=0,
            _strict_response_validation=True,
        )
        async with client:
            turns = [
                await _turn(client, recorder, "Turn 1: the model calls two tools", _first_input())
            ]
            history = [*_first_input(), *turns[0].sdk_output, *_tool_outputs(turns[0].sdk_output)]
            turns.append(await _turn(client, recorder, "Turn 2: the tool outputs go back", history))
        return turns
    finally:
        server.should_exit = True
        await serving
        sock.close()


def _first_input() -> list[JSON]:
    return [{"type": "message", "role": "user", "content": PROMPT}]


def _tool_outputs(output: Sequence[JSON]) -> list[JSON]:
    """What a client answers for each call: a custom call gets a custom output."""
    answers: list[JSON] = []
    for item in output:
        result = TOOL_OUTPUTS.get(str(item.get("name")), "")
        if item["type"] == "custom_tool_call":
            answers.append(
                {"type": "custom_tool_call_output", "call_id": item["call_id"], "output": result}
            )
        elif item["type"] == "function_call":
            answers.append(
                {"type": "function_call_output", "call_id": item["call_id"], "output": result}
            )
    return answers


async def _turn(client: Any, recorder: _Recorder, title: str, input_items: list[JSON]) -> DemoTurn:
    seen = len(recorder.exchanges)
    async with client.responses.stream(model=MODEL, input=input_items, tools=TOOLS) as stream:
        final = await stream.get_final_response()
    for _ in range(500):  # the observer runs once the response is sent
        if len(recorder.exchanges) > seen:
            break
        await asyncio.sleep(0.01)
    output = [item.model_dump(mode="json", exclude_none=True) for item in final.output]
    return DemoTurn(title, recorder.exchanges[seen], output)


# ---------------------------------------------------------------- summaries (pure)


def _short(value: Any, limit: int = 70) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _dotted(item: JSON) -> str:
    return f"{item['namespace']}.{item['name']}" if item.get("namespace") else str(item.get("name"))


def summarize_responses_request(body: JSON) -> list[str]:
    lines = [f"model: {body.get('model')}", "tools:"]
    for tool in body.get("tools") or ():
        if tool.get("type") == "namespace":
            inner = ", ".join(f"{t['type']} {t['name']}" for t in tool.get("tools", []))
            lines.append(f"  namespace {tool['name']}: {inner}")
        else:
            lines.append(f"  {tool.get('type')} {tool.get('name', '')}")
    lines.append("input:")
    lines.extend(f"  {_item_line(item)}" for item in body.get("input") or ())
    return lines


def _item_line(item: JSON) -> str:
    kind = item.get("type", "message")
    if kind == "message":
        content = item.get("content")
        if isinstance(content, list):
            content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
        return f"{item.get('role')}: {_short(content)}"
    if kind == "custom_tool_call":
        return f"custom_tool_call {_dotted(item)} input={_short(item.get('input'), 40)}"
    if kind == "function_call":
        return f"function_call {_dotted(item)}({_short(item.get('arguments'), 40)})"
    if kind in ("custom_tool_call_output", "function_call_output"):
        return f"{kind} [{item.get('call_id')}]: {_short(item.get('output'), 40)}"
    return str(kind)


def summarize_chat_request(chat: JSON) -> list[str]:
    lines = [f"model: {chat.get('model')}", "tools:"]
    for tool in chat.get("tools") or ():
        function = tool.get("function", {})
        parameters = ", ".join(
            f"{name}: {schema.get('type')}"
            for name, schema in (function.get("parameters") or {}).get("properties", {}).items()
        )
        lines.append(f"  function {function.get('name')}({parameters})")
    lines.append("messages:")
    for message in chat.get("messages") or ():
        role = message.get("role")
        if message.get("tool_calls"):
            for call in message["tool_calls"]:
                function = call.get("function", {})
                lines.append(
                    f"  {role}: tool_call {function.get('name')}({_short(function.get('arguments'), 40)})"
                )
        elif role == "tool":
            lines.append(
                f"  tool [{message.get('tool_call_id')}]: {_short(message.get('content'), 40)}"
            )
        else:
            lines.append(f"  {role}: {_short(message.get('content'))}")
    return lines


def summarize_chat_stream(chunks: Sequence[JSON]) -> list[str]:
    text: list[str] = []
    calls: dict[int, list[str]] = {}
    finish = None
    usage = None
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                text.append(delta["content"])
            for call in delta.get("tool_calls") or ():
                entry = calls.setdefault(call.get("index", 0), ["", ""])
                function = call.get("function") or {}
                entry[0] += function.get("name") or ""
                entry[1] += function.get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    lines = [f"{len(chunks)} chunks"]
    if "".join(text):
        lines.append(f"content: {_short(''.join(text))}")
    for name, arguments in calls.values():
        lines.append(f"tool_call {name}({_short(arguments, 50)})")
    lines.append(f"finish_reason: {finish}")
    if usage:
        lines.append(
            f"usage: {usage.get('prompt_tokens')} in, {usage.get('completion_tokens')} out"
        )
    return lines


def summarize_events(events: Sequence[JSON]) -> list[str]:
    """Event types in order; a run of the same delta type is one line with a count."""
    lines: list[str] = []
    previous, count = "", 0
    for event in events:
        kind = str(event.get("type", "")).removeprefix("response.")
        if isinstance(event.get("item"), dict):
            kind = f"{kind} {event['item'].get('type')} {_dotted(event['item']) if 'name' in event['item'] else ''}".rstrip()
        if kind == previous and kind.endswith(".delta"):
            count += 1
            lines[-1] = f"{kind} x{count}"
            continue
        previous, count = kind, 1
        lines.append(kind)
    return lines


def summarize_output(output: Iterable[JSON]) -> list[str]:
    lines = []
    for item in output:
        kind = item.get("type")
        if kind == "message":
            text = " ".join(part.get("text", "") for part in item.get("content", []))
            lines.append(f"message: {_short(text, 100)}")
        elif kind == "custom_tool_call":
            lines.append(
                f"custom_tool_call {_dotted(item)}  input (raw JavaScript): {_short(item.get('input'), 60)}"
            )
        elif kind == "function_call":
            lines.append(f"function_call {_dotted(item)}({item.get('arguments')})")
        else:
            lines.append(str(kind))
    return lines


def render_turn(turn: DemoTurn) -> Group:
    """One turn: requests side by side, then the streams, then the output and the repairs."""
    exchange = turn.exchange
    client_request = json.loads(exchange.client_request)
    table = Table(expand=True, show_lines=True, title=turn.title, title_style="bold")
    table.add_column("Responses API  (openai SDK ⇄ toolwire)", ratio=1)
    table.add_column("Chat Completions  (toolwire ⇄ mock backend)", ratio=1)
    table.add_row(
        _block("① client → toolwire: request", summarize_responses_request(client_request)),
        _block(
            "② toolwire → backend: request",
            summarize_chat_request(exchange.upstream_request_json() or {}),
        ),
    )
    table.add_row(
        _block("④ toolwire → client: events", summarize_events(exchange.events)),
        _block("③ backend → toolwire: stream", summarize_chat_stream(exchange.upstream_chunks)),
    )
    parts: list[Any] = [table]
    repairs = [*exchange.conversions, *(f"warning: {w}" for w in exchange.warnings)]
    parts.append(
        Panel(
            Text(
                "\n".join(
                    [
                        *summarize_output(turn.sdk_output),
                        "",
                        "toolwire restored / converted:",
                        *(f"  {c}" for c in repairs),
                    ]
                )
            ),
            title="⑤ final output, as the openai SDK parsed it",
            title_align="left",
        )
    )
    return Group(*parts)


def _block(title: str, lines: list[str]) -> Text:
    """A cell: its title, then one summary line per line (cut at the cell's width)."""
    text = Text(title + "\n", style="bold cyan", no_wrap=True, overflow="ellipsis")
    text.append("\n".join(lines))
    return text


# ---------------------------------------------------------------- the command


def demo_command(
    width: Annotated[
        int | None,
        typer.Option(help="Columns to print in (default: the terminal's, 140 when piped)."),
    ] = None,
) -> None:
    """Run a tool-calling exchange through the gateway on the mock model and show both sides."""
    try:
        import openai  # noqa: F401  (the demo's client)
    except ImportError:
        typer.echo(
            "error: the demo drives the gateway with the openai SDK: pip install openai", err=True
        )
        raise typer.Exit(2) from None
    turns = asyncio.run(run_demo())
    console = Console(width=width or (None if sys.stdout.isatty() else 140))
    console.print(
        "[bold]toolwire demo[/]: the openai SDK talks Responses to toolwire; toolwire talks Chat "
        "Completions to the built-in mock model and restores each call to the type its tool was "
        "declared with (a custom tool's call comes back as custom_tool_call, a namespaced "
        "function's with its namespace)."
    )
    for turn in turns:
        console.print()
        console.print(render_turn(turn))
