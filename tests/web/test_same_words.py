"""The page's verifier (client/web, run on Node.js) and `fairdeck verify` say the same line for
the same bytes: the same verdict, the same failed step and the same words, on every vector and
on some thousands of damaged hand proofs and transcripts (characters changed in the text, bytes
of a log entry, lines of a checkpoint, numbers of a receipt, cosignatures under a policy, lines
of a format-2 receipt's tlog-proof text).

The cases are drawn from a fixed seed, so a run is repeatable; a failure names the case."""

from __future__ import annotations

import base64
import json
import random
import string
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fairdeck.log.cosignature import add_cosignatures
from tests.support import browser
from tests.support.page_vectors import POLICY, PROOFS, PROOFS_V2, PROOFS_V3, TRANSCRIPTS, W1, W2
from tests.support.page_vectors import cases as vector_cases

KEY: str = PROOFS["log_key"]
assert PROOFS_V2["log_key"] == KEY  # the format-2 vectors are the format-1 proofs, rewritten
assert PROOFS_V3["keys"]["key 1"] == KEY  # the format-3 log is theirs, rotated twice from it
Case = tuple[str, bytes, str | list[str] | None, tuple[str, ...], int | None]


def text_mutations(rng: random.Random, name: str, text: str, count: int) -> Iterator[Case]:
    """One character changed for another of its kind (a digit for a digit, a letter for a letter...)."""
    for n in range(count):
        i = rng.randrange(len(text))
        c = text[i]
        if c in string.hexdigits:
            pool = "0123456789abcdef" + "AF"
        elif c.isalpha():
            pool = string.ascii_letters + "+/="
        else:
            pool = ' ,:{}[]"\\\n0-.'
        other = rng.choice([x for x in pool if x != c])
        yield f"{name} char {n} at {i}", (text[:i] + other + text[i + 1 :]).encode(), KEY, (), None


def changed(proof: dict[str, Any], change: Callable[[dict[str, Any]], object]) -> bytes:
    d: dict[str, Any] = json.loads(json.dumps(proof))
    change(d)
    return json.dumps(d, indent=2, ensure_ascii=False).encode()


def entry_mutations(rng: random.Random, proof: dict[str, Any], count: int) -> Iterator[Case]:
    """A byte of a receipt's entry changed, or the entry cut or lengthened (re-encoded as base64)."""
    for n in range(count):
        which = rng.choice(["commit", "reveal"])
        raw = bytearray(base64.b64decode(proof[which]["entry"]))
        kind = rng.choice(["byte", "cut", "grow"])
        if kind == "byte":
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        elif kind == "cut":
            del raw[rng.randrange(len(raw)) :]
        else:
            raw += bytes(rng.randrange(1, 4))
        entry = base64.b64encode(bytes(raw)).decode()
        yield (
            f"entry {n}: {which} {kind}",
            changed(proof, lambda d, w=which, e=entry: d[w].update(entry=e)),
            KEY,
            (),
            None,
        )


def note_mutations(rng: random.Random, proof: dict[str, Any], count: int) -> Iterator[Case]:
    """The signed checkpoint: a line replaced, dropped or doubled, a character changed; in both
    receipts (they must agree) or in one."""
    note: str = proof["reveal"]["signed_checkpoint"]
    lines = note.split("\n")
    replacements = ["", "0", "01", "-1", "18446744073709551615", "18446744073709551616", "1 ", "AAAA", "AB==",
                    "AAAA=", "AAA", "A===", "=", "x", "\u2014 x AAAA", "\u2014 ", "\u00e9"]  # fmt: skip
    for n in range(count):
        new = list(lines)
        kind = rng.choice(["replace", "drop", "double", "char"])
        i = rng.randrange(len(new))
        if kind == "replace":
            new[i] = rng.choice(replacements)
        elif kind == "drop":
            del new[i]
        elif kind == "double":
            new.insert(i, new[i])
        elif new[i]:
            j = rng.randrange(len(new[i]))
            new[i] = (
                new[i][:j] + rng.choice(string.ascii_letters + string.digits + "+/= \t") + new[i][j + 1 :]
            )
        text = "\n".join(new)
        both = rng.random() < 0.8

        def put(d: dict[str, Any], t: str = text, b: bool = both) -> None:
            d["reveal"]["signed_checkpoint"] = t
            if b:
                d["commit"]["signed_checkpoint"] = t

        yield f"note {n}: {kind} line {i}", changed(proof, put), KEY, (), None


def receipt_mutations(rng: random.Random, proof: dict[str, Any], count: int) -> Iterator[Case]:
    """A receipt's numbers and hashes: other values and other JSON types."""
    values: list[object] = [0, 1, 2, 7, 10**20, 2**64 - 1, 2**64, -1, 1.5, "3", None, [], True]
    for n in range(count):
        which = rng.choice(["commit", "reveal"])
        what = rng.choice(["index", "tree_size", "hashes", "hash"])
        if what in ("index", "tree_size"):
            value = rng.choice(values)
            yield (
                f"receipt {n}: {which} {what}={value!r}",
                changed(proof, lambda d, w=which, k=what, v=value: d[w].update({k: v})),
                KEY,
                (),
                None,
            )
        elif what == "hashes":
            cut = rng.randrange(len(proof[which]["hashes"]) + 1)
            yield (
                f"receipt {n}: {which} hashes cut at {cut}",
                changed(proof, lambda d, w=which, c=cut: d[w].update(hashes=d[w]["hashes"][:c])),
                KEY,
                (),
                None,
            )
        else:
            bad = rng.choice(["A" * 43 + "=", "A" * 44, "AAAA", "", "A" * 42 + "==", 5])
            yield (
                f"receipt {n}: {which} hash {bad!r}",
                changed(proof, lambda d, w=which, b=bad: d[w]["hashes"].insert(0, b)),
                KEY,
                (),
                None,
            )


def cosignature_cases(rng: random.Random, proof: dict[str, Any], count: int) -> Iterator[Case]:
    """Cosigned checkpoints under a two-witness policy: thresholds, missing lines, and a damaged
    character in a cosignature line."""
    note = proof["reveal"]["signed_checkpoint"].encode()
    body = note.decode().split("\n\n")[0] + "\n"
    lines = [W1.cosign(body, 1_800_000_000), W2.cosign(body, 1_800_000_001)]
    for n in range(count):
        chosen = [line for line in lines if rng.random() < 0.7]
        if chosen and rng.random() < 0.5:
            k = rng.randrange(len(chosen))
            line = chosen[k].rstrip("\n")
            j = rng.randrange(len(line) - 20, len(line) - 1)  # in the signature, past the name
            chosen[k] = (
                line[:j] + rng.choice(string.ascii_letters.replace(line[j], "")) + line[j + 1 :] + "\n"
            )
        cosigned = add_cosignatures(note, chosen).decode()

        def put(d: dict[str, Any], t: str = cosigned) -> None:
            d["reveal"]["signed_checkpoint"] = d["commit"]["signed_checkpoint"] = t

        threshold = rng.choice([None, 1, 2])
        yield (
            f"cosigned {n}: {len(chosen)} lines, threshold {threshold}",
            changed(proof, put),
            KEY,
            POLICY,
            threshold,
        )


def tlog_proof_mutations(rng: random.Random, proof: dict[str, Any], count: int) -> Iterator[Case]:
    """Format 2: a line of a receipt's tlog-proof text replaced, dropped or doubled, a character
    changed, or the text cut; in one receipt or, for the checkpoint's lines, in both."""
    replacements = ["", "c2sp.org/tlog-proof@v1", "c2sp.org/tlog-proof@v2", "extra ", "extra AAAA",
                    "extra =", "index 0", "index 01", "index -1", "index 18446744073709551615",
                    "index 18446744073709551616", "index  1", "A" * 43 + "=", "A" * 44, "A" * 42 + "==",
                    "\u00e9", "\t", "0", "x"]  # fmt: skip
    for n in range(count):
        which = rng.choice(["commit", "reveal"])
        lines = proof[which].split("\n")
        kind = rng.choice(["replace", "drop", "double", "char", "cut"])
        i = rng.randrange(len(lines))
        if kind == "replace":
            lines[i] = rng.choice(replacements)
        elif kind == "drop":
            del lines[i]
        elif kind == "double":
            lines.insert(i, lines[i])
        elif kind == "char" and lines[i]:
            j = rng.randrange(len(lines[i]))
            lines[i] = (
                lines[i][:j] + rng.choice(string.ascii_letters + string.digits + "+/= \t") + lines[i][j + 1 :]
            )
        text = "\n".join(lines)
        if kind == "cut":
            text = text[: rng.randrange(len(text))]
        # A change past the empty line is in the checkpoint note, which both receipts must share.
        both = text.partition("\n\n")[2] != proof[which].partition("\n\n")[2] and rng.random() < 0.8

        def put(d: dict[str, Any], w: str = which, t: str = text, b: bool = both) -> None:
            d[w] = t
            if b:
                other = "reveal" if w == "commit" else "commit"
                d[other] = d[other].partition("\n\n")[0] + "\n\n" + t.partition("\n\n")[2]

        yield f"tlog-proof {n}: {which} {kind} line {i}", changed(proof, put), KEY, (), None


def tlog_proof_edge_cases(proof: dict[str, Any]) -> Iterator[Case]:
    """Format 2, cases random damage would rarely reach: a control character in the checkpoint's
    origin or an extension line (read before the signature is), a text over the reader's size in
    characters, and one that is over it in UTF-16 units only (Python counts characters)."""
    head, _, note = proof["commit"].partition("\n\n")
    origin, rest = note.split("\n", 1)
    body, _, sigs = rest.partition("\n\n")
    lines = head.split("\n")
    notes = {
        "a tab in the origin": f"{origin}\t\n{rest}",
        "a control character in an extension line": f"{origin}\n{body}\nx\x01y\n\n{sigs}",
        "no signature lines": f"{origin}\n{body}\n",
    }
    for name, new in notes.items():
        both = changed(
            proof,
            lambda d, n=new: d.update(
                commit=f"{head}\n\n{n}", reveal=f"{d['reveal'].partition(chr(10) * 2)[0]}\n\n{n}"
            ),
        )
        yield f"tlog-proof edge: {name}", both, KEY, (), None
    texts = {
        "262,145 characters": "\n".join(
            [*lines[:3], "A" * (256 * 1024 + 1 - len(proof["commit"]) - 1), *lines[3:]]
        )
        + f"\n\n{note}",
        "over the size in UTF-16 units only": "\n".join([*lines[:3], "\U0001f600" * 140_000, *lines[3:]])
        + f"\n\n{note}",
        "a space after the index": "\n".join([*lines[:2], lines[2] + " ", *lines[3:]]) + f"\n\n{note}",
    }
    for name, text in texts.items():
        yield f"tlog-proof edge: {name}", changed(proof, lambda d, t=text: d.update(commit=t)), KEY, (), None


def rotation_mutations(rng: random.Random, proof: dict[str, Any], count: int) -> Iterator[Case]:
    """A format-3 proof's statements: a line of one replaced, dropped or doubled, a character
    changed; statements dropped, doubled or swapped; checked with the first key, or the second."""
    keys = PROOFS_V3["keys"]
    replacements = ["", "fairdeck log key rotation v1", "fairdeck log key rotation v2", keys["key 1"],
                    keys["key 3"], keys["a key of no statement"], "example.com/fairdeck-hand-proofs",
                    "\u2014 x AAAA", "AAAA"]  # fmt: skip
    for n in range(count):
        notes: list[str] = list(proof["key_rotations"])
        kind = rng.choice(["replace", "drop line", "double line", "char", "drop", "double", "swap"])
        i = rng.randrange(len(notes))
        lines = notes[i].split("\n")
        j = rng.randrange(len(lines))
        if kind == "replace":
            lines[j] = rng.choice(replacements)
        elif kind == "drop line":
            del lines[j]
        elif kind == "double line":
            lines.insert(j, lines[j])
        elif kind == "char" and lines[j]:
            k = rng.randrange(len(lines[j]))
            lines[j] = (
                lines[j][:k] + rng.choice(string.ascii_letters + string.digits + "+/= ") + lines[j][k + 1 :]
            )
        notes[i] = "\n".join(lines)
        if kind == "drop":
            del notes[i]
        elif kind == "double":
            notes.insert(i, notes[i])
        elif kind == "swap":
            notes.reverse()
        key = [keys[rng.choice(["key 1", "key 2"])]]
        yield (
            f"rotations {n}: {kind} in statement {i}",
            changed(proof, lambda d, t=notes: d.update(key_rotations=t)),
            key,
            (),
            None,
        )


def all_cases() -> list[Case]:
    rng = random.Random(26)
    out: list[Case] = [(name, data, key, (), None) for name, data, key, _ in vector_cases()]
    for v in PROOFS["valid"]:
        out += text_mutations(rng, f"proof {v['name']}", v["text"], 150)
    for v in TRANSCRIPTS["valid"][:4]:
        fields = ("version", "deck", "hand_id", "commitment", "server_seed", "client_seeds", "cards")
        text = json.dumps({k: v[k] for k in fields}, indent=2)
        out += [
            (n, d, None, (), None) for n, d, *_ in text_mutations(rng, f"transcript {v['name']}", text, 100)
        ]
    proof = json.loads(PROOFS["valid"][0]["text"])
    out += entry_mutations(rng, proof, 150)
    out += note_mutations(rng, proof, 200)
    out += receipt_mutations(rng, proof, 150)
    out += cosignature_cases(rng, proof, 120)
    for v in PROOFS_V2["valid"]:
        out += text_mutations(rng, f"proof v2 {v['name']}", v["text"], 60)
    out += tlog_proof_mutations(rng, json.loads(PROOFS_V2["valid"][0]["text"]), 250)
    out += tlog_proof_edge_cases(json.loads(PROOFS_V2["valid"][0]["text"]))
    for v in PROOFS_V3["valid"]:
        out += text_mutations(rng, f"proof v3 {v['name']}", v["text"], 40)
    out += rotation_mutations(rng, json.loads(PROOFS_V3["valid"][0]["text"]), 250)
    return out


@pytest.fixture(scope="module")
def node_lines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    browser.require(browser.node_missing())
    job = tmp_path_factory.mktemp("same-words") / "job.json"
    job.write_text(
        json.dumps(
            [
                {"id": i, "bytes_b64": browser.b64(d), "key": k, "witnesses": list(w), "threshold": t}
                for i, d, k, w, t in all_cases()
            ]
        ),
        encoding="utf-8",
    )
    done = subprocess.run(
        ["node", str(browser.WEB / "test" / "lines.mjs"), str(job)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines: dict[str, str] = json.loads(done.stdout)
    return lines


@pytest.mark.slow
def test_the_page_and_fairdeck_verify_say_the_same_line(node_lines: dict[str, str], tmp_path: Path) -> None:
    cases = all_cases()
    assert len({name for name, *_ in cases}) == len(cases), "case names must be unique"
    differ = []
    steps: set[str] = set()
    for name, data, key, witnesses, threshold in cases:
        want = browser.python_line(data, tmp_path, key, witnesses, threshold)
        steps.add(want.split(":")[0])
        if node_lines[name] != want:
            differ.append(f"{name}\n  fairdeck verify: {want}\n  the page:        {node_lines[name]}")
    assert not differ, f"{len(differ)} of {len(cases)} differ:\n" + "\n".join(differ[:20])
    # The cases reach every step, and both verdicts.
    assert {f"FAILED at step {s}" for s in ("version", "malformed", "format", "commitment", "deck", "cards",
            "entries", "checkpoint", "inclusion", "cosignatures")} | {"OK"} <= steps, steps  # fmt: skip


def test_a_statement_behind_a_byte_order_mark_gets_fairdeck_verifys_line_on_the_page(tmp_path: Path) -> None:
    """The page decoded a statement's header with a TextDecoder that drops a leading U+FEFF, where
    fairdeck verify keeps it: a statement behind a byte order mark failed for a missing signature
    on the page and for not being four lines in fairdeck verify. Both now read the bytes as they are."""
    browser.require(browser.node_missing())
    proof = json.loads(PROOFS_V3["valid"][0]["text"])
    job, want = [], {}
    for i in range(len(proof["key_rotations"])):
        notes = list(proof["key_rotations"])
        notes[i] = "\ufeff" + notes[i]
        data = changed(proof, lambda d, t=notes: d.update(key_rotations=t))
        want[f"BOM {i}"] = browser.python_line(data, tmp_path, KEY)
        job.append({"id": f"BOM {i}", "bytes_b64": base64.b64encode(data).decode(), "key": KEY})
    path = tmp_path / "job.json"
    path.write_text(json.dumps(job), encoding="utf-8")
    done = subprocess.run(
        ["node", str(browser.WEB / "test" / "lines.mjs"), str(path)],
        capture_output=True, text=True, timeout=120, cwd=browser.WEB,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == want
    assert all("four lines" in line for line in want.values()), want


def test_the_page_names_the_key_the_statements_led_to_as_fairdeck_verify_does(tmp_path: Path) -> None:
    """After a verified proof of format 3, `fairdeck verify` says which statements it followed to
    the key that signed (a second line); the page says it in the same words, for the v3 vectors
    with every order of keys, and for damaged statements that still verify."""
    import contextlib
    import io

    from fairdeck.cli.commands import main

    browser.require(browser.node_missing())
    keys = PROOFS_V3["keys"]
    lists = [[a] for a in keys] + [[a, b] for a in keys for b in keys if a != b]
    cases = [(f"{v['name']} / {ks}", v["text"].encode(), [keys[k] for k in ks])
             for v in PROOFS_V3["valid"] for ks in lists]  # fmt: skip
    rng = random.Random(37)
    cases += [
        (n, d, k) for n, d, k, _, _ in rotation_mutations(rng, json.loads(PROOFS_V3["valid"][0]["text"]), 120)
    ]
    want: dict[str, str] = {}
    path = tmp_path / "input.json"
    for name, data, given in cases:
        path.write_bytes(data)
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            main(["verify", str(path), *(a for k in given for a in ("--key", k))])
        want[name] = out.getvalue().removesuffix("\n")
    job = [{"id": n, "bytes_b64": base64.b64encode(d).decode(), "key": list(k), "signed_by": True}
           for n, d, k in cases]  # fmt: skip
    (tmp_path / "job.json").write_text(json.dumps(job), encoding="utf-8")
    done = subprocess.run(
        ["node", str(browser.WEB / "test" / "lines.mjs"), str(tmp_path / "job.json")],
        capture_output=True, text=True, timeout=300, cwd=browser.WEB,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    differ = [
        f"{n}\n  fairdeck verify: {want[n]!r}\n  the page: {got[n]!r}" for n in want if got[n] != want[n]
    ]
    assert not differ, "\n".join(differ[:5])
    assert sum("\n  signed by " in line for line in want.values()) >= 10, want
