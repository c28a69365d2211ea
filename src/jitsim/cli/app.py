"""``main``: parse, check the inputs and outputs before any work, run the command, and turn every
failure into one ``jitsim: ...`` line and a documented exit code (docs/cli.md).
"""

from __future__ import annotations

import gc
import os
import sys
import warnings
from pathlib import Path

from jitsim import process
from jitsim.errors import JitsimError, JitsimWarning
from jitsim.options import debug_mode

from jitsim.cli.arguments import _join_flag_values
from jitsim.cli.common import _check_common, _is_dir, _op_libraries
from jitsim.cli.output import _one_line, _progress_done, _show_warning, _shown, _stdin_inputs
from jitsim.cli.parser import COMMANDS, build_parser


# (command, subcommand) -> how its -o is used: "file", "dir", or "file-or-dir" (cluster)
_OUTPUT_KIND = {"cluster": "file-or-dir", "rewrite": "file", "render": "file", "report": "dir",
                "registry": "file", "harvest": "dir", "index": "file", "fuzz": "dir",
                "profile": "dir", "verify": "dir", "matrix": "dir"}



def _check_outputs(args) -> None:
    """One rule for every command's ``-o``: checked before any work (graph/io.check_output)."""
    from jitsim.graph.io import check_output

    tb = getattr(args, "tensorboard", None)
    if tb is not None:
        try:
            check_output(tb, directory=True)
        except JitsimError as e:
            raise JitsimError(f"--tensorboard: {e.message}", tb) from None
    out = getattr(args, "output", None)
    if out is None:
        return

    if out == "":
        raise JitsimError("-o: an empty output name: give a file or directory name (- for stdout)")
    key = getattr(args, "crosscheck_command", None) or args.command
    kind = _OUTPUT_KIND.get(key, "file")
    if key == "render":
        from jitsim.explain.render import check_suffix

        check_suffix(out)
    if kind == "file-or-dir":
        check_output(out, directory=_is_dir(out))
    else:
        check_output(out, directory=kind == "dir")



# Python's cyclic garbage collector, tuned for one batch command: a graph's nodes, edges and
# records live until the command ends, and with the default thresholds every full collection
# walks all of them again (0.25 s of 1.7 s on a 12.6k-node graph, 2.2 s of 13.7 s at 100k
# nodes, issue 14). Rarer collections keep freeing short-lived cycles; the memory peak is the
# same (benchmarks/). The benchmarks' in-process child uses the same setting.
GC_THRESHOLDS = (100_000, 50, 100)


GC_THRESHOLDS = (100_000, 50, 100)
# The commands that read one graph, simulate and report, run with the collector off: what they
# build lives until they end, so even the young-generation collections only walk live objects
# (0.35 s of 7 s on the 101k-node tiled ResNet-50), and the cycles they leave are a few thousand
# small objects (gc.get_stats() after a run). Commands that run TF, campaigns or fuzzing keep it.
GC_OFF_COMMANDS = frozenset({"show", "cluster", "rewrite", "explain", "whatif", "diff", "render"})



EXIT_INTERNAL = 3  # an unexpected exception: a bug in jitsim (docs/cli.md, exit codes)



# the positional arguments that name a command's input, for the one error line of an input
# that exhausts the stack or the memory, or meets a bug
_MAIN_INPUT_ARGS = ("graph", "target", "dir", "dumps", "predicted")



def _main_input(args):
    v = next((getattr(args, k) for k in _MAIN_INPUT_ARGS if getattr(args, k, None)), None) if args else None
    return v[0] if isinstance(v, list) else v  # harvest TARGET..., verify DIR...: the first names the input



def _memory_exhausted(e: BaseException) -> bool:
    """Whether ``e`` says the memory ran out, whatever its type: a MemoryError, an OSError
    ENOMEM, or a module that could not be loaded for want of address space (numpy's
    ``ImportError: libopenblas.so: failed to map segment from shared object`` under ``ulimit
    -v``), itself or in its causes (issue 39)."""
    import errno

    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, MemoryError) or (isinstance(e, OSError) and e.errno == errno.ENOMEM):
            return True
        if isinstance(e, ImportError) and any(w in str(e).lower() for w in (
                "failed to map segment", "cannot allocate memory", "out of memory")):
            return True
        e = e.__cause__ or e.__context__
    return False


def _resource_error(args, e: BaseException) -> JitsimError:
    path = _main_input(args)
    if isinstance(e, RecursionError):
        return JitsimError("nested too deeply for jitsim (Python's recursion limit reached); TF may accept "
                           "it: please report it to jitsim with this input", path)
    return JitsimError("jitsim ran out of memory on this input (MemoryError); try a machine with more "
                       "memory", path)



# the command's parsed arguments while it runs, for the out-of-memory line that protobuf's C
# code failing to allocate ends the process with (_memory_guard)
_RUNNING: list = [None]


def _out_of_memory_line(args) -> str:
    return f"jitsim: {_one_line(str(_resource_error(args, MemoryError())))}"


def _out_of_memory_in_c() -> None:
    """Called by ``jitsim._memguard`` (with the GIL, inside protobuf's C code, whose allocation
    failed): the command's out-of-memory line, every temporary file removed; the process then
    exits with code 2 (docs/cli.md, exit codes)."""
    from jitsim.files import output as _output

    process.SIGNALS_MUTED.append(True)
    process.print_error(_out_of_memory_line(_RUNNING[0]))
    _output.cleanup()


def _memory_guard(install: bool) -> None:
    """Where upb (protobuf's C messages) fails to allocate, it crashes (SIGSEGV, exit 139)
    instead of raising MemoryError: ``jitsim._memguard`` (optional C extension) makes such a
    failure end the command as any other out-of-memory error does (issue 39)."""
    from jitsim.accel import load

    guard = load("jitsim._memguard")
    if guard is None:
        return
    if not install:
        guard.uninstall()
        return
    try:
        from google.protobuf.internal import api_implementation
        from jitsim.registry import protos  # noqa: F401 - loads protobuf's C module, the one hooked

        if api_implementation.Type() != "upb":
            return
        import google._upb._message as upb
    except ImportError:
        return
    path = getattr(upb, "__file__", None)
    names = ([os.fsencode(path)] if path else []) + [b"/google/_upb/_message."]  # (as loaded, or any such)
    guard.install(names, (_out_of_memory_line(_RUNNING[0]) + "\n").encode(errors="replace"), _out_of_memory_in_c)


def _running(args) -> None:
    """``args`` is the command running (parsed: ``--help`` and usage errors never get here): the
    memory guard is installed, its out-of-memory line naming the command's input."""
    _RUNNING[0] = args
    _memory_guard(True)


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit code (docs/cli.md "Exit codes")."""
    from jitsim.files import output as _output

    gc.set_threshold(*GC_THRESHOLDS)
    process.occupy_closed_fds()
    saved_stdout, saved_stderr = sys.stdout, sys.stderr
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")
    process.setup_streams()
    guard = sys.stdout = process.GuardedStdout(sys.stdout) if sys.stdout is not None else process.ClosedStdout()
    restore_signals = process.install_signal_handlers()
    try:
        try:
            rc = _run(argv)
            guard.flush()  # what is still buffered: its errors are this command's too
            sys.stdout.flush()
        except process.StdoutError as e:
            process.silence_stdout(saved_stdout)
            process.print_error(f"jitsim: {_one_line(str(e))}")
            rc = e.exit_code
        except BrokenPipeError:  # the reader went away (`| head`): quiet, as other Unix tools
            process.silence_stdout(saved_stdout)
            rc = process.EXIT_BROKEN_PIPE
        except process.Signalled as e:
            rc = 128 + e.signum
        except KeyboardInterrupt:
            process.print_error("jitsim: interrupted")
            rc = 130
    finally:
        process.SIGNALS_MUTED.append(True)  # a signal now would only interrupt the cleanup below
        _output.stdout_stream = None
        sys.stdout, sys.stderr = saved_stdout, (saved_stderr if saved_stderr is not None else sys.stderr)
        _output.cleanup()
        restore_signals()
        process.SIGNALS_MUTED.clear()
        _RUNNING[0] = None
        _memory_guard(False)
    return rc



def _checked_run(args) -> tuple[int, list]:
    """The command, after its inputs and outputs are checked (before any work), with the op
    libraries of --op-defs loaded and the garbage collector off where it only costs time;
    returns its exit code and the notes (warnings) it raised."""
    from jitsim.registry import simulating

    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always", JitsimWarning)
        _stdin_inputs(args)
        _check_inputs(args)
        _check_outputs(args)
        _check_common(args)
        _reports_to_stderr_if_output_is_stdout(args)
        libraries = _op_libraries(getattr(args, "op_defs", None) or ())
        gc_was_on = gc.isenabled()
        if getattr(args, "command", None) in GC_OFF_COMMANDS:
            gc.disable()
        try:
            with simulating(None, libraries):
                rc = args.func(args)
        finally:
            if gc_was_on:
                gc.enable()
    return rc, notes


def _run(argv: list[str] | None) -> int:
    """Parse and run one command; every error becomes its one line and exit code."""
    args = None
    try:
        argv = _join_flag_values(sys.argv[1:] if argv is None else list(argv))
        parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
        args = parser.parse_args(argv)
        _running(args)
        rc, notes = _checked_run(args)
        # what jitsim assumed to accept the input: said once the command succeeded (a failing
        # command prints its one error line only)
        seen = set()
        for w in notes:
            if str(w.message) not in seen:
                seen.add(str(w.message))
                _show_warning(w.message)
        return rc
    except process.StdoutError:
        raise
    except JitsimError as e:
        _progress_done()
        process.print_error(f"jitsim: {_one_line(str(e))}")
        return e.exit_code
    except (RecursionError, MemoryError) as e:
        # input-sized limits, not bugs to show as a traceback: an input too deep for a walk
        # still recursive, or too large for this machine's memory (docs/cli.md, exit codes).
        # The traceback's frames hold what filled the memory: dropped before the line is made
        e.__traceback__ = None
        gc.collect()
        print(f"jitsim: {_one_line(str(_resource_error(args, e)))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _progress_done()
        process.print_error("jitsim: interrupted")
        return 130
    except process.Signalled as e:
        import signal

        process.print_error(f"jitsim: terminated by {signal.Signals(e.signum).name}")
        raise
    except Exception as e:  # noqa: BLE001 - sorted below: the memory ran out, the environment, a bug
        return _failed(args, e)


def _failed(args, e: Exception) -> int:
    """The one line and exit code of an exception no command turned into a JitsimError."""
    if _memory_exhausted(e):  # (e.g. a library that could not be loaded for want of memory)
        e.__traceback__ = None
        gc.collect()
        print(f"jitsim: {_one_line(str(_resource_error(args, MemoryError())))}", file=sys.stderr)
        return 2
    if isinstance(e, OSError):
        if isinstance(e, BrokenPipeError):
            raise  # (the exception being handled, for main)
        # the last resort for the environment's errors a command did not name itself: one line
        from jitsim.files.input import os_problem

        # an error that names no file (a full disk while writing) is said of the command's output,
        # else of its input: the place the user can act on
        named = e.filename or getattr(args, "output", None) or _main_input(args)
        where = f"{_shown(named)}: " if named else ""
        process.print_error(f"jitsim: {_one_line(where + os_problem(e, 'cannot use'))}")
        return 2
    # anything else: a bug in jitsim: one line naming the input, exit 3
    if debug_mode():
        raise
    _progress_done()
    where = _main_input(args)
    where = f"{_shown(where)}: " if where else ""
    detail = f"{type(e).__name__}: {e}"[:300]
    process.print_error(_one_line(f"jitsim: {where}internal error ({detail}); please report it with this "
                                  "input and command (JITSIM_DEBUG=1 shows the traceback)"))
    return EXIT_INTERNAL



# every option and positional argument that names an input file or directory
_INPUT_ARGS = ("graph", "other", "target", "dumps", "dir", "predicted", "truth", "log", "op_defs", "python",
               "load_library")



def _check_inputs(args) -> None:
    """Input paths that no command can use whatever they hold (a name over 255 bytes, a path
    over 4,095, a symbolic link loop): one line before any work."""
    from jitsim.files.input import input_problem

    names = ("graph", "op_defs") if args.command == "explain" else _INPUT_ARGS  # explain's 'other' is a node
    for name in names:
        v = getattr(args, name, None)
        for p in (v if isinstance(v, list) else [v]):
            if isinstance(p, str) and p:
                problem = input_problem(p)
                if problem:
                    raise JitsimError(problem, p)



def _reports_to_stderr_if_output_is_stdout(args) -> None:
    """``-o -``: standard output carries the written file, so the command's report goes to
    stderr."""
    from jitsim.files import output as _output

    out = getattr(args, "output", None)
    if isinstance(out, str) and _output.is_stdout(out):
        _output.stdout_stream = sys.stdout
        sys.stdout = sys.stderr



def entry():
    """The ``jitsim`` console script: :func:`main`, then the process ends without the
    interpreter's teardown (:func:`jitsim.process.exit_process`)."""
    process.exit_process(main())
