"""Placement of the nodes TF's placer would place, for graphs given without devices.

TF places every node of a function graph before Grappler and the clustering passes run
(``common_runtime/placer.cc``, after PRE_PLACEMENT). jitsim does not simulate the placer's
colocation groups; it places each node that has no device:

* ``device="cpu"``: on ``/job:localhost/replica:0/task:0/device:CPU:0``;
* ``device="gpu"``: on ``.../device:GPU:0`` when TF 2.21 registers a GPU kernel for the node's
  op and attributes (jitsim's shipped kernel table, as partially-decluster uses it), else on
  the CPU (what the placer's soft placement does for an op with CPU kernels only).

Nodes that already have a device keep it (a partial name such as ``/device:GPU:0`` is
completed to the full local name).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jitsim.defs import DEVICES, LOCAL_DEVICE_PREFIX
from jitsim.errors import JitsimError
from jitsim.graph.device_names import device_type, parse_device_name
from jitsim.graph.model import Graph
from jitsim.registry import protos
from jitsim.registry.kernels import find_kernel
from jitsim.opsets import FUNCTION_IO_OPS



@dataclass
class PlacementResult:
    graph: Graph | None  # the graph placed (prepare_without_tf drops it once it has read it: issue 39)
    placed: dict[str, int] = field(default_factory=dict)  # device -> nodes placed there
    completed: int = 0  # partial device names completed
    cpu_fallback: list[str] = field(default_factory=list)  # GPU requested, no GPU kernel


def _complete(name: str) -> str | None:
    p = parse_device_name(name)
    if p is None or p.type is None:
        return None
    return f"/job:{p.job or 'localhost'}/replica:{p.replica or 0}/task:{p.task or 0}/device:{p.type}:{p.id or 0}"


def place(graph: Graph, device: str = "cpu") -> PlacementResult:
    """Give every node without a device one (see the module docstring); edits ``graph`` in place."""
    target = DEVICES.get(device.lower(), device)
    want_gpu = "GPU" in target.upper()
    res = PlacementResult(graph)
    for n in graph:
        nd = n.nodedef
        if nd.device:
            full = _complete(nd.device)
            if full and full != nd.device:
                nd.device = full
                res.completed += 1
            continue
        dev = target
        if want_gpu and nd.op not in FUNCTION_IO_OPS and find_kernel(nd, "GPU") is None:
            dev = DEVICES["cpu"]
            res.cpu_fallback.append(nd.name)
        nd.device = dev
        res.placed[dev] = res.placed.get(dev, 0) + 1
    return res


def replace_devices(graph, target: str):
    """A copy of ``graph`` re-placed for a what-if on another device type (``cpu``/``gpu``):
    every node whose op has a kernel of that type for its attrs moves to device 0 of that
    type; the others keep their device (or get the CPU). Approximates TF's placer (which
    also colocates resource ops with their variables and honours soft placement)."""
    kind = {"cpu": "CPU", "gpu": "GPU"}.get(target.lower())
    if kind is None:
        raise JitsimError(f"cannot re-place a graph on {target!r}: give cpu or gpu")
    gd = protos.GraphDef()
    gd.ParseFromString(graph.graphdef.SerializeToString())
    name = f"{LOCAL_DEVICE_PREFIX}{kind}:0"
    cpu = DEVICES["cpu"]
    for n in gd.node:
        if n.op in ("_Arg", "_Retval", "Placeholder", "NoOp") or find_kernel(n, kind) is not None:
            n.device = name
        elif not n.device or device_type(n.device) not in ("CPU", kind):
            n.device = cpu
    return Graph(gd, source=graph.source, validate=False)
