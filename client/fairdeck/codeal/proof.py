"""The Terelius-Wikström proof of a re-encryption shuffle, as Haenni et al. write it (section 7).

``prove_shuffle`` is their GenProof (with GenPermutationCommitment and GenCommitmentChain) and
``verify_shuffle`` their CheckProof, on ristretto255 written additively, with generators from hash
to point and both challenges hashed over the whole statement: the hand context, the step, both
decks, the permutation commitment and, for ``c``, the chain and every ``t``. Indices here are
0-based (the paper's ``i`` is ``i + 1``). The proof's bytes are section 7.3: ``32 (5N + 9)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from fairdeck.codeal.context import HandContext, hs, label
from fairdeck.codeal.elgamal import Deck, encode_deck, generators
from fairdeck.codeal.errors import CodealError
from fairdeck.codeal.group import (
    Point,
    Random,
    Scalar,
    add,
    decode_point,
    decode_scalar,
    msm,
    mul,
    mul_base,
    random_scalar,
    s_add,
    s_mul,
    s_sum,
    scalar,
    sub,
)
from fairdeck.core.encoding import lp, u32


def proof_bytes(n: int) -> int:
    """The length of the proof of a deck of ``n`` cards: ``32 (5n + 9)``."""
    return 32 * (5 * n + 9)


@dataclass(frozen=True)
class ShuffleProof:
    """One shuffle's proof: commitments, then ``t`` values, then responses (section 7.3)."""

    commitments: tuple[Point, ...]
    """c_1 .. c_N, the permutation commitment."""
    chain: tuple[Point, ...]
    """C^_1 .. C^_N, the commitment chain."""
    t1: Point
    t2: Point
    t3: Point
    t41: Point
    t42: Point
    t_hat: tuple[Point, ...]
    s1: Scalar
    s2: Scalar
    s3: Scalar
    s4: Scalar
    s_hat: tuple[Scalar, ...]
    s_prime: tuple[Scalar, ...]

    def encode(self) -> bytes:
        points = (*self.commitments, *self.chain, self.t1, self.t2, self.t3, self.t41, self.t42, *self.t_hat)
        scalars = (self.s1, self.s2, self.s3, self.s4, *self.s_hat, *self.s_prime)
        return b"".join(points) + b"".join(scalars)

    @classmethod
    def decode(cls, data: object, n: int, k: int) -> ShuffleProof:
        if not isinstance(data, bytes) or len(data) != proof_bytes(n):
            raise CodealError("encoding", f"shuffle {k}: a proof for {n} cards is {proof_bytes(n)} bytes")
        words = [data[i : i + 32] for i in range(0, len(data), 32)]
        pts = [decode_point(w, f"shuffle {k} proof point {i}") for i, w in enumerate(words[: 3 * n + 5])]
        scs = [decode_scalar(w, f"shuffle {k} proof scalar {i}") for i, w in enumerate(words[3 * n + 5 :])]
        return cls(
            commitments=tuple(pts[:n]),
            chain=tuple(pts[n : 2 * n]),
            t1=pts[2 * n],
            t2=pts[2 * n + 1],
            t3=pts[2 * n + 2],
            t41=pts[2 * n + 3],
            t42=pts[2 * n + 4],
            t_hat=tuple(pts[2 * n + 5 :]),
            s1=scs[0],
            s2=scs[1],
            s3=scs[2],
            s4=scs[3],
            s_hat=tuple(scs[4 : 4 + n]),
            s_prime=tuple(scs[4 + n :]),
        )

    def first_message(self) -> bytes:
        return first_message(
            self.commitments, self.chain, (self.t1, self.t2, self.t3, self.t41, self.t42), self.t_hat
        )


def first_message(
    commitments: Sequence[Point], chain: Sequence[Point], ts: Sequence[Point], t_hat: Sequence[Point]
) -> bytes:
    """The commitments and ``t`` values as the challenge hashes them (section 7.2)."""
    return lp(b"".join(commitments)) + lp(b"".join(chain)) + b"".join(lp(t) for t in ts) + lp(b"".join(t_hat))


def _u(ctx: HandContext, k: int, before: bytes, after: bytes, commitments: bytes, n: int) -> list[Scalar]:
    """``u_i = Hs(U || u32(i))``, ``U`` = SHA-512 over the statement and the permutation commitment."""
    digest = hashlib.sha512(
        label("shuffle u") + ctx.encoded + u32(k) + lp(before) + lp(after) + lp(commitments)
    ).digest()
    return [hs(digest + u32(i)) for i in range(1, n + 1)]


def _challenge(ctx: HandContext, k: int, before: bytes, after: bytes, first_message: bytes) -> Scalar:
    return hs(label("shuffle challenge") + ctx.encoded + u32(k) + lp(before) + lp(after) + first_message)


def prove_shuffle(
    ctx: HandContext,
    k: int,
    before: Deck,
    after: Deck,
    psi: Sequence[int],
    rs: Sequence[Scalar],
    random: Random,
) -> ShuffleProof:
    """GenProof: ``after[i] = ReEnc(before[psi[i]], rs[i])`` under the joint key."""
    n = len(before)
    gens = generators(n)
    h, hgen = gens[0], gens[1:]
    key = ctx.joint_key
    # GenPermutationCommitment: c_psi(i) = r_psi(i) * B + h_i.
    r: list[Scalar] = [scalar(0)] * n
    c: list[Point] = [h] * n
    for i, j in enumerate(psi):
        r[j] = random_scalar(random)
        c[j] = add(mul_base(r[j]), hgen[i])
    before_bytes, after_bytes = encode_deck(before), encode_deck(after)
    u = _u(ctx, k, before_bytes, after_bytes, b"".join(c), n)
    u_prime = [u[j] for j in psi]
    # GenCommitmentChain: C^_i = r^_i * B + u'_i * C^_{i-1}, C^_0 = h.
    r_hat = [random_scalar(random) for _ in range(n)]
    chain: list[Point] = []
    previous = h
    for i in range(n):
        previous = add(mul_base(r_hat[i]), mul(u_prime[i], previous))
        chain.append(previous)
    w1, w2, w3, w4 = (random_scalar(random) for _ in range(4))
    w_hat = [random_scalar(random) for _ in range(n)]
    w_prime = [random_scalar(random) for _ in range(n)]
    t_hat = tuple(add(mul_base(w_hat[i]), mul(w_prime[i], ([h, *chain])[i])) for i in range(n))
    t1, t2 = mul_base(w1), mul_base(w2)
    t3 = add(mul_base(w3), msm(w_prime, hgen))
    t41 = sub(msm(w_prime, [e.c2 for e in after]), mul(w4, key))
    t42 = sub(msm(w_prime, [e.c1 for e in after]), mul_base(w4))
    first = first_message(c, chain, (t1, t2, t3, t41, t42), t_hat)
    challenge = _challenge(ctx, k, before_bytes, after_bytes, first)
    v = [scalar(1)] * (n + 1)  # v[i] is the paper's v_i; v_N = 1, v_{i-1} = u'_i v_i
    for i in range(n, 0, -1):
        v[i - 1] = s_mul(u_prime[i - 1], v[i])
    return ShuffleProof(
        tuple(c),
        tuple(chain),
        t1,
        t2,
        t3,
        t41,
        t42,
        t_hat,
        s_add(w1, s_mul(challenge, s_sum(r))),
        s_add(w2, s_mul(challenge, s_sum([s_mul(r_hat[i], v[i + 1]) for i in range(n)]))),
        s_add(w3, s_mul(challenge, s_sum([s_mul(r[i], u[i]) for i in range(n)]))),
        s_add(w4, s_mul(challenge, s_sum([s_mul(rs[i], u_prime[i]) for i in range(n)]))),
        tuple(s_add(w_hat[i], s_mul(challenge, r_hat[i])) for i in range(n)),
        tuple(s_add(w_prime[i], s_mul(challenge, u_prime[i])) for i in range(n)),
    )


def verify_shuffle(ctx: HandContext, k: int, before: Deck, after: Deck, proof: ShuffleProof) -> None:
    """CheckProof (section 7.4); raises CodealError("shuffle") naming the equation that fails."""
    n = len(before)
    if len(after) != n or len(proof.commitments) != n:
        raise CodealError("shuffle", f"step {k}: the decks and the proof differ in size")
    gens = generators(n)
    h, hgen = gens[0], gens[1:]
    key = ctx.joint_key
    before_bytes, after_bytes = encode_deck(before), encode_deck(after)
    u = _u(ctx, k, before_bytes, after_bytes, b"".join(proof.commitments), n)
    c = _challenge(ctx, k, before_bytes, after_bytes, proof.first_message())
    c_bar = sub(_sum(proof.commitments), _sum(hgen))
    u_product = scalar(1)
    for value in u:
        u_product = s_mul(u_product, value)
    c_hat = sub(proof.chain[-1], mul(u_product, h))
    c_tilde = msm(u, proof.commitments)
    a_tilde = msm(u, [e.c2 for e in before])
    b_tilde = msm(u, [e.c1 for e in before])
    checks = (
        ("t1", proof.t1, sub(mul_base(proof.s1), mul(c, c_bar))),
        ("t2", proof.t2, sub(mul_base(proof.s2), mul(c, c_hat))),
        ("t3", proof.t3, sub(add(mul_base(proof.s3), msm(proof.s_prime, hgen)), mul(c, c_tilde))),
        (
            "t4,1",
            proof.t41,
            sub(sub(msm(proof.s_prime, [e.c2 for e in after]), mul(proof.s4, key)), mul(c, a_tilde)),
        ),
        (
            "t4,2",
            proof.t42,
            sub(sub(msm(proof.s_prime, [e.c1 for e in after]), mul_base(proof.s4)), mul(c, b_tilde)),
        ),
    )
    for name, given, expected in checks:
        if given != expected:
            raise CodealError("shuffle", f"step {k}: the proof of shuffle fails at {name}")
    previous = h
    for i in range(n):
        expected = sub(add(mul_base(proof.s_hat[i]), mul(proof.s_prime[i], previous)), mul(c, proof.chain[i]))
        if proof.t_hat[i] != expected:
            raise CodealError("shuffle", f"step {k}: the proof of shuffle fails at t^_{i + 1}")
        previous = proof.chain[i]


def _sum(points: Sequence[Point]) -> Point:
    total = points[0]
    for p in points[1:]:
        total = add(total, p)
    return total
