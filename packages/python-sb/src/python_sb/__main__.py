"""``python -m python_sb`` behaves like the ``python-sb`` command."""

import sys

from . import main

sys.exit(main())
