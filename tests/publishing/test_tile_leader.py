"""One writer of the tiles: ``serve --processes 2 --tiles`` (worker 0 writes them, every worker hands
out only checkpoints whose tiles exist) and two PostgreSQL replicas with ``--tiles`` on one
directory (the advisory lock's holder writes them; when it is killed, the other takes the lead,
completes the tiles and signs on)."""

from __future__ import annotations

import time
from pathlib import Path

from fairdeck.client import AuditClient, DealerClient
from fairdeck_server.cli.audit_sources import database_log
from fairdeck_server.dealing.vault import load_or_create_key
from fairdeck_server.publishing.log_signing import load_log_keys, load_or_create_signer
from tests.support.dealers import DealerProcess
from tests.support.forked_serve import ServeForker
from tests.support.tilecheck import checkpoint_of, missing, prove_from_tiles
from tests.support.waits import pace, wait_for

FAST = ("--checkpoint-interval", "0.05", "--rate-limit", "0")


def deal_and_prove(target: str, vkey: str, tiles: Path, hands: int) -> list[int]:
    """Deal ``hands`` hands through ``target``, each on a new connection (so over every worker),
    and check the tiles of the checkpoint of each hand's proof the moment it is handed out."""
    sizes = []
    for _ in range(hands):
        with DealerClient(target) as dealer, AuditClient(target, verifier=vkey) as audit:
            hand = dealer.deal_new_hand("standard", client_seeds=["x"]).hand
            dealer.close_hand(hand.hand_id)
            proof = audit.inclusion_proof(hand_id=hand.hand_id, reveal=True)
            assert missing(tiles, proof.tree_size) == [], f"checkpoint {proof.tree_size} handed out first"
            sizes.append(proof.tree_size)
    return sizes


def test_processes_share_one_writer_of_the_tiles(tmp_path: Path) -> None:
    tiles = tmp_path / "tiles"
    flags = ("--processes", "2", "--tiles", str(tiles), *FAST)
    with DealerProcess(tmp_path / "data", tmp_path / "serve.log", *flags) as d:
        verifier = load_log_keys(tmp_path / "data" / "log.key").signer.verifier.to_string()
        deal_and_prove(d.target, verifier, tiles, 40)
    log = (tmp_path / "serve.log").read_text()
    assert log.count("leads the log now and writes its tiles") == 1, log
    prove_from_tiles(lambda rel: (tiles / rel).read_bytes(), (tiles / "checkpoint").read_bytes(), samples=10)


def test_replicas_elect_one_writer_and_the_survivor_takes_over(
    tmp_path: Path, pg_url: str, serve_forker: ServeForker
) -> None:
    seed_key, log_key = tmp_path / "seed.key", tmp_path / "log.key"
    load_or_create_key(seed_key, environ={})
    vkey = load_or_create_signer(log_key, "fairdeck.test/tiles").verifier.to_string()
    tiles = tmp_path / "tiles"

    def replica(name: str) -> DealerProcess:
        return DealerProcess(
            tmp_path / name, tmp_path / f"{name}.log",
            "--db", pg_url, "--seed-key-file", str(seed_key), "--log-key-file", str(log_key),
            "--tiles", str(tiles), *FAST, forker=serve_forker,
        )  # fmt: skip

    a = replica("a")
    b = replica("b")
    try:
        deal_and_prove(a.target, vkey, tiles, 10)
        deal_and_prove(b.target, vkey, tiles, 10)

        def leads(name: str) -> bool:
            return "writes its tiles" in (tmp_path / f"{name}.log").read_text()

        assert leads("a") != leads("b"), "exactly one replica leads"
        leader, survivor = (a, b) if leads("a") else (b, a)
        leader.kill9()
        end = time.monotonic() + 30
        sizes = deal_and_prove(survivor.target, vkey, tiles, 10)  # waits for the new leader's checkpoints
        assert time.monotonic() < end
        assert max(sizes) >= 2 * 30 - 20
        assert "writes its tiles" in survivor.stderr()
    finally:
        a.terminate()
        b.terminate()
    _, notes, _ = database_log(pg_url)
    for note in notes:
        assert missing(tiles, checkpoint_of(note).size) == []
    prove_from_tiles(lambda rel: (tiles / rel).read_bytes(), (tiles / "checkpoint").read_bytes(), samples=10)


def test_replicas_with_witnesses_ask_them_once_and_serve_one_final_checkpoint(
    tmp_path: Path, pg_url: str, serve_forker: ServeForker
) -> None:
    """Two replicas, one witness: only the leader asks it (one request per interval, not one per
    replica), and the replica that does not lead serves the same final checkpoint, read from the
    size the leader records."""
    from fairdeck.log.cosignature import CosignatureVerifier, WitnessPolicy
    from tests.support.witness_proxy import Proxy
    from tests.support.witnesses import WitnessProcess, init_witness

    seed_key, log_key = tmp_path / "seed.key", tmp_path / "log.key"
    load_or_create_key(seed_key, environ={})
    vkey = load_or_create_signer(log_key, "fairdeck.test/witnessed").verifier.to_string()
    witness_vkey = init_witness(tmp_path / "w1", "witness.test/w1", vkey)
    witness = WitnessProcess(tmp_path / "w1")
    proxy = Proxy(witness.port)
    policy = WitnessPolicy({"w1": CosignatureVerifier.parse(witness_vkey)}, 1)
    flags = (
        "--db", pg_url, "--seed-key-file", str(seed_key), "--log-key-file", str(log_key),
        "--witness", f"{proxy.url}={witness_vkey}", "--witness-interval", "0.5", *FAST,
    )  # fmt: skip
    a = DealerProcess(tmp_path / "a", tmp_path / "a.log", *flags, forker=serve_forker)
    b = DealerProcess(tmp_path / "b", tmp_path / "b.log", *flags, forker=serve_forker)
    try:
        started = time.monotonic()
        end = started + 4
        with DealerClient(a.target) as da, DealerClient(b.target) as db:
            while time.monotonic() < end:  # the log grows through both replicas, paced, not flat out
                for dealer in (da, db):
                    dealer.close_hand(dealer.deal_new_hand("standard", client_seeds=["x"]).hand.hand_id)
                pace(0.01)
        posts = proxy.posts()
        elapsed = time.monotonic() - started
        assert 2 <= len(posts) <= elapsed / 0.5 + 2, f"{len(posts)} requests in {elapsed:.1f} s"
        sizes = []
        for target in (a.target, b.target):

            def served(target: str = target) -> bool:
                try:
                    with AuditClient(target, verifier=vkey, witness_policy=policy) as audit:
                        sizes.append(audit.checkpoint().size)
                        return True
                except Exception:
                    return False

            wait_for("a final checkpoint served", served, timeout=30, every=0.1)
        assert min(sizes) > 0
    finally:
        a.terminate()
        b.terminate()
        proxy.close()
        witness.stop()
