"""client/web as an npm package: `npm pack` makes the tarball, a fresh project installs it, and a
Node.js program and a strict TypeScript program use it as a game server would. The program
verifies hand proofs and transcripts as `fairdeck verify` does and reads error details that
Python's protobuf wrote; the TypeScript types declare exactly what the code exports."""

from __future__ import annotations

import json
import re
import subprocess
import tarfile
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import any_pb2, duration_pb2
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, error_details_pb2, status_pb2

from tests.support import browser
from tests.support.page_vectors import PROOFS, PROOFS_V2, TRANSCRIPTS

NAME = "@fairdeck/verifier"
MODULES = [
    "bytes",
    "codeal/group",
    "codeal/hand",
    "codeal/handfile",
    "codeal/handseat",
    "codeal/index",
    "codeal/logged",
    "codeal/proof",
    "codeal/report",
    "codeal/seat",
    "codeal/shares",
    "handproof",
    "index",
    "log",
    "messages",
    "policy",
    "rotation",
    "spec",
    "status",
    "strictjson",
    "tlogproof",
    "verify",
    "words",
]
LIBRARY = ["LICENSE", "index.d.ts", "README.md", "package.json"] + [f"src/{m}.js" for m in MODULES]


def npm(*args: str, cwd: Path, timeout: float = 300) -> str:
    done = subprocess.run(["npm", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"npm {' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return done.stdout


def node(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["node", str(script), *args], cwd=script.parent, capture_output=True, text=True, timeout=120
    )


def status(code: int, message: str, reason: str, field: str | None, delay_ns: int | None) -> bytes:
    """A google.rpc.Status as the dealer writes it, made here by Python's protobuf."""
    info = error_details_pb2.ErrorInfo(reason=reason, domain="fairdeck.dev")
    if field:
        info.metadata["field"] = field
    details = [any_pb2.Any()]
    details[0].Pack(info)
    if delay_ns is not None:
        retry = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration())
        retry.retry_delay.FromNanoseconds(delay_ns)
        details.append(any_pb2.Any())
        details[1].Pack(retry)
    return status_pb2.Status(code=code, message=message, details=details).SerializeToString()


TRAILERS = {
    "unknown deck": status(code_pb2.INVALID_ARGUMENT, "unknown deck", "UNKNOWN_DECK", "deck", None),
    "rate limited": status(code_pb2.RESOURCE_EXHAUSTED, "slow down", "RATE_LIMITED", None, 1_250_000_000),
    "no details": status_pb2.Status(code=code_pb2.INTERNAL, message="ünïcode").SerializeToString(),
    # Groups (wire types 3 and 4), nested, in an unknown field: protobuf's parsers skip them.
    "an unknown group": (
        status(code_pb2.INVALID_ARGUMENT, "unknown deck", "UNKNOWN_DECK", "deck", None)
        + b"\x4b\x08\x01\x53\x10\x02\x54\x4c"
    ),
}
MALFORMED = {
    "a truncated varint": b"\x08\x80",
    "a length past the end": b"\x12\x05ab",
    "bad UTF-8 in the message": b"\x12\x02\xc3\x28",
    "an 11-byte varint": b"\x08" + b"\xff" * 10 + b"\x01",
    "a field number past 2^29 - 1": b"\xf8\xff\xff\xff\x7f\x01",
    "an end-group with no start": b"\x08\x03\x4c",
    "a group that does not end": b"\x08\x03\x4b\x08\x01",
    "a group ended by another number": b"\x4b\x08\x01\x54",
}

CONSUMER = r"""
import { readFileSync } from "node:fs";
import * as pkg from "@fairdeck/verifier";
const job = JSON.parse(readFileSync(process.argv[2], "utf8"));
const out = { exports: Object.keys(pkg).sort(), proofs: {}, transcripts: {}, trailers: {}, malformed: {} };
for (const [name, text] of Object.entries(job.proofs)) {
  try {
    const r = pkg.verifyHandProof(text, { key: job.key });
    const size = String(r.checkpoint.size);
    out.proofs[name] = { ok: true, dealt: r.dealt, size, hand: r.transcript.handId };
  } catch (e) {
    if (!(e instanceof pkg.VerificationError)) throw e;
    out.proofs[name] = { ok: false, line: `FAILED at step ${e.step}: ${e.detail}` };
  }
}
for (const [name, value] of Object.entries(job.transcripts)) {
  try {
    out.transcripts[name] = { ok: true, cards: pkg.verifyTranscript(value).cards.length };
  } catch (e) {
    if (!(e instanceof pkg.VerificationError)) throw e;
    out.transcripts[name] = { ok: false, step: e.step };
  }
}
for (const [name, b64] of Object.entries(job.trailers)) {
  // As @grpc/grpc-js hands it over: a ServiceError whose metadata holds the trailer.
  const get = (k) => (k === pkg.STATUS_DETAILS_KEY ? [Buffer.from(b64, "base64")] : []);
  const error = { code: 3, metadata: { get } };
  out.trailers[name] = pkg.errorDetails(error);
}
for (const [name, b64] of Object.entries(job.malformed)) {
  try {
    pkg.errorDetails(Buffer.from(b64, "base64"));
    out.malformed[name] = "accepted";
  } catch (e) {
    out.malformed[name] = e instanceof pkg.StatusDecodeError ? "StatusDecodeError" : String(e);
  }
}
out.none = pkg.errorDetails({ metadata: { get: () => [] } });
process.stdout.write(JSON.stringify(out));
"""

TYPED = """
import {
  verifyHandProof, verifyTranscript, check, verdictLine, errorDetails, VerificationError,
  type ErrorDetails, type VerifiedHandProof, type Step,
} from "@fairdeck/verifier";
import * as pkg from "@fairdeck/verifier";

declare const key: string;
const options = { key, witnesses: ["w=k"], threshold: 1 };
const proof: VerifiedHandProof = verifyHandProof(new Uint8Array(0), options);
const size: bigint = proof.checkpoint.size;
const cards: string[] = verifyTranscript("{}").cards;
const line: string | null = verdictLine(check("{}", { key }));
const details: ErrorDetails | null = errorDetails({ metadata: { get: (k: string) => [k] } });
const wait: number | null = details ? details.retryDelayMs : null;
try {
  verifyTranscript("{}");
} catch (e) {
  if (e instanceof VerificationError) { const s: Step = e.step; void s; }
}
void size; void cards; void line; void wait;

// Every value the code exports is declared, and nothing else: tsc checks this object against both.
const declared: Record<keyof typeof pkg, true> = EXPORTS;
void declared;
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the tarball, a fresh project with it installed)."""
    browser.require(browser.node_missing())
    tmp = tmp_path_factory.mktemp("npm-package")
    packed = json.loads(npm("pack", "--json", "--pack-destination", str(tmp), cwd=browser.WEB))
    tarball = tmp / packed[0]["filename"]
    project = tmp / "game-server"
    project.mkdir()
    (project / "package.json").write_text(
        json.dumps({"name": "game-server", "private": True, "type": "module"})
    )
    npm("install", "--no-audit", "--no-fund", "--prefer-offline", str(tarball), cwd=project)
    return tarball, project


def test_npm_pack_makes_a_tarball_of_the_library_alone(installed: tuple[Path, Path]) -> None:
    tarball, _ = installed
    with tarfile.open(tarball) as tar:
        names = sorted(m.name.removeprefix("package/") for m in tar.getmembers() if m.isfile())
    assert names == sorted(LIBRARY)
    meta = json.loads((browser.WEB / "package.json").read_text())
    assert meta["name"] == NAME
    assert set(meta["dependencies"]) == {"@noble/hashes", "@noble/curves", "@noble/ciphers"}


def test_the_npm_tarball_ships_the_license_it_names() -> None:
    """package.json said Apache-2.0, and the tarball had no LICENSE file: the license's own terms
    (section 4(a)) ask that a copy go with every redistribution."""
    browser.require(browser.node_missing())
    packed = json.loads(npm("pack", "--dry-run", "--json", cwd=browser.WEB))
    files = {f["path"]: f["size"] for f in packed[0]["files"]}
    assert "LICENSE" in files, sorted(files)
    meta = json.loads((browser.WEB / "package.json").read_text(encoding="utf-8"))
    text = (browser.WEB / "LICENSE").read_text(encoding="utf-8")
    assert meta["license"] == "Apache-2.0" and files["LICENSE"] == len(text.encode())
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_the_package_version_is_the_python_package_version() -> None:
    pyproject = (browser.ROOT / "pyproject.toml").read_text()
    version = re.search(r'^version = "([^"]+)"', pyproject, flags=re.M)
    assert version and json.loads((browser.WEB / "package.json").read_text())["version"] == version.group(1)


def consumer_job(project: Path) -> tuple[str, dict[str, Any]]:
    """Write the consumer script and its job into ``project``. Each test
    that runs the consumer writes them itself: under pytest-xdist a module's tests run on several
    workers, each with its own ``installed`` project, so one test cannot rely on another's files
    (the strict TypeScript test found the consumer missing in a parallel run)."""
    good = PROOFS["valid"][0]["text"]
    tampered = json.loads(good)
    seed = tampered["transcript"]["server_seed"]
    tampered["transcript"]["server_seed"] = ("01" if seed.startswith("00") else "00") + seed[2:]
    fields = ("version", "deck", "hand_id", "commitment", "server_seed", "client_seeds", "cards")
    job: dict[str, Any] = {
        "key": PROOFS["log_key"],
        "proofs": {
            "valid": good,
            "tampered": json.dumps(tampered),
            "format 2": PROOFS_V2["valid"][0]["text"],
        },
        "transcripts": {
            "value": {k: TRANSCRIPTS["valid"][0][k] for k in fields},
            "text": json.dumps({k: TRANSCRIPTS["valid"][0][k] for k in fields}),
            "swapped": {
                **{k: TRANSCRIPTS["valid"][0][k] for k in fields},
                "cards": list(reversed(TRANSCRIPTS["valid"][0]["cards"])),
            },
        },
        "trailers": {k: browser.b64(v) for k, v in TRAILERS.items()},
        "malformed": {k: browser.b64(v) for k, v in MALFORMED.items()},
    }
    (project / "job.json").write_text(json.dumps(job))
    (project / "consumer.mjs").write_text(CONSUMER)
    return good, tampered


def test_an_installed_tarball_verifies_and_reads_error_details(installed: tuple[Path, Path]) -> None:
    _, project = installed
    good, tampered = consumer_job(project)
    done = node(project / "consumer.mjs", "job.json")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    valid = json.loads(good)
    assert got["proofs"]["valid"] == {
        "ok": True,
        "dealt": valid["dealt"],
        "size": str(valid["reveal"]["tree_size"]),
        "hand": valid["transcript"]["hand_id"],
    }
    assert got["proofs"]["format 2"] == got["proofs"]["valid"]  # the same hand, its receipts as tlog-proofs
    tmp = project / "cli"
    tmp.mkdir(exist_ok=True)
    want = browser.python_line(json.dumps(tampered).encode(), tmp, PROOFS["log_key"])
    assert got["proofs"]["tampered"] == {"ok": False, "line": want}
    assert got["transcripts"] == {
        "value": {"ok": True, "cards": 52},
        "text": {"ok": True, "cards": 52},
        "swapped": {"ok": False, "step": "deck"},
    }
    assert got["trailers"]["unknown deck"] == {
        "code": code_pb2.INVALID_ARGUMENT, "message": "unknown deck", "reason": "UNKNOWN_DECK",
        "domain": "fairdeck.dev", "field": "deck", "metadata": {"field": "deck"}, "retryDelayMs": None,
    }  # fmt: skip
    assert got["trailers"]["rate limited"]["reason"] == "RATE_LIMITED"
    assert got["trailers"]["rate limited"]["retryDelayMs"] == 1250
    assert (
        got["trailers"]["no details"]["reason"] == ""
        and got["trailers"]["no details"]["message"] == "ünïcode"
    )
    assert got["malformed"] == dict.fromkeys(MALFORMED, "StatusDecodeError")
    # Each trailer as Python's protobuf reads it (groups in unknown fields skipped), and each
    # malformed one refused by it too.
    assert got["trailers"]["an unknown group"] == got["trailers"]["unknown deck"]
    for raw in MALFORMED.values():
        with pytest.raises(DecodeError):
            status_pb2.Status.FromString(raw)
    assert status_pb2.Status.FromString(TRAILERS["an unknown group"]).message == "unknown deck"
    assert got["none"] is None


def test_commonjs_programs_can_require_it(installed: tuple[Path, Path]) -> None:
    _, project = installed
    script = project / "legacy.cjs"
    script.write_text(
        'const v = require("@fairdeck/verifier");\n'
        'process.stdout.write(typeof v.verifyHandProof + " " + v.SPEC_NAMES.length);\n'
    )
    done = node(script)
    assert done.returncode == 0 and done.stdout == "function 11", done.stderr


def test_strict_typescript_compiles_against_its_types(installed: tuple[Path, Path]) -> None:
    _, project = installed
    consumer_job(project)
    listed = node(project / "consumer.mjs", "job.json")
    assert listed.returncode == 0, listed.stderr
    exports: list[str] = json.loads(listed.stdout)["exports"]
    (project / "typed.ts").write_text(
        TYPED.replace("EXPORTS", "{" + ", ".join(f"{n}: true" for n in exports) + "}")
    )
    (project / "tsconfig.json").write_text(
        json.dumps(
            {
                "compilerOptions": {
                    "strict": True,
                    "noEmit": True,
                    "module": "nodenext",
                    "moduleResolution": "nodenext",
                    "target": "es2022",
                    "lib": ["es2022", "dom"],
                    "types": [],
                    "skipLibCheck": False,
                },
                "files": ["typed.ts"],
            }
        )
    )
    tsc = browser.WEB / "node_modules" / ".bin" / "tsc"
    done = subprocess.run(
        [str(tsc), "-p", "tsconfig.json"], cwd=project, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # The check can fail: a name the types lack is an error.
    (project / "typed.ts").write_text(
        TYPED.replace("EXPORTS", "{" + ", ".join(f"{n}: true" for n in exports) + ", extra: true}")
    )
    bad = subprocess.run(
        [str(tsc), "-p", "tsconfig.json"], cwd=project, capture_output=True, text=True, timeout=120
    )
    assert bad.returncode != 0 and "extra" in bad.stdout


OPTIONS = r"""
import { readFileSync } from "node:fs";
import * as pkg from "@fairdeck/verifier";
const job = JSON.parse(readFileSync(process.argv[2], "utf8"));
const out = {};
for (const [name, options] of Object.entries(job.options)) {
  try {
    pkg.verifyHandProof(job.proof, { key: job.key, ...options });
    out[name] = "verified";
  } catch (e) {
    out[name] = e.constructor.name;
  }
  try {
    const report = pkg.check(job.proof, { key: job.key, ...options });
    out[`${name} (page)`] = report.inputError === null ? "verified" : "input error";
  } catch (e) {
    out[`${name} (page)`] = e.constructor.name;
  }
}
process.stdout.write(JSON.stringify(out));
"""


def verify_with_options(project: Path, name: str, options: dict[str, Any]) -> dict[str, str]:
    """What verifyHandProof (the class of what it raised, or "verified") and check() (the page:
    "input error" or "verified") make of the first vector proof under each set of options."""
    job = {"key": PROOFS["log_key"], "proof": PROOFS["valid"][0]["text"], "options": options}
    (project / f"{name}.json").write_text(json.dumps(job))
    (project / "options.mjs").write_text(OPTIONS)
    done = node(project / "options.mjs", f"{name}.json")
    assert done.returncode == 0, done.stderr
    got: dict[str, str] = json.loads(done.stdout)
    return got


def test_witness_options_that_make_no_policy_are_refused(installed: tuple[Path, Path]) -> None:
    """A threshold with no witnesses (a policy whose list came out empty) verified the proof with
    no cosignature checked, where `fairdeck verify --witness-threshold 2` refuses to run; a
    threshold given as the string "1" said "threshold 1 must be between 1 and the 1 witnesses
    named"; witnesses given as one string were read letter by letter."""
    _, project = installed
    from tests.support.page_vectors import POLICY

    options = {
        "threshold, no witnesses": {"threshold": 2},
        "threshold, empty witnesses": {"witnesses": [], "threshold": 1},
        "threshold as a string": {"witnesses": [POLICY[0]], "threshold": "1"},
        "witnesses as one string": {"witnesses": POLICY[0]},
    }
    got = verify_with_options(project, "options", options)
    assert got["threshold, no witnesses"] == got["threshold, empty witnesses"] == "LogError", got
    assert got["threshold as a string"] == got["witnesses as one string"] == "TypeError", got
    assert got["threshold, no witnesses (page)"] == "input error", got


def test_a_list_of_keys_verifies_a_proof_signed_by_any_of_them(installed: tuple[Path, Path]) -> None:
    """After a key rotation a game server holds the log's keys, old and new. verifyHandProof took one
    key string only: a list was a TypeError, and a key file's text of two keys a LogError."""
    _, project = installed
    from fairdeck.log.note import Signer

    other = Signer.from_seed(PROOFS["log_key"].split("+")[0], bytes(32)).verifier.to_string()
    options = {
        "a list of keys": {"key": [other, PROOFS["log_key"]]},
        "a key file's text": {"key": f"# the log's keys\n{other}\n\n{PROOFS['log_key']}\n"},
        "a list with a key that is not valid": {"key": [PROOFS["log_key"], "not-a-key"]},
        "a list without the key that signed": {"key": [other]},
        "an empty list": {"key": []},
    }
    got = verify_with_options(project, "keys", options)
    assert got["a list of keys"] == got["a key file's text"] == "verified", got
    assert got["a list of keys (page)"] == got["a key file's text (page)"] == "verified", got
    assert got["a list with a key that is not valid"] == "LogError", got
    assert got["a list with a key that is not valid (page)"] == "input error", got
    assert got["a list without the key that signed"] == "VerificationError", got
    assert got["an empty list"] == "TypeError", got


def test_a_policy_file_is_an_option(installed: tuple[Path, Path]) -> None:
    """A game server holding the public witness network's tlog-policy file passes it as it is."""
    _, project = installed
    from tests.support.page_vectors import POLICY

    w1 = POLICY[0].split("=", 1)[1]
    options = {
        "quorum none": {"policy": "quorum none\n"},
        "a quorum the proof lacks": {"policy": f"witness w1 {w1}\nquorum w1\n"},
        "not a policy": {"policy": "witness w1\nquorum w1\n"},
        "beside witnesses": {"policy": "quorum none\n", "witnesses": [POLICY[0]]},
        "not text": {"policy": 5},
    }
    got = verify_with_options(project, "policy", options)
    assert got["quorum none"] == got["quorum none (page)"] == "verified", got
    assert got["a quorum the proof lacks"] == "VerificationError", got
    assert got["not a policy"] == "PolicyFileError" and got["not a policy (page)"] == "input error", got
    assert got["beside witnesses"] == "LogError" and got["beside witnesses (page)"] == "input error", got
    assert got["not text"] == "TypeError", got
