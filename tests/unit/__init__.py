"""Tests that start no Spark and no cluster processes: the fast loop (`python -m pytest tests/unit`)."""
