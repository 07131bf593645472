"""The hostile-server harness for hl.Device: a fake collection server on loopback serves every
adversarial config of crates/harmony-client/tests/hostile/configs.json (the list the Rust and
browser device tests share); each is refused naming the rule the list expects (field
``policy.<rule>``), or accepted and answered within the policy (one report, ε charged once)."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import harmony_ldp as hl

CASES = json.loads((Path(__file__).resolve().parents[2] / "harmony-client" / "tests" / "hostile" / "configs.json")
                   .read_text(encoding="utf-8"))["cases"]
POLICY_ARGS = ("max_epsilon", "tasks", "mechanisms", "approximate", "max_delta", "budget", "max_item_id")


def asked(case):
    return case.get("asked", case["config"]["id"])


@pytest.fixture(scope="module")
def hostile():
    """The fake server: each case's config at its id's config path; POSTs of reports counted
    and acknowledged."""
    routes = {f"/v1/collections/{asked(c)}/config": json.dumps(c["config"]).encode() for c in CASES}
    posts = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, status, body):
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            body = routes.get(self.path)
            if body is None:
                return self.reply(404, b'{"error":{"field":"path","message":"no such collection"}}')
            self.reply(200, body)

        def do_POST(self):
            batch = json.loads(self.rfile.read(int(self.headers["content-length"])))
            posts.append(batch)
            self.reply(200, json.dumps({"accepted": len(batch["reports"]), "duplicates": 0}).encode())

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", posts
    finally:
        srv.shutdown()
        thread.join(timeout=10)


def record(config):
    return {a["name"]: (a["min"] + a["max"]) / 2 if a["kind"] == "numeric" else a["categories"][0]
            for a in config.get("schema") or []}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_every_adversarial_config_is_refused_or_answered_within_the_policy(hostile, case):
    url, posts = hostile
    policy = case["policy"] or {}
    device = hl.Device(url, attempts=1, **{k: v for k, v in policy.items() if k in POLICY_ARGS})
    before = len(posts)
    if case["refused"] is not None:
        with pytest.raises(hl.HarmonyError) as e:
            device.report(asked(case), record(case["config"]))
        want = case["refused"]
        if want == "config":
            assert not e.value.field.startswith("policy."), (e.value.field, str(e.value))
        else:
            assert e.value.field == f"policy.{want}", (e.value.field, str(e.value))
        assert len(posts) == before, "a refused config got a report"
        return
    assert device.report(asked(case), record(case["config"])) == {"accepted": 1, "duplicates": 0}
    assert len(posts) == before + 1 and len(posts[-1]["reports"]) == 1
    assert [(s["key"], s["epsilon"], s["delta"]) for s in device.spends()] == [(asked(case), case["config"]["epsilon"], 0.0)]
    with pytest.raises(hl.HarmonyError) as e:
        device.report(asked(case), record(case["config"]))
    assert e.value.field == "collection"
