"""``python -m jitsim.cli``: the ``jitsim`` command."""

from jitsim.cli.app import entry

if __name__ == "__main__":
    entry()
