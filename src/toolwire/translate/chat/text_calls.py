"""Tool calls a model server left in the text: recognised as the text streams.

``TextCallRecognizer`` is an incremental decoder over the answer's content:
``feed(text) -> signals`` and ``flush() -> signals``, giving ``Text`` for text and one
``CallFragment`` (a whole call) for each call it recognises, the signals
``ChatStreamTranslator`` already applies, so a recovered call is restored to the tool
type the client declared like any other.

What it promises:

* Only whole blocks in a known family's format (``_text_call_formats``) count, every
  call in them naming an offered tool, with arguments that parse. Anything else stays
  text, character for character: prose about the syntax, a call to a tool that was not
  offered, a marker inside a markdown code span or fenced block.
* Text is held back only while it could still be, or begin, a block: the end of a
  chunk that could be the start of a marker, and a block until it is decided. Text
  split anywhere gives the same signals as the text in one piece.
* The space around calls is layout, not text: space before a call at the start of the
  answer, and space after a call, is dropped; text after a call starts without it.

``families_for(setting)`` turns an upstream's ``tool_call_text`` setting (``"auto"``,
``"off"`` or one family) into the families to read; ``offered_tools(table)`` lists the
names a model may call the request's tools by, with their parameter schemas.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Mapping
from typing import Literal, get_args

from toolwire.protocol import CustomTool, FunctionTool, ToolSearchTool

from .._calls import CallFragment
from ..tool_table import UpstreamToolTable
from ._chunks import Text
from ._text_call_formats import OPENERS
from ._text_call_reader import JSON, Found, Offered, Opener, Pending, Reader

__all__ = [
    "FAMILIES",
    "TextCallRecognizer",
    "ToolCallText",
    "families_for",
    "offered_tools",
]

ToolCallText = Literal["auto", "off", "hermes", "qwen3_coder", "mistral", "deepseek", "kimi_k2", "glm45"]
"""An upstream's ``tool_call_text`` setting: every family, none, or just one."""
FAMILIES: tuple[str, ...] = get_args(ToolCallText)[2:]

# A block is re-read on every chunk while it is this short (its head names the tool, and
# a wrong name ends it early); after that only when one of its endings arrives. A verdict
# never changes once made, so reading less often changes when, never what, is decided.
_HEAD_LENGTH = 256
_TICKS_OR_LINE = re.compile(r"`+|\n")
_Boundary = Literal["start", "after_calls"] | None


def families_for(setting: str) -> frozenset[str]:
    """The families an upstream's ``tool_call_text`` setting reads."""
    if setting == "auto":
        return frozenset(FAMILIES)
    if setting == "off":
        return frozenset()
    if setting not in FAMILIES:
        raise ValueError(f"unknown tool_call_text {setting!r} (known: auto, off, {', '.join(FAMILIES)})")
    return frozenset({setting})


def offered_tools(tools: UpstreamToolTable) -> dict[str, JSON]:
    """Each name a model may call a request's tool by -> the parameters it sees upstream.

    The flat upstream name, and the tool's own or dotted name when only one tool has
    it (the names ``ChatStreamTranslator`` resolves). A custom tool takes one string
    ``input``, as request translation declares it.
    """
    offered: dict[str, JSON] = {}
    aliases: dict[str, list[JSON]] = {}
    for tool in tools:
        spec = tool.spec
        parameters: JSON | None = None
        if isinstance(spec, CustomTool):
            parameters = {"type": "object", "properties": {"input": {"type": "string"}}}
        elif isinstance(spec, FunctionTool | ToolSearchTool):
            parameters = spec.parameters
        offered[tool.upstream_name] = parameters if isinstance(parameters, dict) else {}
        for alias in {tool.tool_name.name, str(tool.tool_name)}:
            aliases.setdefault(alias, []).append(offered[tool.upstream_name])
    for alias, schemas in aliases.items():
        if len(schemas) == 1 and alias not in offered:
            offered[alias] = schemas[0]
    return offered


class _CodeSpans:
    """Whether the text so far ends inside markdown code (a fence, or an inline span).

    Character by character, so where the text is split does not matter: a run of
    three or more backticks opens or closes a fence, a shorter one an inline span
    (which a line break ends); a run still growing at the end counts as code.
    """

    def __init__(self) -> None:
        self._fenced = False
        self._inline = False
        self._run = 0

    def read(self, text: str) -> None:
        done = 0
        for mark in _TICKS_OR_LINE.finditer(text):
            if mark.start() > done:
                self._end_run()
            if mark.group() == "\n":
                self._end_run()
                self._inline = False
            else:
                self._run += mark.end() - mark.start()
            done = mark.end()
        if len(text) > done:
            self._end_run()

    def read_plain(self, text: str) -> None:
        """``read`` for text known to hold no backtick."""
        if self._run:
            self._end_run()
        if self._inline and "\n" in text:
            self._inline = False

    @property
    def inside(self) -> bool:
        return self._fenced or self._inline or self._run > 0

    def _end_run(self) -> None:
        run, self._run = self._run, 0
        if run >= 3 and not self._inline:
            self._fenced = not self._fenced
        elif run and not self._fenced:
            self._inline = not self._inline


@functools.cache
def _markers(families: frozenset[str]) -> tuple[tuple[Opener, ...], int, frozenset[str], re.Pattern[str]]:
    """The openers of ``families``' blocks, the longest marker's length, the characters
    markers start with, and the pattern of text with none of them (or a backtick) in it,
    which can be passed on at once (most chunks). The same for every answer: made once."""
    openers = tuple(o for o in OPENERS if o.families & families)
    starts = frozenset(o.marker[0] for o in openers)
    plain = re.compile("[^`" + re.escape("".join(sorted(starts))) + "]*")
    return openers, max((len(o.marker) for o in openers), default=0), starts, plain


class TextCallRecognizer:
    """Text in, ``Text`` and recovered ``CallFragment`` signals out (see the module)."""

    def __init__(
        self, offered: Offered | Callable[[], Offered], families: Collection[str] = FAMILIES
    ) -> None:
        """``offered`` may be a function: it is called once, when a marker first appears."""
        self._families = frozenset(families)
        self._openers, self._longest_marker, self._marker_starts, self._plain = _markers(self._families)
        self._offered_source = offered
        self._reader: Reader | None = None
        self._buffer = ""  # text not yet decided; in a block, the block from its marker
        self._opener: Opener | None = None  # the block being read
        # A block's text that came since it was last read, kept in pieces (a long call
        # is not copied on every chunk); its length, and its end, where endings are seen.
        self._unread: list[str] = []
        self._block_length = 0
        self._recent = ""
        self._reread = False  # the block has grown in a way that can change its verdict
        self._space = ""  # space at a boundary, kept until it is known what follows
        self._boundary: _Boundary = "start"
        self._code = _CodeSpans()
        self._call_ids: set[str] = set()
        self.recognized: list[str] = []
        """The family of each call recognised since the owner last cleared the list."""

    def passes(self, text: str) -> bool:
        """Whether ``text`` passes on as it is (read, as ``feed`` would return it as one
        ``Text``): nothing is held, and no call can begin in it. At the content's start
        that is text with something besides space in it (space alone is held until what
        follows shows), when no space is held yet; after calls, no text passes as it is
        (its leading space is dropped)."""
        if self._opener is not None or self._buffer or not self._plain.fullmatch(text):
            return False
        boundary = self._boundary
        if boundary is not None:
            if boundary != "start" or self._space or text.isspace() or not text:
                return False
            self._boundary = None
        self._code.read_plain(text)
        return True

    def feed(self, text: str) -> list[Text | CallFragment]:
        if self.passes(text):
            return [Text(text)]
        if self._opener is None:
            self._buffer += text
        else:
            self._grow_block(self._opener, text)
        return self._run(at_end=False)

    def flush(self) -> list[Text | CallFragment]:
        """The content ended (or something other than content came): decide everything.
        Content after this starts again, as at the start of the answer."""
        out = self._run(at_end=True) if self._buffer or self._unread else []
        space, self._space = self._space, ""
        if space and self._boundary == "start":
            _append_text(out, space)
        self._boundary = self._boundary or "start"
        return out

    # ------------------------------------------------------------ the one loop

    def _run(self, *, at_end: bool) -> list[Text | CallFragment]:
        out: list[Text | CallFragment] = []
        while True:
            if self._opener is None:
                if not self._read_text(out, at_end):
                    return out
            elif self._reread or at_end:
                self._reread = False
                if not self._read_block(out, at_end):
                    return out
            else:
                return out

    def _read_text(self, out: list[Text | CallFragment], at_end: bool) -> bool:
        """Pass text on up to the next marker that opens a block (True) or to what must
        be held back (False)."""
        buffer, searched = self._buffer, 0
        while (found := self._next_marker(buffer, searched)) is not None:
            at, opener = found
            self._code.read(buffer[searched:at])
            if not self._code.inside:
                self._text(out, buffer[:at])
                self._open_block(opener, buffer[at:])
                return True
            searched = at + len(opener.marker)
            self._code.read(opener.marker)
        held = 0 if at_end else self._partial_marker(buffer, searched)
        self._code.read(buffer[searched : len(buffer) - held])
        if held and self._code.inside:
            self._code.read(buffer[len(buffer) - held :])
            held = 0
        self._text(out, buffer[: len(buffer) - held])
        self._buffer = buffer[len(buffer) - held :]
        return False

    def _open_block(self, opener: Opener, text: str) -> None:
        self._opener, self._buffer, self._reread = opener, text, True
        self._block_length = len(text)
        self._recent = text[len(text) - _context(opener) :]
        self._offered_reader().next_block()

    def _grow_block(self, opener: Opener, text: str) -> None:
        """Keep a block's new text; it is read again only when that can decide it."""
        near_start = self._block_length <= _HEAD_LENGTH
        self._block_length += len(text)
        self._unread.append(text)
        seen = self._recent + text
        self._recent = seen[len(seen) - _context(opener) :]
        if near_start or any(ending in seen for ending in opener.endings):
            self._reread = True

    def _read_block(self, out: list[Text | CallFragment], at_end: bool) -> bool:
        """Decide the block if its text allows (True); False while it could still be one."""
        assert self._opener is not None
        if self._unread:
            self._buffer += "".join(self._unread)
            self._unread.clear()
        marker = self._opener.marker
        body = self._buffer[len(marker) :]
        verdict = self._opener.parse(body, self._offered_reader(), at_end)
        if verdict is Pending.MORE and not at_end:
            return False
        self._opener = None
        if isinstance(verdict, Found):
            self._space = ""
            for call in verdict.calls:
                call_id = call.call_id if call.call_id not in self._call_ids else None
                if call_id is not None:
                    self._call_ids.add(call_id)
                out.append(CallFragment(None, call_id, call.name, call.arguments))
                self.recognized.append(verdict.family)
            self._buffer, self._boundary = body[verdict.end :], "after_calls"
            return True
        self._code.read(marker)
        self._text(out, marker)
        self._buffer = body
        return True

    # ------------------------------------------------------------ helpers

    def _text(self, out: list[Text | CallFragment], text: str) -> None:
        """Pass decided text on; at a boundary, keep space back until what follows shows."""
        if not text:
            return
        if self._boundary is not None:
            text, self._space = self._space + text, ""
            rest = text.lstrip()
            if not rest:
                self._space = text
                return
            if self._boundary == "after_calls":
                text = rest
            self._boundary = None
        _append_text(out, text)

    def _next_marker(self, text: str, start: int) -> tuple[int, Opener] | None:
        found: tuple[int, Opener] | None = None
        for opener in self._openers:
            at = text.find(opener.marker, start)
            if at >= 0 and (found is None or at < found[0]):
                found = (at, opener)
        return found

    def _partial_marker(self, text: str, start: int) -> int:
        """The length of the longest end of ``text[start:]`` that begins a marker."""
        tail_start = max(start, len(text) - self._longest_marker + 1)
        for at in range(tail_start, len(text)):
            if text[at] in self._marker_starts:
                tail = text[at:]
                if any(o.marker.startswith(tail) for o in self._openers):
                    return len(text) - at
        return 0

    def _offered_reader(self) -> Reader:
        if self._reader is None:
            source = self._offered_source
            offered: Mapping[str, JSON] = source() if callable(source) else source
            self._reader = Reader(dict(offered), self._families)
        return self._reader


def _context(opener: Opener) -> int:
    """How much of a block's end to keep, to see an ending that the next chunk completes."""
    return max(len(ending) for ending in opener.endings) - 1


def _append_text(out: list[Text | CallFragment], text: str) -> None:
    if out and isinstance(out[-1], Text):
        out[-1] = Text(out[-1].text + text)
    else:
        out.append(Text(text))
