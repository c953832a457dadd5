// A small game server in Node.js: it deals one hold'em hand through fairdeck over gRPC
// (@grpc/grpc-js, with the .proto files loaded by @grpc/proto-loader), handles the dealer's
// refusals by their reason, and verifies the closed hand with @fairdeck/verifier, the log proofs
// included. See README.md here, and docs/api.md, "From other languages".
//
//   node game_server.mjs --target 127.0.0.1:50051 --key @log.pub [--players 2] [--deck standard] [--out hand.json]
//                        [--tls | --ca ca.pem] [--insecure] [--proto DIR]
//   node game_server.mjs --verify hand.json --key @log.pub
//
// Exit status: 0 the hand verified; 1 it did not, or the dealer refused a call; 2 bad arguments,
// an unreadable file, a key that is not a log key, or a deck the dealer does not know.
// The .proto files come from --proto DIR, else $FAIRDECK_PROTO, else a proto/ folder beside this
// file, else the repository's proto/ (../../proto from here): each DIR holds fairdeck/v1/*.proto.
// FAIRDECK_API_TOKEN, when set, is sent as the dealer token: over TLS (--tls: the system's roots;
// --ca: the operator's CA), or in plain text to loopback alone unless --insecure says otherwise.
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { accessSync, closeSync, constants, existsSync, fstatSync, openSync, readSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { isIP } from "node:net";
import {
  LogError,
  StatusDecodeError,
  VerificationError,
  cardCode,
  errorDetails,
  handProofText,
  verifyHandProof,
} from "@fairdeck/verifier";
import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";

const HERE = dirname(fileURLToPath(import.meta.url));
const PROTOS = ["fairdeck/v1/dealer.proto", "fairdeck/v1/audit.proto"];
// keepCase: the fields keep the names of the .proto and of our docs (hand_id, not handId).
// longs: String: a uint64 (log indexes, tree sizes) arrives as a decimal string, never rounded.
// bytes are left as Buffers. enums: String gives "HAND_STATE_CLOSED" rather than 3.
const LOADER = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };
const USAGE = `usage: node game_server.mjs --target HOST:PORT --key KEY|@FILE [--players 2..9] [--deck standard]
                           [--out hand.json] [--tls | --ca CA.pem] [--insecure] [--proto DIR]
       node game_server.mjs --verify hand.json --key KEY|@FILE

Deals one hold'em hand through a fairdeck dealer and verifies it with @fairdeck/verifier.
  --target HOST:PORT  the dealer (default 127.0.0.1:50051)
  --key KEY|@FILE     the log's verifier key (\`fairdeck key\`), or a file holding it
  --players N         seats, 2 to 9 (default 2)
  --deck NAME         the deck spec (default standard)
  --out FILE          write the hand proof there (\`fairdeck verify FILE --key KEY\` checks it)
  --verify FILE       check a hand proof instead of dealing
  --tls, --ca CA.pem  TLS with the system's roots, or with the operator's CA
  --insecure          allow FAIRDECK_API_TOKEN in plain text off loopback
  --proto DIR         the folder holding fairdeck/v1/*.proto (or $FAIRDECK_PROTO; default: a proto/
                      folder beside this file, then the repository's)
Exit status: 0 verified; 1 not verified, or a call refused; 2 bad arguments or files.`;
// Limits: the dealer refused the call before doing anything (docs/api.md, "Limits") and says in a
// RetryInfo when to come back, so any call, even one that is not idempotent, may be sent again.
const WAITED_OUT = new Set(["RATE_LIMITED", "TOO_MANY_OPEN_HANDS"]);
const MAX_RETRIES = 5;

/** A call that failed, with what the dealer said of it (errorDetails: null when it said nothing). */
class Refused extends Error {
  constructor(method, details, error) {
    const code = grpc.status[error.code];
    super(
      details?.reason
        ? `the dealer refused ${method}: ${code} ${details.reason}${details.field ? ` (field ${details.field})` : ""}: ${details.message}`
        : `${method} failed: ${code}: ${error.details}`,
    );
    this.details = details;
  }
}

function usage(message) {
  console.error(`game_server: ${message}`);
  process.exit(2);
}

const MAX_FILE_BYTES = 1024 * 1024;

/**
 * A file the user names, read only if it is a regular file, and only its first `limit` bytes and
 * one more (a hand proof larger than the verifier reads is its finding, at step format): a device
 * such as /dev/zero or a FIFO is one line and exit status 2, never a read without end.
 */
function readFile(path, what, limit = MAX_FILE_BYTES) {
  let fd;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (e) {
    return usage(`cannot read ${what} ${path}: ${e.code ?? e.message}`);
  }
  try {
    const stat = fstatSync(fd);
    if (stat.isDirectory()) usage(`cannot read ${what} ${path}: EISDIR`);
    if (!stat.isFile()) usage(`cannot read ${what} ${path}: it is not a regular file (a device, a FIFO or a socket)`);
    const buffer = Buffer.alloc(Math.min(stat.size, limit) + 1);
    let size = 0;
    for (let n; size < buffer.length && (n = readSync(fd, buffer, size, buffer.length - size, null)) > 0; ) size += n;
    return buffer.subarray(0, size);
  } finally {
    closeSync(fd);
  }
}

/** The log's key, checked before anything is dealt: a hand whose proof cannot be checked is no use. */
function readKey(value) {
  if (!value) usage("--key is required: the log's verifier key (`fairdeck key`), or @FILE");
  let key = value;
  if (value.startsWith("@")) {
    const data = readFile(value.slice(1), "the key file");
    if (data.length > MAX_FILE_BYTES) usage(`cannot read the key file ${value.slice(1)}: it is larger than ${MAX_FILE_BYTES} bytes`);
    key = data.toString("utf8").trim();
  }
  try {
    verifyHandProof("", { key }); // the key is read before the proof: LogError when it is not a log key
  } catch (e) {
    if (e instanceof LogError) usage(`--key is not the log's key: ${e.message}`);
    if (!(e instanceof VerificationError)) throw e;
  }
  return key;
}

/** Whether `target` (host:port, [v6]:port, or a dns:/ipv4:/ipv6: target) stays on this machine. */
function isLoopback(target) {
  let host = target.replace(/^(?:dns:\/\/[^/]*\/|dns:|ipv4:|ipv6:)/, "");
  if (host.startsWith("unix:") || host.startsWith("unix-abstract:")) return true;
  host = host.startsWith("[") ? host.slice(1, host.indexOf("]")) : host.replace(/:[^:]*$/, "");
  if (/^localhost\.?$/i.test(host)) return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  return isIP(host) === 6 && new URL(`http://[${host}]/`).hostname === "[::1]";
}

/** The channel's credentials: TLS with --tls or --ca; plain text otherwise, where the token allows. */
function credentialsFor({ target, tls, ca, insecure }) {
  if (ca) {
    const pem = readFile(ca, "the CA file");
    if (pem.length > MAX_FILE_BYTES) usage(`cannot read the CA file ${ca}: it is larger than ${MAX_FILE_BYTES} bytes`);
    return grpc.credentials.createSsl(pem);
  }
  if (tls) return grpc.credentials.createSsl();
  if (process.env.FAIRDECK_API_TOKEN && !isLoopback(target) && !insecure) {
    usage(`refusing to send FAIRDECK_API_TOKEN to ${target} in plain text: use --tls or --ca CA.pem (or --insecure on a network you trust)`);
  }
  return grpc.credentials.createInsecure();
}

/**
 * The folder of the .proto files: the one given (--proto, else $FAIRDECK_PROTO), else the first of
 * a proto/ beside this file and the repository's that holds them. A copy of this file outside the
 * repository has neither: it is told, in one line, what to give.
 */
export function protoDir(given = process.env.FAIRDECK_PROTO || undefined) {
  const holds = (dir) => PROTOS.every((p) => existsSync(join(dir, p)));
  if (given) {
    const missing = PROTOS.filter((p) => !existsSync(join(given, p)));
    if (missing.length) usage(`${resolve(given)} does not hold ${missing.join(" and ")}: give --proto (or FAIRDECK_PROTO) the proto/ folder of the fairdeck repository`);
    return given;
  }
  const found = [join(HERE, "proto"), join(HERE, "..", "..", "proto")].find(holds);
  if (!found) usage(`cannot find ${PROTOS[0]} beside ${HERE} or in ../../proto: give --proto DIR (or FAIRDECK_PROTO=DIR), DIR the proto/ folder of the fairdeck repository`);
  return found;
}

/** The dealer's and the log's stubs on one channel. */
function connect(target, credentials, proto = protoDir()) {
  let loaded;
  try {
    loaded = protoLoader.loadSync(PROTOS, { ...LOADER, includeDirs: [proto] });
  } catch (e) {
    usage(`cannot load the .proto files in ${resolve(proto)}: ${e.message.split("\n")[0]}`);
  }
  const v1 = grpc.loadPackageDefinition(loaded).fairdeck.v1;
  let dealer;
  try {
    dealer = new v1.DealerService(target, credentials);
  } catch (e) {
    usage(`--target ${JSON.stringify(target)} is not a gRPC target (HOST:PORT): ${e.message}`);
  }
  const audit = new v1.AuditService(target, credentials, { channelOverride: dealer.getChannel() });
  return { dealer, audit };
}

function metadata(requestId) {
  const m = new grpc.Metadata();
  if (process.env.FAIRDECK_API_TOKEN) m.set("authorization", `Bearer ${process.env.FAIRDECK_API_TOKEN}`);
  if (requestId) m.set("x-request-id", requestId);
  return m;
}

/**
 * One call. A refusal the dealer asks us to wait out (a rate or open-hands limit, with a
 * RetryInfo delay) is sent again after that delay; any other refusal is raised as Refused, with
 * its reason. (A lost answer is another matter: OpenHand's request_id and DrawCards'
 * expected_position make those safe to send again, but this example does not resend them.)
 */
async function call(stub, method, request, out) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await new Promise((resolve, reject) =>
        stub[method](request, metadata(request.request_id), { deadline: Date.now() + 10_000 }, (e, r) => (e ? reject(e) : resolve(r))),
      );
    } catch (error) {
      if (error.code === undefined) throw error;
      let details = null;
      try {
        details = errorDetails(error);
      } catch (e) {
        if (!(e instanceof StatusDecodeError)) throw e; // a trailer no one can read: the status code alone
      }
      if (details && WAITED_OUT.has(details.reason) && details.retryDelayMs !== null && attempt < MAX_RETRIES) {
        out(`  ${method}: ${details.reason}, waiting ${Math.ceil(details.retryDelayMs)} ms as the dealer asks`);
        await new Promise((r) => setTimeout(r, details.retryDelayMs));
        continue;
      }
      throw new Refused(method, details, error);
    }
  }
}

/** The players' seeds, committed before any is revealed (examples/README.md, "The protocol"). */
function playersSeeds(handId, players) {
  const seeds = Array.from({ length: players }, () => randomBytes(32));
  const commitment = (seat, seed) => createHash("sha256").update(`${handId}\n${seat}\n`).update(seed).digest("hex");
  const committed = seeds.map((seed, seat) => commitment(seat, seed)); // each player sends only this
  seeds.forEach((seed, seat) => {
    if (commitment(seat, seed) !== committed[seat]) throw new Error(`seat ${seat + 1}'s seed does not open its commitment`);
  });
  return seeds;
}

export async function deal({ target, key, deck = "standard", players = 2, out = console.log, credentials = grpc.credentials.createInsecure(), proto }) {
  const { dealer, audit } = connect(target, credentials, proto ?? protoDir());
  try {
    // 1. The dealer commits. A request_id makes the open safe to retry: a repeat returns the same hand.
    const request = { deck, request_id: `node-${randomUUID()}` };
    const opened = (await call(dealer, "OpenHand", request, out)).hand;
    const handId = opened.hand_id;
    out(`hand ${handId} (${opened.deck}, ${opened.version})`);
    out(`commitment ${opened.commitment.toString("hex")}  (log index ${opened.commit_receipt.index})`);
    // 2. The players' seeds, after the commitment; 3. shuffled with them, in seat order.
    const client_seeds = playersSeeds(handId, players).map((data) => ({ data }));
    await call(dealer, "ShuffleHand", { hand_id: handId, client_seeds }, out);
    // 4. The deal. Each draw names where it starts, so a repeat answers the same cards.
    const drawn = [];
    const draw = async (count) => {
      const expected_position = drawn.length;
      const r = await call(dealer, "DrawCards", { hand_id: handId, count, expected_position }, out);
      drawn.push(...r.cards);
      return r.cards.map((id) => cardCode(deck, id));
    };
    for (let seat = 1; seat <= players; seat++) out(`seat ${seat}: ${(await draw(2)).join(" ")}`);
    await draw(1); // the burn card
    out(`flop:   ${(await draw(3)).join(" ")}`);
    // 5. The close reveals the seed.
    const closed = (await call(dealer, "CloseHand", { hand_id: handId }, out)).hand;
    out(`closed: server seed ${closed.transcript.server_seed.toString("hex").slice(0, 16)}...`);
    // 6. Verified with the package, from what anyone can fetch: the hand's two log entries, proved
    //    in the signed log, with the transcript, as one hand proof checked under the operator's key.
    const reveal = await call(audit, "GetInclusionProof", { hand_id: handId, kind: "ENTRY_KIND_REVEAL" }, out);
    const commit = await call(audit, "GetInclusionProof",
      { hand_id: handId, kind: "ENTRY_KIND_COMMIT", tree_size: reveal.tree_size }, out);
    // The log key's rotation statements: after a rotation, the proof carries those that lead to
    // the checkpoint's key (format 3), and a player who holds an older key follows them.
    const { key_rotations: keyRotations } = await call(audit, "GetPublicKey", {}, out);
    const text = handProofText({ hand: closed, commit, reveal, logKey: key, keyRotations });
    const proof = verifyHandProof(text, { key });
    // What this game server saw itself: the commitment at open, and the cards it drew.
    if (proof.transcript.commitment !== opened.commitment.toString("hex")) {
      throw new VerificationError("commitment", "the closed hand's commitment is not the one published at open");
    }
    if (proof.dealt.join(" ") !== drawn.map((id) => cardCode(deck, id)).join(" ")) {
      throw new VerificationError("cards", "the cards drawn are not the top of the verified deck");
    }
    out(okLine(proof));
    return { handId, text };
  } finally {
    dealer.close();
  }
}

/** The line `fairdeck verify` prints for a verified hand proof. */
const okLine = (p) =>
  `OK: hand ${p.transcript.handId} verified (${p.transcript.deck}, ${p.dealt.length} of ${p.transcript.cards.length} cards dealt, ` +
  `in the log at tree size ${p.checkpoint.size})`;

/** The command line, or one line and exit status 2 (a mistyped option, a missing value). */
function options(args) {
  try {
    return parseArgs({ args, options: OPTIONS }).values;
  } catch (e) {
    if (!String(e.code).startsWith("ERR_PARSE_ARGS")) throw e;
    return usage(`${e.message.split("\n")[0].replace(/\. To specify.*$/, "")} (--help lists the options)`);
  }
}

const OPTIONS = {
  target: { type: "string", default: "127.0.0.1:50051" },
  key: { type: "string" },
  deck: { type: "string", default: "standard" },
  players: { type: "string", default: "2" },
  out: { type: "string" },
  verify: { type: "string" },
  tls: { type: "boolean", default: false },
  ca: { type: "string" },
  insecure: { type: "boolean", default: false },
  proto: { type: "string" },
  help: { type: "boolean", short: "h", default: false },
};

async function main() {
  const values = options(process.argv.slice(2));
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  const key = readKey(values.key);
  if (values.verify) {
    const proof = readFile(values.verify, "the hand proof");
    try {
      console.log(okLine(verifyHandProof(proof, { key })));
      return 0;
    } catch (e) {
      if (!(e instanceof VerificationError)) throw e;
      console.log(`FAILED at step ${e.step}: ${e.detail}`);
      return 1;
    }
  }
  const players = Number(values.players);
  if (!Number.isInteger(players) || players < 2 || players > 9) usage("--players is 2 to 9");
  const credentials = credentialsFor(values);
  const proto = protoDir(values.proto ?? (process.env.FAIRDECK_PROTO || undefined));
  // Checked before the deal: a hand dealt whose proof then has nowhere to go is of no use.
  if (values.out) writable(values.out);
  try {
    const { text } = await deal({ target: values.target, key, deck: values.deck, players, credentials, proto });
    if (values.out) {
      try {
        writeFileSync(values.out, text);
      } catch (e) {
        usage(`cannot write --out ${values.out}: ${e.code ?? e.message}`);
      }
    }
    return 0;
  } catch (e) {
    if (e instanceof VerificationError) {
      console.log(`FAILED at step ${e.step}: ${e.detail}`);
      return 1;
    }
    if (e instanceof Refused) {
      if (e.details?.reason === "UNKNOWN_DECK") {
        console.error(`game_server: the dealer does not deal deck ${JSON.stringify(values.deck)}: ${e.message}`);
        return 2;
      }
      console.error(`game_server: ${e.message}`);
      return 1;
    }
    throw e;
  }
}

/** Whether --out can be written (its folder is, and it is no folder), else one line and exit 2. */
function writable(path) {
  try {
    if (existsSync(path) && statSync(path).isDirectory()) throw Object.assign(new Error(), { code: "EISDIR" });
    accessSync(existsSync(path) ? path : dirname(resolve(path)), constants.W_OK);
  } catch (e) {
    usage(`cannot write --out ${path}: ${e.code ?? e.message}`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) process.exitCode = await main();
