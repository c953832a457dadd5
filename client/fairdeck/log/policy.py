"""C2SP tlog-policy (https://c2sp.org/tlog-policy): which logs and witnesses a verifier trusts, and
the quorum of witnesses a checkpoint needs, as one text file of ``log``, ``witness``, ``group``
and ``quorum`` lines (blank lines and ``#`` comments ignored).

Strict, as the text asks: only tab, newline, 0x20-0x7E and 0x80-0xFF octets ("Character set");
names are opaque octets, shared by witnesses and groups, ``none`` reserved; a group names only
what earlier lines defined, each member once, ``1 <= k <= n``; no two logs or two witnesses
wrap one public key ("duplicate"). Anything else is a PolicyFileError naming the line.

``TlogPolicy.witness_policy()`` is the ``WitnessPolicy`` every verifier here takes (None for
``quorum none``). docs/witness.md, "Policies", lists the lines and the choices.

>>> w = "witness.example/w1+e42b2f2c+BDtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
>>> policy = TlogPolicy.parse(f"witness W1 {w}\\ngroup G any W1\\nquorum G\\n")
>>> policy.quorum.met({"W1"}), policy.quorum.met(set())
(True, False)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Set
from dataclasses import dataclass, field

from fairdeck.log.cosignature import CosignatureError, CosignatureVerifier, WitnessPolicy
from fairdeck.log.note import NoteError, Verifier

MAX_ITEMS = 256
"""Logs, witnesses and groups each (the text asks implementations to support at least 32)."""
MAX_BYTES = 1024 * 1024
_BAD_OCTET = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]")
_DECIMAL = re.compile(r"[1-9][0-9]{0,5}")
ML_DSA_44 = 0x06


class PolicyFileError(CosignatureError):
    """A tlog-policy file that does not follow the text; the message names the line."""


@dataclass(frozen=True, slots=True)
class Quorum:
    """A witness (no members) or a group of ``members`` of which at least ``k`` must be met."""

    name: str
    k: int = 1
    members: tuple[Quorum, ...] = ()

    def met(self, signed: Set[str]) -> bool:
        """Whether the witnesses named in ``signed`` (those that validly cosigned) meet this."""
        if not self.members:
            return self.name in signed
        return sum(1 for m in self.members if m.met(signed)) >= self.k

    def describe(self) -> str:
        if not self.members:
            return self.name
        return f"{self.k} of ({', '.join(m.describe() for m in self.members)})"


@dataclass(frozen=True)
class TlogPolicy:
    logs: tuple[Verifier, ...]
    witnesses: Mapping[str, CosignatureVerifier]
    quorum: Quorum | None
    """None: ``quorum none``, no cosignature required."""
    urls: Mapping[str, str] = field(default_factory=dict)
    """The URL given on a log's (by origin) or a witness's (by name) line, where one was."""

    @classmethod
    def parse(cls, text: str | bytes) -> TlogPolicy:
        data = text.encode("utf-8") if isinstance(text, str) else text
        if len(data) > MAX_BYTES:
            raise PolicyFileError(f"a policy file is at most {MAX_BYTES} bytes")
        return _Parser().parse(data)

    def witness_policy(self) -> WitnessPolicy | None:
        """The policy's witnesses and quorum for the verifiers (None for ``quorum none``)."""
        if self.quorum is None:
            return None
        used = _witnesses_of(self.quorum)
        return WitnessPolicy({n: self.witnesses[n] for n in self.witnesses if n in used}, quorum=self.quorum)


def _witnesses_of(q: Quorum) -> set[str]:
    return {q.name} if not q.members else set().union(*(_witnesses_of(m) for m in q.members))


class _Parser:
    def __init__(self) -> None:
        self.logs: list[Verifier] = []
        self.witnesses: dict[str, CosignatureVerifier] = {}
        self.names: dict[str, Quorum] = {}  # witnesses and groups share one namespace
        self.urls: dict[str, str] = {}
        self.quorum: Quorum | None = None
        self.quorum_seen = False

    def parse(self, data: bytes) -> TlogPolicy:
        lines = data.split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()  # the newline that ends the last line
        for number, raw in enumerate(lines, start=1):
            if bad := _BAD_OCTET.search(raw):
                raise PolicyFileError(f"policy line {number}: octet {bad.group()[0]:#04x} is not allowed")
            # Names, URLs and comments may hold any octet with the high bit set: kept opaque.
            line = raw.decode("utf-8", "surrogateescape")
            items = line.replace("\t", " ").split()
            if not items or items[0].startswith("#"):
                continue
            try:
                self._line(items)
            except (NoteError, PolicyFileError) as e:
                raise PolicyFileError(f"policy line {number}: {e}") from None
        if not self.quorum_seen:
            raise PolicyFileError("the policy has no quorum line (write `quorum none` to need no witness)")
        return TlogPolicy(tuple(self.logs), dict(self.witnesses), self.quorum, self.urls)

    def _line(self, items: list[str]) -> None:
        keyword, args = items[0], items[1:]
        if keyword == "log":
            self._log(args)
        elif keyword == "witness":
            self._witness(args)
        elif keyword == "group":
            self._group(args)
        elif keyword == "quorum":
            self._quorum(args)
        else:
            raise PolicyFileError(f"unknown keyword {keyword[:20]!r} (log, witness, group, quorum)")

    def _log(self, args: list[str]) -> None:
        if len(args) not in (1, 2):
            raise PolicyFileError("want `log <vkey> [<url>]`")
        log = Verifier.parse(args[0])
        if any(known.public_key == log.public_key for known in self.logs):
            raise PolicyFileError(f"log {log.name} is listed twice (the same public key)")
        if len(self.logs) == MAX_ITEMS:
            raise PolicyFileError(f"more than {MAX_ITEMS} logs")
        self.logs.append(log)
        if len(args) == 2:
            self.urls[log.name] = args[1]

    def _new_name(self, name: str) -> None:
        if name == "none":
            raise PolicyFileError("`none` is reserved: it cannot name a witness or a group")
        if name in self.names:
            raise PolicyFileError(f"{name!r} is defined twice")
        if len(self.names) == 2 * MAX_ITEMS:
            raise PolicyFileError(f"more than {2 * MAX_ITEMS} witnesses and groups")

    def _witness(self, args: list[str]) -> None:
        if len(args) not in (2, 3):
            raise PolicyFileError("want `witness <name> <vkey> [<url>]`")
        name, vkey = args[0], args[1]
        self._new_name(name)
        try:
            key = CosignatureVerifier.parse(vkey)
        except CosignatureError as e:
            if _key_type(vkey) == ML_DSA_44:
                raise PolicyFileError(
                    f"witness {name!r} has an ML-DSA-44 key (tlog-cosignature v1.1.0-rc.1); this verifier "
                    "checks Ed25519 cosignature/v1 only (docs/witness.md)"
                ) from None
            raise PolicyFileError(f"witness {name!r}: {e}") from None
        if any(known.public_key == key.public_key for known in self.witnesses.values()):
            raise PolicyFileError(f"witness {name!r} has the public key of another witness")
        self.witnesses[name] = key
        self.names[name] = Quorum(name)
        if len(args) == 3:
            self.urls[name] = args[2]

    def _group(self, args: list[str]) -> None:
        if len(args) < 3:
            raise PolicyFileError("want `group <name> all|any|<k> <member>...` with at least one member")
        name, threshold, members = args[0], args[1], args[2:]
        self._new_name(name)
        seen = set()
        for member in members:
            if member == "none":
                raise PolicyFileError("`none` cannot be a group member")
            if member not in self.names:
                raise PolicyFileError(f"group {name!r}: {member!r} is not defined on an earlier line")
            if member in seen:
                raise PolicyFileError(f"group {name!r} lists {member!r} twice")
            seen.add(member)
        n = len(members)
        if threshold == "all":
            k = n
        elif threshold == "any":
            k = 1
        elif _DECIMAL.fullmatch(threshold) and int(threshold) <= n:
            k = int(threshold)
        else:
            raise PolicyFileError(f"group {name!r}: the threshold is all, any or a decimal 1 to {n}")
        self.names[name] = Quorum(name, k, tuple(self.names[m] for m in members))

    def _quorum(self, args: list[str]) -> None:
        if len(args) != 1:
            raise PolicyFileError("want `quorum <name>`")
        if self.quorum_seen:
            raise PolicyFileError("a second quorum line (a policy has exactly one)")
        self.quorum_seen = True
        if args[0] == "none":
            return
        if args[0] not in self.names:
            raise PolicyFileError(f"quorum {args[0]!r} is not defined on an earlier line")
        self.quorum = self.names[args[0]]


def _key_type(vkey: str) -> int | None:
    import base64
    import binascii

    try:
        raw = base64.b64decode(vkey.split("+", 2)[-1], validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw[0] if raw else None
