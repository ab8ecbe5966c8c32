"""scikit-learn models as skl2onnx exports them: small models trained at test time on fixed random
data, converted, and run in kiln and in onnxruntime on the same rows. Labels must be equal and
probabilities / predictions agree to 1e-5. Most classifiers are converted without ZipMap (options
zipmap=False), which gives the probabilities as a tensor; with ZipMap (skl2onnx's default) the
probabilities are a list of dicts, one per row, label -> probability, which kiln returns as
onnxruntime does."""
import numpy as np
import onnxruntime
import pytest

import kiln

sklearn = pytest.importorskip("sklearn")
skl2onnx = pytest.importorskip("skl2onnx")

from skl2onnx import convert_sklearn  # noqa: E402
from skl2onnx.common.data_types import FloatTensorType, Int64TensorType  # noqa: E402
from sklearn.base import is_classifier  # noqa: E402
from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor,  # noqa: E402
                              RandomForestClassifier, RandomForestRegressor)
from sklearn.impute import SimpleImputer  # noqa: E402
from sklearn.linear_model import LinearRegression, LogisticRegression  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import MinMaxScaler, Normalizer, OneHotEncoder, StandardScaler  # noqa: E402
from sklearn.svm import SVC, SVR, LinearSVC  # noqa: E402
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor  # noqa: E402

FEATURES = 5
OPSETS = {"": 17, "ai.onnx.ml": 3}


def data(classes, seed=0, rows=80, strings=False):
    r = np.random.default_rng(seed)
    x = r.normal(size=(rows, FEATURES)).astype(np.float32)
    score = x[:, 0] + 0.5 * x[:, 1] - 0.3 * x[:, 2] + 0.2 * r.normal(size=rows)
    y = np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))
    if strings:
        y = np.array([f"c{v}" for v in y], object)
    return x, y


def convert(model, zipmap=False, initial_types=None):
    # LinearSVC has no probabilities, hence no ZipMap option
    takes_zipmap = is_classifier(model) and not isinstance(model, LinearSVC)
    options = {id(model): {"zipmap": False}} if takes_zipmap and not zipmap else None
    types = initial_types or [("X", FloatTensorType([None, FEATURES]))]
    return convert_sklearn(model, initial_types=types, options=options, target_opset=OPSETS).SerializeToString()


def run_both(onnx_model, feeds):
    ort = onnxruntime.InferenceSession(onnx_model, providers=["CPUExecutionProvider"]).run(None, feeds)
    ours = kiln.InferenceSession(onnx_model, providers=["CPUExecutionProvider"]).run(None, feeds)
    assert len(ort) == len(ours)
    return ort, ours


def check(onnx_model, feeds, atol=1e-5):
    ort, ours = run_both(onnx_model, feeds)
    for i, (want, got) in enumerate(zip(ort, ours)):
        assert got.shape == want.shape, f"output {i}"
        if want.dtype == object or np.issubdtype(want.dtype, np.integer):
            np.testing.assert_array_equal(got, want, err_msg=f"output {i}")
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=atol, err_msg=f"output {i}")
    return ours


CLASSIFIERS = {
    "logistic_regression": lambda: LogisticRegression(max_iter=500),
    "linear_svc": lambda: LinearSVC(),
    "svc_rbf": lambda: SVC(kernel="rbf", gamma=0.3),
    "svc_rbf_probability": lambda: SVC(kernel="rbf", probability=True, random_state=0),
    "svc_poly": lambda: SVC(kernel="poly", degree=3, coef0=1.0),
    "svc_linear_probability": lambda: SVC(kernel="linear", probability=True, random_state=0),
    "decision_tree": lambda: DecisionTreeClassifier(max_depth=5, random_state=0),
    "random_forest": lambda: RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0),
    "gradient_boosting": lambda: GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0),
}


@pytest.mark.parametrize("name", sorted(CLASSIFIERS))
@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("strings", [False, True])
def test_classifier(name, classes, strings):
    x, y = data(classes, seed=classes, strings=strings)
    model = CLASSIFIERS[name]().fit(x, y)
    test_x = np.random.default_rng(9).normal(size=(40, FEATURES)).astype(np.float32)
    ours = check(convert(model), {"X": test_x})
    # kiln's labels are scikit-learn's own predictions, too
    np.testing.assert_array_equal(ours[0], model.predict(test_x))


REGRESSORS = {
    "linear_regression": lambda: LinearRegression(),
    "svr_rbf": lambda: SVR(kernel="rbf", gamma=0.2),
    "svr_poly": lambda: SVR(kernel="poly", degree=2),
    "decision_tree": lambda: DecisionTreeRegressor(max_depth=5, random_state=0),
    "random_forest": lambda: RandomForestRegressor(n_estimators=8, max_depth=5, random_state=0),
    "gradient_boosting": lambda: GradientBoostingRegressor(n_estimators=10, max_depth=3, random_state=0),
}


@pytest.mark.parametrize("name", sorted(REGRESSORS))
def test_regressor(name):
    r = np.random.default_rng(3)
    x = r.normal(size=(80, FEATURES)).astype(np.float32)
    y = (x[:, 0] * 2 - x[:, 3] + 0.1 * r.normal(size=80)).astype(np.float32)
    model = REGRESSORS[name]().fit(x, y)
    test_x = r.normal(size=(40, FEATURES)).astype(np.float32)
    ours = check(convert(model), {"X": test_x}, atol=1e-4)
    np.testing.assert_allclose(ours[0].ravel(), model.predict(test_x), rtol=1e-4, atol=1e-4)


def pipeline_data(rows=90, seed=5):
    r = np.random.default_rng(seed)
    num = r.normal(size=(rows, 4)).astype(np.float32)
    num[r.random(num.shape) < 0.1] = np.nan
    cat = r.integers(0, 4, size=(rows, 2)).astype(np.int64)
    y = (np.nan_to_num(num[:, 0]) + (cat[:, 0] == 2) > 0.3).astype(np.int64)
    return num, cat, y


@pytest.mark.parametrize("final", ["logistic_regression", "random_forest"])
def test_preprocessing_pipeline(final):
    """SimpleImputer, StandardScaler, MinMaxScaler and Normalizer on the numeric columns,
    OneHotEncoder on the categorical ones, then a classifier: Imputer, Scaler, Normalizer,
    OneHotEncoder, Concat / FeatureVectorizer and the classifier's op in one graph."""
    num, cat, y = pipeline_data()
    numeric = Pipeline([("impute", SimpleImputer(strategy="mean")), ("standard", StandardScaler()),
                        ("minmax", MinMaxScaler()), ("normalize", Normalizer(norm="l2"))])
    columns = ColumnTransformer([("num", numeric, [0, 1, 2, 3]),
                                 ("cat", OneHotEncoder(handle_unknown="ignore"), [4, 5])])
    classifier = (LogisticRegression(max_iter=500) if final == "logistic_regression"
                  else RandomForestClassifier(n_estimators=6, max_depth=4, random_state=0))
    pipe = Pipeline([("columns", columns), ("classify", classifier)])
    table = np.concatenate([num, cat.astype(np.float32)], axis=1)
    pipe.fit(table, y)
    onnx_model = convert_sklearn(
        pipe, initial_types=[("X", FloatTensorType([None, 6]))],
        options={id(classifier): {"zipmap": False}}, target_opset=OPSETS).SerializeToString()
    test_num, test_cat, _ = pipeline_data(rows=30, seed=6)
    test = np.concatenate([test_num, test_cat.astype(np.float32)], axis=1)
    ours = check(onnx_model, {"X": test})
    np.testing.assert_array_equal(ours[0], pipe.predict(test))


@pytest.mark.parametrize("transform", ["one_hot", "standard_scaler", "minmax_scaler", "normalizer_l1",
                                       "normalizer_max", "imputer"])
def test_transformer_alone(transform):
    """Each preprocessing step converted on its own (OneHotEncoder on an int64 input)."""
    num, cat, _ = pipeline_data()
    if transform == "one_hot":
        model = OneHotEncoder(handle_unknown="ignore").fit(cat)
        onnx_model = convert(model, initial_types=[("X", Int64TensorType([None, 2]))])
        test_cat = pipeline_data(rows=20, seed=7)[1]
        test_cat[0, 0] = 9  # unknown: all zeros
        ours = check(onnx_model, {"X": test_cat})
        np.testing.assert_allclose(ours[0], model.transform(test_cat).toarray(), atol=1e-6)
        return
    make = {"standard_scaler": StandardScaler, "minmax_scaler": MinMaxScaler,
            "normalizer_l1": lambda: Normalizer(norm="l1"), "normalizer_max": lambda: Normalizer(norm="max"),
            "imputer": lambda: SimpleImputer(strategy="median")}[transform]
    x = num if transform == "imputer" else np.nan_to_num(num)
    model = make().fit(x)
    onnx_model = convert(model, initial_types=[("X", FloatTensorType([None, 4]))])
    test = pipeline_data(rows=20, seed=8)[0]
    test = test if transform == "imputer" else np.nan_to_num(test)
    ours = check(onnx_model, {"X": test})
    if transform != "normalizer_max":  # ONNX's MAX divides by the row's max, scikit-learn by max |x|
        np.testing.assert_allclose(ours[0], model.transform(test), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("strings", [False, True], ids=["int64-labels", "string-labels"])
@pytest.mark.parametrize("make", [lambda: LogisticRegression(max_iter=500),
                                  lambda: RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0)],
                         ids=["logistic", "forest"])
def test_default_zipmap_output_is_onnxruntimes_list_of_dicts(make, strings):
    x, y = data(3, strings=strings)
    model = make().fit(x, y)
    test = data(3, seed=5, rows=12)[0]
    ort, ours = run_both(convert(model, zipmap=True), {"X": test})
    np.testing.assert_array_equal(ours[0], ort[0])
    assert isinstance(ours[1], list) and len(ours[1]) == len(ort[1]) == len(test)
    for want, got in zip(ort[1], ours[1]):
        assert list(got) == list(want)
        np.testing.assert_allclose(list(got.values()), list(want.values()), rtol=1e-5, atol=1e-5)
    probabilities = model.predict_proba(test)
    np.testing.assert_allclose([list(row.values()) for row in ours[1]], probabilities, rtol=1e-4, atol=1e-5)
