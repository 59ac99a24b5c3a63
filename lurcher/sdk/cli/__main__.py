"""``python -m lurcher.sdk.cli``."""

import sys

from lurcher.sdk.cli.main import main

sys.exit(main())
