"""The scripts a TF process runs: one per kind of target, each defining ``_step()``, *the call*.

Every script is the bootstrap (:data:`BOOTSTRAP`: the sandbox preamble, then the runner or the
user's program as ``__main__``) running a runner made of :data:`PRELUDE` (generated inputs, the
call marker, op libraries, the dry run) and one body of :data:`RUNNERS`. A harvest appends
:data:`CALL_ONCE`; ``jitsim profile`` appends its timed step loop instead.

**The dry run** (``JITSIM_DRY_RUN=1``, what a capture asks for): TensorFlow builds the graph of
the call, runs Grappler and its graph passes and writes the dumps, but executes none of the
model's ops. Where TF executes a call is where the dry run stops it:

* a session call (a GraphDef, a MetaGraphDef): ``Session.make_callable`` instead of
  ``Session.run``. DirectSession builds the call's graph, runs Grappler and the optimization
  passes (the dumps) and creates the executors; nothing runs. The session is made with the
  classic graph optimizer at ``L0`` and its constant folding off: that folding runs after the
  passes, as executors are made, and executes foldable ops (a ``ReadFile`` of a constant path).
  Grappler's own folding, before the passes, is untouched (the dumps are byte for byte a normal
  run's);
* a function call (a SavedModel signature, a ``.keras`` model's call, a function bundle, an
  exported function): made under a cancellation manager cancelled beforehand. The eager runtime
  instantiates the function (Grappler, lowering, the passes, the dumps), then the function
  runtime refuses to start it ("cancelled before it was started"); its executors are made lazily
  on the first run, so no constant folding executes anything either;
* loading a SavedModel or ``.keras`` file runs functions of the model (a resource's creator and
  initializer, a restore): :class:`_LoadGate` lets a function run only when every op in it stays
  inside the process (:data:`IN_PROCESS_STATEFUL`, no op of :data:`OUTSIDE_OPS`); any other is
  built and cancelled like the call (scalar stand-ins for its outputs, which the loader ignores);
  one that would have to return a resource is refused (``JITSIM_REFUSED``), and jitsim predicts
  without TF.

A program (``.py``) is code: it runs, in the sandbox of :mod:`jitsim.tfprocess.sandbox`.
"""

from __future__ import annotations

import textwrap

from jitsim.tfprocess.sandbox import PREAMBLE

VERSION_MARK = "JITSIM_TF_VERSION="
CALL_MARK = "JITSIM_CALL_BEGIN"
NOTE_MARK = "JITSIM_NOTE: "
REFUSED_MARK = "JITSIM_REFUSED: "
# "The call" of a .keras file reports the inputs it used (KERAS_CALL_MARK, JSON) and a stated
# shape the model cannot take (INPUT_ERROR_MARK: a user's error, said as it is).
KERAS_CALL_MARK = "JITSIM_KERAS_CALL: "
INPUT_ERROR_MARK = "JITSIM_INPUT_ERROR: "

# Runs the runner or the user's program as __main__ (after the sandbox preamble) and reports,
# at exit, the TF version it used, every op the process registered (op libraries included,
# JITSIM_OP_DEFS_OUT) and the files of the program's own modules and of what it opened
# (JITSIM_DEPS_OUT: what a program's capture depends on beyond its own file).
BOOTSTRAP = PREAMBLE + textwrap.dedent(
    """
    import atexit, os, runpy, sys
    _opened = set()
    if os.environ.get("JITSIM_DEPS_OUT"):
        def _audit(event, args):
            if event == "open" and isinstance(args[0], (str, bytes)) and (args[1] in (None, "r", "rb", "rt")
                                                                         or (isinstance(args[2], int) and not args[2] & 3)):
                _opened.add(os.fsdecode(args[0]))
        sys.addaudithook(_audit)
    def _report():
        tf = sys.modules.get("tensorflow")
        print("%s" + (getattr(tf, "__version__", "") if tf else ""), file=sys.stderr, flush=True)
        out = os.environ.get("JITSIM_OP_DEFS_OUT")
        if tf is not None and out:  # every op this process registered (op libraries included)
            try:
                from tensorflow.python.client import pywrap_tf_session as c
                with open(out, "wb") as f:
                    f.write(c.TF_GetBuffer(c.TF_GetAllOpList()))
            except Exception:
                pass
        deps = os.environ.get("JITSIM_DEPS_OUT")
        if deps:
            import json, sysconfig
            skip = tuple({os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                          *filter(None, (sysconfig.get_paths().get(k) for k in ("purelib", "platlib", "stdlib"))))})
            files = {getattr(m, "__file__", None) for m in list(sys.modules.values())} | _opened
            keep = set()
            for f in files:
                if not f:
                    continue
                p = os.path.realpath(f)
                if os.path.isfile(p) and not p.startswith(skip) and "site-packages" not in p \
                        and not p.startswith(("/proc/", "/sys/", "/dev/")):  # kernel files: never inputs
                    keep.add(p)
            with open(deps, "w") as fh:
                json.dump(sorted(keep), fh)
    atexit.register(_report)
    prog = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, os.path.dirname(prog))
    runpy.run_path(prog, run_name="__main__")
    """
    % VERSION_MARK
)

# Ops that leave the process (files, other machines) though TF does not call them stateful, and
# stateful ops whose state is this process's own: what a function may hold to run while a model
# loads in a dry run (every other stateful op, and every op TF does not know, is refused).
OUTSIDE_OPS = frozenset({
    "ReadFile", "MatchingFiles", "ImmutableConst", "DecodeProtoV2", "EncodeProto", "InitializeTableFromTextFile",
    "DebugIdentity", "DebugIdentityV2", "DebugIdentityV3", "DebugNanCount", "DebugNumericSummary",
    "DebugNumericSummaryV2", "ShardedFilename", "ShardedFilespec",
})
IN_PROCESS_STATEFUL = frozenset({
    "VarHandleOp", "_VarHandlesOp", "ReadVariableOp", "_ReadVariablesOp", "AssignVariableOp", "AssignAddVariableOp",
    "AssignSubVariableOp", "VarIsInitializedOp", "DestroyResourceOp", "ResourceGather", "VariableShape",
    "HashTable", "HashTableV2", "MutableHashTable", "MutableHashTableV2", "MutableHashTableOfTensors",
    "MutableHashTableOfTensorsV2", "MutableDenseHashTable", "MutableDenseHashTableV2", "AnonymousHashTable",
    "AnonymousMutableHashTable", "AnonymousMutableHashTableOfTensors", "AnonymousMutableDenseHashTable",
    "LookupTableFind", "LookupTableFindV2", "LookupTableInsert", "LookupTableInsertV2", "LookupTableImport",
    "LookupTableImportV2", "LookupTableExport", "LookupTableExportV2", "LookupTableSize", "LookupTableSizeV2",
    "LookupTableRemoveV2", "InitializeTable", "InitializeTableV2", "NoOp", "PartitionedCall",
    "StatefulPartitionedCall", "RandomUniform", "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal",
    "RandomShuffle", "Multinomial", "StatefulUniform", "StatefulUniformInt", "StatefulStandardNormalV2",
    "StatefulTruncatedNormal", "StatefulUniformFullInt", "RngSkip", "RngReadAndSkip", "Assert",
    "VariableV2", "Variable", "Assign", "AssignAdd", "AssignSub", "TemporaryVariable", "DestroyTemporaryVariable",
    "IsVariableInitialized", "While", "If", "Case", "StatelessWhile", "StatelessIf", "StatelessCase",
})

# Shared by every runner: generated inputs (seeded: floats N(0,1), ints in {0,1}, bools,
# b"jitsim" strings; unknown dims = 2), the call marker, the imports of op libraries the target
# needs (tensorflow_text's ops are not in TF core) named in JITSIM_RUNNER_IMPORTS, and the dry
# run (the module docstring): its configuration, _cancelled(), _LoadGate and _run_call().
PRELUDE = textwrap.dedent(
    """
    import os, importlib, sys
    import numpy as np
    import tensorflow as tf
    if "JITSIM_USER_TF_XLA_FLAGS" in os.environ:
        # TF parses its jit flags once, now, from the capture's TF_XLA_FLAGS (fuel 0, the dumps);
        # Grappler's remapper reads the raw variable at every run: it gets the user's own, as in
        # their process (it skips CPU fusions on a --tf_xla_cpu_global_jit token, split by release)
        from tensorflow.python import pywrap_tfe as _pywrap_tfe
        _pywrap_tfe.TF_GetXlaConstantFoldingDisabled()
        os.environ["TF_XLA_FLAGS"] = os.environ.pop("JITSIM_USER_TF_XLA_FLAGS")
    _DRY = os.environ.get("JITSIM_DRY_RUN") == "1"
    _DRY_CONFIG = None
    if _DRY:  # set before anything starts the eager context: its function runtime folds nothing
        from tensorflow.core.protobuf import config_pb2 as _config_pb2
        from tensorflow.python.eager import context as _context
        _DRY_CONFIG = _config_pb2.ConfigProto()
        _DRY_CONFIG.graph_options.optimizer_options.opt_level = _config_pb2.OptimizerOptions.L0
        _DRY_CONFIG.graph_options.optimizer_options.do_constant_folding = False
        _context.context()._config = _DRY_CONFIG
    for _m in filter(None, os.environ.get("JITSIM_RUNNER_IMPORTS", "").split(",")):
        importlib.import_module(_m)
    _rng = np.random.default_rng(0)
    def _gen(dtype, shape):
        shape = [2 if d is None or d < 0 else d for d in shape]
        dtype = tf.as_dtype(dtype)
        if dtype == tf.string:
            return np.full(shape, b"jitsim", dtype=object)
        if dtype == tf.bool:
            return _rng.random(shape) < 0.5
        if dtype.is_integer:
            return _rng.integers(0, 2, size=shape).astype(dtype.as_numpy_dtype)
        if dtype.is_complex:
            return (_rng.standard_normal(shape) + 1j * _rng.standard_normal(shape)).astype(dtype.as_numpy_dtype)
        return _rng.standard_normal(shape).astype(dtype.as_numpy_dtype)
    def _mark_call():
        sys.stdout.flush()
        print("%(call)s", file=sys.stderr, flush=True)
    def _note(text):
        print("%(note)s" + " ".join(str(text).split()), file=sys.stderr, flush=True)
    def _cancelled(run):
        # run() with every function call it makes cancelled before the function starts: TF
        # instantiates the function (its graph passes write the dumps) and runs none of it
        from tensorflow.python.eager import cancellation
        cm = cancellation.CancellationManager()
        cm.start_cancel()
        try:
            with cancellation.CancellationManagerContext(cm):
                run()
        except tf.errors.CancelledError:
            return True
        return False
    _OUTSIDE = frozenset(%(outside)r)
    _IN_PROCESS = frozenset(%(inside)r)
    def _outside_ops(ctx, name, seen):
        # the ops of function `name` (and of the functions it calls) that may reach outside the process
        if name in seen:
            return set()
        seen.add(name)
        from tensorflow.python.framework import op_def_registry
        try:
            fdef = ctx.get_function_def(name)
        except Exception:
            return {"the function %%s, not registered" %% name}
        bad = set()
        for nd in fdef.node_def:
            subs = [v.func.name for v in nd.attr.values() if v.func.name]
            subs += [f.name for v in nd.attr.values() for f in v.list.func]
            if ctx.has_function(nd.op):
                subs.append(nd.op)
            else:
                od = op_def_registry.get(nd.op)
                if od is None or nd.op in _OUTSIDE or (od.is_stateful and nd.op not in _IN_PROCESS):
                    bad.add(nd.op)
            for s in subs:
                bad |= _outside_ops(ctx, s, seen)
        return bad
    class _LoadGate:
        # While a model loads, its own functions run through Context.call_function. In a dry run a
        # function whose ops all stay in this process runs; any other is built and cancelled (its
        # graph passes run, none of it does): without outputs it returns nothing, as it would;
        # with outputs (a TF1 SavedModel's restore and init functions return a feed and an
        # anchor the loader ignores) it returns scalar stand-ins. A function that must hand back
        # a resource or variant (a resource's creator) cannot be stood in for: the run ends with
        # JITSIM_REFUSED (exit 4)
        def __enter__(self):
            if not _DRY:
                return self
            from tensorflow.python.eager import context as ctx_mod
            self._mod, self._orig = ctx_mod.Context, ctx_mod.Context.call_function
            orig = self._orig
            def call_function(ctx, name, tensor_inputs, num_outputs):
                fname = name.decode() if isinstance(name, bytes) else str(name)
                bad = _outside_ops(ctx, fname, set())
                if not bad:
                    return orig(ctx, name, tensor_inputs, num_outputs)
                types = [a.type for a in ctx.get_function_def(fname).signature.output_arg] if num_outputs else []
                if any(t in (20, 21) for t in types):  # DT_RESOURCE, DT_VARIANT
                    print("%(refused)sloading the model runs its function %%s, which holds ops jitsim does not run "
                          "(%%s)" %% (fname, ", ".join(sorted(bad))), file=sys.stderr, flush=True)
                    os._exit(4)
                _cancelled(lambda: orig(ctx, name, tensor_inputs, num_outputs))
                if not num_outputs:
                    return None
                return [tf.constant(b"" if t == 7 else 0, dtype=tf.as_dtype(t)) for t in types]
            self._mod.call_function = call_function
            return self
        def __exit__(self, *exc):
            if _DRY:
                self._mod.call_function = self._orig
            return False
    def _run_call():
        # the call, once: in a dry run built by TF and stopped before anything runs
        if not _DRY:
            return _step()
        if _dry_step is not None:
            return _dry_step()
        if not _cancelled(_step):
            _note("the call finished without calling a function (nothing was cancelled)")
    _dry_step = None
    """
    % {"call": CALL_MARK, "note": NOTE_MARK, "refused": REFUSED_MARK,
       "outside": tuple(sorted(OUTSIDE_OPS)), "inside": tuple(sorted(IN_PROCESS_STATEFUL))}
)

# A GraphDef or MetaGraphDef. With a call file (argv[2], JSON) it makes the call the file states:
# * an exported function (jitsim.frontend.exported_function.ExportedFunction.to_dict(): "function"
#   in the file): the graph imported into a FuncGraph, made a function as a tf.function's graph is
#   (its placeholders and the stated captured Consts the inputs in order, its outputs, its control
#   outputs), and called with generated tensors, the captured values and fresh variables of the
#   stated dtypes and shapes;
# * else a session call (jitsim.frontend.session_call.SessionCall.to_dict()): exactly that
#   sess.run (fetches, targets, feeds), each resource placeholder bound to a fresh variable (a
#   VarHandleOp of the same name, as jitsim.frontend.session_call.bound_to_variables makes it).
# Without a call file, every placeholder fed and every sink fetched. _output_shapes attributes are
# dropped first: a MetaGraph export (and as_graph_def(add_shapes=True)) adds them to every node,
# the live graph has none, and TF's importer reads them (docs/capture.md). A given call that fails
# at run time (after TF built, and dumped, the graph of the call) is reported as a note.
_GRAPHDEF = textwrap.dedent(
    """
    import json
    from google.protobuf import text_format
    from tensorflow.core.protobuf import config_pb2
    path = sys.argv[1]
    call = json.load(open(sys.argv[2])) if len(sys.argv) > 2 and sys.argv[2] else None
    data = open(path, "rb").read()
    if data[:2] == b"\\x1f\\x8b":
        import gzip
        data = gzip.decompress(data)
    def _parse(msg):
        try:
            msg.ParseFromString(data)
        except Exception:
            msg.Clear()
            text_format.Parse(data.decode("utf-8-sig"), msg)
        return msg
    meta = None
    try:
        gd = _parse(tf.compat.v1.GraphDef())
        if not gd.node:
            raise ValueError("no nodes")
    except Exception:
        meta = _parse(tf.compat.v1.MetaGraphDef())
        gd = meta.graph_def
    for _n in gd.node:
        if "_output_shapes" in _n.attr:
            del _n.attr["_output_shapes"]
    for _f in gd.library.function:
        for _n in _f.node_def:
            if "_output_shapes" in _n.attr:
                del _n.attr["_output_shapes"]
    function = call.get("function") if call else None
    if function is not None:
        from tensorflow.python.eager import context as _ectx
        from tensorflow.python.framework import func_graph as _fg
        from tensorflow.python.framework import importer as _importer
        from tensorflow.python.eager.polymorphic_function import atomic_function as _atomic
        fg = _fg.FuncGraph(function["name"])
        with fg.as_default():
            _importer.import_graph_def(gd, name="")
        fg.inputs = [fg.get_tensor_by_name(n + ":0") for n in function["inputs"]]
        fg.outputs = [fg.get_tensor_by_name(t) for t in function["outputs"]]
        if function["control_outputs"] is not None:
            fg.control_outputs = [fg.get_operation_by_name(n) for n in function["control_outputs"]]
        else:  # a function that returns nothing: the ops TF's automatic control dependencies make run
            from tensorflow.python.framework import auto_control_deps as _acd
            from tensorflow.python.framework import auto_control_deps_utils as _acd_utils
            from tensorflow.python.framework import op_def_registry as _odr
            _args = {t.op for t in fg.inputs}
            fg.control_outputs = [
                op for op in fg.get_operations() if op not in _args and (
                    op.type in _acd.MUST_RUN_ORDER_INSENSITIVE_STATEFUL_OPS or _odr.get(op.type) is None or
                    (_acd.op_is_stateful(op) and (op.type not in _acd_utils.RESOURCE_READ_OPS or
                                                  any(o.consumers() for o in op.outputs))))]
        ctx = _ectx.context()
        ctx.ensure_initialized()
        for fdef in gd.library.function:
            ctx.add_function_def(fdef)
        fn = _atomic.from_func_graph(function["name"], fg, {"_construction_context": "kEagerRuntime"})
        keep, args = [], []
        for n in function["inputs"]:
            t = fg.get_tensor_by_name(n + ":0")
            var = function["variables"].get(n)
            if n in function.get("captured", ()):  # a captured eager tensor: its value, as an argument
                args.append(tf.constant(tf.make_ndarray(t.op.get_attr("value"))))
            elif var is not None and var.get("kind") == "table":  # a lookup table's handle
                table = tf.lookup.experimental.MutableHashTable(
                    tf.as_dtype(var["key_dtype"]), tf.as_dtype(var["value_dtype"]),
                    tf.zeros([], tf.as_dtype(var["value_dtype"])))
                keep.append(table)
                args.append(table.resource_handle)
            elif var is not None:
                from tensorflow.python.ops import resource_variable_ops as _rvo
                shape, dtype = var["shape"], tf.as_dtype(var["dtype"])
                if shape is None:
                    v = _rvo.UninitializedVariable(shape=tf.TensorShape(None), dtype=dtype)
                else:
                    v = tf.Variable(tf.zeros([max(d, 1) if d is not None else 1 for d in shape], dtype),
                                    shape=tf.TensorShape(shape))
                keep.append(v)
                args.append(v.handle)
            else:
                dims = t.shape.as_list() if t.shape.rank is not None else [2]
                args.append(tf.constant(_gen(t.dtype, dims)))
        def _step():
            return fn.call_flat(*args)
    else:
        variables = set(call["variables"]) if call else set()
        for n in gd.node:
            if n.name not in variables:
                continue
            dt = n.attr["_handle_dtypes"].list.type[0] if n.attr["_handle_dtypes"].list.type else 0
            if not dt:
                dt = next((m.attr["dtype"].type for m in gd.node if m.attr["dtype"].type and
                           any(i == n.name or i.startswith(n.name + ":") for i in m.input)), 1)
            hs = list(n.attr["_handle_shapes"].list.shape)
            for k in list(n.attr):
                del n.attr[k]
            n.op = "VarHandleOp"
            n.attr["dtype"].type = dt
            if hs:
                n.attr["shape"].shape.CopyFrom(hs[0])
            else:
                n.attr["shape"].shape.unknown_rank = True
            n.attr["shared_name"].s = n.name.encode()
            n.attr["container"].s = b""
            n.attr["allowed_devices"].list.SetInParent()
        g = tf.Graph()
        with g.as_default():
            if meta is not None:
                tf.compat.v1.train.import_meta_graph(meta)
            else:
                tf.graph_util.import_graph_def(gd, name="")
        feeds, fetches = {}, []
        if call is not None:
            shapes = call.get("feed_shapes", {})
            for name in call["feeds"]:
                t = g.get_tensor_by_name(name)
                dims = shapes.get(name)
                if dims is None:
                    dims = t.shape.as_list() if t.shape.rank is not None else [2]
                feeds[t] = _gen(t.dtype, dims)
            fetches = list(call["fetches"]) + list(call["targets"])
        else:
            for op in g.get_operations():
                if op.type == "Placeholder":
                    t = op.outputs[0]
                    if t.dtype in (tf.variant, tf.resource) and not t.consumers():
                        continue  # e.g. a frozen while loop's unused_control_flow_input: nothing to feed
                    if t.dtype in (tf.variant, tf.resource):
                        raise SystemExit(
                            "JITSIM_ERROR: placeholder %r holds a %s handle, which a TF1 session call cannot "
                            "feed: the GraphDef looks like a tf.function's export (cf.graph.as_graph_def()); "
                            "jitsim's TF route calls it as the function (jitsim cluster FILE --tf always), or "
                            "harvest the SavedModel or the program instead" % (op.name, t.dtype.name))
                    dims = t.shape.as_list() if t.shape.rank is not None else [2]
                    feeds[t] = _gen(t.dtype, dims)
                elif not any(c for o in op.outputs for c in o.consumers()) and not op._control_outputs:
                    fetches.extend(op.outputs or [op])
        sess = tf.compat.v1.Session(graph=g, config=_DRY_CONFIG)
        def _sess_run(items, feed_dict):
            # sess.run, or in a dry run what sess.run builds: DirectSession's executors for the
            # same sorted feeds, fetches and targets (make_callable), nothing run
            if not _DRY:
                return sess.run(items, feed_dict=feed_dict)
            outs, targets = set(), set()
            for x in items:
                name = x if isinstance(x, str) else x.name
                (targets if isinstance(x, tf.Operation) or (isinstance(x, str) and ":" not in x) else outs).add(name)
            o = config_pb2.CallableOptions()
            o.feed.extend(sorted({t.name for t in feed_dict}))
            o.fetch.extend(sorted(outs))
            o.target.extend(sorted(targets))
            sess._make_callable_from_options(o)
        init = [op for op in g.get_operations() if op.name == "init"]
        if not init and call is not None:
            # a TF1 program runs its variables' initializer before the call (and TF instantiates that
            # run's graph first, which moves the process-wide cluster counter): the graph's own init
            # op, else global_variables_initializer() of a MetaGraph's variables, else the
            # initializers of a GraphDef's variables (their <variable>/Assign ops), grouped as "init"
            with g.as_default():
                if tf.compat.v1.global_variables():
                    init = [tf.compat.v1.variables_initializer(tf.compat.v1.global_variables(), name="init")]
                else:
                    kinds = ("VariableV2", "Variable", "VarHandleOp")
                    names = {op.name for op in g.get_operations() if op.type in kinds}
                    assigns = [op for op in g.get_operations() if op.type in ("Assign", "AssignVariableOp")
                               and op.name.endswith("/Assign") and op.name[:-len("/Assign")] in names]
                    if assigns:
                        init = [tf.group(*assigns, name="init")]
        if init:
            try:
                _sess_run(init, feeds)
            except tf.errors.OpError as e:
                if call is None:
                    raise
                _note("the init op failed: %s" % str(e).splitlines()[0])
        assigns = []  # fresh values for the variables the call binds, written in one run
        for name in sorted(variables):
            op = g.get_operation_by_name(name)
            shape = tf.TensorShape(op.get_attr("shape"))
            dims = [2 if d is None else d for d in shape.as_list()] if shape.rank is not None else [2]
            try:
                with g.as_default():
                    assigns.append(tf.raw_ops.AssignVariableOp(resource=op.outputs[0],
                                                               value=tf.constant(_gen(op.get_attr("dtype"), dims))))
            except Exception as e:
                _note("variable %s left uninitialised: %s" % (name, str(e).splitlines()[0]))
        if assigns:
            try:
                _sess_run(assigns, {})
            except tf.errors.OpError as e:
                _note("the variables were left uninitialised: %s" % str(e).splitlines()[0])
        def _step():
            if call is None:
                return sess.run(fetches, feed_dict=feeds)
            try:
                return sess.run(fetches, feed_dict=feeds)
            except tf.errors.OpError as e:
                _note("the call failed at run time, after TF built its graph: %s" % str(e).splitlines()[0])
        def _dry_step():
            return _sess_run(fetches, feeds)
    """
)

_SAVED_MODEL = textwrap.dedent(
    """
    with _LoadGate():
        m = tf.saved_model.load(sys.argv[1])
    sig = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else "serving_default"
    if sig not in m.signatures:
        raise SystemExit("JITSIM_ERROR: the SavedModel has no signature %r; its signatures: %s"
                         % (sig, ", ".join(sorted(m.signatures)) or "none"))
    f = m.signatures[sig]
    _, kwargs = f.structured_input_signature
    args = {k: tf.constant(_gen(s.dtype, s.shape.as_list() if s.shape.rank is not None else [2]))
            for k, s in kwargs.items()}
    def _step():
        return f(**args)
    """
)

# "The call" of a .keras file: jitsim.tfprocess.keras_call.keras_call with the stated shapes
# (argv[2], JSON: {"input_shapes": [[name or position, dims], ...]}), unknown dims not given set
# to 2.
_KERAS = textwrap.dedent(
    """
    import json
    import keras
    from jitsim.errors import JitsimError
    from jitsim.tfprocess.keras_call import keras_call, keras_inputs
    with _LoadGate():
        model = keras.models.load_model(sys.argv[1], compile=False)
    _shapes = json.load(open(sys.argv[2]))["input_shapes"] if len(sys.argv) > 2 and sys.argv[2] else []
    try:
        specs, _inputs = keras_inputs(model, _shapes)
    except JitsimError as e:
        print("%s" + e.message, file=sys.stderr, flush=True)
        raise SystemExit(3)
    print("%s" + json.dumps(_inputs), file=sys.stderr, flush=True)
    fn, specs = keras_call(model, specs)
    args = [tf.constant(_gen(s.dtype, s.shape.as_list())) for s in specs]
    fn.get_concrete_function()
    def _step():
        return fn(*args)
    """
    % (INPUT_ERROR_MARK, KERAS_CALL_MARK)
)

# A function bundle (jitsim.frontend.capture.write_function_bundle): register the library in
# the eager context and call the function by name, as a ConcreteFunction call does
# (function-as-op eager execution), with the caller's Grappler options and jit setting.
_FUNCTION = textwrap.dedent(
    """
    import json
    from tensorflow.core.framework import function_pb2, tensor_pb2
    from tensorflow.python.eager import context
    d = sys.argv[1]
    spec = json.load(open(os.path.join(d, "function.json")))
    if spec.get("grappler"):
        tf.config.optimizer.set_experimental_options(spec["grappler"])
    if spec.get("jit") is not None:
        tf.config.optimizer.set_jit("autoclustering" if spec["jit"] else False)
    lib = function_pb2.FunctionDefLibrary()
    lib.ParseFromString(open(os.path.join(d, "library.pb"), "rb").read())
    ctx = context.context()
    ctx.ensure_initialized()
    for fdef in lib.function:
        ctx.add_function_def(fdef)
    keep, args = [], []
    for i, a in enumerate(spec["inputs"]):
        if a["kind"] == "tensor":
            args.append(tf.constant(_gen(a["dtype"], a["shape"])))
        elif a["kind"] == "value":
            tp = tensor_pb2.TensorProto()
            tp.ParseFromString(open(os.path.join(d, a["file"]), "rb").read())
            args.append(tf.constant(tf.make_ndarray(tp)))
        elif a["kind"] == "variable":
            v = tf.Variable(tf.zeros([1 if x is None or x < 0 else x for x in a["shape"]], a["dtype"]))
            keep.append(v)
            args.append(v.handle)
        elif a["kind"] == "table":
            t = tf.lookup.experimental.MutableHashTable(a["key_dtype"], a["value_dtype"],
                                                        tf.zeros([], a["value_dtype"]))
            keep.append(t)
            args.append(t.resource_handle)
        else:
            raise SystemExit("JITSIM_ERROR: unsupported input kind %r" % a["kind"])
    def _step():
        return ctx.call_function(spec["name"].encode(), args, spec["num_outputs"])
    """
)

RUNNERS = {kind: PRELUDE + body for kind, body in
           (("graphdef", _GRAPHDEF), ("saved_model", _SAVED_MODEL), ("keras", _KERAS), ("function", _FUNCTION))}

# Every runner above defines ``_step()``, *the call*; a harvest makes it once, after the mark
# (``_run_call``: in a dry run, built and not run). ``harvest(..., tail=CODE)`` appends CODE
# instead (``jitsim profile`` times and profiles ``_step()``).
CALL_ONCE = "_mark_call()\n_run_call()\n"

# A program as a step function (``harvest(..., tail=...)`` only): the program is run under
# the name ``__jitsim_step__`` (its ``if __name__ == "__main__":`` block is skipped) and must
# define ``jitsim_step()``, one step of its workload.
STEP_FUNCTION = "jitsim_step"
PROGRAM_STEP = PRELUDE + textwrap.dedent(
    """
    import runpy
    _prog = os.environ["JITSIM_PROGRAM"]
    sys.path.insert(0, os.path.dirname(_prog))
    sys.argv = [_prog]
    _ns = runpy.run_path(_prog, run_name="__jitsim_step__")
    _step = _ns.get("%s")
    if not callable(_step):
        raise SystemExit("JITSIM_ERROR: the program defines no %s() function (one step of its workload, "
                         "called by jitsim profile; see docs/cli.md)")
    """
    % (STEP_FUNCTION, STEP_FUNCTION)
)
