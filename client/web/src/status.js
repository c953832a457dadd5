// The error details of a refused call: the google.rpc.Status the dealer puts in the
// grpc-status-details-bin trailer, with its google.rpc.ErrorInfo (domain "fairdeck.dev", a stable
// reason, metadata["field"]) and, for a limit, its google.rpc.RetryInfo (docs/api.md, "Errors").
//
// Read from the protobuf wire format (https://protobuf.dev/programming-guides/encoding/) as
// protobuf's own parsers read it: fields in any order, unknown fields skipped, the last of a
// repeated singular field kept (a repeated message field merged), strings valid UTF-8, groups
// (wire types 3 and 4, nested up to 100 deep) skipped as unknown fields. Anything else (a truncated
// field, a length past the end, a varint of more than 10 bytes, a field number past 2^29 - 1, a
// group that does not end with its own number) is a StatusDecodeError, never a guess.

import { isBytes } from "./bytes.js";
export class StatusDecodeError extends Error {}

export const STATUS_DETAILS_KEY = "grpc-status-details-bin";
export const ERROR_DOMAIN = "fairdeck.dev";
const ERROR_INFO = "google.rpc.ErrorInfo";
const RETRY_INFO = "google.rpc.RetryInfo";

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const MAX_FIELD_NUMBER = (1n << 29n) - 1n;
const MAX_GROUP_DEPTH = 100; // protobuf's own recursion limit

/** Each field of a message: [number, wireType, value] (a BigInt for varints and fixed, bytes for LEN). */
function* fields(bytes, what) {
  if (!isBytes(bytes)) throw new TypeError(`${what} must be a Uint8Array (or a Buffer)`);
  let at = 0;
  const varint = () => {
    let value = 0n;
    for (let i = 0; i < 10; i++) {
      if (at >= bytes.length) throw new StatusDecodeError(`${what}: a varint runs past the end`);
      const b = bytes[at++];
      value |= BigInt(b & 0x7f) << BigInt(7 * i);
      if (!(b & 0x80)) return BigInt.asUintN(64, value);
    }
    throw new StatusDecodeError(`${what}: a varint longer than 10 bytes`);
  };
  const take = (n) => {
    if (n > BigInt(bytes.length - at)) throw new StatusDecodeError(`${what}: a field runs past the end`);
    const out = bytes.subarray(at, at + Number(n));
    at += Number(n);
    return out;
  };
  const groups = []; // the numbers of the groups being skipped, innermost last
  while (at < bytes.length) {
    const key = varint();
    const number = Number(key >> 3n);
    const type = Number(key & 7n);
    if (number === 0 || key >> 3n > MAX_FIELD_NUMBER) throw new StatusDecodeError(`${what}: field number ${key >> 3n}`);
    let value;
    if (type === 0) value = varint();
    else if (type === 1) value = take(8n);
    else if (type === 2) value = take(varint());
    else if (type === 5) value = take(4n);
    else if (type === 3) {
      if (groups.length === MAX_GROUP_DEPTH) throw new StatusDecodeError(`${what}: groups nested deeper than ${MAX_GROUP_DEPTH}`);
      groups.push(number);
      continue;
    } else if (type === 4) {
      if (groups.pop() !== number) throw new StatusDecodeError(`${what}: an end of group ${number} that no group ${number} began`);
      continue;
    } else throw new StatusDecodeError(`${what}: wire type ${type}`);
    if (!groups.length) yield [number, type, value];
  }
  if (groups.length) throw new StatusDecodeError(`${what}: group ${groups.at(-1)} does not end`);
}

const text = (raw, what) => {
  try {
    return utf8.decode(raw);
  } catch {
    throw new StatusDecodeError(`${what} is not valid UTF-8`);
  }
};

/** google.protobuf.Any: { typeUrl, value }. */
function decodeAny(bytes) {
  let typeUrl = "";
  let value = new Uint8Array(0);
  for (const [n, t, v] of fields(bytes, "google.protobuf.Any")) {
    if (n === 1 && t === 2) typeUrl = text(v, "Any.type_url");
    else if (n === 2 && t === 2) value = v;
  }
  return { typeUrl, value };
}

/** google.rpc.Status from its bytes: { code, message, details: [{ typeUrl, value }] }. */
export function decodeStatus(bytes) {
  let code = 0;
  let message = "";
  const details = [];
  for (const [n, t, v] of fields(bytes, "google.rpc.Status")) {
    if (n === 1 && t === 0) code = Number(BigInt.asIntN(32, v));
    else if (n === 2 && t === 2) message = text(v, "Status.message");
    else if (n === 3 && t === 2) details.push(decodeAny(v));
  }
  return { code, message, details };
}

/** google.rpc.ErrorInfo from an Any's value: { reason, domain, metadata } (metadata a plain object). */
export function decodeErrorInfo(bytes) {
  let reason = "";
  let domain = "";
  const metadata = Object.create(null); // a key such as "__proto__" is only a key
  for (const [n, t, v] of fields(bytes, ERROR_INFO)) {
    if (n === 1 && t === 2) reason = text(v, "ErrorInfo.reason");
    else if (n === 2 && t === 2) domain = text(v, "ErrorInfo.domain");
    else if (n === 3 && t === 2) {
      let key = "";
      let value = "";
      for (const [m, u, w] of fields(v, "ErrorInfo.metadata entry")) {
        if (m === 1 && u === 2) key = text(w, "ErrorInfo.metadata key");
        else if (m === 2 && u === 2) value = text(w, "ErrorInfo.metadata value");
      }
      metadata[key] = value; // a map: the last entry for a key wins
    }
  }
  return { reason, domain, metadata };
}

/** google.rpc.RetryInfo from an Any's value: { retryDelay: { seconds (a BigInt), nanos } | null }. */
export function decodeRetryInfo(bytes) {
  let retryDelay = null;
  for (const [n, t, v] of fields(bytes, RETRY_INFO)) {
    if (n !== 1 || t !== 2) continue;
    retryDelay ??= { seconds: 0n, nanos: 0 }; // a message field seen twice is merged
    for (const [m, u, w] of fields(v, "google.protobuf.Duration")) {
      if (m === 1 && u === 0) retryDelay.seconds = BigInt.asIntN(64, w);
      else if (m === 2 && u === 0) retryDelay.nanos = Number(BigInt.asIntN(32, w));
    }
  }
  return { retryDelay };
}

const typeName = (url) => url.slice(url.lastIndexOf("/") + 1);

/** The trailer's bytes from what a gRPC library gives: the bytes, Metadata, or an error with .metadata. */
function trailer(source) {
  if (isBytes(source)) return source;
  const metadata = source && typeof source.get === "function" ? source : source?.metadata;
  if (!metadata || typeof metadata.get !== "function") {
    throw new TypeError("errorDetails takes the trailer's bytes, a grpc Metadata, or an error that has .metadata");
  }
  const values = metadata.get(STATUS_DETAILS_KEY);
  const value = Array.isArray(values) ? values[values.length - 1] : values;
  if (value === undefined || value === null) return null;
  if (!isBytes(value)) throw new StatusDecodeError(`${STATUS_DETAILS_KEY} is not binary`);
  return value;
}

/**
 * What a refused call means, from its grpc-status-details-bin trailer: { code, message, reason,
 * domain, field, metadata, retryDelayMs }, or null when the call carried no such trailer (an error
 * of gRPC's own, such as a message over the size limit). `reason` is "" without an ErrorInfo;
 * `retryDelayMs` is null without a RetryInfo. A malformed trailer raises StatusDecodeError.
 */
export function errorDetails(source) {
  const bytes = trailer(source);
  if (bytes === null) return null;
  const status = decodeStatus(bytes);
  const out = {
    code: status.code,
    message: status.message,
    reason: "",
    domain: "",
    field: null,
    metadata: Object.create(null),
    retryDelayMs: null,
  };
  for (const detail of status.details) {
    const name = typeName(detail.typeUrl);
    if (name === ERROR_INFO) {
      const info = decodeErrorInfo(detail.value);
      Object.assign(out, { reason: info.reason, domain: info.domain, metadata: info.metadata, field: info.metadata.field ?? null });
    } else if (name === RETRY_INFO) {
      const { retryDelay } = decodeRetryInfo(detail.value);
      if (retryDelay) out.retryDelayMs = Number(retryDelay.seconds) * 1000 + retryDelay.nanos / 1e6;
    }
  }
  return out;
}
