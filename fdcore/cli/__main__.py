"""``python -m fdcore.cli``: the ``fdcore`` command."""

import sys

from fdcore.cli.main import main

sys.exit(main())
