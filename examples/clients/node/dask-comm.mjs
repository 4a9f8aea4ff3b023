// Dask's comm protocol in Node.js: TCP/TLS connection, handshake, framing, msgpack.
//
// What distributed (2024.8 - 2026.8) does on the wire, from its sources:
//
// * Framing (distributed/comm/tcp.py, TCP.write / TCP.read, _add_frames_header;
//   distributed/protocol/utils.py, pack_frames_prelude / unpack_frames). A message is
//   a list of frames, sent as
//       u64 n                  bytes of the prelude plus the frames read in one go
//       u64 nframes            the prelude: the number of frames ...
//       u64 length x nframes   ... and the length of each
//       frame 0, frame 1, ...
//   all integers unsigned 64-bit little-endian (struct "Q" on little-endian hosts).
//   Frames beyond the first n bytes (large uncompressed buffers) follow, each read by
//   its length from the prelude.
// * Messages (distributed/protocol/core.py, dumps / loads). Frame 0 is the message in
//   msgpack (str for text, bin for bytes). Values msgpack cannot hold (NumPy arrays,
//   pickled Python objects) are replaced by {"__Serialized__": i} or {"__Pickled__": i},
//   i the index of further frames; this client leaves those references as they are.
// * Handshake (distributed/comm/core.py, connect / Listener.on_connection). Right after
//   connecting, each side writes one message describing itself and reads the other's:
//   {"compression": null, "pickle-protocol": 5, "python": [major, minor, micro]}. The
//   scheduler keeps compression off when the two sides disagree.
// * Requests (distributed/core.py, Server._handle_comm). A request is a map with "op"
//   (the handler's name) and its keyword arguments; "reply": true asks for the handler's
//   return value as one message. An error comes back as
//   {"status": "uncaught-error", "exception_text": ..., "traceback_text": ...}.
// * TLS (distributed/security.py, Security._get_tls_context). Both sides present a
//   certificate signed by the cluster's CA (mutual TLS, TLS 1.2+); the host name is not
//   checked (the cluster has its own CA and is addressed by IP), and neither is it here.

import net from "node:net";
import tls from "node:tls";
import { Decoder, encode } from "@msgpack/msgpack";

// Map keys that are not strings or numbers (distributed sends some tuple keys, e.g. in
// worker metrics) become their JSON text instead of failing the decode.
const decoder = new Decoder({
  mapKeyConverter: (key) =>
    typeof key === "string" || typeof key === "number" ? key : JSON.stringify(key),
});

function u64(n) {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(n));
  return b;
}

/** The bytes of a list of frames: frames header, prelude, the frames (comm/tcp.py). */
export function packFrames(frames) {
  const prelude = Buffer.concat([u64(frames.length), ...frames.map((f) => u64(f.length))]);
  const inline = prelude.length + frames.reduce((n, f) => n + f.length, 0);
  return Buffer.concat([u64(inline), prelude, ...frames.map((f) => Buffer.from(f.buffer, f.byteOffset, f.byteLength))]);
}

/** The bytes of one message: frames header, prelude, frame 0 (msgpack). */
export function packMessage(msg) {
  return packFrames([Buffer.from(encode(msg))]);
}

/** Reads exact byte counts from a socket. */
class Reader {
  constructor(socket) {
    this.chunks = [];
    this.size = 0;
    this.waiting = null;
    this.error = null;
    socket.on("data", (chunk) => {
      this.chunks.push(chunk);
      this.size += chunk.length;
      this.wake();
    });
    const fail = (err) => {
      this.error = err || new Error("connection closed");
      this.wake();
    };
    socket.on("error", fail);
    socket.on("close", () => fail(null));
  }

  wake() {
    if (this.waiting) {
      const { resolve } = this.waiting;
      this.waiting = null;
      resolve();
    }
  }

  async read(n) {
    while (this.size < n) {
      if (this.error) throw this.error;
      await new Promise((resolve) => (this.waiting = { resolve }));
    }
    const all = Buffer.concat(this.chunks);
    this.chunks = [all.subarray(n)];
    this.size = all.length - n;
    return all.subarray(0, n);
  }
}

/** A connection to a Dask server (scheduler, worker, nanny), after the handshake. */
export class Comm {
  constructor(socket) {
    this.socket = socket;
    this.reader = new Reader(socket);
    this.remoteInfo = null;
  }

  async write(msg) {
    const data = packMessage(msg);
    await new Promise((resolve, reject) =>
      this.socket.write(data, (err) => (err ? reject(err) : resolve())),
    );
  }

  /** Writes a message already split into frames (see dumps()). */
  async writeFrames(frames) {
    const data = packFrames(frames);
    await new Promise((resolve, reject) =>
      this.socket.write(data, (err) => (err ? reject(err) : resolve())),
    );
  }

  /** The next message, decoded (frame 0 only; references to further frames left as they are). */
  async read() {
    const frames = await this.readFrames();
    return decoder.decode(frames[0]);
  }

  /** The next message as its list of frames (Buffers), undecoded (see loads()). */
  async readFrames() {
    const inline = Number((await this.reader.read(8)).readBigUInt64LE(0));
    const block = await this.reader.read(inline);
    const nframes = Number(block.readBigUInt64LE(0));
    const lengths = [];
    for (let i = 0; i < nframes; i++) lengths.push(Number(block.readBigUInt64LE(8 * (i + 1))));
    const frames = [];
    let offset = 8 * (nframes + 1);
    for (const length of lengths) {
      if (offset + length <= block.length) {
        frames.push(block.subarray(offset, offset + length));
        offset += length;
      } else {
        frames.push(await this.reader.read(length)); // a large buffer sent on its own
      }
    }
    return frames;
  }

  /** Send {op, ...args, reply: true}; the handler's result, or throws its error. */
  async rpc(op, args = {}) {
    await this.write({ ...args, op, reply: true });
    const result = await this.read();
    if (result && typeof result === "object" && result.status === "uncaught-error") {
      const err = new Error(`${op}: ${result.exception_text || "error"}`);
      err.traceback = result.traceback_text;
      throw err;
    }
    return result;
  }

  close() {
    this.socket.end();
  }

  /** Closes at once, without waiting for the peer. */
  abort() {
    this.socket.destroy();
  }
}

/** What distributed's Comm.handshake_info() sends (comm/core.py); "python" is Node's version. */
export function handshakeInfo() {
  const [major, minor, micro] = process.versions.node.split(".").map(Number);
  return { compression: null, "pickle-protocol": 5, python: [major, minor, micro] };
}

/**
 * Connect to a Dask address ("tls://host:port" or "tcp://host:port") and do the handshake.
 * tlsFiles: {ca, cert, key} as PEM text (required for tls://).
 */
export async function connect(address, tlsFiles = null, timeoutMs = 10000) {
  const match = /^(tls|tcp):\/\/\[?([^\]]+?)\]?:(\d+)$/.exec(address);
  if (!match) throw new Error(`not a tcp:// or tls:// Dask address: ${address}`);
  const [, scheme, host, port] = match;
  const socket = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out connecting to ${address}`)), timeoutMs);
    const done = (s) => {
      clearTimeout(timer);
      resolve(s);
    };
    let s;
    if (scheme === "tls") {
      if (!tlsFiles) throw new Error(`${address} needs TLS credentials (ca, cert, key)`);
      s = tls.connect(
        {
          host,
          port: Number(port),
          ca: tlsFiles.ca,
          cert: tlsFiles.cert,
          key: tlsFiles.key,
          minVersion: "TLSv1.2",
          rejectUnauthorized: true, // the chain must lead to the cluster's CA ...
          checkServerIdentity: () => undefined, // ... the host name is not checked (as distributed)
        },
        () => done(s),
      );
    } else {
      s = net.connect({ host, port: Number(port) }, () => done(s));
    }
    s.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
  socket.setNoDelay(true);
  const comm = new Comm(socket);
  // Both sides write their handshake_info() and read the other's (comm/core.py, connect).
  await comm.write(handshakeInfo());
  comm.remoteInfo = await comm.read();
  return comm;
}

/** "tls://host:port", with IPv6 hosts in brackets (distributed/comm/addressing.py). */
export function formatAddress(scheme, host, port) {
  return `${scheme}://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/**
 * Listen for Dask connections (the server side of comm/core.py's Listener.on_connection:
 * write our handshake, read the peer's), calling onComm(comm) for each one. With tlsFiles,
 * mutual TLS: the peer must present a certificate of the cluster's CA (requestCert,
 * rejectUnauthorized), as distributed's listeners do; no host name check.
 * Resolves to {address, port, server, close()} once listening (port 0: a free port).
 */
export async function listen({ host, port = 0, tlsFiles = null, onComm, onError = () => {} }) {
  const accept = async (socket) => {
    socket.setNoDelay(true);
    socket.setKeepAlive(true);
    const comm = new Comm(socket);
    try {
      await comm.write(handshakeInfo());
      comm.remoteInfo = await comm.read();
    } catch (err) {
      socket.destroy();
      onError(err);
      return;
    }
    onComm(comm);
  };
  const server = tlsFiles
    ? tls.createServer(
        {
          ca: tlsFiles.ca,
          cert: tlsFiles.cert,
          key: tlsFiles.key,
          minVersion: "TLSv1.2",
          requestCert: true,
          rejectUnauthorized: true,
        },
        accept,
      )
    : net.createServer(accept);
  server.on("tlsClientError", (err) => onError(err));
  server.on("error", (err) => onError(err));
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const bound = server.address().port;
  return {
    server,
    port: bound,
    address: formatAddress(tlsFiles ? "tls" : "tcp", host, bound),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

// ---- Messages with out-of-band frames (distributed/protocol/core.py, dumps / loads) ----
//
// A value serialized on its own travels as {"__Serialized__": i} in frame 0; frame i is a
// msgpack header (with "num-sub-frames": n) and frames i+1 .. i+n its payload. Sets travel
// as {"__Set__": true, "as-list": [...]} (protocol/serialize.py, msgpack_encode_default).

/** A serialized value: its header (serializer, ...) and payload frames, as on the wire. */
export class Serialized {
  constructor(header, frames) {
    this.header = header;
    this.frames = frames;
  }
}

/** The msgpack header of a map or array of n entries: fix (n < 16), 16-bit or 32-bit count. */
function containerHeader(n, fix, code16, code32) {
  if (n < 16) return Buffer.from([fix | n]);
  const b = Buffer.alloc(n < 0x10000 ? 3 : 5);
  b[0] = n < 0x10000 ? code16 : code32;
  n < 0x10000 ? b.writeUInt16BE(n, 1) : b.writeUInt32BE(n, 1);
  return b;
}

const mapHeader = (n) => containerHeader(n, 0x80, 0xde, 0xdf);
const arrayHeader = (n) => containerHeader(n, 0x90, 0xdc, 0xdd);

function isPlainObject(v) {
  if (v === null || typeof v !== "object") return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/**
 * A message as frames. Serialized values become {"__Serialized__": i} plus their frames;
 * a JS Map becomes a msgpack map whose keys may be anything (e.g. arrays: Python tuples).
 */
export function dumps(msg) {
  const frames = [null];
  const parts = [];
  const walk = (v) => {
    if (v instanceof Serialized) {
      const offset = frames.length;
      frames.push(Buffer.from(encode({ ...v.header, "num-sub-frames": v.frames.length })), ...v.frames);
      parts.push(encode({ __Serialized__: offset }));
    } else if (v instanceof Map) {
      parts.push(mapHeader(v.size));
      for (const [k, x] of v) {
        walk(k);
        walk(x);
      }
    } else if (Array.isArray(v)) {
      parts.push(arrayHeader(v.length));
      v.forEach(walk);
    } else if (isPlainObject(v)) {
      const keys = Object.keys(v);
      parts.push(mapHeader(keys.length));
      for (const k of keys) {
        parts.push(encode(k));
        walk(v[k]);
      }
    } else {
      parts.push(encode(v));
    }
  };
  walk(msg);
  frames[0] = Buffer.concat(parts);
  return frames;
}

/**
 * A message from its frames: {"__Set__"} becomes an array, {"__Serialized__": i} a
 * Serialized (header decoded, payload frames as they are; decoding those is the caller's
 * business, as with distributed's deserialize=False). {"__Pickled__": i} stays as it is.
 * mapKeyConverter: how msgpack map keys that are not strings become object keys.
 */
export function loads(frames, { mapKeyConverter } = {}) {
  const dec = mapKeyConverter ? new Decoder({ mapKeyConverter }) : decoder;
  const walk = (v) => {
    if (Array.isArray(v)) return v.map(walk);
    if (!isPlainObject(v)) return v;
    if (v.__Set__ === true && Array.isArray(v["as-list"])) return v["as-list"].map(walk);
    const offset = v.__Serialized__;
    if (typeof offset === "number" && offset > 0 && offset < frames.length) {
      const header = dec.decode(frames[offset]);
      const n = header["num-sub-frames"] ?? 0;
      return new Serialized(header, frames.slice(offset + 1, offset + 1 + n));
    }
    for (const k of Object.keys(v)) v[k] = walk(v[k]);
    return v;
  };
  return walk(dec.decode(frames[0]));
}
