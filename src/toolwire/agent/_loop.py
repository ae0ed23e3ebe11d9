"""The agent loop: sample, route, execute, return the outputs, sample again.

Each turn sends every item so far (the prompt, then each response's output items and
the outputs of its calls, in order) to the Responses endpoint and reads the stream
through the core's ``ResponseStreamReader``: only ``response.output_item.done`` makes
an item, so only completed call items are executed. Calls start while the stream is
still running, in parallel under a ``CallGate``; their outputs are added in call order,
each as the item type matching its call, with its ``call_id``. The loop ends when a
response makes no calls; its last assistant message is the answer.

How a call can fail, as in Codex:

* an unknown tool or arguments the handler cannot read: ``RespondToModel``; the
  message becomes the call's output and the loop goes on;
* a payload kind the tool does not take (a ``function_call`` aimed at a custom tool):
  ``FatalRuntimeError``; the turn stops and ``run`` raises it;
* a response that fails or is incomplete, or a broken stream: ``UpstreamError``.

Cancelling ``run`` (Ctrl-C, a timeout around it) closes the stream and cancels every
running call; the built-in tools kill their processes when cancelled. A stream that brings
no event for ``event_timeout`` (a server that only sends keep-alive comments) ends the run
with an ``UpstreamError``; the client's own read timeout bounds a silent one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolwire.errors import UpstreamError
from toolwire.protocol import (
    InputText,
    Item,
    MessageItem,
    OutputText,
    Refusal,
    ResponseStreamReader,
    dump_item,
)
from toolwire.tools import (
    FatalRuntimeError,
    RespondToModel,
    ToolCall,
    ToolRouter,
    decode_call,
)
from toolwire.upstream import DEFAULT_UPSTREAM_EVENT_TIMEOUT

from ._client import ResponsesClient
from ._events import (
    AssistantMessage,
    EventListener,
    ModelRequested,
    ToolCallFinished,
    ToolCallStarted,
    ignore_events,
)
from ._handlers import Invocation, ToolContext, ToolHandler, ToolOutput
from ._outputs import OutputItem, message_for_item, output_for_call, output_text
from ._parallel import CallGate


@dataclass(frozen=True)
class AgentResult:
    """The final answer, every item of the conversation, and how many requests it took."""

    answer: str
    history: tuple[Item, ...]
    turns: int


class AgentLoop:
    """Runs one task to its answer against ``client`` with the tools in ``router``.

    ``request_fields`` are merged into every request body (``reasoning``, ``text``, ...).
    ``event_timeout``: the longest wait for an event of a response's stream (keep-alive
    comments do not count), by default the gateway's ``upstream_event_timeout``.
    """

    def __init__(
        self,
        client: ResponsesClient,
        router: ToolRouter,
        *,
        model: str,
        context: ToolContext,
        instructions: str | None = None,
        max_parallel: int = 4,
        max_turns: int | None = None,
        on_event: EventListener = ignore_events,
        request_fields: Mapping[str, Any] | None = None,
        event_timeout: float = DEFAULT_UPSTREAM_EVENT_TIMEOUT,
    ) -> None:
        self._client = client
        self._router = router
        self.model = model
        self.context = context
        self.instructions = instructions
        self.max_parallel = max_parallel
        self.max_turns = max_turns
        self._on_event = on_event
        self._request_fields = dict(request_fields or {})
        self.event_timeout = event_timeout

    async def run(self, prompt: str | Sequence[Item]) -> AgentResult:
        """Loop until the model answers without tool calls; return its answer."""
        history: list[Item] = (
            [
                MessageItem(
                    type="message", role="user", content=[InputText(type="input_text", text=prompt)]
                )
            ]
            if isinstance(prompt, str)
            else list(prompt)
        )
        turn = 0
        while True:
            turn += 1
            if self.max_turns is not None and turn > self.max_turns:
                raise FatalRuntimeError(
                    f"the model made {self.max_turns} requests without giving a final answer"
                )
            self._on_event(ModelRequested(turn))
            items, outputs = await self._sample(turn, history)
            history += items
            history += outputs
            if not outputs:
                return AgentResult(final_answer(items), tuple(history), turn)
            for item in items:
                text = message_text(item)
                if text:
                    self._on_event(AssistantMessage(turn, text))

    def request_body(self, history: Sequence[Item]) -> dict[str, Any]:
        """The body of the next ``POST /responses``."""
        body: dict[str, Any] = {"model": self.model}
        if self.instructions is not None:
            body["instructions"] = self.instructions
        body["input"] = [dump_item(item) for item in history]
        specs = self._router.model_visible_specs
        if specs:
            body["tools"] = [spec.dump() for spec in specs]
            body["tool_choice"] = "auto"
            body["parallel_tool_calls"] = True
        body["store"] = False
        body["stream"] = True
        body.update(self._request_fields)
        return body

    # ------------------------------------------------------------ one turn

    async def _sample(
        self, turn: int, history: Sequence[Item]
    ) -> tuple[list[Item], list[OutputItem]]:
        """Stream one response, running its calls as they complete; return its items and
        the calls' outputs in call order."""
        reader = ResponseStreamReader()
        gate = CallGate(self.max_parallel)
        answers: list[OutputItem | asyncio.Task[OutputItem]] = []
        running: list[asyncio.Task[OutputItem]] = []
        clock, event_timeout = asyncio.get_running_loop().time, self.event_timeout
        try:
            async with self._client.stream(self.request_body(history)) as chunks:
                seen = 0
                try:
                    async with asyncio.timeout(event_timeout) as waiting:
                        async for chunk in chunks:
                            if reader.feed(chunk):  # events, not keep-alives: the wait starts again
                                waiting.reschedule(clock() + event_timeout)
                            for item in reader.items[seen:]:
                                self._dispatch(turn, item, gate, answers, running)
                            seen = len(reader.items)
                            if reader.finished:
                                break
                except TimeoutError:
                    raise UpstreamError(
                        f"The model's stream brought no event for more than {event_timeout:g} s."
                    ) from None
                if not reader.finished:
                    reader.flush()  # raises if the stream ended without a terminal event
                    for item in reader.items[seen:]:
                        self._dispatch(turn, item, gate, answers, running)
            _check_status(reader)
            if running:
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_EXCEPTION)
                for task in done:
                    task.result()  # the first failure, if any, stops the turn
            outputs = [
                answer.result() if isinstance(answer, asyncio.Task) else answer
                for answer in answers
            ]
        except BaseException:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            raise
        return list(reader.items), outputs

    def _dispatch(
        self,
        turn: int,
        item: Item,
        gate: CallGate,
        answers: list[OutputItem | asyncio.Task[OutputItem]],
        running: list[asyncio.Task[OutputItem]],
    ) -> None:
        """Route one completed item: start its call, or answer it at once."""
        try:
            call = decode_call(item)
        except RespondToModel as exc:
            answer = message_for_item(item, exc.message)
            if answer is not None:
                answers.append(answer)
            return
        if call is None:
            return
        self._on_event(ToolCallStarted(turn, call))
        try:
            invocation = self._router.bind(call, self.context)  # FatalRuntimeError stops the turn
        except RespondToModel as exc:
            answer = output_for_call(call, ToolOutput(exc.message, success=False))
            self._on_event(ToolCallFinished(turn, call, exc.message, False, 0.0))
            answers.append(answer)
            return
        handler = invocation.handler
        if not isinstance(handler, ToolHandler):
            raise FatalRuntimeError(
                f"tool {call.tool_name} is registered without an executable handler"
            )
        task = asyncio.create_task(self._execute(turn, call, invocation, handler, gate))
        running.append(task)
        answers.append(task)

    async def _execute(
        self,
        turn: int,
        call: ToolCall,
        invocation: Invocation,
        handler: ToolHandler,
        gate: CallGate,
    ) -> OutputItem:
        async with gate.enter(alone=not handler.parallel):
            started = time.monotonic()
            try:
                output = await handler.handle(invocation)
            except RespondToModel as exc:
                output = ToolOutput(exc.message, success=False)
            except FatalRuntimeError:
                raise
            except Exception as exc:
                raise FatalRuntimeError(f"tool {call.tool_name} failed: {exc!r}") from exc
            seconds = time.monotonic() - started
        answer = output_for_call(call, output)
        self._on_event(ToolCallFinished(turn, call, output_text(answer), output.success, seconds))
        return answer


def _check_status(reader: ResponseStreamReader) -> None:
    """A failed or incomplete response stops the run (as it does in Codex)."""
    response = reader.response or {}
    if reader.status == "failed":
        error = response.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        raise UpstreamError(f"The response failed: {message or 'no reason given'}.")
    if reader.status == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, dict) else None
        raise UpstreamError(f"The response is incomplete: {reason or 'no reason given'}.")


def message_text(item: Item) -> str:
    """The text of an assistant message item ("" for anything else)."""
    if not isinstance(item, MessageItem) or item.role != "assistant":
        return ""
    if isinstance(item.content, str):
        return item.content
    texts = []
    for part in item.content:
        if isinstance(part, OutputText):
            texts.append(part.text)
        elif isinstance(part, Refusal):
            texts.append(part.refusal)
    return "".join(texts)


def final_answer(items: Sequence[Item]) -> str:
    """The text of the last assistant message among ``items``."""
    for item in reversed(items):
        text = message_text(item)
        if text:
            return text
    return ""
