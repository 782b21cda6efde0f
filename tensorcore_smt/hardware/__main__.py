"""`python -m tensorcore_smt.hardware`: the hardware campaign's command line."""

import sys

from .campaign import main

sys.exit(main())
