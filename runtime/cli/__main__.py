"""`python -m kiln.cli ...`: the `kiln` command."""
import sys

from .commands import main

sys.exit(main())
