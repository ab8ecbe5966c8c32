"""ai.onnx.ml operators (the predictors and transforms skl2onnx writes): each case builds one
node with onnx.helper (opset import ai.onnx.ml 1 or 3), runs it in onnxruntime and in kiln on the
same random inputs (fixed seed) and compares: labels and integer outputs exactly, scores to float
rounding. Where the spec leaves a case open (the binary classifiers), kiln follows onnxruntime,
so these cases pin that down too."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln
from test_contrib_ops import run_both

ML = "ai.onnx.ml"
ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
        np.dtype(np.int64): TensorProto.INT64, np.dtype(np.int32): TensorProto.INT32,
        np.dtype(object): TensorProto.STRING}
POST = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"]


def ml_model(op, inputs, outputs, ml_opset=3, **attrs):
    """One `op` node of ai.onnx.ml. inputs: (name, array) pairs, all graph inputs; outputs: (name,
    TensorProto elem type) pairs."""
    node = helper.make_node(op, [n for n, _ in inputs], [n for n, _ in outputs], domain=ML,
                            name=f"{op}_node", **attrs)
    graph = helper.make_graph(
        [node], op, [helper.make_tensor_value_info(n, ELEM[a.dtype], a.shape) for n, a in inputs],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(ML, ml_opset)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8).SerializeToString()


def compare(op, inputs, outputs, ml_opset=3, atol=1e-5, **attrs):
    model = ml_model(op, inputs, outputs, ml_opset, **attrs)
    ort, ours = run_both(model, dict(inputs))
    for (name, _), want, got in zip(outputs, ort, ours):
        assert got.shape == want.shape, f"{op} output {name}: {got.shape} vs {want.shape}"
        if want.dtype == object or np.issubdtype(want.dtype, np.integer):
            assert got.dtype == want.dtype, name
            np.testing.assert_array_equal(got, want, err_msg=f"{op} output {name}")
        else:
            assert got.dtype == want.dtype, name
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=atol, err_msg=f"{op} output {name}")
    return ours


def rng(seed=0):
    return np.random.default_rng(seed)


def features(r, rows=7, cols=4, dtype=np.float32):
    x = r.normal(size=(rows, cols))
    return (np.round(x * 3) if np.issubdtype(dtype, np.integer) else x).astype(dtype)


def labels_attr(prefix, n, strings, ints_suffix="ints"):
    if strings:
        return {f"{prefix}_strings": [f"class_{i}" for i in range(n)]}
    return {f"{prefix}_{ints_suffix}": [int(3 * i + 2) for i in range(n)]}


def classifier_outputs(strings):
    return [("label", TensorProto.STRING if strings else TensorProto.INT64), ("scores", TensorProto.FLOAT)]


# ---- LinearClassifier / LinearRegressor ---------------------------------------------------------

@pytest.mark.parametrize("post", POST)
@pytest.mark.parametrize("strings", [False, True])
def test_linear_classifier_multiclass(post, strings):
    r = rng(1)
    # small weights keep the scores inside (0, 1), where PROBIT is defined
    coef = (r.normal(size=(3, 4)) * 0.05).ravel().tolist()
    compare("LinearClassifier", [("X", features(r))], classifier_outputs(strings), coefficients=coef,
            intercepts=[0.5, 0.4, 0.6], post_transform=post, **labels_attr("classlabels", 3, strings))


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32])
def test_linear_classifier_input_types(dtype):
    r = rng(2)
    compare("LinearClassifier", [("X", features(r, dtype=dtype))], classifier_outputs(False),
            coefficients=r.normal(size=8).tolist(), intercepts=[0.1, -0.2], post_transform="LOGISTIC",
            classlabels_ints=[0, 1])


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX"])
@pytest.mark.parametrize("strings", [False, True])
def test_linear_classifier_binary_one_score(post, strings):
    """One score column and two labels: the sign picks the label, the scores are (1 - s, s)."""
    r = rng(3)
    compare("LinearClassifier", [("X", features(r))], classifier_outputs(strings),
            coefficients=r.normal(size=4).tolist(), intercepts=[0.2], post_transform=post,
            **labels_attr("classlabels", 2, strings))


@pytest.mark.parametrize("targets,post", [(1, "NONE"), (1, "PROBIT"), (3, "NONE"), (3, "SOFTMAX"),
                                          (3, "LOGISTIC"), (3, "SOFTMAX_ZERO")])
def test_linear_regressor(targets, post):
    r = rng(5)
    compare("LinearRegressor", [("X", features(r))], [("Y", TensorProto.FLOAT)], targets=targets,
            coefficients=(r.normal(size=4 * targets) * 0.05).tolist(),
            intercepts=[0.5] * targets, post_transform=post)


def test_linear_regressor_one_row_vector():
    r = rng(6)
    compare("LinearRegressor", [("X", r.normal(size=4).astype(np.float32))], [("Y", TensorProto.FLOAT)],
            coefficients=r.normal(size=4).tolist(), intercepts=[1.0])


# ---- SVMClassifier / SVMRegressor ---------------------------------------------------------------

KERNELS = ["LINEAR", "POLY", "RBF", "SIGMOID"]


def svc_attrs(r, classes, per_class=(3, 2, 4, 1), features_=4, proba=False):
    per = list(per_class[:classes])
    vectors = sum(per)
    attrs = dict(vectors_per_class=per, support_vectors=r.normal(size=vectors * features_).tolist(),
                 coefficients=r.normal(size=(classes - 1) * vectors).tolist(),
                 rho=r.normal(size=classes * (classes - 1) // 2).tolist(),
                 kernel_params=[0.3, 0.5, 3.0])
    if proba:
        pairs = classes * (classes - 1) // 2
        attrs.update(prob_a=(-1 - r.random(pairs)).tolist(), prob_b=(r.normal(size=pairs) * 0.1).tolist())
    return attrs


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("classes", [2, 3, 4])
@pytest.mark.parametrize("proba", [False, True])
def test_svm_classifier(kernel, classes, proba):
    r = rng(7)
    compare("SVMClassifier", [("X", features(r, rows=9))], classifier_outputs(False), kernel_type=kernel,
            classlabels_ints=list(range(classes)), **svc_attrs(r, classes, proba=proba))


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("classes,proba", [(2, False), (3, False), (3, True)])
def test_svm_classifier_post_transform(post, classes, proba):
    r = rng(8)
    compare("SVMClassifier", [("X", features(r))], classifier_outputs(True), kernel_type="RBF",
            post_transform=post, **labels_attr("classlabels", classes, True),
            **svc_attrs(r, classes, proba=proba))


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("positive", [False, True])
def test_svm_classifier_liblinear(classes, positive):
    """No support vectors: liblinear's scores X * coefficients^T + rho[0], one per class."""
    r = rng(9)
    coef = r.normal(size=classes * 4)
    compare("SVMClassifier", [("X", features(r))], classifier_outputs(False),
            coefficients=(np.abs(coef) * 0.1 if positive else coef).tolist(), rho=[0.05],
            kernel_params=[0.0, 0.0, 0.0], classlabels_ints=list(range(classes)))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("one_class", [0, 1])
def test_svm_regressor(kernel, one_class):
    r = rng(10)
    compare("SVMRegressor", [("X", features(r))], [("Y", TensorProto.FLOAT)], kernel_type=kernel,
            n_supports=5, support_vectors=r.normal(size=20).tolist(), coefficients=r.normal(size=5).tolist(),
            rho=[0.3], kernel_params=[0.2, 0.1, 2.0], one_class=one_class)


def test_svm_regressor_linear_mode():
    r = rng(11)
    compare("SVMRegressor", [("X", features(r))], [("Y", TensorProto.FLOAT)],
            coefficients=r.normal(size=4).tolist(), rho=[0.3], kernel_params=[0.0, 0.0, 0.0])


# ---- TreeEnsembleClassifier / TreeEnsembleRegressor ---------------------------------------------

def random_forest(r, trees, depth, features_, weights_per_leaf, weight=lambda r: float(r.normal())):
    """Full binary trees in the (tree id, node id) form: nodes attributes and the leaves' (tree,
    node, id, weight) lists. weights_per_leaf(r) -> the ids a leaf weighs."""
    nodes = {k: [] for k in ("treeids", "nodeids", "featureids", "modes", "values", "truenodeids",
                             "falsenodeids", "missing_value_tracks_true")}
    leaves = {k: [] for k in ("treeids", "nodeids", "ids", "weights")}
    modes = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
    for t in range(trees):
        for n in range(2 ** (depth + 1) - 1):
            leaf = n >= 2 ** depth - 1
            nodes["treeids"].append(t)
            nodes["nodeids"].append(n)
            nodes["featureids"].append(0 if leaf else int(r.integers(features_)))
            nodes["modes"].append("LEAF" if leaf else modes[(t + n) % 4 if t % 3 else int(r.integers(6))])
            nodes["values"].append(0.0 if leaf else float(np.round(r.normal(), 1)))
            nodes["truenodeids"].append(0 if leaf else 2 * n + 1)
            nodes["falsenodeids"].append(0 if leaf else 2 * n + 2)
            nodes["missing_value_tracks_true"].append(int(r.integers(2)))
            if leaf:
                for i in weights_per_leaf(r):
                    leaves["treeids"].append(t)
                    leaves["nodeids"].append(n)
                    leaves["ids"].append(int(i))
                    leaves["weights"].append(weight(r))
    return nodes, leaves


def forest_attrs(nodes, leaves, prefix, as_tensor=False):
    attrs = {f"nodes_{k}": v for k, v in nodes.items() if not (as_tensor and k == "values")}
    attrs.update({f"{prefix}_{k}": v for k, v in leaves.items() if not (as_tensor and k == "weights")})
    if as_tensor:
        attrs["nodes_values_as_tensor"] = numpy_helper.from_array(np.array(nodes["values"], np.float32))
        attrs[f"{prefix}_weights_as_tensor"] = numpy_helper.from_array(np.array(leaves["weights"], np.float32))
    return attrs


def tree_features(r, rows=11, cols=4, dtype=np.float32):
    x = np.round(r.normal(size=(rows, cols)), 1)  # ties with the splits exercise EQ / NEQ / LEQ
    x[1, 2] = np.nan
    return x.astype(dtype)


@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("targets", [1, 3])
@pytest.mark.parametrize("ml_opset", [1, 3])
def test_tree_ensemble_regressor(aggregate, targets, ml_opset):
    r = rng(12)
    nodes, leaves = random_forest(r, 4, 3, 4, lambda r: range(targets))
    compare("TreeEnsembleRegressor", [("X", tree_features(r))], [("Y", TensorProto.FLOAT)], ml_opset=ml_opset,
            n_targets=targets, aggregate_function=aggregate, base_values=[0.25 * (i + 1) for i in range(targets)],
            **forest_attrs(nodes, leaves, "target", as_tensor=ml_opset == 3))


@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO"])
def test_tree_ensemble_regressor_post_transform(post):
    r = rng(13)
    nodes, leaves = random_forest(r, 3, 2, 4, lambda r: range(3))
    compare("TreeEnsembleRegressor", [("X", tree_features(r))], [("Y", TensorProto.FLOAT)], n_targets=3,
            post_transform=post, **forest_attrs(nodes, leaves, "target"))


def test_tree_ensemble_regressor_double_input():
    """float64 X (onnxruntime has no int32 / int64 tree kernels to compare with)."""
    r = rng(14)
    nodes, leaves = random_forest(r, 3, 3, 4, lambda r: [0])
    compare("TreeEnsembleRegressor", [("X", tree_features(r).astype(np.float64))], [("Y", TensorProto.FLOAT)],
            n_targets=1, **forest_attrs(nodes, leaves, "target"))


@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("strings", [False, True])
@pytest.mark.parametrize("base", [False, True])
def test_tree_ensemble_classifier_multiclass(post, strings, base):
    r = rng(15)
    nodes, leaves = random_forest(r, 5, 3, 4, lambda r: sorted(set(r.integers(0, 4, 2).tolist())),
                                  weight=lambda r: float(r.random()))
    extra = {"base_values": [0.1, -0.2, 0.3, 0.0]} if base else {}
    compare("TreeEnsembleClassifier", [("X", tree_features(r))], classifier_outputs(strings), post_transform=post,
            **labels_attr("classlabels", 4, strings, "int64s"), **extra, **forest_attrs(nodes, leaves, "class"))


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX"])
@pytest.mark.parametrize("weights", ["positive", "mixed"])
@pytest.mark.parametrize("base", [None, [0.2]])
@pytest.mark.parametrize("ml_opset", [1, 3])
def test_tree_ensemble_classifier_binary(post, weights, base, ml_opset):
    """Two classes, leaves weighing class 1 only (what skl2onnx writes for binary forests and
    gradient boosting): the label from the weight's threshold (0.5 for probabilities, 0 for margins)."""
    r = rng(16)
    weight = (lambda r: float(r.random())) if weights == "positive" else (lambda r: float(r.normal()))
    nodes, leaves = random_forest(r, 3, 3, 4, lambda r: [0], weight=weight)
    extra = {"base_values": base} if base else {}
    compare("TreeEnsembleClassifier", [("X", tree_features(r))], classifier_outputs(False), ml_opset=ml_opset,
            post_transform=post, classlabels_int64s=[0, 1], **extra,
            **forest_attrs(nodes, leaves, "class", as_tensor=ml_opset == 3))


def test_tree_ensemble_classifier_binary_probit():
    """PROBIT of the one binary score: onnxruntime writes column 0 only (column 1 is whatever its
    buffer held; kiln writes 0), so the labels and column 0 are compared."""
    r = rng(16)
    nodes, leaves = random_forest(r, 3, 3, 4, lambda r: [0], weight=lambda r: float(r.random()) / 3.5)
    x = tree_features(r)
    model = ml_model("TreeEnsembleClassifier", [("X", x)], classifier_outputs(False), post_transform="PROBIT",
                     classlabels_int64s=[0, 1], **forest_attrs(nodes, leaves, "class"))
    ort, ours = run_both(model, {"X": x})
    np.testing.assert_array_equal(ours[0], ort[0])
    np.testing.assert_allclose(ours[1][:, 0], ort[1][:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(ours[1][:, 1], 0)


@pytest.mark.parametrize("post", ["NONE", "SOFTMAX"])
def test_tree_ensemble_classifier_two_classes_weighed(post):
    """Two classes, both weighed: the label is labels[1] when class 1's score is positive, as
    onnxruntime decides it (compared with labels 0 and 1, where its label is a class label)."""
    r = rng(17)
    nodes, leaves = random_forest(r, 4, 2, 4, lambda r: [0, 1], weight=lambda r: float(r.normal()))
    compare("TreeEnsembleClassifier", [("X", tree_features(r))], classifier_outputs(False), post_transform=post,
            classlabels_int64s=[0, 1], **forest_attrs(nodes, leaves, "class"))


def test_tree_ensemble_classifier_single_leaf_tree():
    """A tree that is one leaf (a root no branch points to, of mode LEAF)."""
    attrs = dict(nodes_treeids=[0, 0, 0, 1], nodes_nodeids=[0, 1, 2, 0], nodes_featureids=[1, 0, 0, 0],
                 nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF", "LEAF"], nodes_values=[0.5, 0, 0, 0],
                 nodes_truenodeids=[1, 0, 0, 0], nodes_falsenodeids=[2, 0, 0, 0],
                 class_treeids=[0, 0, 1], class_nodeids=[1, 2, 0], class_ids=[0, 2, 1],
                 class_weights=[0.5, 0.7, 0.2], classlabels_int64s=[10, 20, 30])
    x = np.array([[0, 0], [0, 1], [3, 0.5]], np.float32)
    label, scores = compare("TreeEnsembleClassifier", [("X", x)], classifier_outputs(False), **attrs)
    np.testing.assert_array_equal(label, [10, 30, 10])  # hand-computed
    np.testing.assert_allclose(scores, [[0.5, 0.2, 0], [0, 0.2, 0.7], [0.5, 0.2, 0]])


# ---- feature transforms -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
@pytest.mark.parametrize("per_column", [False, True])
def test_scaler(dtype, per_column):
    r = rng(18)
    n = 4 if per_column else 1
    compare("Scaler", [("X", features(r, dtype=dtype))], [("Y", TensorProto.FLOAT)],
            offset=r.normal(size=n).tolist(), scale=r.normal(size=n).tolist())


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
@pytest.mark.parametrize("shape", [(6, 5), (5,)])
def test_normalizer(norm, shape):
    r = rng(19)
    x = r.normal(size=shape).astype(np.float32)
    if len(shape) == 2:
        x[2] = 0  # a zero row stays zero
    compare("Normalizer", [("X", x)], [("Y", TensorProto.FLOAT)], norm=norm)


@pytest.mark.parametrize("per_column", [False, True])
def test_imputer_float_nan(per_column):
    r = rng(20)
    x = features(r)
    x[r.random(x.shape) < 0.3] = np.nan
    values = r.normal(size=4 if per_column else 1).tolist()
    compare("Imputer", [("X", x)], [("Y", TensorProto.FLOAT)], imputed_value_floats=values,
            replaced_value_float=float("nan"))


def test_imputer_float_replaced_value():
    r = rng(21)
    x = features(r)
    x[::2, 1] = -1
    compare("Imputer", [("X", x)], [("Y", TensorProto.FLOAT)], imputed_value_floats=[9.0],
            replaced_value_float=-1.0)


def test_imputer_int64():
    r = rng(22)
    x = features(r, dtype=np.int64)
    compare("Imputer", [("X", x)], [("Y", TensorProto.INT64)], imputed_value_int64s=[7, 8, 9, 10],
            replaced_value_int64=0)


@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.float64])
def test_one_hot_encoder_numbers(dtype):
    x = np.array([[1, 5, 2], [0, 2, 9]], dtype)
    compare("OneHotEncoder", [("X", x)], [("Y", TensorProto.FLOAT)], cats_int64s=[2, 1, 9, 4], zeros=1)


def test_one_hot_encoder_strings():
    x = np.array([["a", "q"], ["c", "b"]], object)
    compare("OneHotEncoder", [("X", x)], [("Y", TensorProto.FLOAT)], cats_strings=["b", "a", "c"])


def test_one_hot_encoder_refuses_unknown_category_without_zeros():
    model = ml_model("OneHotEncoder", [("X", np.array([1, 3], np.int64))], [("Y", TensorProto.FLOAT)],
                     cats_int64s=[1, 2], zeros=0)
    session = kiln.InferenceSession(model, providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match=r"OneHotEncoder_node.*value 1 of X is not a category"):
        session.run(None, {"X": np.array([1, 3], np.int64)})


def test_feature_vectorizer():
    r = rng(23)
    a = features(r, rows=5, cols=2)
    b = features(r, rows=5, cols=3)
    c = features(r, rows=5, cols=1)
    compare("FeatureVectorizer", [("A", a), ("B", b), ("C", c)], [("Y", TensorProto.FLOAT)],
            inputdimensions=[2, 3, 1])


@pytest.mark.parametrize("direction", ["to_int", "to_string"])
def test_category_mapper(direction):
    cats = dict(cats_strings=["cat", "dog", "cow"], cats_int64s=[4, 7, 9], default_int64=-5,
                default_string="none")
    if direction == "to_int":
        compare("CategoryMapper", [("X", np.array([["dog", "x"], ["cow", "cat"]], object))],
                [("Y", TensorProto.INT64)], **cats)
    else:
        compare("CategoryMapper", [("X", np.array([9, 1, 4, 7], np.int64))], [("Y", TensorProto.STRING)], **cats)


# ---- errors -------------------------------------------------------------------------------------

def kiln_error(model, feeds):
    with pytest.raises(Exception) as error:
        kiln.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)
    return str(error.value)


def test_bad_post_transform_names_node_and_attribute():
    x = np.ones((2, 4), np.float32)
    model = ml_model("LinearClassifier", [("X", x)], classifier_outputs(False), coefficients=[0.1] * 8,
                     intercepts=[0.0, 0.0], classlabels_ints=[0, 1], post_transform="SQUASH")
    message = kiln_error(model, {"X": x})
    assert "LinearClassifier_node" in message and "post_transform" in message and "SQUASH" in message


def test_bad_kernel_type_names_node_and_attribute():
    r = rng(24)
    x = features(r)
    model = ml_model("SVMClassifier", [("X", x)], classifier_outputs(False), kernel_type="CUBIC",
                     classlabels_ints=[0, 1], **svc_attrs(r, 2))
    message = kiln_error(model, {"X": x})
    assert "SVMClassifier_node" in message and "kernel_type" in message and "CUBIC" in message


def test_features_mismatch_is_reported():
    x = np.ones((2, 3), np.float32)
    model = ml_model("LinearRegressor", [("X", x)], [("Y", TensorProto.FLOAT)], coefficients=[0.1] * 4)
    assert "X has 3 features but the coefficients hold 4" in kiln_error(model, {"X": x})


def test_tree_without_root_is_reported():
    x = np.ones((2, 1), np.float32)
    model = ml_model("TreeEnsembleRegressor", [("X", x)], [("Y", TensorProto.FLOAT)], n_targets=1,
                     nodes_treeids=[0, 0], nodes_nodeids=[0, 1], nodes_featureids=[0, 0],
                     nodes_modes=["BRANCH_LEQ", "BRANCH_LEQ"], nodes_values=[0.0, 0.0],
                     nodes_truenodeids=[1, 0], nodes_falsenodeids=[1, 0],
                     target_treeids=[0], target_nodeids=[1], target_ids=[0], target_weights=[1.0])
    assert "tree 0 has 0 root nodes" in kiln_error(model, {"X": x})


def zipmap_model(x_shape, **labels):
    """ZipMap over X, its output declared seq(map(int64|string, float)) as skl2onnx declares it."""
    key = TensorProto.STRING if "classlabels_strings" in labels else TensorProto.INT64
    node = helper.make_node("ZipMap", ["X"], ["Z"], domain=ML, name="zm", **labels)
    z_type = helper.make_sequence_type_proto(
        helper.make_map_type_proto(key, helper.make_tensor_type_proto(TensorProto.FLOAT, [])))
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)],
                              [helper.make_value_info("Z", z_type)])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=8).SerializeToString()


@pytest.mark.parametrize("rows", [0, 1, 5])
@pytest.mark.parametrize("labels", [{"classlabels_int64s": [4, 0, 9]},
                                    {"classlabels_strings": ["cat", "dog", "emu"]}], ids=["int64", "string"])
def test_zipmap_gives_onnxruntimes_list_of_dicts(rows, labels):
    x = rng(rows).random((rows, 3)).astype(np.float32)
    model = zipmap_model(["N", 3], **labels)
    (want,), (got,) = run_both(model, {"X": x})
    assert isinstance(got, list) and len(got) == len(want) == rows
    for w, g in zip(want, got):
        assert isinstance(g, dict) and list(g) == list(w)  # same keys, in onnxruntime's order
        assert all(type(k) is type(kw) for k, kw in zip(g, w))
        assert g == w  # float32 scores, converted exactly in both
    session = kiln.InferenceSession(model, providers=["CPUExecutionProvider"])
    key = "string" if "classlabels_strings" in labels else "int64"
    assert session.get_outputs()[0].type == f"seq(map({key},tensor(float)))"


def test_zipmap_of_a_1d_input_is_one_map():
    x = np.array([0.25, 0.5, 0.25], np.float32)
    (want,), (got,) = run_both(zipmap_model([3], classlabels_int64s=[1, 2, 3]), {"X": x})
    assert got == want == [{1: 0.25, 2: 0.5, 3: 0.25}]


def test_zipmap_with_more_columns_than_labels_names_the_node():
    x = np.ones((2, 4), np.float32)
    message = kiln_error(zipmap_model(["N", 4], classlabels_int64s=[0, 1, 2]), {"X": x})
    assert "zm" in message and "float32[2x4]" in message and "class label (3)" in message


def test_zipmap_needs_exactly_one_label_list():
    both = zipmap_model(["N", 2], classlabels_int64s=[0, 1], classlabels_strings=["a", "b"])
    assert "exactly one of classlabels_int64s and classlabels_strings" in kiln_error(both, {"X": np.ones((1, 2), np.float32)})


def test_a_map_input_to_another_node_is_refused_by_name():
    zipmap = helper.make_node("ZipMap", ["X"], ["Z"], domain=ML, name="zm", classlabels_int64s=[0, 1])
    length = helper.make_node("SequenceLength", ["Z"], ["n"], name="len")
    graph = helper.make_graph([zipmap, length], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 2])],
                              [helper.make_tensor_value_info("n", TensorProto.INT64, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, 1)])
    message = kiln_error(model.SerializeToString(), {"X": np.ones((2, 2), np.float32)})
    assert "len" in message and "'Z' is a map" in message


@pytest.mark.parametrize("op,attr,bad", [("TreeEnsembleRegressor", "aggregate_function", "MEDIAN"),
                                         ("TreeEnsembleRegressor", "nodes_modes", "BRANCH_ABOUT"),
                                         ("Normalizer", "norm", "L3")])
def test_bad_enum_attributes_name_node_and_attribute(op, attr, bad):
    x = np.ones((2, 1), np.float32)
    if op == "Normalizer":
        model = ml_model(op, [("X", x)], [("Y", TensorProto.FLOAT)], norm=bad)
    else:
        attrs = dict(n_targets=1, nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
                     nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_values=[0.0, 0.0, 0.0],
                     nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0], target_treeids=[0, 0],
                     target_nodeids=[1, 2], target_ids=[0, 0], target_weights=[1.0, 2.0])
        if attr == "nodes_modes":
            attrs["nodes_modes"] = [bad, "LEAF", "LEAF"]
        else:
            attrs[attr] = bad
        model = ml_model(op, [("X", x)], [("Y", TensorProto.FLOAT)], **attrs)
    message = kiln_error(model, {"X": x})
    assert f"{op}_node" in message and attr in message and bad in message


def test_tree_ensemble_classifier_double_thresholds():
    """ml opset 3's nodes_values_as_tensor / class_weights_as_tensor in float64, with float64 X."""
    r = rng(25)
    nodes, leaves = random_forest(r, 3, 3, 4, lambda r: [0, 1, 2], weight=lambda r: float(r.random()))
    attrs = forest_attrs(nodes, leaves, "class")
    del attrs["nodes_values"], attrs["class_weights"]
    attrs["nodes_values_as_tensor"] = numpy_helper.from_array(np.array(nodes["values"], np.float64) + 1e-9)
    attrs["class_weights_as_tensor"] = numpy_helper.from_array(np.array(leaves["weights"], np.float64))
    compare("TreeEnsembleClassifier", [("X", tree_features(r).astype(np.float64))], classifier_outputs(False),
            classlabels_int64s=[0, 1, 2], **attrs)
