"""C2SP tlog-policy files in the verifier page, in headless Chromium and Firefox, held to the Python
reader (fairdeck.log.policy) and to `fairdeck verify --policy`:

- every policy of docs/vectors/fairdeck-tlog-policy-v1.json read alike (what it holds, its
  quorum's verdict on every set of witnesses, its verdict on each checkpoint note), each invalid
  one refused in the same words, naming the same line;
- some hundreds of damaged policies (lines dropped, doubled or swapped, words replaced, octets
  that are not UTF-8, Unicode spaces, control octets) read alike, word for word;
- hand proofs cosigned by some witnesses, checked under policies: the page's line is
  `fairdeck verify --policy`'s;
- a player pastes a policy, or chooses its file (octets that are not UTF-8 kept as they are).
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from fairdeck.log.cosignature import CosignatureError, Cosigner, add_cosignatures
from fairdeck.log.policy import TlogPolicy
from tests.support import browser
from tests.support.page_vectors import LOG, PROOFS, WITNESS

VECTORS: dict[str, Any] = json.loads((browser.VECTORS / "fairdeck-tlog-policy-v1.json").read_text())
KEY: str = PROOFS["log_key"]
W = [Cosigner.from_seed(f"witness.test/w{i}", bytes([i]) * 32) for i in (1, 2, 3)]
VK = [w.verifier.to_string() for w in W]


def esc(text: str) -> str:
    """A lone surrogate (an octet that is not UTF-8, in a name) as "\\udce9": how the harness brings it."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def reading(data: bytes, subsets: list[list[str]], notes: list[str]) -> dict[str, Any]:
    """What the Python reader makes of a policy file, in the shape the harness gives the page's."""
    try:
        policy = TlogPolicy.parse(data)
    except CosignatureError as e:
        return {"error": esc(str(e)), "policy_error": True}
    wp = policy.witness_policy()
    out_notes: list[dict[str, Any]] = []
    for note in notes:
        if wp is None:  # quorum none: the page judges no note either
            break
        try:
            res = wp.check(note.encode())
        except CosignatureError as e:
            out_notes.append({"error": esc(str(e))})
        else:
            out_notes.append({"signed": list(res.signed), "ok": res.ok, "describe": esc(res.describe())})
    return {
        "logs": [k.to_string() for k in policy.logs],
        "witnesses": [[esc(n), k.to_string()] for n, k in policy.witnesses.items()],
        "quorum": esc(policy.quorum.describe()) if policy.quorum else None,
        "used": [esc(n) for n in wp.witnesses] if wp else None,
        "urls": {esc(k): esc(v) for k, v in policy.urls.items()},
        "met": [True if policy.quorum is None else policy.quorum.met(set(s)) for s in subsets],
        "notes": out_notes,
    }


def every_subset(data: bytes) -> list[list[str]]:
    """Every set of the policy's witnesses, the first 64 (none when it does not parse)."""
    try:
        names = list(TlogPolicy.parse(data).witnesses)
    except CosignatureError:
        return []
    sets = itertools.chain.from_iterable(itertools.combinations(names, r) for r in range(len(names) + 1))
    return [list(c) for c in itertools.islice(sets, 64)]


WORDS = [b"none", b"all", b"any", b"0", b"01", b"1", b"2", b"7", b"100000", b"1000000", b"X1", b"g", b"#",
         b"log", b"witness", b"group", b"quorum", b"\xe9", b"X\xff", b"\xc3", b"\xc3\xa9", b"\xe2\x80\x83",
         b"\xc2\xa0", b"\xc2\x85", b"\xef\xbb\xbf", b"\x0d", b"\x7f", b"\x0b", b"\t", b"  ",
         VK[0].encode(), KEY.encode(), b"https://w.example/"]  # fmt: skip


def damaged(rng: random.Random, text: bytes, count: int, name: str) -> list[tuple[str, bytes]]:
    """Lines dropped, doubled or swapped; a word replaced or inserted; the text cut; CRLF."""
    out = []
    for n in range(count):
        lines = text.split(b"\n")
        kind = rng.choice(["drop", "double", "swap", "word", "insert", "cut", "crlf"])
        i = rng.randrange(len(lines))
        if kind == "drop":
            del lines[i]
        elif kind == "double":
            lines.insert(i, lines[i])
        elif kind == "swap":
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        elif kind in ("word", "insert"):
            words = lines[i].split(b" ")
            k = rng.randrange(len(words))
            if kind == "word":
                words[k] = rng.choice(WORDS)
            else:
                words.insert(k, rng.choice(WORDS))
            lines[i] = b" ".join(words)
        data = b"\n".join(lines)
        if kind == "cut":
            data = data[: rng.randrange(len(data) + 1)]
        elif kind == "crlf":
            data = data.replace(b"\n", b"\r\n", 1)
        out.append((f"{name} {n}: {kind} at line {i + 1}", data))
    return out


def many_witnesses(n: int) -> bytes:
    keys = (Cosigner.from_seed(f"x/{i}", i.to_bytes(32, "big")).verifier.to_string() for i in range(n))
    return "".join(f"witness w{i} {k}\n" for i, k in enumerate(keys)).encode()


def policy_cases() -> list[dict[str, Any]]:
    """(id, the file's bytes, sets of witnesses to ask about, checkpoint notes to judge)."""
    cases: list[tuple[str, bytes, list[str]]] = []
    notes = [c["note"] for c in VECTORS["checkpoints"]["cases"]]
    for v in VECTORS["valid"]:
        cases.append((f"valid: {v['name']}", v["policy"].encode(), []))
    for v in VECTORS["invalid"]:
        cases.append((f"invalid: {v['name']}", v["policy"].encode(), []))
    cases.append(("checkpoints' policy", VECTORS["checkpoints"]["policy"].encode(), notes))
    rng = random.Random(24)
    for v in VECTORS["valid"]:
        cases += [(n, d, []) for n, d in damaged(rng, v["policy"].encode(), 50, f"damaged {v['name']}")]
    for n, d in damaged(rng, VECTORS["checkpoints"]["policy"].encode(), 80, "damaged checkpoints' policy"):
        cases.append((n, d, notes))
    cases += [
        ("empty", b"", []),
        ("a file over 1 MiB", b"#" * (1024 * 1024 + 1), []),
        ("a name of a Latin-1 octet", f"witness w\xe9 {VK[0]}\nquorum w\xe9\n".encode("latin-1"), []),
        ("names split at a Unicode space", f"witness w1\u2003{VK[0]}\nquorum w1\n".encode(), []),
        ("names split at NEL", f"witness w1\u0085{VK[0]}\nquorum w1\n".encode(), []),
        ("a byte order mark", f"\ufeffwitness w1 {VK[0]}\nquorum w1\n".encode(), []),
        ("an invalid key name", b"witness w1 w\xe9+0+" + VK[0].encode()[-45:] + b"\nquorum w1\n", []),
        ("300 witnesses", many_witnesses(300) + b"quorum w1\n", []),
        ("513 witnesses and groups", many_witnesses(513) + b"quorum w1\n", []),
    ]  # fmt: skip
    return [
        {"id": name, "bytes": data, "subsets": every_subset(data), "notes": ns} for name, data, ns in cases
    ]


CASES = policy_cases()


def cosigned(*by: int) -> bytes:
    """The first vector proof, its checkpoint cosigned by these witnesses (1, 2, 3)."""
    proof = json.loads(PROOFS["valid"][0]["text"])
    note = proof["reveal"]["signed_checkpoint"].encode()
    body = note.decode().split("\n\n")[0] + "\n"
    lines = [W[i - 1].cosign(body, 1_800_000_000 + i) for i in by]
    proof["reveal"]["signed_checkpoint"] = proof["commit"]["signed_checkpoint"] = add_cosignatures(
        note, lines
    ).decode()
    return json.dumps(proof, indent=2).encode()


def witness_lines(*names: str) -> str:
    return "".join(f"witness {n} {VK[i]}\n" for i, n in enumerate(names))


POLICIES = {
    "one of one": witness_lines("w1") + "quorum w1\n",
    "any of three": witness_lines("w1", "w2", "w3") + "group g any w1 w2 w3\nquorum g\n",
    "all of three": witness_lines("w1", "w2", "w3") + "group g all w1 w2 w3\nquorum g\n",
    "2 of 3, nested": witness_lines("w1", "w2", "w3") + "group a 2 w1 w2\ngroup b any a w3\nquorum b\n",
    "quorum none": "quorum none\n",
    "Latin-1 name": witness_lines("w1", "w2").replace("w2 ", "w\xe9 ") + "group g all w1 w\xe9\nquorum g\n",
}
PROOF_CASES = [(f"{p} / cosigned by {by or 'none'}", POLICIES[p], by)
               for p in POLICIES for by in [(), (1,), (2, 3), (1, 2, 3)]]  # fmt: skip


@pytest.fixture(scope="module", params=browser.ENGINES)
def page_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    engine: str = request.param
    browser.require_browser(engine)
    job = {
        "log_vectors": {
            "log": LOG,
            "witness": WITNESS,
            "policies": [
                {"bytes_b64": browser.b64(c["bytes"]), "subsets": c["subsets"], "notes": c["notes"]}
                for c in CASES
            ],
        },
        "verify": [
            {
                "id": n,
                "bytes_b64": browser.b64(cosigned(*by)),
                "key": KEY,
                "policy_b64": browser.b64(p.encode("latin-1")),
            }
            for n, p, by in PROOF_CASES
        ],
    }
    return browser.run_shared(job, tmp_path_factory, engine=engine)


def test_the_page_reads_every_policy_as_the_python_reader(page_run: dict[str, Any]) -> None:
    got = page_run["log_vectors"]["policy_files"]
    assert len(got) == len(CASES)
    differ = []
    for case, page in zip(CASES, got, strict=True):
        want = reading(case["bytes"], case["subsets"], case["notes"])
        if page != want:
            differ.append(f"{case['id']}\n  python: {want}\n  page:   {page}")
    assert not differ, f"{len(differ)} of {len(CASES)} differ:\n" + "\n".join(differ[:10])
    # The cases reach both verdicts, and the vectors' lines to blame are the ones named.
    errors = [p for p in got if "error" in p]
    assert 100 < len(errors) < len(got) - 50, len(errors)
    for v, page in zip(VECTORS["invalid"], got[len(VECTORS["valid"]) :], strict=False):
        assert page["error"].startswith(f"policy line {v['line']}:" if v["line"] else "the policy"), page


def test_the_page_checks_a_hand_under_a_policy_as_fairdeck_verify_does(
    page_run: dict[str, Any], tmp_path: Path
) -> None:
    policy = tmp_path / "witnesses.policy"
    verdicts = set()
    for name, text, by in PROOF_CASES:
        policy.write_bytes(text.encode("latin-1"))
        line = browser.python_line(cosigned(*by), tmp_path, KEY, policy=str(policy))
        page = page_run["verify"][name]
        assert page["input_error"] is None, (name, page)
        assert page["line"] == line, (name, page["line"], line)
        verdicts.add(line.split(":")[0])
    assert verdicts == {"OK", "FAILED at step cosignatures"}


def test_the_page_made_no_request_and_raised_no_error(page_run: dict[str, Any]) -> None:
    assert page_run["requests"] == [] and page_run["errors"] == []


@pytest.mark.parametrize("engine", browser.ENGINES)
def test_a_player_pastes_or_chooses_a_policy(engine: str, tmp_path: Path) -> None:
    """The page took only NAME=KEY witnesses and a threshold: the public witness network's policy
    file could not be given at all."""
    browser.require_browser(engine)
    proof = tmp_path / "hand.json"
    proof.write_bytes(cosigned(1))
    latin = tmp_path / "latin-1.policy"  # a comment and a name in octets that are not UTF-8
    latin.write_bytes(
        b"# caf\xe9\n" + witness_lines("w1", "w\xe9").encode("latin-1") + b"group g all w1 w\xe9\nquorum g\n"
    )
    ui = [
        {"id": "pasted", "file": str(proof), "key": KEY, "policy": POLICIES["any of three"]},
        {"id": "chosen", "file": str(proof), "key": KEY, "policy_file": str(latin)},
        {"id": "not a policy", "file": str(proof), "key": KEY, "policy": "witness w1\nquorum w1\n"},
        {"id": "both", "file": str(proof), "key": KEY, "policy": POLICIES["one of one"],
         "witnesses": [f"w1={VK[0]}"]},
    ]  # fmt: skip
    got = browser.run({"ui": ui}, tmp_path, engine=engine)
    pasted = got["ui"]["pasted"]["before"]
    policy = tmp_path / "any.policy"
    policy.write_text(POLICIES["any of three"])
    assert (
        pasted["ok"]
        and browser.python_line(proof.read_bytes(), tmp_path, KEY, policy=str(policy))
        in pasted["verdict_help"]
    )
    assert pasted["checks"]["cosignatures"] == "pass", pasted["checks"]
    assert "which meets its quorum 1 of (w1, w2, w3)" in pasted["check_details"]["cosignatures"], pasted
    chosen = got["ui"]["chosen"]["before"]
    line = browser.python_line(proof.read_bytes(), tmp_path, KEY, policy=str(latin))
    # The name's octet reaches the verdict as a lone surrogate, which a browser driver may bring
    # back as U+FFFD: either way, the line is fairdeck verify's.
    assert line.startswith("FAILED at step cosignatures") and "\udce9" in line, line
    assert chosen["verdict_line"] in (f"\u2718 {line}", f"\u2718 {line}".replace("\udce9", "\ufffd")), (
        chosen["verdict_line"],
        line,
    )
    bad = got["ui"]["not a policy"]["before"]
    assert bad["verdict_line"] == "Not fully checked: policy line 1: want `witness <name> <vkey> [<url>]`.", (
        bad
    )
    both = got["ui"]["both"]["before"]
    assert both["verdict_line"].startswith("Not fully checked: give a tlog-policy file or witnesses"), both
    assert got["requests"] == [] and got["errors"] == []
