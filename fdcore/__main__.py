"""``python -m fdcore``: the ``fdcore`` command."""

import sys

from fdcore.cli.main import main

sys.exit(main())
