"""FunctionDef -> graph conversion: output-arg names become flat output indices."""

from google.protobuf import text_format

from jitsim.graph import Graph
from jitsim.registry import protos
from jitsim.graph.functions import function_to_graphdef


def test_function_body_becomes_graph_with_args_and_retvals():
    lib = protos.FunctionDefLibrary()
    text_format.Parse(
        """
        function {
          signature { name: "f" input_arg { name: "x" type: DT_FLOAT } output_arg { name: "out" type: DT_INT32 } }
          node_def { name: "u" op: "Unique" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
          node_def { name: "s" op: "Split" input: "dim" input: "x" attr { key: "num_split" value { i: 3 } } }
          node_def { name: "dim" op: "Const" }
          node_def { name: "n" op: "Neg" input: "u:idx:0" input: "s:output:2" input: "^u" }
          ret { key: "out" value: "n:y:0" }
        }
        """,
        lib,
    )
    g = Graph(function_to_graphdef(lib, "f"))
    # Unique's outputs are (y, idx): idx:0 is flat output 1.  Split's single list output
    # `output` has num_split=3 tensors: output:2 is flat output 2.
    assert list(g["n"].nodedef.input) == ["u:1", "s:2", "^u"]
    assert g["x"].op == "_Arg" and g["x"].get_attr("index") == 0
    assert g["out_RetVal"].op == "_Retval" and list(g["out_RetVal"].nodedef.input) == ["n"]
    assert g.function_names() == ["f"]
