"""Paths of the repository, for tests that read its files or run its examples."""

from __future__ import annotations

import os

# tests/support/paths.py -> the repository's root
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
