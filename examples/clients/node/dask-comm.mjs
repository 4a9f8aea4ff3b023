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

/** The bytes of one message: frames header, prelude, frame 0 (msgpack). */
export function packMessage(msg) {
  const frames = [Buffer.from(encode(msg))];
  const prelude = Buffer.concat([u64(frames.length), ...frames.map((f) => u64(f.length))]);
  const inline = prelude.length + frames.reduce((n, f) => n + f.length, 0);
  return Buffer.concat([u64(inline), prelude, ...frames]);
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

  async read() {
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
    return decoder.decode(frames[0]);
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
  const [major, minor, micro] = process.versions.node.split(".").map(Number);
  // What distributed's handshake_info() sends; "python" is informational (here: Node's version).
  await comm.write({ compression: null, "pickle-protocol": 5, python: [major, minor, micro] });
  comm.remoteInfo = await comm.read();
  return comm;
}
