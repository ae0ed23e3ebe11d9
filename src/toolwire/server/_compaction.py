"""The pipeline's compaction step: whether an exchange compacts, and what its backend is asked.

Every exchange passes here after its stored history is merged in, whatever carries it
(HTTP, a WebSocket): the decision is the pipeline's, never a transport's or a wire's.

* An exchange compacts when it is ``POST /v1/responses/compact`` or its own input holds a
  ``compaction_trigger`` item (Codex's remote compaction; a trigger in the stored history
  is spent and ignored).
* A backend that compacts by itself (``Backend.native_compaction``) gets the request with
  its own compactions untouched and the trigger last; ``/responses/compact`` goes to it.
* Any other backend gets the conversation with every compaction of ours opened into its
  summary (``open_compactions``: the wire never sees a ``compaction`` item, so a new wire
  needs nothing for it); one that cannot be opened is a 400. To compact, its model is
  asked for the summary (``summary_request``), and the answer becomes one sealed
  ``compaction`` item (``CompactionAnswer``), bound to the caller's client key.

The ``CompactionPlan`` says what the backend is asked and how its answer is taken
(``translator``; ``compaction_object`` for ``/responses/compact``). The key is read from
its source (``CompactionKeySource``, beside the store) only when a compaction of ours is
to be opened or sealed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolwire.compaction import (
    CompactionAnswer,
    CompactionKeySource,
    CompactionSeal,
    open_compactions,
    retained_messages,
    summary_request,
)
from toolwire.protocol import CompactionItem, CompactionTriggerItem, ResponsesRequest
from toolwire.translate import AnswerTranslator, complete_usage
from toolwire.upstream import Backend

from ._exchange import Exchange

JSON = dict[str, Any]
_COMPACTION_ITEMS = (CompactionItem, CompactionTriggerItem)


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What the backend is asked, and how its answer is taken.

    ``seal`` is set when the gateway writes the compaction itself: the backend's answer is
    the summary, sealed by it. ``retained`` are the messages ``/v1/responses/compact``
    keeps beside the compaction.
    """

    request: ResponsesRequest
    seal: Callable[[str], str] | None = None
    retained: list[JSON] = field(default_factory=list)
    conversions: list[str] = field(default_factory=list)

    def translator(
        self, machine: AnswerTranslator, request: ResponsesRequest, *, response_id: str, created_at: int
    ) -> AnswerTranslator:
        """How the backend's answer is translated: by its wire's ``machine``, or, when the
        gateway compacts, into the one compaction item (echoing the client's ``request``)."""
        if self.seal is None:
            return machine
        return CompactionAnswer(
            machine, request, seal=self.seal, response_id=response_id, created_at=created_at, model=request.model
        )

    async def compaction_object(
        self, backend: Backend, body: Mapping[str, Any], machine: AnswerTranslator, exchange: Exchange
    ) -> JSON:
        """``POST /v1/responses/compact``'s answer: the backend's own compaction, or the one
        the gateway seals from the backend's whole answer to ``body``."""
        native = backend.native_compaction
        if native is not None:
            answer = await native.compact(body)
            exchange.note_chunk(answer)
            return {
                **answer,
                "id": exchange.request_id,
                "object": "response.compaction",
                "created_at": answer["created_at"] if isinstance(answer.get("created_at"), int) else int(exchange.received_at),
                "output": answer["output"] if isinstance(answer.get("output"), list) else [],
                "usage": complete_usage(answer.get("usage")),
            }
        assert isinstance(machine, CompactionAnswer)
        whole = await backend.fetch(body)
        exchange.note_chunk(whole)
        return machine.compaction_object(machine.translate_whole(whole), self.retained)


class Compactions:
    """Plans each exchange's compaction with the key from ``keys``."""

    def __init__(self, keys: CompactionKeySource) -> None:
        self._keys = keys

    async def plan(
        self,
        request: ResponsesRequest,
        *,
        trigger: bool,
        endpoint: bool,
        own_items: int,
        backend: Backend,
        owner: str | None,
    ) -> CompactionPlan:
        """The plan for ``request`` (its last ``own_items`` input items its own, the rest its
        stored history), of ``owner``, to ``backend``. ``trigger``: its own input holds a
        ``compaction_trigger``; ``endpoint``: it came to ``/responses/compact``."""
        compact = trigger or endpoint
        items = request.input_items()
        if not compact and not request.input_holds(*_COMPACTION_ITEMS):
            return CompactionPlan(request)  # most requests: nothing to open, nothing to copy
        native = backend.native_compaction is not None
        ours = any(type(item) is CompactionItem and CompactionSeal.is_ours(item.encrypted_content) for item in items)
        seal = CompactionSeal(await self._keys.key()) if ours or (compact and not native) else None
        history = len(items) - own_items

        def where(index: int) -> str:
            return f"input[{index - history}].encrypted_content" if index >= history else "previous_response_id"

        opened = open_compactions(items, seal, owner, keep_foreign=native, where=where)
        sent = opened.items
        if native and trigger and not endpoint:
            sent = [*sent, CompactionTriggerItem(type="compaction_trigger")]  # the one that counts, last
        opened_request = request.model_copy(update={"input": sent})
        if not compact or native:
            return CompactionPlan(opened_request, conversions=opened.conversions)
        assert seal is not None
        return CompactionPlan(
            summary_request(opened_request),
            seal=lambda text: seal.seal(text, owner),
            retained=retained_messages(items),
            conversions=[*opened.conversions, "compaction summary written by the backend's model"],
        )

    async def aclose(self) -> None:
        await self._keys.aclose()
