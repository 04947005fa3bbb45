"""``python -m python_sb`` behaves like the ``python-sb`` command."""

import sys

from python_sb import main

sys.exit(main())
