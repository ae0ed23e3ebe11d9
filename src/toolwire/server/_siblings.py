"""The other workers of one gateway (``--workers N``), asked what they observe.

``run_workers`` makes a private directory (mode 0700: only the gateway's user reaches
into it) and starts worker ``i`` of ``N`` with the directory, ``i`` and ``N`` in its
environment (``WorkerPlace``). Each worker listens there on a Unix socket of its own,
``<i>.sock``, while its app runs (``SocketSiblings``, entered by the app's lifespan),
and answers one question per connection: a line ``<name> <argument>``, answered with
the bytes its answerer for that name gives, then the end of the connection (no bytes:
nothing to say, as for an exchange it does not keep). A worker asked over HTTP for what
every worker observes (``/metrics``, the inspector) asks the others at once
(``Siblings.ask``) and puts their answers beside its own.

Every read is bounded: a question to 1 KiB and a few seconds, an answer to the size the
asker gives and ``timeout`` seconds for all the workers together. A worker that does
not answer in time (starting again after a crash, stopping, or stuck) is left out of
the answer, and the answer says so (``toolwire_worker_answered``).

``LocalSiblings`` is the fake beside the real thing: workers in one process, asked
directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Protocol

log = logging.getLogger("toolwire.server")

__all__ = [
    "WORKERS_DIR_ENV",
    "WORKERS_ENV",
    "WORKER_INDEX_ENV",
    "Answerer",
    "LocalSiblings",
    "Siblings",
    "SocketSiblings",
    "WorkerPlace",
]

WORKERS_DIR_ENV = "TOOLWIRE_WORKERS_DIR"
WORKERS_ENV = "TOOLWIRE_WORKERS"
WORKER_INDEX_ENV = "TOOLWIRE_WORKER_INDEX"
MAX_QUESTION_BYTES = 1024
QUESTION_TIMEOUT = 5.0
ASK_TIMEOUT = 3.0
_READ_BYTES = 256 * 1024

Answerer = Callable[[str], bytes | None]
"""What a worker says to a question of one name, given its argument (None: nothing)."""


@dataclass(frozen=True, slots=True)
class WorkerPlace:
    """Where a worker stands among its siblings: their directory, its index, how many."""

    directory: Path
    index: int
    workers: int

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> WorkerPlace | None:
        """The place ``run_workers`` gave this process, or None for a gateway of one process."""
        environ = os.environ if environ is None else environ
        directory, index, workers = (environ.get(name) for name in (WORKERS_DIR_ENV, WORKER_INDEX_ENV, WORKERS_ENV))
        if not directory or not index or not workers:
            return None
        place = cls(Path(directory), int(index), int(workers))
        if not 0 <= place.index < place.workers:
            raise ValueError(f"worker {place.index} of {place.workers}: no such worker")
        return place

    def environment(self) -> dict[str, str]:
        return {WORKERS_DIR_ENV: str(self.directory), WORKER_INDEX_ENV: str(self.index), WORKERS_ENV: str(self.workers)}

    def socket_of(self, index: int) -> Path:
        return self.directory / f"{index}.sock"


class Siblings(Protocol):
    """This worker among the others: its name, all the workers' names, its answerers,
    and asking the others."""

    @property
    def name(self) -> str: ...

    @property
    def names(self) -> tuple[str, ...]: ...

    def answer(self, question: str, answerer: Answerer) -> None:
        """Answer questions named ``question`` with ``answerer``."""

    async def ask(self, question: str, argument: str = "", *, max_bytes: int) -> list[tuple[str, bytes]]:
        """(name, answer) of each other worker that answered ``question`` within the time
        and in at most ``max_bytes``; an empty answer is left out."""


class SocketSiblings:
    """The workers of one gateway over Unix sockets in their directory (module docstring);
    ``async with`` listens for the others' questions."""

    def __init__(self, place: WorkerPlace, *, timeout: float = ASK_TIMEOUT) -> None:
        self._place = place
        self._timeout = timeout
        self._answerers: dict[str, Answerer] = {}
        self._server: asyncio.AbstractServer | None = None

    @property
    def name(self) -> str:
        return str(self._place.index)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(str(index) for index in range(self._place.workers))

    def answer(self, question: str, answerer: Answerer) -> None:
        self._answerers[question] = answerer

    async def __aenter__(self) -> SocketSiblings:
        path = self._place.socket_of(self._place.index)
        try:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # left by this worker's predecessor, which died
            self._server = await asyncio.start_unix_server(self._serve, path, limit=MAX_QUESTION_BYTES)
        except OSError as exc:  # the gateway serves on; only the others cannot see this worker
            log.error("worker %s cannot listen for the other workers at %s: %s", self.name, path, exc)
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(FileNotFoundError):
                self._place.socket_of(self._place.index).unlink()

    async def ask(self, question: str, argument: str = "", *, max_bytes: int) -> list[tuple[str, bytes]]:
        line = _question_line(question, argument)
        others = [index for index in range(self._place.workers) if index != self._place.index]
        answers = await asyncio.gather(*(self._ask_one(index, line, max_bytes) for index in others))
        return [(str(index), answer) for index, answer in zip(others, answers, strict=True) if answer]

    async def _ask_one(self, index: int, line: bytes, max_bytes: int) -> bytes:
        writer: asyncio.StreamWriter | None = None
        try:
            async with asyncio.timeout(self._timeout):
                reader, writer = await asyncio.open_unix_connection(self._place.socket_of(index))
                writer.write(line)
                await writer.drain()
                chunks, size = [], 0
                while more := await reader.read(_READ_BYTES):
                    size += len(more)
                    if size > max_bytes:
                        log.warning("worker %d answered with more than %d bytes; left out", index, max_bytes)
                        return b""
                    chunks.append(more)
                return b"".join(chunks)
        except TimeoutError:
            log.warning("worker %d did not answer within %.1f s; left out", index, self._timeout)
        except OSError as exc:  # not listening: starting again, or stopped
            log.warning("worker %d could not be asked (%s); left out", index, exc.strerror or exc)
        finally:
            if writer is not None:
                writer.close()
        return b""

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(QUESTION_TIMEOUT):
                line = await reader.readuntil(b"\n")
            question, _, argument = line[:-1].decode().partition(" ")
            answerer = self._answerers.get(question)
            answer = answerer(argument) if answerer is not None else None
            if answer:
                writer.write(answer)
                await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, UnicodeDecodeError):
            pass  # no whole question in time: no answer
        except OSError:
            pass  # the asker left
        except Exception:
            log.exception("answering another worker failed")
        finally:
            writer.close()


class LocalSiblings:
    """Workers in one process, asked directly: the fake beside ``SocketSiblings``.
    ``LocalSiblings.group(n)`` gives n of them, each knowing the others; one made
    ``absent`` answers nothing, as one that is starting again; ``asked`` lists the
    questions a worker asked (name, argument)."""

    def __init__(self, name: str, group: list[LocalSiblings]) -> None:
        self._name = name
        self._group = group
        self._answerers: dict[str, Answerer] = {}
        self.absent = False
        self.asked: list[tuple[str, str]] = []

    @classmethod
    def group(cls, count: int) -> list[LocalSiblings]:
        members: list[LocalSiblings] = []
        members.extend(cls(str(index), members) for index in range(count))
        return members

    @property
    def name(self) -> str:
        return self._name

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(member.name for member in self._group)

    def answer(self, question: str, answerer: Answerer) -> None:
        self._answerers[question] = answerer

    async def ask(self, question: str, argument: str = "", *, max_bytes: int) -> list[tuple[str, bytes]]:
        _question_line(question, argument)
        self.asked.append((question, argument))
        answers = []
        for member in self._group:
            answerer = member._answerers.get(question)
            if member is self or member.absent or answerer is None:
                continue
            answer = answerer(argument)
            if answer and len(answer) <= max_bytes:
                answers.append((member.name, answer))
        return answers


def _question_line(question: str, argument: str) -> bytes:
    """The line that asks ``question``: its name holds no blank, neither holds a line end."""
    if not question or " " in question or any(end in question + argument for end in "\r\n"):
        raise ValueError(f"not a question: {question!r} {argument!r}")
    line = f"{question} {argument}\n".encode()
    if len(line) > MAX_QUESTION_BYTES:
        raise ValueError(f"a question longer than {MAX_QUESTION_BYTES} bytes")
    return line
