"""Conversations continued by ``previous_response_id``: a turn's added latency against the
conversation's length.

    python -m bench.chains [--quick] [--lengths 0,50,200,800] [--turns 20] [--store memory://]
                           [--taking-turns]

The openai SDK's way to hold a conversation (``store`` is true by default; Codex does the
same over its WebSocket): each request sends only its new input and names the response it
continues, and the gateway puts the rest in front of it from its store. For each length
H, a gateway (its response store: ``--store``) in front of the canned upstream (streaming
event by event) is given a conversation grown to H turns, each a 1 kB user message
answered by the canned text, then ``--turns`` more turns, each continuing the one before,
timed one by one (httpx, one connection, the whole stream read). ``direct`` posts the
canned upstream, as many times, a Chat body of the same conversation (the user messages
and the canned answers, as toolwire translates them). The added p50 is the gateway's p50
minus direct's, for a gateway keeping parsed conversations (the default) and one keeping
none (``--history-cache-bytes 0``: every turn reads and parses the whole conversation from
the store, and translates all of it), in turn. After the longest, the memory of the first:
its RSS, and what it estimates its kept conversations take (``/metrics``).

``--taking-turns`` (a store the gateways share: ``sqlite:///...`` or ``redis://...``) adds a
third conversation, answered by two more gateways in turn, as behind a load balancer: each
holds the conversation as it was one response before and catches up on the other's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
from websockets.asyncio.client import ClientConnection, connect

from . import log, procs, websocket_turns
from . import upstream as canned

LENGTHS = (0, 50, 200, 800)
USER_TEXT = "Please look at the next part of the log and say what stands out. " * 16  # ~1 kB
ANSWER_TEXT = "".join(choice["delta"].get("content") or "" for chunk in canned.text_chunks(40) for choice in chunk["choices"])


def _timed_post(client: httpx.Client, url: str, body: dict[str, Any]) -> tuple[float, bytes]:
    started = time.perf_counter()
    with client.stream("POST", url, content=orjson.dumps(body), headers={"content-type": "application/json"}) as answer:
        data = answer.read()
        if answer.status_code != 200:
            raise RuntimeError(f"{url}: {answer.status_code} {data[:300]!r}")
    return time.perf_counter() - started, data


def _response_id(stream: bytes) -> str:
    marker = b'"response.completed"'
    if marker not in stream:
        raise RuntimeError(f"the stream did not complete: {stream[-300:]!r}")
    start = stream.rindex(b'"id":"resp_') + len(b'"id":"')
    return stream[start : stream.index(b'"', start)].decode()


def direct_body(turns: int) -> dict[str, Any]:
    messages: list[dict[str, str]] = []
    for _ in range(turns):
        messages += [{"role": "user", "content": USER_TEXT}, {"role": "assistant", "content": ANSWER_TEXT}]
    messages.append({"role": "user", "content": USER_TEXT})
    return {"model": canned.MODEL, "messages": messages, "stream": True, "stream_options": {"include_usage": True}}


class Conversation:
    """One conversation continued turn by turn, on one gateway or on several in turn."""

    def __init__(self, client: httpx.Client, *gateway_urls: str) -> None:
        self.client, self.urls = client, [url + "/v1/responses" for url in gateway_urls]
        self.previous: str | None = None
        self.turns = 0

    def turn(self) -> float:
        body: dict[str, Any] = {"model": canned.MODEL, "input": USER_TEXT, "stream": True}
        if self.previous is not None:
            body["previous_response_id"] = self.previous
        seconds, stream = _timed_post(self.client, self.urls[self.turns % len(self.urls)], body)
        self.previous = _response_id(stream)
        self.turns += 1
        return seconds


class WebSocketConversation:
    """One conversation continued turn by turn over one WebSocket, as Codex's built-in
    provider holds it: ``store: false``, the connection's own memory. The client is the
    ``websockets`` package on an event loop of its own, each turn run to its end on it, its
    events read as ``bench.websocket_turns`` reads them."""

    def __init__(self, gateway_url: str) -> None:
        self.url = websocket_turns.responses_url(gateway_url)
        self.previous: str | None = None
        self.turns = 0
        self._loop = asyncio.new_event_loop()
        self._socket: ClientConnection = self._loop.run_until_complete(
            connect(self.url, max_size=None, compression=None, open_timeout=60)
        )

    def turn(self) -> float:
        body: dict[str, Any] = {"type": "response.create", "model": canned.MODEL, "input": USER_TEXT, "store": False}
        if self.previous is not None:
            body["previous_response_id"] = self.previous
        started = time.perf_counter()
        last = self._loop.run_until_complete(websocket_turns.exchange(self._socket, orjson.dumps(body).decode()))
        seconds = time.perf_counter() - started
        if not last.startswith(websocket_turns.COMPLETED):
            raise RuntimeError(f"{self.url}: the turn did not complete: {last[:300]}")
        self.previous = orjson.loads(last)["response"]["id"]
        self.turns += 1
        return seconds

    def close(self) -> None:
        self._loop.run_until_complete(self._socket.close())
        self._loop.close()


def stored_conversation_metrics(client: httpx.Client, gateway_url: str) -> dict[str, float]:
    """The gateway's ``toolwire_stored_conversations_*`` figures from ``/metrics``."""
    text = client.get(gateway_url + "/metrics").text
    figures = {}
    for name in ("entries", "bytes", "continued_total", "read_total", "caught_up_total"):
        match = re.search(rf"^toolwire_stored_conversations_{name} (\S+)$", text, re.M)
        figures[name] = float(match[1]) if match else float("nan")
    return figures


def measure(lengths: list[int], turns: int, store: str, work: Path, *, taking_turns: bool = False) -> dict[str, Any]:
    """The rows of the table, one per length, and the memory figures."""
    logs = work / "logs"
    rows = []
    with procs.upstream_service(logs, "--reply", "text", "--write-per-event", name="upstream-chains") as upstream, \
            procs.gateway_service(upstream.url + "/v1", logs, "--store", store, name="gateway-chains") as cached, \
            procs.gateway_service(upstream.url + "/v1", logs, "--store", store, "--history-cache-bytes", "0",
                                  name="gateway-chains-uncached") as uncached, \
            contextlib.ExitStack() as more, httpx.Client(timeout=120) as client:  # fmt: skip
        websocket = WebSocketConversation(cached.url)
        more.callback(websocket.close)
        conversations: dict[str, Conversation | WebSocketConversation] = {
            "toolwire": Conversation(client, cached.url),
            "uncached": Conversation(client, uncached.url),
            "websocket": websocket,
        }
        if taking_turns:
            pair = [more.enter_context(procs.gateway_service(upstream.url + "/v1", logs, "--store", store,
                                                             name=f"gateway-chains-turns-{n}")) for n in (1, 2)]
            conversations["taking_turns"] = Conversation(client, *(gateway.url for gateway in pair))
        conversations["toolwire"].turn()  # imports, first allocations: not the conversations
        baseline_kib = procs.memory_kib(cached.pid)
        conversations["toolwire"] = Conversation(client, cached.url)
        for length in lengths:
            times: dict[str, list[float]] = {"direct": [], **{name: [] for name in conversations}}
            for conversation in conversations.values():
                while conversation.turns < length:
                    conversation.turn()
            log(f"chains: {length} turns")
            for _ in range(turns):  # in turn, so that the machine's moments fall on all three alike
                for name, conversation in conversations.items():
                    times[name].append(conversation.turn())
                seconds, _ = _timed_post(client, upstream.url + "/v1/chat/completions",
                                         direct_body(conversations["toolwire"].turns))
                times["direct"].append(seconds)
            p50 = {name: statistics.median(values) * 1000 for name, values in times.items()}
            rows.append({
                "turns": length,
                "p50_ms": p50,
                "added_p50_ms": p50["toolwire"] - p50["direct"],
                "uncached_added_p50_ms": p50["uncached"] - p50["direct"],
                "websocket_added_p50_ms": p50["websocket"] - p50["direct"],
                **({"taking_turns_added_p50_ms": p50["taking_turns"] - p50["direct"]} if taking_turns else {}),
                "direct_body_bytes": len(orjson.dumps(direct_body(length))),
            })  # fmt: skip
        figures = stored_conversation_metrics(client, cached.url)
        memory = {
            "turns": conversations["toolwire"].turns,
            "baseline_mb": baseline_kib / 1024,
            "after_mb": procs.memory_kib(cached.pid) / 1024,
            "estimated_mb": figures["bytes"] / 1024 / 1024,
            "entries": figures["entries"],
            "continued": figures["continued_total"],
            "read": figures["read_total"],
        }
        if taking_turns:
            memory["taking_turns"] = [stored_conversation_metrics(client, gateway.url) for gateway in pair]
    return {"turns_timed": turns, "store": store, "rows": rows, "memory": memory}


def table(result: dict[str, Any]) -> str:
    """The markdown table of ``measure``'s result, and a line on the memory."""
    pairs = "taking_turns_added_p50_ms" in result["rows"][0] if result["rows"] else False
    sockets = "websocket_added_p50_ms" in result["rows"][0] if result["rows"] else False
    lines = [
        "| turns before | Chat body | direct p50 | toolwire p50 | **added** | keeping no conversation: added |"
        + (" over a WebSocket: added |" if sockets else "")
        + (" two gateways taking turns: added |" if pairs else ""),
        "| ---: | ---: | ---: | ---: | ---: | ---: |" + (" ---: |" if sockets else "") + (" ---: |" if pairs else ""),
    ]
    for row in result["rows"]:
        p50 = row["p50_ms"]
        lines.append(
            f"| {row['turns']} | {row['direct_body_bytes'] / 1e6:.2f} MB | {p50['direct']:.3f} ms | {p50['toolwire']:.3f} ms"
            f" | **{row['added_p50_ms']:+.3f} ms** | {row['uncached_added_p50_ms']:+.3f} ms |"
            + (f" {row['websocket_added_p50_ms']:+.3f} ms |" if sockets else "")
            + (f" {row['taking_turns_added_p50_ms']:+.3f} ms |" if pairs else "")
        )
    memory = result["memory"]
    lines += [
        "",
        f"Memory after {memory['turns']} turns of one conversation: RSS {memory['baseline_mb']:.1f} → "
        f"{memory['after_mb']:.1f} MB; the gateway's estimate of its kept conversations (`/metrics` "
        f"`toolwire_stored_conversations_bytes`) {memory['estimated_mb']:.1f} MB in {memory['entries']:.0f} "
        f"entries; {memory['continued']:.0f} turns continued what was kept, {memory['read']:.0f} read the store.",
    ]
    for n, figures in enumerate(memory.get("taking_turns", ()), 1):
        lines.append(
            f"Gateway {n} of the two taking turns: {figures['caught_up_total']:.0f} turns caught up on the other's "
            f"response, {figures['read_total']:.0f} read the store, {figures['continued_total']:.0f} continued their own."
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.chains", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short conversations, few turns: a smoke run")
    parser.add_argument("--lengths", default=None, help="turns before the timed ones, comma-separated [0,50,200,800]")
    parser.add_argument("--turns", type=int, default=None, help="timed turns per length [20; --quick 3]")
    parser.add_argument("--store", default="memory://", help="the gateways' response store [memory://]")
    parser.add_argument("--taking-turns", action="store_true",
                        help="also a conversation answered by two gateways in turn (needs a shared --store)")
    parser.add_argument("--work-dir", type=Path, default=Path(__file__).resolve().parent / "out")
    args = parser.parse_args(argv)
    lengths = [int(n) for n in (args.lengths or ("0,5" if args.quick else ",".join(map(str, LENGTHS)))).split(",")]
    if args.taking_turns and args.store.startswith("memory:"):
        parser.error("--taking-turns needs a store the gateways share (sqlite:///PATH or redis://...)")
    result = measure(sorted(lengths), args.turns or (3 if args.quick else 20), args.store, args.work_dir,
                     taking_turns=args.taking_turns)
    (args.work_dir / "chains.json").write_text(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    print(table(result))


if __name__ == "__main__":
    main()
