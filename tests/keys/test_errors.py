"""What a client is told when its key is refused: status, the OpenAI error body, and the
limit (counted by name) and Retry-After of a rate limit. Each names the key by its name."""

from __future__ import annotations

from toolwire.keys import KeyNameTaken, KeyNotFound, ModelNotAllowed, QuotaExceeded, RateLimited


def test_a_model_the_key_may_not_use() -> None:
    refused = ModelNotAllowed("alice", "big", ("small", "medium"))
    assert refused.status == 403
    assert refused.to_body() == {"error": {
        "message": "The key 'alice' may not use the model 'big' (it may use: small, medium).",
        "type": "permission_error", "param": "model", "code": "model_not_allowed",
    }}  # fmt: skip
    assert ModelNotAllowed("bob", "big", ()).message == "The key 'bob' may not use the model 'big' (it may use: none)."


def test_a_rate_limit_says_which_and_when_to_retry() -> None:
    limited = RateLimited("alice", "tokens_per_minute", 1000, 12.2)
    assert (limited.status, limited.limit, limited.retry_after) == (429, "tokens_per_minute", "13")
    assert limited.to_body() == {"error": {
        "message": "Rate limit reached for the key 'alice' on tokens per minute (tpm): limit 1000. Please try again in 13s.",
        "type": "tokens", "param": None, "code": "rate_limit_exceeded",
    }}  # fmt: skip
    assert RateLimited("alice", "requests_per_minute", 5, 0.2).to_body()["error"]["type"] == "requests"
    assert RateLimited("alice", "max_concurrent", 1, 1.0).retry_after == "1"


def test_a_spent_budget() -> None:
    spent = QuotaExceeded("alice", 5000)
    assert (spent.status, spent.limit, spent.retry_after) == (429, "budget_tokens", None)
    assert spent.to_body() == {"error": {
        "message": "The key 'alice' has used its budget of 5000 tokens (budget_tokens); ask for a key with a new budget.",
        "type": "insufficient_quota", "param": None, "code": "insufficient_quota",
    }}  # fmt: skip


def test_what_the_admin_api_is_told_about_names() -> None:
    """``POST /admin/keys`` with a name in use, and ``DELETE /admin/keys/NAME`` of none."""
    taken = KeyNameTaken("alice")
    assert taken.status == 409
    assert taken.to_body() == {"error": {
        "message": "A key named 'alice' is already active; revoke it first or choose another name.",
        "type": "invalid_request_error", "param": "name", "code": "key_name_taken",
    }}  # fmt: skip
    missing = KeyNotFound("bob")
    assert missing.status == 404
    assert missing.to_body() == {"error": {
        "message": "No active key is named 'bob'.", "type": "not_found_error", "param": "name", "code": "key_not_found",
    }}  # fmt: skip
    assert KeyNotFound("bob", active=False).message == "No key is named 'bob'."
