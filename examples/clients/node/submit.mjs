#!/usr/bin/env node
// Submit a cross-language graph to a spark-dask cluster from Node.js and print results.
//
//   node submit.mjs DIRECTORY GRAPH_JSON [KEY ...] [--timeout SECONDS]
//
// DIRECTORY: the files of SparkCluster.write_connection() (connection.mjs).
// GRAPH_JSON: the graph as JSON text, or the path of a JSON file:
//   {"key": [language, function, arg, ...], ...}
// an argument "@other" is the result of task "other" (in the graph, or already on the
// scheduler, e.g. a Python client's Future); "@@x" is the literal string "@x". Example:
//   {"a": ["node", "fib", 20], "b": ["python", "math.factorial", 5], "c": ["node", "add", "@a", "@b"]}
// KEY: the keys whose results to print (default: every key of the graph).
//
// It calls the scheduler's xlang_submit, xlang_gather and xlang_release operations
// (spark_dask/xlang/scheduler.py; plain msgpack, no pickle) and prints one JSON object
// {key: result} on stdout; bytes print as {"base64": "..."}. A task that failed, or a
// result msgpack cannot carry, prints its message on stderr and exits 1.

import fs from "node:fs";
import { connectionFiles } from "./connection.mjs";
import { connect } from "./dask-comm.mjs";

function parseArgs(argv) {
  const rest = [];
  let timeout = null;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--timeout") timeout = Number(argv[++i]);
    else rest.push(argv[i]);
  }
  const [directory, graphText, ...keys] = rest;
  if (!directory || !graphText) {
    console.error("usage: node submit.mjs DIRECTORY GRAPH_JSON [KEY ...] [--timeout SECONDS]");
    process.exit(2);
  }
  const text = fs.existsSync(graphText) ? fs.readFileSync(graphText, "utf8") : graphText;
  const graph = JSON.parse(text);
  return { directory, graph, keys: keys.length ? keys : Object.keys(graph), timeout };
}

function printable(value) {
  if (value instanceof Uint8Array) return { base64: Buffer.from(value).toString("base64") };
  if (Array.isArray(value)) return value.map(printable);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, printable(v)]));
  }
  return value;
}

async function main() {
  const { directory, graph, keys, timeout } = parseArgs(process.argv.slice(2));
  const { address, tlsFiles } = connectionFiles(directory);
  const comm = await connect(address, tlsFiles);
  let holder = null;
  try {
    const submitted = await comm.rpc("xlang_submit", { graph });
    holder = submitted.holder;
    const answer = await comm.rpc("xlang_gather", { keys, holder, timeout });
    if (answer.status !== "OK") {
      console.error(`spark-dask node submit: task ${JSON.stringify(answer.key)}: ${answer.message}`);
      process.exitCode = 1;
      return;
    }
    console.log(JSON.stringify(printable(answer.results)));
  } finally {
    if (holder) await comm.rpc("xlang_release", { holder }).catch(() => undefined);
    comm.close();
  }
}

main().catch((err) => {
  console.error(`spark-dask node submit: ${err.message || err}`);
  process.exit(1);
});
