"""Graphs that break ONNX's rules: cycles, tensors defined twice, inputs nothing defines, initializers
whose data does not match their shape, and dims that are negative, zero or too large to hold."""
from onnx import TensorProto, helper

from case import Case
from model_builders import FLOAT, INT64, graph, info, model, save


def nodes_model(nodes, inputs=("x",), outputs=("y",), initializers=(), input_shape=(2,)):
    g = graph([helper.make_node(*n[:3], name=n[3]) for n in nodes],
              [info(i, FLOAT, list(input_shape)) for i in inputs], [info(o, FLOAT, [2]) for o in outputs],
              initializers)
    return model(g)


def load(command, *args, **kw):
    """A case that saves nodes_model(*args, **kw) and runs `command` on it."""
    def make(d):
        path = save(d, nodes_model(*args, **kw))
        return [command, path] + (["-o", d / "model.kiln"] if command == "build" else [])
    return make


def weight(dims, data_type=FLOAT, **data):
    return TensorProto(name="w", dims=dims, data_type=data_type, **data)


def add_weight(command, w):
    """Add(x, w) with x float[2]."""
    return load(command, [("Add", ["x", "w"], ["y"], "add")], initializers=[w])


def input_dims(command, dims, *extra):
    """Relu on a graph input 'x' of `dims`."""
    def make(d):
        g = graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], [info("x", FLOAT, dims)], [info("y")])
        return [command, save(d, model(g)), *extra] + (["-o", d / "model.kiln"] if command == "build" else [])
    return make


TERA = 10**12
CASES = [
    Case("cycle-two-nodes", load("inspect", [("Relu", ["b"], ["a"], "r1"), ("Relu", ["a"], ["b"], "r2")],
                                 outputs=("a",)), 1, ["the graph has a cycle through node 'r1' (Relu), node 'r2' (Relu)"]),
    Case("cycle-self-loop", load("inspect", [("Add", ["x", "y"], ["y"], "self")]), 1, ["the graph has a cycle through node 'self' (Add)"]),
    Case("cycle-three-nodes", load("inspect", [("Relu", ["c"], ["a"], "r1"), ("Relu", ["a"], ["b"], "r2"),
                                               ("Add", ["b", "x"], ["c"], "r3")], outputs=("c",)), 1, ["the graph has a cycle through node 'r1'", "node 'r3' (Add)"]),
    Case("duplicate-producer", load("inspect", [("Relu", ["x"], ["y"], "first"), ("Neg", ["x"], ["y"], "second")]),
         1, ["tensor 'y' is produced by both node 'first' (Relu) and node 'second' (Neg)"]),
    Case("output-overwrites-graph-input", load("inspect", [("Relu", ["x"], ["x"], "r")], outputs=("x",)),
         1, ["node 'r' (Relu) writes 'x', which is a graph input"]),
    Case("duplicate-initializer", load("inspect", [("Add", ["x", "w"], ["y"], "add")],
                                       initializers=[weight([2], float_data=[1, 2]), weight([2], float_data=[3, 4])]),
         1, ["initializer 'w' is defined twice"]),
    Case("dangling-node-input", load("inspect", [("Add", ["x", "nowhere"], ["y"], "add")]), 1, ["node 'add' (Add) input 1 'nowhere' is not produced"]),
    Case("graph-output-not-produced", load("inspect", [("Relu", ["x"], ["y"], "r")], outputs=("y", "ghost")),
         1, ["graph output 'ghost' is not produced"]),
    Case("empty-op-type", load("inspect", [("", ["x"], ["y"], "blank")]), 3, ["node 'blank'"]),
    Case("initializer-float-data-short", add_weight("inspect", weight([2], float_data=[1])), 1, ["initializer 'w': float_data holds 1 values but shape 2 needs 2"]),
    Case("initializer-raw-data-long", add_weight("inspect", weight([2], raw_data=bytes(12))), 1, ["initializer 'w': raw_data has 12 bytes but shape 2 of float32 needs 8"]),
    Case("initializer-raw-data-odd-bytes", add_weight("inspect", weight([2], raw_data=bytes(7))), 1, ["initializer 'w': raw_data has 7 bytes"]),
    Case("initializer-int64-data-for-float", add_weight("inspect", weight([2], int64_data=[1, 2])), 1, ["initializer 'w': float_data holds 0 values"]),
    Case("initializer-negative-dim", add_weight("inspect", weight([-2], float_data=[1, 2])), 1, ["initializer 'w': negative dimension -2"]),
    Case("initializer-zero-dim-with-data", add_weight("inspect", weight([0], float_data=[1, 2])), 1, ["initializer 'w': float_data holds 2 values but shape 0 needs 0"]),
    Case("initializer-1e12-elements-no-data", add_weight("inspect", weight([TERA])), 1, ["initializer 'w'", "shape 1000000000000 needs 1000000000000"]),
    Case("initializer-dims-overflow-int64", add_weight("inspect", weight([1 << 40, 1 << 40], float_data=[1])),
         1, ["initializer 'w': shape 1099511627776x1099511627776 has too many elements"]),
    Case("initializer-undefined-dtype", add_weight("inspect", weight([2], data_type=0, raw_data=bytes(8))),
         3, ["initializer 'w': data type undefined(0) is not supported"]),
    Case("initializer-dtype-12345", add_weight("inspect", weight([2], data_type=12345, raw_data=bytes(8))),
         3, ["initializer 'w': data type undefined(12345) is not supported"]),
    # A negative declared dim is read as unknown (some exporters write -1 for a dynamic dim).
    Case("input-negative-dim-run", input_dims("run", [-5]), 0, ["note: input 'x' has dynamic dims (?)"]),
    Case("input-negative-dim-build", input_dims("build", [-5]), 1,
         ["input 'x' has dynamic dims (?) but the builder config has no optimization profile"]),
    Case("input-zero-dim-runs-empty", input_dims("run", [0, 3]), 0, ["float32[0x3]"]),
    Case("input-1e12-elements-run", input_dims("run", [TERA]), 1, ["input 'x': tensor float32[1000000000000] needs"]),
    Case("input-1e12-elements-build", input_dims("build", [TERA]), 1,
         ["input 'x' float32[1000000000000] needs 3814697 MiB, over the default allocation limit of"]),
    Case("input-1e6x1e6-run", input_dims("run", [10**6, 10**6]), 1, ["input 'x': tensor float32[1000000x1000000] needs"]),
    Case("input-dims-overflow-int64-run", input_dims("run", [1 << 40, 1 << 40]), 1, ["input 'x': shape 1099511627776x1099511627776 has too many elements"]),
    Case("input-dims-overflow-int64-inspect", input_dims("inspect", [1 << 40, 1 << 40]), 0, ["x  float32"]),
    Case("input-shapes-flag-1e12", input_dims("run", ["n"], "--shapes", f"x:{TERA}"), 1, ["input 'x': tensor float32[1000000000000] needs"]),
    Case("input-shapes-flag-negative", input_dims("run", ["n"], "--shapes", "x:-3"), 1, ["bad shape '-3'"]),
    Case("input-int64-dims-overflow-elements", input_dims("run", [1 << 62, 4]), 1, ["input 'x': shape 4611686018427387904x4 has too many elements"]),
]
