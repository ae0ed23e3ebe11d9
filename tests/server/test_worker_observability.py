"""``toolwire serve --workers N``: one scrape of ``/metrics`` and one look at the inspector
see every worker, whichever worker the connection reaches.

Real processes on loopback: the gateway's supervisor and its workers, a scripted upstream,
a client opening a new connection for each request (so that the kernel spreads them over
the workers) and for each scrape.
"""

from __future__ import annotations

import http.client
import os
import signal
import stat
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.reliability.helpers import wait_until
from tests.server.test_workers import BODY, socket_inodes, sockets_on, workers_of
from tests.server.test_workers import (
    upstream as upstream,  # (the fixture: a scripted upstream saying "hello")
)
from tests.support.chat_upstream import ChatUpstream
from tests.support.gateway import GatewayProcess
from toolwire.config import DEFAULT_INSPECTOR_MAX_EXCHANGES

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_REUSEPORT workers are Linux only")

REQUESTS = 24


@pytest.fixture
def gateway(upstream: ChatUpstream, tmp_path: Path) -> Iterator[GatewayProcess]:
    with GatewayProcess(upstream.base_url, tmp_path / "gateway.log", "--workers", "2", "--inspector") as started:
        assert wait_until(lambda: len(worker_pids(started)) == 2 and all_listening(started), timeout=30)
        yield started


def worker_pids(gateway: GatewayProcess) -> list[int]:
    assert gateway.process is not None
    return workers_of(gateway.process.pid)


def all_listening(gateway: GatewayProcess) -> bool:
    """Every worker listens for the others, on its own socket in the workers' directory."""
    paths = [listening_path(pid) for pid in worker_pids(gateway)]
    return all(paths) and sorted(str(path.name) for path in paths if path) == ["0.sock", "1.sock"]


def listening_path(pid: int) -> Path | None:
    """The path of the Unix socket ``pid`` listens on (read from ``/proc``), if any."""
    owned = socket_inodes(pid)
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) == 8 and fields[6] in owned and fields[5] == "01" and "toolwire-workers-" in fields[7]:
            return Path(fields[7])
    return None


def workers_directory(gateway: GatewayProcess) -> Path:
    path = listening_path(worker_pids(gateway)[0])
    assert path is not None
    return path.parent


def get(gateway: GatewayProcess, path: str, headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    """One request on a new connection: its status, content type and body."""
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=20)
    try:
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.getheader("content-type", ""), response.read()
    finally:
        connection.close()


def respond(gateway: GatewayProcess) -> str:
    """One streamed request on a new connection; the response's id."""
    connection = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=20)
    try:
        connection.request("POST", "/v1/responses", BODY, {"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200
        body = response.read()
    finally:
        connection.close()
    completed = next(line for line in body.split(b"\n") if line.startswith(b"data: ") and b"response.completed" in line)
    return str(orjson.loads(completed[6:])["response"]["id"])


def requests_by_worker(text: str) -> dict[str, float]:
    """``toolwire_requests_total`` summed per worker label."""
    counted: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "toolwire_requests_total":
                worker = sample.labels["worker"]
                counted[worker] = counted.get(worker, 0.0) + sample.value
    return counted


def answered(text: str) -> dict[str, float]:
    for family in text_string_to_metric_families(text):
        if family.name == "toolwire_worker_answered":
            return {sample.labels["worker"]: sample.value for sample in family.samples}
    raise AssertionError("no toolwire_worker_answered in the scrape")


def test_every_scrape_counts_every_workers_requests(gateway: GatewayProcess) -> None:
    for _ in range(REQUESTS):
        respond(gateway)
    for _ in range(8):  # new connections: the scrapes reach both workers
        status, content_type, body = get(gateway, "/metrics")
        assert status == 200 and content_type.startswith("text/plain")
        text = body.decode()
        counted = requests_by_worker(text)
        assert sum(counted.values()) == REQUESTS, counted
        assert set(counted) == {"0", "1"}, counted  # (24 connections, each worker has some)
        assert answered(text) == {"0": 1.0, "1": 1.0}
        # Each family once, with its help and type, every series of it labelled by worker.
        families = [line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")]
        assert len(families) == len(set(families))
        assert all('worker="' in line for line in text.splitlines() if line and not line.startswith("#")), text
        assert {sample.labels["worker"] for family in text_string_to_metric_families(text)
                if family.name == "process_resident_memory_bytes" for sample in family.samples} == {"0", "1"}  # fmt: skip
    status, content_type, body = get(gateway, "/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"})
    assert status == 200 and content_type.startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n") and b'toolwire_worker_answered{worker="1"} 1.0' in body


def test_the_inspector_lists_and_opens_every_workers_exchanges(gateway: GatewayProcess) -> None:
    ids = [respond(gateway) for _ in range(REQUESTS)]
    for _ in range(4):
        status, _, body = get(gateway, "/ui/api/exchanges")
        assert status == 200
        listing = orjson.loads(body)
        assert [summary["request_id"] for summary in listing["data"]] == ids[::-1]  # newest first, all of them
        assert listing["kept"]["exchanges"] == REQUESTS
        assert listing["kept"]["max_exchanges"] == 2 * DEFAULT_INSPECTOR_MAX_EXCHANGES  # both rings
        status, _, body = get(gateway, "/ui/api/exchanges?limit=5")
        assert [summary["request_id"] for summary in orjson.loads(body)["data"]] == ids[::-1][:5]
    for request_id in ids:  # whichever worker kept it
        status, _, body = get(gateway, f"/ui/api/exchanges/{request_id}")
        assert status == 200, body
        record = orjson.loads(body)
        assert record["request_id"] == request_id and record["events"]
    status, _, body = get(gateway, "/ui/api/exchanges/resp_nowhere")
    assert status == 404 and b"resp_nowhere" in body


def test_a_worker_that_is_gone_is_left_out_and_its_successor_counts_again(gateway: GatewayProcess) -> None:
    directory = workers_directory(gateway)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700  # the gateway's user's only
    for _ in range(REQUESTS):
        respond(gateway)
    assert wait_until(lambda: "workers past start-up" in gateway.log(), timeout=30), gateway.log()
    before = requests_by_worker(get(gateway, "/metrics")[2].decode())
    victim = worker_pids(gateway)[0]
    gone = str(listening_path(victim)).rsplit("/", 1)[1].removesuffix(".sock")
    survivor = "1" if gone == "0" else "0"
    (listening,) = socket_inodes(victim) & sockets_on(gateway.port, "0A")
    os.kill(victim, signal.SIGKILL)
    # Its listening socket closes when its last thread is gone (after the process shows as
    # a zombie): a connection queued to it before that would be reset.
    assert wait_until(lambda: listening not in sockets_on(gateway.port, "0A"), timeout=10)
    started = time.monotonic()
    status, _, body = get(gateway, "/metrics")  # (reaches the survivor: the victim's socket is closed)
    assert status == 200 and time.monotonic() - started < 10
    text = body.decode()
    assert requests_by_worker(text) == {survivor: before[survivor]}  # (a successor already up has counted none)
    assert answered(text)[survivor] == 1.0
    assert wait_until(lambda: len(worker_pids(gateway)) == 2 and victim not in worker_pids(gateway), timeout=30)
    assert wait_until(lambda: answered(get(gateway, "/metrics")[2].decode()) == {"0": 1.0, "1": 1.0}, timeout=30)
    respond(gateway)
    after = requests_by_worker(get(gateway, "/metrics")[2].decode())
    assert after.get(gone, 0.0) + after[survivor] == before[survivor] + 1, (before, after)
    assert "could not be asked" in gateway.log() or answered(text)[gone] == 1.0


def test_the_workers_directory_is_removed_with_the_gateway(upstream: ChatUpstream, tmp_path: Path) -> None:
    gateway = GatewayProcess(upstream.base_url, tmp_path / "gateway.log", "--workers", "2").start()
    assert wait_until(lambda: len(worker_pids(gateway)) == 2 and all_listening(gateway), timeout=30)
    directory = workers_directory(gateway)
    assert directory.is_dir()
    assert gateway.process is not None
    gateway.process.terminate()
    assert gateway.process.wait(timeout=30) == 0
    assert not directory.exists()
