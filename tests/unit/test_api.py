"""The public Python API: ``__all__`` lists exactly the public names of the porcelain."""

from __future__ import annotations

import opalgit
from opalgit import porcelain


def test_porcelain_all_matches_its_public_names():
    public = {n for n, v in vars(porcelain).items() if not n.startswith("_") and str(getattr(v, "__module__", None)).startswith(("opalgit.porcelain", "opalgit.history.states"))}
    public |= {"STATE_BLOB", "TURNS_TREE"}
    assert set(porcelain.__all__) == public


def test_package_exports():
    assert set(opalgit.__all__) == {"OpalError", "Repository", "__version__"}
    for name in opalgit.__all__:
        assert hasattr(opalgit, name)
