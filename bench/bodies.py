"""Codex-sized ``POST /v1/responses`` bodies, built from the captured Codex fixtures.

    python -m bench.bodies [--out DIR]     # write the bodies and print their sizes

The fixtures in ``tests/fixtures/codex`` are real Codex 0.169.0 requests whose long
instruction and description texts were replaced by placeholders such as
``<codex description, 5033 chars>``. Here each placeholder becomes generated text of
that many characters, scaled together so that the compact body is as large as the real
one listed in ``SIZES.md`` (markdown-like prose with newlines, quotes and backticks, so
JSON escaping costs what it costs in a real body). Then the body gets a longer history:
the tool rounds it contains (``function_call`` / ``custom_tool_call`` and their outputs,
with the reasoning item before them) are repeated with fresh ids and call ids, as after
several more tool rounds of the same session.

Two bodies, both ``"stream": true``:

* ``v1``: ``gpt-5.5/turn-2.json`` (tools in top-level ``tools``; function, custom
  ``apply_patch`` and ``tool_search`` calls);
* ``v2``: ``gpt-5.6-terra/turn-3.json`` (tools in an ``additional_tools`` item, namespaces,
  custom ``exec``).

And a long session (``session(turns)``): the requests of one Codex session as it grows
by one tool turn per request, ``store: false``, so that each request resends the whole
history. It starts from ``gpt-5.4/turn-1.json`` (the first request) and each tool turn is
the one of ``gpt-5.4/turn-2.json`` (a reasoning item, an ``exec_command`` call and a
namespaced ``close_agent`` call, their outputs) with fresh ids and a command output of
ordinary length (``SESSION_TURN_BYTES`` per turn on average): 800 turns make the issue's
day-long session of about 1.4 MB. ``session(n + 1)``'s history is ``session(n)``'s with one
more turn, byte for byte, as Codex sends it.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "codex"

_PLACEHOLDER = re.compile(r"<codex [^\n]*?, (\d+) chars>")
_SIZE_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|", re.M)
# Items that form tool rounds in a history; repeated to lengthen it.
_ROUND_ITEMS = {"reasoning", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output"}
_WORD_TEXT = (
    "the a to of and in is you for tool call with on not be that use when this file command it "
    "output user must should if are or as by from can do run only model before after each "
    "workspace repository patch test change code shell sandbox approval request response turn "
    "agent instructions always never prefer keep short answer explain edit read write apply "
    "search result error path directory function argument value json format plan step"
)
_WORDS = _WORD_TEXT.split()
_DECORATIONS = ("`{}`", '"{}"', "**{}**", "{}:", "{},", "{}.", "({})", "{}")


@dataclass(frozen=True)
class Body:
    """One benchmark request body and where it came from."""

    name: str  # "v1" / "v2"
    fixture: str  # e.g. "gpt-5.5/turn-2.json"
    protocol: str  # "V1" / "V2"
    data: bytes  # the compact JSON body
    real_size: int  # the captured body's size (SIZES.md)
    padded_size: int  # the padded fixture before the history was lengthened
    items: int
    tool_rounds: int
    headers: dict[str, str]

    @property
    def size(self) -> int:
        return len(self.data)


def compact(value: Any) -> bytes:
    """JSON as Codex sends it: compact, key order kept, non-ASCII unescaped."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def real_sizes(path: Path = FIXTURES / "SIZES.md") -> dict[str, int]:
    """``{"gpt-5.5/turn-2.json": 46610, ...}`` from the SIZES.md table."""
    return {match[1]: int(match[2]) for match in _SIZE_ROW.finditer(path.read_text())}


def generated_text(length: int, seed: int) -> str:
    """Deterministic markdown-like prose of exactly ``length`` characters."""
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    line = 0
    while size < length:
        if line > 60 + rng.randrange(40):
            piece = "\n" if rng.random() < 0.7 else "\n\n- "
            line = 0
        else:
            piece = rng.choice(_DECORATIONS).format(rng.choice(_WORDS)) + " "
            line += len(piece)
        parts.append(piece)
        size += len(piece)
    return "".join(parts)[:length]


def _placeholders(value: Any, found: list[tuple[Any, Any, int]]) -> None:
    """Collect (container, key, chars) for every placeholder string inside ``value``."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        if isinstance(child, str):
            match = _PLACEHOLDER.fullmatch(child)
            if match:
                found.append((value, key, int(match[1])))
        else:
            _placeholders(child, found)


def pad_to_real_size(body: dict[str, Any], target: int) -> dict[str, Any]:
    """``body`` with each placeholder replaced by generated text, the whole as large as ``target``.

    Each placeholder first gets its real character count; then all of them are scaled by
    one factor until the compact body is ``target`` bytes (a few bytes off at most), which
    accounts for the escapes and multi-byte characters of the real texts.
    """
    body = copy.deepcopy(body)
    found: list[tuple[Any, Any, int]] = []
    _placeholders(body, found)
    if not found:
        return body
    total_chars = sum(chars for _, _, chars in found)
    scale = 1.0
    for _ in range(8):
        for seed, (container, key, chars) in enumerate(found):
            container[key] = generated_text(max(1, round(chars * scale)), seed)
        size = len(compact(body))
        if abs(size - target) <= 2:
            break
        scale *= 1 + (target - size) / (total_chars * scale * 1.02)
    return body


def _fresh_ids(item: dict[str, Any], round_number: int | str) -> dict[str, Any]:
    item = copy.deepcopy(item)
    for key in ("id", "call_id"):
        if isinstance(item.get(key), str):
            item[key] = f"{item[key]}_r{round_number}"
    return item


def lengthen_history(body: dict[str, Any], rounds: int) -> tuple[dict[str, Any], int]:
    """``body`` with its tool rounds repeated until the history holds ``rounds`` of them.

    The tool items (and the reasoning before them) after the last user message are the
    rounds of the current turn; copies with fresh ``id``/``call_id`` follow them.
    Returns the body and the number of tool rounds in it.
    """
    body = copy.deepcopy(body)
    items: list[dict[str, Any]] = body["input"]
    last_user = max(i for i, item in enumerate(items) if item.get("type") == "message" and item.get("role") == "user")
    tail = [item for item in items[last_user + 1 :] if item.get("type") in _ROUND_ITEMS]
    original_rounds = max(1, _count_rounds(items[last_user + 1 :]))
    extra: list[dict[str, Any]] = []
    copies = 0
    while original_rounds * (copies + 1) < rounds:
        copies += 1
        extra += [_fresh_ids(item, copies) for item in tail]
    body["input"] = items + extra
    return body, original_rounds * (copies + 1)


def _count_rounds(items: list[dict[str, Any]]) -> int:
    """Tool rounds: runs of calls, each closed by the outputs that answer it."""
    rounds = 0
    in_calls = False
    for item in items:
        kind = item.get("type", "")
        is_call = kind.endswith("_call") and not kind.endswith("_output")
        if is_call and not in_calls:
            rounds += 1
        in_calls = is_call
    return rounds


_BODY_SPECS = {
    "v1": ("gpt-5.5/turn-2.json", "V1"),
    "v2": ("gpt-5.6-terra/turn-3.json", "V2"),
}
_DROPPED_HEADERS = {"host", "content-length"}


def build(name: str, rounds: int = 6) -> Body:
    """The benchmark body ``name`` (``"v1"`` or ``"v2"``) with ``rounds`` tool rounds."""
    fixture, protocol = _BODY_SPECS[name]
    path = FIXTURES / fixture
    captured = json.loads(path.read_text())
    real = real_sizes()[fixture]
    padded = pad_to_real_size(captured, real)
    padded["stream"] = True
    lengthened, tool_rounds = lengthen_history(padded, rounds)
    headers_path = path.parent / "headers.json"
    headers = json.loads(headers_path.read_text()) if headers_path.exists() else {"content-type": "application/json"}
    return Body(
        name=name,
        fixture=fixture,
        protocol=protocol,
        data=compact(lengthened),
        real_size=real,
        padded_size=len(compact(padded)),
        items=len(lengthened["input"]),
        tool_rounds=tool_rounds,
        headers={k: v for k, v in headers.items() if k.lower() not in _DROPPED_HEADERS},
    )


SESSION_FIXTURES = ("gpt-5.4/turn-1.json", "gpt-5.4/turn-2.json")
SESSION_TURN_BYTES = 1700
"""The average size of one tool turn of ``session``, in bytes of compact JSON: with the
padded first request, 800 turns make about 1.4 MB (the issue's day-long session)."""


def session(turns: int, variant: int = 0) -> Body:
    """The request a Codex session sends after ``turns`` tool turns (see the module docstring)."""
    return session_series(turns, 1, variant)[0]


def session_series(turns: int, count: int, variant: int = 0) -> list[Body]:
    """``count`` requests of one growing session: after ``turns``, ``turns + 1``, ... tool
    turns. ``variant`` makes another session (other ids and texts, the same sizes)."""
    first, second = (json.loads((FIXTURES / name).read_text()) for name in SESSION_FIXTURES)
    real = real_sizes()[SESSION_FIXTURES[0]]
    padded = pad_to_real_size(first, real)
    padded_size = len(compact(padded))
    if variant:
        user = padded["input"][-1]
        user["content"][0]["text"] += f" (session {variant})"
    turn = second["input"][len(first["input"]) :]
    history = [item for number in range(turns + count - 1) for item in session_turn(turn, number, variant)]
    headers_path = FIXTURES / SESSION_FIXTURES[0].split("/")[0] / "headers.json"
    headers = {k: v for k, v in json.loads(headers_path.read_text()).items() if k.lower() not in _DROPPED_HEADERS}
    bodies = []
    for done in range(turns, turns + count):
        body = {**padded, "input": padded["input"] + history[: done * len(turn)]}
        bodies.append(Body(
            name=f"session-{done}" + (f"-{variant}" if variant else ""),
            fixture=SESSION_FIXTURES[0],
            protocol="V1",
            data=compact(body),
            real_size=real,
            padded_size=padded_size,
            items=len(body["input"]),
            tool_rounds=done,
            headers=headers,
        ))
    return bodies


def session_turn(turn: list[dict[str, Any]], number: int, variant: int = 0) -> list[dict[str, Any]]:
    """Tool turn ``number`` of ``session``: ``turn``'s items with fresh ids, the first call's
    output lengthened by generated text (the same for a given ``number``, every time)."""
    items = [_fresh_ids(item, number if not variant else f"{variant}_{number}") for item in turn]
    base = len(compact(items))
    extra = max(0, SESSION_TURN_BYTES - base)
    length = random.Random(number).randrange(extra // 2, extra * 3 // 2 + 1) if extra else 0
    output = next(item for item in items if item.get("type") == "function_call_output")
    output["output"] += generated_text(length, seed=1000 + number + 100_000 * variant)
    return items


def build_all(rounds: int = 6) -> list[Body]:
    return [build(name, rounds) for name in _BODY_SPECS]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bodies", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write <name>.json bodies into this directory")
    parser.add_argument("--rounds", type=int, default=6, help="tool rounds in each body's history")
    args = parser.parse_args(argv)
    for body in build_all(args.rounds):
        print(
            f"{body.name} ({body.protocol}, {body.fixture}): {body.size} bytes, {body.items} input items, "
            f"{body.tool_rounds} tool rounds; padded fixture {body.padded_size} bytes (real capture {body.real_size})"
        )
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / f"{body.name}.json").write_bytes(body.data)


if __name__ == "__main__":
    main()
