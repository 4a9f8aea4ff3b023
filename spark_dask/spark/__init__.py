"""Everything that talks to Spark."""
