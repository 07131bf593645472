"""Tasks from Python: any CreateCollection request simulated on a frame through the task
registry (the estimate document of `harmony simulate`, bit for bit, for the same seed), its
tables, and the analyst client against `harmony serve` fed the same simulated devices."""

import json
import socket
import subprocess
import time

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


def strip(doc):
    """The document without the collection id (`simulation` in process, an id on a server)."""
    return {k: v for k, v in doc.items() if k != "collection"}


def test_means_document_is_the_clis(root, adult, adult_schema, harmony_bin):
    """`harmony simulate --runs 1 --seed 7 --format json`'s estimate document of each strategy
    at ε = 1 and hl.simulate(spec, frame, seed=7) are equal, every number bit for bit."""
    out = subprocess.run(
        [harmony_bin, "simulate", "--data", str(root / "data" / "adult.csv"), "--schema",
         str(root / "examples" / "adult.toml"), "--runs", "1", "--seed", "7", "--epsilon", "1",
         "--format", "json"], check=True, capture_output=True, text=True)
    results = json.loads(out.stdout)["results"]
    assert [r["strategy"] for r in results] == ["split", "harmony", "sample-k"]
    for r in results:
        spec = {"schema": adult_schema.attributes, "epsilon": 1.0,
                "task": {"kind": "means", "strategy": r["strategy"]}}
        est = hl.simulate(spec, adult, seed=7)
        assert strip(est.document) == strip(r["estimates"]), r["strategy"]
        assert est.reports == 48842 and est.task == "means" and est.names == ["means", "frequencies"]
        means = est["means"]
        age = next(a for a in r["estimates"]["attributes"] if a["name"] == "age")
        row = means[means.attribute == "age"].iloc[0]
        assert (row.estimate, row.std_error, row.ci_low, row.ci_high) == (age["estimate"], age["std_error"], *age["ci95"])
        assert len(est["frequencies"]) == 104 and list(est["frequencies"].columns) == [
            "attribute", "category", "estimate", "std_error", "ci_low", "ci_high",
            "in_domain", "in_domain_ci_low", "in_domain_ci_high"]


def test_frequency_range_and_linear_tasks(adult, adult_schema):
    """Every record task runs; each estimate with a standard error is within z = 4.42 of the
    truth (false-failure rate about 1e-5 per number)."""
    schema = adult_schema.attributes
    f = hl.simulate_task({"schema": schema, "epsilon": 2.0, "task": {"kind": "frequency", "attribute": "sex"}},
                         adult, seed=3)
    truth = adult.sex.str.strip().value_counts(normalize=True)
    t = f["frequencies"]
    assert t.category.tolist() == ["Female", "Male"] and f.document["mechanism"] == "grr"
    assert (np.abs(t.estimate.to_numpy() - truth[t.category].to_numpy()) < 4.42 * t.std_error.to_numpy()).all()

    r = hl.simulate_task({"schema": schema, "epsilon": 1.0, "task": {"kind": "range", "attribute": "age",
                          "bins": 73, "method": "flat"}}, adult, seed=4,
                         query={"ranges": [[17, 40], [40, 90]], "quantiles": [0.25, 0.5]})
    assert r.names == ["cdf", "ranges", "quantiles"] and len(r["cdf"]) == 74
    rg = r["ranges"]
    # Bins of 1 year over [17, 90]: [17, 40) is ages 17..39 exactly.
    share = np.array([(adult.age < 40).mean(), (adult.age >= 40).mean()])
    assert rg[["low", "high"]].to_numpy().tolist() == [[17, 40], [40, 90]]
    assert (np.abs(rg.estimate.to_numpy() - share) < 4.42 * rg.std_error.to_numpy()).all()
    q = r["quantiles"]
    assert (q.ci_low <= q.value_low).all() and (q.value_high <= q.ci_high).all()

    labels = next(a for a in schema if a["name"] == "race")["categories"]
    spec = {"schema": schema, "epsilon": 1.0, "task": {"kind": "linear-queries", "attributes": ["race"],
            "workload": {"queries": [{"in": labels[:2]}, {"in": labels[2:]}]}, "mechanism": "hr"}}
    lq = hl.simulate_task(spec, adult, seed=5)
    assert lq.names == ["queries"] and lq.document["domain_size"] == len(labels)
    race = adult.race.str.strip()
    share = np.array([race.isin(labels[:2]).mean(), race.isin(labels[2:]).mean()])
    t = lq["queries"]
    assert len(t) == 2 and (np.abs(t.estimate.to_numpy() - share) < 4.42 * t.std_error.to_numpy()).all()


def test_same_seed_same_document_other_seed_other(adult, adult_schema):
    spec = {"schema": adult_schema, "epsilon": 1.0, "task": {"kind": "frequency", "attribute": "race",
                                                              "mechanism": "olh"}}
    a, b, c = (hl.simulate_task(spec, adult.head(5000), seed=s).document for s in (1, 1, 2))
    assert a == b and a != c


def test_heavy_hitters_from_item_sets():
    """Devices holding strings (or sets of them): the top items are found, each frequency
    within 4.42 standard errors of the truth (z = 4.42: false-failure rate 1e-5 per check)."""
    rng = np.random.default_rng(7)
    names = [f"site-{i}.example" for i in range(50)]
    p = 1.0 / np.arange(1, 51) ** 1.3
    p /= p.sum()
    n = 60_000
    words = rng.choice(names, n, p=p)
    spec = {"epsilon": 4.0, "task": {"kind": "heavy-hitters", "top": 5, "bits": 24, "candidates": names}}
    est = hl.simulate_task(spec, list(words), seed=11, as_frame=False)
    assert est.task == "heavy-hitters" and est.reports == n
    items = est["items"]
    assert sorted(items["item"]) == sorted(names[:5]), items["item"]
    truth = {w: c / n for w, c in zip(*np.unique(words, return_counts=True))}
    for w, e, s in zip(items["item"], items["estimate"], items["std_error"]):
        assert s > 0 and abs(e - truth[w]) < 4.42 * s, (w, e, s, truth[w])
    # A pandas Series of strings, and sets of strings, are read too; same seed, same document.
    pd = pytest.importorskip("pandas")
    again = hl.simulate_task(spec, pd.Series(words), seed=11, as_frame=False)
    assert again.document == est.document
    sets = hl.simulate_task(dict(spec, task=dict(spec["task"], pad_length=2)), [[w, "x"] for w in words[:5000]], seed=1)
    assert sets.reports == 5000


def test_heavy_hitters_input_errors():
    spec = {"epsilon": 1.0, "task": {"kind": "heavy-hitters"}}
    with pytest.raises(hl.HarmonyError, match=r"items\[1\]"):
        hl.simulate_task(spec, ["a", 3])
    with pytest.raises(hl.HarmonyError, match=r"items\[0\]"):
        hl.simulate_task(spec, [[]])
    with pytest.raises(hl.HarmonyError, match="items"):
        hl.simulate_task(spec, [])
    with pytest.raises(hl.HarmonyError, match="items"):
        hl.simulate_task(spec, "abc")


def test_task_errors_name_the_field(adult, adult_schema):
    schema = adult_schema.attributes
    with pytest.raises(hl.HarmonyError, match="train"):
        hl.simulate_task({"schema": schema, "epsilon": 1.0, "task": {"kind": "train", "task": "logistic", "target": "income",
                                                                   "batch_size": 1000}}, adult)
    # A spec that does not parse names the field's path, as the server's 400 does.
    with pytest.raises(hl.HarmonyError, match="does not parse") as e:
        hl.simulate_task({"schema": schema, "epsilon": 1.0, "task": {"kind": "means", "strategy": "nope"}}, adult)
    assert e.value.field == "task"
    with pytest.raises(hl.HarmonyError, match="does not parse") as e:
        hl.simulate_task({"schema": schema, "epsilon": "one", "task": {"kind": "means"}}, adult)
    assert e.value.field == "epsilon"
    with pytest.raises(hl.HarmonyError) as e:
        hl.simulate_task({"schema": schema, "epsilon": -1.0, "task": {"kind": "means"}}, adult)
    assert e.value.field == "epsilon"
    with pytest.raises(hl.HarmonyError) as e:
        hl.simulate_task({"schema": schema, "epsilon": 1.0, "task": {"kind": "frequency", "attribute": "age"}}, adult)
    assert e.value.field == "task.attribute" and "age" in str(e.value)
    with pytest.raises(hl.HarmonyError, match="without column"):
        hl.simulate_task({"schema": schema, "epsilon": 1.0, "task": {"kind": "means"}}, adult[["age"]])
    with pytest.raises(hl.HarmonyError):
        hl.simulate_task([1, 2], adult)
    with pytest.raises(hl.HarmonyError):
        hl.Estimates({"no": "task"})


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path, harmony_bin):
    port = free_port()
    proc = subprocess.Popen([harmony_bin, "serve", "--db", f"sqlite://{tmp_path / 'h.db'}", "--listen",
                             f"127.0.0.1:{port}", "--analyst-token", "tok", "--log-level", "warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.time() < deadline and proc.poll() is None, "harmony serve did not start"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()


def test_analyst_reads_what_a_simulation_predicts(root, adult, adult_schema, harmony_bin, server):
    """A means collection created by the analyst client and fed `harmony submit
    --simulate-devices --seed 11` gives hl.simulate_task(spec, adult, seed=11)'s document."""
    analyst = hl.Analyst(server, "tok")
    spec = {"schema": adult_schema, "epsilon": 2.0, "task": {"kind": "means", "strategy": "harmony"}}
    cid, config = analyst.create(spec)
    assert config["task"]["kind"] == "means" and analyst.config(cid) == config
    empty = analyst.estimates(cid)
    assert empty.reports == 0 and np.isnan(empty["means"].estimate).all()
    subprocess.run([harmony_bin, "submit", "--server", server, "--collection", cid, "--data",
                    str(root / "data" / "adult.csv"), "--simulate-devices", "--seed", "11"],
                   check=True, capture_output=True)
    served = analyst.estimates(cid)
    simulated = hl.simulate_task(spec, adult, seed=11)
    assert served.reports == 48842
    assert strip(served.document) == strip(simulated.document)
    with pytest.raises(hl.HarmonyError) as e:
        hl.Analyst(server, "wrong").estimates(cid)
    assert e.value.status == 401 and e.value.field == "authorization"
    with pytest.raises(hl.HarmonyError) as e:
        analyst.create({"schema": adult_schema, "epsilon": 0.0, "task": {"kind": "means"}})
    assert e.value.status == 400 and "epsilon" in e.value.field


def test_device_client_submits_a_frame_under_its_policy(adult, adult_schema, server):
    """hl.Device: every row a device randomizing with the OS CSPRNG (the Rust SDK's code);
    the server stores them all; a collection over the device's ε cap, or of a task the policy
    does not list, is refused before anything is randomized or sent."""
    analyst = hl.Analyst(server, "tok")
    spec = {"schema": adult_schema, "epsilon": 2.0, "task": {"kind": "frequency", "attribute": "race"}}
    cid, _ = analyst.create(spec)
    device = hl.Device(server, max_epsilon=4.0, batch=700)
    ack = device.submit(cid, adult.head(3000))
    assert ack == {"devices": 3000, "accepted": 3000, "duplicates": 0, "skipped": 0, "clamped": 0}
    est = analyst.estimates(cid)
    assert est.reports == 3000
    truth = adult.head(3000)["race"].value_counts(normalize=True)
    f = est["frequencies"].set_index("category")
    for label, p in truth.items():
        assert abs(f.loc[label, "estimate"] - p) < 4.42 * f.loc[label, "std_error"], (label, p)
    with pytest.raises(hl.HarmonyError) as e:
        hl.Device(server, max_epsilon=1.0).submit(cid, adult.head(10))
    assert e.value.field == "policy.max_epsilon", e.value.field
    with pytest.raises(hl.HarmonyError) as e:
        hl.Device(server, tasks=["means"]).submit(cid, adult.head(10))
    assert e.value.field == "policy.tasks", e.value.field
    assert analyst.estimates(cid).reports == 3000
    # Heavy hitters: the devices' items.
    hh, _ = analyst.create({"epsilon": 4.0, "task": {"kind": "heavy-hitters", "top": 3, "bits": 16,
                                                      "candidates": ["a", "b", "c", "d"]}})
    words = np.random.default_rng(3).choice(["a", "b", "c", "d"], 20_000, p=[0.4, 0.3, 0.2, 0.1])
    assert device.submit(hh, list(words))["accepted"] == 20_000
    assert sorted(analyst.estimates(hh)["items"]["item"]) == ["a", "b", "c"]
    with pytest.raises(hl.HarmonyError) as e:
        device.submit("no-such-collection", adult.head(1))
    assert e.value.status == 404


def test_plan_is_the_clis(root, adult_schema, harmony_bin):
    """hl.plan gives `harmony plan --format json`'s variances, SEs and recommendation."""
    out = subprocess.run([harmony_bin, "plan", "--schema", str(root / "examples" / "adult.toml"), "--devices", "48842",
                          "--epsilon", "0.5,2", "--target-error", "0.01", "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    cli = json.loads(out)
    p = hl.plan(adult_schema, users=48842, epsilon=[0.5, 2], target_error=0.01, as_frame=False)
    rows = [(c["epsilon"], c["strategy"], c["numeric_mechanism"], c["categorical_mechanism"], c["k"], a["name"],
             a["variance_per_user"], c["users_needed"]) for c in cli["choices"] for a in c["attributes"]]
    ours = list(zip(p["epsilon"], p["strategy"], p["numeric_mechanism"], p["categorical_mechanism"], p["k"],
                    p["attribute"], p["variance_per_user"], p["users_needed"]))
    assert ours == rows
    width = len(adult_schema.attributes)
    best = sorted({i // width for i, r in enumerate(p["recommended"]) if r})
    assert best == cli["recommended"]
    with pytest.raises(hl.HarmonyError, match="users"):
        hl.plan(adult_schema)
    with pytest.raises(hl.HarmonyError, match="categorical_mechanism"):
        hl.plan(adult_schema, users=10, categorical_mechanism="nope")


def test_estimates_show_in_domain_values_beside_raw_ones_and_the_warnings():
    """A document with an in-domain value, its note and a precision warning: the tables carry
    the in-domain value and interval beside the raw ones (equal to them where none is given),
    and the note and warning are properties and lines of the text repr."""
    doc = {"collection": "c", "reports": 50, "epsilon": 1.0, "task": "frequency", "attribute": "sex",
           "mechanism": "grr", "in_domain_note": "frequencies projected onto the simplex",
           "warnings": [{"subject": "sex", "std_error": 0.3, "scale": 1.0, "reports": 50, "reports_needed": 45000,
                         "message": "sex: standard error 0.300 is 30% of its scale 1; about 45000 reports"}],
           "categories": [
               {"label": "F", "estimate": -0.1, "std_error": 0.3, "ci95": [-0.7, 0.5],
                "in_domain": {"estimate": 0.0, "ci95": [0.0, 0.5]}},
               {"label": "M", "estimate": 0.9, "std_error": 0.3, "ci95": [0.3, 1.5],
                "in_domain": {"estimate": 1.0, "ci95": [0.3, 1.0]}},
               {"label": "X", "estimate": 0.2, "std_error": 0.3, "ci95": [-0.4, 0.8]}]}
    e = hl.Estimates(doc)
    f = e["frequencies"]
    assert f["estimate"].tolist() == [-0.1, 0.9, 0.2]
    assert f["in_domain"].tolist() == [0.0, 1.0, 0.2]
    assert f["in_domain_ci_low"].tolist() == [0.0, 0.3, -0.4] and f["in_domain_ci_high"].tolist() == [0.5, 1.0, 0.8]
    assert e.note == "frequencies projected onto the simplex"
    assert e.warnings == [doc["warnings"][0]["message"]]
    text = repr(e)
    assert "note: frequencies projected onto the simplex" in text and "warning: sex: standard error 0.300" in text


def test_analyst_names_a_collection_and_reads_in_domain_values_and_warnings(adult, adult_schema, server):
    """A named means collection at ε = 1 with 2,000 devices: the list shows its name,
    description and creation time; every in-domain frequency lies in [0, 1] and sums to 1 per
    attribute, every in-domain mean inside its attribute's bounds, and the imprecise
    attributes are warned about."""
    analyst = hl.Analyst(server, "tok")
    spec = {"schema": adult_schema, "epsilon": 1.0, "task": {"kind": "means"}}
    cid, _ = analyst.create(spec, name="Adult pilot \"2k\"", description="2,000 rows at ε = 1")
    listed = {c["id"]: c for c in analyst.collections()}[cid]
    assert listed["name"] == "Adult pilot \"2k\"" and listed["description"] == "2,000 rows at ε = 1"
    assert len(listed["created"]) == 20 and listed["created"].endswith("Z")
    with pytest.raises(hl.HarmonyError) as e:
        analyst.create(spec, name="x" * 129)
    assert e.value.status == 400 and e.value.field == "name"
    assert hl.Device(server, batch=500).submit(cid, adult.head(2000))["accepted"] == 2000
    est = analyst.estimates(cid)
    freqs = est["frequencies"]
    assert ((freqs["in_domain"] >= 0) & (freqs["in_domain"] <= 1)).all()
    assert np.allclose(freqs.groupby("attribute")["in_domain"].sum(), 1.0)
    bounds = {a["name"]: (a["min"], a["max"]) for a in adult_schema.attributes if a["kind"] == "numeric"}
    for name, v in zip(est["means"]["attribute"], est["means"]["in_domain"]):
        assert bounds[name][0] <= v <= bounds[name][1], (name, v)
    assert est.warnings and all("reports" in w for w in est.warnings)
    assert "warning: " in repr(est)


def test_analyst_windows_series_and_compare(adult, adult_schema, server):
    """Analyst.estimates(from_, to), .series and .compare (GET …/estimates?from=&to=, …/series,
    …/compare): the series is one long table whose rows equal the window's estimates, and a
    window without reports compares to nothing."""
    import datetime
    import pandas as pd

    now = datetime.datetime.now(datetime.timezone.utc)
    if now.hour == 23 and now.minute == 59:  # every report and request on one UTC day
        time.sleep(61 - now.second)
    analyst = hl.Analyst(server, "tok")
    spec = {"schema": adult_schema, "epsilon": 2.0, "task": {"kind": "frequency", "attribute": "race"}}
    cid, _ = analyst.create(spec)
    hl.Device(server, batch=1000).submit(cid, adult.head(2000))
    today = datetime.datetime.now(datetime.timezone.utc).date()
    window = analyst.estimates(cid, from_=today, to=str(today + datetime.timedelta(days=1)))
    whole = analyst.estimates(cid)
    assert window.reports == whole.reports == 2000
    assert window.document == whole.document
    series = analyst.series(cid, "day", from_=str(today - datetime.timedelta(days=7)))
    assert list(series.columns[:6]) == ["period", "period_end", "reports", "table", "attribute", "category"]
    assert set(series["period"]) == {pd.Timestamp(today, tz="UTC")} and set(series["reports"]) == {2000}
    f = whole["frequencies"]
    assert series["category"].tolist() == f["category"].tolist()
    for col in ("estimate", "std_error", "ci_low", "ci_high", "in_domain"):
        assert series[col].tolist() == f[col].tolist(), col
    plain = analyst.series(cid, "week", as_frame=False)
    assert plain["estimate"] == f["estimate"].tolist() and plain["period"][0].endswith("Z")
    yesterday = str(today - datetime.timedelta(days=1))
    change = analyst.compare(cid, (yesterday, str(today)), (str(today), None))
    assert list(change.columns) == ["path", "a", "b", "difference", "std_error", "z", "p", "significant"]
    assert len(change) == 0 and change.attrs["b"]["reports"] == 2000 and "Holm" in change.attrs["rule"]
    with pytest.raises(hl.HarmonyError) as e:
        analyst.series(cid, "minute")
    assert e.value.field == "period"
    with pytest.raises(hl.HarmonyError) as e:
        analyst.series(cid, "hour")
    assert e.value.status == 400 and e.value.field == "period", e.value.field
