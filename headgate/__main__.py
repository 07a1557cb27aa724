"""`python -m headgate`: the `headgate` command line."""

import sys

from headgate.cli import main

sys.exit(main())
