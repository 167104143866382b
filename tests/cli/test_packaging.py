"""The package metadata in the form current setuptools reads without a deprecation banner (issue 19)."""

from __future__ import annotations

import os
import re

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_licence_is_an_spdx_string_with_its_file():
    # A `license = { text = ... }` table makes setuptools >= 77 print its deprecation
    # banner three times on every `pip install` (once per build hook).
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        meta = tomllib.load(fh)
    project = meta["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    assert os.path.isfile(os.path.join(ROOT, "LICENSE"))
    with open(os.path.join(ROOT, "LICENSE"), encoding="utf-8") as fh:
        assert fh.readline().strip() == "MIT License"
    # The first setuptools that understands both fields.
    (req,) = [r for r in meta["build-system"]["requires"] if r.startswith("setuptools")]
    assert tuple(int(x) for x in re.search(r">=\s*([\d.]+)", req).group(1).split(".")) >= (77,)
