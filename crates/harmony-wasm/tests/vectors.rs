//! The shared test vectors of the browser SDK (web/test/vectors.json): for every task kind but
//! train, a few configs × raw inputs × seeds, the report item harmony-client's `DeviceTask::item`
//! makes with the seeded generators `fast_rng(seed)` (randomization) and `fast_rng(!seed)`
//! (report id); and the device-policy refusals (configs a device must refuse) with the Rust client's
//! messages. The browser test (web/test/browser.test.mjs) checks that the wasm bundle makes the
//! same bytes and refuses with the same messages.
//!
//! The expected side is the Rust client alone: raw values are encoded here with
//! `Schema::encode` (numbers out of range mapped linearly, so the client's clamp handles them),
//! not with harmony-wasm's encoder, which is checked against it.
//!
//! Regenerate after a deliberate change of the wire or a randomizer:
//! `HARMONY_WRITE_VECTORS=1 cargo test -p harmony-wasm --test vectors`.

use harmony_client::budget::Spend;
use harmony_client::{Device, DeviceTask, Input, LedgerEntry, LedgerState, MemoryLedger, Policy};
use harmony_core::schema::{Attribute, Schema, Value};
use harmony_protocol::{CollectionConfig, CreateCollection};
use serde_json::{Value as Json, json};
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn adult() -> Schema {
    harmony_data::SchemaFile::load(&repo().join("examples/adult.toml")).unwrap().schema().unwrap()
}

fn resolve(schema: Option<&Schema>, epsilon: f64, task: Json, id: &str) -> CollectionConfig {
    let req: CreateCollection =
        serde_json::from_value(json!({"schema": schema, "epsilon": epsilon, "task": task})).unwrap();
    harmony_tasks::resolve(&req, id).unwrap_or_else(|e| panic!("{task}: {e}"))
}

/// Three rows of data/adult.csv and one with numbers out of range (clamped, never skipped).
fn records(schema: &Schema) -> Vec<Json> {
    let text = std::fs::read_to_string(repo().join("data/adult.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let mut out: Vec<Json> = lines
        .take(3)
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            let mut o = serde_json::Map::new();
            for a in schema.attributes() {
                let raw = cells[header.iter().position(|h| *h == a.name()).unwrap()];
                o.insert(a.name().into(), if a.is_numeric() { json!(raw.parse::<f64>().unwrap()) } else { json!(raw) });
            }
            Json::Object(o)
        })
        .collect();
    let mut wild = out[0].clone();
    wild["age"] = json!(120);
    wild["hours_per_week"] = json!(-5);
    out.push(wild);
    out
}

/// The Rust client's encoding of a raw input: `Schema::encode`, numbers out of range mapped
/// linearly beyond [-1, 1] (the device's clamp brings them back).
fn encode(schema: Option<&Schema>, raw: &Json) -> (Vec<Value>, Vec<String>) {
    let Some(schema) = schema else {
        let items = match raw {
            Json::String(s) => vec![s.clone()],
            a => a.as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect(),
        };
        return (vec![], items);
    };
    let record = schema
        .attributes()
        .iter()
        .enumerate()
        .map(|(j, a)| match a {
            Attribute::Numeric { min, max, .. } => {
                let x = raw[a.name()].as_f64().unwrap();
                Value::Unit(2.0 * (x - min) / (max - min) - 1.0)
            }
            Attribute::Categorical { .. } => schema.encode(j, raw[a.name()].as_str().unwrap()).unwrap(),
        })
        .collect();
    (record, vec![])
}

fn configs(schema: &Schema) -> Vec<CollectionConfig> {
    let s = Some(schema);
    vec![
        resolve(s, 1.0, json!({"kind": "means", "strategy": "harmony"}), "means-harmony"),
        resolve(s, 2.0, json!({"kind": "means", "strategy": "split"}), "means-split"),
        resolve(s, 4.0, json!({"kind": "means", "strategy": "sample-k"}), "means-sample-k"),
        resolve(s, 1.0, json!({"kind": "frequency", "attribute": "education"}), "frequency-olh"),
        resolve(s, 4.0, json!({"kind": "frequency", "attribute": "education"}), "frequency-grr"),
        resolve(s, 1.0, json!({"kind": "range", "attribute": "age", "method": "hh"}), "range-hh"),
        resolve(
            s,
            2.0,
            json!({"kind": "range", "attribute": "hours_per_week", "method": "haar", "bins": 32}),
            "range-haar",
        ),
        resolve(s, 1.0, json!({"kind": "marginals", "attributes": ["sex", "race", "income"]}), "marginals-calm"),
        resolve(
            s,
            2.0,
            json!({"kind": "marginals", "attributes": ["sex", "race", "income"], "method": "fourier"}),
            "marginals-fourier",
        ),
        resolve(
            s,
            1.0,
            json!({"kind": "linear-queries", "attributes": ["sex", "race"], "workload": "identity"}),
            "linear-hr",
        ),
        resolve(
            s,
            2.0,
            json!({"kind": "linear-queries", "attributes": ["age"], "bins": {"age": 8}, "workload": "prefix"}),
            "linear-prefix",
        ),
        resolve(None, 2.0, json!({"kind": "heavy-hitters", "method": "pem", "top": 5}), "heavy-pem"),
        resolve(None, 4.0, json!({"kind": "heavy-hitters", "method": "treehist"}), "heavy-treehist"),
    ]
}

const SEEDS: [u64; 2] = [1, 0x5eed_0000_0000_0002];

/// Every vector: the Rust client's item, and harmony-wasm's `vector_item` (the function the test
/// bundle exports) checked against it natively.
fn vectors(configs: &[CollectionConfig], records: &[Json]) -> Vec<Json> {
    let items = [json!("apple"), json!(["banana", "cherry"]), json!(["x", "y", "apple"])];
    let mut out = vec![];
    for (c, config) in configs.iter().enumerate() {
        let task = DeviceTask::new(config.clone()).unwrap();
        let inputs = if config.schema.is_some() { records } else { &items[..] };
        for raw in inputs {
            let (record, set) = encode(config.schema.as_ref(), raw);
            let input = if config.schema.is_some() { Input::Record(&record) } else { Input::Items(&set) };
            for seed in SEEDS {
                let (mut rng, mut ids) =
                    (harmony_core::sampling::fast_rng(seed), harmony_core::sampling::fast_rng(!seed));
                let item = task.item(&input, &mut rng, &mut ids).unwrap();
                let config_json = serde_json::to_string(config).unwrap();
                let ours = harmony_wasm::sdk::vector_item(&config_json, &raw.to_string(), seed).unwrap();
                assert_eq!(ours, item, "harmony-wasm's encoding differs: {} {raw}", config.id);
                out.push(json!({"config": c, "record": raw, "seed": seed.to_string(),
                    "report_id": item.id, "report_bytes": item.report}));
            }
        }
    }
    out
}

/// One refusal case: what the browser gets, and the Rust client's message.
fn refusal(name: &str, config: &CollectionConfig, policy: Json, asked: &str, message: String) -> Json {
    let ours = harmony_wasm::sdk::Collection::open(&serde_json::to_string(config).unwrap(), &policy.to_string(), asked);
    assert_eq!(ours.err().map(|e| e.to_string()).as_deref(), Some(message.as_str()), "{name}");
    json!({"name": name, "config": config, "policy": policy, "asked": asked, "message": message})
}

fn config_refusals(schema: &Schema) -> Vec<Json> {
    let s = Some(schema);
    let policy = |p: &Json| serde_json::from_value::<Policy>(p.clone()).unwrap();
    let refused =
        |c: &CollectionConfig, p: &Json| DeviceTask::with_policy(c.clone(), policy(p)).unwrap_err().to_string();
    // A hostile server serves what its own creation check would refuse (ε 700).
    let means = |eps| CollectionConfig { epsilon: eps, ..resolve(s, 1.0, json!({"kind": "means"}), "c1") };
    let olh = resolve(s, 1.0, json!({"kind": "frequency", "attribute": "education"}), "c1");
    let mut out = vec![];
    let cases = [
        ("epsilon 700 above the default cap 10", means(700.0), json!(null)),
        ("epsilon 4 above the app's cap 2", means(4.0), json!({"max_epsilon": 2.0})),
        ("a task the policy does not allow", olh.clone(), json!({"max_epsilon": 10.0, "tasks": ["means"]})),
        ("a mechanism the policy does not allow", olh.clone(), json!({"max_epsilon": 10.0, "mechanisms": ["grr"]})),
        ("a strategy the policy does not allow", means(1.0), json!({"max_epsilon": 10.0, "mechanisms": ["split"]})),
    ];
    for (name, config, p) in cases {
        let default = json!({"max_epsilon": 10.0});
        let message = refused(&config, if p.is_null() { &default } else { &p });
        out.push(refusal(name, &config, p, "c1", message));
    }
    let bad_policy = Policy::with_max_epsilon(-1.0).unwrap_err().to_string();
    out.push(refusal("a policy with max_epsilon -1", &means(1.0), json!({"max_epsilon": -1.0}), "c1", bad_policy));
    let bad_budget = "0/1".parse::<harmony_client::Budget>().unwrap_err().to_string();
    let p = json!({"max_epsilon": 10.0, "budget": "0/1"});
    let message = serde_json::from_value::<Policy>(p.clone()).unwrap_err().to_string();
    assert!(message.contains(&bad_budget), "{message} / {bad_budget}");
    let ours = harmony_wasm::sdk::parse_policy(&p.to_string()).unwrap_err().to_string();
    assert_eq!(ours, bad_budget);
    out.push(
        json!({"name": "a budget of epsilon 0", "config": means(1.0), "policy": p, "asked": "c1", "message": ours}),
    );
    let other = harmony_wasm::sdk::parse_config(&serde_json::to_string(&means(1.0)).unwrap(), "c2").unwrap_err();
    assert!(other.to_string().contains(r#"the config is for collection "c1", asked for "c2""#), "{other}");
    out.push(refusal("the config of another collection", &means(1.0), json!(null), "c2", other.to_string()));
    out
}

/// Refusals at `prepare`: the budget across collections and a collection already reported.
fn device_refusals(schema: &Schema, record: &Json) -> Vec<Json> {
    let config = resolve(Some(schema), 1.0, json!({"kind": "means"}), "c3");
    let policy = json!({"max_epsilon": 10.0, "budget": "2/1"});
    let now = 1_800_000_000u64;
    let spends = vec![
        Spend { collection: "c1".into(), epsilon: 1.0, delta: 0.0, at: now - 100 },
        Spend { collection: "c2".into(), epsilon: 1.0, delta: 0.0, at: now - 50 },
    ];
    let (encoded, _) = encode(Some(schema), record);
    let task = DeviceTask::with_policy(config.clone(), serde_json::from_value(policy.clone()).unwrap()).unwrap();
    let store = MemoryLedger(LedgerState { spends: spends.clone(), ..LedgerState::default() });
    let mut device = Device::with_budget(store, move || now);
    let budget = device.prepare(&task, &Input::Record(&encoded)).unwrap_err().to_string();
    let entry = LedgerEntry {
        item: harmony_protocol::ReportItem { id: "00".into(), report: "00".into() },
        acknowledged: true,
        round: None,
    };
    let mut ledger = MemoryLedger::default();
    ledger.0.ledger.insert("c3".into(), entry.clone());
    let task = DeviceTask::new(config.clone()).unwrap();
    let again = Device::new(ledger).prepare(&task, &Input::Record(&encoded)).unwrap_err().to_string();
    let cases = [
        ("the budget: epsilon 2 a day, 2 already spent", policy, json!({"spends": spends}), budget),
        ("a collection already reported", json!(null), json!({"ledger": {"c3": entry}}), again),
    ];
    cases
        .into_iter()
        .map(|(name, policy, state, message)| {
            let c = harmony_wasm::sdk::Collection::open(
                &serde_json::to_string(&config).unwrap(),
                &policy.to_string(),
                "c3",
            );
            let mut d = harmony_wasm::sdk::DeviceState::open(&state.to_string()).unwrap();
            let ours = d.prepare(&c.unwrap(), &record.to_string(), now).unwrap_err().to_string();
            assert_eq!(ours, message, "{name}");
            json!({"name": name, "config": config, "policy": policy, "asked": "c3", "state": state,
                "record": record, "now": now, "message": message})
        })
        .collect()
}

#[test]
fn shared_vectors_are_the_rust_clients_reports() {
    let schema = adult();
    let configs = configs(&schema);
    let records = records(&schema);
    let vectors = vectors(&configs, &records);
    let mut refusals = config_refusals(&schema);
    refusals.extend(device_refusals(&schema, &records[0]));
    let doc = json!({
        "about": "Shared test vectors of the browser SDK, written by crates/harmony-wasm/tests/vectors.rs: report items of harmony-client's DeviceTask::item with fast_rng(seed) and fast_rng(!seed) (seed: a decimal u64), and the device policy's refusals with the Rust client's messages.",
        "configs": configs, "vectors": vectors, "refusals": refusals,
    });
    let path = repo().join("web/test/vectors.json");
    let text = serde_json::to_string_pretty(&doc).unwrap() + "\n";
    if std::env::var_os("HARMONY_WRITE_VECTORS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let committed = std::fs::read_to_string(&path).expect("web/test/vectors.json (HARMONY_WRITE_VECTORS=1 writes it)");
    let committed: Json = serde_json::from_str(&committed).unwrap();
    assert_eq!(
        committed, doc,
        "web/test/vectors.json is stale: HARMONY_WRITE_VECTORS=1 cargo test -p harmony-wasm --test vectors"
    );
    let kinds: std::collections::BTreeSet<&str> = configs.iter().map(|c| c.task.kind().name()).collect();
    assert_eq!(kinds.len(), 6, "every task kind but train: {kinds:?}");
    assert!(vectors.len() >= 60 && refusals.len() >= 9, "{} vectors, {} refusals", vectors.len(), refusals.len());
}
