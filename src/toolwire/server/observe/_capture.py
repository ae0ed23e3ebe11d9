"""``CaptureObserver`` (``--capture DIR``): every exchange as one JSON line on disk.

Each line is a full record (``_record``: the client's request, the upstream request,
the upstream's stream, the events sent back), secrets redacted. Files are named
``exchanges-<UTC start time>-<pid>.jsonl``, so names sort by age and several worker
processes never share a file. A file is closed once the next record would take it past
``max_bytes`` (a single larger record gets a file of its own), and then only the newest
``keep`` files of the directory are kept. Files are created ``0600``: a capture holds
prompts and tool outputs.

Writes are synchronous, one ``write`` per exchange into the page cache, done on the event
loop after the response has been sent; redacting costs about 2 ms per 500 KB of record.
A capture that fails (disk full, directory removed) is logged and skipped; the request is
never affected.
"""

from __future__ import annotations

import datetime
import logging
import os
from pathlib import Path

from toolwire.config import DEFAULT_CAPTURE_KEEP, DEFAULT_CAPTURE_MAX_BYTES

from .._exchange import Exchange
from ._record import RecordEncoder
from ._redact import Redactor

log = logging.getLogger("toolwire.capture")

_PATTERN = "exchanges-*.jsonl"


class CaptureObserver:
    """Appends each finished exchange's redacted record to a size-rotated JSON lines file."""

    wants_traffic = True

    def __init__(
        self,
        directory: Path | str,
        *,
        max_bytes: int = DEFAULT_CAPTURE_MAX_BYTES,
        keep: int = DEFAULT_CAPTURE_KEEP,
        encoder: RecordEncoder | None = None,
    ) -> None:
        if max_bytes <= 0 or keep < 1:
            raise ValueError("max_bytes must be positive and keep at least 1")
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.keep = keep
        self.encoder = encoder if encoder is not None else RecordEncoder(Redactor())
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._fd: int | None = None
        self._path: Path | None = None
        self._size = 0

    @property
    def path(self) -> Path | None:
        """The file being written, if any."""
        return self._path

    def started(self, exchange: Exchange) -> None:
        return None

    def finished(self, exchange: Exchange) -> None:
        line = self.encoder.redacted(exchange) + b"\n"
        try:
            self._write(line)
        except OSError as exc:
            self.close()
            log.warning("could not capture %s in %s: %s", exchange.request_id, self.directory, exc)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._path, self._size = None, None, 0

    def _write(self, line: bytes) -> None:
        if self._fd is not None and (
            (self._size and self._size + len(line) > self.max_bytes)
            or os.fstat(self._fd).st_nlink == 0  # pruned by another worker: start a new file
        ):
            self.close()
        if self._fd is None:
            self._open()
        assert self._fd is not None
        view = memoryview(line)
        while view:
            view = view[os.write(self._fd, view):]
        self._size += len(line)

    def _open(self) -> None:
        started = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S%fZ")
        path = self.directory / f"exchanges-{started}-{os.getpid()}.jsonl"
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        self._path, self._size = path, os.fstat(self._fd).st_size
        self._prune()

    def _prune(self) -> None:
        """Delete the oldest capture files beyond ``keep`` (the one being written counts)."""
        files = sorted(self.directory.glob(_PATTERN))
        for old in files[: max(0, len(files) - self.keep)]:
            if old != self._path:
                old.unlink(missing_ok=True)
