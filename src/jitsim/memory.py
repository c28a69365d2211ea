"""Memory: how much an input will need at least, how much this process may still take, and
one clear error before the work when the first is more than the second (issue 39).

The TF-free route inlines every function call, as TF does; TF names an inlined node after
its caller (``call/inner/inner/.../m``), so a call nested D deep makes names D levels long
and the inlined graph's text grows like D²: calls nested 10,000 deep in a 5 MB file are
gigabytes of node names, whatever holds them. :func:`inlined_size` works out the inlined
graph's node count and name bytes from the library alone (linear in the input), and
:func:`check_room` refuses an input whose lower bound of memory
(:data:`BYTES_PER_NODE` per node, :data:`BYTES_PER_NAME_BYTE` per byte of node name) is more
than the memory left (:func:`room`): the address-space and data limits (``ulimit -v``/``-d``),
the cgroup's memory limit, and the machine's available memory and swap. The bound is set
well below what jitsim was measured to take (benchmarks/memory_scale.py; docs/performance.md),
so an input it refuses would not have fitted; one that passes it may still run out (the
command then ends with the same line, docs/cli.md).
"""

from __future__ import annotations

import os
import resource

from jitsim.defs import LOWER_USING_SWITCH_MERGE_ATTR
from jitsim.errors import JitsimError
from jitsim.opsets import PARTITIONED_CALL_OPS

__all__ = ["inlined_size", "room", "check_room", "check_inlining_room", "BYTES_PER_NODE", "BYTES_PER_NAME_BYTE"]

# Lower bounds of the TF-free route's peak, per node of the inlined graph and per byte of its
# node names (measured, benchmarks/memory_scale.py and docs/performance.md: 2.8 KB a node on a
# chain of 300k NoOps, the least per node seen, 4.3 to 4.9 KB on unconnected NoOps; 10 to 12
# bytes per byte of the names counted here on calls nested 2,000 to 4,000 deep)
BYTES_PER_NODE = 1500
BYTES_PER_NAME_BYTE = 4

_LOWERED_OPS = {"If": ("then_branch", "else_branch"), "StatelessIf": ("then_branch", "else_branch"),
                "While": ("cond", "body"), "StatelessWhile": ("cond", "body"),
                "Case": ("branches",), "StatelessCase": ("branches",)}


def _callees(nd, fns) -> list[str]:
    """The functions whose bodies TF's inlining and lowering put in place of ``nd`` (those it
    certainly inlines: the same rules as :mod:`jitsim.rewrites.function_inlining` and
    :mod:`jitsim.rewrites.lower_functional_ops`)."""
    from jitsim.rewrites.function_inlining import bool_attr, not_inlined_reason

    op = nd.op
    fname = (nd.attr["f"].func.name if "f" in nd.attr else None) if op in PARTITIONED_CALL_OPS else \
        op if op in fns else None
    if fname is not None:
        fdef = fns.get(fname)
        return [fname] if not_inlined_reason(nd, fdef) is None else []
    attrs = _LOWERED_OPS.get(op)
    if attrs is None or not bool_attr(nd, LOWER_USING_SWITCH_MERGE_ATTR):
        return []
    out = []
    for a in attrs:
        if a in nd.attr:
            av = nd.attr[a]
            names = [f.name for f in av.list.func] if av.WhichOneof("value") == "list" else [av.func.name]
            out += [n for n in names if n in fns]
    return out


def inlined_size(graph) -> tuple[int, int]:
    """(nodes, bytes of node names) of ``graph`` (a :class:`~jitsim.graph.model.Graph`) with every
    call TF certainly inlines inlined, at least: each function body counted once per call,
    its nodes named ``<caller>/<node>`` (the nodes inlining adds besides, and the longer names
    lowering gives, are left out). Each function is read once (memoized, callees first, with an
    explicit stack: nesting depth is the input's); a function that calls itself adds nothing
    for that call."""
    fns = {f.signature.name: f for f in graph.graphdef.library.function}
    if not fns:  # nothing to inline
        return len(graph.nodes), sum(map(len, graph.nodes))
    # per function: (N, K), its inlined node count and name bytes under an empty prefix; a
    # body inlined under a caller named P (len L) adds N nodes of L * N + K bytes of names
    done: dict[str, tuple[int, int]] = {}
    calls: dict[str, list[tuple[int, list[str]]]] = {}

    def body_calls(f) -> list[tuple[int, list[str]]]:
        got = calls.get(f)
        if got is None:
            got = calls[f] = [(len(nd.name), c) for nd in fns[f].node_def for c in (_callees(nd, fns),) if c]
        return got

    def solve(root: str) -> None:
        stack = [root]
        active = {root}
        while stack:
            f = stack[-1]
            pending = [g for _, gs in body_calls(f) for g in gs if g not in done and g not in active]
            if pending:
                stack.append(pending[0])
                active.add(pending[0])
                continue
            stack.pop()
            active.discard(f)
            body = fns[f].node_def
            n = len(body)
            k = sum(1 + len(nd.name) for nd in body)
            for length, gs in body_calls(f):
                for g in gs:
                    gn, gk = done.get(g, (0, 0))  # (0, 0): a call back into an active function
                    n += gn
                    k += gn * (1 + length) + gk
            done[f] = (n, k)

    nodes, names = 0, 0
    for name, node in graph.nodes.items():
        nd = node.nodedef
        nodes += 1
        names += len(name)
        for g in _callees(nd, fns):
            if g not in done:
                solve(g)
            gn, gk = done[g]
            nodes += gn
            names += gn * len(name) + gk  # (K counts each name's "/" after its prefix)
    return nodes, names


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _proc_kib(path: str, keep=lambda key: True) -> dict[str, int]:
    """The ``Key: N kB`` lines of a ``/proc`` file, in bytes (``keep`` picks the keys)."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if keep(key) and parts and parts[0].isdigit():
                    out[key] = int(parts[0]) * 1024
    except OSError:
        pass
    return out


def _meminfo() -> dict[str, int]:
    return _proc_kib("/proc/meminfo")


def _status() -> dict[str, int]:
    return _proc_kib("/proc/self/status", lambda key: key.startswith("Vm"))


def _cgroup_room() -> int | None:
    """The least room left under the memory limits of this process's cgroup (v2) and of its
    ancestors, or None where none is set (or none can be read)."""
    try:
        with open("/proc/self/cgroup") as f:
            path = next((line.strip()[3:] for line in f if line.startswith("0::")), None)
    except OSError:
        return None
    if path is None:
        return None
    best = None
    parts = [p for p in path.split("/") if p]
    for i in range(len(parts), -1, -1):
        d = os.path.join("/sys/fs/cgroup", *parts[:i])
        limit, used = _read_int(os.path.join(d, "memory.max")), _read_int(os.path.join(d, "memory.current"))
        if limit is not None and used is not None:
            left = limit - used
            best = left if best is None else min(best, left)
    return best


def room() -> tuple[int, str] | None:
    """The memory this process may still take, at most, and what sets it: the least of the
    address-space and data limits' room (``ulimit -v``, ``-d``), the cgroup's, and the
    machine's available memory and free swap (Linux). None where none can be read."""
    status = _status()
    found: list[tuple[int, str]] = []
    for lim, key, what in ((resource.RLIMIT_AS, "VmSize", "under the address-space limit (ulimit -v)"),
                           (resource.RLIMIT_DATA, "VmData", "under the data-size limit (ulimit -d)")):
        soft = resource.getrlimit(lim)[0]
        if soft != resource.RLIM_INFINITY and key in status:
            found.append((soft - status[key], what))
    cg = _cgroup_room()
    if cg is not None:
        found.append((cg, "under the cgroup's memory limit"))
    info = _meminfo()
    if "MemAvailable" in info:
        found.append((info["MemAvailable"] + info.get("SwapFree", 0), "available on this machine"))
    return min(found) if found else None


def _gb(n: int) -> str:
    if n < 1e9:
        return f"{n / 1e6:,.0f} MB"
    return f"{n / 1e9:,.1f} GB" if n < 1e15 else f"{n:.1e} bytes"


def check_room(need: int, what: str, source=None) -> None:
    """Raise the out-of-memory error when ``need`` bytes (a lower bound of this process's peak,
    what it holds now included) are more than it holds now and :func:`room` leaves; ``what``
    says what needs them. ``JITSIM_NO_MEMORY_CHECK=1`` turns the check off."""
    if os.environ.get("JITSIM_NO_MEMORY_CHECK", "") not in ("", "0"):
        return
    held = _current_rss()
    if need <= held:
        return
    r = room()
    if r is None or need - held <= r[0]:
        return
    left, where = r
    raise JitsimError(f"jitsim would run out of memory on this input: {what} needs {_gb(need)} or more, "
                      f"and jitsim can have {_gb(held + max(left, 0))} at most (what it holds, {_gb(held)}, and "
                      f"{_gb(max(left, 0))} more {where}); try a machine with more memory "
                      "(JITSIM_NO_MEMORY_CHECK=1 tries anyway)", source)


def _current_rss() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def check_inlining_room(graph, inline: bool = True) -> tuple[int, int]:
    """The TF-free route's check before it inlines ``graph``'s calls (``inline``: False, the graph
    as it is): its lower bound of memory for the inlined graph (:func:`inlined_size`) against
    what this process may have (:func:`check_room`). Returns the inlined size."""
    nodes, names = inlined_size(graph) if inline else (len(graph.nodes), sum(map(len, graph.nodes)))
    shape = f"{nodes:,} nodes" + (f" and {_gb(names)} of node names once every call is inlined"
                                  if names >= 10**8 else "")
    check_room(nodes * BYTES_PER_NODE + names * BYTES_PER_NAME_BYTE, f"the graph ({shape})", graph.source)
    return nodes, names
