"""`python -m profiles.pyspy`: see cli.py."""

import sys

from .cli import main

sys.exit(main())
