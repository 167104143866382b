"""``python -m bench``: run the benchmark suite (see bench/suite.py and docs/performance.md)."""

import sys

from .suite import main

sys.exit(main())
