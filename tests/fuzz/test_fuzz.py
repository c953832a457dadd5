"""Fuzzing the live dealer: every RPC of DealerService and AuditService gets EXAMPLES hypothesis
examples of ROUNDS batches of BATCH requests (1,280 structured, 3,840 plausible, 1,280 raw). At
the ``fuzzer`` fixture's teardown on every dealer that was fuzzed (under xdist each worker has its
own), the dealer must be healthy, deal a hand end to end, pass the log audit, have logged nothing
unexpected and stop cleanly.

A request is ``structured`` (any well-typed message: fuzz_wire.py), ``plausible`` (near valid,
real ids and sizes: fuzz_plausible.py) or ``raw`` (random bytes, hand-encoded fields, bodies cut
or corrupted); a structured or raw body already sent the same way is not sent again (fuzz_oracle
ONCE). Rarely a body grows past the message limit, or a call gets a deadline of milliseconds or
is cancelled. fuzz_oracle.py says what a right answer is. CPU is the budget, half the dealer's:
a batch's calls go at once (calls on one hand race), one draw seeds all its choices (a Genome);
answers are judged some calls behind; a problem is recorded, not raised, with its smallest body
(no shrinking; FINDINGS were cut down by hand). Marked slow.
"""

from __future__ import annotations

import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator

import grpc
import pytest
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, Phase, given, seed, settings

from fairdeck.client import DealerClient
from fairdeck.client.audit_client import AuditClient
from fairdeck.client.models import HandState
from fairdeck.log.checkpoint import Checkpoint
from fairdeck.log.note import Signer
from fairdeck.v1 import audit_pb2 as apb
from fairdeck.v1 import dealer_pb2 as dpb
from tests.support import fuzz_wire as wire
from tests.support.dealers import DealerProcess
from tests.support.fixtures import ProcessFactory
from tests.support.fuzz_oracle import DETAILS_KEY, SHORT_DEADLINES, Fuzzer, Outcome, Outgoing, Rpc, all_rpcs
from tests.support.fuzz_plausible import World, plausible
from tests.support.logs import fairdeck
from tests.support.waits import wait_for

GROUP = ("structured",) + ("plausible",) * 3 + ("raw",)  # the dice roll once for each group
LAYOUT = GROUP * 4
BATCH = len(LAYOUT)
EXAMPLES, ROUNDS = 40, 8
"""320 batches (hypothesis' fixed cost, 1 ms an example, is paid once for ROUNDS batches, each
made just before it is sent, so its plausible bodies see the world of that moment): as many
dice rolls, 4 a batch, as the 313 examples of one batch before, and a few more. Hypothesis' own
strategies made 3,756 structured bodies an RPC then, 155 to 769 of them distinct (its draws
repeat); made from a Genome, 1,280 hold 250 to 1,150 distinct ones, at a tenth of the CPU
(bench/README.md). Plausible and raw bodies are all new draws."""
DISTINCT = {"structured": 200, "raw": 700}
"""Distinct requests of the kinds made without the world, at least, for each RPC (structured
ones of an RPC without fields are all the same empty body). Plausible ones are all sent; how
many differ depends on what the dealer has (an RPC fuzzed first on a worker's dealer has
only the primed hands)."""
OK_ANSWERS = 200
RPCS = [rpc.name for rpc in all_rpcs()]
EXPECTED_RPCS = {
    "OpenHand", "AddClientSeeds", "ShuffleHand", "DrawCards", "DealHand", "DealNewHand", "DealHands",
    "CloseHand", "GetHand", "GetCheckpoint", "ListEntries", "GetInclusionProof", "GetConsistencyProof",
    "GetPublicKey",
}  # fmt: skip
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


@pytest.fixture(scope="module")
def served(module_dealer_process_factory: ProcessFactory) -> DealerProcess:
    return module_dealer_process_factory(
        "fuzz",
        "--rate-limit",
        "0",
        "--max-open-hands",
        "0",
        # A batch sends its 8 requests at once: past 4 DealHands streams, the others' refusal
        # is held 1 s (a flood's refusal, docs/api.md), which was 50 s of DealHands' 60 s run.
        # The cap and its hold have their own tests (tests/policy/test_fair.py, test_limits.py).
        "--max-streams",
        "0",
        "--log-level",
        "WARNING",
    )


@pytest.fixture(scope="module")
def fuzzer(served: DealerProcess) -> Iterator[Fuzzer]:
    """The fuzzer of ``served``; once the module's tests that use it are done, the after checks
    run on that dealer if any RPC was fuzzed on it. Under xdist each worker has its own dealer
    and fuzzes a share of the RPCs, so checks in tests of their own could run on a dealer nobody
    fuzzed; here they run after every fuzzed dealer's fuzz, and only then (a failure is an error
    at the teardown of the module's last test on that worker)."""
    world = World()
    signer = Signer.parse((served.data_dir / "log.key").read_text().strip())
    _prime(served.target, world, signer)
    options = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]
    with grpc.insecure_channel(served.target, options=options) as channel:
        fuzzer = Fuzzer(channel, world, signer.verifier)
        yield fuzzer
    if fuzzer.sent:
        _after_the_fuzz(served, fuzzer)


def _prime(target: str, world: World, signer: Signer) -> None:
    """A few hands in every state of several decks, so every RPC has real ids from its first
    example, and a signed checkpoint after each deck's: with one, an RPC fuzzed first on its
    dealer found too few tree sizes with a checkpoint (GetInclusionProof: 192 OK answers)."""
    with (
        DealerClient(target, timeout=20) as c,
        AuditClient(target, verifier=signer.verifier, timeout=20) as log,
    ):
        for deck in ("standard", "short", "jokers", "shoe-2"):
            for _ in range(2):
                world.hands["open"].append(c.open_hand(deck).hand_id)
            shuffled = c.open_hand(deck).hand_id
            c.shuffle(shuffled, ["seat-1", b"\x00seat-2"])
            c.draw(shuffled, 3)
            world.hands["shuffled"].append(shuffled)
            dealt = c.deal_new_hand(deck, client_seeds=["x"]).hand.hand_id
            world.hands["dealt"].append(dealt)
            closed = c.close_hand(c.deal_new_hand(deck).hand.hand_id)
            world.hands["closed"].append(closed.hand_id)
            world.note_index(closed.reveal_receipt.index if closed.reveal_receipt else 0)
            world.note_checkpoint(_settled(log, world.log_size))


def _settled(log: AuditClient, size: int) -> Checkpoint:
    def covering() -> Checkpoint | None:
        cp = log.checkpoint()
        return cp if cp.size >= size else None

    return wait_for(f"a signed checkpoint covering {size} entries", covering)


def _encode(message: Message) -> bytes:
    return message.SerializeToString(deterministic=True)


def makers(rpc: Rpc, world: World) -> dict[str, Callable[[wire.Genome], bytes]]:
    """What makes a body of each kind from the choices of a Genome."""
    structured, near = wire.message(rpc.request.DESCRIPTOR), plausible(rpc.name, world)
    bodies = world.body(rpc.name)
    return {
        "structured": lambda g: _encode(structured(g)),
        "plausible": lambda g: _encode(near(g)),
        "raw": lambda g: wire.raw(bodies, g),
    }


def batch(made: dict[str, Callable[[wire.Genome], bytes]], g: wire.Genome) -> list[Outgoing]:
    """Requests of each kind as LAYOUT says, and for each GROUP of them the dice that rarely
    grow one past the message limit, give it a deadline of milliseconds or cancel it."""
    out = [Outgoing(kind, made[kind](g)) for kind in LAYOUT]
    for group in range(BATCH // len(GROUP)):
        roll = g.number(10_000)
        i = group * len(GROUP) + roll % len(GROUP)
        out[i] = _rolled(out[i], roll)
    return out


def _rolled(out: Outgoing, dice: int) -> Outgoing:
    kind, body = out.kind, out.body
    if 5000 <= dice < 5040:  # 0.08% of requests (a roll per GROUP): each costs 4 MiB on the wire
        k = dice - 5000
        grown = wire.oversized(body, (1, 2, 7)[k % 3], wire.OVERSIZE[k % 3], wire.PIECES[k % 8])
        return Outgoing(f"{kind}+oversized", grown)
    if 6000 <= dice < 6200:
        return Outgoing(kind, body, "deadline", SHORT_DEADLINES[dice % 3])
    if 7000 <= dice < 7200:
        return Outgoing(kind, body, "cancel")
    return out


def test_every_rpc_is_fuzzed() -> None:
    """The RPCs come from the descriptors; a new one fails here until it has plausible requests."""
    assert set(RPCS) == EXPECTED_RPCS
    for name in RPCS:
        assert plausible(name, World()) is not None


@pytest.mark.slow
@pytest.mark.parametrize("name", RPCS)
def test_fuzz(name: str, fuzzer: Fuzzer, served: DealerProcess) -> None:
    rpc = fuzzer.rpcs[name]
    made = makers(rpc, fuzzer.world)
    with AuditClient(served.target, verifier=fuzzer.verifier, timeout=20) as log:
        # The world's size, which RPCs fuzzed before on this worker's dealer grew, as a signed
        # checkpoint's: with it behind the last checkpoint the world knew, most tree sizes had none
        # (NOT_FOUND) and the OK answers of GetInclusionProof fell under OK_ANSWERS or not as
        # xdist happened to order a worker's RPCs (193 and 242 in two orders).
        fuzzer.world.note_checkpoint(_settled(log, fuzzer.world.log_size))
    started, cpu, dealer_cpu = time.monotonic(), time.process_time(), served.cpu_seconds() or 0.0

    @FUZZ_SETTINGS
    @seed(zlib.crc32(name.encode()))  # deterministic, but not the same draws for every RPC
    @given(wire.genomes())
    def run(g: wire.Genome) -> None:
        for _ in range(ROUNDS):
            fuzzer.send(rpc, batch(made, g))

    run()
    fuzzer.drain()
    seconds = time.monotonic() - started
    cpu, dealer_cpu = time.process_time() - cpu, (served.cpu_seconds() or 0.0) - dealer_cpu
    outcomes = fuzzer.outcomes[name]
    distinct = {kind: len(bodies) for kind, bodies in fuzzer.distinct[name].items()}
    summary = (
        f"{name}: {fuzzer.sent[name]} requests in {seconds:.1f}s (CPU: fuzzer {cpu:.1f}s, dealer "
        f"{dealer_cpu:.1f}s); kinds {dict(fuzzer.kinds[name])}; distinct {distinct}; "
        f"repeats not sent {fuzzer.repeats[name]}; "
        f"outcomes {dict(outcomes.most_common())}"
    )
    print(summary)
    assert served.alive(), f"the dealer died: {served.stderr()[-3000:]}"
    assert fuzzer.kinds[name]["plausible"] >= EXAMPLES * ROUNDS * LAYOUT.count("plausible"), summary
    problems = sorted(fuzzer.violations[name].values(), key=lambda v: -v.count)
    assert not problems, "\n".join(map(str, problems)) + "\n" + summary
    # The run reached past validation: every kind was sent, and real answers came back.
    fields = rpc.request.DESCRIPTOR.fields
    assert all(distinct.get(k, 0) >= n for k, n in DISTINCT.items() if fields or k != "structured"), summary
    ok = sum(n for k, n in outcomes.items() if k.startswith("OK "))
    assert ok >= OK_ANSWERS, summary


# Requests the fuzzer found answered INTERNAL, each cut down to a minimal one by hand; kept as
# regression tests now that the dealer answers them (an empty last page, or NOT_FOUND).
FINDINGS = {
    "ListEntries page_token a non-ASCII digit": ("ListEntries", apb.ListEntriesRequest(page_token="²")),
    "ListEntries start_index 2**63": ("ListEntries", apb.ListEntriesRequest(start_index=2**63)),
    "ListEntries page_token 2**63": ("ListEntries", apb.ListEntriesRequest(page_token=str(2**63))),
    "ListEntries start_index + page_size past 2**63": (
        "ListEntries",
        apb.ListEntriesRequest(start_index=2**63 - 1, page_size=2),
    ),
    "GetInclusionProof tree_size 2**63": (
        "GetInclusionProof",
        apb.GetInclusionProofRequest(index=0, tree_size=2**63),
    ),
    "GetConsistencyProof second_tree_size 2**63": (
        "GetConsistencyProof",
        apb.GetConsistencyProofRequest(first_tree_size=1, second_tree_size=2**63),
    ),
    "GetInclusionProof index 2**63": ("GetInclusionProof", apb.GetInclusionProofRequest(index=2**63)),
    "GetInclusionProof hand_id not a hand id": (
        "GetInclusionProof",
        apb.GetInclusionProofRequest(hand_id="x" * 65, kind=apb.ENTRY_KIND_COMMIT),
    ),
}


@pytest.mark.parametrize("finding", sorted(FINDINGS))
def test_fuzz_finding(finding: str, fuzzer: Fuzzer) -> None:
    """Each of these was answered INTERNAL before the dealer checked the range (audit_servicer)."""
    name, request = FINDINGS[finding]
    assert _problems(fuzzer, name, request.SerializeToString()) == []


def test_fuzz_finding_a_page_of_big_entries(fuzzer: Fuzzer, served: DealerProcess) -> None:
    """A page of big entries (the reveals of hands with 64 client seeds of 256 bytes, 17 KB
    each) was answered with gRPC's own RESOURCE_EXHAUSTED "Sent message larger than max", so
    ``fairdeck audit --target`` could not read such a log past it. The dealer now ends a page
    early. 2,000 entries hold a whole page of the audit's (1,000 from a multiple of 1,000), so
    the audit test below reads across them too."""
    seeds = [bytes([i]) * 256 for i in range(64)]
    with DealerClient(served.target, timeout=60) as c:
        dealt = list(c.deal_hands("standard", 1000, client_seeds=seeds, close=True))
    first = dealt[0]
    request = apb.ListEntriesRequest(start_index=first.commit_receipt.index, page_size=1000)
    assert _problems(fuzzer, "ListEntries", request.SerializeToString()) == []


def test_fuzz_an_oversized_deal_hands_body_is_left_to_grpc(fuzzer: Fuzzer) -> None:
    """A DealHands body over the message limit asking for more hands than the run could afford
    was given a deadline of a millisecond like any such call, so its answer was DEADLINE_EXCEEDED
    where the oracle wants gRPC's RESOURCE_EXHAUSTED: a false finding, whenever the dice grew one."""
    body = dpb.DealHandsRequest(deck="standard", hand_count=100_001).SerializeToString()
    grown = wire.oversized(body, 7, wire.OVERSIZE[1], "a")  # an unknown field: it still parses
    assert _problems(fuzzer, "DealHands", grown) == []


def _problems(fuzzer: Fuzzer, name: str, body: bytes) -> list[str]:
    """What the oracle finds wrong with the answer to one request (counted apart from the fuzz)."""
    check = Fuzzer(fuzzer.channel, World(), fuzzer.verifier)
    check.send(check.rpcs[name], [Outgoing("finding", body)])
    check.drain()
    return [str(v) for v in check.violations[name].values()]


def test_the_oracle_judges_again_what_differs_from_an_answer_it_passed(fuzzer: Fuzzer) -> None:
    """The oracle keeps the verdicts of its pure checks (a closed hand, a signed checkpoint, an
    error's trailer) by their whole input: a closed hand it verified, changed in one field, and a
    trailer it passed, with another domain, are each found wrong every time they come back."""
    check = Fuzzer(fuzzer.channel, World(), fuzzer.verifier)
    rpc = check.rpcs["GetHand"]
    body = dpb.GetHandRequest(hand_id=fuzzer.world.hands["closed"][0]).SerializeToString()
    answer = dpb.GetHandResponse.FromString(fuzzer.calls["GetHand"](body, timeout=20))
    tampered = dpb.GetHandResponse()
    tampered.CopyFrom(answer)
    tampered.hand.commitment = bytes(32)
    refused = fuzzer.calls["GetHand"].future(dpb.GetHandRequest(hand_id="x" * 65).SerializeToString())
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    trailer = status_pb2.Status.FromString(dict(refused.trailing_metadata())[DETAILS_KEY])
    info = error_details_pb2.ErrorInfo()
    trailer.details[0].Unpack(info)
    info.domain = "elsewhere.dev"
    trailer.details[0].Pack(info)
    elsewhere = ((DETAILS_KEY, trailer.SerializeToString()),)
    message = refused.details() or ""
    outcomes = (
        Outcome(grpc.StatusCode.OK, "", (), [answer.SerializeToString()]),
        Outcome(grpc.StatusCode.OK, "", (), [tampered.SerializeToString()]),
        Outcome(refused.code(), message, tuple(refused.trailing_metadata()), []),
        Outcome(refused.code(), message, elsewhere, []),
    )
    for outcome in outcomes * 2:
        check._judge(rpc, Outgoing("plausible", body), outcome)
    found = {v.problem.split(":")[0]: v.count for v in check.violations["GetHand"].values()}
    assert found == {"wrong OK answer": 2, "ErrorInfo without the fairdeck.dev domain or a stable reason": 2}


def test_the_after_checks_refuse_a_dealer_nobody_fuzzed(fuzzer: Fuzzer, served: DealerProcess) -> None:
    """They would pass on a dealer nobody fuzzed and say nothing about the fuzz."""
    with pytest.raises(AssertionError, match="nobody fuzzed"):
        _after_the_fuzz(served, Fuzzer(fuzzer.channel, World(), fuzzer.verifier))
    assert served.alive()


def _after_the_fuzz(served: DealerProcess, fuzzer: Fuzzer) -> None:
    """The dealer ``fuzzer`` fuzzed is healthy, deals and audits, logged nothing unexpected and
    stops cleanly (it is stopped)."""
    assert fuzzer.sent, "the after checks ran on a dealer nobody fuzzed: they would check nothing"
    print(f"after the fuzz of {', '.join(sorted(fuzzer.sent))} ({sum(fuzzer.sent.values())} requests):")
    _healthy_deals_and_audits(served, fuzzer)
    _logged_nothing_unexpected_and_stops_cleanly(served)


def _healthy_deals_and_audits(served: DealerProcess, fuzzer: Fuzzer) -> None:
    assert served.alive(), served.stderr()[-3000:]
    with grpc.insecure_channel(served.target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "fairdeck.v1.DealerService"):
            answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING

    with DealerClient(served.target, timeout=20) as c:  # a whole hand through the SDK
        opened = c.open_hand("standard")
        c.add_client_seeds(opened.hand_id, ["after the fuzz"])
        c.shuffle(opened.hand_id, [b"\x00seat-2"])
        first = c.draw(opened.hand_id, 5)
        rest = c.deal(opened.hand_id)
        closed = c.close_hand(opened.hand_id)
    assert closed.state is HandState.CLOSED and len(first.cards + rest.cards) == 52
    closed.verify(commitment=opened.commitment, dealt=first.cards + rest.cards)
    assert closed.reveal_receipt is not None
    with AuditClient(served.target, verifier=fuzzer.verifier, timeout=20) as log:
        _settled(log, closed.reveal_receipt.index + 1)
        log.verify_hand(closed, commitment=opened.commitment)

    key = fuzzer.verifier.to_string()
    reports = {}
    for where in (["--data", str(served.data_dir)], ["--target", served.target]):
        result = fairdeck("audit", *where, "--key", key, "--json")
        reports[where[0]] = result.report
        print(f"fairdeck audit {where[0]}: {result.report}")
    logged = max(closed.reveal_receipt.index + 1, fuzzer.world.log_size)
    for where, report in reports.items():
        assert report["ok"] is True and report["findings"] == [], (where, report["findings"][:5])
        assert report["entries"] == report["tree_size"] >= logged
        assert report["hands"] == report["closed"] + report["open_within_lifetime"]  # nothing voided


def _logged_nothing_unexpected_and_stops_cleanly(served: DealerProcess) -> None:
    """Stops the dealer. An INTERNAL answer or a failing background task logs an ERROR."""
    print(f"dealer CPU {served.cpu_seconds()}s; this process {time.process_time():.1f}s")
    code = served.terminate()
    printed = served.rest_of_stdout()
    log = served.stderr()
    assert (code, printed[-1:]) == (0, ["fairdeck dealer stopped"]), log[-3000:]
    logged = Counter(log.splitlines())  # at --log-level WARNING, every line is a warning or worse
    assert not logged, f"{len(logged)} distinct lines logged:\n" + "\n".join(
        f"{n:6}x {line[:200]}" for line, n in logged.most_common(40)
    )
