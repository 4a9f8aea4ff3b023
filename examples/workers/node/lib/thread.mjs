// One task thread (worker_threads): imports tasks.mjs and the --module files, then runs the
// jobs the main thread posts, one at a time: {id, fn, args, deps, key} -> {id, ok, ...}.
// Running here keeps a CPU-bound task off the main thread, which serves heartbeats and
// get_data meanwhile.

import { parentPort, workerData } from "node:worker_threads";
import { decode } from "@msgpack/msgpack";
import { encodeResult } from "./values.mjs";

const functions = {};
for (const url of workerData.modules) {
  const mod = await import(url);
  for (const [name, value] of Object.entries(mod)) {
    if (typeof value === "function") functions[name] = value;
  }
}

/** A tuple key's reference may be any JSON spelling of it ('@["x", 0]'); deps use JSON.stringify's. */
function canonicalRef(name, deps) {
  if (name in deps || !name.startsWith("[")) return name;
  try {
    return JSON.stringify(JSON.parse(name));
  } catch {
    return name;
  }
}

/** args with "@NAME" replaced by the dependency NAME's value and "@@text" by "@text". */
function resolve(value, deps, cache) {
  if (typeof value === "string") {
    if (value.startsWith("@@")) return value.slice(1);
    if (!value.startsWith("@")) return value;
    const name = canonicalRef(value.slice(1), deps);
    if (!(name in deps)) throw new Error(`argument ${value} names no dependency of this task (dependencies: ${Object.keys(deps).join(", ") || "none"})`);
    if (!cache.has(name)) cache.set(name, decode(deps[name]));
    return cache.get(name);
  }
  if (Array.isArray(value)) return value.map((v) => resolve(v, deps, cache));
  if (value !== null && typeof value === "object" && !(value instanceof Uint8Array)) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolve(v, deps, cache)]));
  }
  return value;
}

function describe(err) {
  if (err instanceof Error) return { name: err.name, message: err.message, stack: err.stack || "" };
  return { name: "Error", message: `thrown value: ${String(err)}`, stack: "" };
}

async function run({ id, fn, args, deps, key }) {
  const start = Date.now() / 1000;
  try {
    const f = functions[fn];
    if (!f) throw new Error(`no function ${JSON.stringify(fn)} (known: ${Object.keys(functions).sort().join(", ")})`);
    const resolved = resolve(Array.isArray(args) ? args : [args], deps, new Map());
    const value = await f(...resolved);
    const { bytes, typename } = encodeResult(value, key);
    const stop = Date.now() / 1000;
    parentPort.postMessage({ id, ok: true, bytes, typename, start, stop }, [bytes.buffer]);
  } catch (err) {
    parentPort.postMessage({ id, ok: false, error: describe(err), start, stop: Date.now() / 1000 });
  }
}

parentPort.on("message", (job) => run(job));
parentPort.postMessage({ ready: true, functions: Object.keys(functions).sort() });
