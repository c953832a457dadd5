// C2SP tlog-policy files (https://c2sp.org/tlog-policy, C2SP main, commit 1896a5a): the witnesses a
// verifier trusts and the quorum of them a checkpoint needs, as `log`, `witness`, `group` and
// `quorum` lines. Read to the letter as the Python reader (fairdeck.log.policy) reads them, and
// refused in its words, naming the line (docs/witness.md, "Policies"):
//
// - the file's octets: tab, newline, 0x20-0x7E and 0x80-0xFF only, at most 1 MiB;
// - names are opaque octets: a line is decoded as UTF-8 with each octet that is not UTF-8 kept as
//   itself (Python's surrogateescape), and split into items at spaces (Python's str.split());
// - witnesses and groups share one namespace, `none` is reserved, a group names only what earlier
//   lines defined, each member once, 1 <= k <= n; exactly one quorum line;
// - no two logs, and no two witnesses, wrap one public key; an ML-DSA-44 witness key is refused.
import { isBytes } from "./bytes.js";
import { LogError, SPACE, b64valid, makePolicy, parseVerifierKey } from "./log.js";
import { head, pyrepr } from "./words.js";

export const MAX_ITEMS = 256;
const MAX_BYTES = 1024 * 1024;
const DECIMAL = /^[1-9][0-9]{0,5}$/;
const ML_DSA_44 = 0x06;
const SPACES = new RegExp(SPACE.source, "g");

/** A tlog-policy file that does not follow the text; the message names the line. */
export class PolicyFileError extends LogError {}

const bad = (why) => new PolicyFileError(why);

/** Bytes as Python's bytes.decode("utf-8", "surrogateescape"): an octet that is not UTF-8 is U+DC80+octet. */
export function decodeSurrogateEscape(bytes) {
  let out = "";
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i];
    const len = b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0;
    let cp = len === 1 ? b : b & (0xff >> (len + 1));
    let ok = len > 0 && i + len <= bytes.length;
    for (let j = 1; ok && j < len; j++) {
      ok = (bytes[i + j] & 0xc0) === 0x80;
      cp = (cp << 6) | (bytes[i + j] & 0x3f);
    }
    // No overlong form, no surrogate, nothing past U+10FFFF (Python's strict UTF-8).
    if (ok && len === 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ok = false;
    if (ok && len === 4 && (cp < 0x10000 || cp > 0x10ffff)) ok = false;
    if (ok) {
      out += String.fromCodePoint(cp);
      i += len;
    } else {
      out += String.fromCharCode(0xdc00 + b);
      i += 1;
    }
  }
  return out;
}

/** The type octet of a key's base64 as Python's _key_type reads it (any valid base64), or null. */
function keyType(vkey) {
  const first = vkey.indexOf("+");
  const second = first < 0 ? -1 : vkey.indexOf("+", first + 1);
  const key64 = first < 0 ? vkey : second < 0 ? vkey.slice(first + 1) : vkey.slice(second + 1);
  if (!b64valid(key64) || key64.length < 2) return null;
  return atob(key64.slice(0, 4).padEnd(4, "=")).charCodeAt(0);
}

class Parser {
  constructor() {
    this.logs = [];
    this.witnesses = new Map(); // name -> cosignature/v1 key
    this.names = new Map(); // witnesses and groups: name -> quorum node
    this.urls = new Map();
    this.quorum = null;
    this.quorumSeen = false;
  }

  parse(data) {
    const lines = [];
    for (let start = 0; start <= data.length; ) {
      let end = data.indexOf(0x0a, start);
      if (end < 0) end = data.length;
      lines.push(data.subarray(start, end));
      start = end + 1;
    }
    if (lines.length && lines[lines.length - 1].length === 0) lines.pop(); // the newline ending the last line
    lines.forEach((raw, i) => {
      const octet = raw.find((b) => b < 0x09 || (b > 0x0a && b < 0x20) || b === 0x7f);
      if (octet !== undefined) throw bad(`policy line ${i + 1}: octet 0x${octet.toString(16).padStart(2, "0")} is not allowed`);
      const items = decodeSurrogateEscape(raw).replaceAll("\t", " ").split(SPACES).filter(Boolean);
      if (!items.length || items[0].startsWith("#")) return;
      try {
        this.line(items);
      } catch (e) {
        if (e instanceof LogError) throw bad(`policy line ${i + 1}: ${e.message}`);
        throw e;
      }
    });
    if (!this.quorumSeen) throw bad("the policy has no quorum line (write `quorum none` to need no witness)");
    return { logs: this.logs, witnesses: this.witnesses, quorum: this.quorum, urls: this.urls };
  }

  line([keyword, ...args]) {
    if (keyword === "log") this.log(args);
    else if (keyword === "witness") this.witness(args);
    else if (keyword === "group") this.group(args);
    else if (keyword === "quorum") this.setQuorum(args);
    else throw bad(`unknown keyword ${pyrepr(head(keyword, 20))} (log, witness, group, quorum)`);
  }

  log(args) {
    if (args.length !== 1 && args.length !== 2) throw bad("want `log <vkey> [<url>]`");
    const key = parseVerifierKey(args[0]);
    if (this.logs.some((k) => equal(k.publicKey, key.publicKey))) throw bad(`log ${key.name} is listed twice (the same public key)`);
    if (this.logs.length === MAX_ITEMS) throw bad(`more than ${MAX_ITEMS} logs`);
    this.logs.push(key);
    if (args.length === 2) this.urls.set(key.name, args[1]);
  }

  newName(name) {
    if (name === "none") throw bad("`none` is reserved: it cannot name a witness or a group");
    if (this.names.has(name)) throw bad(`${pyrepr(name)} is defined twice`);
    if (this.names.size === 2 * MAX_ITEMS) throw bad(`more than ${2 * MAX_ITEMS} witnesses and groups`);
  }

  witness(args) {
    if (args.length !== 2 && args.length !== 3) throw bad("want `witness <name> <vkey> [<url>]`");
    const [name, vkey] = args;
    this.newName(name);
    let key;
    try {
      key = parseVerifierKey(vkey, 0x04);
    } catch (e) {
      if (!(e instanceof LogError)) throw e;
      if (keyType(vkey) === ML_DSA_44) {
        throw bad(
          `witness ${pyrepr(name)} has an ML-DSA-44 key (tlog-cosignature v1.1.0-rc.1); this verifier ` +
            "checks Ed25519 cosignature/v1 only (docs/witness.md)",
        );
      }
      throw bad(`witness ${pyrepr(name)}: ${e.message}`);
    }
    if ([...this.witnesses.values()].some((k) => equal(k.publicKey, key.publicKey))) {
      throw bad(`witness ${pyrepr(name)} has the public key of another witness`);
    }
    this.witnesses.set(name, key);
    this.names.set(name, { name });
    if (args.length === 3) this.urls.set(name, args[2]);
  }

  group(args) {
    if (args.length < 3) throw bad("want `group <name> all|any|<k> <member>...` with at least one member");
    const [name, threshold, ...members] = args;
    this.newName(name);
    const seen = new Set();
    for (const member of members) {
      if (member === "none") throw bad("`none` cannot be a group member");
      if (!this.names.has(member)) throw bad(`group ${pyrepr(name)}: ${pyrepr(member)} is not defined on an earlier line`);
      if (seen.has(member)) throw bad(`group ${pyrepr(name)} lists ${pyrepr(member)} twice`);
      seen.add(member);
    }
    const n = members.length;
    let k;
    if (threshold === "all") k = n;
    else if (threshold === "any") k = 1;
    else if (DECIMAL.test(threshold) && Number(threshold) <= n) k = Number(threshold);
    else throw bad(`group ${pyrepr(name)}: the threshold is all, any or a decimal 1 to ${n}`);
    this.names.set(name, { name, k, members: members.map((m) => this.names.get(m)) });
  }

  setQuorum(args) {
    if (args.length !== 1) throw bad("want `quorum <name>`");
    if (this.quorumSeen) throw bad("a second quorum line (a policy has exactly one)");
    this.quorumSeen = true;
    if (args[0] === "none") return;
    if (!this.names.has(args[0])) throw bad(`quorum ${pyrepr(args[0])} is not defined on an earlier line`);
    this.quorum = this.names.get(args[0]);
  }
}

function equal(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/**
 * A tlog-policy file (its bytes, or its text, as UTF-8): `{ logs, witnesses, quorum, urls }`, where
 * `quorum` is null for `quorum none`. PolicyFileError (a LogError) names the line at fault.
 */
export function parsePolicyFile(input) {
  const data = typeof input === "string" ? new TextEncoder().encode(input) : input;
  if (!isBytes(data)) throw new TypeError("a tlog-policy file is bytes or a string");
  if (data.length > MAX_BYTES) throw bad(`a policy file is at most ${MAX_BYTES} bytes`);
  return new Parser().parse(data);
}

/**
 * The witness policy the verifiers take (log.js, makePolicy): the quorum's witnesses and the quorum;
 * null for `quorum none` (no cosignature required), as TlogPolicy.witness_policy().
 */
export function witnessPolicyOf(policy) {
  if (policy.quorum === null) return null;
  const used = new Set();
  const walk = (q) => (q.members ? q.members.forEach(walk) : used.add(q.name));
  walk(policy.quorum);
  const witnesses = new Map([...policy.witnesses].filter(([name]) => used.has(name)));
  return makePolicy(witnesses, 0, policy.quorum);
}
