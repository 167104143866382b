"""opalgit: git for coding-agent sessions.

The public Python API is :mod:`opalgit.porcelain` (what every command does) over
:class:`opalgit.repo.Repository`; errors derive from :class:`opalgit.errors.OpalError`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import OpalError  # noqa: E402
from .repo import Repository  # noqa: E402

__all__ = ["OpalError", "Repository", "__version__"]
