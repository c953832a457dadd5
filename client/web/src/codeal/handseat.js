// A seat's device through one co-dealt hand (docs/codealing-spec.md 9, 9.2, 9.3): its key, the
// cards it opened (each checked against the co-dealers' pinned identity keys), and its release of
// the hand. Invariants: the secret key never leaves the object (no getter, no JSON, no inspect);
// release tokens exist only once `release()` was called (the device's own word that its play is
// over: folded, or the showdown came), and only for seals that opened with this seat's key; after
// the release no card is opened (the co-dealer may answer its seed from then on, so a card sealed
// later could be read by the house). Nothing here logs, stores or sends anything.
import { toHex } from "../spec.js";
import { codealSpec } from "./hand.js";
import { newSeatKey, openSeatCard, seatContext, seatPublicKey, seatReleases } from "./seat.js";

/** A seat refused what was asked of it (a card after its release): the message says why. */
export class SeatStateError extends Error {
  constructor(message) {
    super(message);
    this.name = "SeatStateError";
  }
}

const field = (m, name, camel) => m[camel] ?? m[name];
const sealOf = (s) => ({
  holder: s.holder,
  seatPublicKey: field(s, "seat_public_key", "seatPublicKey"),
  sealedSha256: field(s, "sealed_share_sha256", "sealedSha256"),
  signature: s.signature,
});

export class HandSeat {
  #secret;
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
   */
  constructor({ deck, handId, keys, finalDeck = null, shuffles = null, identityKeys, secretKey = null, onchange = null }) {
    const last = finalDeck === null && Array.isArray(shuffles) ? shuffles[shuffles.length - 1] : null;
    const final = last ? Uint8Array.from(last).subarray(4, 4 + 64 * codealSpec(deck).ids.length) : finalDeck;
    this.#ctx = seatContext({ deck, handId, keys: keys.map((k) => Uint8Array.from(k)), finalDeck: final });
    this.#identityKeys = identityKeys;
    this.#secret = secretKey ?? newSeatKey().secretKey;
    this.#onchange = onchange;
    /** The seat's X25519 public key: the dealer gets this, as DrawCards' seat_public_key. */
    this.publicKey = seatPublicKey(this.#secret);
    this.deck = deck;
    this.handId = handId;
  }

  /**
   * Open `sealedCards` (DrawCards' sealed_cards for this seat: { position, shares, seals }, under
   * either field name a loader gives): each checked (openSeatCard) and remembered for the release.
   * Returns [{ position, id, code }]; VerificationError as openSeatCard, SeatStateError after the release.
   */
  open(sealedCards) {
    if (this.#released) {
      throw new SeatStateError(`this seat released hand ${this.handId}: a card sealed after its release could be read by the house, and is not opened`);
    }
    const cards = sealedCards.map((c) => {
      const shares = c.shares.map((s) => Uint8Array.from(s));
      const card = openSeatCard(this.#ctx, c.position, shares, this.#secret, c.seals.map(sealOf), this.#identityKeys);
      return { position: c.position, shares, ...card };
    });
    for (const c of cards) this.#opened.set(c.position, c);
    this.#changed();
    return cards.map(({ position, id, code }) => ({ position, id, code }));
  }

  /** Whether this seat has released the hand. */
  get released() {
    return this.#released !== null;
  }

  /**
   * The seat's play is over (it folded, or the showdown came): its release tokens (section 9.3, 32
   * bytes each; one per co-dealer share of each card it opened) for the game server to pass to
   * CloseHand's seat_releases. From then on no card is opened. Asked again (a close refused for
   * another seat's missing release), the same tokens. Send them in a request body over the game's
   * own authenticated channel: never in a URL, a log line or the console.
   */
  release() {
    if (this.#released === null) {
      const sealedCards = [...this.#opened.values()].map(({ position, shares }) => ({ position, shares }));
      this.#released = seatReleases({ deck: this.deck, handId: this.handId, sealedCards, secretKey: this.#secret });
      this.#changed();
    }
    return this.#released.map((t) => Uint8Array.from(t));
  }

  /** What may be shown or logged of the seat: no key, no token. */
  state() {
    const cards = [...this.#opened.values()].sort((a, b) => a.position - b.position).map((c) => c.code);
    return { handId: this.handId, publicKey: toHex(this.publicKey), cards, released: this.released, tokens: this.#released?.length ?? 0 };
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
