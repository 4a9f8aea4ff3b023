// Worker-to-worker data: fetching dependencies (the client side of get_data) over pooled
// connections, and serving this worker's results to Python workers, clients and the
// scheduler (the server side).

import { connect, dumps, loads, Serialized } from "spark-dask-node-client/dask-comm.mjs";
import { DataError, dependencyBytes, keyId, keyMapConverter, keyText } from "./values.mjs";
import { log } from "./log.mjs";

const BUSY_RETRIES = 20; // a peer answering {"status": "busy"}: retried this often ...
const BUSY_WAIT_MS = 100; // ... this long apart (growing)

/** Cannot get a dependency from any holder (gone, does not hold it): the task is rescheduled. */
export class Unavailable extends Error {}

/** Idle connections per peer address, reused (as distributed's ConnectionPool). */
export class ConnectionPool {
  constructor(tlsFiles) {
    this.tlsFiles = tlsFiles;
    this.idle = new Map(); // address -> [Comm]
    this.open = new Set();
  }

  async acquire(address) {
    const idle = this.idle.get(address);
    while (idle && idle.length) {
      const comm = idle.pop();
      if (!comm.socket.destroyed && !comm.reader.error) return comm;
    }
    const comm = await connect(address, this.tlsFiles, 5000);
    comm.socket.setKeepAlive(true);
    this.open.add(comm);
    comm.socket.on("close", () => this.open.delete(comm));
    return comm;
  }

  release(address, comm) {
    if (comm.socket.destroyed) return;
    if (!this.idle.has(address)) this.idle.set(address, []);
    this.idle.get(address).push(comm);
  }

  closeAll() {
    for (const comm of this.open) comm.abort();
    this.open.clear();
    this.idle.clear();
  }
}

/** One get_data request (worker.py get_data_from_worker): the reply, after our "OK". */
async function getDataOnce(pool, address, key, who) {
  const comm = await pool.acquire(address);
  try {
    await comm.writeFrames(dumps({ op: "get_data", keys: [key], who, serializers: ["msgpack"], reply: true }));
    const reply = loads(await comm.readFrames(), { mapKeyConverter: keyMapConverter });
    if (reply && reply.status === "OK") await comm.write("OK"); // the peer waits for it (Worker.get_data)
    pool.release(address, comm);
    return reply;
  } catch (err) {
    comm.abort();
    throw err;
  }
}

/**
 * The msgpack bytes of dependency `key` from one of `holders` (tried in order). Throws
 * DataError when a holder has the value but it cannot be read here (the task errs), and
 * Unavailable when no holder gives it (the task is rescheduled).
 */
export async function fetchDependency(pool, key, holders, who) {
  const reasons = [];
  for (const address of holders) {
    for (let attempt = 0; attempt <= BUSY_RETRIES; attempt++) {
      let reply;
      try {
        reply = await getDataOnce(pool, address, key, who);
      } catch (err) {
        reasons.push(`${address}: ${err.message}`);
        break;
      }
      if (reply?.status === "busy") {
        await new Promise((r) => setTimeout(r, BUSY_WAIT_MS * Math.min(attempt + 1, 10)));
        continue;
      }
      if (reply?.status === "uncaught-error") {
        throw new DataError(`fetching dependency ${keyText(key)} from ${address}: ${reply.exception_text}`);
      }
      const data = reply?.data || {};
      const id = keyId(key);
      if (reply?.status === "OK" && id in data) return dependencyBytes(data[id], keyText(key));
      reasons.push(`${address}: ${reply?.status === "OK" ? "does not hold it" : `replied ${JSON.stringify(reply)}`}`);
      break;
    }
  }
  throw new Unavailable(`no holder gave dependency ${keyText(key)}: ${reasons.join("; ") || "no holders"}`);
}

/**
 * Serves one incoming connection until the peer closes it: get_data (this worker's
 * results; keys not held are left out, as Worker.get_data does), identity, keys; other ops
 * get an uncaught-error reply (distributed/core.py, Server._handle_comm: "reply" defaults
 * to true).
 */
export async function serveComm(comm, worker) {
  for (;;) {
    let msg;
    try {
      msg = loads(await comm.readFrames(), { mapKeyConverter: keyMapConverter });
    } catch {
      comm.abort(); // closed by the peer (the normal end) or broken
      return;
    }
    if (!msg || typeof msg !== "object" || Array.isArray(msg)) continue;
    const { op, reply = true } = msg;
    try {
      if (op === "close") {
        comm.close();
        return;
      } else if (op === "get_data") {
        await serveGetData(comm, worker, msg);
      } else if (reply === false) {
        log(`no handler for op ${op} (no reply asked)`);
      } else if (op === "identity") {
        await comm.write(worker.identity());
      } else if (op === "keys") {
        await comm.writeFrames(dumps([...worker.results.values()].map((r) => r.key)));
      } else {
        await comm.write({ status: "uncaught-error", exception_text: `Node.js worker: no handler for op ${op}`, traceback_text: "" });
      }
    } catch (err) {
      log(`serving ${op} to ${comm.socket.remoteAddress}: ${err.message}`, "WARNING");
      comm.abort();
      return;
    }
  }
}

async function serveGetData(comm, worker, msg) {
  const keys = Array.isArray(msg.keys) ? msg.keys : [];
  const data = new Map(); // key as sent (a string, or an array: a Python tuple) -> value
  for (const key of keys) {
    const held = worker.results.get(keyId(key));
    if (held) data.set(key, new Serialized({ serializer: "msgpack" }, [held.bytes]));
  }
  worker.outgoing += 1;
  try {
    await comm.writeFrames(dumps({ status: "OK", data }));
    const ok = loads(await comm.readFrames());
    if (ok !== "OK") log(`get_data from ${msg.who}: expected "OK", got ${JSON.stringify(ok)}`, "WARNING");
  } finally {
    worker.outgoing -= 1;
  }
}
