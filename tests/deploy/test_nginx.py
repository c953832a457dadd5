"""The shipped nginx rules (deploy/nginx) in a real nginx: the headers tlog-tiles asks for, the
example server block accepted by ``nginx -t``, and a reader polling the checkpoint through nginx
while a dealer with ``--tiles`` deals, who always finds every tile that checkpoint needs."""

from __future__ import annotations

import datetime
import gzip
import subprocess
import threading
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fairdeck.client import DealerClient
from fairdeck.log.tile_writer import TileWriter
from tests.support.c2sp_log import MemLog
from tests.support.dealers import RunningDealer
from tests.support.nginx import LOCATIONS, REPO, Nginx, require_nginx
from tests.support.tilecheck import checkpoint_of, prove_from_tiles

EXAMPLE = REPO / "deploy" / "nginx" / "fairdeck-tiles.conf"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[Nginx, MemLog]:
    root = tmp_path_factory.mktemp("www")
    items = [b"entry %d" % i for i in range(600)]
    log = MemLog().append(*items)
    TileWriter(root / "log").write(iter(items), log.size, log.origin, log.root(), log.checkpoint())
    (root / "log" / "tile" / "0" / ".000.1.2.tmp").write_bytes(b"half a tile")
    nginx = Nginx(root)
    yield nginx, log
    nginx.stop()


def test_the_checkpoint_is_utf8_text_and_revalidated(served: tuple[Nginx, MemLog]) -> None:
    nginx, log = served
    answer = nginx.get("/log/checkpoint")
    assert answer.status == 200 and answer.body == log.checkpoint()
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"  # tlog-tiles: MUST
    assert answer.headers["cache-control"] == "no-cache"


@pytest.mark.parametrize(
    ("path", "cache"),
    [
        ("/log/tile/0/000", "public, max-age=31536000, immutable"),
        ("/log/tile/0/002.p/88", "public, max-age=60"),
        ("/log/tile/1/000.p/2", "public, max-age=60"),
        ("/log/tile/entries/001", "public, max-age=31536000, immutable"),
        ("/log/tile/entries/002.p/88", "public, max-age=60"),
    ],
)
def test_tiles_are_octet_streams_full_ones_immutable(
    served: tuple[Nginx, MemLog], path: str, cache: str
) -> None:
    answer = served[0].get(path)
    assert answer.status == 200
    assert answer.headers["content-type"] == "application/octet-stream"
    assert answer.headers["cache-control"] == cache
    assert "content-encoding" not in answer.headers


def test_entry_bundles_are_compressed_for_clients_that_ask(served: tuple[Nginx, MemLog]) -> None:
    nginx, _ = served
    plain = nginx.get("/log/tile/entries/000")
    packed = nginx.get("/log/tile/entries/000", {"Accept-Encoding": "gzip, identity"})
    assert packed.headers.get("content-encoding") == "gzip"
    assert gzip.decompress(packed.body) == plain.body


@pytest.mark.parametrize("path", ["/log/tile/0/003", "/log/tile/0/.000.1.2.tmp", "/log/", "/log/tile/0/"])
def test_what_is_not_a_tile_is_404_and_never_cached(served: tuple[Nginx, MemLog], path: str) -> None:
    answer = served[0].get(path)
    assert answer.status == 404
    assert "cache-control" not in answer.headers  # a tile missing now may exist in a second


def _self_signed(where: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "log.example.com")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = where / "cert.pem", where / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


def test_the_example_server_block_is_valid_nginx(tmp_path: Path) -> None:
    binary = require_nginx()
    cert, key = _self_signed(tmp_path)
    text = EXAMPLE.read_text()
    replaced = {
        "/etc/nginx/snippets/fairdeck-tiles.locations.conf": str(LOCATIONS),
        "/etc/ssl/certs/log.example.com.pem": str(cert),
        "/etc/ssl/private/log.example.com.key": str(key),
    }
    for old, new in replaced.items():
        assert old in text, f"the example no longer names {old}: update this test"
        text = text.replace(old, new)
    (tmp_path / "site.conf").write_text(text)
    (tmp_path / "logs").mkdir()
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nerror_log {tmp_path}/logs/error.log;\nevents {{}}\n"
        f"http {{ access_log off; include {tmp_path}/site.conf; }}\n"
    )
    done = subprocess.run(
        [binary, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")], capture_output=True
    )
    assert done.returncode == 0, done.stderr.decode()


def test_a_reader_through_nginx_always_finds_every_tile_of_the_checkpoint(tmp_path: Path) -> None:
    """The dealer deals (and signs a checkpoint every 20 ms) while a reader polls the checkpoint
    through nginx and proves each new one from tiles fetched through nginx alone."""
    root = tmp_path / "www"
    dealer = RunningDealer(tmp_path / "data", tiles=root / "log", checkpoint_interval=0.02, rate_limit=0)
    dealer.start()
    stop = threading.Event()
    errors: list[BaseException] = []

    def deal() -> None:
        try:
            with DealerClient(dealer.target) as client:
                while not stop.is_set():
                    client.close_hand(client.deal_new_hand("standard", client_seeds=["x"]).hand.hand_id)
        except BaseException as e:
            errors.append(e)

    with Nginx(root) as nginx:
        dealing = threading.Thread(target=deal)
        dealing.start()

        def fetch(rel: str) -> bytes:
            answer = nginx.get(f"/log/{rel}")
            assert answer.status == 200, f"{rel}: HTTP {answer.status}"
            return answer.body

        proved: list[int] = []
        previous = None
        try:
            deadline = time.monotonic() + 120  # a bound on a wait, not a timing bar
            while (len(proved) < 25 or proved[-1] <= 300) and not errors and time.monotonic() < deadline:
                answer = nginx.get("/log/checkpoint")
                if answer.status != 200 or (previous and checkpoint_of(answer.body).size == previous.size):
                    continue
                previous = prove_from_tiles(fetch, answer.body, previous, samples=3)
                proved.append(previous.size)
        finally:
            stop.set()
            dealing.join()
            dealer.close()
    assert not errors, errors[0]
    assert proved == sorted(proved) and proved[-1] > 256, proved


def test_an_audit_through_nginx_reads_compressed_bundles(tmp_path: Path) -> None:
    """``fairdeck audit --tiles http://...`` asks for gzip (tlog-tiles: clients SHOULD), nginx sends
    the bundles compressed, and the report is the one from the data dir."""
    import json
    import sys

    root = tmp_path / "www"
    dealer = RunningDealer(tmp_path / "data", tiles=root / "log", rate_limit=0)
    dealer.start()
    with DealerClient(dealer.target) as client:
        for _ in range(150):
            client.close_hand(client.deal_new_hand("standard", client_seeds=["x"]).hand.hand_id)
    dealer.close()
    vkey = subprocess.run(
        [sys.executable, "-m", "fairdeck.cli", "key", "--data", str(tmp_path / "data")],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    with Nginx(root) as nginx:
        assert (
            nginx.get("/log/tile/entries/000", {"Accept-Encoding": "gzip, identity"}).headers[
                "content-encoding"
            ]
            == "gzip"
        )
        reports = []
        for source in (["--tiles", f"{nginx.url}/log"], ["--data", str(tmp_path / "data")]):
            done = subprocess.run(
                [sys.executable, "-m", "fairdeck.cli", "audit", *source, "--key", vkey, "--json"],
                capture_output=True, text=True, timeout=120,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
            report = json.loads(done.stdout)
            report.pop("seconds")
            reports.append(report)
    assert reports[0] == reports[1] and reports[0]["closed"] == 150
