"""``python -m opalgit`` runs the ``opal`` command (through :mod:`opalgit.server.client`)."""

from opalgit.server.client import main

main()
