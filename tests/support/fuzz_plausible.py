"""Requests near the valid ones, so the fuzz reaches past validation.

``World`` is what the fuzzer has learnt from the dealer's answers so far:
real hand ids by state, the log size, the signed checkpoints, and the bodies
sent to each RPC (which ``wire.raw`` corrupts). A plausible request is built
from the *choices* of a ``Genome`` (a real deck or a near miss, which hand and
which edit of its id, a seed count around the limit, a size around the log's
or a signed one), resolved against the world as it is when its batch is made,
just before it is sent: a hand id chosen late in the run is one the dealer
issued a moment ago.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable

from google.protobuf.message import Message

from fairdeck.core.decks import SPEC_NAMES, DeckSpec
from fairdeck.log.checkpoint import Checkpoint
from fairdeck.v1 import audit_pb2 as apb
from fairdeck.v1 import dealer_pb2 as pb
from tests.support.fuzz_wire import Genome

U64 = 2**64 - 1
STATES = ("open", "shuffled", "dealt", "closed")
POOL = 512  # hands remembered per state, bodies per RPC

NEAR_DECKS = (
    "", "Standard", "STANDARD", "standard ", " standard", "standard\x00", "standard\n", "shoe-0",
    "shoe-9", "shoe-01", "shoe-+1", "shoe--1", "shoe-1.0", "shoe-", "shoe", "shoe-١", "joker",
    "shor", "ｓｔａｎｄａｒｄ", "short\u200b",
)  # fmt: skip
DECKS = SPEC_NAMES * 4 + NEAR_DECKS  # four in five decks are real

# Edits of a real hand id: most keep it, the rest land on each side of the id rules.
HAND_ID_EDITS: dict[str, Callable[[str], str]] = {
    "upper": str.upper,
    "drop last": lambda h: h[:-1],
    "one more": lambda h: h + "0",
    "slash": lambda h: h[:-1] + "/",
    "pad to 64": lambda h: (h + "x" * 64)[:64],
    "pad to 65": lambda h: (h + "x" * 65)[:65],
    "empty": lambda h: "",
    "newline": lambda h: h + "\n",
    "nul": lambda h: h + "\x00",
    "space": lambda h: " " + h,
    "fullwidth": lambda h: h.translate({c: c + 0xFEE0 for c in range(0x30, 0x3A)}),
    "never issued": lambda h: "z" + h[::-1],
}
HAND_CHOICES: tuple[tuple[str, str | None], ...] = (
    *((state, None) for state in STATES for _ in range(16)),
    *((STATES[i % 4], edit) for i, edit in enumerate(HAND_ID_EDITS)),
)
REQUEST_IDS = ("none", "none", "none", "fresh", "fresh", "reused", "reused", "64", "65", "bad", "unicode")

SEED_EDGES = (
    pb.ClientSeed(),  # neither text nor data
    pb.ClientSeed(text=""),
    pb.ClientSeed(data=b""),
    pb.ClientSeed(data=b"\x00"),
    pb.ClientSeed(data=b"s" * 255),
    pb.ClientSeed(data=b"s" * 256),
    pb.ClientSeed(data=b"s" * 257),
    pb.ClientSeed(text="\u00e9" * 128),  # 256 bytes
    pb.ClientSeed(text="\u00e9" * 128 + "a"),  # 257 bytes
    pb.ClientSeed(text="e\u0301" * 86),  # 258 bytes as sent, 172 once NFC
    pb.ClientSeed(text="\u2126" * 86),  # ohm signs; NFC makes them omegas
    pb.ClientSeed(text="\x00"),
    pb.ClientSeed(text="\U0001f0a1" * 64),  # 256 bytes of 4-byte characters
)
SEED_COUNTS = (0, 1, 1, 1, 1, 2, 2, 3, 63, 64, 65)
PAGE_TOKENS = (
    "", "0", "-1", "+1", " 1", "1 ", "1e3", "0x10", "²", "١٢", "Ⅻ", "00000000000000000001",
    "9223372036854775807", "9223372036854775808", "18446744073709551615", "18446744073709551616",
    "99999999999999999999", "999999999999999999999",
)  # fmt: skip
PAGE_SIZES = (-(2**31), -1, 0, 0, 1, 1, 2, 3, 7, 999, 1000, 1001, 2**31 - 1)
KINDS = (0, 1, 2, 3, -1, 2**31 - 1)  # ENTRY_KIND_*: unspecified, commit, reveal, then unnamed
EDGE_SIZES = (2**31, 2**32, 2**53, 2**63 - 1, 2**63, U64)
SIZE_ANCHORS = ("zero", "zero", "signed", "signed", "signed", "log", "log", "edge")
# DealHands: mostly a few hands; one in 20 is a chunk (256 a message) or more, which the run
# can afford a dozen times (World.batch_hands_left).
HAND_COUNTS = (
    *[1] * 50, *[2] * 20, *[3] * 10, *[4] * 8, 0, 0, 100_001, 2**31, 2**32 - 1, 255, 256, 257, 100_000, 513
)  # fmt: skip


def _counts() -> tuple[int, ...]:
    sizes = sorted({DeckSpec.parse(n).size for n in SPEC_NAMES})
    edges = {0, 2**31 - 1, 2**32 - 1} | {n + d for n in sizes for d in (-1, 0, 1)}
    return (*range(1, 9), *range(1, 9), *sorted(edges))


DRAW_COUNTS = _counts()


class World:
    """What the fuzzer knows of the live dealer, learnt from its answers."""

    def __init__(self) -> None:
        self.hands: dict[str, deque[str]] = {s: deque(maxlen=POOL) for s in STATES}
        self.bodies: dict[str, deque[bytes]] = {}
        self.log_size = 0
        self.checkpoints: dict[int, Checkpoint] = {}  # signature-checked, by tree size
        self.sizes: list[int] = []
        self.request_ids = [f"fuzz-rid-{i}" for i in range(8)]
        self._fresh = itertools.count()
        self.batch_hands_left = 4_000
        """DealHands: hands the run may still deal in calls of more than a few (see Fuzzer)."""

    # -- learning ----------------------------------------------------------------------------

    def note_hand(self, hand: pb.Hand) -> None:
        if hand.state == pb.HAND_STATE_CLOSED:
            state = "closed"
        elif hand.state == pb.HAND_STATE_OPEN:
            state = "open"
        else:
            state = "dealt" if hand.dealt_count >= hand.deck_size else "shuffled"
        self.hands[state].append(hand.hand_id)
        self.note_index(hand.commit_receipt.index)
        if hand.HasField("reveal_receipt"):
            self.note_index(hand.reveal_receipt.index)

    def note_index(self, index: int) -> None:
        self.log_size = max(self.log_size, index + 1)

    def note_checkpoint(self, cp: Checkpoint) -> None:
        if cp.size not in self.checkpoints:
            self.checkpoints[cp.size] = cp
            self.sizes.append(cp.size)
        self.log_size = max(self.log_size, cp.size)

    def note_body(self, rpc: str, body: bytes) -> None:
        self.bodies.setdefault(rpc, deque(maxlen=POOL)).append(body)

    # -- choosing ----------------------------------------------------------------------------

    def body(self, rpc: str) -> Callable[[int], bytes]:
        """The i-th remembered body sent to ``rpc`` (b"" before the first)."""

        def pick(i: int) -> bytes:
            pool = self.bodies.get(rpc)
            return pool[i % len(pool)] if pool else b""

        return pick

    def hand_id(self, choice: tuple[str, str | None], i: int) -> str:
        state, edit = choice
        pool = self.hands[state] or next((p for p in self.hands.values() if p), None)
        if not pool:
            hand = "0000000000000000000000"
        elif state == "open":  # the newest: older ones were likely shuffled since
            hand = pool[-1 - i % min(len(pool), 8)]
        else:
            hand = pool[i % len(pool)]
        return HAND_ID_EDITS[edit](hand) if edit else hand

    def request_id(self, how: str, i: int) -> str:
        if how == "fresh":
            return f"fuzz-{next(self._fresh)}"
        if how == "reused":
            return self.request_ids[i % len(self.request_ids)]
        return {"none": "", "64": "r" * 64, "65": "r" * 65, "bad": "fuzz/rid", "unicode": "rïd"}[how]

    def size(self, anchor: str, i: int) -> int:
        """A tree size or entry index: 0 and a little more, a signed size, the log's size, or an edge.
        Near a signed size or the log's, half are that size exactly: the others were 6 in 7, and
        an RPC that needs one with a checkpoint got few real answers (GetInclusionProof: 192 on a
        dealer that had just the primed hands)."""
        if anchor == "edge":
            return EDGE_SIZES[i % len(EDGE_SIZES)]
        delta = 0 if i & 1 else i % 7 - 3
        if anchor == "signed" and self.sizes:
            base = self.sizes[(i >> 3) % len(self.sizes)]
        elif anchor == "log":
            base = self.log_size
        else:
            base, delta = 0, i % 4
        return min(max(base + delta, 0), U64)


SEED_TEXTS = ("seat-1", "a", "\u00e9", "e\u0301", "\u2126", "\U0001f0a1", "  ", "\x00x", "日本", "\u202eabc")


def _hand_id(w: World, g: Genome) -> str:
    return w.hand_id(g.pick(HAND_CHOICES), g.number(POOL))


def _request_id(w: World, g: Genome) -> str:
    return w.request_id(g.pick(REQUEST_IDS), g.number(64))


def _seed(g: Genome) -> pb.ClientSeed:
    how = g.number(3)
    if how == 0:
        return pb.ClientSeed(text=g.pick(SEED_TEXTS))
    if how == 1:
        return pb.ClientSeed(data=g.take(1 + g.number(24)))
    return g.pick(SEED_EDGES)


def _seeds(g: Genome) -> list[pb.ClientSeed]:
    """One or two seeds, repeated to one of SEED_COUNTS."""
    some = [_seed(g) for _ in range(1 + g.number(2))]
    return list(itertools.islice(itertools.cycle(some), g.pick(SEED_COUNTS)))


def _size(w: World, g: Genome) -> int:
    return w.size(g.pick(SIZE_ANCHORS), g.number(2**16))


def _page_token(w: World, g: Genome) -> str:
    how = g.number(3)
    return "" if how == 0 else g.pick(PAGE_TOKENS) if how == 1 else str(_size(w, g))


def _inclusion(w: World, g: Genome) -> apb.GetInclusionProofRequest:
    how = g.number(5)
    if how < 2:
        return apb.GetInclusionProofRequest(index=_size(w, g), tree_size=_size(w, g))
    if how < 4:
        return apb.GetInclusionProofRequest(hand_id=_hand_id(w, g), kind=g.pick(KINDS), tree_size=_size(w, g))
    return apb.GetInclusionProofRequest(kind=g.pick(KINDS))


BUILDERS: dict[str, Callable[[World, Genome], Message]] = {
    "OpenHand": lambda w, g: pb.OpenHandRequest(deck=g.pick(DECKS), request_id=_request_id(w, g)),
    "AddClientSeeds": lambda w, g: pb.AddClientSeedsRequest(hand_id=_hand_id(w, g), client_seeds=_seeds(g)),
    "ShuffleHand": lambda w, g: pb.ShuffleHandRequest(
        hand_id=_hand_id(w, g), client_seeds=_seeds(g) if g.number(2) else []
    ),
    "DrawCards": lambda w, g: pb.DrawCardsRequest(hand_id=_hand_id(w, g), count=g.pick(DRAW_COUNTS)),
    "DealHand": lambda w, g: pb.DealHandRequest(hand_id=_hand_id(w, g)),
    "DealNewHand": lambda w, g: pb.DealNewHandRequest(
        deck=g.pick(DECKS), client_seeds=_seeds(g), request_id=_request_id(w, g)
    ),
    "DealHands": lambda w, g: pb.DealHandsRequest(
        deck=g.pick(DECKS),
        hand_count=g.pick(HAND_COUNTS),
        client_seeds=_seeds(g) if g.number(2) else [],
        close=bool(g.number(2)),
    ),
    "CloseHand": lambda w, g: pb.CloseHandRequest(hand_id=_hand_id(w, g)),
    "GetHand": lambda w, g: pb.GetHandRequest(hand_id=_hand_id(w, g)),
    "GetCheckpoint": lambda w, g: apb.GetCheckpointRequest(),
    "ListEntries": lambda w, g: apb.ListEntriesRequest(
        start_index=_size(w, g), page_size=g.pick(PAGE_SIZES), page_token=_page_token(w, g)
    ),
    "GetInclusionProof": _inclusion,
    "GetConsistencyProof": lambda w, g: apb.GetConsistencyProofRequest(
        first_tree_size=_size(w, g), second_tree_size=_size(w, g)
    ),
    "GetPublicKey": lambda w, g: apb.GetPublicKeyRequest(),
}


def plausible(rpc: str, world: World) -> Callable[[Genome], Message]:
    """Near-valid requests of one RPC, each from the choices of a Genome, resolved against the
    world as it is then; a KeyError for an RPC not added here yet."""
    build = BUILDERS[rpc]
    return lambda g: build(world, g)
