"""A gateway process's log lines (``_log_lines``): those of one event-loop turn written
together at its end, warnings and lines logged outside the loop at once, nothing held at
exit, and the time printed as ``logging.Formatter`` prints it."""

from __future__ import annotations

import asyncio
import io
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from unittest import mock

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.observed import exchange
from toolwire.server._log_lines import (
    LOG_FORMAT,
    LineFormatter,
    LineHandler,
    configure_logging,
    line_handler_for,
)
from toolwire.server.observe._log import LogObserver
from toolwire.server.observe._record import summarize


class Stderr(io.StringIO):
    """A text stream that keeps each write apart."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


@pytest.fixture
def stderr() -> Stderr:
    return Stderr()


@pytest.fixture
def logger(stderr: Stderr) -> logging.Logger:
    handler = LineHandler(stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger = logging.Logger("toolwire.test", logging.DEBUG)
    logger.addHandler(handler)
    return logger


async def test_the_lines_of_one_turn_are_written_together_at_its_end(stderr: Stderr, logger: logging.Logger) -> None:
    logger.info("one")
    logger.info("two")
    assert stderr.writes == []
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    logger.info("three")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert stderr.writes == ["INFO one\nINFO two\n", "INFO three\n"]


async def test_a_warning_is_written_at_once_after_what_is_held(stderr: Stderr, logger: logging.Logger) -> None:
    logger.info("before")
    logger.warning("something is wrong")
    assert stderr.writes == ["INFO before\nWARNING something is wrong\n"]
    logger.error("worse")
    assert stderr.writes[1:] == ["ERROR worse\n"]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert len(stderr.writes) == 2  # nothing was left held for the end of the turn


def test_outside_an_event_loop_a_line_is_written_at_once(stderr: Stderr, logger: logging.Logger) -> None:
    logger.info("starting")
    logger.debug("details")
    assert stderr.writes == ["INFO starting\n", "DEBUG details\n"]


async def test_closing_writes_what_is_held(stderr: Stderr, logger: logging.Logger) -> None:
    logger.info("last words")
    (handler,) = logger.handlers
    handler.close()  # as logging.shutdown does at exit (flush, then close)
    handler.flush()
    assert stderr.getvalue() == "INFO last words\n"


def test_a_line_that_cannot_be_formatted_is_reported_and_the_rest_go_on(
    stderr: Stderr, logger: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    reported: list[logging.LogRecord] = []
    (handler,) = logger.handlers
    monkeypatch.setattr(handler, "handleError", reported.append)
    logger.info("%d apples", "not a number")
    logger.info("fine")
    assert [record.msg for record in reported] == ["%d apples"]
    assert stderr.writes == ["INFO fine\n"]


def test_a_stream_that_is_gone_loses_the_line_quietly(logger: logging.Logger) -> None:
    (handler,) = logger.handlers
    assert isinstance(handler, LineHandler)
    broken = Stderr()
    broken.close()
    handler.setStream(broken)
    logger.warning("nobody hears this")  # no exception, nothing printed about it
    handler.setStream(Stderr())
    logger.warning("but this is written")
    assert handler.stream.getvalue() == "WARNING but this is written\n"


@pytest.mark.parametrize("created", [1_700_000_000.0, 1_700_000_000.999, 1_700_000_001.5, 1_699_999_999.25, 1_700_003_600.04])
def test_the_time_is_printed_as_logging_prints_it(created: float) -> None:
    formatter, standard = LineFormatter(), logging.Formatter(LOG_FORMAT)
    for moment in (created, created + 0.001, created):  # the kept second, then another, then back
        record = logging.LogRecord("toolwire.exchange", logging.INFO, __file__, 1, "%s", ("hi",), None)
        record.created, record.msecs = moment, int((moment - int(moment)) * 1000) + 0.0
        assert formatter.format(record) == standard.format(record)
        assert formatter.formatTime(record, "%H") == standard.formatTime(record, "%H")


@given(created=st.floats(min_value=0.0, max_value=4e9), levelno=st.sampled_from([logging.INFO, logging.WARNING, 25]))
def test_a_line_is_what_logging_formats_for_a_record_made_at_that_moment(created: float, levelno: int) -> None:
    """``LineFormatter.line`` (the line written without a record) against a record that
    logging itself makes at the same moment: the milliseconds rounded as logging rounds
    them (e.g. a moment's fraction of .5006 second is ",500"), the level's name."""
    with mock.patch.object(time, "time", return_value=created):
        record = logging.LogRecord("toolwire.exchange", levelno, __file__, 1, "a line", None, None)
    assert LineFormatter().line(created, levelno, "toolwire.exchange", "a line") == logging.Formatter(LOG_FORMAT).format(record)


def test_a_gateway_process_writes_its_lines_through_the_handler() -> None:
    """``configure_logging`` in a process of its own: lines logged in the event loop come
    out, in order, with nothing lost at exit."""
    script = (
        "import asyncio, logging, sys\n"
        "from toolwire.server._log_lines import configure_logging\n"
        "configure_logging('info')\n"
        "async def main():\n"
        "    for n in range(3):\n"
        "        logging.getLogger('toolwire.exchange').info('line %d', n)\n"
        "asyncio.run(main())\n"
        "logging.getLogger('toolwire.server').info('after the loop')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    lines = done.stderr.splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        "INFO toolwire.exchange: line 0",
        "INFO toolwire.exchange: line 1",
        "INFO toolwire.exchange: line 2",
        "INFO toolwire.server: after the loop",
    ]
    assert all(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S") for line in lines)


async def test_a_buffered_stream_is_flushed_with_each_write() -> None:
    """A stream that holds what it is given (a file, a pipe) is flushed each time: the
    lines reach the file at the end of their turn, not when its buffer fills."""
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="utf-8", line_buffering=False)
    handler = LineHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.Logger("toolwire.buffered", logging.INFO)
    logger.addHandler(handler)
    logger.info("in the loop")
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert raw.getvalue() == b"in the loop\n"
    logger.warning("at once")
    assert raw.getvalue() == b"in the loop\nat once\n"


@pytest.fixture
def fresh_root_logger() -> Iterator[logging.Logger]:
    """The root logger, its handlers to be dropped by the test (pytest adds its own as the
    test begins); logging's switches and the root logger put back afterwards."""
    root = logging.getLogger()
    saved = (root.handlers[:], root.level, logging._srcfile, logging.logThreads, logging.logProcesses,
             logging.logMultiprocessing)
    try:
        yield root
    finally:
        for handler in root.handlers:
            if isinstance(handler, LineHandler):
                handler.close()
        (root.handlers, level, logging._srcfile, logging.logThreads, logging.logProcesses,
         logging.logMultiprocessing) = saved
        root.setLevel(level)


def test_configure_logging_gives_the_root_logger_its_handler_and_records_look_up_nothing_unprinted(
    fresh_root_logger: logging.Logger,
) -> None:
    stream = Stderr()
    pytests = fresh_root_logger.handlers[:]
    fresh_root_logger.handlers = []  # as in a new process
    configure_logging("warning", stream)
    [handler] = fresh_root_logger.handlers
    fresh_root_logger.handlers.extend(pytests)
    assert isinstance(handler, LineHandler) and handler.stream is stream
    assert isinstance(handler.formatter, LineFormatter) and handler.formatter._fmt == LOG_FORMAT
    assert fresh_root_logger.level == logging.WARNING
    assert logging._srcfile is None
    assert (logging.logThreads, logging.logProcesses, logging.logMultiprocessing) == (False, False, False)
    record = fresh_root_logger.makeRecord("toolwire.server", logging.WARNING, "x.py", 1, "careful", (), None)
    assert (record.thread, record.process, record.processName) == (None, None, None)
    logging.getLogger("toolwire.server").warning("careful")
    logging.getLogger("toolwire.server").info("not at warning")
    (line,) = stream.getvalue().splitlines()
    assert line.endswith(" WARNING toolwire.server: careful")


@pytest.fixture
def line_logger(stderr: Stderr) -> logging.Logger:
    """A logger as ``configure_logging`` sets one up: a ``LineHandler`` with a ``LineFormatter``
    on its parent, the logger itself with no handler."""
    parent = logging.Logger("toolwire", logging.INFO)
    handler = LineHandler(stderr)
    handler.setFormatter(LineFormatter())
    parent.addHandler(handler)
    child = logging.Logger("toolwire.exchange", logging.NOTSET)
    child.parent = parent
    return child


def test_the_line_handler_is_found_when_it_alone_would_write_the_record(line_logger: logging.Logger) -> None:
    [handler] = line_logger.parent.handlers  # type: ignore[union-attr]
    assert line_handler_for(line_logger, logging.INFO) is handler
    assert line_handler_for(line_logger, logging.WARNING) is handler
    assert line_handler_for(line_logger, logging.DEBUG) is None  # not enabled: logging says so
    handler.setLevel(logging.INFO)
    assert line_handler_for(line_logger, logging.INFO) is handler  # the handler's level met, not passed


@pytest.mark.parametrize(
    "change",
    [
        "a second handler",
        "a handler of another kind",
        "a filter on the logger",
        "a filter on the handler",
        "the handler's level above",
        "another formatter",
        "the logger disabled",
        "a record factory of one's own",
    ],
)
def test_anything_else_on_the_way_sends_the_record_through_logging(
    line_logger: logging.Logger, stderr: Stderr, change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = line_logger.parent
    assert parent is not None
    [handler] = parent.handlers
    # Each change alone would make logging write otherwise: every handler added is what
    # the walk accepts in every way but the one the change is about.
    if change == "a second handler":
        second = LineHandler(Stderr())
        second.setFormatter(LineFormatter())
        line_logger.addHandler(second)
    elif change == "a handler of another kind":
        other = logging.StreamHandler(Stderr())
        other.setFormatter(LineFormatter())
        parent.handlers = [other]
    elif change == "a filter on the logger":
        line_logger.addFilter(lambda record: True)
    elif change == "a filter on the handler":
        handler.addFilter(lambda record: True)
    elif change == "the handler's level above":
        handler.setLevel(logging.WARNING)
    elif change == "another formatter":
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
    elif change == "the logger disabled":
        line_logger.disabled = True
    elif change == "a record factory of one's own":
        monkeypatch.setattr(logging, "_logRecordFactory", lambda *args, **kwargs: logging.LogRecord(*args, **kwargs))
    assert line_handler_for(line_logger, logging.INFO) is None


def test_a_handler_below_a_logger_that_does_not_propagate_is_the_only_one(stderr: Stderr) -> None:
    root = logging.Logger("root", logging.INFO)
    root.addHandler(logging.StreamHandler(Stderr()))
    own = logging.Logger("toolwire.exchange", logging.INFO)
    own.parent, own.propagate = root, False
    handler = LineHandler(stderr)
    handler.setFormatter(LineFormatter())
    own.addHandler(handler)
    assert line_handler_for(own, logging.INFO) is handler
    own.propagate = True
    assert line_handler_for(own, logging.INFO) is None
    assert line_handler_for(logging.Logger("alone", logging.INFO), logging.INFO) is None  # logging's last resort


@pytest.mark.parametrize("levelno", [logging.INFO, logging.WARNING])
async def test_a_line_emitted_is_the_line_logging_writes_and_held_as_it_is(
    line_logger: logging.Logger, stderr: Stderr, levelno: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    moments = iter([1_700_000_000.25, 1_700_000_000.25, 1_700_000_001.999, 1_700_000_001.999])
    monkeypatch.setattr(time, "time", lambda: next(moments))
    handler = line_handler_for(line_logger, levelno)
    assert handler is not None
    for text in ('{"request_id":"resp_1","pct":"100%"}', "second"):
        line_logger.log(levelno, text)
        handler.emit_line(levelno, line_logger.name, text)
    if levelno < logging.WARNING:
        assert stderr.writes == []  # held for the end of the turn, as the records' lines are
        await asyncio.sleep(0)
        await asyncio.sleep(0)
    lines = stderr.getvalue().splitlines()
    assert lines[0] == lines[1] and lines[2] == lines[3]
    name = logging.getLevelName(levelno)
    clock = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(1_700_000_000))
    assert lines[0] == f'{clock},250 {name} toolwire.exchange: {{"request_id":"resp_1","pct":"100%"}}'
    assert lines[2].endswith(f",999 {name} toolwire.exchange: second")


async def test_a_gateway_s_request_line_goes_to_its_handler_without_a_record(
    fresh_root_logger: logging.Logger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``LogObserver`` in a process set up by ``configure_logging``: the line is the one the
    record would have given, and no record is made."""
    stream = Stderr()
    fresh_root_logger.handlers = []
    configure_logging("info", stream)
    records: list[logging.LogRecord] = []
    monkeypatch.setattr(LineHandler, "emit", lambda self, record: records.append(record))
    finished = exchange(usage={"input_tokens": 12, "output_tokens": 3})
    LogObserver().finished(finished)
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert records == []
    [line] = stream.writes
    stamp, says, text = line.partition(" INFO toolwire.exchange: ")
    assert says and time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S") and len(stamp) == 23 and stamp[19] == ","
    assert text.endswith("}\n") and orjson.loads(text) == summarize(finished)
