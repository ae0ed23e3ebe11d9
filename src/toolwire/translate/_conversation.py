"""The walk of a conversation's input items, for the wires that take it back as messages.

Chat Completions and Anthropic Messages both want the calls of one model turn in ONE
assistant message, directly followed by their outputs in call order; Responses input
items carry calls and outputs as separate items, in any order a client kept them.
``ConversationWalker`` makes the pairing decisions once, for every such wire:

* a first pass indexes which call ids have a call and where each call's first output is;
* a call whose ``call_id`` came before is dropped; consecutive calls are one turn
  ("parallel calls merged into one assistant message") until one of their outputs has
  been passed;
* when a turn closes (a user message, a call after its outputs, the end), its outputs
  are written in call order: one found elsewhere is moved to its call, a call without
  output gets ``"aborted"``; an output without a call, or a call's second output, is
  dropped;
* assistant text found between a call and its output moves before the calls;
* reasoning waits for the assistant message it precedes; a user message (or the end)
  drops what still waits.

The wire renders: a subclass says what a call's arguments, a system message, reasoning,
a user message, assistant text, a call and the results of a turn become (the abstract
``_add_*``, ``_on_*`` and ``_*_arguments`` hooks), and keeps its messages in
``_messages``. ``part_texts`` reads the text of a message's parts for both.

A walk's state can be saved (``_save_walk`` -> ``SavedWalk``, for a wire that says how to
copy its last message, ``_own_copy``) and resumed (``_resume_walk``) by the walker of a
request whose items continue the same ones: it then walks only the new items. A walk
that decided something on the absence of an item that a later one could supply (an
output whose call has not come, a turn closed before its outputs) is not to be saved
(``_savable`` is false): such decisions are only right once every item is known.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Generic, NamedTuple, TypeVar, cast

from toolwire.errors import RequestError
from toolwire.protocol import (
    AdditionalToolsItem,
    ContentPart,
    CustomToolCallItem,
    CustomToolCallOutputItem,
    FunctionCallItem,
    FunctionCallOutputItem,
    InputText,
    Item,
    MessageItem,
    OutputText,
    ReasoningItem,
    Refusal,
    ResponsesRequest,
    ToolSearchCallItem,
    ToolSearchOutputItem,
)

from ._growing import GrowingMap, GrowingSet
from ._notes import Notes
from ._tools import loaded_tools_listing
from .tool_table import UpstreamToolTable, upstream_call_id

M = TypeVar("M")  # a message, in the wire's form
A = TypeVar("A")  # a call's arguments, in the wire's form
R = TypeVar("R")  # reasoning waiting for its assistant message, in the wire's form

OutputItem = FunctionCallOutputItem | CustomToolCallOutputItem | ToolSearchOutputItem
_OUTPUT_ITEM_CLASSES = frozenset({FunctionCallOutputItem, CustomToolCallOutputItem, ToolSearchOutputItem})
# Items and content parts are told apart by their exact class (``type(item) is
# MessageItem``), the classes parsing makes: isinstance on a pydantic model goes through
# its metaclass (~0.2 us), and a Codex history makes hundreds of such checks.


@dataclass(slots=True)
class Call(Generic[A]):
    """A call item, its arguments in the wire's form, and the conversion sending it so is."""

    call_id: str
    namespace: str | None
    name: str
    arguments: A
    conversion: str | None


@dataclass(slots=True)
class TurnCall:
    """A call of the open turn, as sent: what its result is written under."""

    call_id: str
    upstream_id: str
    upstream_name: str
    index: int


Result = tuple[TurnCall, int, OutputItem | None]
"""A call of a closing turn, its output's index and its output (None: missing, "aborted")."""


@dataclass(slots=True)
class ToolTurn(Generic[M]):
    """The assistant message of one model turn that called tools; the results of its
    calls are written when the turn closes."""

    message: M
    calls: list[TurnCall] = field(default_factory=list)
    awaiting: set[str] = field(default_factory=set)  # calls whose output is further on
    accepts_calls: bool = True  # false once one of its outputs was passed


class SavedWalk(NamedTuple, Generic[M, R]):
    """A walker's state after walking ``walked`` items, before its end: what the walker of
    a request continuing those items resumes from. Shared and read-only: a resumed walker
    copies what it changes (the last message may still change, the rest never). (A named
    tuple: one is made per request of a long session, and a frozen dataclass takes twice
    as long to make.)"""

    walked: int
    system: tuple[str, ...]
    messages: Sequence[M]
    turn: ToolTurn[M] | None  # its message is the last of ``messages``
    reasoning: tuple[R, ...]
    reasoning_at: tuple[str, ...]
    called: GrowingSet
    outputs: GrowingMap[tuple[int, OutputItem]]
    passed_outputs: GrowingSet
    emitted_calls: GrowingSet
    notes: Notes


class ConversationWalker(ABC, Generic[M, A, R]):
    """Walks the input items, deciding how calls and outputs pair; the wire renders.

    Every state change happens in the ``_on_*`` methods; ``_close_turn`` is the one place
    the results of a turn's calls are written.
    """

    CUSTOM_CALLS_SENT_AS: ClassVar[str]
    """The conversion noted for a custom tool call sent as the wire's call."""
    TOOL_SEARCH_CALLS_SENT_AS: ClassVar[str]
    """The conversion noted for a client tool_search call sent as the wire's call."""

    def __init__(self, request: ResponsesRequest, table: UpstreamToolTable, notes: Notes) -> None:
        self._items = request.input_items()
        self._table = table
        self._notes = notes
        self._walked = 0
        # False once the walk decided something on an item's absence (see the module).
        self._savable = True
        self._system: list[str] = [request.instructions] if request.instructions else []
        self._messages: list[M] = []
        self._turn: ToolTurn[M] | None = None
        self._reasoning: list[R] = []
        self._reasoning_at: list[str] = []
        # What a resumed walk shares with the walk it resumes, growing only its own part.
        self._called = GrowingSet()
        self._outputs: GrowingMap[tuple[int, OutputItem]] = GrowingMap()
        self._passed_outputs = GrowingSet()
        self._emitted_calls = GrowingSet()

    def walk(self) -> None:
        """Handle the items not walked yet, in order: the one place the kinds of item are
        told apart (calls and outputs, the most frequent, first)."""
        start, items = self._walked, self._items
        calls = self._index_calls_and_outputs(start)
        on_call, on_output = self._on_call, self._on_output  # bound once: hundreds of items
        for index in range(start, len(items)):
            call = calls[index - start]
            item = items[index]
            if call is not None:
                on_call(index, call)
            elif type(item) in _OUTPUT_ITEM_CLASSES:
                on_output(index, cast("OutputItem", item).call_id)
            elif type(item) is MessageItem:
                self._on_message(index, item)
            elif type(item) is ReasoningItem:
                self._on_reasoning(index, item)
            elif type(item) is not AdditionalToolsItem:  # additional_tools only declares tools
                self._on_other_item(index, item)
        self._walked = len(items)

    def _end_walk(self) -> None:
        """The end of the items: the open turn closed, reasoning still waiting dropped."""
        self._close_turn()
        self._drop_pending_reasoning()

    # -- save and resume

    def _save_walk(self) -> SavedWalk[M, R]:
        """The state after ``walk``, before the end (ask only when ``_savable``)."""
        messages = self._messages.copy()  # kept read-only; one copy: a long history has thousands
        turn = self._turn
        if messages:
            last = messages[-1] = self._own_copy(messages[-1])
            if turn is not None:
                turn = ToolTurn(last, list(turn.calls), set(turn.awaiting), turn.accepts_calls)
        return SavedWalk(
            walked=self._walked,
            system=tuple(self._system),
            messages=messages,
            turn=turn,
            reasoning=tuple(self._reasoning),
            reasoning_at=tuple(self._reasoning_at),
            # the end only reads these: handed over as they are, their additions merged when due
            called=self._called.settled(),
            outputs=self._outputs.settled(),
            passed_outputs=self._passed_outputs.settled(),
            emitted_calls=self._emitted_calls.settled(),
            notes=self._notes.copy(),
        )

    def _resume_walk(self, saved: SavedWalk[M, R]) -> None:
        self._walked = saved.walked
        self._system = list(saved.system)
        self._messages = list(saved.messages)
        if self._messages:
            last = self._messages[-1] = self._own_copy(self._messages[-1])
            if saved.turn is not None:
                turn = saved.turn
                self._turn = ToolTurn(last, list(turn.calls), set(turn.awaiting), turn.accepts_calls)
        self._reasoning = list(saved.reasoning)
        self._reasoning_at = list(saved.reasoning_at)
        self._called = saved.called.grown()
        self._outputs = saved.outputs.grown()
        self._passed_outputs = saved.passed_outputs.grown()
        self._emitted_calls = saved.emitted_calls.grown()
        self._notes.extend(saved.notes)

    def _own_copy(self, message: M) -> M:
        """A copy of ``message`` that can change without changing it (what a save and a
        resume give the last message): the wire's, if its walks are saved."""
        raise NotImplementedError

    # -- the first pass

    def _index_calls_and_outputs(self, start: int) -> list[Call[A] | None]:
        """Note which call ids have a call and where each call's output is; the call each
        item from ``start`` on makes (None for an item that is no call)."""
        calls: list[Call[A] | None] = []
        items, call_of, called, outputs = self._items, self._call_of, self._called, self._outputs
        for index in range(start, len(items)):
            item = items[index]
            call = call_of(index, item)
            calls.append(call)
            if call is not None:
                called.add(call.call_id)
            elif type(item) in _OUTPUT_ITEM_CLASSES:
                output = cast("OutputItem", item)
                if output.call_id is not None:
                    outputs.setdefault(output.call_id, (index, output))
        return calls

    def _call_of(self, index: int, item: Item) -> Call[A] | None:
        """The call an item makes, or None if it is not a client-side call."""
        if type(item) is FunctionCallItem:
            arguments = self._function_arguments(index, item.arguments)
            return Call(item.call_id, item.namespace, item.name, arguments, None)
        if type(item) is CustomToolCallItem:
            arguments = self._custom_arguments(item.input)
            return Call(item.call_id, item.namespace, item.name, arguments, self.CUSTOM_CALLS_SENT_AS)
        if type(item) is ToolSearchCallItem and item.execution == "client" and item.call_id:
            arguments = self._tool_search_arguments(index, item)
            return Call(item.call_id, None, "tool_search", arguments, self.TOOL_SEARCH_CALLS_SENT_AS)
        return None

    # -- one method per kind of item

    def _on_message(self, index: int, item: MessageItem) -> None:
        if item.role in ("system", "developer"):
            self._on_system(index, item)
        elif item.role == "assistant":
            self._on_assistant(index, item)
        elif item.role == "user":
            self._on_user(index, item)
        else:
            raise RequestError(
                f"Invalid 'input[{index}].role': {item.role!r} is not user, assistant, system or developer.",
                param=f"input[{index}].role",
            )

    def _on_user(self, index: int, item: MessageItem) -> None:
        self._close_turn()
        self._drop_pending_reasoning()
        self._add_user(index, item)

    def _on_assistant(self, index: int, item: MessageItem) -> None:
        text = "".join(part_texts(item.content, f"input[{index}].content", self._notes, "assistant message parts"))
        turn = self._turn
        if turn is not None and turn.awaiting:
            self._notes.convert("assistant text between calls and their outputs moved before the calls")
            self._add_text_before_calls(turn.message, text)
        else:
            self._close_turn()
            self._add_assistant_text(text)

    def _on_call(self, index: int, call: Call[A]) -> None:
        if call.call_id in self._emitted_calls:
            self._notes.warn("calls with a repeated call_id dropped", f"input[{index}]")
            return
        self._emitted_calls.add(call.call_id)
        if call.conversion is not None:
            self._notes.convert(call.conversion)
        turn = self._turn
        if turn is not None and turn.accepts_calls:
            self._notes.convert("parallel calls merged into one assistant message")
        else:
            self._close_turn()
            turn = self._turn = ToolTurn(self._call_message())
        upstream_id = upstream_call_id(call.call_id)
        upstream_name = self._table.upstream_name_of(call.namespace, call.name)
        self._add_call(turn.message, upstream_id, upstream_name, call.arguments)
        turn.calls.append(TurnCall(call.call_id, upstream_id, upstream_name, index))
        if call.call_id not in self._passed_outputs:
            turn.awaiting.add(call.call_id)

    def _on_output(self, index: int, call_id: str | None) -> None:
        if call_id is None or call_id not in self._called:
            if call_id is not None:
                self._savable = False  # its call may come later
            self._notes.warn("tool outputs without a matching call dropped", f"input[{index}] ({call_id})")
            return
        if self._outputs[call_id][0] != index:
            self._notes.warn("repeated tool outputs for one call dropped", f"input[{index}] ({call_id})")
            return
        self._passed_outputs.add(call_id)
        turn = self._turn
        if turn is not None and call_id in turn.awaiting:
            turn.awaiting.discard(call_id)
            turn.accepts_calls = False

    # -- shared steps

    def _close_turn(self) -> None:
        """Write the results of the open turn's calls: each call with its output, in call
        order (an output found elsewhere moved to its call; none: "aborted")."""
        turn = self._turn
        if turn is None:
            return
        self._turn = None
        results: list[Result] = []
        last_output_index = -1
        for call in turn.calls:
            entry = self._outputs.get(call.call_id)
            if entry is None:
                self._savable = False  # its output may come later
                self._notes.convert('missing tool outputs replaced by "aborted"')
                results.append((call, -1, None))
                continue
            output_index, output = entry
            if output_index < last_output_index or output_index < call.index or call.call_id not in self._passed_outputs:
                self._notes.convert("tool outputs reordered to follow their calls")
            last_output_index = output_index
            results.append((call, output_index, output))
        self._write_results(results)

    def _loaded_tools(self, output: ToolSearchOutputItem) -> str:
        """A tool search's output: what it loaded, by the flat names the backend calls the
        tools (no namespace: these wires have none)."""
        return loaded_tools_listing(output.tools, self._loaded_tool_name)

    def _loaded_tool_name(self, namespace: str | None, name: str) -> tuple[None, str]:
        return None, self._table.upstream_name_of(namespace, name)

    def _take_reasoning(self) -> list[R]:
        """The reasoning waiting for an assistant message, which now carries it."""
        reasoning, self._reasoning = self._reasoning, []
        self._reasoning_at.clear()
        return reasoning

    def _drop_pending_reasoning(self) -> None:
        for where in self._reasoning_at:
            self._notes.warn("reasoning without a following assistant message dropped", where)
        self._reasoning.clear()
        self._reasoning_at.clear()

    # -- what the wire renders

    @abstractmethod
    def _function_arguments(self, index: int, arguments: str) -> A:
        """A function call's JSON arguments, as the wire sends them."""

    @abstractmethod
    def _custom_arguments(self, text: str) -> A:
        """A custom tool call's raw input, as the arguments of the call the wire sends."""

    @abstractmethod
    def _tool_search_arguments(self, index: int, item: ToolSearchCallItem) -> A:
        """A client tool_search call's arguments, as the wire sends them."""

    @abstractmethod
    def _on_system(self, index: int, item: MessageItem) -> None:
        """A system or developer message (its text goes to ``_system``)."""

    @abstractmethod
    def _on_reasoning(self, index: int, item: ReasoningItem) -> None:
        """A reasoning item: what of it the wire sends back waits in ``_reasoning``."""

    @abstractmethod
    def _on_other_item(self, index: int, item: Item) -> None:
        """An item that is no message, reasoning, call or output."""

    @abstractmethod
    def _add_user(self, index: int, item: MessageItem) -> None:
        """A user message, after the open turn closed."""

    @abstractmethod
    def _add_assistant_text(self, text: str) -> None:
        """An assistant message's text (and the reasoning waiting for it), no turn open."""

    @abstractmethod
    def _add_text_before_calls(self, message: M, text: str) -> None:
        """Assistant text met while a turn awaits outputs: before the turn's calls."""

    @abstractmethod
    def _call_message(self) -> M:
        """The assistant message a new turn's calls go in (the open turn is closed)."""

    @abstractmethod
    def _add_call(self, message: M, upstream_id: str, upstream_name: str, arguments: A) -> None:
        """A call, into its turn's message (with the reasoning waiting for it)."""

    @abstractmethod
    def _write_results(self, results: list[Result]) -> None:
        """The results of a closing turn's calls, in call order."""


def part_texts(
    content: str | Sequence[ContentPart], where: str, notes: Notes, what: str, *, refusals: bool = True
) -> list[str]:
    """The non-empty text of every text part (and refusal, if ``refusals``) of a message's
    content; other parts dropped with a warning naming ``what`` and where they were."""
    if isinstance(content, str):
        return [content] if content else []
    texts: list[str] = []
    for index, part in enumerate(content):
        if type(part) is OutputText or type(part) is InputText:
            text = part.text
        elif refusals and type(part) is Refusal:
            text = part.refusal
        else:
            notes.warn(f"{what} dropped (text only)", f"{part.type} at {where}[{index}]")
            continue
        if text:
            texts.append(text)
    return texts
