"""Certificates made in the tests: a trustme CA, the dealer's certificate for
127.0.0.1, and client certificates carrying (or not) the fairdeck URI SAN."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Pki:
    dir: Path
    ca: trustme.CA
    ca_pem: Path
    server_cert: Path
    server_key: Path

    @classmethod
    def make(cls, where: Path) -> Pki:
        where.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        server = ca.issue_cert("127.0.0.1", "localhost")
        ca_pem = where / "ca.pem"
        ca.cert_pem.write_to_path(str(ca_pem))
        server_cert, server_key = where / "server.pem", where / "server.key"
        server.cert_chain_pems[0].write_to_path(str(server_cert))
        server.private_key_pem.write_to_path(str(server_key))
        return cls(where, ca, ca_pem, server_cert, server_key)

    def client(self, name: str, *uris: str) -> tuple[Path, Path]:
        """A client certificate signed by this CA with these URI SANs: (cert path, key path)."""
        ca_key = serialization.load_pem_private_key(self.ca.private_key_pem.bytes(), None)
        ca_cert = x509.load_pem_x509_certificate(self.ca.cert_pem.bytes())
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        )
        if uris:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.UniformResourceIdentifier(u) for u in uris]), critical=False
            )
        cert = builder.sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
        cert_path, key_path = self.dir / f"{name}.pem", self.dir / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return cert_path, key_path
