"""``python -m lurcher.mcp_server`` runs ``lurcher-mcp``."""

import sys

from lurcher.extras import mcp

sys.exit(mcp())
