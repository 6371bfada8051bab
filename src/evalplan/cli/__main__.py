"""``python -m evalplan.cli``: the ``evalplan`` command."""

import sys

from evalplan.cli.main import main

sys.exit(main())
