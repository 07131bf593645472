"""Schemas (dict, TOML, inferred), encoding with the invalid-value policies, and the seeded
simulation: the same estimates as `harmony simulate` on Adult, to the last bit."""

import json
import subprocess
import warnings

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


def test_schema_from_toml_dict_and_back(adult_schema):
    s = adult_schema
    assert s.names[:3] == ["age", "workclass", "fnlwgt"] and len(s.names) == 15
    assert s.epsilon == [0.5, 1.0, 2.0, 4.0] and s.strategies == ["split", "harmony", "sample-k"]
    assert s.invalid == "error" and s.to_dict()["bins"]["hours_per_week"] == 5
    again = hl.Schema(s.to_dict())
    assert again.to_dict() == s.to_dict()
    short = hl.Schema({"age": (17, 90), "sex": ["Female", "Male"]})
    assert short.attributes == [s.attributes[0], s.attributes[9]]


def test_schema_errors():
    with pytest.raises(hl.HarmonyError, match="unique"):
        hl.Schema({"attributes": [{"name": "a", "kind": "numeric", "min": 0, "max": 1}] * 2})
    with pytest.raises(hl.HarmonyError, match=r"x: \[1, 1\]"):
        hl.Schema({"x": (1, 1)})
    with pytest.raises(hl.HarmonyError, match="does not parse"):
        hl.Schema({"attributes": [{"name": "a", "kind": "numeric", "min": 0, "max": 1}], "epsilons": [1.0]})
    with pytest.raises(hl.HarmonyError):
        hl.Schema({"x": 3})
    with pytest.raises(hl.HarmonyError):
        hl.Schema([("x", (0, 1))])


def test_infer_like_the_cli(adult):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        s = hl.Schema.infer(adult, max_categories=100)
    assert any("not private" in str(x.message) for x in w)
    kinds = {a["name"]: a["kind"] for a in s.attributes}
    assert kinds["age"] == "numeric" and kinds["workclass"] == "categorical"
    wc = next(a for a in s.attributes if a["name"] == "workclass")
    assert wc["categories"][0] == "?"  # empty cells
    age = next(a for a in s.attributes if a["name"] == "age")
    assert (age["min"], age["max"]) == (17.0, 90.0)


def test_encode_policies():
    frame = {"age": [20, 300, 30, float("nan")], "sex": ["F", "M", "X", "M"]}
    spec = {"attributes": [{"name": "age", "kind": "numeric", "min": 17, "max": 90},
                           {"name": "sex", "kind": "categorical", "categories": ["F", "M"]}]}
    with pytest.raises(hl.HarmonyError) as e:
        hl.Schema(spec).encode(frame)
    assert e.value.field == 'row 1, column "age"' and e.value.value == "300.0"
    cols, counts = hl.Schema({**spec, "invalid": "skip"}).encode(frame)
    assert counts == {"rows": 1, "skipped": 3, "clamped": 0} and cols[0].tolist() == [20.0]
    cols, counts = hl.Schema({**spec, "invalid": "clamp"}).encode(frame)
    assert counts == {"rows": 2, "skipped": 2, "clamped": 1} and cols[0].tolist() == [20.0, 90.0]
    with pytest.raises(hl.HarmonyError, match="without column"):
        hl.Schema(spec).encode({"age": [20]})


def test_simulate_matches_the_cli_on_adult(root, adult, adult_schema, harmony_bin):
    """`harmony simulate --runs 1 --seed 7 --format json` and hl.simulate(seed=7): every
    estimate, standard error and CI bound of the 12 (ε, strategy) cells, bit for bit."""
    out = subprocess.run(
        [harmony_bin, "simulate", "--data", str(root / "data" / "adult.csv"), "--schema",
         str(root / "examples" / "adult.toml"), "--runs", "1", "--seed", "7", "--format", "json"],
        check=True, capture_output=True, text=True)
    cli = json.loads(out.stdout)
    t = hl.simulate(adult, adult_schema, runs=1, seed=7)
    assert cli["n"] == t.attrs["rows"] == 48842 and len(cli["results"]) == 12
    compared = 0
    for res in cli["results"]:
        cell = t[(t.epsilon == res["epsilon"]) & (t.strategy == res["strategy"])]
        assert cell.k.iloc[0] == res["k"] and cell.numeric_mechanism.iloc[0] == res["numeric_mechanism"]
        for a in res["attributes"]:
            rows = cell[cell.attribute == a["name"]]
            if a["kind"] == "numeric":
                want = [(a["true_mean"], a["estimate"], a["std_error"], *a["ci95"])]
            else:
                want = [(c["true"], c["estimate"], c["std_error"], *c["ci95"]) for c in a["categories"]]
                assert rows.category.tolist() == [c["label"] for c in a["categories"]]
            got = list(rows[["truth", "estimate", "std_error", "ci_low", "ci_high"]].itertuples(index=False, name=None))
            assert got == want, (res["epsilon"], res["strategy"], a["name"])
            compared += len(want)
    cells = sum(1 if a["kind"] == "numeric" else len(a["categories"]) for a in adult_schema.attributes)
    assert compared == 12 * cells == 12 * 110  # 6 numeric attributes, 104 categories


def test_simulate_reads_text_frames_and_dicts_alike(root, adult_schema):
    text = pd.read_csv(root / "data" / "adult.csv", dtype=str, keep_default_na=False)
    typed = pd.read_csv(root / "data" / "adult.csv")
    a = hl.simulate(text.head(3000), adult_schema, epsilon=1.0, strategy="harmony", seed=2)
    b = hl.simulate({c: typed[c].head(3000).tolist() for c in typed.columns}, adult_schema, epsilon=1.0,
                    strategy="harmony", seed=2, as_frame=False)
    assert np.array_equal(a.estimate.to_numpy(), b["estimate"])


def test_simulate_runs_options_and_truth(adult, adult_schema):
    t = hl.simulate(adult, adult_schema, epsilon=[2.0], strategy=["sample-k", "split"], runs=3, seed=5,
                    numeric_mechanism="pm", categorical_mechanism="grr", k=2)
    assert sorted(t.run.unique()) == [0, 1, 2]
    assert set(t.numeric_mechanism) == {"pm"} and set(t.categorical_mechanism) == {"grr"}
    assert set(t[t.strategy == "sample-k"].k) == {2}
    age = t[(t.attribute == "age")]
    assert np.allclose(age.truth, adult.age.mean())
    # Different runs, different numbers; each estimate within z = 4.42 of the truth.
    assert age.estimate.nunique() == len(age)
    assert (np.abs(t.estimate - t.truth) < 4.42 * t.std_error).all()
    with pytest.raises(hl.HarmonyError, match="strategy"):
        hl.simulate(adult, adult_schema, strategy="nope")
    with pytest.raises(hl.HarmonyError, match="runs"):
        hl.simulate(adult, adult_schema, runs=0)
    with pytest.raises(hl.HarmonyError, match="k is"):
        hl.simulate(adult, adult_schema, k="many")


def test_missing_values_report_and_impute():
    """Missing-value policies (as the CLI's schema files): `report` adds a presence column after
    a numeric attribute and the category "(missing)" to a categorical one; `impute` fills in.
    No row is skipped, and the present values' mean and frequencies come with their truths."""
    import pandas as pd

    rng = np.random.default_rng(3)
    n = 20000
    age = rng.uniform(20, 60, n)
    age[rng.random(n) < 0.3] = np.nan
    sex = np.where(rng.random(n) < 0.4, "F", "M").astype(object)
    sex[rng.random(n) < 0.2] = None
    hours = rng.uniform(0, 80, n)
    hours[rng.random(n) < 0.1] = np.nan
    frame = pd.DataFrame({"age": age, "sex": sex, "hours": hours})
    schema = hl.Schema({"attributes": [
        {"name": "age", "kind": "numeric", "min": 0, "max": 100, "missing": "report"},
        {"name": "sex", "kind": "categorical", "categories": ["F", "M"], "missing": "report"},
        {"name": "hours", "kind": "numeric", "min": 0, "max": 80, "missing": {"impute": 40}},
    ]})
    cols, counts = schema.encode(frame)
    assert len(cols) == 4 and counts == {"rows": n, "skipped": 0, "clamped": 0}
    assert int(cols[1].sum()) == int(np.isnan(age).sum())  # the presence column
    assert int((cols[2] == 2).sum()) == int(pd.isna(sex).sum())  # "(missing)"
    assert (cols[3][np.isnan(hours)] == 40).all()
    t = hl.simulate(frame, schema, epsilon=4.0, strategy="split", runs=1, seed=1)
    pm = t[(t.attribute == "age") & (t.category == "(present mean)")].iloc[0]
    assert abs(pm.truth - np.nanmean(age)) < 1e-9
    assert abs(pm.estimate - pm.truth) < 4.42 * pm.std_error
    pf = t[(t.attribute == "sex") & (t.category == "F | present")].iloc[0]
    assert abs(pf.truth - np.mean(sex[~pd.isna(sex)] == "F")) < 1e-9
    assert abs(pf.estimate - pf.truth) < 4.42 * pf.std_error
