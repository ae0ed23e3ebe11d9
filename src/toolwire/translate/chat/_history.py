"""The Chat messages of a request that continues a known history: only the new items walked.

A request parsed past a known history (``ResponsesRequest.history()``) resumes the
``MessageBuilder`` saved when the request that made the history was translated, and the
builder's state after its own walk is kept on its own history for the next request. So a
long conversation costs each turn the work of its new items, not of all its items.

A saved build is used only where it is exactly what walking the same items again would
give: the same items (the history link says the request's first items are the saved
ones), the same ``instructions`` (the leading system text), the same backend profile,
and a tool table that names every tool as the saved one did; the builder starts with no
notes. Anything else walks every item. A history keeps at most ``MAX_SAVED_BUILDS``
builds, one per profile, instructions and table, newest first.
"""

from __future__ import annotations

from typing import NamedTuple

from toolwire.protocol import ChatMessage, HistoryLink, ResponsesRequest

from .._notes import Notes
from ..tool_table import UpstreamToolTable
from ._messages import MessageBuilder, SavedBuild, SerializedMessages
from .profile import BackendProfile

MAX_SAVED_BUILDS = 4
_KEY = "chat messages"


class _Saved(NamedTuple):  # a named tuple, like the build it keeps: made once per request
    profile: BackendProfile
    instructions: str | None
    table: UpstreamToolTable
    build: SavedBuild

    def fits(self, request: ResponsesRequest, table: UpstreamToolTable, profile: BackendProfile) -> bool:
        return (
            self.profile == profile
            and self.instructions == request.instructions
            and self.table.names_agree(table)
        )


def build_messages(
    request: ResponsesRequest, table: UpstreamToolTable, profile: BackendProfile, notes: Notes
) -> tuple[list[ChatMessage], SerializedMessages | None]:
    """``MessageBuilder(request, table, profile, notes).build()``, resumed from the saved
    build of the history the request continues, if one fits; this request's own build
    is saved for the next. And what of the messages is serialized already.

    ``notes`` are empty on entry (the messages are the first thing translated), so what
    a build saves and resumes is the notes of its items alone."""
    link = request.history()
    if link is None:
        return MessageBuilder(request, table, profile, notes).build(), None
    saved = _saved_for(link, request, table, profile)
    builder = MessageBuilder(request, table, profile, notes, saved)
    builder.walk()
    if link.own is not None:
        state = builder.save()
        if state is not None:
            _keep(link, _Saved(profile, request.instructions, table, state))
    messages = builder.finish()
    return messages, builder.serialized()


def _saved_for(
    link: HistoryLink, request: ResponsesRequest, table: UpstreamToolTable, profile: BackendProfile
) -> SavedBuild | None:
    if link.continues is None:
        return None
    kept: tuple[_Saved, ...] = link.continues.derived.get(_KEY, ())
    for saved in kept:
        if saved.build.walked == link.known and saved.fits(request, table, profile):
            return saved.build
    return None


def _keep(link: HistoryLink, saved: _Saved) -> None:
    assert link.own is not None
    derived = link.own.derived
    kept: tuple[_Saved, ...] = derived.get(_KEY, ())
    others = [
        other
        for other in kept
        if not (other.profile == saved.profile and other.instructions == saved.instructions and other.table is saved.table)
    ]
    derived[_KEY] = (saved, *others[: MAX_SAVED_BUILDS - 1])
