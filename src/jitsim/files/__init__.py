"""Reading and writing files safely, for every package: :mod:`.input` (the one bounded,
regular-file-only reader), :mod:`.output` (the one writer: atomic, through symlinks, ``-`` for
stdout, cleanup on a signal) and :mod:`.paths` (why a path cannot be opened, in words)."""
