// Keys and values: how Dask keys are indexed here, what a result may be, and how values
// serialized by Python workers (get_data replies) become msgpack bytes.

import { encode, decode } from "@msgpack/msgpack";
import { Serialized } from "spark-dask-node-client/dask-comm.mjs";

// ---- Keys ----
// A Dask key is a str, or a tuple of keys and numbers (dask/typing.py Key). On the wire a
// tuple is a msgpack array. Here a key is indexed by an id: the string itself, or NUL plus
// the JSON of anything else; msgpack map keys that are not strings (who_has, nbytes of a
// tuple key) are decoded straight to that id (keyMapConverter). The key itself (a string
// or an array) is what goes back to the scheduler.

export function keyId(key) {
  return typeof key === "string" ? key : "\u0000" + JSON.stringify(key);
}

export function keyFromId(id) {
  return id.startsWith("\u0000") ? JSON.parse(id.slice(1)) : id;
}

export const keyMapConverter = (k) => (typeof k === "string" ? k : keyId(k));

/** How task arguments name a dependency: "@" + the key, or + the JSON of a tuple key. */
export function refName(key) {
  return typeof key === "string" ? key : JSON.stringify(key);
}

/** A key for messages and logs. */
export function keyText(key) {
  return typeof key === "string" ? key : JSON.stringify(key);
}

// ---- Results (run in the task threads) ----

function typeName(v) {
  if (v === null) return "null";
  if (typeof v !== "object") return typeof v;
  if (Array.isArray(v)) return "Array";
  const proto = Object.getPrototypeOf(v);
  if (proto === null) return "Object";
  return proto.constructor?.name || "object";
}

function isPlainObject(v) {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/**
 * Why msgpack cannot carry v: "<type> (at <path>)", or null when it can. Carried: number
 * (NaN and infinities as floats), string, boolean, null, Uint8Array/Buffer, Array, plain
 * object (prototype Object or null), recursively; undefined inside an array or object
 * (as nil); BigInt within Number's safe integer range (as an integer).
 */
export function notCarried(v, path = "", depth = 0) {
  if (depth > 100) return `structure nested over 100 levels (at ${path || "top"})`;
  const t = typeof v;
  if (v === null || t === "number" || t === "string" || t === "boolean") return null;
  if (t === "undefined") return depth === 0 ? "undefined" : null;
  if (t === "bigint") {
    return Number.isSafeInteger(Number(v)) && BigInt(Number(v)) === v ? null : `BigInt beyond the safe integer range${path ? ` (at ${path})` : ""}`;
  }
  if (t !== "object") return `${t}${path ? ` (at ${path})` : ""}`;
  if (v instanceof Uint8Array) return null;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const why = notCarried(v[i], `${path}[${i}]`, depth + 1);
      if (why) return why;
    }
    return null;
  }
  if (!isPlainObject(v)) return `${typeName(v)}${path ? ` (at ${path})` : ""}`;
  for (const k of Object.keys(v)) {
    const why = notCarried(v[k], `${path}.${k}`, depth + 1);
    if (why) return why;
  }
  return null;
}

function withoutBigInts(v) {
  if (typeof v === "bigint") return Number(v);
  if (v === null || typeof v !== "object" || v instanceof Uint8Array) return v;
  if (Array.isArray(v)) return v.map(withoutBigInts);
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, withoutBigInts(x)]));
}

function hasBigInt(v) {
  if (typeof v === "bigint") return true;
  if (v === null || typeof v !== "object" || v instanceof Uint8Array) return false;
  return Object.values(v).some(hasBigInt);
}

/** A task's result as msgpack bytes and its type name, or throws TypeError naming the key. */
export function encodeResult(value, key) {
  const why = notCarried(value);
  if (why) throw new TypeError(`task ${key} returned a ${why}, which msgpack cannot carry`);
  const bytes = encode(hasBigInt(value) ? withoutBigInts(value) : value);
  return { bytes, typename: `javascript:${typeName(value)}` };
}

// ---- Values from Python workers (main thread) ----
// protocol/serialize.py: serialize() writes {serializer: "msgpack"} (payload: one msgpack
// value; serialize_and_split() may split it, "split-num-sub-frames"/"split-offsets"),
// {"is-collection": true, "type-serialized", "sub-headers", "frame-lengths"} (list, tuple,
// set, dict: each element serialized on its own; a dict's sub-headers carry "key"), or
// {serializer: "error"} (UTF-8 text: why the value could not be serialized).

/** An error in a dependency's data: the task errs (not rescheduled). */
export class DataError extends Error {
  constructor(message) {
    super(message);
    this.name = "DataError";
  }
}

function checkUncompressed(header, key) {
  const compression = header.compression;
  if (Array.isArray(compression) ? compression.some((c) => c != null) : compression != null) {
    throw new DataError(`dependency ${key} arrived compressed (${JSON.stringify(compression)}); this worker reads uncompressed data only`);
  }
}

function mergeSplit(header, frames) {
  if (!header["split-num-sub-frames"]) return frames;
  return header["split-num-sub-frames"].map((n, i) => {
    const offset = header["split-offsets"][i];
    return Buffer.concat(frames.slice(offset, offset + n));
  });
}

/** The JS value of one serialized (header, frames); throws DataError if it has none. */
function decodeSerialized(header, frames, key) {
  checkUncompressed(header, key);
  if (header["is-collection"]) {
    const values = [];
    const keys = [];
    let start = 0;
    header["sub-headers"].forEach((sub, i) => {
      const n = header["frame-lengths"][i];
      keys.push(sub.key);
      values.push(decodeSerialized(sub, frames.slice(start, start + n), key));
      start += n;
    });
    if (header["type-serialized"] === "dict") {
      return Object.fromEntries(keys.map((k, i) => [typeof k === "string" ? k : JSON.stringify(k), values[i]]));
    }
    return values; // list, tuple, set: an array
  }
  if (header.serializer === "msgpack") {
    return decode(Buffer.concat(mergeSplit(header, frames)));
  }
  if (header.serializer === "error") {
    const text = frames.map((f) => Buffer.from(f).toString("utf8")).join("\n");
    throw new DataError(`dependency ${key} cannot reach this Node.js worker: ${text.split("\n")[0]}`);
  }
  throw new DataError(
    `dependency ${key} arrived serialized with ${JSON.stringify(header.serializer)}, which only Python can read`,
  );
}

/** A dependency from a get_data reply as msgpack bytes (what tasks and results are kept as). */
export function dependencyBytes(value, key) {
  if (!(value instanceof Serialized)) {
    return Buffer.from(encode(value)); // sent inline in frame 0 (a plain msgpack value)
  }
  const { header, frames } = value;
  checkUncompressed(header, key);
  if (header.serializer === "msgpack" && !header["is-collection"]) {
    return Buffer.concat(mergeSplit(header, frames)); // already one msgpack value
  }
  return Buffer.from(encode(decodeSerialized(header, frames, key)));
}
