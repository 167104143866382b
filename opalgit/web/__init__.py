"""``opal web``: a read-only view of the repository's states in a local browser.

Layered above the porcelain, which it reads through, and below the CLI, which starts
it. Nothing here writes to the repository: every action a page offers is shown as the
``opal`` command to copy.
"""
