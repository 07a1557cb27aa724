"""`python -m headgate`: the `headgate` command line."""

import sys

from headgate._cli import main

sys.exit(main())
