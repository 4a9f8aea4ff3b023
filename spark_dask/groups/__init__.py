"""Worker groups."""
