"""TF 2.21's ``EncapsulateSubgraphsPass`` (POST_REWRITE_FOR_EXEC 50, tf-passes §14).

Every set of nodes sharing an ``_XlaCluster`` value becomes a library function named after
the cluster, and one call node (``name = op = <cluster>``) replaces them in a brand-new graph.
The steps, in TF's order:

1. **Split** (``SplitIntoSubgraphs``): cluster members are copied, in node-id order, into one
   subgraph per cluster (``_XlaCluster`` removed, ``_XlaAlreadyClustered`` kept). Edges are
   then walked in edge-id order: an edge inside a cluster is copied; a data edge leaving a
   cluster creates (first time per tensor) a ``_Retval`` ``<src>_<slot>_retval``; a control
   edge leaving it makes its source a *control output*; a data edge entering it creates
   (first time per tensor) an ``_Arg`` ``<src>_<slot>_arg``. ``_Arg`` whose source is computed
   only from ``GuaranteeConst`` get ``_is_guaranteed_constant``.
2. **Optimize** each subgraph like TF's ``OptimizeGraph`` (up to 10 rounds, until nothing
   changes): dead-node pruning, ``Identity`` removal, constant folding (numpy evaluation of
   the folded ops; new constants ``<node>/_<n>__cf__<m>`` on the CPU device; skipped with
   ``--tf_xla_disable_constant_folding`` and for ops with a ``DT_VARIANT`` output),
   source/sink fix-up, common-subexpression elimination, function inlining
   (:mod:`jitsim.rewrites.function_optimizer`; the numpy kernels: :mod:`jitsim.rewrites.folding`).
3. **Argument order**: ``BackwardsConstAnalysis`` on the optimized subgraph decides which
   args must be compile-time constants; args are stably permuted to *constants, normal
   args, resources* (``_XlaNumConstantArgs``, ``_XlaNumResourceArgs`` on the call node).
4. **FunctionDef** (``GraphToFunctionDef``): signature names are the ``_Arg``/``_Retval``
   names normalised (lower-case, non-alphanumerics to ``_``, leading non-letters dropped)
   and uniquified; ``ret`` values are ``node:output_arg:index``; ``control_ret`` holds the
   control outputs still present after optimisation (:mod:`jitsim.graph.function_def`).
5. **Output graph**: non-cluster nodes (node-id order), then the call nodes, then every edge
   not internal to one cluster (edge-id order), mapped onto call nodes and deduplicated.
6. ``_XlaHasReferenceVars`` on every node. TF writes its ``encapsulate_subgraphs_after`` dump
   just before this step: :meth:`EncapsulateResult.dump_graphdef` is that dump, while
   :attr:`EncapsulateResult.graph` is the pass's final graph (what BuildXlaOps gets).

``EncapsulateResult.decisions`` records, per cluster, every argument (source tensor, first-seen
index, final position, kind and why: the consumer chain that makes it a compile-time constant,
``DT_RESOURCE``, or neither), the results, control outputs and what the optimizer did
(identities removed, constants folded, CSE merges, dead nodes pruned).

What jitsim cannot know
-----------------------
* TF iterates its clusters in an ``absl::flat_hash_map`` whose order is seeded per process:
  the order of call nodes (their node ids) and of the functions in the library is not
  reproducible. jitsim uses the order of each cluster's first node; pass ``cluster_order``
  (e.g. :func:`call_order_from_graphdef` of TF's dump) to follow a recorded run.
* Constant folding executes TF kernels; jitsim evaluates a set of common ops with numpy
  (:data:`jitsim.rewrites.folding.kernels.KERNELS`). When a folding round needs another op,
  nothing is folded in that round (as TF does when evaluation fails) and the cluster's
  decision carries a warning.
* Edge ids come from the caller's :class:`TfGraph`; argument order depends on them (tf-passes
  trap 32). A graph loaded from a dump numbers its edges by destination node, but TF gave
  the edges of nodes created after graph construction (session feeds/fetches, constant
  clones, IncreaseDynamism's slices) the highest ids: :func:`tfgraph_from_dump` rebuilds
  that order (on the fixtures corpus it turns 7 mismatching graphs into exact ones).
* Constant folding needs a CPU kernel for the op; TF's CPU kernel registry snapshot is used
  when jitsim ships it (``devices.find_kernel``), else a kernel is assumed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterable

from jitsim.codes import Code
from jitsim.errors import GraphError
from jitsim.registry import protos
from jitsim.graph.function_def import arg_count, graph_to_function_def, merge_debug_info
from jitsim.graph.functions import function_to_graphdef
from jitsim.graph.model import CONTROL, Graph
from jitsim.rewrites.function_optimizer import FunctionOptimizer, add_node, fixup_source_and_sink
from jitsim.registry.optypes import DT_RESOURCE, NodeTypes, is_ref_type
from jitsim.graph.tfgraph import SINK_ID, SOURCE_ID, TfGraph, TfNode, dfs
from jitsim.registry import op_def
from jitsim.records import NodeDecision
from jitsim.graph.custom_ops import with_custom_op_signatures
from jitsim.defs import CLUSTER_ATTR, COMPILED_KERNEL_ATTR, HAS_REFERENCE_VARS_ATTR, IS_GUARANTEED_CONSTANT_ATTR, NUM_CONSTANT_ARGS_ATTR, NUM_RESOURCE_ARGS_ATTR
from jitsim.options import Options
from jitsim.opsets import PARTITIONED_CALL_OPS, TPU_EXECUTE_OPS

GUARANTEED_CONSTANT_ATTR = IS_GUARANTEED_CONSTANT_ATTR
MAX_REF_CALL_DEPTH = 10



# -- results ------------------------------------------------------------------------------


@dataclass(kw_only=True)
class ArgDecision(NodeDecision):
    """One function argument: where it comes from and why it sits where it does. A
    :class:`NodeDecision` whose code is the argument's kind (``arg``-kind codes:
    ``constant``, ``normal``, ``resource``) and whose detail says why."""

    index: int  # order of first appearance (edge-id order)
    position: int  # final position in the signature
    name: str  # signature name
    source: str  # "node:slot" in the input graph
    dtype: int
    guaranteed_constant: bool = False

    @property
    def kind(self) -> Code:
        return self.code

    @property
    def reason(self) -> str:
        return self.detail

    def to_json(self) -> dict:
        return {"index": self.index, "position": self.position, "name": self.name,
                "source": self.source, "dtype": protos.dtype_name(self.dtype), "kind": self.kind,
                "reason": self.reason, "guaranteed_constant": self.guaranteed_constant}


@dataclass
class ResultDecision:
    index: int
    name: str
    source: str
    dtype: int

    def to_json(self) -> dict:
        return {"index": self.index, "name": self.name, "source": self.source,
                "dtype": protos.dtype_name(self.dtype)}


@dataclass
class ClusterDecision:
    """Evidence for one encapsulated cluster."""

    name: str
    device: str
    members: list[str]
    args: list[ArgDecision] = field(default_factory=list)
    results: list[ResultDecision] = field(default_factory=list)
    control_outputs: list[str] = field(default_factory=list)
    num_constant_args: int = 0
    num_resource_args: int = 0
    optimizer: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"name": self.name, "device": self.device, "members": list(self.members),
                "args": [a.to_json() for a in self.args],
                "results": [r.to_json() for r in self.results],
                "control_outputs": list(self.control_outputs),
                "num_constant_args": self.num_constant_args,
                "num_resource_args": self.num_resource_args,
                "optimizer": self.optimizer, "warnings": list(self.warnings)}


@dataclass
class EncapsulateResult:
    graph: TfGraph  # the new graph, in its final state (with _XlaHasReferenceVars)
    functions: list  # FunctionDefs added to graph.library, in the order jitsim built them
    decisions: dict  # cluster name -> ClusterDecision
    _dump_patches: list = field(default_factory=list, repr=False)

    def dump_graphdef(self):
        """The GraphDef TF dumps as ``encapsulate_subgraphs_after``: the new graph before
        ``_XlaHasReferenceVars`` was added."""
        gd = self.graph.to_graphdef()
        if self._dump_patches:
            previous = dict(self._dump_patches)
            for nd in gd.node:
                if nd.name in previous:
                    old = previous[nd.name]
                    if old is None:
                        del nd.attr[HAS_REFERENCE_VARS_ATTR]
                    else:
                        nd.attr[HAS_REFERENCE_VARS_ATTR].CopyFrom(old)
        return gd


def call_order_from_graphdef(graphdef) -> list[str]:
    """Cluster names in the order TF created their call nodes, read from an
    ``encapsulate_subgraphs_after`` (or later) dump: pass it as ``cluster_order``."""
    return [n.name for n in graphdef.node if COMPILED_KERNEL_ATTR in n.attr and n.op == n.name]


# -- node helpers -------------------------------------------------------------------------


def _copy_nodedef(nd):
    out = protos.NodeDef()
    out.CopyFrom(nd)
    del out.input[:]
    return out


def _input_arg_name(nd, slot: int, types: NodeTypes) -> str:
    """The OpDef name of flat input ``slot`` (for evidence messages)."""
    od = op_def(nd.op)
    if od is None:
        return str(slot)
    pos = 0
    for arg in od.input_arg:
        n = arg_count(nd, od, arg)
        if pos <= slot < pos + n:
            return arg.name if n == 1 else f"{arg.name}[{slot - pos}]"
        pos += n
    return str(slot)


# -- the subgraph of one cluster ------------------------------------------------------------


class _Subgraph:
    def __init__(self, name: str, library, versions):
        self.name = name
        self.graph = TfGraph(library=library, versions=versions)
        self.graph.name_counter = 0  # Graph::NewName
        self.device = ""
        self.members: list[str] = []
        self.args_by_src: dict[tuple[int, int], int] = {}
        self.args_by_dst: dict[tuple[int, int], int] = {}
        self.args: list[TfNode] = []
        self.arg_sources: list[tuple[str, int]] = []
        self.results: dict[tuple[int, int], int] = {}
        self.result_nodes: list[TfNode] = []
        self.result_sources: list[tuple[str, int]] = []
        self.control_output_names: set[str] = set()
        self.call_nodedef = None
        self.decision: ClusterDecision | None = None

    def record_control_result(self, src_image: TfNode) -> None:
        """``RecordControlResult``: a control edge leaves the cluster from ``src_image``."""
        self.control_output_names.add(src_image.name)

    def record_result(self, src: TfNode, src_output: int, src_image: TfNode, types: NodeTypes) -> None:
        """``RecordResult``: a data edge leaves the cluster; the first time per tensor it gets
        a ``_Retval`` ``<src>_<slot>_retval``."""
        dtype = types.output_type(src.nodedef, src_output)
        if is_ref_type(dtype):
            raise GraphError("Ref Tensors (e.g., Variables) are not supported as results: "
                             f"tensor {src.name}:{src_output}")
        key = (src.id, src_output)
        if key in self.results:
            return
        index = len(self.results)
        self.results[key] = index
        rd = protos.NodeDef(name=f"{src.name}_{src_output}_retval", op="_Retval")
        rd.attr["T"].type = dtype
        rd.attr["index"].i = index
        merge_debug_info(src.nodedef, rd)
        ret = add_node(self.graph, rd)
        self.graph.add_edge(src_image.id, src_output, ret.id, 0)
        self.result_nodes.append(ret)
        self.result_sources.append((src.name, src_output))

    def record_arg(self, src: TfNode, src_output: int, dst: TfNode, dst_input: int, dst_image: TfNode,
                   types: NodeTypes, src_arg_pairs: list[tuple[int, TfNode]]) -> None:
        """``RecordArg``: a data edge enters the cluster; the first time per tensor it gets an
        ``_Arg`` ``<src>_<slot>_arg``, and every consumer reads that argument."""
        dtype = types.input_type(dst.nodedef, dst_input)
        if is_ref_type(dtype):
            raise GraphError("Ref Tensors (e.g., Variables) are not supported as args: "
                             f"tensor {src.name}:{src_output}")
        key = (src.id, src_output)
        index = self.args_by_src.get(key)
        if index is None:
            index = self.args_by_src[key] = len(self.args_by_src)
            ad = protos.NodeDef(name=f"{src.name}_{src_output}_arg", op="_Arg")
            ad.attr["T"].type = dtype
            ad.attr["index"].i = index
            if src.nodedef is not None:
                merge_debug_info(src.nodedef, ad)
            arg = add_node(self.graph, ad)
            src_arg_pairs.append((src.id, arg))
            self.args.append(arg)
            self.arg_sources.append((src.name, src_output))
        self.args_by_dst[(dst.id, dst_input)] = index
        self.graph.add_edge(self.args[index].id, 0, dst_image.id, dst_input)


# -- _XlaHasReferenceVars ---------------------------------------------------------------------


class _RefVars:
    """``GetNodesRelatedToRefVariables``: nodes forward- or backward-connected to a node with a
    ref-typed output or a callee (to depth 10) that has one; unknown callees count as yes."""

    def __init__(self, library, types: NodeTypes, bodies: dict[str, TfGraph] | None = None):
        self.library = library
        self.types = types
        self.fns = types.fns
        self.bodies = dict(bodies or {})  # function name -> its graph (given, or converted once)
        self._callee_cache: dict[tuple[str, bool, int], bool] = {}
        self._post_orders: dict[int, tuple] = {}  # id(graph) -> (graph, its op nodes in post order)
        self._node_targets: dict[TfNode, list[str]] = {}

    def related(self, g: TfGraph) -> set[int]:
        result: set[int] = set()
        self._direction(g, True, 0, result)
        self._direction(g, False, 0, result)
        return result

    def _targets(self, n: TfNode) -> list[str]:
        """The functions node ``n`` calls: its op, or the functions its attrs name (once per
        node: both directions ask)."""
        got = self._node_targets.get(n)
        if got is not None:
            return got
        if n.op in self.fns:
            out = [n.op]
        else:
            out = []
            attrs = n.nodedef.attr
            for key in sorted(attrs):  # (keys, not .items(): the Mapping mixin's view is slow)
                av = attrs[key]
                kind = av.WhichOneof("value")
                if kind == "func":
                    out.append(av.func.name)
                elif kind == "list":
                    out.extend(f.name for f in av.list.func)
        self._node_targets[n] = out
        return out

    def _body(self, name: str) -> TfGraph:
        body = self.bodies.get(name)
        if body is None:
            body = TfGraph.from_graph(Graph(function_to_graphdef(self.library, name, fns=self.fns, with_library=False),
                                            validate=False))
            body.library = self.library  # shared, not copied per body
            self.bodies[name] = body
        return body

    def _callee_has_refs(self, targets: list[str], forward: bool, depth: int) -> bool:
        if depth == MAX_REF_CALL_DEPTH and targets:
            return True
        for name in targets:
            od = op_def(name)
            if od is not None:
                if any(a.is_ref for a in od.output_arg):
                    return True
                continue
            if name not in self.fns:
                return True
            key = (name, forward, depth)
            if key not in self._callee_cache:
                self._callee_cache[key] = False

                try:
                    body = self._body(name)
                except GraphError:
                    self._callee_cache[key] = True
                else:
                    self._callee_cache[key] = self._body_has_refs(body, forward, depth + 1)
            if self._callee_cache[key]:
                return True
        return False

    def _body_has_refs(self, body: TfGraph, forward: bool, depth: int) -> bool:
        """Whether :meth:`_direction` finds any node of a callee's ``body``. Without a node
        that calls a function that is whether one (reached from ``_SOURCE``) has a ref output
        (forward) or never (backward): nothing else makes a node count. Otherwise the walk's
        first round (its callee look-ups fill the cache in TF's order, only for nodes the walk
        reaches)."""
        targets = self._targets
        if not any(targets(n) for n in body.op_nodes()):
            if not forward:
                return False
            outputs = self.types.outputs
            # (no ref output anywhere: none among the reached nodes either, no walk needed)
            if not any(is_ref_type(t) for n in body.op_nodes() for t in outputs(n.nodedef)):
                return False
            return any(is_ref_type(t) for n in self._op_post_order(body) for t in outputs(n.nodedef))
        found: set[int] = set()
        self._direction(body, forward, depth, found, first_round_only=True)
        return bool(found)

    def _op_post_order(self, g: TfGraph) -> list[TfNode]:
        """``g``'s op nodes in TF's post order with ``NodeComparatorName`` (once per graph)."""
        got = self._post_orders.get(id(g))
        if got is None or got[0] is not g:
            nodes = g.nodes
            names = [n.name if n is not None else "" for n in nodes]
            visited = bytearray(len(nodes))
            out: list[TfNode] = []
            stack: list[tuple[int, bool]] = [(SOURCE_ID, False)]
            while stack:
                nid, is_leave = stack.pop()
                if is_leave:
                    if nid > SINK_ID:
                        out.append(nodes[nid])
                    continue
                if visited[nid]:
                    continue
                visited[nid] = 1
                stack.append((nid, True))
                nbrs = [e.dst for e in nodes[nid].out_edges.values()]
                if len(nbrs) > 1:
                    nbrs.sort(key=names.__getitem__)
                for m in nbrs:
                    if not visited[m]:
                        stack.append((m, False))
            got = self._post_orders[id(g)] = (g, out)
        return got[1]

    def _direction(self, g: TfGraph, forward: bool, depth: int, result: set[int], *,
                   first_round_only: bool = False) -> None:
        """Add to ``result`` the nodes of ``g`` related to ref variables in one direction (a
        fixpoint). ``first_round_only``: only whether ``result`` ends up empty matters; that is
        settled in the first round (a node joins later only through one that joined before),
        and so are the callee look-ups (later rounds read each node's answer from the cache)."""
        types = self.types
        cache: dict[int, bool] = {}
        # TF's order (the fixpoint does not depend on it, the iteration count does): the
        # reverse post order forward, the post order backward; one DFS serves both directions
        order = self._op_post_order(g)
        nodes = order[::-1] if forward else order
        while True:
            before = len(result)
            for n in nodes:
                hit = False
                edges = n.in_edges.values() if forward else n.out_edges.values()
                for e in edges:
                    if (e.src if forward else e.dst) in result:
                        hit = True
                        break
                if hit:
                    result.add(n.id)
                    continue
                # the node's own answer (a ref output, or a callee with refs) is worked out once,
                # not again in each round of the fixpoint
                own = cache.get(n.id)
                if own is None:
                    targets = self._targets(n)
                    own = cache[n.id] = bool(
                        (forward and any(is_ref_type(t) for t in types.outputs(n.nodedef)))
                        or (targets and self._callee_has_refs(targets, forward, depth)))
                if own:
                    result.add(n.id)
            if len(result) == before or first_round_only:
                return


def nodes_related_to_ref_variables(g: TfGraph) -> set[int]:
    """Ids of the nodes of ``g`` TF's ``GetNodesRelatedToRefVariables`` returns (the ones that
    get ``_XlaHasReferenceVars=true``)."""
    return _RefVars(g.library, NodeTypes(g.library)).related(g)


# -- const-argument evidence -------------------------------------------------------------------


def _const_reason(sg: TfGraph, arg: TfNode, must: bytearray, analysis, types: NodeTypes) -> str:
    """A consumer chain showing why ``arg`` must be a compile-time constant."""
    from jitsim.analyses.const_analysis import traversable

    nodes = sg.nodes
    seen = {arg.id}
    queue = deque([(arg.id, [])])
    while queue:
        nid, path = queue.popleft()
        for e in sorted(nodes[nid].out_edges.values(), key=lambda e: e.id):
            if e.is_control:
                continue
            c = nodes[e.dst]
            if not c.is_op or c.nodedef is None:
                continue
            try:
                idxs = analysis.const_input_indices(c)
            except Exception:  # pragma: no cover - analysis of odd nodes
                idxs = []
            if e.dst_input in idxs:
                via = f"via {' -> '.join(path)}: " if path else ""
                return (f"{via}input {e.dst_input} ({_input_arg_name(c.nodedef, e.dst_input, types)}) "
                        f"of {c.op} '{c.name}' must be a compile-time constant")
            if (must[c.id] or traversable(c.op)) and c.id not in seen:
                seen.add(c.id)
                queue.append((c.id, path + [f"{c.op} '{c.name}'"]))
    return "needed as a compile-time constant by the cluster (BackwardsConstAnalysis)"


# -- the pass ------------------------------------------------------------------------------------


class _Encapsulator:
    """TF's ``Encapsulator``: the input graph, its clusters' subgraphs, and one method per
    phase of the pass (split, build the functions, build the output graph)."""

    def __init__(self, g: TfGraph, group_attribute: str):
        self.g = g
        self.group_attribute = group_attribute
        self.library = protos.FunctionDefLibrary()
        self.library.CopyFrom(g.library)
        self.types = NodeTypes(self.library)
        self.cluster_of: list[str] = [""] * g.num_node_ids  # node id -> its cluster ("" = none)
        self.subgraphs: dict[str, _Subgraph] = {}
        self.images: dict[int, TfNode] = {}  # input node id -> its copy in its cluster's subgraph
        self.order: list[str] = []

    # -- SplitIntoSubgraphs
    def split_into_subgraphs(self) -> None:
        """Copy each cluster's nodes, then its edges, into one subgraph per cluster."""
        self.copy_subgraph_nodes()
        src_arg_pairs = self.copy_subgraph_edges()
        _mark_guaranteed_constants(self.g, src_arg_pairs)
        for sub in self.subgraphs.values():
            fixup_source_and_sink(sub.graph)

    def copy_subgraph_nodes(self) -> None:
        """``CopySubgraphNodes``: cluster members, in node-id order, without the group attribute."""
        attr = self.group_attribute
        for n in self.g.op_nodes():
            attrs = n.nodedef.attr
            if attr not in attrs:
                continue
            av = attrs[attr]
            if av.WhichOneof("value") != "s":
                raise GraphError(f"attr {attr} of node {n.name!r} is not a string")
            name = av.s.decode()
            if not name:
                continue
            self.cluster_of[n.id] = name
            sub = self.subgraphs.get(name)
            if sub is None:
                sub = self.subgraphs[name] = _Subgraph(name, self.library, self.g.versions)
            if not sub.device:
                sub.device = n.device
            nd = _copy_nodedef(n.nodedef)
            del nd.attr[attr]
            self.images[n.id] = add_node(sub.graph, nd)
            sub.members.append(n.name)

    def copy_subgraph_edges(self) -> list[tuple[int, TfNode]]:
        """``CopySubgraphEdges``: in edge-id order, an edge inside a cluster is copied, one
        leaving a cluster records a result (or a control output), one entering records an
        argument. Returns the (source node id, ``_Arg``) pairs."""
        src_arg_pairs: list[tuple[int, TfNode]] = []
        nodes, images, cluster_of = self.g.nodes, self.images, self.cluster_of
        for e in self.g.edges():
            src_c, dst_c = cluster_of[e.src], cluster_of[e.dst]
            if src_c and src_c == dst_c:
                sg = self.subgraphs[src_c].graph
                if e.is_control:
                    sg.add_control_edge(images[e.src].id, images[e.dst].id)
                else:
                    sg.add_edge(images[e.src].id, e.src_output, images[e.dst].id, e.dst_input)
                continue
            if src_c:
                if e.is_control:
                    self.subgraphs[src_c].record_control_result(images[e.src])
                else:
                    self.subgraphs[src_c].record_result(nodes[e.src], e.src_output, images[e.src], self.types)
            if dst_c and not e.is_control:
                self.subgraphs[dst_c].record_arg(nodes[e.src], e.src_output, nodes[e.dst], e.dst_input,
                                                 images[e.dst], self.types, src_arg_pairs)
        return src_arg_pairs

    def iteration_order(self, cluster_order: Iterable[str] | None) -> None:
        """The order TF iterates its clusters in (see the module docstring): the named ones
        first, then the rest in jitsim's order."""
        order = []
        for name in cluster_order or ():
            if name in self.subgraphs and name not in order:
                order.append(name)
        self.order = order + [name for name in self.subgraphs if name not in order]

    # -- BuildFunctionDefs
    def build_function_defs(self, flags, xla_rewrite: bool) -> tuple[list, dict[str, ClusterDecision]]:
        """One FunctionDef per cluster, added to the library (with the rewrite callback:
        optimized, arguments permuted; without: as split)."""
        from jitsim.analyses.const_analysis import ConstAnalysis

        analysis = ConstAnalysis(self.library)
        functions = []
        decisions: dict[str, ClusterDecision] = {}
        for name in self.order:
            sub = self.subgraphs[name]
            fdef = (_build_function(sub, self.types, flags, analysis) if xla_rewrite
                    else _plain_function(sub, self.types))
            self.library.function.add().CopyFrom(fdef)
            functions.append(fdef)
            decisions[name] = sub.decision
        return functions, decisions

    # -- BuildOutputGraph
    def build_output_graph(self) -> TfGraph:
        """A new graph: the nodes outside every cluster, one call node per cluster, the edges
        between them."""
        out = TfGraph(library=self.library, versions=self.g.versions)
        image_out = self.copy_nodes_to_output_graph(out)
        call_ids = self.add_function_call_nodes(out)
        self.add_edges_to_output_graph(out, image_out, call_ids)
        _sync_inputs(out)
        return out

    def copy_nodes_to_output_graph(self, out: TfGraph) -> dict[int, int]:
        """``CopyNodesToOutputGraph``: non-cluster nodes in node-id order; input id -> output id."""
        image_out: dict[int, int] = {SOURCE_ID: SOURCE_ID, SINK_ID: SINK_ID}
        for n in self.g.op_nodes():
            if not self.cluster_of[n.id]:
                image_out[n.id] = add_node(out, _copy_nodedef(n.nodedef)).id
        return image_out

    def add_function_call_nodes(self, out: TfGraph) -> dict[str, int]:
        """``AddFunctionCallNodes``: one call node per cluster, in iteration order."""
        return {name: add_node(out, self.subgraphs[name].call_nodedef).id for name in self.order}

    def add_edges_to_output_graph(self, out: TfGraph, image_out: dict[int, int], call_ids: dict[str, int]) -> None:
        """``AddEdgesToOutputGraph``: every edge not internal to one cluster, in edge-id order,
        mapped onto the call nodes (a result's or an argument's index) and deduplicated."""
        cluster_of, subgraphs = self.cluster_of, self.subgraphs
        added: set[tuple[int, int, int, int]] = set()
        for e in self.g.edges():
            src_c, dst_c = cluster_of[e.src], cluster_of[e.dst]
            if src_c and src_c == dst_c:
                continue
            s = call_ids[src_c] if src_c else image_out[e.src]
            d = call_ids[dst_c] if dst_c else image_out[e.dst]
            if e.is_control:
                key = (s, CONTROL, d, CONTROL)
                if key not in added:
                    added.add(key)
                    out.add_control_edge(s, d)
                continue
            so = subgraphs[src_c].results[(e.src, e.src_output)] if src_c else e.src_output
            di = subgraphs[dst_c].args_by_dst[(e.dst, e.dst_input)] if dst_c else e.dst_input
            key = (s, so, d, di)
            if key not in added:
                added.add(key)
                out.add_edge(s, so, d, di)

    # -- the pass's last step
    def add_has_reference_vars(self, out: TfGraph) -> list:
        """``_XlaHasReferenceVars`` on every node of ``out`` (after TF's
        encapsulate_subgraphs_after dump; the library now has the cluster functions, whose
        bodies are the optimized subgraphs). Returns what each node had before (the dump's)."""
        related = _RefVars(self.library, NodeTypes(self.library),
                           {name: sub.graph for name, sub in self.subgraphs.items()}).related(out)
        patches = []
        for n in out.op_nodes():
            old = None
            if HAS_REFERENCE_VARS_ATTR in n.attr:
                old = protos.AttrValue()
                old.CopyFrom(n.attr[HAS_REFERENCE_VARS_ATTR])
            patches.append((n.name, old))
            n.attr[HAS_REFERENCE_VARS_ATTR].b = n.id in related
        return patches


@with_custom_op_signatures
def encapsulate_subgraphs(g: TfGraph, options: Options | None = None, *, cluster_order: Iterable[str] | None = None,
                          group_attribute: str = CLUSTER_ATTR, xla_rewrite: bool = True) -> EncapsulateResult:
    """Run TF's ``EncapsulateSubgraphsPass`` on ``g`` (not modified) and return the new graph.

    ``options``: the run's :class:`~jitsim.options.Options` (of its flags only
    ``disable_constant_folding`` matters; None: TF's defaults). ``cluster_order``: the order in which TF iterated
    its clusters (see the module docstring); clusters not named come after, in jitsim's order.

    ``group_attribute`` / ``xla_rewrite=False``: TF's general ``EncapsulateSubgraphsInFunctions``
    as its own tests call it: nodes grouped by another attribute, and no rewrite callback (no
    optimization, arguments kept in first-seen order, a plain call node without the
    ``_Xla*`` attributes) and no ``_XlaHasReferenceVars`` step (that is the pass's, not the
    function's).
    """
    flags = options.flags if options is not None else None
    if any(n.op in TPU_EXECUTE_OPS for n in g.op_nodes()):
        return EncapsulateResult(graph=g, functions=[], decisions={})
    enc = _Encapsulator(g, group_attribute)
    enc.split_into_subgraphs()
    enc.iteration_order(cluster_order)
    functions, decisions = enc.build_function_defs(flags, xla_rewrite)
    out = enc.build_output_graph()
    if not xla_rewrite:
        return EncapsulateResult(graph=out, functions=functions, decisions=decisions)
    patches = enc.add_has_reference_vars(out)
    return EncapsulateResult(graph=out, functions=functions, decisions=decisions, _dump_patches=patches)


def _sync_inputs(g: TfGraph) -> None:
    """Rewrite every NodeDef's ``input`` list from the edges (as ``ToGraphDef`` writes it), so
    that readers of ``nodedef.input`` see the new graph."""
    nodes = g.nodes
    for n in g.op_nodes():
        data, ctrl = {}, []
        for e in n.in_edges.values():
            src = nodes[e.src]
            if e.is_control:
                if src.is_op:
                    ctrl.append(src.name)
            else:
                data[e.dst_input] = src.name if e.src_output == 0 else f"{src.name}:{e.src_output}"
        del n.nodedef.input[:]
        n.nodedef.input.extend(data[i] for i in sorted(data))
        n.nodedef.input.extend("^" + c for c in sorted(ctrl))


def _mark_guaranteed_constants(g: TfGraph, src_arg_pairs: list[tuple[int, TfNode]]) -> None:
    if not src_arg_pairs or not any(n.op == "GuaranteeConst" for n in g.op_nodes()):
        return  # nothing can be marked without a GuaranteeConst node
    nodes = g.nodes
    marked: set[int] = set()

    def leave(n: TfNode) -> None:
        if n.op == "GuaranteeConst":
            marked.add(n.id)
            return
        data = [e for e in n.in_edges.values() if not e.is_control]
        if data and all(e.src in marked for e in data):
            marked.add(n.id)

    dfs(g, None, leave, start=[s for s, _ in src_arg_pairs], reverse=True)
    for src, arg in src_arg_pairs:
        if src in marked and nodes[src] is not None:
            arg.attr[GUARANTEED_CONSTANT_ATTR].b = True


def _plain_function(sub: _Subgraph, types: NodeTypes):
    """BuildFunctionDef without a rewrite callback: the subgraph as split, a call node
    ``name = op = <group>`` with no attributes."""
    sub.decision = ClusterDecision(name=sub.name, device=sub.device, members=list(sub.members))
    sub.call_nodedef = protos.NodeDef(name=sub.name, op=sub.name, device=sub.device)
    fdef, names = graph_to_function_def(sub.graph, sub.name, sub.control_output_names, types)
    for i, arg in enumerate(sub.args):
        src, slot = sub.arg_sources[i]
        sub.decision.args.append(ArgDecision(
            Code.ARG_NORMAL, "no rewrite: arguments in first-seen order",
            index=i, position=i, name=names.get(arg.name, arg.name), source=f"{src}:{slot}",
            dtype=arg.attr["T"].type, guaranteed_constant=GUARANTEED_CONSTANT_ATTR in arg.attr))
    sub.decision.control_outputs = sorted(fdef.control_ret.keys())
    return fdef


def _build_function(sub: _Subgraph, types: NodeTypes, flags, analysis):
    sg = sub.graph
    call = protos.NodeDef(name=sub.name, op=sub.name, device=sub.device)
    decision = ClusterDecision(name=sub.name, device=sub.device, members=list(sub.members))
    sub.decision = decision

    # the rewrite callback: optimize, const analysis, permutation
    FunctionOptimizer(sg, types, flags, decision.optimizer, decision.warnings).run()
    num_args = len(sub.args)
    const_args = [False] * num_args
    must = analysis.run(sg, const_args)
    arg_types = [0] * num_args
    for n in sg.op_nodes():
        if n.op == "_Arg":
            index = n.attr["index"].i
            if not 0 <= index < num_args:
                raise GraphError(f"cluster {sub.name}: invalid argument number {index}")
            arg_types[index] = n.attr["T"].type
    num_consts = sum(const_args)
    num_resources = sum(1 for t in arg_types if t == DT_RESOURCE)
    num_normal = num_args - num_resources - num_consts
    if num_normal < 0:
        raise GraphError(f"cluster {sub.name}: num_nonconsts should be >= 0, was {num_normal}")
    perm = [0] * num_args
    const_pos, arg_pos, res_pos = 0, num_consts, num_consts + num_normal
    kinds = []
    for i in range(num_args):
        if const_args[i]:
            if arg_types[i] == DT_RESOURCE:
                raise GraphError(f"cluster {sub.name}: Resource arguments cannot be constant "
                                 f"(argument {i})")
            perm[i], const_pos, kind = const_pos, const_pos + 1, Code.ARG_CONSTANT
        elif arg_types[i] == DT_RESOURCE:
            perm[i], res_pos, kind = res_pos, res_pos + 1, Code.ARG_RESOURCE
        else:
            perm[i], arg_pos, kind = arg_pos, arg_pos + 1, Code.ARG_NORMAL
        kinds.append(kind)
    for n in sg.op_nodes():
        if n.op == "_Arg":
            n.attr["index"].i = perm[n.attr["index"].i]
    call.attr[COMPILED_KERNEL_ATTR].b = True
    call.attr[NUM_CONSTANT_ARGS_ATTR].i = num_consts
    call.attr[NUM_RESOURCE_ARGS_ATTR].i = num_resources
    for key in sub.args_by_src:
        sub.args_by_src[key] = perm[sub.args_by_src[key]]
    for key in sub.args_by_dst:
        sub.args_by_dst[key] = perm[sub.args_by_dst[key]]
    sub.call_nodedef = call
    decision.num_constant_args = num_consts
    decision.num_resource_args = num_resources

    fdef, names = graph_to_function_def(sg, sub.name, sub.control_output_names, types)

    # evidence
    arg_names = {n.attr["index"].i: names.get(n.name, n.name) for n in sg.op_nodes() if n.op == "_Arg"}
    for i, arg in enumerate(sub.args):
        src, slot = sub.arg_sources[i]
        kind = kinds[i]
        if kind == Code.ARG_CONSTANT:
            reason = (_const_reason(sg, arg, must, analysis, types) if arg.id < len(sg.nodes)
                      and sg.nodes[arg.id] is not None else "compile-time constant")
        elif kind == Code.ARG_RESOURCE:
            reason = "DT_RESOURCE argument: resource args go last"
        else:
            reason = "not needed at compile time"
        decision.args.append(ArgDecision(
            kind, reason, index=i, position=perm[i], name=arg_names.get(perm[i], arg.name), source=f"{src}:{slot}",
            dtype=arg_types[i], guaranteed_constant=GUARANTEED_CONSTANT_ATTR in arg.attr))
    decision.args.sort(key=lambda a: a.position)
    for i, ret in enumerate(sub.result_nodes):
        src, slot = sub.result_sources[i]
        decision.results.append(ResultDecision(index=i, name=names.get(ret.name, ret.name),
                                               source=f"{src}:{slot}", dtype=ret.attr["T"].type))
    decision.control_outputs = sorted(fdef.control_ret.keys())
    return fdef
