"""Values known only at run time (fed as .npy files): shape tensors asking for negative, huge or
overflowing shapes, and indices outside the data they index."""
import numpy as np

from case import Case
from model_builders import FLOAT, INT64, INT64_MAX, INT64_MIN, const, feeds, info, one_node, save


def fed(op, declared, values, opset=17, **attrs):
    """`op` over graph inputs `declared` ([(name, dtype, shape)]) fed with `values` ({name: array})."""
    def make(d):
        m = one_node(op, [info(*i) for i in declared], opset=opset, **attrs)
        return ["run", save(d, m), *feeds(d, **values)]
    return make


def i64(*values):
    return np.array(values, np.int64)


X3 = ("x", FLOAT, [3])
X23 = ("x", FLOAT, [2, 3])
x3 = np.zeros(3, np.float32)
x23 = np.zeros((2, 3), np.float32)


def shape_input(op, values, data=True):
    declared = ([X3] if data else []) + [("s", INT64, [len(values)])]
    feeds_ = ({"x": x3} if data else {}) | {"s": i64(*values)}
    return fed(op, declared, feeds_)


def indices(op, idx, data=x23, **attrs):
    return fed(op, [("x", FLOAT, list(data.shape)), ("i", INT64, list(np.shape(idx)))], {"x": data, "i": np.array(idx, np.int64)}, **attrs)


def scatter(op, idx, updates, **attrs):
    return fed(op, [X23, ("i", INT64, list(np.shape(idx))), ("u", FLOAT, list(np.shape(updates)))],
               {"x": x23, "i": np.array(idx, np.int64), "u": np.array(updates, np.float32)}, **attrs)


def slice_run(starts, ends, axes=(0,), steps=(1,)):
    names = [("st", starts), ("en", ends), ("ax", axes), ("sp", steps)]
    declared = [X3] + [(n, INT64, [len(v)]) for n, v in names]
    return fed("Slice", declared, {"x": x3} | {n: i64(*v) for n, v in names})


def range_run(start, limit, delta):
    scalars = {"start": start, "limit": limit, "delta": delta}
    return fed("Range", [(n, INT64, []) for n in scalars], {n: np.array(v, np.int64) for n, v in scalars.items()})


def onehot(depth):
    return fed("OneHot", [("i", INT64, [2]), ("depth", INT64, []), ("v", FLOAT, [2])],
               {"i": i64(0, 1), "depth": np.array(depth, np.int64), "v": np.array([0, 1], np.float32)})


NODE = "node 'n'"
TERA = 10**12
CASES = [
    Case("constantofshape-negative", shape_input("ConstantOfShape", [-1], data=False), 1, [NODE, "-1"]),
    Case("constantofshape-1e12", shape_input("ConstantOfShape", [TERA], data=False), 1, [NODE, "output 0 'y': tensor float32[1000000000000] needs"]),
    Case("constantofshape-overflow", shape_input("ConstantOfShape", [1 << 32, 1 << 32], data=False), 1, [NODE, "has too many elements"]),
    Case("expand-negative", shape_input("Expand", [-3]), 1, [NODE, "-3"]),
    Case("expand-1e12", shape_input("Expand", [TERA, 3]), 1, [NODE, "output 0 'y': tensor float32[1000000000000x3] needs"]),
    Case("expand-overflow", shape_input("Expand", [1 << 32, 1 << 32, 3]), 1, [NODE, "has too many elements"]),
    Case("tile-negative-repeats", shape_input("Tile", [-2]), 1, [NODE, "-2"]),
    Case("tile-1e12-repeats", shape_input("Tile", [TERA]), 1, [NODE, "output 0 'y': tensor float32[3000000000000] needs"]),
    Case("tile-int64-max-repeats", shape_input("Tile", [INT64_MAX]), 1, [NODE, "output dim 0 would be 3 x 9223372036854775807, past int64"]),
    Case("reshape-two-minus-ones", shape_input("Reshape", [-1, -1]), 1, [NODE, "more than one -1"]),
    Case("reshape-count-mismatch", shape_input("Reshape", [2, 2]), 1, [NODE, "element counts differ"]),
    Case("reshape-zero-past-input-rank", shape_input("Reshape", [TERA, 0]), 1, [NODE, "is 0 (copy) but the input has rank 1"]),
    Case("reshape-negative", shape_input("Reshape", [-3]), 1, [NODE, "-3"]),
    Case("range-delta-zero", range_run(0, 10, 0), 1, [NODE, "delta is 0"]),
    Case("range-1e12-values", range_run(0, TERA, 1), 1, [NODE, "output 0 'y': tensor int64[1000000000000] needs"]),
    Case("range-int64-extremes", range_run(INT64_MIN, INT64_MAX, 1), 1, [NODE, "the range is too long"]),
    Case("gather-index-past-end", indices("Gather", [5]), 1, [NODE, "5"]),
    Case("gather-index-before-start", indices("Gather", [-3]), 1, [NODE, "-3"]),
    Case("gather-index-int64-min", indices("Gather", [INT64_MIN]), 1, [NODE]),
    Case("gather-axis-1-past-end", indices("Gather", [3], axis=1), 1, [NODE, "3"]),
    Case("gatherelements-past-end", indices("GatherElements", [[0, 7, 0]], axis=1), 1, [NODE, "7"]),
    Case("gatherelements-int64-max", indices("GatherElements", [[INT64_MAX, 0, 0]], axis=1), 1, [NODE]),
    Case("gathernd-past-end", indices("GatherND", [[2, 0]]), 1, [NODE, "2"]),
    Case("gathernd-index-too-long", indices("GatherND", [[0, 0, 0]]), 1, [NODE]),
    Case("scatternd-past-end", scatter("ScatterND", [[4]], [[1, 2, 3]]), 1, [NODE, "4"]),
    Case("scatternd-negative", scatter("ScatterND", [[-9]], [[1, 2, 3]]), 1, [NODE, "-9"]),
    Case("scatterelements-past-end", scatter("ScatterElements", [[0, 9, 0]], [[1, 2, 3]], axis=1), 1, [NODE, "9"]),
    Case("onehot-negative-depth", onehot(-4), 1, [NODE, "-4"]),
    Case("onehot-1e12-depth", onehot(TERA), 1, [NODE, "output 0 'y': tensor float32[2x1000000000000] needs"]),
    Case("slice-step-zero-run", slice_run([0], [3], steps=[0]), 1, [NODE, "step"]),
    Case("slice-int64-extremes-clamp", slice_run([INT64_MIN], [INT64_MAX]), 0, ["y  float32[3]"]),
    Case("slice-reverse-int64-extremes", slice_run([INT64_MAX], [INT64_MIN], steps=[-1]), 0, ["y  float32[3]"]),
    Case("slice-step-int64-min", slice_run([INT64_MAX], [INT64_MIN], steps=[INT64_MIN]), 0, ["y  float32[1]"]),
    Case("slice-axis-out-of-range", slice_run([0], [1], axes=[5]), 1, [NODE, "5"]),
]
