"""How large the lines and events of real upstream answers get: what the read limits must let through.

    python -m bench.answer_sizes [--output-tokens N]

The largest single SSE event a backend sends carries a whole long output at once: a
freeform ``apply_patch`` that adds a large file, as one tool call. Some servers stream
a tool call's arguments in small deltas, but Ollama (and servers modelled on it) send
each call whole in one chunk, and a Responses server repeats the whole output in
``response.output_item.done`` and again in ``response.completed`` (with the request's
``tools`` and ``instructions`` echoed beside it). A non-streamed answer is all of it in
one body.

The patch is as long as a model can write in one answer (``--output-tokens``, 128k
by default: the most any current model emits in one response), at 4 characters per
token for code (generous: ~3.5 is typical), as Python-like code with quotes,
backslashes and tabs, so JSON escaping costs what it costs. A Chat Completions tool
call carries it as a JSON string inside the ``arguments`` string (escaped twice); a
Responses ``custom_tool_call`` carries it as ``input`` (escaped once). The same for
text in a CJK language, whose characters are 3 bytes of UTF-8 each and ``\\uXXXX`` (6
bytes) when a server escapes non-ASCII.

Each shape is built as its server writes it and measured in bytes of its ``data:`` line.
A whole streamed answer is measured too (every byte of its SSE body): as many reasoning
tokens as output tokens, streamed one token per event, as most servers stream them.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODEX_REQUEST = ROOT / "tests" / "fixtures" / "codex" / "gpt-5.5" / "turn-2.json"
CHARS_PER_TOKEN = 4
CJK_CHARS_PER_TOKEN = 1.5
CODEX_TOOLS_AND_INSTRUCTIONS_BYTES = 46_610 - 12_575 + 7_037
"""The real tools and instructions of a Codex request (SIZES.md: real body minus its
sanitised fixture, plus the fixture's own tools), as a Responses server echoes them."""

_CODE_LINES = [
    'def {name}(self, path: str, *, mode: str = "r") -> dict[str, object]:',
    '\t"""Read {name} from ``path`` and return what it holds."""',
    '\twith open(path, mode, encoding="utf-8") as handle:',
    '\t\treturn {{"{name}": handle.read().split("\\n"), "size": len(path)}}',
    "\t# a comment with 'quotes', a backslash \\ and a tab\there",
    '\tif not value or value == "\\\\":',
    "\t\traise ValueError(f\"bad {name}: {{value!r}}\")",
    "",
]


def patch_text(chars: int, rng: random.Random) -> str:
    """An ``apply_patch`` adding one file of about ``chars`` characters of code."""
    lines = ["*** Begin Patch", "*** Add File: src/generated/module.py"]
    size = sum(len(line) + 1 for line in lines)
    while size < chars:
        line = "+" + rng.choice(_CODE_LINES).format(name=f"item_{rng.randrange(10_000)}")
        lines.append(line)
        size += len(line) + 1
    lines.append("*** End Patch")
    return "\n".join(lines) + "\n"


def cjk_text(chars: int, rng: random.Random) -> str:
    return "".join(chr(rng.randrange(0x4E00, 0x9FA5)) if i % 40 else "\n" for i in range(chars))


def sse_line(payload: object, *, ensure_ascii: bool = False) -> bytes:
    return b"data: " + json.dumps(payload, ensure_ascii=ensure_ascii, separators=(",", ":")).encode()


def chat_chunk_with_call(arguments: str, *, ensure_ascii: bool = False) -> bytes:
    """Ollama's shape: the whole tool call in one chunk."""
    call = {"id": "call_1", "index": 0, "type": "function", "function": {"name": "apply_patch", "arguments": arguments}}
    chunk = {
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "m",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": "", "tool_calls": [call]}, "finish_reason": None}],
    }
    return sse_line(chunk, ensure_ascii=ensure_ascii)


def responses_completed(item: dict[str, object], *, ensure_ascii: bool = False) -> bytes:
    """``response.completed`` with the output and, as OpenAI's server does, the request's
    tools and instructions echoed (padded to a real Codex request's size)."""
    request = json.loads(CODEX_REQUEST.read_text())
    echoed = "x" * (CODEX_TOOLS_AND_INSTRUCTIONS_BYTES - len(json.dumps(request.get("tools", []))))
    response = {
        "id": "resp_1", "object": "response", "created_at": 0, "status": "completed", "model": "m",
        "instructions": echoed, "tools": request.get("tools", []), "output": [item],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    }
    return sse_line({"type": "response.completed", "sequence_number": 9, "response": response}, ensure_ascii=ensure_ascii)


def token_stream_bytes(tokens: int) -> tuple[int, int]:
    """The SSE body of ``tokens`` tokens streamed one per event: as Chat chunks (OpenAI's
    shape: id, model, fingerprint, logprobs) and as Responses ``output_text`` deltas."""
    chunk = {"id": "chatcmpl-0123456789abcdefghijklmnopqrs", "object": "chat.completion.chunk", "created": 1_700_000_000,
             "model": "qwen3-coder-480b-a35b-instruct", "system_fingerprint": "fp_0123456789",
             "choices": [{"index": 0, "delta": {"content": "word"}, "logprobs": None, "finish_reason": None}]}
    delta = {"type": "response.output_text.delta", "sequence_number": 123456, "item_id": "msg_0123456789abcdef0123456789abcdef",
             "output_index": 0, "content_index": 0, "delta": "word", "logprobs": []}
    return (len(sse_line(chunk)) + 2) * tokens, (len(b"event: response.output_text.delta\n") + len(sse_line(delta)) + 2) * tokens


def measure(output_tokens: int) -> list[tuple[str, int]]:
    rng = random.Random(19)
    patch = patch_text(output_tokens * CHARS_PER_TOKEN, rng)
    cjk = cjk_text(int(output_tokens * CJK_CHARS_PER_TOKEN), rng)
    custom_item = {"type": "custom_tool_call", "id": "ctc_1", "call_id": "call_1", "name": "apply_patch", "input": patch, "status": "completed"}
    cjk_message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": cjk, "annotations": []}]}
    return [
        ("the patch itself (UTF-8)", len(patch.encode())),
        ("Chat chunk, whole call (Ollama): patch as {\"input\": ...} in arguments", len(chat_chunk_with_call(json.dumps({"input": patch})))),
        ("Responses response.output_item.done with the custom_tool_call", len(sse_line({"type": "response.output_item.done", "output_index": 0, "item": custom_item}))),
        ("Responses response.completed: the call + Codex's tools and instructions echoed", len(responses_completed(custom_item))),
        ("CJK text itself (UTF-8)", len(cjk.encode())),
        ("Chat chunk, CJK text as a call argument, non-ASCII escaped (\\uXXXX)", len(chat_chunk_with_call(json.dumps({"input": cjk}), ensure_ascii=True))),
        ("Responses response.completed with the CJK message, non-ASCII escaped", len(responses_completed(cjk_message, ensure_ascii=True))),
        ("whole Chat stream, reasoning + output tokens one per chunk", token_stream_bytes(2 * output_tokens)[0]),
        ("whole Responses stream, reasoning + output tokens one per delta", token_stream_bytes(2 * output_tokens)[1]),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-tokens", type=int, default=128_000)
    args = parser.parse_args()
    print(f"| answer of {args.output_tokens} output tokens | bytes | MiB |")
    print("| --- | ---: | ---: |")
    for name, size in measure(args.output_tokens):
        print(f"| {name} | {size} | {size / 2**20:.2f} |")


if __name__ == "__main__":
    main()
