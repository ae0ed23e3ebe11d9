"""``KeyGate``: who is calling, may they, and what did they use. The server's only door.

The server makes three calls, each at one point of an exchange::

    principal = await gate.authenticate(authorization)   # the request's headers arrived
    lease = await gate.admit(principal, model)           # its body is parsed: model known
    gate.record_soon(lease, usage)                       # it is over (usage as reported)

``authenticate`` knows three kinds of caller: a key of the store (``twk_...``), read from
the store on every request, so a revocation holds at once in every gateway; a static
key (``--api-key-env``), a key without limits; and, when the gateway has no key of any
kind, nobody in particular (None). A gateway has keys once it has a static or admin key
or its store has ever held one; it then answers 401 without one. ``admit`` checks the
model and the limits (403, 429) and takes a concurrency lease, renewed while it is held;
``record_soon`` gives the lease back and charges the usage, off the request's path.

A store that cannot be reached makes every call that needs it fail with
``StoreUnavailable`` (503): a gateway that cannot check a key lets nobody in.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ._base import KeyStore
from ._errors import InvalidKey, ModelNotAllowed, QuotaExceeded, RateLimited
from ._format import key_id_of, matches
from ._limits import LEASE_SECONDS, Refused, TokenUsage
from ._model import ClientKey

log = logging.getLogger("toolwire.keys")

STATIC_KEY_NAME = "static"
"""What ``--api-key-env`` keys are called in metrics and logs."""
OPEN_CHECK_SECONDS = 0.5
"""How long a gateway without keys trusts that its store still has none."""
RECORDING_GRACE_SECONDS = 5.0
"""How long a closing gate waits for the usage still being recorded (a store that hangs
must not hold the gateway's shutdown; the leases it holds then expire)."""
_MISSING = "Missing or invalid API key: send 'Authorization: Bearer <key>'."


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request comes from: a key's ``name``, the ``owner`` its stored responses
    are kept under, and the stored ``key`` with its rules (None for a static key)."""

    name: str
    owner: str
    key: ClientKey | None = None


@dataclass(frozen=True, slots=True)
class Lease:
    """An admitted request of a stored key, until ``record``: its concurrency slot, if
    the key limits concurrency (``lease_id``), and what its usage is charged to."""

    key: ClientKey
    model: str
    lease_id: str | None


def bearer_token(authorization: bytes | str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header value, if it is one."""
    if not authorization:
        return None
    value = authorization.decode("latin-1") if isinstance(authorization, bytes) else authorization
    scheme, _, token = value.partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def static_owner(key: bytes) -> str:
    """The owner of a static key's stored responses: stable, and not the key. A slow
    hash, since a static key is chosen by a person and may be guessable."""
    fingerprint = hashlib.scrypt(key, salt=b"toolwire static key owner", n=2**14, r=8, p=1, dklen=16)
    return "static:" + fingerprint.hex()


class KeyGate:
    """Authentication, admission and usage over ``store`` (None: static keys only)."""

    def __init__(
        self,
        store: KeyStore | None = None,
        *,
        static_keys: Sequence[bytes] = (),
        admin_keys: Sequence[bytes] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self._static = tuple((key, Principal(STATIC_KEY_NAME, static_owner(key))) for key in static_keys)
        self._admin = tuple(admin_keys)
        self._clock = clock
        self._store_had_keys = False
        self._open_checked_at: float | None = None
        self._open_check: asyncio.Future[bool] | None = None
        self._held: dict[str, Lease] = {}
        self._renewing: asyncio.Task[None] | None = None
        self._recording: set[asyncio.Task[None]] = set()

    @property
    def has_static_keys(self) -> bool:
        return bool(self._static)

    @property
    def has_admin_keys(self) -> bool:
        return bool(self._admin)

    async def authenticate(self, authorization: bytes | str | None) -> Principal | None:
        """Who sent ``authorization`` (the header's value); None on a gateway without
        keys. ``InvalidKey`` (401) for a missing, unknown, revoked or expired key."""
        presented = bearer_token(authorization)
        if presented is not None:
            static = self._static_principal(presented.encode("latin-1"))
            if static is not None:
                return static
            key_id = key_id_of(presented)
            if key_id is not None and self.store is not None:
                return self._principal_of(await self.store.find(key_id), presented)
        if await self.requires_key():
            raise InvalidKey(_MISSING)
        return None

    def is_admin(self, authorization: bytes | str | None) -> bool:
        """Whether ``authorization`` carries an admin key (constant time, every key tried)."""
        presented = (bearer_token(authorization) or "").encode("latin-1")
        matched = False
        for key in self._admin:
            matched |= hmac.compare_digest(presented, key)
        return matched and bool(presented)

    async def requires_key(self) -> bool:
        """Whether callers must present a key: static or admin keys are configured, or
        the store has (ever had) a key. The store's answer "no keys" is trusted for
        ``OPEN_CHECK_SECONDS``; "keys" for good. When the answer is due, the requests that
        ask meanwhile share one look into the store (its file's thread is one hop each)."""
        if self._static or self._admin or self._store_had_keys:
            return True
        if self.store is None:
            return False
        checked_at = self._open_checked_at
        if checked_at is not None and time.monotonic() - checked_at < OPEN_CHECK_SECONDS:
            return False
        checking = self._open_check
        if checking is None:
            checking = self._open_check = asyncio.ensure_future(self._check_store(self.store))
            checking.add_done_callback(_retrieved)
        return await asyncio.shield(checking)  # a caller that leaves does not cancel the others' answer

    async def _check_store(self, store: KeyStore) -> bool:
        try:
            self._store_had_keys = await store.has_keys()
            self._open_checked_at = time.monotonic()
            return self._store_had_keys
        finally:
            self._open_check = None

    async def admit(self, principal: Principal | None, model: str) -> Lease | None:
        """Let a request for ``model`` go, or raise why not: ``ModelNotAllowed`` (403),
        ``RateLimited`` or ``QuotaExceeded`` (429). The lease is None for callers without
        a stored key, who have no limits and no usage to record."""
        if principal is None or principal.key is None:
            return None
        key = principal.key
        if not key.may_use(model):
            raise ModelNotAllowed(key.name, model, key.models or ())
        limits = key.limits
        lease = Lease(key, model, secrets.token_hex(12) if limits.max_concurrent is not None else None)
        if limits.any:
            assert self.store is not None  # a stored key came from the store
            decision = await self.store.admit(key, lease.lease_id)
            if isinstance(decision, Refused):
                raise _refusal(key, decision)
        if lease.lease_id is not None:
            self._held[lease.lease_id] = lease
            if self._renewing is None or self._renewing.done():
                self._renewing = asyncio.ensure_future(self._renew_held())
        return lease

    async def record(self, lease: Lease, usage: TokenUsage) -> None:
        """Give back ``lease``'s concurrency slot and charge ``usage`` to its key and model."""
        if lease.lease_id is not None:
            self._held.pop(lease.lease_id, None)
        assert self.store is not None
        await self.store.settle(lease.key, lease.lease_id, lease.model, usage)

    def record_soon(self, lease: Lease, usage: TokenUsage) -> None:
        """``record`` in the background: a failure is logged (the lease then expires)."""
        task = asyncio.ensure_future(self.record(lease, usage))
        self._recording.add(task)
        task.add_done_callback(self._recorded)

    async def aclose(self) -> None:
        """Finish recording, stop renewing, close the store."""
        if self._recording:
            await asyncio.wait(set(self._recording), timeout=RECORDING_GRACE_SECONDS)
        if self._renewing is not None:
            self._renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._renewing
        if self.store is not None:
            await self.store.aclose()

    def _static_principal(self, presented: bytes) -> Principal | None:
        found = None
        for key, principal in self._static:  # every key, in constant time
            if hmac.compare_digest(presented, key):
                found = principal
        return found

    def _principal_of(self, key: ClientKey | None, presented: str) -> Principal:
        if key is None or not matches(presented, key.digest):
            raise InvalidKey(_MISSING)
        now = self._clock()
        status = key.status(now)
        if status == "revoked":
            raise InvalidKey(f"The key '{key.name}' ({key.prefix}) was revoked.")
        if status == "expired":
            assert key.expires_at is not None
            expired = datetime.datetime.fromtimestamp(key.expires_at, datetime.UTC).isoformat(timespec="seconds")
            raise InvalidKey(f"The key '{key.name}' ({key.prefix}) expired at {expired}.")
        return Principal(key.name, f"key:{key.id}", key)

    def _recorded(self, task: asyncio.Task[None]) -> None:
        self._recording.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("recording a key's usage failed: %s", task.exception())

    async def _renew_held(self) -> None:
        """While leases are held, extend them every third of their life."""
        assert self.store is not None  # a lease is held for a stored key
        while True:
            await asyncio.sleep(LEASE_SECONDS / 3)
            held = [(lease.key.id, lease_id) for lease_id, lease in self._held.items()]
            if not held:
                return
            try:
                await self.store.renew(held)
            except Exception as exc:
                log.warning("renewing %d concurrency leases failed: %s", len(held), exc)


def _refusal(key: ClientKey, refused: Refused) -> RateLimited | QuotaExceeded:
    limits = key.limits
    if refused.limit == "budget_tokens":
        assert limits.budget_tokens is not None
        return QuotaExceeded(key.name, limits.budget_tokens)
    allowed = {
        "requests_per_minute": limits.requests_per_minute,
        "tokens_per_minute": limits.tokens_per_minute,
        "max_concurrent": limits.max_concurrent,
    }[refused.limit]
    assert allowed is not None  # the limit that refused the request is set
    assert refused.retry_after is not None  # every store says when a rate limit lets the next one in
    return RateLimited(key.name, refused.limit, allowed, refused.retry_after)


def _retrieved(check: asyncio.Future[bool]) -> None:
    """A store check every caller left: its failure was theirs to see, not the loop's to log."""
    if not check.cancelled():
        check.exception()
