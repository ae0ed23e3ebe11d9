"""What a key is refused with, and whose fault each refusal is.

::

    ToolwireError
    ├── ClientError
    │   ├── InvalidKey         no key, or an unknown, revoked or expired one  -> 401 invalid_api_key
    │   ├── ModelNotAllowed    the key may not use the model asked for        -> 403 model_not_allowed
    │   ├── RateLimited        over requests/min, tokens/min or concurrency   -> 429 rate_limit_exceeded
    │   ├── QuotaExceeded      the key's token budget is spent                -> 429 insufficient_quota
    │   ├── KeyNameTaken       creating a key under a name in use             -> 409
    │   └── KeyNotFound        revoking or reading a key that is not there    -> 404
    └── StoreUnavailable       (toolwire.store) the key store cannot be reached -> 503

Every message names the key by its name, never by the key itself.
"""

from __future__ import annotations

from toolwire.errors import ClientError, NotFoundError

from ._limits import LimitName, retry_after_header


class InvalidKey(ClientError):
    status = 401

    def __init__(self, message: str) -> None:
        super().__init__(message, code="invalid_api_key")


class ModelNotAllowed(ClientError):
    status = 403
    error_type = "permission_error"

    def __init__(self, key_name: str, model: str, allowed: tuple[str, ...]) -> None:
        super().__init__(
            f"The key '{key_name}' may not use the model '{model}' (it may use: {', '.join(allowed) or 'none'}).",
            param="model",
            code="model_not_allowed",
        )


_LIMIT_WORDING: dict[LimitName, tuple[str, str]] = {
    "requests_per_minute": ("requests", "requests per minute (rpm)"),
    "tokens_per_minute": ("tokens", "tokens per minute (tpm)"),
    "max_concurrent": ("requests", "concurrent requests (max_concurrent)"),
    "budget_tokens": ("insufficient_quota", "token budget (budget_tokens)"),
}


class RateLimited(ClientError):
    """Over a rate limit; ``limit`` names which, ``retry_after`` (seconds) goes in the header."""

    status = 429

    def __init__(self, key_name: str, limit: LimitName, allowed: int, retry_after: float) -> None:
        error_type, wording = _LIMIT_WORDING[limit]
        header = retry_after_header(retry_after)
        super().__init__(
            f"Rate limit reached for the key '{key_name}' on {wording}: limit {allowed}. "
            f"Please try again in {header}s.",
            code="rate_limit_exceeded",
        )
        self.error_type = error_type
        self.limit = limit
        self.retry_after = header


class QuotaExceeded(ClientError):
    status = 429
    error_type = "insufficient_quota"

    def __init__(self, key_name: str, budget: int) -> None:
        super().__init__(
            f"The key '{key_name}' has used its budget of {budget} tokens (budget_tokens); "
            "ask for a key with a new budget.",
            code="insufficient_quota",
        )
        self.limit: LimitName = "budget_tokens"


class KeyNameTaken(ClientError):
    status = 409

    def __init__(self, name: str) -> None:
        super().__init__(
            f"A key named '{name}' is already active; revoke it first or choose another name.",
            param="name",
            code="key_name_taken",
        )


class KeyNotFound(NotFoundError):
    def __init__(self, name: str, *, active: bool = True) -> None:
        what = "No active key" if active else "No key"
        super().__init__(f"{what} is named '{name}'.", param="name", code="key_not_found")
