"""`python -m pingpong_lab` is the `pingpong-lab` command (sweep, fit, report, bench, cohort)."""

import sys

from .apps.cli import main

sys.exit(main())
