"""range2d from Python: the analyst creates the collection, devices (hl.Device, the Rust SDK)
submit a frame, the analyst reads the heatmap and a rectangle with its standard error; the same
spec simulated in process (hl.simulate_task) equals a server fed `harmony submit
--simulate-devices` with the same seed."""

import subprocess

import numpy as np

import harmony_ldp as hl
from test_tasks import adult, adult_schema, server, strip  # noqa: F401 (the fixtures)

SPEC_TASK = {"kind": "range2d", "x": "age", "y": "hours_per_week", "levels": 3}
RECT = [25.0, 45.0, 35.0, 45.0]


def bins(values, lo, hi, n):
    """The schema's equal-width bins of `values` over [lo, hi] (the top edge in the last bin)."""
    return np.minimum(((np.asarray(values, dtype=float) - lo) / (hi - lo) * n).astype(int), n - 1)


def test_range2d_collection_created_submitted_and_read(root, adult, adult_schema, harmony_bin, server):  # noqa: F811
    analyst = hl.Analyst(server, "tok")
    spec = {"schema": adult_schema, "epsilon": 2.0, "task": SPEC_TASK}
    cid, config = analyst.create(spec)
    assert config["task"] == SPEC_TASK
    frame = adult.head(6000)
    ack = hl.Device(server, max_epsilon=4.0, batch=1000).submit(cid, frame)
    assert ack["accepted"] == 6000, ack
    est = analyst.estimates(cid, rects=[RECT])
    assert est.task == "range2d" and est.reports == 6000 and est.names == ["cells", "rects"]
    cells, r = est["cells"], est["rects"].iloc[0]
    assert len(cells) == 64 and abs(cells["estimate"].sum() - 1.0) < 1e-9
    assert [r.x_bin_low, r.x_bin_high, r.y_bin_low, r.y_bin_high] == [1, 3, 3, 4]
    ix, iy = bins(frame["age"], 17, 90, 8), bins(frame["hours_per_week"], 1, 99, 8)
    truth = np.mean((ix >= 1) & (ix < 3) & (iy == 3))
    assert 0 < r.std_error < 0.1 and abs(r.estimate - truth) < 4.42 * r.std_error, (r.estimate, r.std_error, truth)
    # The same devices simulated in process and sent by `harmony submit`: one document.
    again, _ = analyst.create(spec)
    subprocess.run([harmony_bin, "submit", "--server", server, "--collection", again, "--data",
                    str(root / "data" / "adult.csv"), "--simulate-devices", "--seed", "5"],
                   check=True, capture_output=True)
    served = analyst.estimates(again, rects=[RECT])
    simulated = hl.simulate_task(spec, adult, seed=5, query={"rects": [RECT]})
    assert served.reports == 48842
    assert strip(served.document) == strip(simulated.document)
