"""``python -m spatialdp.cli``: the ``spatialdp`` command."""

import sys

from spatialdp.cli import main

sys.exit(main())
