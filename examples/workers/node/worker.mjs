#!/usr/bin/env node
// A Dask worker in Node.js: joins a distributed cluster (written against and tested with distributed 2026.8) and runs the
// tasks annotated xlang={language: "node", function, args} (see README.md).
//
//   node worker.mjs DIR [--name NAME] [--nthreads K] [--module FILE] [--host HOST]
//   node worker.mjs --scheduler ADDR [--tls-ca F --tls-cert F --tls-key F] [...]
//
// DIR: the files of spark_dask's write_connection(): scheduler.json ("address") and, for
// TLS, ca.pem, client-cert.pem, client-key.pem. The client certificate serves both ways:
// for connections out, and as the certificate of this worker's own listener.

import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { connectionFiles } from "spark-dask-node-client/connection.mjs";
import { connect, dumps, listen, loads } from "spark-dask-node-client/dask-comm.mjs";
import { log } from "./lib/log.mjs";
import { Pool } from "./lib/pool.mjs";
import { ConnectionPool, serveComm } from "./lib/peers.mjs";
import { TaskState } from "./lib/state.mjs";
import { keyMapConverter } from "./lib/values.mjs";

const VERSION = "0.1.0";
const BATCH_MS = 2; // the batched stream's window (distributed's BatchedSend: 2 ms)
const USAGE = "usage: node worker.mjs DIR | --scheduler ADDR [--tls-ca F --tls-cert F --tls-key F] [--name NAME] [--nthreads K] [--module FILE] [--host HOST]";

function parseArgs(argv) {
  const opts = { modules: [], nthreads: 1 };
  const valued = { "--name": "name", "--nthreads": "nthreads", "--module": "module", "--host": "host",
    "--scheduler": "scheduler", "--tls-ca": "ca", "--tls-cert": "cert", "--tls-key": "key" };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const [flag, inline] = a.startsWith("--") && a.includes("=") ? [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)] : [a, undefined];
    if (valued[flag]) {
      const value = inline ?? argv[++i];
      if (value === undefined) throw new Error(`${flag} needs a value`);
      if (flag === "--module") opts.modules.push(path.resolve(value));
      else opts[valued[flag]] = value;
    } else if (a === "-h" || a === "--help") {
      console.log(USAGE);
      process.exit(0);
    } else if (!a.startsWith("--") && !opts.dir) {
      opts.dir = a;
    } else {
      throw new Error(`unknown argument ${a}`);
    }
  }
  opts.nthreads = Number(opts.nthreads);
  if (!Number.isInteger(opts.nthreads) || opts.nthreads < 1) throw new Error(`--nthreads must be an integer >= 1`);
  return opts;
}

/** {address, tlsFiles} from DIR (connection.mjs) or the --scheduler/--tls-* flags. */
function connection(opts) {
  if (opts.dir) return connectionFiles(opts.dir);
  const read = (f) => fs.readFileSync(f, "utf8");
  if (!opts.scheduler) throw new Error(USAGE);
  const tlsFiles = opts.ca || opts.cert || opts.key ? { ca: read(opts.ca), cert: read(opts.cert), key: read(opts.key) } : null;
  if (opts.scheduler.startsWith("tls://") && !tlsFiles) throw new Error(`${opts.scheduler} needs --tls-ca, --tls-cert and --tls-key`);
  return { address: opts.scheduler, tlsFiles };
}

/** extra: the language, and inside a spark-dask Spark task its facts (SPARK_DASK_FACTS,
 * what spark_dask's preload gives a Python worker as extra["spark"]). */
function extraInfo() {
  const extra = { xlang: { language: "node", runtime: `node ${process.versions.node}` } };
  if (process.env.SPARK_DASK_FACTS) {
    try {
      extra.spark = JSON.parse(process.env.SPARK_DASK_FACTS);
    } catch (err) {
      log(`SPARK_DASK_FACTS is not JSON (${err.message}); left out`, "WARNING");
    }
  }
  return extra;
}

/** Worker.get_metrics() in worker.py; the scheduler reads these keys (Scheduler.heartbeat_worker). */
function makeMetrics(state) {
  let last = { cpu: process.cpuUsage(), t: process.hrtime.bigint() };
  return () => {
    const cpu = process.cpuUsage();
    const t = process.hrtime.bigint();
    const used = cpu.user - last.cpu.user + cpu.system - last.cpu.system; // µs
    const wall = Number(t - last.t) / 1000; // µs
    last = { cpu, t };
    const inFlight = state.fetching.size;
    return {
      task_counts: {}, bandwidth: { total: 100000000, workers: {}, types: {} },
      digests_total_since_heartbeat: {}, managed_bytes: state.managedBytes(),
      spilled_bytes: { memory: 0, disk: 0 },
      transfer: { incoming_bytes: 0, incoming_count: inFlight, incoming_count_total: 0,
        outgoing_bytes: 0, outgoing_count: state.outgoing, outgoing_count_total: 0 },
      event_loop_interval: 0.02, cpu: wall > 0 ? (100 * used) / wall : 0,
      memory: process.memoryUsage.rss(), time: Date.now() / 1000, num_fds: 0,
      host_net_io: { read_bps: 0, write_bps: 0 }, host_disk_io: { read_bps: 0, write_bps: 0 },
    };
  };
}

/** A list of messages written to the stream every BATCH_MS (batched.py, BatchedSend). */
function batchedSender(comm) {
  let buffer = [];
  let timer = null;
  const flush = async () => {
    timer = null;
    const batch = buffer;
    buffer = [];
    if (batch.length) await comm.writeFrames(dumps(batch)).catch((err) => log(`stream write failed: ${err.message}`, "WARNING"));
  };
  const send = (msg) => {
    buffer.push(msg);
    if (!timer) timer = setTimeout(flush, BATCH_MS);
  };
  send.flush = () => {
    if (timer) clearTimeout(timer);
    return flush();
  };
  return send;
}

/** connect(), retried for up to 30 s while the scheduler is not there yet (distributed.comm.timeouts.connect). */
async function connectRetrying(address, tlsFiles, totalMs = 30000) {
  const deadline = Date.now() + totalMs;
  for (;;) {
    try {
      return await connect(address, tlsFiles, Math.max(1000, Math.min(10000, deadline - Date.now())));
    } catch (err) {
      if (Date.now() >= deadline) throw new Error(`cannot connect to the scheduler ${address}: ${err.message}`);
      log(`waiting to connect to ${address} (${err.message})`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const { address: schedulerAddress, tlsFiles } = connection(opts);
  const moduleUrls = [new URL("./tasks.mjs", import.meta.url).href, ...opts.modules.map((m) => pathToFileURL(m).href)];
  const pool = new Pool(opts.nthreads, moduleUrls);
  await pool.start();
  log(`task threads: ${opts.nthreads}; functions: ${pool.functions.join(", ")}`);

  const stream = await connectRetrying(schedulerAddress, tlsFiles);
  stream.socket.setKeepAlive(true);
  const host = opts.host || stream.socket.localAddress.replace(/^::ffff:/, "");
  const peers = new ConnectionPool(tlsFiles);
  const send = batchedSender(stream);
  const state = new TaskState({ pool, peers, send, address: null });
  const listener = await listen({
    host, port: 0, tlsFiles,
    onComm: (comm) => serveComm(comm, state),
    onError: (err) => log(`incoming connection refused: ${err.message}`, "WARNING"),
  });
  const address = listener.address;
  state.address = address;
  const name = opts.name || address;
  const serverId = `NodeWorker-${crypto.randomUUID()}`;
  const localDirectory = fs.mkdtempSync(path.join(os.tmpdir(), "dask-node-worker-"));
  state.identity = () => ({ type: "NodeWorker", id: serverId, address, name, nthreads: opts.nthreads,
    scheduler: schedulerAddress, memory_limit: os.totalmem(), keys: state.results.size });
  const metrics = makeMetrics(state);
  log(`listening at ${address}`);

  let closing = false;
  const heartbeat = { comm: null, timer: null, interval: 1 };
  const shutdown = async (code, why) => {
    if (closing) return;
    closing = true;
    log(why);
    await send.flush().catch(() => {});
    stream.abort();
    peers.closeAll();
    heartbeat.comm?.abort();
    clearTimeout(heartbeat.timer);
    listener.server.close();
    await pool.close().catch(() => {});
    fs.rmSync(localDirectory, { recursive: true, force: true });
    process.exit(code);
  };

  // Registration (worker.py Worker._register_with_scheduler; Scheduler.add_worker).
  const [major, minor, micro] = process.versions.node.split(".");
  await stream.write({
    op: "register-worker", reply: false, address, status: "running", server_id: serverId,
    nthreads: opts.nthreads, name, now: Date.now() / 1000, resources: { "xlang-node": opts.nthreads },
    memory_limit: os.totalmem(), metrics: metrics(), pid: process.pid, services: {},
    local_directory: localDirectory,
    versions: { host: { python: `node-${major}.${minor}.${micro}`, "python-bits": 64, OS: os.type(), "OS-release": os.release(), machine: os.arch(), processor: os.arch(), byteorder: os.endianness() === "LE" ? "little" : "big" },
      packages: { node: process.versions.node, "spark-dask-node-worker": VERSION } },
    nanny: null, extra: extraInfo(),
    stimulus_id: `worker-connect-${Date.now() / 1000}`,
  });
  const reply = await stream.read();
  if (reply?.status !== "OK") {
    console.error(`spark-dask node worker: the scheduler refused this worker: ${reply?.message || JSON.stringify(reply)}`);
    await shutdown(1, "registration refused");
  }
  log(`Registered to: ${schedulerAddress}`);

  // Heartbeats on their own connection (Worker.heartbeat; Scheduler.heartbeat_worker).
  heartbeat.interval = reply["heartbeat-interval"] || 1;
  const beat = async () => {
    try {
      heartbeat.comm ||= await connect(schedulerAddress, tlsFiles, 5000);
      const r = await heartbeat.comm.rpc("heartbeat_worker", { address, now: Date.now() / 1000, metrics: metrics(), executing: {} });
      if (r?.status === "missing") return shutdown(1, `the scheduler ${schedulerAddress} no longer knows this worker (heartbeat: missing); exiting`);
      if (r?.["heartbeat-interval"]) heartbeat.interval = r["heartbeat-interval"];
    } catch (err) {
      if (closing) return;
      log(`heartbeat failed: ${err.message}`, "WARNING");
      heartbeat.comm?.abort();
      heartbeat.comm = null;
    }
    if (!closing) heartbeat.timer = setTimeout(beat, heartbeat.interval * 1000);
  };
  heartbeat.timer = setTimeout(beat, heartbeat.interval * 1000);

  const stop = async (signal) => {
    if (closing) return;
    log(`${signal}: leaving the cluster`);
    send({ op: "worker-status-change", status: "closing", stimulus_id: `worker-close-${Date.now() / 1000}` });
    await send.flush().catch(() => {});
    try {
      const c = await connect(schedulerAddress, tlsFiles, 2000);
      await Promise.race([c.rpc("unregister", { address, stimulus_id: `worker-close-${Date.now() / 1000}`, close: false }),
        new Promise((r) => setTimeout(r, 2000))]);
      c.abort();
    } catch (err) {
      log(`unregister failed: ${err.message}`, "WARNING");
    }
    await shutdown(0, `${signal}: closed`);
  };
  process.on("SIGTERM", () => stop("SIGTERM"));
  process.on("SIGINT", () => stop("SIGINT"));

  // The batched stream: each read is a list of messages (BatchedSend on the scheduler).
  for (;;) {
    let msgs;
    try {
      msgs = loads(await stream.readFrames(), { mapKeyConverter: keyMapConverter });
    } catch (err) {
      return shutdown(0, `the scheduler ${schedulerAddress} went away (${err.message}); exiting`);
    }
    for (const msg of Array.isArray(msgs) ? msgs : [msgs]) {
      if (msg?.op === "close") return shutdown(0, `the scheduler closed this worker (${msg.reason || "no reason given"}); exiting`);
      try {
        state.handle(msg);
      } catch (err) {
        log(`handling ${msg?.op}: ${err.stack || err}`, "ERROR");
      }
    }
  }
}

main().catch((err) => {
  console.error(`spark-dask node worker: ${err.stack || err}`);
  process.exit(1);
});
