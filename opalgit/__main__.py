"""``python -m opalgit`` runs the ``opal`` command."""

import sys

from .cli import main

sys.exit(main())
