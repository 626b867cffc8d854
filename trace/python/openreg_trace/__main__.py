"""``python -m openreg_trace COMMAND``: the same as the ``openreg-trace`` command."""

import sys

from .cli import main

sys.exit(main())
