"""``python -m jitsim``: the ``jitsim`` command."""

from jitsim.cli import entry

if __name__ == "__main__":
    entry()
