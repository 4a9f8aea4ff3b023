"""The multi-host tests: a Spark standalone cluster on hosts made of Linux network namespaces (root)."""
