//! The in-domain frequencies' error against the raw ones': for every frequency oracle, runs of
//! the `frequency` task at ε = 1 over one attribute of UCI Adult (`education`, 16 labels;
//! `native_country`, 42) and of Census-Income (`education`, 17 labels), all rows; per run the
//! squared error summed over the labels of the raw estimate, of the in-domain one (the simplex
//! projection the document carries) and of Norm-Sub, and the in-domain estimate's bias (mean
//! in-domain minus truth, per label, over the runs).
//!
//! `cargo run --release -p harmony-tasks --example domain_mse -- [RUNS]` (default 50).

use harmony_core::kinds::OracleKind;
use harmony_core::postprocess::norm_sub;
use harmony_core::schema::{Schema, Value};
use harmony_data::{DataReader, EncodeOptions, InferOptions, encode_rows, infer_batches};
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::{Query, TaskEstimate};
use harmony_tasks::Input;

/// The file's inferred schema restricted to `column`, and its values.
fn column(file: &str, column: &str) -> (Schema, Vec<Value>) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data").join(file);
    let bytes = if file.ends_with(".xz") {
        let out = std::process::Command::new("xz").arg("-dc").arg(&path).output().expect("xz");
        out.stdout
    } else {
        std::fs::read(&path).unwrap()
    };
    let mut reader = DataReader::from_bytes("data.csv", bytes.clone()).unwrap();
    let schema = infer_batches(&mut reader, &InferOptions::default()).unwrap().file.schema().unwrap();
    let j = schema.attributes().iter().position(|a| a.name() == column).unwrap();
    let mut reader = DataReader::from_bytes("data.csv", bytes).unwrap();
    let enc = encode_rows(&mut reader, &schema, &EncodeOptions::default()).unwrap();
    let values = enc.values.chunks(schema.len()).map(|r| r[j]).collect();
    (Schema::new(vec![schema.attributes()[j].clone()]).unwrap(), values)
}

fn sse(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum()
}

fn main() {
    let runs: u64 = std::env::args().nth(1).map_or(50, |r| r.parse().unwrap());
    println!(
        "| data | attribute (d) | oracle | MSE raw | MSE in-domain | ratio | MSE norm-sub | max per-label bias | runs in-domain ≤ raw |"
    );
    println!("|---|---|---|---:|---:|---:|---:|---:|---:|");
    for (file, attr) in
        [("adult.csv", "education"), ("adult.csv", "native_country"), ("census_income_kdd.csv.xz", "education")]
    {
        let (schema, values) = column(file, attr);
        let d = schema.attributes()[0].cardinality();
        let mut truth = vec![0.0; d];
        for v in &values {
            let Value::Category(c) = v else { panic!("categorical") };
            truth[*c as usize] += 1.0 / values.len() as f64;
        }
        let records: Vec<[Value; 1]> = values.iter().map(|v| [*v]).collect();
        let inputs: Vec<Input<'_>> = records.iter().map(|r| Input::Record(r)).collect();
        for k in OracleKind::ALL {
            let spec = serde_json::json!({"kind": "frequency", "attribute": attr, "mechanism": k.name()});
            let body = serde_json::json!({"schema": schema, "epsilon": 1.0, "task": spec});
            let request: CreateCollection = serde_json::from_value(body).unwrap();
            let Ok(config) = harmony_tasks::resolve(&request, "c") else {
                println!("| {file} | {attr} ({d}) | {} | refused | | | | | |", k.name());
                continue;
            };
            let task = harmony_tasks::build(&config).unwrap();
            let (mut raw_sse, mut dom_sse, mut ns_sse, mut wins) = (0.0, 0.0, 0.0, 0);
            let mut bias = vec![0.0; d];
            for run in 0..runs {
                let agg = harmony_tasks::simulate::run(task.as_ref(), &inputs, 1000 + run).unwrap();
                let TaskEstimate::Frequency(f) = task.estimate(agg.as_ref(), &Query::default()).unwrap() else {
                    panic!("a frequency document")
                };
                let raw: Vec<f64> = f.categories.iter().map(|c| c.frequency.value()).collect();
                let dom: Vec<f64> = f.categories.iter().map(|c| c.frequency.shown().unwrap()).collect();
                let (r, p) = (sse(&raw, &truth), sse(&dom, &truth));
                raw_sse += r;
                dom_sse += p;
                ns_sse += sse(&norm_sub(&raw), &truth);
                wins += usize::from(p <= r + 1e-15);
                for (b, (x, t)) in bias.iter_mut().zip(dom.iter().zip(&truth)) {
                    *b += (x - t) / runs as f64;
                }
            }
            let n = (runs as usize * d) as f64;
            let max_bias = bias.iter().fold(0.0f64, |m, b| m.max(b.abs()));
            println!(
                "| {file} | {attr} ({d}) | {} | {:.3e} | {:.3e} | {:.3} | {:.3e} | {:.2e} | {wins}/{runs} |",
                k.name(),
                raw_sse / n,
                dom_sse / n,
                dom_sse / raw_sse,
                ns_sse / n,
                max_bias
            );
        }
    }
}
