"""An upstream whose answer never ends cannot take the gateway's memory.

Each case puts the real gateway, with its default limits, in front of `HostileUpstream`
and asks for one answer that never ends: an SSE line without a line end, an event
without a blank line, a JSON body without an end, each of them gzip-compressed (a
compression bomb: a few KiB on the wire for every MiB decoded), and an encoding the
gateway never asked for. The exchange must end with ``response.failed`` (a 502 when
not streaming) naming the setting that bounds it, the upstream connection must be
closed, the trip counted in ``/metrics``; then the gateway serves an honest request,
its memory is back near where it started and no file descriptor is left behind.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.gateway import GatewayProcess
from tests.support.hostile_upstream import HostileUpstream, prompt

from .conftest import StartGateway
from .helpers import (
    ProcessStats,
    assert_openai_error,
    failure_message,
    gateway_pid,
    output_text,
    process_stats,
    responses_url,
    stream,
    terminal,
    wait_until,
)

MiB = 2**20
MEMORY_SLACK = 8 * MiB
"""How far above where it started the gateway's RSS may settle after a case: well under
the 16 to 32 MiB each case makes it read (the defaults) before cutting it."""


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileUpstream]:
    with HostileUpstream() as server:
        yield server


@pytest.fixture(scope="module")
def gateway(hostile: HostileUpstream, start_module_gateway: StartGateway) -> GatewayProcess:
    return start_module_gateway(f"http://127.0.0.1:{hostile.port}/v1")


def honest_answer(gateway: GatewayProcess, marker: str) -> None:
    events = stream(gateway, {"model": "m", "input": prompt("honest", marker)})
    assert output_text(terminal(events)["response"]) == f"echo {marker}"
    answer = httpx.post(responses_url(gateway), json={"model": "m", "input": prompt("honest", marker)}, timeout=30)
    assert answer.status_code == 200, answer.text
    assert output_text(answer.json()) == f"echo {marker}"


def tripped(gateway: GatewayProcess, limit: str) -> float:
    text = httpx.get(gateway.url + "/metrics", timeout=10).text
    match = re.search(rf'^toolwire_limits_tripped_total{{limit="{limit}"}} (\S+)$', text, re.M)
    return float(match[1]) if match else 0.0


def settled(pid: int, baseline: ProcessStats) -> ProcessStats:
    """The gateway's resources once they are back near ``baseline`` (or after 20 s)."""
    wait_until(
        lambda: (now := process_stats(pid)).rss_bytes <= baseline.rss_bytes + MEMORY_SLACK and now.fds <= baseline.fds,
        timeout=20,
        interval=0.2,
    )
    return process_stats(pid)


CASES = [
    pytest.param("endless-line", True, "upstream_max_line_bytes", "SSE line longer", id="stream-endless-line"),
    pytest.param("endless-event", True, "upstream_max_event_bytes", "SSE event longer", id="stream-endless-event"),
    pytest.param("gzip-line", True, "upstream_max_line_bytes", "SSE line longer", id="stream-gzip-bomb"),
    pytest.param("endless-line", False, "upstream_max_body_bytes", "answer is larger", id="json-endless-body"),
    pytest.param("gzip-line", False, "upstream_max_body_bytes", "answer is larger", id="json-gzip-bomb"),
    pytest.param("zstd-line", True, "upstream_max_line_bytes", "SSE line longer", id="stream-zstd-bomb"),
    pytest.param("zstd-line", False, "upstream_max_body_bytes", "answer is larger", id="json-zstd-bomb"),
]


@pytest.mark.parametrize(("behaviour", "streaming", "limit", "words"), CASES)
def test_an_answer_that_never_ends_is_cut_at_its_limit(
    gateway: GatewayProcess, hostile: HostileUpstream, behaviour: str, streaming: bool, limit: str, words: str
) -> None:
    pid = gateway_pid(gateway)
    honest_answer(gateway, "warm-up")
    before = process_stats(pid)
    counted = tripped(gateway, limit)
    hostile.closed.clear()

    request = {"model": "m", "input": prompt(behaviour)}
    if streaming:
        message = failure_message(stream(gateway, request, timeout=60))
    else:
        answer = httpx.post(responses_url(gateway), json=request, timeout=60)
        message = assert_openai_error(answer, 502)["message"]
    assert words in message and limit in message, message
    assert re.search(r"limit of (16|32) MiB", message), message

    closed = hostile.closed.wait_for_first(timeout=20)
    assert (closed.behaviour, closed.stream) == (behaviour, streaming)
    assert tripped(gateway, limit) == counted + 1

    honest_answer(gateway, f"after-{behaviour}")
    after = settled(pid, before)
    print(f"\n{behaviour} stream={streaming}: RSS {before.rss_mib:.1f} -> {after.rss_mib:.1f} MiB, "
          f"fds {before.fds} -> {after.fds}, upstream wrote {closed.bytes_written / 1024:.0f} KiB")
    assert after.rss_bytes <= before.rss_bytes + MEMORY_SLACK, (before, after)
    assert after.fds <= before.fds, (before, after)


@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "json"])
def test_an_encoding_the_gateway_never_asked_for_is_refused(
    gateway: GatewayProcess, hostile: HostileUpstream, streaming: bool
) -> None:
    """aiohttp decodes gzip, deflate and zstd (and asks for nothing else): a brotli answer is
    refused from its head, before anything streamed, and not retried."""
    pid = gateway_pid(gateway)
    honest_answer(gateway, "warm-up")
    before = process_stats(pid)
    requests = hostile.requests
    request = {"model": "m", "input": prompt("brotli"), "stream": streaming}
    error = assert_openai_error(httpx.post(responses_url(gateway), json=request, timeout=60), 502)
    assert "cannot read" in error["message"] and "br" in error["message"], error
    assert hostile.requests == requests + 1
    honest_answer(gateway, "after-brotli")
    after = settled(pid, before)
    assert after.fds <= before.fds, (before, after)


@pytest.mark.parametrize(
    ("behaviour", "limit"), [("endless-event", "upstream_max_event_bytes"), ("gzip-line", "upstream_max_line_bytes")]
)
def test_a_responses_upstream_is_bounded_the_same(
    hostile: HostileUpstream, start_gateway: StartGateway, tmp_path: Path, behaviour: str, limit: str
) -> None:
    """A ``kind = "responses"`` upstream's events go through the same reader: the restorer
    ends the stream with ``response.failed`` naming the limit."""
    config = tmp_path / "toolwire.toml"
    config.write_text(
        f'[[upstreams]]\nname = "responses"\nkind = "responses"\nbase_url = "http://127.0.0.1:{hostile.port}/v1"\n'
        '[[models]]\nname = "r"\nupstream = "responses"\n'
    )
    gateway = start_gateway(f"http://127.0.0.1:{hostile.port}/v1", "--config", str(config))
    hostile.closed.clear()
    message = failure_message(stream(gateway, {"model": "r", "input": prompt(behaviour)}, timeout=60))
    assert limit in message, message
    assert hostile.closed.wait_for_first(timeout=20).behaviour == behaviour
    assert tripped(gateway, limit) == 1
    honest_answer(gateway, "after-responses")


def test_a_valid_stream_that_never_ends_is_cut_at_the_stream_limit(
    hostile: HostileUpstream, start_gateway: StartGateway
) -> None:
    """Every event is small and valid, but the answer (which the translator keeps, to
    send it whole with the terminal event) grows for as long as the stream runs."""
    gateway = start_gateway(f"http://127.0.0.1:{hostile.port}/v1", "--upstream-max-stream-bytes", str(16 * MiB))
    pid = gateway_pid(gateway)
    honest_answer(gateway, "warm-up")
    before = process_stats(pid)
    hostile.closed.clear()
    message = failure_message(stream(gateway, {"model": "m", "input": prompt("endless-text")}, timeout=60))
    assert "stream is longer than the gateway's limit of 16 MiB (upstream_max_stream_bytes)" in message, message
    assert hostile.closed.wait_for_first(timeout=20).behaviour == "endless-text"
    assert tripped(gateway, "upstream_max_stream_bytes") == 1
    honest_answer(gateway, "after-endless-text")
    after = settled(pid, before)
    print(f"\nendless valid stream: RSS {before.rss_mib:.1f} -> {after.rss_mib:.1f} MiB, fds {before.fds} -> {after.fds}")
    assert after.rss_bytes <= before.rss_bytes + MEMORY_SLACK, (before, after)
    assert after.fds <= before.fds, (before, after)


def test_the_limits_are_the_flags(hostile: HostileUpstream, start_gateway: StartGateway) -> None:
    gateway = start_gateway(
        f"http://127.0.0.1:{hostile.port}/v1",
        "--upstream-max-line-bytes", str(MiB), "--upstream-max-event-bytes", str(2 * MiB),
        "--upstream-max-body-bytes", str(3 * MiB),
    )
    cases = [("endless-line", True, "1 MiB"), ("endless-event", True, "2 MiB"), ("endless-line", False, "3 MiB")]
    for behaviour, streaming, limit in cases:
        request = {"model": "m", "input": prompt(behaviour)}
        if streaming:
            message = failure_message(stream(gateway, request, timeout=60))
        else:
            message = assert_openai_error(httpx.post(responses_url(gateway), json=request, timeout=60), 502)["message"]
        assert f"limit of {limit}" in message, (behaviour, streaming, message)
