"""The command line's output: progress on stderr, the rich console, JSON (one writer for every
command, docs/json.md), ``wrote PATH`` lines, TensorBoard event files, and the file a graph read
from stdin was given (shown as ``<stdin>``).
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from jitsim.errors import JitsimError, JitsimWarning


def _stderr_is_tty() -> bool:
    return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"



# The one progress display of every command: a rich status line (spinner and text) on stderr,
# only when stderr is a terminal; nothing is written otherwise (pipes, files, CI logs).
_STATUS = None



def _progress_line(text: str) -> None:
    """Show ``text`` as the command's progress (replacing the previous one)."""
    global _STATUS
    if not _stderr_is_tty():
        return
    from rich.text import Text

    line = Text(text, no_wrap=True, overflow="ellipsis")  # one line, cut to the terminal's width
    if _STATUS is None:
        from rich.console import Console
        from rich.status import Status

        _STATUS = Status(line, console=Console(stderr=True, highlight=False, emoji=False), spinner="dots")
        _STATUS.start()
    else:
        _STATUS.update(line)



def _progress_done() -> None:
    """Clear the progress line (before the command prints its results or an error)."""
    global _STATUS
    if _STATUS is not None:
        status, _STATUS = _STATUS, None
        status.stop()



def terminal_safe(text: str) -> str:
    """``text`` with every control character but newline and tab written as an escape
    (``\\x1b``): names from a graph (op types, node, function and cluster names, devices)
    cannot move the cursor, set a terminal's title or forge a line of jitsim's output."""
    # (a file name's undecodable bytes, held as surrogate escapes, are written back as those bytes)
    return "".join(c if c.isprintable() or c in "\n\t" or "\udc80" <= c <= "\udcff" else repr(c)[1:-1]
                   for c in text)


def _write_out(text: str) -> None:
    """The one way a command writes plain text to stdout (its report, an explanation)."""
    sys.stdout.write(terminal_safe(text))


def _console():
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich would exit 1 ("differences found"): one rule in main()
            raise BrokenPipeError(32, "Broken pipe")

        def render_str(self, text, **kwargs):
            # every string the console renders (printed text, a table's cells) is made terminal-safe
            return super().render_str(terminal_safe(text), **kwargs)

    # markup off: a name such as "Mk[/x]" or a file "g[bold]B.pbtxt" is printed as it is; emoji
    # off: "a:smile:" likewise (and rich's emoji table is not loaded)
    return _Console(highlight=False, soft_wrap=True, emoji=False, markup=False)



# keys whose values are wall-clock times of jitsim's own work (or of a TF run it started): left out
# of JSON unless --timings, so that JSON is byte-identical from run to run (docs/json.md)
TIMING_KEYS = frozenset({"seconds", "wall_s", "capture_seconds", "mark_pass_us"})



def without_timings(obj):
    """``obj`` (JSON-ready) without :data:`TIMING_KEYS`, at any depth."""
    if isinstance(obj, dict):
        return {k: without_timings(v) for k, v in obj.items() if k not in TIMING_KEYS}
    if isinstance(obj, list):
        return [without_timings(v) for v in obj]
    return obj



def _emit_json(obj, args) -> None:
    """The one way a command writes JSON to stdout: a versioned ``schema`` first, timings only
    with ``--timings``, two-space indent."""
    assert isinstance(obj, dict) and str(obj.get("schema", "")).startswith("jitsim."), "JSON output needs a schema"
    if not getattr(args, "timings", False):
        obj = without_timings(obj)
    text = json.dumps(obj, indent=2)
    if _STDIN_FILE is not None:  # a graph read from stdin is named <stdin>, as in messages
        text = text.replace(json.dumps(_STDIN_FILE)[1:-1], "<stdin>")
    sys.stdout.write(text + "\n")



def _write_tensorboard(args, make_graphs) -> None:
    """Write the graphs ``make_graphs()`` gives (``[(label, GraphDef)]``, made only when
    ``--tensorboard`` asks) for ``--tensorboard``: one graph into DIR, several into
    DIR/<NN>_<label> (one TensorBoard run each); one line on stderr says where."""
    logdir = getattr(args, "tensorboard", None)
    if not logdir:
        return
    graphs = make_graphs()
    if not graphs:
        return
    import re

    from jitsim.graph.events import write_graph_event_file

    existed = Path(logdir).exists()
    try:
        if len(graphs) == 1:
            paths = [write_graph_event_file(logdir, graphs[0][1])]
        else:
            paths = [write_graph_event_file(Path(logdir) / f"{i:02d}_{re.sub(r'[^A-Za-z0-9_.-]+', '_', label).strip('_')[:80]}",
                                            gd) for i, (label, gd) in enumerate(graphs)]
    except OSError:
        if not existed:  # a full disk: no empty directory left behind
            import shutil

            shutil.rmtree(logdir, ignore_errors=True)
        raise
    where = paths[0] if len(paths) == 1 else f"{len(paths)} event files under {logdir}"
    _wrote(where, f"the clustered graph for TensorBoard: tensorboard --logdir {logdir}")



def _wrote(path, what: str = "") -> None:
    """The one line every command that writes an output file or directory prints on stderr."""
    from jitsim.files.output import wrote_line

    print(terminal_safe(wrote_line(path, what)), file=sys.stderr)



def _middle_cut(name: str, keep: int = 32) -> str:
    """A long dump file name cut in the middle, its start (the stage) and its end (the unique
    ``_N.pbtxt`` suffix) kept, so rows stay apart (--format json has the full names)."""
    if len(name) <= keep:
        return name
    tail = keep * 2 // 3
    return name[:keep - tail - 1] + "…" + name[-tail:]



def _one_line(text: str) -> str:
    """A message as one line: control characters (a newline in a node name, a byte quoted
    from a garbled file) are written as escapes; a graph read from stdin is named ``<stdin>``,
    not the temporary file it was kept in."""
    if _STDIN_FILE is not None:
        text = text.replace(_STDIN_FILE, "<stdin>")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)



def _shown(path) -> str:
    """A path as the user gave it: the temporary file of a graph read from stdin is <stdin>."""
    return "<stdin>" if _STDIN_FILE is not None and str(path) == _STDIN_FILE else str(path)



# ``-`` (or /dev/stdin) as the graph: the bytes read from standard input, kept in a temporary file
# for the command (removed at its end); messages name it <stdin>
STDIN_NAMES = ("-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")


STDIN_NAMES = ("-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")
_STDIN_FILE: str | None = None



def _stdin_inputs(args) -> None:
    """A graph argument ``-`` reads the graph from standard input (bounded like every input:
    2 GiB; text, binary or gzip by content, as for a file without a telling name)."""
    global _STDIN_FILE
    from jitsim.files.input import MAX_INPUT_BYTES
    from jitsim.files.output import temporary_directory

    _STDIN_FILE = None
    names = ("graph",) if args.command == "explain" else ("graph", "other", "predicted", "truth")
    given = [n for n in names if isinstance(getattr(args, n, None), str) and getattr(args, n) in STDIN_NAMES]
    if not given:
        return
    if len(given) > 1:
        raise JitsimError("only one input can come from stdin (-)", "<stdin>")
    if sys.stdin is None or sys.stdin.isatty():
        raise JitsimError("a graph to read from stdin (-), but stdin is a terminal: pipe or redirect a graph in, "
                          "e.g. jitsim cluster - < graph.pbtxt", "<stdin>")
    stream = sys.stdin.buffer
    parts, n = [], 0
    while n <= MAX_INPUT_BYTES:
        b = stream.read(min(1 << 20, MAX_INPUT_BYTES + 1 - n))
        if not b:
            break
        parts.append(b)
        n += len(b)
    if n > MAX_INPUT_BYTES:
        raise JitsimError(f"more than {MAX_INPUT_BYTES} bytes on stdin, more than any protobuf message can hold",
                          "<stdin>")
    if n == 0:
        raise JitsimError("is empty: a graph needs at least one node", "<stdin>")
    f = temporary_directory(prefix="jitsim-stdin-") / "stdin"
    f.write_bytes(b"".join(parts))
    _STDIN_FILE = str(f)
    setattr(args, given[0], _STDIN_FILE)



def _show_warning(message) -> None:
    if isinstance(message, JitsimWarning):
        where = f"{message.path}: " if message.path else ""
        print(_one_line(f"jitsim: {where}note: {message.message}"), file=sys.stderr)
    else:
        print(_one_line(f"jitsim: warning: {message}"), file=sys.stderr)
