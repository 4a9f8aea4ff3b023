// The worker's task state: what the scheduler's stream messages do (worker.py
// stream_handlers, worker_state_machine.py), and the messages that go back
// (TaskFinishedMsg, TaskErredMsg, StealResponseMsg, ... in worker_state_machine.py; the
// scheduler's handlers are Scheduler.worker_handlers in scheduler.py).
//
// A task here is: waiting (fetching dependencies) -> ready (queued by priority) ->
// executing (on a task thread) -> memory (its result kept as msgpack bytes) or gone.

import { DataError, keyFromId, keyId, keyText, refName } from "./values.mjs";
import { Unavailable, fetchDependency } from "./peers.mjs";
import { log } from "./log.mjs";

const RESCHEDULE_DELAY_MS = 200;
const now = () => Date.now() / 1000;

/** Priorities are arrays compared element-wise, smaller first (scheduler.py TaskState.priority). */
function comparePriority(a, b) {
  const n = Math.max(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a[i] ?? -Infinity;
    const y = b[i] ?? -Infinity;
    if (x !== y) return x < y ? -1 : 1;
  }
  return 0;
}

export class TaskState {
  constructor({ pool, peers, send, address }) {
    this.pool = pool;
    this.peers = peers;
    this.send = send; // queues one message on the batched stream to the scheduler
    this.address = address;
    this.results = new Map(); // id -> {key, bytes, typename}
    this.tasks = new Map(); // id -> task not yet finished (waiting, ready, executing)
    this.ready = []; // tasks in priority order
    this.fetched = new Map(); // id -> bytes of dependencies fetched from peers (not announced)
    this.fetching = new Map(); // id -> Promise<bytes>
    this.outgoing = 0;
  }

  managedBytes() {
    let n = 0;
    for (const r of this.results.values()) n += r.bytes.length;
    return n;
  }

  /** The scheduler's stream message msg (unknown ops: logged and ignored). */
  handle(msg) {
    const op = msg?.op;
    switch (op) {
      case "compute-task":
        return this.computeTask(msg);
      case "free-keys":
        return (msg.keys || []).forEach((k) => this.forget(k, "free-keys"));
      case "cancel-compute":
        return this.forget(msg.key, "cancel-compute");
      case "steal-request":
        return this.stealRequest(msg);
      case "remove-replicas":
        return this.removeReplicas(msg);
      case "acquire-replicas":
        return log(`acquire-replicas ignored (this worker fetches only its tasks' dependencies): ${(msg.keys || []).length} keys`);
      case "worker-status-change":
      case "refresh-who-has":
      case "remove-worker":
        return undefined;
      default:
        return log(`unknown op from the scheduler ignored: ${JSON.stringify(op)}`, "WARNING");
    }
  }

  erred(task, error, startstops = [], thread = null) {
    this.send({
      op: "task-erred", status: "error", key: task.key, run_id: task.runId,
      exception: null, traceback: null,
      exception_text: `${error.name}: ${error.message}`, traceback_text: error.stack || "",
      thread, startstops, stimulus_id: `task-erred-${now()}`,
    });
  }

  /** compute-task (Scheduler._task_to_msg): what to call comes from annotations.xlang. */
  computeTask(msg) {
    const id = keyId(msg.key);
    const xlang = msg.annotations?.xlang;
    const task = {
      id, key: msg.key, runId: msg.run_id, priority: Array.isArray(msg.priority) ? msg.priority : [msg.priority ?? 0],
      whoHas: msg.who_has || {}, state: "waiting", fn: xlang?.function, args: xlang?.args ?? [],
    };
    if (this.tasks.has(id)) this.forget(msg.key, "compute-task again");
    this.results.delete(id);
    if (!xlang || xlang.language !== "node" || typeof xlang.function !== "string") {
      const got = xlang ? JSON.stringify(xlang) : "no annotations.xlang";
      const error = new Error(`this Node.js worker runs only node tasks; got ${got}`);
      return this.erred(task, { name: "TypeError", message: error.message, stack: "" });
    }
    this.tasks.set(id, task);
    this.gatherDependencies(task);
  }

  /** Fetches the dependencies not held here, then queues the task (worker.py gather_dep). */
  async gatherDependencies(task) {
    const missing = Object.keys(task.whoHas).filter((d) => !this.results.has(d) && !this.fetched.has(d));
    try {
      await Promise.all(missing.map((d) => this.fetch(d, task.whoHas[d])));
    } catch (err) {
      if (this.tasks.get(task.id) !== task) return; // forgotten meanwhile
      if (err instanceof Unavailable) {
        log(`task ${keyText(task.key)}: ${err.message}; rescheduling`, "WARNING");
        this.tasks.delete(task.id);
        this.dropUnneeded();
        setTimeout(() => this.send({ op: "reschedule", key: task.key, stimulus_id: `reschedule-${now()}` }), RESCHEDULE_DELAY_MS);
      } else {
        this.tasks.delete(task.id);
        this.dropUnneeded();
        const name = err instanceof DataError ? "TypeError" : err.name;
        this.erred(task, { name, message: err.message, stack: err.stack });
      }
      return;
    }
    if (this.tasks.get(task.id) !== task) return;
    task.state = "ready";
    const at = this.ready.findIndex((t) => comparePriority(task.priority, t.priority) < 0);
    this.ready.splice(at < 0 ? this.ready.length : at, 0, task);
    this.runReady();
  }

  fetch(depId, holders) {
    if (!this.fetching.has(depId)) {
      const key = keyFromId(depId);
      const p = fetchDependency(this.peers, key, holders || [], this.address)
        .then((bytes) => {
          this.fetched.set(depId, bytes);
          this.dropUnneeded(); // its tasks may have been forgotten meanwhile
          return bytes;
        })
        .finally(() => this.fetching.delete(depId));
      this.fetching.set(depId, p);
    }
    return this.fetching.get(depId);
  }

  /** Starts ready tasks while task threads are idle. */
  runReady() {
    while (this.ready.length && this.pool.idle() > 0) {
      const task = this.ready.shift();
      if (this.tasks.get(task.id) !== task) continue;
      const deps = {};
      for (const d of Object.keys(task.whoHas)) {
        const bytes = this.results.get(d)?.bytes || this.fetched.get(d);
        if (!bytes) {
          // dropped meanwhile (free-keys of a dependency): fetch again
          task.state = "waiting";
          this.gatherDependencies(task);
          break;
        }
        deps[refName(keyFromId(d))] = bytes;
      }
      if (task.state !== "ready") continue;
      task.state = "executing";
      this.pool.run({ fn: task.fn, args: task.args, deps, key: keyText(task.key) }).then((r) => this.finished(task, r));
    }
  }

  finished(task, r) {
    const startstops = [{ action: "compute", start: r.start, stop: r.stop }];
    if (this.tasks.get(task.id) === task) {
      this.tasks.delete(task.id);
      if (r.ok) {
        const bytes = Buffer.from(r.bytes.buffer, r.bytes.byteOffset, r.bytes.byteLength);
        this.results.set(task.id, { key: task.key, bytes, typename: r.typename });
        this.send({
          op: "task-finished", status: "OK", key: task.key, run_id: task.runId, nbytes: bytes.length,
          type: null, typename: r.typename, metadata: {}, thread: r.thread, startstops,
          stimulus_id: `task-finished-${now()}`,
        });
      } else {
        this.erred(task, r.error, startstops, r.thread);
      }
      this.dropUnneeded();
    }
    this.runReady();
  }

  /** Drops a key: its result, or the task if waiting, ready or executing (its result is discarded). */
  forget(key, why) {
    const id = keyId(key);
    this.results.delete(id);
    const task = this.tasks.get(id);
    if (task) {
      this.tasks.delete(id);
      this.ready = this.ready.filter((t) => t !== task);
      if (task.state === "executing") log(`${why}: task ${keyText(key)} is running; its result will be discarded`);
    }
    this.dropUnneeded();
  }

  /** Forgets fetched dependencies that no remaining task needs. */
  dropUnneeded() {
    if (!this.fetched.size) return;
    const needed = new Set();
    for (const t of this.tasks.values()) for (const d of Object.keys(t.whoHas)) needed.add(d);
    for (const d of this.fetched.keys()) if (!needed.has(d)) this.fetched.delete(d);
  }

  /** steal-request (worker_state_machine.py _handle_steal_request): give it up unless running. */
  stealRequest(msg) {
    const id = keyId(msg.key);
    const task = this.tasks.get(id);
    let state = null;
    if (task && (task.state === "ready" || task.state === "waiting")) {
      state = task.state;
      this.forget(msg.key, "steal-request");
    } else if (task) {
      state = "executing";
    } else if (this.results.has(id)) {
      state = "memory";
    }
    this.send({ op: "steal-response", key: msg.key, state, stimulus_id: msg.stimulus_id });
  }

  /** remove-replicas: drops held results no task here needs; release-worker-data for each. */
  removeReplicas(msg) {
    const needed = new Set();
    for (const t of this.tasks.values()) for (const d of Object.keys(t.whoHas)) needed.add(d);
    for (const key of msg.keys || []) {
      const id = keyId(key);
      if (!this.results.has(id) || needed.has(id)) continue;
      this.results.delete(id);
      this.send({ op: "release-worker-data", key, stimulus_id: msg.stimulus_id || `remove-replicas-${now()}` });
    }
  }
}
