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

The request's log line (``observe.LogObserver``) is written through ``line_handler_for``
when logging would give its record to one ``LineHandler`` alone and change nothing on the
way (no filter, no other handler, logging's own record factory): the handler then takes the
line's level, logger name and message (``LineHandler.emit_line``) and writes the very line
the record would have given, without making the record and passing it along (11 of
the 19 us the line cost a served request, bench/RESULTS.md 2026-12-06). Any other
configuration (a test's ``caplog``, an application's own handlers) goes through logging.
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
        return self._clock(record.created, record.msecs)

    def line(self, created: float, levelno: int, name: str, message: str) -> str:
        """What ``format`` gives a record of these made at ``created``, with no arguments,
        exception or stack: ``LOG_FORMAT`` filled in."""
        msecs = int((created - int(created)) * 1000) + 0.0  # as logging.LogRecord computes it
        asctime, levelname = self._clock(created, msecs), logging.getLevelName(levelno)
        return LOG_FORMAT % {"asctime": asctime, "levelname": levelname, "name": name, "message": message}

    def _clock(self, created: float, msecs: float) -> str:
        second, kept = int(created), self._kept
        if kept is None or kept[0] != second:
            kept = self._kept = (second, time.strftime(_CLOCK, self.converter(created)))
        return f"{kept[1]},{int(msecs):03d}"  # logging's default_msec_format, "%s,%03d"


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
        self._hold(line, record.levelno)

    def emit_line(self, levelno: int, name: str, message: str) -> None:
        """Write the line a record of ``name``'s logger at ``levelno`` with ``message`` (no
        arguments) would give, made now; for ``line_handler_for``'s handler only."""
        formatter = self.formatter
        assert isinstance(formatter, LineFormatter)
        line = formatter.line(time.time(), levelno, name, message) + self.terminator
        self.acquire()
        try:
            self._hold(line, levelno)
        finally:
            self.release()

    def _hold(self, line: str, levelno: int) -> None:
        """Hold ``line`` for the end of the event loop's turn, or write it at once (with
        what is held) when it is a warning or more, or no loop is running."""
        if levelno < logging.WARNING:
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


def line_handler_for(logger: logging.Logger, levelno: int) -> LineHandler | None:
    """The ``LineHandler`` that alone would write a record ``logger`` logs at ``levelno``,
    formatting it with a ``LineFormatter``, with nothing else on the way: the logger is
    enabled for the level and has no filter, the handlers found up its hierarchy are that
    one handler (no filter, its level met), and records are logging's own. None otherwise
    (log through logging then: it also says what happens when the line is not written)."""
    if not logger.isEnabledFor(levelno) or logger.filters or logging.getLogRecordFactory() is not logging.LogRecord:
        return None
    found: LineHandler | None = None
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            if (
                found is not None
                or type(handler) is not LineHandler
                or type(handler.formatter) is not LineFormatter
                or handler.filters
                or levelno < handler.level
            ):
                return None
            found = handler
        current = current.parent if current.propagate else None
    return found


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
