"""``python -m jitsim``: the ``jitsim`` command."""

import sys

from jitsim.cli import main

if __name__ == "__main__":
    sys.exit(main())
