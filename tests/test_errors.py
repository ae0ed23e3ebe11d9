"""The exception tree: whose fault each error is, the status it hints, the body clients read."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from toolwire.errors import (
    ClientError,
    InternalError,
    NotFoundError,
    RequestError,
    ToolwireError,
    UpstreamError,
    UpstreamLimitError,
    UpstreamProtocolError,
)


def body(message: str, error_type: str, param: str | None = None, code: str | None = None) -> object:
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


@pytest.mark.parametrize(
    ("make", "status", "expected"),
    [
        pytest.param(
            lambda: RequestError("Invalid 'input[0].role'.", param="input[0].role"),
            400,
            body("Invalid 'input[0].role'.", "invalid_request_error", "input[0].role", "invalid_request"),
            id="request",
        ),
        pytest.param(
            lambda: RequestError("The body is too large.", code="body_too_large", status=413),
            413,
            body("The body is too large.", "invalid_request_error", None, "body_too_large"),
            id="request-with-its-own-status",
        ),
        pytest.param(lambda: ClientError("Wrong."), 400, body("Wrong.", "invalid_request_error"), id="client"),
        pytest.param(
            lambda: NotFoundError("No model 'x'.", param="model", code="model_not_found"),
            404,
            body("No model 'x'.", "not_found_error", "model", "model_not_found"),
            id="not-found",
        ),
        pytest.param(lambda: UpstreamError("The upstream is down."), 502, body("The upstream is down.", "upstream_error"), id="upstream"),
        pytest.param(
            lambda: UpstreamError(
                "Slow down.", status=429, param="model", code="rate_limit_exceeded", error_type="rate_limit_error"
            ),
            429,
            body("Slow down.", "rate_limit_error", "model", "rate_limit_exceeded"),
            id="upstream-with-its-own-status-and-type",
        ),
        pytest.param(
            lambda: UpstreamProtocolError("Garbled."), 502, body("Garbled.", "upstream_error"), id="upstream-protocol"
        ),
        pytest.param(
            lambda: UpstreamLimitError("An SSE line too long.", limit="upstream_max_line_bytes"),
            502,
            body("An SSE line too long.", "upstream_error", None, "upstream_response_too_large"),
            id="upstream-limit",
        ),
        pytest.param(lambda: InternalError("A bug."), 500, body("A bug.", "server_error"), id="internal"),
        pytest.param(lambda: ToolwireError("Anything."), 500, body("Anything.", "server_error"), id="base"),
    ],
)
def test_each_error_has_its_status_and_openai_shaped_body(
    make: Callable[[], ToolwireError], status: int, expected: object
) -> None:
    error = make()  # made by the test, not when the tests are collected
    assert error.status == status
    assert error.to_body() == expected
    assert str(error) == error.message  # what logs show is the message itself
    assert error.retry_after is None


def test_an_upstream_error_keeps_what_the_upstream_said() -> None:
    error = UpstreamError("Slow down.", status=429, retry_after="7", upstream_status=429)
    assert (error.status, error.retry_after, error.upstream_status) == (429, "7", 429)
    plain = UpstreamError("Down.")
    assert (plain.status, plain.retry_after, plain.upstream_status) == (502, None, None)


def test_an_error_type_given_to_one_error_stays_with_it() -> None:
    UpstreamError("Slow down.", error_type="rate_limit_error")
    assert UpstreamError("Down.").error_type == "upstream_error"
    assert UpstreamError.error_type == "upstream_error"


def test_a_limit_error_names_the_setting_that_bounds_it() -> None:
    error = UpstreamLimitError("An SSE event too long.", limit="upstream_max_event_bytes")
    assert error.limit == "upstream_max_event_bytes"
    assert isinstance(error, UpstreamError)
