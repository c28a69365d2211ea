"""jitsim.registry.protos: TF's message classes from the shipped descriptor set."""

from __future__ import annotations

import os
import subprocess
import sys

from jitsim.registry import protos


def test_classes_are_message_factorys():
    # class_of makes, on upb, the classes message_factory.GetMessageClass would (it is not
    # imported on the command path): for every message type of the shipped set, the same
    # class object, and a sub-message's type is its descriptor's class.
    from google.protobuf import message_factory

    names = ["tensorflow.GraphDef", "tensorflow.NodeDef", "tensorflow.SavedModel", "tensorflow.ConfigProto"]
    for name in names:
        d = protos.POOL.FindMessageTypeByName(name)
        assert protos.class_of(d) is message_factory.GetMessageClass(d)
        for field in d.fields:
            if field.message_type is not None:
                assert protos.class_of(field.message_type) is message_factory.GetMessageClass(field.message_type)
    gd = protos.GraphDef()
    assert type(gd.node.add()) is protos.NodeDef
    assert type(gd.library) is protos.FunctionDefLibrary


def test_pure_python_protobuf_reads_and_writes_alike(tmp_path):
    # With protobuf's pure-Python runtime (PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python) the
    # classes come from message_factory: the same bytes come out.
    code = ("import sys; from jitsim.registry import protos; gd = protos.GraphDef(); "
            "n = gd.node.add(name='a', op='Const'); n.attr['v'].f = 0.5; "
            "sys.stdout.buffer.write(gd.SerializeToString(deterministic=True))")
    outs = []
    for impl in ("python", None):
        env = {k: v for k, v in os.environ.items() if k != "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"}
        if impl:
            env["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = impl
        outs.append(subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, check=True).stdout)
    assert outs[0] == outs[1] and outs[0]
