"""``python -m opalgit`` runs the ``opal`` command."""

from .cli import run

run()
