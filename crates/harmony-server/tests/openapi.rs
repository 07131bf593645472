//! The OpenAPI document: generated from the handlers' annotations and the protocol types,
//! committed as docs/openapi.json (this test fails when that file is stale; run it with
//! `HARMONY_UPDATE_OPENAPI=1` to rewrite it), served at /openapi.json, covering every task's
//! spec, config and estimate document, and agreeing with what the server sends: real documents
//! of every task validate against it (a small validator of the JSON Schema subset utoipa emits).

use harmony_core::schema::Value as Value3;
use serde_json::{Value, json};
use std::path::PathBuf;

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
}

#[test]
fn committed_document_is_current() {
    let generated = harmony_server::openapi::json();
    let path = committed_path();
    if std::env::var_os("HARMONY_UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/openapi.json is stale: run `HARMONY_UPDATE_OPENAPI=1 cargo test -p harmony-server --test openapi`"
    );
}

fn doc() -> Value {
    serde_json::from_str(harmony_server::openapi::json()).unwrap()
}

#[test]
fn every_task_and_endpoint_is_described() {
    let d = doc();
    let schemas = &d["components"]["schemas"];
    for name in [
        "CreateCollection",
        "TaskSpec",
        "CollectionConfig",
        "TrainPublished",
        "Created",
        "EstimateDocument",
        "MeansEstimate",
        "FrequencyEstimate",
        "RangeEstimate",
        "HeavyHittersEstimate",
        "MarginalsEstimate",
        "LinearEstimate",
        "TrainEstimate",
        "ReportBatch",
        "BatchAck",
        "GradientPost",
        "GradientAck",
        "ModelState",
        "ErrorBody",
        "Attribute",
    ] {
        assert!(schemas[name].is_object(), "components.schemas.{name} missing");
    }
    // The task union names every task kind.
    let text = serde_json::to_string(&schemas["TaskSpec"]).unwrap();
    for k in harmony_protocol::spec::TaskKind::ALL {
        assert!(text.contains(&format!("\"{}\"", k.name())), "TaskSpec lacks {k}");
    }
    let paths = d["paths"].as_object().unwrap();
    for (p, m) in [
        ("/v1/collections", "post"),
        ("/v1/collections", "get"),
        ("/v1/collections/{id}/tokens", "post"),
        ("/v1/collections/{id}/tokens", "get"),
        ("/v1/collections/{id}/tokens/{token_id}", "delete"),
        ("/v1/collections/{id}/config", "get"),
        ("/v1/collections/{id}/reports", "post"),
        ("/v1/collections/{id}/estimates", "get"),
        ("/v1/collections/{id}/model", "get"),
        ("/v1/collections/{id}/gradients", "post"),
        ("/openapi.json", "get"),
        ("/metrics", "get"),
        ("/healthz", "get"),
    ] {
        assert!(paths[p][m].is_object(), "{m} {p} missing");
    }
}

/// What schemathesis found wrong in the hand-written document: numbers the
/// server sends as null, `schema: []` and `report: ""` allowed, a link to gradients from any
/// collection.
#[test]
fn document_agrees_with_the_server() {
    let d = doc();
    let s = &d["components"]["schemas"];
    let est = serde_json::to_string(&s["Est"]).unwrap();
    assert!(est.contains("null"), "Est must allow null: {est}");
    let create = serde_json::to_string(&s["CreateCollection"]).unwrap();
    assert!(s["Schema"]["minItems"] == json!(1) || create.contains("\"minItems\":1"), "schema: [] must be refused");
    let item = &s["ReportItem"]["properties"]["report"];
    assert_eq!(item["pattern"], json!("^([0-9a-fA-F]{2})+$"), "{item}");
    let links = &d["paths"]["/v1/collections"]["post"]["responses"]["201"]["links"];
    assert!(links.is_object() && !serde_json::to_string(links).unwrap().contains("postGradient"), "{links}");
}

// ---- a validator of the JSON Schema subset utoipa emits ----

fn resolve<'a>(root: &'a Value, s: &'a Value) -> &'a Value {
    match s.get("$ref").and_then(Value::as_str) {
        Some(r) => resolve(root, root.pointer(r.trim_start_matches('#')).unwrap_or_else(|| panic!("dangling {r}"))),
        None => s,
    }
}

fn type_ok(t: &str, v: &Value) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "string" => v.is_string(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => panic!("type {t}"),
    }
}

/// The errors of `v` against schema `s` (empty: valid).
fn check(root: &Value, s: &Value, v: &Value, at: &str, errs: &mut Vec<String>) {
    let s = resolve(root, s);
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(t) => type_ok(t, v),
            Value::Array(ts) => ts.iter().any(|t| type_ok(t.as_str().unwrap(), v)),
            _ => true,
        };
        if !ok {
            return errs.push(format!("{at}: {v} is not {t}"));
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        errs.push(format!("{at}: {v} not in {e:?}"));
    }
    for all in s.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        check(root, all, v, at, errs);
    }
    if let Some(one) = s.get("oneOf").and_then(Value::as_array) {
        let ok = one
            .iter()
            .filter(|o| {
                let mut e = Vec::new();
                check(root, o, v, at, &mut e);
                e.is_empty()
            })
            .count();
        if ok != 1 {
            errs.push(format!("{at}: {ok} of {} oneOf branches match", one.len()));
        }
    }
    if let (Some(obj), Some(props)) = (v.as_object(), s.get("properties").and_then(Value::as_object)) {
        for r in s.get("required").and_then(Value::as_array).into_iter().flatten() {
            if !obj.contains_key(r.as_str().unwrap()) {
                errs.push(format!("{at}: required {r} missing"));
            }
        }
        for (k, x) in obj {
            match props.get(k) {
                Some(ps) => check(root, ps, x, &format!("{at}.{k}"), errs),
                None if s.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    errs.push(format!("{at}: unexpected {k}"))
                }
                None => {}
            }
        }
    }
    if let (Some(arr), Some(items)) = (v.as_array(), s.get("items")) {
        if let Some(m) = s.get("minItems").and_then(Value::as_u64)
            && (arr.len() as u64) < m
        {
            errs.push(format!("{at}: {} items < {m}", arr.len()));
        }
        for (i, x) in arr.iter().enumerate() {
            check(root, items, x, &format!("{at}[{i}]"), errs);
        }
    }
}

fn assert_valid(name: &str, v: &Value) {
    let d = doc();
    let mut errs = Vec::new();
    check(&d, &json!({"$ref": format!("#/components/schemas/{name}")}), v, name, &mut errs);
    assert!(errs.is_empty(), "{name} does not validate: {errs:#?}\n{v}");
}

/// Real specs, configs and estimate documents of every task (with 0 reports and with some)
/// validate against the document.
#[test]
fn real_documents_of_every_task_validate() {
    use harmony_protocol::CreateCollection;
    let specs = [
        json!({"kind": "means"}),
        json!({"kind": "means", "strategy": "sample-k", "k": 2}),
        json!({"kind": "frequency", "attribute": "c"}),
        json!({"kind": "range", "attribute": "age", "bins": 16}),
        json!({"kind": "heavy-hitters", "top": 3, "bits": 8}),
        json!({"kind": "marginals", "ways": [2]}),
        json!({"kind": "linear-queries", "attributes": ["c"], "workload": "identity"}),
        json!({"kind": "train", "task": "linear", "target": "age", "batch_size": 10, "rounds": 5}),
    ];
    let schema = json!([
        {"kind": "numeric", "name": "age", "min": 0, "max": 100},
        {"kind": "categorical", "name": "c", "categories": ["a", "b", "d"]},
        {"kind": "categorical", "name": "e", "categories": ["x", "y"]}
    ]);
    let records: Vec<[Value3; 3]> = (0..200u32)
        .map(|i| [Value3::Unit((i % 21) as f64 / 10.0 - 1.0), Value3::Category(i % 3), Value3::Category(i % 2)])
        .collect();
    for task in specs {
        let req = json!({"schema": schema, "epsilon": 2.0, "task": task});
        assert_valid("CreateCollection", &req);
        let parsed: CreateCollection = serde_json::from_value(req).unwrap();
        let config = harmony_tasks::resolve(&parsed, "c0ffee").unwrap();
        assert_valid("CollectionConfig", &serde_json::to_value(&config).unwrap());
        assert_valid("Created", &json!({"id": "c0ffee", "config": config}));
        if config.task.kind().has_rounds() {
            continue;
        }
        let built = harmony_tasks::build(&config).unwrap();
        let mut agg = built.aggregator();
        let mut rng = harmony_core::sampling::fast_rng(7);
        let query = harmony_protocol::estimates::Query { ranges: vec![[10.0, 40.0]], quantiles: None, rects: vec![] };
        for n in [0usize, 200] {
            for (i, r) in records.iter().enumerate().take(n).skip(agg.count() as usize) {
                let mut out = Vec::new();
                let items = [format!("item{}", i % 7)];
                let input = match config.task.kind() {
                    harmony_protocol::TaskKind::HeavyHitters => harmony_tasks::Input::Items(&items),
                    _ => harmony_tasks::Input::Record(r),
                };
                built.randomize(&input, &mut rng, &mut out).unwrap();
                agg.add(&out).unwrap();
            }
            let q = if config.task.kind() == harmony_protocol::TaskKind::Range {
                query.clone()
            } else {
                Default::default()
            };
            let result = built.estimate(agg.as_ref(), &q).unwrap();
            let doc = harmony_protocol::EstimateDocument {
                collection: "c0ffee".into(),
                reports: agg.count(),
                epsilon: 2.0,
                result,
            };
            assert_valid("EstimateDocument", &serde_json::to_value(&doc).unwrap());
        }
    }
}
