"""The apply_patch format: Codex's Lark grammar, a validating parser, and the pure edit.

``PATCH_GRAMMAR`` is the grammar Codex declares for its ``apply_patch`` custom tool,
verbatim. Lark refuses its two regexes that can match the empty string (``/(.*)/``), so
the parser is built from an equivalent grammar where each is an optional non-empty
regex; the language is the same.

``parse_patch(text) -> list[Hunk]`` validates with Lark and reads the parse tree.
``apply_hunks(hunks, files)`` computes every file's new content from the old ones
without touching a disk: the caller commits the result all at once, or nothing.

An update hunk is a list of chunks; each ``@@`` line starts one. A chunk's old lines
(context `` `` and removed ``-``) are found at or after the previous chunk, first
exactly, then ignoring trailing whitespace, then surrounding whitespace, then with
typographic punctuation made plain (as Codex does); ``*** End of File`` anchors the
chunk at the end. A chunk that only adds lines goes right after its ``@@`` context
line, or at the end of the file when it has none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import lark
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

PATCH_GRAMMAR = (
    'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF\nend_patch: "*** End Patch" LF?\n\n'
    "hunk: add_hunk | delete_hunk | update_hunk\n"
    'add_hunk: "*** Add File: " filename LF add_line+\n'
    'delete_hunk: "*** Delete File: " filename LF\n'
    'update_hunk: "*** Update File: " filename LF change_move? change?\n\n'
    'filename: /(.+)/\nadd_line: "+" /(.*)/ LF -> line\n\n'
    'change_move: "*** Move to: " filename LF\nchange: (change_context | change_line)+ eof_line?\n'
    'change_context: ("@@" | "@@ " /(.+)/) LF\nchange_line: ("+" | "-" | " ") /(.*)/ LF\n'
    'eof_line: "*** End of File" LF\n\n%import common.LF\n'
)
"""Codex's apply_patch grammar (``codex-rs/core/src/tools/handlers/apply_patch.lark``)."""

_PARSER = lark.Lark(
    PATCH_GRAMMAR.replace("/(.*)/", "(/(.+)/)?"), parser="lalr", keep_all_tokens=True
)


class PatchError(Exception):
    """The patch does not follow the grammar, or does not fit the files it edits."""


@dataclass(frozen=True, slots=True)
class AddFile:
    path: str
    lines: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeleteFile:
    path: str


@dataclass(frozen=True, slots=True)
class Chunk:
    context: str | None
    old: tuple[str, ...]
    new: tuple[str, ...]
    at_end_of_file: bool = False


@dataclass(frozen=True, slots=True)
class UpdateFile:
    path: str
    move_to: str | None
    chunks: tuple[Chunk, ...]


Hunk = AddFile | DeleteFile | UpdateFile


# ---------------------------------------------------------------- parsing


def parse_patch(text: str) -> list[Hunk]:
    """The hunks of ``text``; raises ``PatchError`` saying where the grammar breaks.

    Surrounding whitespace is ignored and CRLF line ends are read as LF.
    """
    text = text.replace("\r\n", "\n").strip() + "\n"
    try:
        tree = _PARSER.parse(text)
    except UnexpectedInput as exc:
        raise PatchError(_describe(exc)) from exc
    except LarkError as exc:  # pragma: no cover - any other Lark failure
        raise PatchError(f"invalid patch: {exc}") from exc
    return [
        _hunk(inner)
        for hunk in _subtrees(tree, "hunk")
        for inner in hunk.children
        if isinstance(inner, lark.Tree)
    ]


def _describe(exc: UnexpectedInput) -> str:
    where = f"invalid patch at line {exc.line}"
    if isinstance(exc, UnexpectedToken):
        if exc.token.type == "$END":
            where, found = "invalid patch", "it ends too early"
        else:
            found = f"{str(exc.token.value)!r} is there"
        expected = sorted(_terminal_text(name) for name in exc.expected)
    elif isinstance(exc, UnexpectedCharacters):
        found = f"{exc.char!r} is there"
        expected = sorted(_terminal_text(name) for name in exc.allowed or ())
    else:  # pragma: no cover
        return f"{where}: {exc}"
    return f"{where}: {found}, but the grammar expects one of: {', '.join(expected)}"


_TERMINALS = {terminal.name: terminal.pattern for terminal in _PARSER.terminals}


def _terminal_text(name: str) -> str:
    pattern = _TERMINALS.get(name)
    if pattern is None:
        return name
    if pattern.type == "str":
        return repr(pattern.value)
    return "a line break" if name == "LF" else "text"


def _subtrees(tree: lark.Tree[lark.Token], rule: str) -> list[lark.Tree[lark.Token]]:
    return [child for child in tree.children if isinstance(child, lark.Tree) and child.data == rule]


def _texts(tree: lark.Tree[lark.Token]) -> list[str]:
    return [str(child) for child in tree.children if isinstance(child, lark.Token)]


def _filename(tree: lark.Tree[lark.Token]) -> str:
    [filename] = _subtrees(tree, "filename")
    return "".join(_texts(filename)).strip()


def _line_text(tree: lark.Tree[lark.Token]) -> tuple[str, str]:
    """``(marker, text)`` of a ``line``/``change_line``/``change_context`` tree."""
    tokens = [token for token in _texts(tree) if token != "\n"]
    marker, rest = tokens[0], "".join(tokens[1:])
    return marker, rest


def _hunk(tree: lark.Tree[lark.Token]) -> Hunk:
    path = _filename(tree)
    if tree.data == "add_hunk":
        return AddFile(path, tuple(_line_text(line)[1] for line in _subtrees(tree, "line")))
    if tree.data == "delete_hunk":
        return DeleteFile(path)
    moves = _subtrees(tree, "change_move")
    move_to = _filename(moves[0]) if moves else None
    changes = _subtrees(tree, "change")
    return UpdateFile(path, move_to, _chunks(changes[0]) if changes else ())


def _chunks(change: lark.Tree[lark.Token]) -> tuple[Chunk, ...]:
    chunks: list[Chunk] = []
    context: str | None = None
    old: list[str] = []
    new: list[str] = []
    started = False

    def close(at_end: bool = False) -> None:
        if started:
            chunks.append(Chunk(context, tuple(old), tuple(new), at_end))

    for child in change.children:
        if not isinstance(child, lark.Tree):
            continue
        if child.data == "change_context":
            close()
            marker, rest = _line_text(child)
            context = rest if marker == "@@ " else None
            old, new, started = [], [], True
        elif child.data == "change_line":
            marker, rest = _line_text(child)
            started = True
            if marker in (" ", "-"):
                old.append(rest)
            if marker in (" ", "+"):
                new.append(rest)
        elif child.data == "eof_line":
            close(at_end=True)
            started = False
    close()
    return tuple(chunks)


def with_paths(hunk: Hunk, rename: Callable[[str], str]) -> Hunk:
    """``hunk`` with every path it names passed through ``rename``."""
    if isinstance(hunk, UpdateFile) and hunk.move_to is not None:
        return replace(hunk, path=rename(hunk.path), move_to=rename(hunk.move_to))
    return replace(hunk, path=rename(hunk.path))


def paths_of(hunks: Sequence[Hunk]) -> list[str]:
    """Every path the hunks name, in order, once each."""
    paths: dict[str, None] = {}
    for hunk in hunks:
        paths[hunk.path] = None
        if isinstance(hunk, UpdateFile) and hunk.move_to is not None:
            paths[hunk.move_to] = None
    return list(paths)


# ---------------------------------------------------------------- applying


@dataclass(frozen=True, slots=True)
class PatchResult:
    """The new content of every file touched (None: deleted), and a summary line per
    hunk (``A path``, ``M path``, ``D path``)."""

    files: dict[str, str | None]
    summary: list[str]


def apply_hunks(hunks: Sequence[Hunk], files: Mapping[str, str | None]) -> PatchResult:
    """Apply ``hunks`` in order to ``files`` (path -> content, None when absent).

    Raises ``PatchError`` for a file to update or delete that does not exist, or an
    update whose lines cannot be found. Later hunks see earlier hunks' results.
    """
    state = dict(files)
    changed: dict[str, str | None] = {}
    summary: list[str] = []

    def write(path: str, content: str | None) -> None:
        state[path] = content
        changed[path] = content

    for hunk in hunks:
        if isinstance(hunk, AddFile):
            write(hunk.path, "".join(line + "\n" for line in hunk.lines))
            summary.append(f"A {hunk.path}")
        elif isinstance(hunk, DeleteFile):
            if state.get(hunk.path) is None:
                raise PatchError(f"cannot delete {hunk.path}: the file does not exist")
            write(hunk.path, None)
            summary.append(f"D {hunk.path}")
        else:
            original = state.get(hunk.path)
            if original is None:
                raise PatchError(f"cannot update {hunk.path}: the file does not exist")
            updated = update_text(original, hunk.chunks, hunk.path)
            if hunk.move_to is not None and hunk.move_to != hunk.path:
                write(hunk.path, None)
                write(hunk.move_to, updated)
                summary.append(f"M {hunk.move_to}")
            else:
                write(hunk.path, updated)
                summary.append(f"M {hunk.path}")
    return PatchResult(changed, summary)


def update_text(original: str, chunks: Sequence[Chunk], path: str) -> str:
    """``original`` with ``chunks`` applied; the result ends with a line break."""
    lines = original.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    replacements: list[tuple[int, int, tuple[str, ...]]] = []
    cursor = 0
    for chunk in chunks:
        if chunk.context is not None:
            found = seek_lines(lines, (chunk.context,), cursor)
            if found is None:
                raise PatchError(f"cannot update {path}: context line not found: {chunk.context!r}")
            cursor = found + 1
        old, new = chunk.old, chunk.new
        if not old:
            if new:
                replacements.append((cursor if chunk.context is not None else len(lines), 0, new))
            continue
        found = seek_lines(lines, old, cursor, at_end=chunk.at_end_of_file)
        if found is None and old[-1] == "":
            old = old[:-1]
            new = new[:-1] if new and new[-1] == "" else new
            found = seek_lines(lines, old, cursor, at_end=chunk.at_end_of_file)
        if found is None:
            expected = "\n".join(chunk.old)
            raise PatchError(f"cannot update {path}: these lines were not found:\n{expected}")
        replacements.append((found, len(old), new))
        cursor = found + len(old)
    # From the end back, so that every start is still where it was found; of two at one
    # place (an addition after its context line, then a change of the line after it), the
    # later chunk first, so that the earlier one ends up before it.
    for start, length, new in reversed(sorted(replacements, key=lambda r: r[0])):
        lines[start : start + length] = new
    return "".join(line + "\n" for line in lines)


_PLAIN_PUNCTUATION = str.maketrans(
    {
        "\u2010": "-",
        "\u2011": "-",
        "\u2012": "-",
        "\u2013": "-",
        "\u2014": "-",
        "\u2015": "-",
        "\u2212": "-",
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u00a0": " ",
        "\u2002": " ",
        "\u2003": " ",
        "\u2009": " ",
        "\u202f": " ",
    }
)
_LOOSENESS: tuple[Callable[[str], str], ...] = (
    lambda line: line,
    str.rstrip,
    str.strip,
    lambda line: line.strip().translate(_PLAIN_PUNCTUATION),
)


def seek_lines(
    lines: Sequence[str], pattern: Sequence[str], start: int, *, at_end: bool = False
) -> int | None:
    """Where ``pattern`` first occurs in ``lines`` at or after ``start`` (at the very end
    when ``at_end``), trying ever looser comparisons; None if nowhere."""
    if not pattern:
        return start
    if len(pattern) > len(lines):
        return None
    last = len(lines) - len(pattern)
    first = last if at_end else start
    for loosen in _LOOSENESS:
        wanted = [loosen(line) for line in pattern]
        for index in range(first, last + 1):
            if all(loosen(lines[index + offset]) == want for offset, want in enumerate(wanted)):
                return index
    return None
