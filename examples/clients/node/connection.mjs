// The connection files of SparkCluster.write_connection(DIRECTORY) (or of `spark-dask run`'s
// $DASK_CONFIG), read for the Node.js examples:
//   scheduler.json            the scheduler's address (distributed's scheduler-file format)
//   spark-dask-client.yaml    the Dask config: scheduler-address and the TLS file paths
//   ca.pem, client-cert.pem, client-key.pem

import fs from "node:fs";
import path from "node:path";
import { parse } from "yaml";

/** {address, scheduler, tlsFiles: {ca, cert, key} as PEM text, or null without TLS}. */
export function connectionFiles(directory) {
  const scheduler = JSON.parse(fs.readFileSync(path.join(directory, "scheduler.json"), "utf8"));
  const config = parse(fs.readFileSync(path.join(directory, "spark-dask-client.yaml"), "utf8"));
  const address = config["scheduler-address"] || scheduler.address;
  if (address !== scheduler.address) {
    throw new Error(`scheduler.json (${scheduler.address}) and the config (${address}) disagree`);
  }
  const tlsConf = config.distributed?.comm?.tls;
  const tlsFiles = tlsConf
    ? {
        ca: fs.readFileSync(tlsConf["ca-file"], "utf8"),
        cert: fs.readFileSync(tlsConf.client.cert, "utf8"),
        key: fs.readFileSync(tlsConf.client.key, "utf8"),
      }
    : null;
  return { address, scheduler, tlsFiles };
}
