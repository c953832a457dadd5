"""A second process that holds the dealer to its tiles: ``python -m tests.support.tiles_collector ARGS``.

Until ``--stop FILE`` exists, it collects every checkpoint it can get from four places: the
AuditService (GetCheckpoint), receipts (GetInclusionProof of a random entry), the witness's
monitoring endpoint (``GET <prefix>/<sha256(origin)>/checkpoint``) and the tiles' own
``checkpoint`` file, the last three through the web server. Each new one must verify under the
log key and be proved from the tiles alone, fetched through the web server: its tree hash, the
inclusion of random entries, and consistency with the largest smaller one proved before (equal
sizes: equal roots). Each result is one JSON line in ``--out``: ``{"source", "size"}`` the first
time a source hands out a proved checkpoint (one proved before, from another source, counts for
it too: whether two sources hand out the same one is a race), ``{"failure"}`` for anything that
does not hold. Dealer calls that fail while it is down are counted, not failures: the tiles must
hold without it.
"""

from __future__ import annotations

import argparse
import bisect
import hashlib
import http.client
import json
import random
import time
import urllib.parse
from pathlib import Path
from typing import IO

import grpc

from fairdeck.log import merkle
from fairdeck.log.checkpoint import Checkpoint, open_checkpoint
from fairdeck.log.note import Verifier
from fairdeck.v1 import audit_pb2, audit_pb2_grpc
from tests.support.tilecheck import prove_from_tiles
from tests.support.waits import pace


class Web:
    """GETs on one host, over one keep-alive connection."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        self.host, self.prefix = parts.netloc, parts.path.rstrip("/")
        self.conn = http.client.HTTPConnection(self.host, timeout=10)

    def get(self, path: str) -> tuple[int, bytes]:
        for attempt in (0, 1):
            try:
                self.conn.request("GET", f"{self.prefix}/{path}")
                response = self.conn.getresponse()
                return response.status, response.read()
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, timeout=10)
                if attempt:
                    raise
        raise AssertionError("unreachable")


class Collector:
    def __init__(self, args: argparse.Namespace, out: IO[str]) -> None:
        self.verifier = Verifier.parse(args.vkey)
        self.tiles = Web(args.tiles)
        self.witness = Web(args.witness) if args.witness else None
        self.target_file = Path(args.target_file)
        self.out = out
        self.rng = random.Random(7)
        self.seen: set[bytes] = set()  # checkpoint bodies tried
        self.proved: dict[bytes, int] = {}  # checkpoint body -> size, for those that held
        self.counted: set[tuple[str, bytes]] = set()  # (source, body) already emitted
        self.sizes: list[int] = []  # proved, sorted
        self.roots: dict[int, bytes] = {}
        self.origin_hash = hashlib.sha256(self.verifier.name.encode()).hexdigest()

    def emit(self, **record: object) -> None:
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()

    def fetch(self, rel: str) -> bytes:
        status, body = self.tiles.get(rel)
        if status != 200:
            raise AssertionError(f"{rel}: HTTP {status}")
        return body

    def prove(self, source: str, note: bytes) -> None:
        text = note.decode("utf-8")
        key = text[: text.index("\n\n")].encode()
        if (source, key) in self.counted:
            return
        if key in self.seen:
            if key in self.proved:  # handed out again, by this source: its signature must hold too
                self.counted.add((source, key))
                try:
                    open_checkpoint(note, self.verifier, self.verifier.name)
                except Exception as e:
                    self.emit(failure=f"{source}: {type(e).__name__}: {e}")
                    return
                self.emit(source=source, size=self.proved[key], at=time.time())
            return
        self.seen.add(key)
        try:
            cp = open_checkpoint(note, self.verifier, self.verifier.name)
            at = bisect.bisect_left(self.sizes, cp.size)
            previous = None
            if at < len(self.sizes) and self.sizes[at] == cp.size:
                previous = Checkpoint(cp.origin, cp.size, self.roots[cp.size])
            elif at > 0:
                previous = Checkpoint(cp.origin, self.sizes[at - 1], self.roots[self.sizes[at - 1]])
            prove_from_tiles(self.fetch, note, previous, samples=3, rng=self.rng)
        except Exception as e:
            self.emit(failure=f"{source}: {type(e).__name__}: {e}")
            return
        if cp.size not in self.roots:
            bisect.insort(self.sizes, cp.size)
            self.roots[cp.size] = cp.root
        self.proved[key] = cp.size
        self.counted.add((source, key))
        self.emit(source=source, size=cp.size, at=time.time())

    def from_dealer(self) -> None:
        target = self.target_file.read_text().strip()
        try:
            with grpc.insecure_channel(target) as channel:
                audit = audit_pb2_grpc.AuditServiceStub(channel)
                latest = audit.GetCheckpoint(audit_pb2.GetCheckpointRequest(), timeout=5)
                self.prove("rpc", bytes(latest.signed_checkpoint))
                if latest.tree_size:
                    index = self.rng.randrange(latest.tree_size)
                    got = audit.GetInclusionProof(audit_pb2.GetInclusionProofRequest(index=index), timeout=5)
                    merkle.verify_inclusion(
                        got.index, got.tree_size, merkle.leaf_hash(got.entry), list(got.hashes),
                        open_checkpoint(got.signed_checkpoint, self.verifier, self.verifier.name).root,
                    )  # fmt: skip
                    self.prove("receipt", bytes(got.signed_checkpoint))
        except grpc.RpcError as e:
            if e.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                self.emit(failure=f"rpc: {e.code().name}: {e.details()}")
            else:
                self.emit(down=e.code().name)

    def run(self, stop: Path) -> None:
        while not stop.exists():
            self.from_dealer()
            if self.witness is not None:
                status, body = self.witness.get(f"{self.origin_hash}/checkpoint")
                if status == 200:
                    self.prove("witness", body)
            status, body = self.tiles.get("checkpoint")
            if status == 200:
                self.prove("tiles", body)
            pace(0.02)  # the collector's rounds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vkey", required=True)
    parser.add_argument("--tiles", required=True, help="the tiles' URL prefix")
    parser.add_argument("--witness", help="the witness's monitoring URL prefix")
    parser.add_argument("--target-file", required=True, help="holds the dealer's host:port")
    parser.add_argument("--stop", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(args.out, "a") as out:
        Collector(args, out).run(Path(args.stop))


if __name__ == "__main__":
    main()
