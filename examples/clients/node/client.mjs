#!/usr/bin/env node
// A Dask client in Node.js that joins a spark-dask cluster.
//
//   node client.mjs [DIRECTORY]
//
// DIRECTORY holds the files of SparkCluster.write_connection() (default: $DASK_CONFIG,
// which `spark-dask run` sets for its script's child processes):
//   scheduler.json            the scheduler's address (distributed's scheduler-file format)
//   spark-dask-client.yaml    the Dask config: scheduler-address and the TLS file paths
//   ca.pem, client-cert.pem, client-key.pem
//
// It connects over TLS, does Dask's handshake, and asks the scheduler:
//   identity                  the scheduler's id, address, workers
//   get_metadata              a value a Python client stored (keys ["spark-dask-example", "from-python"])
//   set_metadata              a value of its own (keys ["spark-dask-example", "from-node"])
//   get_metadata              that value back
// and prints one JSON object with the answers on stdout.

import { connectionFiles } from "./connection.mjs";
import { connect } from "./dask-comm.mjs";

async function main() {
  const directory = process.argv[2] || process.env.DASK_CONFIG;
  if (!directory) {
    console.error("usage: node client.mjs DIRECTORY (or set DASK_CONFIG)");
    process.exit(2);
  }
  const { address, scheduler, tlsFiles } = connectionFiles(directory);
  const comm = await connect(address, tlsFiles);
  try {
    const identity = await comm.rpc("identity");
    const fromPython = await comm.rpc("get_metadata", {
      keys: ["spark-dask-example", "from-python"],
      default: null,
    });
    const mine = { language: "javascript", runtime: `node ${process.versions.node}`, pid: process.pid };
    await comm.rpc("set_metadata", { keys: ["spark-dask-example", "from-node"], value: mine });
    const back = await comm.rpc("get_metadata", { keys: ["spark-dask-example", "from-node"] });
    const workers = Object.entries(identity.workers || {}).map(([addr, w]) => ({
      address: addr,
      name: w.name,
      nthreads: w.nthreads,
      memory_limit: w.memory_limit,
    }));
    console.log(
      JSON.stringify(
        {
          handshake: comm.remoteInfo,
          scheduler_file: { id: scheduler.id, address: scheduler.address },
          identity: { type: identity.type, id: identity.id, address: identity.address, workers },
          from_python: fromPython,
          set_then_get: back,
        },
        null,
        2,
      ),
    );
  } finally {
    comm.close();
  }
}

main().catch((err) => {
  console.error(`spark-dask node client: ${err.stack || err}`);
  process.exit(1);
});
