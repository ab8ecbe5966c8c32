"""Model files that are not a well-formed ONNX model: damaged bytes, other messages, bad versions,
external data pointing outside the model's folder, nesting past the limit, huge strings."""
import os

import onnx

from onnx import TensorProto, helper

from case import Case
from model_builders import FLOAT, graph, info, model, one_node, save


def relu():
    return one_node("Relu", [info("x", FLOAT, [2])], [info("y", FLOAT, [2])])


def write_bytes(data, name="model.onnx"):
    def make(d):
        (d / name).write_bytes(data(d) if callable(data) else data)
        return ["inspect", d / name]
    return make


def relu_bytes(cut):
    data = relu().SerializeToString()
    return lambda d: data[:cut(len(data))]


def wrong_message(message):
    return write_bytes(lambda d: message.SerializeToString())


def with_model(command, edit=lambda m: m, **kw):
    def make(d):
        path = save(d, edit(relu(), **kw) if kw else edit(relu()))
        return [command, path] + (["-o", d / "model.kiln"] if command == "build" else [])
    return make


def set_field(field, value):
    def edit(m):
        setattr(m, field, value)
        return m
    return edit


def set_opset(version, domain=""):
    def edit(m):
        del m.opset_import[:]
        m.opset_import.append(helper.make_opsetid(domain, version))
        return m
    return edit


def external_weight(location, setup=lambda d: None, offset=None, length=None):
    """Add(x, w) whose 'w' (float[4]) is stored as external data at `location`."""
    def make(d):
        setup(d)
        w = TensorProto(name="w", data_type=FLOAT, dims=[4], data_location=TensorProto.EXTERNAL)
        entries = {"location": location(d) if callable(location) else location}
        if offset is not None:
            entries["offset"] = str(offset)
        if length is not None:
            entries["length"] = str(length)
        for key, value in entries.items():
            w.external_data.add(key=key, value=value)
        g = graph([helper.make_node("Add", ["x", "w"], ["y"], name="n")],
                  [info("x", FLOAT, [4])], [info("y", FLOAT, [4])], [w])
        (d / "weights.bin").write_bytes(bytes(16))
        return ["run", save(d, model(g))]
    return make


def outside_file(d):
    (d.parent / f"{d.name}-secret.bin").write_bytes(bytes(16))


def symlink_out(d):
    outside_file(d)
    os.symlink(d.parent / f"{d.name}-secret.bin", d / "link.bin")


def nested_ifs(depth):
    """If nodes nested `depth` deep through their then-branches, written top-down in place (copying
    ever deeper subgraphs into their parents would take minutes)."""
    def make(d):
        leaf = graph([helper.make_node("Identity", ["x"], ["y"])], [], [info("y", FLOAT, [2])], name="leaf")
        top = graph([], [info("c", TensorProto.BOOL, []), info("x", FLOAT, [2])], [info("y", FLOAT, [2])])
        body = top
        for level in range(depth):
            node = body.node.add(op_type="If", input=["c"], output=["y"], name=f"if{level}")
            node.attribute.append(helper.make_attribute("else_branch", leaf))
            then = node.attribute.add(name="then_branch", type=onnx.AttributeProto.GRAPH)
            body = then.g
            body.name = f"level{level}"
            body.output.append(info("y", FLOAT, [2]))
        body.node.append(leaf.node[0])
        return ["inspect", save(d, model(top))]
    return make


def huge_string_tensor(d):
    # One 16 MiB string where the dims ask for 10^9 of them.
    s = TensorProto(name="s", data_type=TensorProto.STRING, dims=[10**9], string_data=[b"a" * (1 << 24)])
    g = graph([helper.make_node("Identity", ["s"], ["y"], name="n")], [], [info("y", TensorProto.STRING, None)], [s])
    return ["inspect", save(d, model(g))]


def long_node_name(d):
    m = one_node("NoSuchOp", [info("x", FLOAT, [2])], [info("y", FLOAT, [2])])
    m.graph.node[0].name = "N" * (1 << 20)
    return ["inspect", save(d, m)]


NOT_ONNX = "not a valid ONNX model"
CASES = [
    Case("file-missing", lambda d: ["inspect", d / "absent.onnx"], 1, ["absent.onnx: cannot open the model file"]),
    Case("file-is-a-directory", lambda d: ["inspect", d], 1, ["is a directory, not a model file"]),
    Case("file-empty", write_bytes(b""), 1, ["model.onnx: the file is empty"]),
    Case("file-garbage", write_bytes(b"\xff" * 64), 1, ["model.onnx", NOT_ONNX]),
    Case("file-truncated-half", write_bytes(relu_bytes(lambda n: n // 2)), 1, ["model.onnx", NOT_ONNX]),
    Case("file-truncated-last-byte", write_bytes(relu_bytes(lambda n: n - 1)), 1, ["model.onnx", NOT_ONNX]),
    Case("message-tensor-proto", wrong_message(TensorProto(name="t", dims=[1], data_type=FLOAT, float_data=[1])),
         1, ["model.onnx", "not a valid ONNX model (the protobuf could not be parsed"]),
    Case("message-graph-proto", wrong_message(relu().graph), 1, ["model.onnx: not a valid ONNX model (it has no graph)"]),
    Case("message-node-proto", wrong_message(helper.make_node("Relu", ["x"], ["y"])), 1, ["model.onnx: not a valid ONNX model (it has no graph)"]),
    Case("ir-version-0", with_model("check", set_field("ir_version", 0)), 1, ["[ir-version] the model has no ir_version"]),
    Case("ir-version-10000", with_model("inspect", set_field("ir_version", 10000)), 1, ["ir_version 10000 is newer than the newest kiln knows"]),
    Case("opset-0", with_model("inspect", set_opset(0)), 1, ["domain 'ai.onnx' at version 0; opset versions start at 1"]),
    Case("opset-10000", with_model("inspect", set_opset(10000)), 3, ["node 'n' (Relu)", "at opset 10000 is not supported"]),
    Case("opset-missing", with_model("inspect", lambda m: (m.opset_import.pop(), m)[1]), 1, ["opset"]),
    Case("opset-unknown-domain-only", with_model("run", set_opset(1, "com.example")), 1, ["node 'n' (Relu) uses domain 'ai.onnx', which the model does not import"]),
    Case("external-data-dotdot", external_weight(lambda d: f"../{d.name}-secret.bin", outside_file),
         1, ["initializer 'w'", "points outside the model's folder"]),
    Case("external-data-absolute", external_weight(lambda d: str(d.parent / f"{d.name}-secret.bin"), outside_file),
         1, ["initializer 'w'", "must be relative to the model's folder"]),
    Case("external-data-symlink-out", external_weight("link.bin", symlink_out), 1, ["initializer 'w'", "'link.bin' points outside the model's folder"]),
    Case("external-data-missing-file", external_weight("nothere.bin"), 1, ["initializer 'w'", "cannot open external data file", "nothere.bin"]),
    Case("external-data-offset-past-end", external_weight("weights.bin", offset=1 << 40), 1, ["initializer 'w'", "is past the end of"]),
    Case("external-data-length-short", external_weight("weights.bin", length=8), 1, ["initializer 'w'", "external data length 8 does not match shape 4"]),
    Case("external-data-length-huge", external_weight("weights.bin", length=1 << 62), 1, ["initializer 'w'", "does not match shape 4"]),
    Case("nested-if-2000", nested_ifs(2000), 1, ["nest more than 100 levels deep"]),
    Case("nested-if-150", nested_ifs(150), 1, ["nest more than 100 levels deep"]),
    Case("string-tensor-dims-1e9", huge_string_tensor, 1, ["initializer 's': string_data holds 1 values but shape 1000000000 needs"]),
    Case("node-name-1MiB", long_node_name, 3, ["(NoSuchOp): operator ai.onnx::NoSuchOp at opset 17 is not supported"]),
]
