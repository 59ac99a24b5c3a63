"""``python -m lurcher.bench`` runs the ``lurcher-bench`` command line."""

import sys

from lurcher.extras import bench

sys.exit(bench())
