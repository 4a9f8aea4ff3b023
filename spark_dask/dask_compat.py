"""Every gate on the installed distributed's version, named after what it works around.

The package supports distributed from the lower bound pyproject.toml declares (2024.8.0,
which CI's pyspark 3.5 environment runs) to the newest. Where their public APIs differ,
the difference is decided here, once, and the rest of the package calls what this
module offers. What of distributed's *internals* the package touches, and the check that
they are still there, is :mod:`spark_dask.internals`.
"""

from __future__ import annotations

import inspect

from distributed.deploy.adaptive import Adaptive

# Adaptive.stop(reason=...) arrived in distributed 2024.11; 2024.8 takes no argument.
STOP_TAKES_REASON = "reason" in inspect.signature(Adaptive.stop).parameters


def stop_adaptive(adaptive, reason: str) -> None:
    """Stop ``adaptive`` (distributed's ``Adaptive``) saying why, where its ``stop``
    takes a reason (the lowest distributed this package supports does not)."""
    if STOP_TAKES_REASON:
        adaptive.stop(reason=reason)
    else:
        adaptive.stop()


__all__ = ["STOP_TAKES_REASON", "stop_adaptive"]
