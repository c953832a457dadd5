"""Who may call what: API tokens, client certificates, and the role table (``ROLES``).

``Authenticator`` finds a call's principal: an API token first, then a client certificate, then
``LOCAL`` where authentication is optional; credentials present but bad are refused even there.
``check_role`` checks the method; the edge's ``AuthInterceptor`` binds the principal for the
call. A token's secret is never stored, logged or put in an error: storage keeps its SHA-256
digest, compared with ``hmac.compare_digest``. ``FailureLimiter`` limits failed authentication
per client address. The design: docs/security.md ("How a caller is found", "API tokens").
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hashlib
import hmac
import logging
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cryptography import x509

from fairdeck.v1 import audit_pb2, dealer_pb2
from fairdeck.wire import AUTHORIZATION
from fairdeck_server import principal, refusals
from fairdeck_server.log_causes import Repeats, cause
from fairdeck_server.policy.ahead import AHEAD, ReadsAhead
from fairdeck_server.principal import Principal, Role
from fairdeck_server.refusals import DealerError
from fairdeck_server.storage.base import Storage, TokenRecord

log = logging.getLogger(__name__)

TOKEN_PREFIX = "fdk"  # noqa: S105 - the public prefix of every token
SECRET_BYTES = 32
"""Random bytes in a token's secret: 256 bits, so no guessing and no dictionary."""
_TOKEN = re.compile(r"fdk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
CACHE_TTL = 2.0
"""Seconds a looked-up token is trusted without asking storage again. A
revocation (or a new token) takes effect on every replica within this time."""
CACHE_MAX = 10_000
"""Token ids kept in the cache; beyond it the cache starts over (bounds memory
against callers spraying random ids)."""
AUTH_FAILURE_RATE = 1.0
"""Failed authentications per second a client address may make, sustained."""
AUTH_FAILURE_BURST = 30
"""Failed authentications a client address may make at once."""
MAX_PEERS = 100_000
"""Failure buckets kept at most; refilled ones are dropped first, then all."""
TARPIT = 1.0
"""Seconds at most that a call refused AUTH_RATE_LIMITED waits for its answer."""
CERT_URI = re.compile(r"fairdeck://tenant/([^/]+)/role/([^/]+)")
"""The URI SAN of a client certificate that names a tenant and role."""

OPEN_METHOD_PREFIXES = (
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1alpha.ServerReflection/",
    "/grpc.reflection.v1.ServerReflection/",
)
"""Methods that need no credentials: health probes and reflection."""

DEALER_ONLY = frozenset({Role.DEALER})
ANY_ROLE = frozenset(Role)
_DEALER_SERVICE = dealer_pb2.DESCRIPTOR.services_by_name["DealerService"]
_AUDIT_SERVICE = audit_pb2.DESCRIPTOR.services_by_name["AuditService"]
_DEALER_ROLES = {
    "OpenHand": DEALER_ONLY,
    "AddClientSeeds": DEALER_ONLY,
    "ShuffleHand": DEALER_ONLY,
    "DrawCards": DEALER_ONLY,
    "DealHand": DEALER_ONLY,
    "DealNewHand": DEALER_ONLY,
    "DealHands": DEALER_ONLY,
    "CloseHand": DEALER_ONLY,
    # An auditor sees closed hands only; the servicer answers HAND_NOT_FOUND for the others.
    "GetHand": ANY_ROLE,
}
ROLES: dict[str, frozenset[Role]] = {
    **{f"/{_DEALER_SERVICE.full_name}/{name}": roles for name, roles in _DEALER_ROLES.items()},
    **{f"/{_AUDIT_SERVICE.full_name}/{m.name}": ANY_ROLE for m in _AUDIT_SERVICE.methods},
}
"""The one role table: full method name -> roles that may call it. The log is
public, so every role reads it. A method missing here is refused to everyone."""


# -- tokens ------------------------------------------------------------------------------------


def token_digest(token_id: str, secret: str) -> bytes:
    """What storage keeps of a token: SHA-256 over a domain tag, the id and the secret.

    A fast hash is the right one here: the secret is 32 random bytes, so there
    is nothing for a slow password hash (bcrypt, Argon2) to protect against a
    guesser, and checking it costs microseconds on every call. The id is in
    the digest so a digest copied onto another token's row does not match.
    """
    return hashlib.sha256(b"fairdeck api token v1\0" + token_id.encode() + b"\0" + secret.encode()).digest()


def new_token(
    tenant: str, role: Role, label: str = "", *, now_ms: int | None = None
) -> tuple[str, TokenRecord]:
    """A new token ``fdk_<16 hex id>_<43 base64url secret>`` and the record to store.

    The token is returned once, to be shown once; only the record is kept.
    """
    principal.check_tenant(tenant)
    token_id = secrets.token_hex(8)
    secret = base64.urlsafe_b64encode(secrets.token_bytes(SECRET_BYTES)).rstrip(b"=").decode()
    created = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    record = TokenRecord(token_id, tenant, Role(role).value, token_digest(token_id, secret), created, label)
    return f"{TOKEN_PREFIX}_{token_id}_{secret}", record


def split_token(token: str) -> tuple[str, str] | None:
    """(token_id, secret) of a well-formed token, else None."""
    m = _TOKEN.fullmatch(token)
    return (m.group(1), m.group(2)) if m else None


_NO_DIGEST = bytes(32)


class FailureLimiter:
    """A token bucket of failed authentications per client address: ``burst`` at once,
    ``rate`` per second sustained; a rate of 0 turns it off.

    >>> limiter = FailureLimiter(rate=1.0, burst=2, clock=lambda: 0.0)
    >>> limiter.failed("a"); limiter.blocked("a"), limiter.failed("a"), limiter.blocked("a")
    (None, None, 1.0)
    """

    def __init__(
        self,
        rate: float = AUTH_FAILURE_RATE,
        burst: int = AUTH_FAILURE_BURST,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_peers: int = MAX_PEERS,
        tarpit: float = TARPIT,
    ) -> None:
        self.rate = rate
        self.tarpit = tarpit
        self.burst = float(max(burst, 1))
        self._clock = clock
        self._max = max_peers
        self._buckets: dict[str, tuple[float, float]] = {}  # address -> (tokens, when)

    def _tokens(self, address: str, now: float) -> float:
        tokens, when = self._buckets.get(address, (self.burst, now))
        return min(self.burst, tokens + (now - when) * self.rate)

    def blocked(self, address: str) -> float | None:
        """None if ``address`` may still fail, else seconds until it may again."""
        if self.rate <= 0 or address not in self._buckets:
            return None
        tokens = self._tokens(address, self._clock())
        return None if tokens >= 1.0 else (1.0 - tokens) / self.rate

    def refund(self, address: str) -> None:
        """Give back one failure counted in advance (the token turned out valid)."""
        if self.rate <= 0 or address not in self._buckets:
            return
        now = self._clock()
        self._buckets[address] = (min(self.burst, self._tokens(address, now) + 1.0), now)

    def failed(self, address: str) -> None:
        """Count one failed authentication from ``address``."""
        if self.rate <= 0:
            return
        now = self._clock()
        self._buckets[address] = (max(0.0, self._tokens(address, now) - 1.0), now)
        if len(self._buckets) > self._max:
            # Forgetting a refilled bucket changes nothing; if that is not enough, memory wins.
            refilled = [a for a in self._buckets if self._tokens(a, now) >= self.burst]
            for a in refilled:
                del self._buckets[a]
            if len(self._buckets) > self._max:
                self._buckets.clear()


class TokenVerifier:
    """Checks API tokens against storage, with a short cache (``CACHE_TTL``; a valid token in
    use is looked up again late in its entry's life, in the background: ahead.py), and
    limits failed attempts per client address (``FailureLimiter``)."""

    def __init__(
        self,
        storage: Storage,
        *,
        ttl: float = CACHE_TTL,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = CACHE_MAX,
        failures: FailureLimiter | None = None,
    ) -> None:
        self.storage = storage
        self.ttl = ttl
        self._clock = clock
        self._max = max_entries
        self._cache: dict[str, tuple[float, TokenRecord | None]] = {}
        self._ahead = ReadsAhead("token")
        self._failures = Repeats(log)
        self.failures = failures if failures is not None else FailureLimiter(clock=clock)

    def close(self) -> None:
        """Cancel the lookups made ahead of need (the dealer is stopping)."""
        self._ahead.cancel()

    def refused(self, address: str) -> DealerError:
        """INVALID_TOKEN, counted as a failure of ``address``."""
        self.failures.failed(address)
        return refusals.invalid_token()

    async def failure(self, address: str) -> DealerError:
        """The refusal of a bad credential from ``address``: INVALID_TOKEN, counted;
        or, when the address is over its budget, AUTH_RATE_LIMITED (raised)."""
        await self.check_address(address)
        return self.refused(address)

    async def check_address(self, address: str) -> None:
        """Raise AUTH_RATE_LIMITED if ``address`` has no failures left, after holding
        the answer for up to ``failures.tarpit`` seconds: a caller that waits for its
        answers (most sprayers) then sprays at a few calls a second, and a held call
        costs the dealer no CPU, only a little memory. Nobody else waits for it."""
        wait = self.failures.blocked(address)
        if wait is not None:
            await asyncio.sleep(min(wait, self.failures.tarpit))
            raise refusals.auth_rate_limited(max(0.0, wait - self.failures.tarpit))

    async def verify(self, token: str, address: str = "") -> Principal:
        """The principal of a valid token; a DealerError otherwise. ``address`` is the
        client's (``edge.peers.peer_address``): its failures are counted and limited."""
        parsed = split_token(token)
        if parsed is None:
            raise await self.failure(address)
        token_id, secret = parsed
        digest = token_digest(token_id, secret)
        known = self._known(token_id, digest)
        if not known:
            await self.check_address(address)
            # Counted before the lookup and given back if the token is valid, so that
            # concurrent calls cannot all pass the check and look up more than the budget.
            self.failures.failed(address)
        try:
            record = await self._record(token_id, digest)
        except DealerError:
            if not known:
                self.failures.refund(address)  # storage's failure, not the caller's
            raise
        # Compared even for an unknown id, so both take the same path.
        matches = hmac.compare_digest(digest, record.digest if record else _NO_DIGEST)
        if record is None or not matches or record.revoked_ms is not None or record.role not in ANY_ROLE:
            log.debug("refused API token %s", token_id)
            raise self.refused(address) if known else refusals.invalid_token()
        if not known:
            self.failures.refund(address)
        return Principal(record.tenant, Role(record.role), token_id=token_id)

    def _known(self, token_id: str, digest: bytes) -> bool:
        """Whether this token was valid when last looked up (its cache entry may have expired)."""
        hit = self._cache.get(token_id)
        return hit is not None and hit[1] is not None and hmac.compare_digest(digest, hit[1].digest)

    async def _record(self, token_id: str, digest: bytes) -> TokenRecord | None:
        now = self._clock()
        hit = self._cache.get(token_id)
        if hit is not None and hit[0] > now:
            record = hit[1]
            if (
                record is not None
                and record.revoked_ms is None
                and hit[0] - now <= self.ttl * (1 - AHEAD)
                and hmac.compare_digest(digest, record.digest)
            ):
                # A valid token in use: looked up again before its entry expires, so that its
                # calls never wait for the lookup. An entry still lives ttl from its lookup's
                # start, so a revocation takes effect as soon as without this. Only its own
                # caller starts it (the secret matches): one who knows just the id would have
                # it wait in that caller's turn, and keep the token's own calls from starting one.
                self._ahead.start(token_id, lambda: self._look_up(token_id, self._clock()))
            return hit[1]
        try:
            return await self._look_up(token_id, now)
        except Exception as e:
            self._failures.log(logging.ERROR, f"token lookup failed: {cause(e)}")
            raise refusals.storage_unavailable("cannot check credentials now; retry") from None

    async def _look_up(self, token_id: str, now: float) -> TokenRecord | None:
        """Storage's record of ``token_id``, cached until ``now`` (before the lookup) plus ttl."""
        record = await self.storage.get_token(token_id)
        if len(self._cache) >= self._max:
            # Unknown ids go first: a sprayer must not push the real tokens out.
            self._cache = {k: v for k, v in self._cache.items() if v[1] is not None}
            if len(self._cache) >= self._max:
                self._cache.clear()
        if token_id not in self._cache or self._cache[token_id][0] <= now + self.ttl:
            self._cache[token_id] = (now + self.ttl, record)  # a lookup begun later stays
        return record


# -- certificates ------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1024)
def certificate_principal(pem: bytes) -> Principal:
    """The principal a (verified) client certificate names; INVALID_CERTIFICATE if it names none.

    Exactly one URI SAN of the form ``fairdeck://tenant/<tenant>/role/<dealer|auditor>``.
    """
    try:
        cert = x509.load_pem_x509_certificate(pem)
        subject = cert.subject.rfc4514_string()
        try:
            san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            uris = san.get_values_for_type(x509.UniformResourceIdentifier)
        except x509.ExtensionNotFound:
            uris = []
    except ValueError:
        raise refusals.invalid_certificate("the client certificate does not parse") from None
    ours = [u for u in uris if u.startswith("fairdeck:")]
    if len(ours) != 1:
        raise refusals.invalid_certificate(
            "the client certificate must carry one URI SAN fairdeck://tenant/<tenant>/role/<dealer|auditor>"
        )
    m = CERT_URI.fullmatch(ours[0])
    if m is None or m.group(2) not in ANY_ROLE or not principal.TENANT_PATTERN.fullmatch(m.group(1)):
        raise refusals.invalid_certificate(
            "the client certificate's fairdeck URI does not name a valid tenant and role"
        )
    return Principal(m.group(1), Role(m.group(2)), subject=subject)


# -- the interceptor ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Authenticator:
    """Finds the principal of a call from its metadata and TLS peer."""

    tokens: TokenVerifier
    required: bool
    """Refuse calls without credentials (else they run as LOCAL)."""

    async def principal(
        self,
        metadata: Sequence[tuple[str, Any]],
        auth_context: Mapping[str, Iterable[bytes]],
        address: str = "",
    ) -> Principal:
        """``address`` is the caller's client address (``edge.peers.peer_address``), by which its
        failures are counted."""
        headers = [v for k, v in metadata if k == AUTHORIZATION]
        peer_certs = list(auth_context.get("x509_pem_cert") or ())
        if headers:
            value = headers[0]
            # Printable ASCII only: a value that was not UTF-8 reaches us Latin-1 decoded,
            # and str.strip() would remove a trailing 0xA0 or 0x85 from it as whitespace.
            if (
                len(headers) != 1
                or not isinstance(value, str)
                or not (value.isascii() and value.isprintable())
                or value[:7].lower() != "bearer "
            ):
                raise await self.tokens.failure(address)
            found = await self.tokens.verify(value[7:].strip(" "), address)
            if peer_certs:
                with contextlib.suppress(DealerError):
                    found = replace(found, subject=certificate_principal(peer_certs[0]).subject)
            return found
        if peer_certs:
            return certificate_principal(peer_certs[0])
        if self.required:
            raise refusals.missing_credentials()
        return principal.LOCAL


def check_role(method: str, caller: Principal) -> None:
    """Refuse ``method`` unless ``caller``'s role is in its row of ROLES."""
    if caller.role not in ROLES.get(method, frozenset()):
        raise refusals.role_not_allowed(caller.role.value, method.rsplit("/", 1)[-1])


def is_open(method: str) -> bool:
    return method.startswith(OPEN_METHOD_PREFIXES)
