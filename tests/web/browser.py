"""The browser of the tests: bench/browser.py's Chromium, and a check that fails (not
skips) when it is missing, because CI must run these tests."""

from __future__ import annotations

import pytest

from bench.browser import Browser, missing

__all__ = ["Browser", "SHOTS_ENV", "require"]

#: Where the pages' screenshots go: docs/web/ when the docs' images are remade
#: (``OPAL_WEB_SCREENSHOTS=docs/web pytest tests/web``), else the test's temp folder.
SHOTS_ENV = "OPAL_WEB_SCREENSHOTS"


def require() -> None:
    """Fail when the browser is missing, saying what to install."""
    why = missing()
    if why:
        pytest.fail(f"the browser tests cannot start: {why}", pytrace=False)
