"""Test extras: a package of one, or a skip (a failure under ``CI``)."""

from __future__ import annotations

import os

import pytest


def needs(module: str, extra: str):
    """Import ``module`` (a test extra's package) or skip with the install line; under
    ``CI`` a missing package FAILS instead, so CI never skips these checks silently."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        reason = f"pip install -e '.[{extra}]' (missing {module}: {e})"
        if os.environ.get("CI"):
            pytest.fail(f"CI must install the {extra} extra: {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)
