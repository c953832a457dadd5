"""Sending fuzzed bodies to the live dealer, and judging every answer.

Bodies go out as bytes (``request_serializer=None``), so what hypothesis made
is exactly what the server reads. Each answer must be one of:

* OK, with a response that parses and is *right* (the cards of a new hand
  are a permutation of its deck, a checkpoint verifies under the log key, an
  inclusion proof leads to its signed root, a closed hand verifies, ...);
* a status the dealer chose, other than INTERNAL/UNKNOWN/UNAVAILABLE, with a
  ``grpc-status-details-bin`` trailer holding a google.rpc.Status of the same
  code and message and an ErrorInfo (domain fairdeck.dev, a stable reason),
  and a message with no stack trace, file path or exception name. A body
  that does not parse as the request type must get INVALID_ARGUMENT
  MALFORMED_REQUEST, and one that parses must not;
* a status gRPC made itself, only where this fuzzer caused it: RESOURCE_EXHAUSTED
  for a body over the message limit, DEADLINE_EXCEEDED for a call sent with a
  deadline of milliseconds, CANCELLED for a call it cancelled.

A problem does not stop the run: it is recorded (with the smallest body that
showed it) so one bug does not hide the rest, and the test fails at the end.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message_factory, text_format
from google.protobuf.message import DecodeError, Message
from google.rpc import error_details_pb2, status_pb2

from fairdeck.client.models import Hand
from fairdeck.core.decks import SPEC_NAMES, DeckSpec
from fairdeck.core.seeds import check_hand_id
from fairdeck.log import merkle
from fairdeck.log.checkpoint import Checkpoint
from fairdeck.log.note import Verifier
from fairdeck.log.receipts import InclusionProof, open_signed_checkpoint, verify_consistency
from fairdeck.v1 import audit_pb2, dealer_pb2
from fairdeck.v1 import dealer_pb2 as pb
from tests.support.fuzz_plausible import World
from tests.support.fuzz_wire import MAX_MESSAGE_BYTES

DOMAIN = "fairdeck.dev"
DETAILS_KEY = "grpc-status-details-bin"
CALL_TIMEOUT = 20.0  # an answer later than this is a hang
WINDOW = 16  # calls in flight at once
SMALL_BATCH = 8  # DealHands: hands a call may always deal
SUPPLY_EVERY = 8  # fuzzed calls that use up open hands, per hand opened for them
CONSUME_OPEN_HANDS = frozenset({"AddClientSeeds", "ShuffleHand", "DrawCards", "DealHand", "CloseHand"})
AWAIT_AHEAD = 5
"""Calls judged after one wait, at most: fewer wake-ups, while judging lags the answers by little."""
SHORT_DEADLINES = (0.001, 0.005, 0.02)
ONCE = frozenset({"structured", "raw"})
"""Kinds made without the world: a body sent again, the same way, to the same RPC would be
answered from the same checks, so it is not sent again (``Fuzzer.repeats`` counts them).
Plausible bodies name hands whose state moves on, and two calls of one batch race."""
# Codes the dealer may choose for a request it refuses (each with an ErrorInfo).
DEALER_CODES = {
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.ABORTED,
}
# Signs of a leaked stack trace, file path or exception in a message.
LEAKS = re.compile(
    r"Traceback|File \"|\.py\b|line \d+|(?:/[\w.-]+){2,}|[A-Za-z]:\\\\|\b[A-Z]\w*(?:Error|Exception)\b"
)
REASON = re.compile(r"[A-Z][A-Z0-9_]{1,62}")


@dataclass(frozen=True)
class Rpc:
    service: str
    name: str
    request: type[Message]
    response: type[Message]
    streaming: bool

    @property
    def path(self) -> str:
        return f"/{self.service}/{self.name}"


def all_rpcs() -> list[Rpc]:
    """Every RPC of DealerService and AuditService, from the descriptors."""
    out = []
    for module, name in ((dealer_pb2, "DealerService"), (audit_pb2, "AuditService")):
        service = module.DESCRIPTOR.services_by_name[name]
        for m in service.methods:
            out.append(
                Rpc(
                    service.full_name,
                    m.name,
                    message_factory.GetMessageClass(m.input_type),
                    message_factory.GetMessageClass(m.output_type),
                    m.server_streaming,
                )
            )
    return out


@dataclass(frozen=True)
class Outgoing:
    """One fuzzed call: how the body was made, the body, and how the client behaves."""

    kind: str  # structured | plausible | raw, "+oversized" when grown past the limit
    body: bytes
    behaviour: str = "wait"  # wait | deadline | cancel
    deadline: float = CALL_TIMEOUT


@dataclass
class Outcome:
    code: grpc.StatusCode
    details: str
    trailing: tuple[tuple[str, str | bytes], ...]
    responses: list[bytes]


@dataclass
class Violation:
    """One kind of wrong answer: how often, and the smallest body that got it."""

    rpc: str
    problem: str
    count: int = 0
    smallest: bytes = b""
    kind: str = ""
    request: str = ""
    code: str = ""
    details: str = ""

    def __str__(self) -> str:
        return (
            f"{self.rpc}: {self.problem} ({self.count}x; status {self.code} {self.details!r})\n"
            f"    smallest body ({self.kind}, {len(self.smallest)} bytes): {_show(self.smallest)}\n"
            f"    parsed: {self.request or '(does not parse)'}"
        )


def _show(body: bytes) -> str:
    return body[:160].hex() + ("..." if len(body) > 160 else "")


def parse(cls: type[Message], body: bytes) -> Message | None:
    try:
        return cls.FromString(body)
    except DecodeError:
        return None


class Fuzzer:
    """One channel to the dealer, the raw callables of every RPC, and the tallies."""

    def __init__(self, channel: grpc.Channel, world: World, verifier: Verifier) -> None:
        self.channel = channel
        self.world = world
        self.verifier = verifier
        self.rpcs = {rpc.name: rpc for rpc in all_rpcs()}
        self.calls: dict[str, Any] = {
            rpc.name: (channel.unary_stream if rpc.streaming else channel.unary_unary)(
                rpc.path, request_serializer=None, response_deserializer=None
            )
            for rpc in self.rpcs.values()
        }
        self.in_flight: deque[tuple[Rpc, Outgoing, Any]] = deque()
        self._supply: deque[Any] = deque()
        self.sent: Counter[str] = Counter()
        self.repeats: Counter[str] = Counter()
        self.distinct: dict[str, dict[str, set[bytes]]] = defaultdict(lambda: defaultdict(set))
        """Digests of the (behaviour, body) of the calls sent, by RPC and kind."""
        self.kinds: dict[str, Counter[str]] = defaultdict(Counter)
        self.outcomes: dict[str, Counter[str]] = defaultdict(Counter)
        self.violations: dict[str, dict[str, Violation]] = defaultdict(dict)
        # Verdicts of pure checks, by their whole input: the same error trailer, closed hand
        # or signed checkpoint comes back thousands of times (294 distinct trailers in 25,135
        # answers), and the same input gets the same verdict. Only successes are kept.
        self._error_infos: dict[tuple[Any, ...], tuple[error_details_pb2.ErrorInfo | None, str | None]] = {}
        self._verified_hands: set[bytes] = set()
        self._opened: dict[bytes, Checkpoint] = {}
        self._checks: dict[str, Callable[[Any, list[Any]], str | None]] = {
            "OpenHand": self._open_hand,
            "AddClientSeeds": self._hand_reply,
            "ShuffleHand": self._hand_reply,
            "DrawCards": self._draw_cards,
            "DealHand": self._deal_hand,
            "DealNewHand": self._deal_new_hand,
            "DealHands": self._deal_hands,
            "CloseHand": self._hand_reply,
            "GetHand": self._hand_reply,
            "GetCheckpoint": self._checkpoint,
            "ListEntries": self._list_entries,
            "GetInclusionProof": self._inclusion_proof,
            "GetConsistencyProof": self._consistency_proof,
            "GetPublicKey": self._public_key,
        }

    # -- sending ------------------------------------------------------------------------------

    def send(self, rpc: Rpc, batch: Sequence[Outgoing]) -> None:
        """Start the batch's calls; judge the oldest calls once more than WINDOW are in flight.

        Judging lags sending, so hypothesis draws the next batch while the dealer
        answers this one; problems are recorded with their own bodies, not raised."""
        for out in batch:
            if self._repeat(rpc, out):
                continue
            out = self._affordable(rpc, out)
            self.in_flight.append((rpc, out, self._start(rpc, out)))
        if rpc.name in CONSUME_OPEN_HANDS:
            for _ in range(max(1, len(batch) // SUPPLY_EVERY)):
                self._supply_open_hand()
        while len(self.in_flight) > WINDOW:
            oldest, _, call = self.in_flight[0]
            if not oldest.streaming and not call.done():
                self._await_newest(min(len(self.in_flight) - WINDOW, AWAIT_AHEAD))
            self._settle()

    def _await_newest(self, count: int) -> None:
        """Wait once for the newest unary call of the ``count`` oldest in flight. The dealer
        answers about in order, so the older ones are done by then and judging them waits on
        none: waiting on each in turn cost a wake-up of this thread per call, about a tenth of
        the fuzzer's CPU. A stream is not waited on here (its responses are read as it is judged)."""
        for i in range(count - 1, -1, -1):
            rpc, _, call = self.in_flight[i]
            if not rpc.streaming:
                with contextlib.suppress(grpc.FutureCancelledError):
                    call.exception()  # returns once the call is done, whatever its status
                return

    def _repeat(self, rpc: Rpc, out: Outgoing) -> bool:
        """Whether ``out`` is a body of a kind in ONCE already sent to ``rpc`` the same way;
        else it is noted as sent."""
        kind = out.kind.split("+")[0]
        key = hashlib.blake2b(f"{out.behaviour} {out.deadline}".encode() + out.body, digest_size=16).digest()
        seen = self.distinct[rpc.name][kind]
        if kind in ONCE and key in seen:
            self.repeats[rpc.name] += 1
            return True
        seen.add(key)
        return False

    def drain(self) -> None:
        """Judge every call still in flight."""
        while self.in_flight:
            self._settle()
        while self._supply:
            self._take_supply()

    def _supply_open_hand(self) -> None:
        """Open one more hand (not a fuzzed call): the RPCs that need open hands use them up."""
        while self._supply and self._supply[0].done():
            self._take_supply()
        deck = SPEC_NAMES[len(self._supply) % len(SPEC_NAMES)]
        body = pb.OpenHandRequest(deck=deck).SerializeToString()
        self._supply.append(self.calls["OpenHand"].future(body, timeout=CALL_TIMEOUT))

    def _take_supply(self) -> None:
        reply = pb.OpenHandResponse.FromString(self._supply.popleft().result())
        self.world.note_hand(reply.hand)

    def _settle(self) -> None:
        rpc, out, call = self.in_flight.popleft()
        outcome = self._finish(rpc, out, call)
        self.sent[rpc.name] += 1
        self.kinds[rpc.name][out.kind.split("+")[0]] += 1
        self._judge(rpc, out, outcome)

    def _affordable(self, rpc: Rpc, out: Outgoing) -> Outgoing:
        """A DealHands call of more than SMALL_BATCH hands, once the run has dealt as many
        as it can afford, gets a deadline of a millisecond (so the dealer stops at once). A body
        over the message limit keeps its own: gRPC refuses it before the dealer reads it."""
        if rpc.name != "DealHands" or out.behaviour != "wait" or len(out.body) > MAX_MESSAGE_BYTES:
            return out
        request = parse(rpc.request, out.body)
        if not isinstance(request, pb.DealHandsRequest) or request.deck not in SPEC_NAMES:
            return out
        if request.hand_count <= SMALL_BATCH:
            return out
        if request.hand_count > self.world.batch_hands_left:
            return Outgoing(out.kind, out.body, "deadline", SHORT_DEADLINES[0])
        self.world.batch_hands_left -= request.hand_count
        return out

    def _start(self, rpc: Rpc, out: Outgoing) -> Any:
        call = self.calls[rpc.name]
        if rpc.streaming:
            return call(out.body, timeout=out.deadline)
        future = call.future(out.body, timeout=out.deadline)
        if out.behaviour == "cancel":
            future.cancel()
        return future

    def _finish(self, rpc: Rpc, out: Outgoing, call: Any) -> Outcome:
        responses: list[bytes] = []
        if rpc.streaming:
            with contextlib.suppress(grpc.RpcError):
                for message in call:
                    responses.append(message)
                    if out.behaviour == "cancel":
                        call.cancel()
        elif call.cancelled():
            return Outcome(grpc.StatusCode.CANCELLED, "", (), [])
        else:
            with contextlib.suppress(grpc.RpcError):
                responses.append(call.result())
        return Outcome(call.code(), call.details() or "", tuple(call.trailing_metadata() or ()), responses)

    # -- judging ------------------------------------------------------------------------------

    def _judge(self, rpc: Rpc, out: Outgoing, o: Outcome) -> None:
        request = parse(rpc.request, out.body)
        if request is not None and len(out.body) <= 4096:
            self.world.note_body(rpc.name, out.body)
        info, trailer_problem = self._error_info(o)
        self.outcomes[rpc.name][f"{o.code.name} {info.reason if info else '-'}"] += 1
        problem = self._problem(rpc, out, request, o, info, trailer_problem)
        if problem is not None:
            self._record(rpc, out, request, o, problem)

    def _problem(
        self,
        rpc: Rpc,
        out: Outgoing,
        request: Message | None,
        o: Outcome,
        info: error_details_pb2.ErrorInfo | None,
        trailer_problem: str | None,
    ) -> str | None:
        # statuses gRPC makes itself, each only where this fuzzer caused it
        if len(out.body) > MAX_MESSAGE_BYTES:
            if o.code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than max" in o.details:
                return None
            return "a body over the message limit was not refused by gRPC with RESOURCE_EXHAUSTED"
        if o.code == grpc.StatusCode.DEADLINE_EXCEEDED and out.behaviour == "deadline":
            return None
        if o.code == grpc.StatusCode.CANCELLED and out.behaviour == "cancel":
            return None
        if o.code == grpc.StatusCode.OK:
            if request is None:
                return "a body that does not parse was answered OK"
            if out.behaviour == "cancel":  # cancelled too late to matter: some answers may be missing
                return None
            try:
                return self._checks[rpc.name](request, [rpc.response.FromString(r) for r in o.responses])
            except Exception as e:  # what the checks raise: DecodeError, VerificationError, ...
                return f"wrong OK answer: {type(e).__name__}: {e}"
        if o.code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return f"no answer within {out.deadline}s (a hang)"
        # statuses the dealer chose
        if o.code not in DEALER_CODES:
            return f"status {o.code.name}"
        if trailer_problem is not None:
            return trailer_problem
        if info is None:
            return f"no grpc-status-details-bin: a status gRPC made ({o.details[:80]!r}), not the dealer"
        if request is None and info.reason != "MALFORMED_REQUEST":
            return "a body that does not parse was not refused as MALFORMED_REQUEST"
        if request is not None and info.reason == "MALFORMED_REQUEST":
            return "a body that parses was refused as MALFORMED_REQUEST"
        return None

    def _error_info(self, o: Outcome) -> tuple[error_details_pb2.ErrorInfo | None, str | None]:
        """The ErrorInfo of an error, if it has one, and what is wrong with the error."""
        if o.code == grpc.StatusCode.OK:
            return None, None
        key = (o.code, o.details, o.trailing)
        known = self._error_infos.get(key)
        if known is None:
            known = self._error_infos[key] = self._read_error_info(o)
        return known

    def _read_error_info(self, o: Outcome) -> tuple[error_details_pb2.ErrorInfo | None, str | None]:
        leak = "the message leaks internals" if LEAKS.search(o.details) else None
        blobs = [v for k, v in o.trailing if k == DETAILS_KEY]
        if not blobs:
            return None, leak
        if len(blobs) != 1 or not isinstance(blobs[0], bytes):
            return None, "more than one grpc-status-details-bin"
        try:
            status = status_pb2.Status.FromString(blobs[0])
        except DecodeError:
            return None, "grpc-status-details-bin is not a google.rpc.Status"
        infos = [d for d in status.details if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR)]
        if status.code != o.code.value[0] or status.message != o.details or len(infos) != 1:
            return None, "google.rpc.Status disagrees with the call status or lacks one ErrorInfo"
        info = error_details_pb2.ErrorInfo()
        infos[0].Unpack(info)
        if info.domain != DOMAIN or not REASON.fullmatch(info.reason):
            return info, "ErrorInfo without the fairdeck.dev domain or a stable reason"
        if "field" in info.metadata and not info.metadata["field"]:
            return info, "ErrorInfo names an empty field"
        return info, leak

    def _record(self, rpc: Rpc, out: Outgoing, request: Message | None, o: Outcome, problem: str) -> None:
        key = f"{problem} [{o.code.name}]"
        v = self.violations[rpc.name].setdefault(key, Violation(rpc.name, problem))
        v.count += 1
        if v.count == 1 or len(out.body) < len(v.smallest):
            v.smallest, v.kind, v.code, v.details = out.body, out.kind, o.code.name, o.details[:200]
            shown = "" if request is None else text_format.MessageToString(request, as_one_line=True)
            v.request = shown[:300] + ("..." if len(shown) > 300 else "")

    # -- what a right OK answer looks like ---------------------------------------------------------

    def _hand(self, hand: pb.Hand, hand_id: str | None = None) -> str | None:
        check_hand_id(hand.hand_id)
        if hand_id is not None and hand.hand_id != hand_id:
            return f"asked for hand {hand_id!r}, got {hand.hand_id!r}"
        if len(hand.commitment) != 32 or not 1 <= hand.deck_size == DeckSpec.parse(hand.deck).size:
            return "a hand with a bad commitment or deck size"
        if hand.dealt_count > hand.deck_size or len(hand.client_seeds) > 64:
            return "a hand with more cards dealt than its deck, or too many client seeds"
        if any(not 1 <= len(s) <= 256 for s in hand.client_seeds):
            return "a hand with a client seed outside 1..256 bytes"
        closed = hand.state == pb.HAND_STATE_CLOSED
        if closed != hand.HasField("transcript") or closed != hand.HasField("reveal_receipt"):
            return "transcript and reveal receipt do not match the state"
        if closed:
            whole = hand.SerializeToString(deterministic=True)
            if whole not in self._verified_hands:
                Hand.from_proto(hand).verify()
                self._verified_hands.add(whole)
        self.world.note_hand(hand)
        return None

    def _hand_reply(self, request: Any, responses: list[Any]) -> str | None:
        (r,) = responses
        return self._hand(r.hand, request.hand_id)

    def _open_hand(self, request: Any, responses: list[Any]) -> str | None:
        (r,) = responses
        if r.hand.deck != request.deck:
            return "OpenHand answered a hand of another deck"
        fresh = r.hand.state == pb.HAND_STATE_OPEN and not r.hand.client_seeds and not r.hand.dealt_count
        if not request.request_id and not fresh:  # a retry (request_id) returns the hand as it is now
            return "OpenHand answered a hand that is not freshly opened"
        return self._hand(r.hand)

    def _draw_cards(self, request: Any, responses: list[Any]) -> str | None:
        (r,) = responses
        spec = DeckSpec.parse(r.deck)
        if len(r.cards) != request.count or r.position + request.count + r.remaining_count != spec.size:
            return "DrawCards gave the wrong number of cards or positions"
        if not all(spec.contains(c) for c in r.cards):
            return "DrawCards gave a card that is not in the deck"
        if r.remaining_count == 0:
            self.world.hands["dealt"].append(request.hand_id)
        return None

    def _deal_hand(self, request: Any, responses: list[Any]) -> str | None:
        (r,) = responses
        spec = DeckSpec.parse(r.deck)
        if r.position + len(r.cards) != spec.size or not all(spec.contains(c) for c in r.cards):
            return "DealHand did not deal exactly the rest of the deck"
        self.world.hands["dealt"].append(request.hand_id)
        return None

    def _deal_new_hand(self, request: Any, responses: list[Any]) -> str | None:
        (r,) = responses
        if sorted(r.cards) != list(DeckSpec.parse(request.deck).card_ids) or r.hand.deck != request.deck:
            return "DealNewHand's cards are not a permutation of the deck"
        dealt_out = r.hand.state == pb.HAND_STATE_SHUFFLED and r.hand.dealt_count == len(r.cards)
        if not request.request_id and not dealt_out:  # a retry returns the hand as it is now
            return "DealNewHand's hand is not shuffled and dealt out"
        return self._hand(r.hand)

    def _deal_hands(self, request: Any, responses: list[Any]) -> str | None:
        spec = DeckSpec.parse(request.deck)
        hands = [h for r in responses for h in r.hands]
        if len(hands) != request.hand_count or any(r.deck != request.deck for r in responses):
            return f"DealHands dealt {len(hands)} hands, {request.hand_count} asked"
        for h in hands:
            check_hand_id(h.hand_id)
            if sorted(h.cards) != list(spec.card_ids):
                return "a DealHands hand is not a permutation of the deck"
            if bool(h.server_seed) != request.close or h.HasField("reveal_receipt") != request.close:
                return "DealHands revealed seeds of hands it did not close, or not of those it did"
            self.world.note_index(h.reveal_receipt.index if request.close else h.commit_receipt.index)
            self.world.hands["closed" if request.close else "dealt"].append(h.hand_id)
        return None

    def _checkpoint(self, request: Any, responses: list[Any]) -> str | None:
        (r,) = responses
        cp = self._open_signed(r.signed_checkpoint)
        if (cp.size, cp.root) != (r.tree_size, r.root_hash):
            return "GetCheckpoint's size or root is not the signed one"
        return self._signed(cp)

    def _open_signed(self, signed: bytes) -> Checkpoint:
        """``open_signed_checkpoint`` under the log key, once for each distinct signed checkpoint."""
        cp = self._opened.get(signed)
        if cp is None:
            cp = self._opened[signed] = open_signed_checkpoint(signed, self.verifier)
        return cp

    def _signed(self, cp: Checkpoint) -> str | None:
        known = self.world.checkpoints.get(cp.size)
        if known is not None and known.root != cp.root:
            return f"two different roots signed for tree size {cp.size}"
        self.world.note_checkpoint(cp)
        return None

    def _list_entries(self, request: Any, responses: list[Any]) -> str | None:
        (r,) = responses
        start = int(request.page_token) if request.page_token else request.start_index
        size = request.page_size or 100
        indexes = [e.index for e in r.entries]
        if indexes != list(range(start, start + len(indexes))) or len(indexes) > size:
            return "ListEntries returned entries out of order or more than a page"
        # the token names the next index (the dealer may end a page early, never skip entries)
        if r.next_page_token and r.next_page_token != str(start + len(indexes)):
            return f"ListEntries next_page_token {r.next_page_token!r} after {len(indexes)} from {start}"
        if len(indexes) == size and not r.next_page_token:
            return "a full ListEntries page without a next_page_token"
        if indexes:
            self.world.note_index(indexes[-1])
        return None

    def _inclusion_proof(self, request: Any, responses: list[Any]) -> str | None:
        (r,) = responses
        proof = InclusionProof(r.index, r.tree_size, tuple(r.hashes), r.entry, r.signed_checkpoint)
        cp = proof.verify(self.verifier)
        if request.WhichOneof("entry") == "index" and r.index != request.index:
            return f"asked to prove entry {request.index}, got a proof of {r.index}"
        if request.tree_size and r.tree_size != request.tree_size:
            return f"asked for tree size {request.tree_size}, got {r.tree_size}"
        return self._signed(cp)

    def _consistency_proof(self, request: Any, responses: list[Any]) -> str | None:
        (r,) = responses
        old = self.world.checkpoints.get(r.first_tree_size)
        if r.first_tree_size != request.first_tree_size or (
            request.second_tree_size and r.second_tree_size != request.second_tree_size
        ):
            return "GetConsistencyProof answered for other sizes than asked"
        if old is not None:
            cp = verify_consistency(old, r.signed_checkpoint, tuple(r.hashes), self.verifier)
        else:
            cp = self._open_signed(r.signed_checkpoint)
            first = r.first_tree_size
            if len(r.hashes) != (merkle.consistency_proof_length(first, cp.size) if first < cp.size else 0):
                return "a consistency proof of the wrong length"
        if cp.size != r.second_tree_size:
            return "the consistency proof's checkpoint is not for second_tree_size"
        return self._signed(cp)

    def _public_key(self, request: Any, responses: list[Any]) -> str | None:
        (r,) = responses
        if r.verifier_key != self.verifier.to_string() or r.origin != self.verifier.name:
            return "GetPublicKey is not the key in the dealer's data dir"
        return None
