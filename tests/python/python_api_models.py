"""Small ONNX models for the Python API tests (tests/python/test_python_*.py), made with onnx.helper."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = [helper.make_opsetid("", 18)]


def _save(model, path):
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def symbolic_model(path):
    """y = relu(x @ w + b), x: [batch, 4] -> y: [batch, 3]; b is an overridable initializer
    (also a graph input). Every ModelMetadata field is set."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = np.array([0.5, -0.25, 0.0], np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"], name="matmul"),
         helper.make_node("Add", ["xw", "b"], ["s"], name="add"),
         helper.make_node("Relu", ["s"], ["y"], name="relu")],
        "symbolic_graph",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
        doc_string="a linear layer and a relu")
    model = helper.make_model(graph, opset_imports=OPSET, producer_name="kiln-tests", producer_version="1.0",
                              domain="org.kiln.tests", model_version=3, doc_string="symbolic batch model")
    helper.set_model_props(model, {"labels": "cat,dog,bird", "author": "kiln"})
    return _save(model, path)


def fixed_model(path):
    """y = relu(x) with x: float [1, 3, 4, 4] (fixed dims, for the shape errors)."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "fixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 4])])
    return _save(helper.make_model(graph, opset_imports=OPSET), path)


def sequence_optional_model(path):
    """seq = [a, a + 1] (a sequence output), some = optional(a), none = an absent optional."""
    one = numpy_helper.from_array(np.array(1, np.int64), "one")
    optional_int = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.INT64, ["n"]))
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "one"], ["a1"], name="add"),
         helper.make_node("SequenceConstruct", ["a", "a1"], ["seq"], name="seq"),
         helper.make_node("Optional", ["a"], ["some"], name="some"),
         helper.make_node("Optional", [], ["none"], name="none", type=helper.make_tensor_type_proto(TensorProto.INT64, None))],
        "sequence_optional",
        [helper.make_tensor_value_info("a", TensorProto.INT64, ["n"])],
        [helper.make_tensor_sequence_value_info("seq", TensorProto.INT64, None),
         helper.make_value_info("some", optional_int),
         helper.make_value_info("none", helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.INT64, None)))],
        [one])
    return _save(helper.make_model(graph, opset_imports=OPSET), path)


def sequence_input_model(path):
    """count = SequenceLength(items), joined = ConcatFromSequence(items, axis=0) for a sequence input."""
    graph = helper.make_graph(
        [helper.make_node("SequenceLength", ["items"], ["count"], name="length"),
         helper.make_node("ConcatFromSequence", ["items"], ["joined"], name="concat", axis=0)],
        "sequence_input",
        [helper.make_tensor_sequence_value_info("items", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("count", TensorProto.INT64, []),
         helper.make_tensor_value_info("joined", TensorProto.FLOAT, None)])
    return _save(helper.make_model(graph, opset_imports=OPSET), path)


def string_model(path):
    """words_out = Identity(words); flags = (words == "cat") for string tensors."""
    cat = numpy_helper.from_array(np.array(["cat"], dtype=object), "cat")
    graph = helper.make_graph(
        [helper.make_node("Identity", ["words"], ["words_out"], name="identity"),
         helper.make_node("Equal", ["words", "cat"], ["is_cat"], name="equal")],
        "strings",
        [helper.make_tensor_value_info("words", TensorProto.STRING, [None])],
        [helper.make_tensor_value_info("words_out", TensorProto.STRING, [None]),
         helper.make_tensor_value_info("is_cat", TensorProto.BOOL, [None])],
        [cat])
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), path)


def unsupported_model(path):
    """Two nodes of ops no engine implements, in the default domain."""
    graph = helper.make_graph(
        [helper.make_node("FrobnicateA", ["x"], ["t"], name="first_bad"),
         helper.make_node("FrobnicateB", ["t"], ["y"], name="second_bad")],
        "unsupported",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return _save(helper.make_model(graph, opset_imports=OPSET), path)


# numpy dtype names kiln takes and returns, with their ONNX element types.
NUMPY_TYPES = {
    "bool": TensorProto.BOOL, "int8": TensorProto.INT8, "uint8": TensorProto.UINT8, "int16": TensorProto.INT16,
    "uint16": TensorProto.UINT16, "int32": TensorProto.INT32, "uint32": TensorProto.UINT32,
    "int64": TensorProto.INT64, "uint64": TensorProto.UINT64, "float16": TensorProto.FLOAT16,
    "float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE,
}
# ml_dtypes names and their ONNX element types.
ML_DTYPES_TYPES = {
    "bfloat16": TensorProto.BFLOAT16, "float8_e4m3fn": TensorProto.FLOAT8E4M3FN,
    "float8_e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ, "float8_e5m2": TensorProto.FLOAT8E5M2,
    "float8_e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ, "int4": TensorProto.INT4, "uint4": TensorProto.UINT4,
}


def identity_model(path, element_type, shape=(2, 3)):
    """y = Identity(x) for one element type; z = Identity(x) too, through a Cast to itself (a
    computed output, not the input)."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"], name="identity"),
         helper.make_node("Cast", ["x"], ["z"], name="cast", to=element_type)],
        "identity",
        [helper.make_tensor_value_info("x", element_type, list(shape))],
        [helper.make_tensor_value_info("y", element_type, list(shape)),
         helper.make_tensor_value_info("z", element_type, list(shape))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, str(path))
    return str(path)
