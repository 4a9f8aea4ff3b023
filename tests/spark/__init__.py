"""Tests on a real local-cluster Spark (classic and Spark Connect) or with real Dask cluster processes."""
