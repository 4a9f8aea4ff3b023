// Log lines on stderr, timestamped like distributed's ("2026-01-01 12:00:00,123 - ...").

export function log(message, level = "INFO") {
  const t = new Date().toISOString().replace("T", " ").replace("Z", "").replace(".", ",");
  process.stderr.write(`${t} - spark_dask.node_worker - ${level} - ${message}\n`);
}
