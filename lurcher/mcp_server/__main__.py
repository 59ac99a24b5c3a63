"""``python -m lurcher.mcp_server`` runs ``lurcher-mcp``."""

import sys

from lurcher.mcp_server.cli import main

sys.exit(main())
