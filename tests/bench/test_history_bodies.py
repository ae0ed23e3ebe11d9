"""The long-session benchmark's bodies: Codex's, or asking for their responses to be stored."""

from __future__ import annotations

import dataclasses

import orjson
import pytest
from bench.bodies import session_series
from bench.history import store_requested


def test_a_session_asking_for_storage_differs_from_codex_s_only_there() -> None:
    for body in session_series(2, 2):
        stored = orjson.loads(store_requested(body).data)
        assert stored["store"] is True
        assert {**stored, "store": False} == orjson.loads(body.data)


def test_a_body_without_one_store_false_is_refused() -> None:
    [body] = session_series(0, 1)
    with pytest.raises(ValueError, match="not one store:false"):
        store_requested(dataclasses.replace(body, data=body.data.replace(b'"store":false', b'"store":null')))
