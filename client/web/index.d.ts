// Types of @fairdeck/verifier (src/index.js). A test checks that every value this file declares is
// exported by the code, and every one the code exports is declared here.

/** A step of docs/fairness-spec.md section 6 or docs/hand-proof.md, "The checks". */
export type Step =
  | "version"
  | "malformed"
  | "format"
  | "commitment"
  | "deck"
  | "cards"
  | "entries"
  | "rotations"
  | "checkpoint"
  | "inclusion"
  | "cosignatures"
  | CodealStep;

/** A step of docs/codealing-spec.md section 10 (and "seal", section 9, on a seat's device). */
export type CodealStep = "encoding" | "key" | "transcript" | "shuffle" | "share" | "open" | "seed" | "seal";

/** A check that failed: evidence about the dealer, never a reason to retry. */
export class VerificationError extends Error {
  /** The step that failed, as `fairdeck verify` names it. */
  readonly step: Step;
  /** Why, in the words `fairdeck verify` prints after "FAILED at step STEP: ". */
  readonly detail: string;
}

/** A log key or witness key given by the caller that is not valid (not a finding about a proof). */
export class LogError extends Error {}

/** A tlog-policy file that does not follow the text (C2SP tlog-policy); the message names the line. */
export class PolicyFileError extends LogError {}

/** A text that is not strict JSON (docs/fairness-spec.md section 7.1). */
export class StrictJSONError extends Error {}

/** A grpc-status-details-bin trailer that is not a valid google.rpc.Status. */
export class StatusDecodeError extends Error {}

/** The deck specs of fairdeck-v1: "standard", "jokers", "short", "shoe-1" … "shoe-8". */
export const SPEC_NAMES: readonly string[];
/** The algorithm versions this verifier knows: ["fairdeck-v1"]. */
export const SUPPORTED_VERSIONS: readonly string[];

/** A verified transcript: hex for bytes, card codes ("As", "X1", "7h.3") top card first. */
export interface Transcript {
  version: string;
  deck: string;
  handId: string;
  commitment: string;
  serverSeed: string;
  clientSeeds: string[];
  cards: string[];
}

/** A transcript value (docs/fairness-spec.md section 7.2), as a transcript's JSON text holds it. */
export interface TranscriptValue {
  version: string;
  deck: string;
  hand_id: string;
  commitment: string;
  server_seed: string;
  client_seeds: string[];
  cards: string[];
}

/** A transcript's text (bytes or a string, exactly as written) or its value. */
export type TranscriptInput = Uint8Array | string | TranscriptValue;

/** Raises VerificationError at the first step that fails. */
export function verifyTranscript(input: TranscriptInput): Transcript;

export interface HandProofOptions {
  /**
   * The log's verifier key, from the operator (`fairdeck key`): never the one in the file. After a
   * key rotation, every key: a list, or a text holding one a line (as a key file does; lines
   * starting with "#" skipped). A proof signed by any of them verifies.
   */
  key: string | readonly string[];
  /** Witness keys, "NAME=KEY" each; with them, the checkpoint's cosignatures are required. */
  witnesses?: readonly string[];
  /** How many witnesses must have cosigned; null or left out: all of them. */
  threshold?: number | null;
  /**
   * Instead of `witnesses` and `threshold`: a C2SP tlog-policy file (its text, or its bytes as
   * read: names are opaque octets), as the public witness network publishes them. Its witnesses
   * and quorum are required of the checkpoint (`quorum none`: none).
   */
  policy?: string | Uint8Array | null;
}

export interface VerifiedHandProof {
  transcript: Transcript;
  /** The cards dealt, in order: the top of the re-derived deck. */
  dealt: string[];
  /** The signed checkpoint both entries are in, and the keys that signed it: keys given, or keys the file's rotation statements led to from one. */
  checkpoint: { origin: string; size: bigint; root: Uint8Array; signedBy: string[] };
}

/**
 * Checks a hand proof of format 1 (receipts as JSON objects), 2 (receipts as C2SP tlog-proof
 * texts) or 3 (as 2, with the log key rotation statements that lead to the checkpoint's key,
 * followed from a key given when each one holds), as `fairdeck verify` does. Raises VerificationError at the first step that fails;
 * LogError when a key or a witness is not a valid key, the policy file is not valid
 * (PolicyFileError, naming its line), witnesses come beside a policy file, or a threshold comes
 * with no witness (it would check no cosignature); TypeError without a key, or with witnesses
 * that are not an array, a threshold that is not a whole number or a policy that is not text
 * or bytes.
 */
export function verifyHandProof(input: Uint8Array | string, options: HandProofOptions): VerifiedHandProof;

export type CheckStatus = "pass" | "fail" | "skip";

export interface Check {
  step: Step;
  /** What the check means, in plain words. */
  text: string;
  status: CheckStatus;
  detail: string;
}

/** The verifier page's report on a file. */
export interface Report {
  /** "codeal-proof": a co-dealt hand's proof (format 4), its checks those of docs/codealing-spec.md section 10. */
  kind: "hand-proof" | "transcript" | "codeal-proof";
  /** Every check ran and held. */
  ok: boolean;
  /** The first step that failed, or null. */
  step: Step | null;
  detail: string | null;
  /** At step "format": the file's format number, when it is above those this verifier reads (a later format). */
  newerFormat?: number;
  /** A key or witness the caller gave that is not valid (naming which key of a list), or null. */
  inputError: string | null;
  /** How many log keys were given. */
  keys: number;
  /**
   * The keys that signed the checkpoint ("name+keyid"), with the place in the list (from 1) of the
   * key given; for a key the file's rotation statements led to (format 3), `from` names the key
   * given it was reached from (at `position`) and `rotations` how many statements led there.
   */
  signedBy: { key: string; position: number; from?: string; rotations?: number }[];
  checks: Check[];
  /**
   * A co-dealt hand's proof (format 4) that held against the co-dealer keys given: how many key
   * holders, and the page's words after the hand (who shuffled; that no single party could have
   * read the cards once the seeds are revealed and match). Absent otherwise.
   */
  codeal?: { holders: number; summary: string };
  /** A co-dealt hand's proof that held: the OK line `fairdeck verify --codealer-key` prints. */
  line?: string;
  /** How many co-dealer identity keys were given (format 4). */
  codealerKeys?: number;
  hand: {
    handId: string;
    deck: string;
    /** Formats 1 to 3 and transcripts. */
    version?: string;
    size: number;
    dealt: string[];
    deckCodes: string[];
    commitment?: string;
    serverSeed?: string;
    clientSeeds?: string[];
    treeSize?: string;
    logKeyInFile?: string;
    /** Format 4: the key holders, the dealt positions, and what the page lists of the file. */
    holders?: number;
    positions?: number[];
    facts?: [string, string][];
  } | null;
  /** How long the checks took, in milliseconds. */
  millis: number;
}

export interface CheckOptions {
  key?: string | readonly string[];
  /** Format 4: each co-dealer's identity key, 64 hex digits, holder order (a text, one a line, or a list). */
  codealerKey?: string | readonly string[];
  witnesses?: readonly string[];
  threshold?: number | null;
  policy?: string | Uint8Array | null;
}

/** The page's report on a file (a hand proof or a transcript); never raises for what it holds. */
export function check(input: Uint8Array | string, options?: CheckOptions): Report;

/** "OK: hand ... verified (...)" or "FAILED at step STEP: DETAIL", as `fairdeck verify` prints it; null when not every check could run. */
export function verdictLine(report: Report): string | null;

/** As `fairdeck verify` decides: the first 64 KiB hold "fairdeck-hand-proof". */
export function isHandProof(bytes: Uint8Array): boolean;

/** Each check in order, with what it means: [step, text]. */
export const HAND_PROOF_CHECKS: ReadonlyArray<readonly [Step, string]>;
export const TRANSCRIPT_CHECKS: ReadonlyArray<readonly [Step, string]>;

/** "grpc-status-details-bin": the trailer that holds a refused call's google.rpc.Status. */
export const STATUS_DETAILS_KEY: string;
/** "fairdeck.dev": the domain of the dealer's ErrorInfo. */
export const ERROR_DOMAIN: string;

export interface StatusDetail {
  typeUrl: string;
  value: Uint8Array;
}

export interface RpcStatus {
  code: number;
  message: string;
  details: StatusDetail[];
}

export interface ErrorInfo {
  reason: string;
  domain: string;
  metadata: Record<string, string>;
}

export interface RetryInfo {
  retryDelay: { seconds: bigint; nanos: number } | null;
}

/** A refused call's meaning (docs/api.md, "Errors"). */
export interface ErrorDetails {
  /** The canonical status code (3 INVALID_ARGUMENT, 8 RESOURCE_EXHAUSTED, ...). */
  code: number;
  message: string;
  /** The stable reason ("UNKNOWN_DECK", "RATE_LIMITED", ...), or "" without an ErrorInfo. */
  reason: string;
  domain: string;
  /** The request field at fault (ErrorInfo metadata "field"), or null. */
  field: string | null;
  metadata: Record<string, string>;
  /** How long to wait before retrying (RetryInfo), or null when the dealer asked for no wait. */
  retryDelayMs: number | null;
}

export function decodeStatus(bytes: Uint8Array): RpcStatus;
export function decodeErrorInfo(bytes: Uint8Array): ErrorInfo;
export function decodeRetryInfo(bytes: Uint8Array): RetryInfo;

/** Something that holds gRPC metadata: @grpc/grpc-js's Metadata, or its ServiceError. */
export interface HasMetadata {
  get(key: string): unknown;
}

/**
 * A refused call's details, from the trailer's bytes, a grpc-js Metadata, or a grpc-js error
 * (its `.metadata`); null when the call carried no grpc-status-details-bin. Raises
 * StatusDecodeError for a malformed trailer.
 */
export function errorDetails(source: Uint8Array | HasMetadata | { metadata: HasMetadata }): ErrorDetails | null;

/** A uint64 as a gRPC library gives it: a BigInt, a safe integer, a decimal string or a Long. */
export type Uint64 = bigint | number | string | { toString(): string };

/** The dealer's Transcript message (either field naming; bytes as Buffer or Uint8Array). */
export interface TranscriptMessage {
  version: string;
  deck: string;
  hand_id?: string;
  handId?: string;
  commitment: Uint8Array;
  server_seed?: Uint8Array;
  serverSeed?: Uint8Array;
  client_seeds?: Uint8Array[];
  clientSeeds?: Uint8Array[];
  cards: number[];
}

/** A GetInclusionProof response (either field naming). */
export interface InclusionProofMessage {
  index: Uint64;
  tree_size?: Uint64;
  treeSize?: Uint64;
  hashes: Uint8Array[];
  entry: Uint8Array;
  signed_checkpoint?: Uint8Array;
  signedCheckpoint?: Uint8Array;
}

/** The Hand message of CloseHand or GetHand: its transcript and how many cards were dealt. */
export interface HandMessage {
  transcript?: TranscriptMessage | null;
  dealt_count?: number;
  dealtCount?: number;
}

/** The code of card `id` in `deck` ("As", "X1", "7h.3"), as DrawCards' ids stand for; RangeError for an id not in the deck. */
export function cardCode(deck: string, id: number): string;

/** The transcript value of a dealer's Transcript message; raises VerificationError ("malformed") for a card not in its deck. */
export function transcriptFromMessage(message: TranscriptMessage): TranscriptValue;

/**
 * A closed hand's proof text (docs/hand-proof.md), as `fairdeck hand get` writes it: format 1, or
 * format 3 when `keyRotations` (GetPublicKey's `key_rotations`) hold statements that lead to the
 * checkpoint's key. Not checked here.
 */
export function handProofText(parts: {
  hand: HandMessage;
  commit: InclusionProofMessage;
  reveal: InclusionProofMessage;
  logKey: string;
  keyRotations?: readonly Uint8Array[];
}): string;

// --- co-dealt hands (docs/codealing-spec.md) -----------------------------------------------------

/** "fairdeck-codeal-v1". */
export const CODEAL_VERSION: string;
/** The steps of section 10, in order: encoding, key, transcript, shuffle, share, open, seed. */
export const CODEAL_STEPS: readonly CodealStep[];
/** Each co-dealt check in order, with what it means, as the page shows it: [step, text]. */
export const CODEAL_CHECKS: ReadonlyArray<readonly [CodealStep, string]>;

/** A co-dealt hand's published bytes (section 11), holder order; seeds null while it is played. */
export interface CodealHand {
  deck: string;
  handId: string;
  /** K key records, 128 bytes each. */
  keys: Uint8Array[];
  /** K shuffle records, in holder order. */
  shuffles: Uint8Array[];
  /** Each dealt position of the final deck, the card id claimed there, and K shares of 128 bytes. */
  dealt: { position: number; card: number; shares: Uint8Array[] }[];
  seeds: Uint8Array[] | null;
}

export interface VerifiedCodealHand {
  /** K, the number of key holders: all of them together were needed to read any card. */
  holders: number;
  /** The card ids the shares opened, in the order of `dealt`. */
  opened: number[];
  /** With the seeds: the card id at every position of the final deck; null without them. */
  final: number[] | null;
}

/**
 * Steps 10.1 to 10.7 (10.7 only with seeds). Raises VerificationError at the first step that
 * fails, with the Python reference's words; `onStep` is told of each step that held.
 */
export function verifyCodealHand(hand: CodealHand, onStep?: (step: CodealStep) => void): VerifiedCodealHand;

/** A hand as docs/vectors/fairdeck-codeal-v1.json writes it (hex, snake_case) as a CodealHand. */
export function codealHandFromVector(vector: {
  deck: string;
  hand_id: string;
  keys: string[];
  shuffles: string[];
  dealt: { position: number; card: number; shares: string[] }[];
  seeds: string[] | null;
}): CodealHand;

/** "OK: co-dealt hand ... verified (...)" or "FAILED at step STEP: DETAIL". */
export function codealLine(hand: CodealHand): string;

export interface VerifiedCodealProof {
  handId: string;
  deck: string;
  /** K, the number of key holders (the dealer and K-1 co-dealers). */
  holders: number;
  /** The cards of the proof, each with its position in the co-dealt deck. */
  dealt: { position: number; card: string }[];
  /** The seeds were revealed (the hand is over) and each re-derived its shuffle. */
  seedsRevealed: boolean;
  /** Format 5: the size of the signed log its receipts lead to. */
  inLogAt?: bigint;
  /** The OK line `fairdeck verify --codealer-key` prints for the same file. */
  line: string;
}

/**
 * Checks a co-dealt hand's proof (docs/hand-proof.md, format 4, or 5 with its log receipts) against
 * the co-dealers' identity keys the caller pins (64 hex digits each, holder order; never those in
 * the file), and a format-5 proof's receipts against the log keys `key`, as `fairdeck verify
 * --codealer-key --key` does. Raises VerificationError at the first step that fails; TypeError
 * without a key, or with one that is not 64 hex digits.
 */
export function verifyCodealProof(
  input: Uint8Array | string,
  options: {
    codealerKeys: string | readonly string[];
    key?: string | readonly string[];
    witnesses?: readonly string[];
    threshold?: number | null;
    policy?: string | Uint8Array | null;
  },
): VerifiedCodealProof;

/** A seat's X25519 key pair for one hand (32 bytes each): the dealer gets `publicKey` only. */
export interface SeatKey {
  secretKey: Uint8Array;
  publicKey: Uint8Array;
}

/** A fresh seat key, from the platform's secure random source. */
export function newSeatKey(): SeatKey;
/** The X25519 public key of a seat's secret key. */
export function seatPublicKey(secretKey: Uint8Array): Uint8Array;

/**
 * Section 9: the 128-byte share that `holder` sealed (176 bytes) for `position` to this seat.
 * VerificationError at step "seal" when it does not open (another seat, hand, position or holder,
 * or altered); "encoding" when it is not 176 bytes. Verify it before use (combineShares does).
 */
export function openSealedShare(sealed: {
  deck: string;
  handId: string;
  position: number;
  holder: number;
  sealed: Uint8Array;
  secretKey: Uint8Array;
}): Uint8Array;

/** What a seat checks shares against: the hand's keys (proofs of possession checked) and final deck. */
export interface SeatContext {
  readonly handId: string;
}

/**
 * The seat's view of a hand: its K key records (each proof of possession checked) and the final
 * deck (the last shuffle record's 64 n deck bytes). VerificationError ("encoding", "key") if not valid.
 */
export function seatContext(hand: { deck: string; handId: string; keys: Uint8Array[]; finalDeck: Uint8Array }): SeatContext;

/** A card from its K shares (holder order): each DLEQ proof checked, then combined (section 8). */
export function combineShares(context: SeatContext, position: number, shares: Uint8Array[]): { id: number; code: string };

/**
 * A co-dealer's signed word that it sealed one position to one seat key (docs/codealing-spec.md
 * section 9.1), as the dealer relays it (SealedCard.seals).
 */
export interface SealStatement {
  /** The co-dealer's holder index, 1 .. K-1. */
  holder: number;
  /** The X25519 key it sealed to, 32 bytes. */
  seatPublicKey: Uint8Array;
  /** SHA-256 of the sealed share it made, 32 bytes. */
  sealedSha256: Uint8Array;
  /** Ed25519 signature by its identity key over sealStatement(...), 64 bytes. */
  signature: Uint8Array;
}

/** The bytes a co-dealer signs (section 9.1). */
export function sealStatement(
  context: SeatContext,
  position: number,
  holder: number,
  seatPublicKey: Uint8Array,
  sealedSha256: Uint8Array,
): Uint8Array;

/**
 * Section 9.2: every co-dealer's statement for `position` verifies under the Ed25519 key the device
 * pinned for it (`identityKeys`, holders 1..K-1; never the keys the hand names), names this seat's
 * key and the sealed bytes received. VerificationError ("seal", "encoding", "transcript") naming the
 * position otherwise: "position P was sealed by co-dealer K to another key: the dealer may have read
 * this card".
 */
export function checkSeals(
  context: SeatContext,
  position: number,
  sealedShares: Uint8Array[],
  seals: SealStatement[],
  seatPublicKey: Uint8Array,
  identityKeys: Uint8Array[],
): void;

/**
 * A hole card on the seat's device: the co-dealers' seal statements checked (checkSeals), then every
 * holder's sealed share opened, checked and combined.
 */
export function openSeatCard(
  context: SeatContext,
  position: number,
  sealedShares: Uint8Array[],
  secretKey: Uint8Array,
  seals: SealStatement[],
  identityKeys: Uint8Array[],
): { id: number; code: string };

/**
 * Section 9.3: this seat's 32-byte release token of `holder`'s seal of `position`, once the sealed
 * share opens with `secretKey` there (openSealedShare's VerificationError otherwise). A secret until
 * the hand is closed.
 */
export function sealRelease(seal: {
  deck: string;
  handId: string;
  position: number;
  holder: number;
  sealed: Uint8Array;
  secretKey: Uint8Array;
}): Uint8Array;

/** One position DrawCards sealed to this seat: K sealed shares (holder order). */
export interface SealedShares {
  position: number;
  shares: Uint8Array[];
}

/**
 * Section 9.3 for a whole draw, byte for byte the Python SDK's `seat_releases`: the release token of
 * every co-dealer's share (holders 1..K-1) of each sealed card, in order, each checked to open with
 * `secretKey` first. For CloseHand's `seat_releases`, once the seat's play is over; never logged.
 */
export function seatReleases(seat: {
  deck: string;
  handId: string;
  sealedCards: readonly SealedShares[];
  secretKey: Uint8Array;
}): Uint8Array[];

/**
 * What a HandSeat shows of itself: no key, no token, but its hole cards. Show it to the seat's own
 * player; never log, store or send it (to the game's server, another player) before the showdown.
 */
export interface HandSeatState {
  handId: string;
  /** Its X25519 public key, hex. */
  publicKey: string;
  /** The codes of the cards it opened, by position. */
  cards: string[];
  released: boolean;
  /** How many release tokens it gave (0 before its release). */
  tokens: number;
}

/** A HandSeat refused a card after its release, or a release before it opened any card. */
export class SeatStateError extends Error {}

/** A sealed card as DrawCards gives it (either field name a loader gives). */
export interface SealedCardMessage {
  position: number;
  shares: Uint8Array[];
  seals: Array<
    | SealStatement
    | { holder: number; seatPublicKey: Uint8Array; sealedShareSha256: Uint8Array; signature: Uint8Array }
    | { holder: number; seat_public_key: Uint8Array; sealed_share_sha256: Uint8Array; signature: Uint8Array }
  >;
}

/**
 * A seat's device through one co-dealt hand: its key (never readable from outside), the cards it
 * opened (each checked against the pinned co-dealer keys), and its release of the hand once its play
 * is over (docs/codealing-spec.md 9.3).
 */
export class HandSeat {
  constructor(hand: {
    deck: string;
    handId: string;
    keys: Uint8Array[];
    /** The final deck's 64 n bytes, or else `shuffles`: the hand's shuffle records. */
    finalDeck?: Uint8Array | null;
    shuffles?: Uint8Array[] | null;
    /** The co-dealers' Ed25519 identity keys the player pinned, holders 1..K-1. */
    identityKeys: Uint8Array[];
    /** A key this device kept for the hand; a fresh one otherwise. */
    secretKey?: Uint8Array | null;
    onchange?: ((state: HandSeatState) => void) | null;
  });
  /** For DrawCards' seat_public_key (a copy; read-only, as deck and handId). */
  readonly publicKey: Uint8Array;
  readonly deck: string;
  readonly handId: string;
  /** Whether it has opened a card (before that, release() refuses). */
  readonly opened: boolean;
  /** Opens and remembers this seat's cards; SeatStateError after the release. */
  open(sealedCards: readonly SealedCardMessage[]): Array<{ position: number; id: number; code: string }>;
  readonly released: boolean;
  /**
   * The seat's play is over: its release tokens for CloseHand's seat_releases (the same ones if
   * asked again); no card is opened after it; SeatStateError while no card is open. Send them in a
   * request body, never in a URL or a log.
   */
  release(): Uint8Array[];
  /** Its hole cards among the rest: for its player's eyes, never a log before the showdown. */
  state(): HandSeatState;
  toJSON(): HandSeatState;
}
