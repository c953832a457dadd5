"""The rows both engines store, written once: a hand's row (``HAND_FIELDS``, built by ``hand_row``
and ``batch_hand_rows`` and read back, checked, by ``hand_record``), a token's, the client seeds'
column and the log's entries in order for the audits. Either engine's SQL names the columns in
this order (``HAND_COLUMNS``, ``TOKEN_COLUMNS``); a row that is not one this dealer could have
written is refused (HAND_UNREADABLE) naming the hand and the column, never its content.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from fairdeck.core.commitment import COMMITMENT_BYTES
from fairdeck.core.decks import SPEC_NAMES, DeckSpec
from fairdeck.core.encoding import lp, u32
from fairdeck.core.errors import InvalidInput
from fairdeck.core.seeds import MAX_CLIENT_SEEDS, check_hand_id
from fairdeck.core.versions import check_version
from fairdeck_server import refusals
from fairdeck_server.storage.base import HandBatch, HandRecord, StoredHandState, TokenRecord

HAND_FIELDS = (
    "hand_id", "tenant", "request_id", "deck", "version", "commitment", "sealed_seed", "client_seeds",
    "state", "dealt", "created_ms", "commit_index", "closed_ms", "server_seed", "reveal_index", "request_fp",
)  # fmt: skip
"""The ``hands`` columns (both engines' schemas), in the order of a hand row: what ``hand_row`` and
``batch_hand_rows`` build and ``hand_record`` reads."""
HAND_COLUMNS = ", ".join(HAND_FIELDS)
"""``HAND_FIELDS`` as SQL's column list."""
HandRow = tuple[Any, ...]
"""The values of ``HAND_FIELDS`` for one hand, as a row of either engine holds them."""
TOKEN_COLUMNS = "token_id, tenant, role, digest, created_ms, label, revoked_ms"  # noqa: S105 - column names
"""The ``tokens`` columns in the order ``token_record`` reads them."""


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def hand_record(row: Sequence[Any]) -> HandRecord:
    """A ``SELECT HAND_COLUMNS`` row of either engine, checked: a row that is not a hand this dealer
    could have written (a bad sector, a bad restore, a migration's bug: nothing ``quick_check``
    sees) raises HAND_UNREADABLE naming the hand and the column, never its content."""
    hand_id = _shown_id(row[0])
    column = "deck"
    try:
        if row[3] not in SPEC_NAMES:
            raise ValueError
        column = "version"
        check_version(row[4])
        column = "commitment"
        if len(bytes(row[5])) != COMMITMENT_BYTES:
            raise ValueError
        column = "client_seeds"
        seeds = decode_seeds(bytes(row[7]))
        column = "state"
        state = StoredHandState(row[8])
        column = "dealt"
        dealt = int(row[9])
        if not 0 <= dealt <= DeckSpec.parse(row[3]).size:
            raise ValueError
        column = "created_ms, commit_index or closed_ms"
        return HandRecord(
            hand_id=row[0],
            tenant=row[1],
            request_id=row[2],
            deck=row[3],
            version=row[4],
            commitment=bytes(row[5]),
            sealed_seed=bytes(row[6]),
            client_seeds=seeds,
            state=state,
            dealt=dealt,
            created_ms=int(row[10]),
            commit_index=int(row[11]),
            closed_ms=_int(row[12]),
            server_seed=_bytes(row[13]),
            reveal_index=_int(row[14]),
            request_fingerprint=_bytes(row[15]),
        )
    except (ValueError, TypeError, InvalidInput):
        raise refusals.hand_unreadable(hand_id, column) from None


def _shown_id(value: Any) -> str:
    """A hand id fit for a log line: the id when it follows the hand-id rule, else ``?``."""
    try:
        check_hand_id(value)
    except (InvalidInput, TypeError, AttributeError):
        return "?"
    return str(value)


def hand_row(r: HandRecord, commit_index: int, reveal_index: int | None) -> HandRow:
    """The row of a new hand, at its log indexes (an engine may pass positions it offsets later):
    what ``hand_record`` reads back."""
    return (
        r.hand_id, r.tenant, r.request_id, r.deck, r.version, r.commitment, r.sealed_seed,
        encode_seeds(r.client_seeds), int(r.state), r.dealt, r.created_ms, commit_index, r.closed_ms,
        r.server_seed, reveal_index, r.request_fingerprint,
    )  # fmt: skip


def batch_hand_rows(batch: HandBatch, first: int) -> list[HandRow]:
    """The rows of a batch's hands, its first entry at log index ``first`` (hand ``i``'s commit at
    ``first + i * batch.step``, its reveal next when created closed). What a batch's hands share is
    read once; a hand costs one tuple."""
    k, closed = batch.step, batch.closed
    tenant, deck, version, dealt, created = (
        batch.tenant,
        batch.deck,
        batch.version,
        batch.dealt,
        batch.created_ms,
    )
    seeds = encode_seeds(batch.client_seeds)
    state, closed_ms = int(batch.state), created if closed else None
    revealed: Sequence[bytes | None] = (
        batch.server_seeds if batch.server_seeds is not None else [None] * len(batch)
    )
    commitments, sealed = batch.commitments, batch.sealed_seeds
    rows: list[HandRow] = []
    add = rows.append
    for i, hand_id in enumerate(batch.hand_ids):
        index = first + i * k
        add(
            (
                hand_id, tenant, None, deck, version, commitments[i], sealed[i], seeds,
                state, dealt, created, index, closed_ms, revealed[i], index + 1 if closed else None, None,
            )
        )  # fmt: skip
    return rows


def token_record(row: Sequence[Any]) -> TokenRecord:
    """A ``SELECT TOKEN_COLUMNS`` row of either engine."""
    return TokenRecord(row[0], row[1], row[2], bytes(row[3]), int(row[4]), row[5], _int(row[6]))


def token_row(token: TokenRecord) -> tuple[Any, ...]:
    """The values of ``TOKEN_COLUMNS`` for an INSERT: what ``token_record`` reads back."""
    return (
        token.token_id,
        token.tenant,
        token.role,
        token.digest,
        token.created_ms,
        token.label,
        token.revoked_ms,
    )


def entries_in_order(rows: Iterable[tuple[int, Any]]) -> Iterator[bytes]:
    """The entries of ``SELECT idx, entry FROM log_entries ORDER BY idx``, for the
    read-only audits; a gap raises (an auditor would see a missing entry as empty)."""
    for expected, (idx, entry) in enumerate(rows):
        if idx != expected:
            raise ValueError(f"log entry {expected} is missing (next stored index is {idx})")
        yield bytes(entry)


def encode_seeds(seeds: Sequence[bytes]) -> bytes:
    """Client seeds as one column: ``u32(k) || lp(s1) .. lp(sk)``."""
    return u32(len(seeds)) + b"".join(lp(s) for s in seeds)


def decode_seeds(data: bytes) -> tuple[bytes, ...]:
    """The client seeds of ``encode_seeds``; ValueError for anything else. Bounded by the column's
    own size before it loops: a count of 4 billion in a damaged row is refused, not iterated."""
    if len(data) < 4:
        raise ValueError("corrupt client seed column")
    count, pos, out = int.from_bytes(data[:4], "big"), 4, []
    if count > min(MAX_CLIENT_SEEDS, (len(data) - 4) // 4):
        raise ValueError("corrupt client seed column")
    for _ in range(count):
        if pos + 4 > len(data):
            raise ValueError("corrupt client seed column")
        n = int.from_bytes(data[pos : pos + 4], "big")
        if pos + 4 + n > len(data):
            raise ValueError("corrupt client seed column")
        out.append(data[pos + 4 : pos + 4 + n])
        pos += 4 + n
    if pos != len(data):
        raise ValueError("corrupt client seed column")
    return tuple(out)
