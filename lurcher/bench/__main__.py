"""``python -m lurcher.bench`` runs the ``lurcher-bench`` command line."""

import sys

from lurcher.bench.cli import main

sys.exit(main())
