"""Training from Python: ``hl.train`` is ``harmony simulate --task train``
(same seed, same model, bit for bit), the fitted ``Model`` predicts labels or values, and bad
arguments raise named errors."""

import json
import subprocess

import numpy as np
import pytest

import harmony_ldp as hl

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def adult(root):
    return pd.read_csv(root / "data" / "adult.csv")


@pytest.fixture(scope="module")
def adult_schema(root):
    return hl.Schema.from_toml(root / "examples" / "adult.toml")


def test_train_is_the_clis_simulation(root, adult, adult_schema, harmony_bin):
    """`harmony simulate --task train --seed 9` and hl.train(seed=9) on Adult: the same
    estimate document (the model and the round state) for the same options, every number equal."""
    out = subprocess.run(
        [harmony_bin, "simulate", "--data", str(root / "data" / "adult.csv"), "--schema",
         str(root / "examples" / "adult.toml"), "--task", "train", "--target", "income", "--model", "logistic",
         "--epsilon", "4", "--batch-size", "400", "--rounds", "100", "--seed", "9", "--format", "json"],
        check=True, capture_output=True, text=True)
    cli = json.loads(out.stdout)["results"][0]["estimates"]
    m = hl.train(adult, target="income", model="logistic", epsilon=4.0, schema=adult_schema,
                 batch_size=400, rounds=100, seed=9)
    doc = {k: v for k, v in m.estimates.document.items() if k != "collection"}
    assert doc == {k: v for k, v in cli.items() if k != "collection"}
    assert m.features == cli["features"] and m.coef_.tolist() == cli["state"]["model"]
    # The CLI scores the same model on the rows; so does Model.score.
    cli_score = json.loads(out.stdout)["results"][0]["score"]
    assert m.score(adult) == pytest.approx(cli_score["value"], abs=1e-12)
    assert m.score(adult) < cli_score["baseline_value"], "better than the majority class at ε = 4"
    table = m.estimates["model"]
    assert list(table["feature"]) == m.features and np.isnan(table["std_error"]).all()


def test_predict_labels_values_and_margins():
    rng = np.random.default_rng(11)
    n = 40_000
    x1, x2 = rng.uniform(-1, 1, n), rng.uniform(-1, 1, n)
    city = rng.choice(["a", "b"], n)
    label = np.where(x1 + 0.5 * x2 + (city == "b") * 0.4 > 0.2, "hi", "lo")
    frame = pd.DataFrame({"x1": x1, "x2": x2, "city": city, "label": label})
    schema = [{"kind": "numeric", "name": "x1", "min": -1, "max": 1},
              {"kind": "numeric", "name": "x2", "min": -1, "max": 1},
              {"kind": "categorical", "name": "city", "categories": ["a", "b"]},
              {"kind": "categorical", "name": "label", "categories": ["hi", "lo"]}]
    m = hl.train(frame, target="label", model="logistic", epsilon=8.0, schema=schema, positive="hi", seed=3)
    assert m.features[0] == "(intercept)" and len(m.coef_) == len(m.features)
    pred = m.predict(frame.drop(columns=["label"]))
    assert set(pred) <= {"hi", "lo"} and len(pred) == n
    assert m.score(frame) < 0.2, m.score(frame)
    margins = m.decision_function(frame)
    assert ((margins > 0) == (pred == "hi")).all()
    # The default batch size and rounds are the CLI's --devices n: g·T ≤ n devices used.
    st = m.estimates.document["state"]
    assert st["batch_size"] * (st["round"] - 1) <= n
    # A numeric target with a threshold: True above it.
    frame["y"] = x1 * 3 + 5
    schema2 = schema[:3] + [{"kind": "numeric", "name": "y", "min": 0, "max": 10}]
    m2 = hl.train(frame.drop(columns=["label"]), target="y", model="svm", epsilon=8.0, schema=schema2,
                  threshold=5.0, seed=4)
    assert m2.predict({"x1": np.array([-0.9, 0.9]), "x2": np.zeros(2), "city": np.array(["a", "a"])}).tolist() == [False, True]


def test_linear_model_predicts_in_the_targets_units():
    rng = np.random.default_rng(2)
    x = rng.uniform(0, 10, 50_000)
    frame = {"x": x, "y": 1.0 + 0.6 * x + rng.normal(0, 0.3, 50_000)}
    schema = [{"kind": "numeric", "name": "x", "min": 0, "max": 10},
              {"kind": "numeric", "name": "y", "min": 0, "max": 8}]
    m = hl.train(frame, target="y", model="linear", epsilon=4.0, schema=schema, seed=5)
    p = m.predict({"x": np.array([2.0, 8.0])})
    assert p[0] < p[1] and abs(p[1] - 5.8) < 1.5, p
    assert m.score(frame) < np.var((frame["y"] - 4.0) / 4.0), "better than the mean (on the [-1, 1] scale)"


def test_bad_arguments_are_named():
    frame = {"x": np.linspace(-1, 1, 100), "y": np.array(["a", "b"] * 50)}
    with pytest.raises(hl.HarmonyError, match="target"):
        hl.train(frame, target="nope")
    with pytest.raises(hl.HarmonyError, match="batch_size"):
        hl.train(frame, target="y", batch_size=0)
    with pytest.raises(hl.HarmonyError, match="epsilon"):
        hl.train(frame, target="y", epsilon=-1.0)
    with pytest.raises(hl.HarmonyError, match="task"):
        hl.train(frame, target="y", model="forest")
    m = hl.train(frame, target="y", epsilon=2.0, seed=1)
    with pytest.raises(hl.HarmonyError, match="target column"):
        m.score({"x": np.zeros(3)})
