"""How a gateway process writes its log: ``LOG_FORMAT`` lines on stderr, a turn's lines at once.

Every request logs a line (``observe.LogObserver``), and stderr writes each line with a
system call of its own: about a quarter of what the log line cost under load (py-spy,
16 connections). ``LineHandler``
holds the lines logged in one turn of the event loop and writes them together at the end
of the turn (``loop.call_soon``), so no line waits longer than that turn. A line logged
outside a running event loop (start-up, shutdown, the supervising parent) is written at
once, and so is a warning or an error together with whatever is held before it; closing
the handler (``logging.shutdown`` at exit) writes what is left.

``LineFormatter`` formats the time as ``logging.Formatter`` does, reusing the date and
clock of the second before (one ``strftime`` a second, not one a line).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from typing import TextIO

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_CLOCK = "%Y-%m-%d %H:%M:%S"  # logging.Formatter's default_time_format


class LineFormatter(logging.Formatter):
    """``logging.Formatter`` with ``LOG_FORMAT``; the formatted second is kept."""

    def __init__(self) -> None:
        super().__init__(LOG_FORMAT)
        self._kept: tuple[int, str] | None = None  # the last record's second, and its date and clock

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        second, kept = int(record.created), self._kept
        if kept is None or kept[0] != second:
            kept = self._kept = (second, time.strftime(_CLOCK, self.converter(record.created)))
        return f"{kept[1]},{int(record.msecs):03d}"  # logging's default_msec_format, "%s,%03d"


class LineHandler(logging.StreamHandler[TextIO]):
    """Writes formatted lines to ``stream``, those of one event-loop turn together."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(sys.stderr if stream is None else stream)
        self._held: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record) + self.terminator
        except Exception:
            self.handleError(record)
            return
        if record.levelno < logging.WARNING:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                pass
            else:
                if not self._held:
                    loop.call_soon(self.flush)
                self._held.append(line)
                return
        self._held.append(line)
        self.flush()

    def flush(self) -> None:
        """Write what is held."""
        self.acquire()
        try:
            held, self._held = self._held, []
            if held:
                self.stream.write("".join(held))
            self.stream.flush()
        except Exception:
            pass  # stderr gone (closed, a broken pipe): a log line cannot be saved
        finally:
            self.release()


def configure_logging(level: str, stream: TextIO | None = None) -> None:
    """The process's root logger: ``LineHandler`` on ``stream`` (stderr) at ``level``.

    The format names no caller, thread or process, so records are made without looking
    them up (the switches of the logging HOWTO's "Optimization" section): every request
    writes a log line, and this takes about a fifth off its cost.
    """
    handler = LineHandler(stream)
    handler.setFormatter(LineFormatter())
    logging.basicConfig(level=level.upper(), handlers=[handler])
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
