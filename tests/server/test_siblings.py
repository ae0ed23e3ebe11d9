"""The workers of one gateway asking each other (``_siblings``): real Unix sockets in a
temporary directory, several workers in one event loop; and the fake beside them,
``LocalSiblings``, held to the same answers. A worker that is gone, stuck, talks too much
or is asked nonsense costs the asker a bounded wait and nothing else."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from toolwire.server._siblings import (
    WORKER_INDEX_ENV,
    WORKERS_DIR_ENV,
    WORKERS_ENV,
    LocalSiblings,
    Siblings,
    SocketSiblings,
    WorkerPlace,
    _question_line,
)


@contextlib.asynccontextmanager
async def socket_workers(directory: Path, count: int, *, timeout: float = 3.0) -> AsyncIterator[list[SocketSiblings]]:
    async with contextlib.AsyncExitStack() as stack:
        workers = [SocketSiblings(WorkerPlace(directory, index, count), timeout=timeout) for index in range(count)]
        for worker in workers:
            await stack.enter_async_context(worker)
        yield workers


def answer_with_name(workers: list[SocketSiblings] | list[LocalSiblings]) -> None:
    for worker in workers:
        worker.answer("name", lambda argument, worker=worker: f"{worker.name}:{argument}".encode())  # type: ignore[misc]


async def ask_everyone(workers: list[SocketSiblings] | list[LocalSiblings], argument: str) -> list[list[tuple[str, bytes]]]:
    return [await worker.ask("name", argument, max_bytes=100) for worker in workers]


EVERYONE = [
    [("1", b"1:x"), ("2", b"2:x")],
    [("0", b"0:x"), ("2", b"2:x")],
    [("0", b"0:x"), ("1", b"1:x")],
]


async def test_each_worker_hears_every_other(tmp_path: Path) -> None:
    async with socket_workers(tmp_path, 3) as workers:
        answer_with_name(workers)
        assert await ask_everyone(workers, "x") == EVERYONE
        assert await workers[0].ask("name", max_bytes=100) == [("1", b"1:"), ("2", b"2:")]  # no argument
        assert [w.name for w in workers] == ["0", "1", "2"] and workers[1].names == ("0", "1", "2")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["0.sock", "1.sock", "2.sock"]
    assert list(tmp_path.iterdir()) == []  # each removes its socket when it stops


async def test_the_fake_answers_as_the_sockets_do() -> None:
    workers = LocalSiblings.group(3)
    answer_with_name(workers)
    assert await ask_everyone(workers, "x") == EVERYONE
    assert await workers[0].ask("name", max_bytes=100) == [("1", b"1:"), ("2", b"2:")]  # no argument
    assert workers[1].names == ("0", "1", "2")
    workers[2].absent = True
    assert await workers[0].ask("name", "x", max_bytes=100) == [("1", b"1:x")]
    assert await workers[0].ask("name", "x", max_bytes=2) == []  # too long an answer
    assert await workers[0].ask("name", "x", max_bytes=3) == [("1", b"1:x")]  # just long enough
    assert workers[1].asked == [("name", "x")] and workers[0].asked == [("name", "x"), ("name", ""), *[("name", "x")] * 3]
    assert await workers[0].ask("other", max_bytes=100) == []
    with pytest.raises(ValueError):
        await workers[0].ask("name", "a\nb", max_bytes=100)


async def test_a_worker_not_listening_is_left_out_at_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "2.sock").touch()  # left by a worker that died: nobody listens there
    place = WorkerPlace(tmp_path, 0, 4)  # and 1 and 3 never started
    async with SocketSiblings(place) as alone:
        alone.answer("name", lambda argument: b"me")
        started = asyncio.get_running_loop().time()
        assert await alone.ask("name", max_bytes=100) == []
        assert asyncio.get_running_loop().time() - started < 2
    assert sorted(r.getMessage() for r in caplog.records) == [
        "worker 1 could not be asked (No such file or directory); left out",
        "worker 2 could not be asked (Connection refused); left out",
        "worker 3 could not be asked (No such file or directory); left out",
    ]


async def test_a_predecessors_socket_is_taken_over(tmp_path: Path) -> None:
    async with socket_workers(tmp_path, 2) as workers:
        answer_with_name(workers)
    async with socket_workers(tmp_path, 2) as successors:  # the sockets were removed; leave stale ones this time
        pass
    (tmp_path / "1.sock").touch()
    async with socket_workers(tmp_path, 2) as workers:
        answer_with_name(workers)
        assert await workers[0].ask("name", "y", max_bytes=100) == [("1", b"1:y")]
    assert successors


async def test_a_worker_that_does_not_answer_in_time_is_left_out(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    released = asyncio.Event()

    async def stuck(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        await released.wait()
        writer.close()

    server = await asyncio.start_unix_server(stuck, tmp_path / "1.sock")
    try:
        async with SocketSiblings(WorkerPlace(tmp_path, 0, 2), timeout=0.3) as asking:
            started = asyncio.get_running_loop().time()
            assert await asking.ask("name", max_bytes=100) == []
            assert 0.3 <= asyncio.get_running_loop().time() - started < 2
    finally:
        released.set()
        server.close()
        await server.wait_closed()
    assert [r.getMessage() for r in caplog.records] == ["worker 1 did not answer within 0.3 s; left out"]


async def test_an_answer_longer_than_asked_for_is_left_out(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with socket_workers(tmp_path, 2) as workers:
        workers[1].answer("big", lambda argument: b"x" * 600_000)  # (more than one read)
        assert await workers[0].ask("big", max_bytes=599_999) == []
        assert await workers[0].ask("big", max_bytes=600_000) == [("1", b"x" * 600_000)]
    assert [r.getMessage() for r in caplog.records] == ["worker 1 answered with more than 599999 bytes; left out"]


async def raw(path: Path, data: bytes, *, close: bool = False) -> bytes:
    """What a worker's socket answers to ``data`` (then the end of input, if ``close``)."""
    reader, writer = await asyncio.open_unix_connection(path)
    writer.write(data)
    if close:
        writer.write_eof()
    try:
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


async def test_nonsense_gets_no_answer_and_the_worker_answers_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with socket_workers(tmp_path, 2) as workers:
        answer_with_name(workers)

        def broken(argument: str) -> bytes:
            raise RuntimeError("a bug")

        workers[1].answer("broken", broken)
        workers[1].answer("nothing", lambda argument: None)
        socket = tmp_path / "1.sock"
        assert await raw(socket, b"name x" * 400) == b""  # no line end within 1 KiB
        assert await raw(socket, b"name " + b"x" * 2000 + b"\n") == b""  # a whole line, past 1 KiB
        assert await raw(socket, b"name x", close=True) == b""  # the line never ends
        assert await raw(socket, b"\xff\xfe\n") == b""  # not UTF-8
        assert await raw(socket, b"unknown x\n") == b""
        assert await raw(socket, b"nothing x\n") == b""
        assert await raw(socket, b"broken x\n") == b""
        assert await raw(socket, b"name with blanks\n") == b"1:with blanks"
        assert await workers[0].ask("broken", max_bytes=100) == []
        assert await workers[0].ask("name", "z", max_bytes=100) == [("1", b"1:z")]
    failures = [r for r in caplog.records if r.getMessage() == "answering another worker failed"]
    assert len(failures) == 2 and all(r.exc_info and r.exc_info[0] is RuntimeError for r in failures)  # broken, twice


async def test_a_question_that_arrives_too_slowly_is_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("toolwire.server._siblings.QUESTION_TIMEOUT", 0.2)
    async with socket_workers(tmp_path, 2) as workers:
        answer_with_name(workers)
        reader, writer = await asyncio.open_unix_connection(tmp_path / "1.sock")
        writer.write(b"name")
        try:
            assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, unanswered
        finally:
            writer.close()


async def test_a_socket_path_too_long_leaves_the_worker_serving(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = tmp_path / ("d" * 120)
    directory.mkdir()
    async with SocketSiblings(WorkerPlace(directory, 0, 2)) as worker:
        assert await worker.ask("name", max_bytes=10) == []
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
        f"worker 0 cannot listen for the other workers at {directory}/0.sock: AF_UNIX path too long"
    ]


@pytest.mark.parametrize(
    ("question", "argument"), [("", "x"), ("two words", ""), ("name\n", ""), ("name", "a\rb"), ("name", "a\nb")]
)
def test_what_cannot_be_asked(question: str, argument: str) -> None:
    with pytest.raises(ValueError) as refused:
        _question_line(question, argument)
    assert str(refused.value) == f"not a question: {question!r} {argument!r}"


def test_a_question_is_one_line_of_at_most_1_kib() -> None:
    assert _question_line("exchange", "resp_1 X") == b"exchange resp_1 X\n"  # (the argument may hold blanks)
    assert _question_line("metrics", "") == b"metrics \n"
    assert len(_question_line("name", "x" * 1018)) == 1024
    with pytest.raises(ValueError) as refused:
        _question_line("name", "x" * 1019)
    assert str(refused.value) == "a question longer than 1024 bytes"


async def test_a_socket_already_gone_when_the_worker_stops_is_no_error(tmp_path: Path) -> None:
    async with SocketSiblings(WorkerPlace(tmp_path, 0, 1)):
        (tmp_path / "0.sock").unlink()
    assert list(tmp_path.iterdir()) == []


def test_a_workers_place_comes_from_its_environment(tmp_path: Path) -> None:
    assert WorkerPlace.from_environment({}) is None
    assert WorkerPlace.from_environment({WORKERS_DIR_ENV: str(tmp_path), WORKERS_ENV: "2"}) is None
    place = WorkerPlace.from_environment({WORKERS_DIR_ENV: str(tmp_path), WORKER_INDEX_ENV: "1", WORKERS_ENV: "2"})
    assert place == WorkerPlace(tmp_path, 1, 2)
    assert WorkerPlace.from_environment(place.environment()) == place
    assert place.socket_of(0) == tmp_path / "0.sock"
    first = {WORKERS_DIR_ENV: str(tmp_path), WORKER_INDEX_ENV: "0", WORKERS_ENV: "1"}
    assert WorkerPlace.from_environment(first) == WorkerPlace(tmp_path, 0, 1)
    for index in ("2", "-1"):
        with pytest.raises(ValueError, match="no such worker"):
            WorkerPlace.from_environment({WORKERS_DIR_ENV: str(tmp_path), WORKER_INDEX_ENV: index, WORKERS_ENV: "2"})


def test_both_are_siblings() -> None:
    def takes(siblings: Siblings) -> Callable[[], str]:
        return lambda: siblings.name

    assert takes(LocalSiblings.group(1)[0])() == "0"
    assert takes(SocketSiblings(WorkerPlace(Path("/nowhere"), 1, 2)))() == "1"


@pytest.fixture(autouse=True)
def _warnings_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="toolwire.server")
