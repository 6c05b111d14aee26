"""What the tests read in errors instead of a clock: a timeout is checked by the value the error
says it waited for, so the tests pass on a machine of any speed (the harness bounds every test
against a hang)."""

from __future__ import annotations

import re


def reports_timeout(text: str, seconds: float) -> bool:
    """Whether an error says it waited `seconds`: Gloo's "Timed out waiting 2000ms", c10d_func's
    "within the timeout (2.000000 s ...)", "within its timeout of 2 s" or "within 2 s"."""
    ms = round(seconds * 1000)
    return any(
        re.search(pattern, text)
        for pattern in (
            rf"(?<![\d.]){ms}\s?ms\b",
            rf"(?<![\d.]){seconds:g}(\.0+)?\s?s\b",
            rf"(?<![\d.]){seconds:.6f}\s?s\b",
        )
    )
