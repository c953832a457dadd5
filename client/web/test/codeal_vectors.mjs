// An independent reading of docs/codealing-spec.md with @noble/curves, for the page to grow from:
//
//   node codeal_vectors.mjs docs/vectors/fairdeck-codeal-v1.json > RESULT.json
//
// Written from the spec's formulas, not from the Python: it checks the card points and generators,
// verifies every hand (sections 10.1 to 10.7) and every edited case, and prints
// {"hands": {name: {"step": null or the failing step, "ms": warm time}}, "cases": {name: step}}.
// tests/web/test_codeal_node.py compares that with the vectors' own answers.
import { readFileSync } from "node:fs";
import { ristretto255, ristretto255_hasher } from "@noble/curves/ed25519.js";
import { pippenger } from "@noble/curves/abstract/curve.js";
import { sha512, sha256 } from "@noble/hashes/sha2.js";
import { shake256 } from "@noble/hashes/sha3.js";
import { deckSpec, deriveDeck, fromHex, toHex, concat, lp, u32, ascii } from "../src/spec.js";

const P = ristretto255.Point;
const L = P.Fn.ORDER;
const V = "fairdeck-codeal-v1";
const DST_CARD = ascii("fairdeck-codeal-v1-card-ristretto255_XMD:SHA-512_R255MAP_RO_");
const DST_GEN = ascii("fairdeck-codeal-v1-generator-ristretto255_XMD:SHA-512_R255MAP_RO_");
class Fail extends Error { constructor(step, m) { super(`${step}: ${m}`); this.step = step; } }

const le = (b) => { let x = 0n; for (let i = b.length - 1; i >= 0; i--) x = (x << 8n) | BigInt(b[i]); return x; };
const le32 = (x) => { const o = new Uint8Array(32); for (let i = 0; i < 32; i++) { o[i] = Number(x & 255n); x >>= 8n; } return o; };
const hs = (data) => le(sha512(data)) % L;
const label = (name) => lp(ascii(`${V} ${name}`));
const mod = (x) => ((x % L) + L) % L;
const mul = (s, p) => p.multiplyUnsafe(mod(s));
const pt = (b, what) => {
  if (b.length !== 32) throw new Fail("encoding", `${what}: length`);
  if (b.every((x) => x === 0)) throw new Fail("encoding", `${what}: identity`);
  try { return P.fromBytes(b); } catch { throw new Fail("encoding", `${what}: not canonical`); }
};
const sc = (b, what) => { const x = le(b); if (b.length !== 32 || x >= L) throw new Fail("encoding", `${what}: scalar`); return x; };
const enc = (p) => p.toBytes();
const cache = new Map();
const H2P = (msg, dst) => { const k = toHex(msg) + toHex(dst); if (!cache.has(k)) cache.set(k, ristretto255_hasher.hashToCurve(msg, { DST: dst })); return cache.get(k); };
const cardPoint = (c) => H2P(u32(c), DST_CARD);
const gen = (j) => H2P(u32(j), DST_GEN);
const head = (deck, handId) => concat(lp(ascii(deck)), lp(ascii(handId)));
const seedLen = { standard: 45, short: 34 };

function verifyHand(h) {
  const spec = deckSpec(h.deck); if (!spec) throw new Fail("encoding", "deck");
  const n = spec.ids.length, K = h.keys.length;
  if (K < 2 || K > 16) throw new Fail("encoding", "holders");
  if (!/^[A-Za-z0-9._:-]{1,64}$/.test(h.hand_id)) throw new Fail("encoding", "hand id");
  const keys = h.keys.map((hex, k) => {
    const b = fromHex(hex); if (b.length !== 128) throw new Fail("encoding", "key record");
    return { Y: pt(b.slice(0, 32), "Y"), T: pt(b.slice(32, 64), "T"), s: sc(b.slice(64, 96), "s"), C: b.slice(96), raw: b };
  });
  const recLen = 4 + 64 * n + 32 * (5 * n + 9) + 64;
  const recs = h.shuffles.map((hex) => {
    const b = fromHex(hex); if (b.length !== recLen) throw new Fail("encoding", "record length");
    const k = new DataView(b.buffer, b.byteOffset).getUint32(0);
    const deckBytes = b.slice(4, 4 + 64 * n);
    const deck = []; for (let i = 0; i < n; i++) deck.push([pt(deckBytes.slice(64 * i, 64 * i + 32), "c1"), pt(deckBytes.slice(64 * i + 32, 64 * i + 64), "c2")]);
    const proofBytes = b.slice(4 + 64 * n, recLen - 64);
    const w = []; for (let i = 0; i < proofBytes.length; i += 32) w.push(proofBytes.slice(i, i + 32));
    const pts = w.slice(0, 3 * n + 5).map((x) => pt(x, "proof point")), scs = w.slice(3 * n + 5).map((x) => sc(x, "proof scalar"));
    return { k, deck, deckBytes, proofBytes, T: pt(b.slice(recLen - 64, recLen - 32), "sig T"), s: sc(b.slice(recLen - 32), "sig s"),
      c: pts.slice(0, n), chain: pts.slice(n, 2 * n), t: pts.slice(2 * n, 2 * n + 5), that: pts.slice(2 * n + 5), s4: scs.slice(0, 4), shat: scs.slice(4, 4 + n), sprime: scs.slice(4 + n) };
  });
  const dealt = h.dealt.map((d) => ({ ...d, sh: d.shares.map((hex) => { const b = fromHex(hex); if (b.length !== 128) throw new Fail("encoding", "share");
    return { D: pt(b.slice(0, 32), "D"), A: pt(b.slice(32, 64), "A"), A2: pt(b.slice(64, 96), "A'"), z: sc(b.slice(96), "z") }; }) }));
  // key
  keys.forEach((r, k) => {
    const e = hs(concat(label("key"), head(h.deck, h.hand_id), u32(k), lp(enc(r.Y)), lp(r.C), lp(enc(r.T))));
    if (!P.BASE.multiplyUnsafe(r.s).equals(r.T.add(mul(e, r.Y)))) throw new Fail("key", `pop ${k}`);
  });
  if (new Set(keys.map((r) => toHex(enc(r.Y)))).size !== K) throw new Fail("key", "same key");
  const Y = keys.reduce((a, r) => a.add(r.Y), P.ZERO);
  if (Y.equals(P.ZERO)) throw new Fail("key", "joint identity");
  const ctx = concat(lp(ascii(V)), head(h.deck, h.hand_id), u32(K), ...keys.map((r) => enc(r.Y)), ...keys.map((r) => r.C));
  // transcript
  if (recs.length !== K || recs.some((r, i) => r.k !== i)) throw new Fail("transcript", "order");
  const pos = dealt.map((d) => d.position);
  if (new Set(pos).size !== pos.length || pos.some((p) => p < 0 || p >= n)) throw new Fail("transcript", "positions");
  if (dealt.some((d) => d.sh.length !== K)) throw new Fail("transcript", "shares");
  // shuffle
  let deck = spec.ids.map((c) => [P.ZERO, cardPoint(c)]);
  const decks = [deck];
  const encDeck = (d) => concat(...d.flatMap(([a, b]) => [enc(a), enc(b)]));
  const hvec = []; for (let j = 0; j <= n; j++) hvec.push(gen(j));
  for (const r of recs) {
    const k = r.k, before = deck, after = r.deck;
    const outs = new Set(after.map(([c1]) => toHex(enc(c1))));
    if (outs.size !== n) throw new Fail("shuffle", "reused");
    if (before.some(([c1]) => outs.has(toHex(enc(c1))))) throw new Fail("shuffle", "no reencryption");
    const eb = encDeck(before), ea = r.deckBytes;
    const U = sha512(concat(label("shuffle u"), ctx, u32(k), lp(eb), lp(ea), lp(concat(...r.c.map(enc)))));
    const u = []; for (let i = 1; i <= n; i++) u.push(hs(concat(U, u32(i))));
    const first = concat(lp(concat(...r.c.map(enc))), lp(concat(...r.chain.map(enc))), ...r.t.map((x) => lp(enc(x))), lp(concat(...r.that.map(enc))));
    const c = hs(concat(label("shuffle challenge"), ctx, u32(k), lp(eb), lp(ea), first));
    const sum = (a) => a.reduce((x, y) => x.add(y), P.ZERO);
    const msm = (s, p) => pippenger(P, p, s.map(mod));
    const h0 = hvec[0], hs_ = hvec.slice(1);
    const cbar = sum(r.c).subtract(sum(hs_));
    const uprod = u.reduce((a, x) => (a * x) % L, 1n);
    const chat = r.chain[n - 1].subtract(mul(uprod, h0));
    const ctil = msm(u, r.c), atil = msm(u, before.map((e) => e[1])), btil = msm(u, before.map((e) => e[0]));
    const [s1, s2, s3, s4] = r.s4, sp = r.sprime;
    const exp = [
      mul(s1, P.BASE).subtract(mul(c, cbar)),
      mul(s2, P.BASE).subtract(mul(c, chat)),
      mul(s3, P.BASE).add(msm(sp, hs_)).subtract(mul(c, ctil)),
      msm(sp, after.map((e) => e[1])).subtract(mul(s4, Y)).subtract(mul(c, atil)),
      msm(sp, after.map((e) => e[0])).subtract(mul(s4, P.BASE)).subtract(mul(c, btil)),
    ];
    exp.forEach((x, i) => { if (!x.equals(r.t[i])) throw new Fail("shuffle", `t${i}`); });
    let prev = h0;
    for (let i = 0; i < n; i++) {
      const x = mul(r.shat[i], P.BASE).add(mul(sp[i], prev)).subtract(mul(c, r.chain[i]));
      if (!x.equals(r.that[i])) throw new Fail("shuffle", `that${i}`);
      prev = r.chain[i];
    }
    const e = hs(concat(label("shuffle signature"), ctx, u32(k), lp(eb), lp(ea), lp(r.proofBytes), lp(enc(r.T))));
    if (!mul(r.s, P.BASE).equals(r.T.add(mul(e, keys[k].Y)))) throw new Fail("shuffle", "signature");
    deck = after; decks.push(after);
  }
  // share, open
  const cardOf = new Map(spec.ids.map((c) => [toHex(enc(cardPoint(c))), c]));
  for (const d of dealt) {
    const [c1, c2] = deck[d.position];
    d.sh.forEach((s, k) => {
      const e = hs(concat(label("share"), ctx, u32(d.position), u32(k), lp(concat(enc(c1), enc(c2))), lp(enc(s.D)), lp(enc(s.A)), lp(enc(s.A2))));
      if (!mul(s.z, P.BASE).equals(s.A.add(mul(e, keys[k].Y)))) throw new Fail("share", "key");
      if (!mul(s.z, c1).equals(s.A2.add(mul(e, s.D)))) throw new Fail("share", "ct");
    });
    const M = d.sh.reduce((a, s) => a.subtract(s.D), c2);
    const card = cardOf.get(toHex(enc(M)));
    if (card === undefined || card !== d.card) throw new Fail("open", `position ${d.position}`);
  }
  // seed
  if (h.seeds !== null) {
    if (h.seeds.length !== K) throw new Fail("seed", "count");
    const psis = [];
    h.seeds.forEach((hex, k) => {
      const S = fromHex(hex);
      if (S.length !== seedLen[h.deck]) throw new Fail("seed", "length");
      const C = sha256(concat(label("seed"), head(h.deck, h.hand_id), u32(k), lp(S)));
      if (toHex(C) !== toHex(keys[k].C)) throw new Fail("seed", "commitment");
      const d = deriveDeck("fairdeck-v1", spec, h.hand_id, S, [concat(ascii(`${V} shuffler`), u32(k))]);
      const psi = d.map((id) => spec.ids.indexOf(id));
      const pre = concat(label("reencrypt"), head(h.deck, h.hand_id), u32(k), lp(S));
      const rs = psi.map((_, i) => le(shake256(concat(pre, u32(i)), { dkLen: 64 })) % L);
      if (rs.some((x) => x === 0n)) throw new Fail("seed", "zero r");
      const redo = psi.map((j, i) => [decks[k][j][0].add(mul(rs[i], P.BASE)), decks[k][j][1].add(mul(rs[i], Y))]);
      if (toHex(encDeck(redo)) !== toHex(encDeck(decks[k + 1]))) throw new Fail("seed", "rederive");
      psis.push(psi);
    });
    for (const d of dealt) { let j = d.position; for (const psi of [...psis].reverse()) j = psi[j]; if (spec.ids[j] !== d.card) throw new Fail("seed", "card"); }
  }
}

const V1 = JSON.parse(readFileSync(process.argv[2], "utf8"));
for (const c of V1.cards) if (toHex(enc(cardPoint(c.id))) !== c.point) throw new Error(`card ${c.id}`);
for (const g of V1.generators) if (toHex(enc(gen(g.j))) !== g.point) throw new Error(`generator ${g.j}`);
const stepOf = (h) => {
  try { verifyHand(h); return null; } catch (err) { if (err instanceof Fail) return err.step; throw err; }
};
function edited(c) {
  const h = structuredClone(V1.hands[c.base]);
  for (const e of c.edits) {
    const f = e.field;
    if (e.op === "set") h[f] = e.value;
    else if (e.op === "take") h[f] = e.indices.map((i) => h[f][i]);
    else if (e.op === "from") h[f] = V1.hands[e.hand][f];
    else if (e.op === "overwrite" || e.op === "cut") {
      const arr = f === "dealt" ? h.dealt[e.index].shares : h[f], key = f === "dealt" ? e.share : e.index;
      const s = arr[key], at = 2 * e.offset;
      arr[key] = e.op === "overwrite" ? s.slice(0, at) + e.hex + s.slice(at + e.hex.length) : s.slice(0, at) + s.slice(at + 2 * e.length);
    } else if (e.op === "shares") h.dealt[e.index].shares = e.indices.map((i) => h.dealt[e.index].shares[i]);
    else if (e.op === "card") h.dealt[e.index].card = e.card;
    else throw new Error(`unknown edit ${e.op}`);
  }
  return h;
}
const out = { hands: {}, cases: {} };
for (const [name, h] of Object.entries(V1.hands)) {
  stepOf(h);
  const t = performance.now();
  out.hands[name] = { step: stepOf(h), ms: Math.round(performance.now() - t) };
}
for (const c of V1.cases) out.cases[c.name] = stepOf(edited(c));
process.stdout.write(JSON.stringify(out));
