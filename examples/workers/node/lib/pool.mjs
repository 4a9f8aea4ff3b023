// K task threads (thread.mjs). run(job) resolves when a thread has run the job; the caller
// (state.mjs) starts a job only when idle() > 0, so at most K tasks run at once.

import { Worker } from "node:worker_threads";
import { log } from "./log.mjs";

const THREAD = new URL("./thread.mjs", import.meta.url);

export class Pool {
  constructor(size, moduleUrls) {
    this.size = size;
    this.moduleUrls = moduleUrls;
    this.threads = []; // {index, worker, job: {id, resolve} | null}
    this.nextId = 1;
    this.functions = [];
    this.closing = false;
  }

  /** Starts the threads; rejects if a module fails to load. */
  async start() {
    await Promise.all(Array.from({ length: this.size }, (_, i) => this.spawn(i)));
  }

  spawn(index) {
    return new Promise((resolve, reject) => {
      const worker = new Worker(THREAD, { workerData: { modules: this.moduleUrls } });
      const thread = { index, worker, job: null };
      this.threads[index] = thread;
      worker.on("message", (msg) => {
        if (msg.ready) {
          this.functions = msg.functions;
          resolve();
        } else if (thread.job && thread.job.id === msg.id) {
          const { resolve: done } = thread.job;
          thread.job = null;
          done({ ...msg, thread: index });
        }
      });
      worker.on("error", (err) => {
        log(`task thread ${index}: ${err.stack || err}`, "ERROR");
        reject(err); // before ready: a module failed to load (after: exited() follows)
      });
      worker.on("exit", (code) => this.exited(thread, code));
    });
  }

  /** A thread ended (a task called process.exit, ran out of memory, ...): its job errs, a new thread takes its place. */
  exited(thread, code) {
    if (this.closing || this.threads[thread.index] !== thread) return;
    log(`task thread ${thread.index} exited (code ${code}); starting a new one`);
    const job = thread.job;
    thread.job = null;
    this.spawn(thread.index).catch((err) => log(`cannot restart task thread ${thread.index}: ${err}`));
    if (job) {
      const now = Date.now() / 1000;
      job.resolve({ id: job.id, ok: false, thread: thread.index, start: now, stop: now,
        error: { name: "Error", message: `the task's thread exited with code ${code}`, stack: "" } });
    }
  }

  idle() {
    return this.threads.filter((t) => t && !t.job).length;
  }

  /** Runs {fn, args, deps, key} on an idle thread: {ok, bytes | error, typename, start, stop, thread}. */
  run(job) {
    const thread = this.threads.find((t) => t && !t.job);
    if (!thread) throw new Error("no idle task thread");
    const id = this.nextId++;
    return new Promise((resolve) => {
      thread.job = { id, resolve };
      thread.worker.postMessage({ ...job, id });
    });
  }

  async close() {
    this.closing = true;
    await Promise.all(this.threads.filter(Boolean).map((t) => t.worker.terminate()));
  }
}
