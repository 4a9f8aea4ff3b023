"""spark-dask benchmarks (``python -m benchmarks``)."""
