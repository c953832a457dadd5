// A seat's device through one co-dealt hand (docs/codealing-spec.md 9, 9.2, 9.3): its key, the
// cards it opened (each checked against the co-dealers' pinned identity keys), and its release of
// the hand. Invariants: the secret key never leaves the object (no getter, no JSON, no inspect);
// release tokens exist only once `release()` was called (the device's own word that its play is
// over: folded, or the showdown came), and only for seals that opened with this seat's key; after
// the release no card is opened (the co-dealer may answer its seed from then on, so a card sealed
// later could be read by the house), and none is made before a card is opened (a release of nothing
// would bar every card after it). Bytes are a Uint8Array of any realm (a game's window), copied into
// this realm's own arrays on the way in; nothing else is read as bytes. Its state names the hole
// cards: the player's to see, never a log's. Nothing here logs, stores or sends anything.
import { toHex } from "../spec.js";
import { fail } from "./group.js";
import { codealSpec } from "./hand.js";
import { newSeatKey, openSeatCard, ownBytes, seatContext, seatPublicKey, seatReleases } from "./seat.js";

/** A seat refused what was asked of it (a card after its release, a release before any card): the message says why. */
export class SeatStateError extends Error {
  constructor(message) {
    super(message);
    this.name = "SeatStateError";
  }
}

const field = (m, ...names) => names.map((n) => m[n]).find((v) => v !== undefined);
// One seal statement under any field name a loader gives (proto3 JSON's `sealedShareSha256` too),
// its bytes copied into this realm's own arrays.
function sealOf(s, position, i) {
  if (s === null || typeof s !== "object") throw fail("encoding", `position ${position} seals[${i}]: want { holder, seatPublicKey, sealedSha256, signature }`);
  return {
    holder: s.holder,
    seatPublicKey: ownBytes(field(s, "seatPublicKey", "seat_public_key"), `position ${position} seal ${s.holder} seat public key`),
    sealedSha256: ownBytes(field(s, "sealedSha256", "sealedShareSha256", "sealed_share_sha256"), `position ${position} seal ${s.holder} sealed share SHA-256`),
    signature: ownBytes(s.signature, `position ${position} seal ${s.holder} signature`),
  };
}

export class HandSeat {
  #secret;
  #publicKey;
  #ctx;
  #identityKeys;
  #opened = new Map(); // position -> the sealed shares that opened with this seat's key
  #released = null;
  #onchange;

  /**
   * `deck`, `handId`, `keys` (the hand's key records) and `finalDeck` (the final deck's 64 n bytes,
   * as seatContext reads them) or `shuffles` (the hand's shuffle records: the last one's deck); `identityKeys`: the co-dealers' Ed25519 keys the player
   * pinned (holders 1..K-1). A fresh key is made unless `secretKey` (one this device kept) is
   * given. `onchange(state)` hears { handId, cards, released, tokens } (no secret) after each change.
   * Every byte array (a Uint8Array of this realm or another window's) is copied in; anything else where
   * bytes are expected (text, a list of numbers, another typed array), or a malformed field, is a
   * VerificationError naming it.
   */
  constructor({ deck, handId, keys, finalDeck = null, shuffles = null, identityKeys, secretKey = null, onchange = null }) {
    let final = finalDeck;
    if (finalDeck === null) {
      if (!(Array.isArray(shuffles) && shuffles.length > 0)) throw fail("encoding", "shuffles: want the hand's shuffle records (or finalDeck), not empty");
      const n = codealSpec(deck).ids.length;
      final = ownBytes(shuffles[shuffles.length - 1], `shuffle record ${shuffles.length - 1}`).subarray(4, 4 + 64 * n);
    }
    this.#ctx = seatContext({ deck, handId, keys, finalDeck: final });
    const K = this.#ctx.keys.length;
    if (!(Array.isArray(identityKeys) && identityKeys.length === K - 1)) throw fail("encoding", `identityKeys: want the ${K - 1} pinned co-dealer keys, holders 1..${K - 1}`);
    this.#identityKeys = identityKeys.map((k, i) => ownBytes(k, `identity key of holder ${i + 1}`, 32));
    this.#secret = secretKey === null ? newSeatKey().secretKey : ownBytes(secretKey, "secretKey", 32);
    this.#publicKey = seatPublicKey(this.#secret);
    this.#onchange = onchange;
  }

  /** The seat's X25519 public key (a copy): the dealer gets this, as DrawCards' seat_public_key. */
  get publicKey() {
    return this.#publicKey.slice();
  }

  /** The hand's deck name. */
  get deck() {
    return this.#ctx.spec.name;
  }

  /** The hand's id. */
  get handId() {
    return this.#ctx.handId;
  }

  /**
   * Open `sealedCards` (DrawCards' sealed_cards for this seat: { position, shares, seals }, under
   * either field name a loader gives): each checked (openSeatCard) and remembered for the release.
   * Returns [{ position, id, code }]; VerificationError as openSeatCard (or naming a malformed
   * field), SeatStateError after the release.
   */
  open(sealedCards) {
    if (this.#released) {
      throw new SeatStateError(`this seat released hand ${this.#ctx.handId}: a card sealed after its release could be read by the house, and is not opened`);
    }
    if (!Array.isArray(sealedCards)) throw fail("encoding", "sealedCards: want the list of this seat's sealed cards, [{ position, shares, seals }]");
    const K = this.#ctx.keys.length;
    const cards = sealedCards.map((c, i) => {
      if (c === null || typeof c !== "object") throw fail("encoding", `sealedCards[${i}]: want { position, shares, seals }`);
      const { position } = c;
      // The counts first (checkSeals' words), before any share is converted.
      if (!Array.isArray(c.shares)) throw fail("encoding", `position ${position} shares: want the list of its sealed shares, holder order`);
      if (c.shares.length !== K) throw fail("transcript", `position ${position}: ${c.shares.length} shares for ${K} holders`);
      if (!(Array.isArray(c.seals) && c.seals.length === K - 1)) throw fail("seal", `position ${position}: want one seal statement per co-dealer, holders 1..${K - 1} in order`);
      const shares = c.shares.map((s, k) => ownBytes(s, `position ${position} share ${k}`));
      const seals = c.seals.map((s, k) => sealOf(s, position, k));
      const card = openSeatCard(this.#ctx, position, shares, this.#secret, seals, this.#identityKeys);
      return { position, shares, ...card };
    });
    for (const c of cards) this.#opened.set(c.position, c);
    this.#changed();
    return cards.map(({ position, id, code }) => ({ position, id, code }));
  }

  /** Whether this seat has released the hand. */
  get released() {
    return this.#released !== null;
  }

  /** Whether this seat has opened a card (and so has something to release). */
  get opened() {
    return this.#opened.size > 0;
  }

  /**
   * The seat's play is over (it folded, or the showdown came): its release tokens (section 9.3, 32
   * bytes each; one per co-dealer share of each card it opened) for the game server to pass to
   * CloseHand's seat_releases. From then on no card is opened. Asked again (a close refused for
   * another seat's missing release), the same tokens. SeatStateError while it has opened no card
   * (a release then would release nothing, yet bar every card after it). Send them in a request
   * body over the game's own authenticated channel: never in a URL, a log line or the console.
   */
  release() {
    if (this.#released === null) {
      if (this.#opened.size === 0) {
        throw new SeatStateError(`this seat has opened no card of hand ${this.#ctx.handId} yet: there is nothing to release, and a release now would refuse every card after it`);
      }
      const sealedCards = [...this.#opened.values()].map(({ position, shares }) => ({ position, shares }));
      this.#released = seatReleases({ deck: this.#ctx.spec.name, handId: this.#ctx.handId, sealedCards, secretKey: this.#secret });
      this.#changed();
    }
    return this.#released.map((t) => Uint8Array.from(t));
  }

  /**
   * What the seat's own player may be shown: no key, no token, but its hole cards. So it must not
   * be logged, stored or sent anywhere (another player, the game's server, analytics) before the
   * showdown.
   */
  state() {
    const cards = [...this.#opened.values()].sort((a, b) => a.position - b.position).map((c) => c.code);
    return { handId: this.#ctx.handId, publicKey: toHex(this.#publicKey), cards, released: this.released, tokens: this.#released?.length ?? 0 };
  }

  toJSON() {
    return this.state();
  }

  [Symbol.for("nodejs.util.inspect.custom")]() {
    return `HandSeat ${JSON.stringify(this.state())}`;
  }

  #changed() {
    if (this.#onchange) this.#onchange(this.state());
  }
}
