"""``python -m opalgit`` runs the ``opal`` command (through :mod:`opalgit.client`)."""

from .client import main

main()
