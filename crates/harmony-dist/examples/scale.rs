//! The scale measurement of docs/SCALE.md: reports of a mix of collections (frequency oracles;
//! `means-M` for the means task with numeric mechanism M) generated as
//! `harmony export` writes them, then aggregated by DataFusion on 1 and 2 partitions and in
//! process (`harmony aggregate --engine local`'s path), each timed, beside DataFusion's scan of
//! the body column alone (a comparison per report); DataFusion's timings are the best of 3.
//! JSON lines on stdout.
//!
//! ```sh
//! cargo run --release -p harmony-dist --example scale -- generate OUT 100000000 grr,oue,olh,hadamard 16 [device-ids] [plain|dictionary]
//! cargo run --release -p harmony-dist --example scale -- time OUT 1,2 [--no-local]
//! ```
//!
//! Generation runs simulated devices (seeded RNGs: simulation only), one thread per collection.
//! Report ids are `r<i>` unless `device-ids` is given: then 32 random hex digits, as devices
//! choose them (`harmony_client::report_id`), for the storage figures. The writer chooses the body
//! encoding as export's does (a dictionary when reports repeat: `Bodies::of`) unless told.

use harmony_core::schema::Value;
use harmony_data::reports::{Bodies, ReportsWriter, for_each_row, part_files};
use harmony_dist::estimate_dir_blocking;
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::Query;
use harmony_tasks::Input;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The request of a collection name: a frequency oracle (`grr`, `oue`, …) over a categorical
/// attribute of `d` categories, or `means-M`: the means task with numeric mechanism `M` (`pm`,
/// `duchi`, …) over one numeric attribute in [0, 1].
fn request(name: &str, d: usize) -> CreateCollection {
    let req = match name.strip_prefix("means-") {
        Some(m) => serde_json::json!({
            "schema": [{"kind": "numeric", "name": "x", "min": 0, "max": 1}],
            "epsilon": 1.0,
            "task": {"kind": "means", "strategy": "split", "numeric_mechanism": m},
        }),
        None => {
            let categories: Vec<String> = (0..d).map(|i| format!("c{i}")).collect();
            serde_json::json!({
                "schema": [{"kind": "categorical", "name": "c", "categories": categories}],
                "epsilon": 1.0,
                "task": {"kind": "frequency", "attribute": "c", "mechanism": name},
            })
        }
    };
    serde_json::from_value(req).expect("a request")
}

/// Device `i`'s value, skewed: category ⌊d·u²⌋, or 2u² − 1 on [−1, 1] for a numeric attribute.
fn input(name: &str, i: u64, d: usize) -> Value {
    let u = ((i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64) / (1u64 << 53) as f64;
    match name.starts_with("means-") {
        true => Value::Unit(2.0 * u * u - 1.0),
        false => Value::Category(((d as f64) * u * u) as u32),
    }
}

fn generate(out: &Path, reports: u64, mechanisms: &[String], d: usize, device_ids: bool, bodies: Option<Bodies>) {
    let per = reports / mechanisms.len() as u64;
    let t = Instant::now();
    std::thread::scope(|s| {
        for m in mechanisms {
            s.spawn(move || {
                let config = harmony_tasks::resolve(&request(m, d), m).expect("resolves");
                let device = harmony_tasks::build_device(&config).expect("builds");
                let dir = out.join(format!("collection={m}"));
                let mut w = ReportsWriter::create(&dir).expect("an empty directory");
                if let Some(b) = bodies {
                    w = w.with_bodies(b);
                }
                std::fs::write(dir.join("spec.json"), serde_json::to_string(&config).unwrap()).unwrap();
                let mut rng = harmony_core::sampling::fast_rng(11);
                let (mut body, mut id) = (Vec::new(), String::new());
                for i in 0..per {
                    let v = input(m, i, d);
                    device.randomize(&Input::Record(&[v]), &mut rng, &mut body).expect("randomizes");
                    id.clear();
                    use std::fmt::Write;
                    if device_ids {
                        use rand::Rng;
                        let (a, b) = (rng.next_u64(), rng.next_u64());
                        write!(id, "{a:016x}{b:016x}").unwrap();
                    } else {
                        write!(id, "r{i}").unwrap();
                    }
                    w.push(&id, Some(20_000 + (i % 7) as i32), &body).expect("writes");
                }
                w.finish().expect("closes");
            });
        }
    });
    let bytes: u64 = walk(out).iter().map(|f| f.metadata().map_or(0, |m| m.len())).sum();
    println!(
        "{}",
        serde_json::json!({"generated": per * mechanisms.len() as u64, "collections": mechanisms, "d": d,
            "seconds": t.elapsed().as_secs_f64(), "parquet_bytes": bytes})
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

/// `harmony aggregate --engine local`'s path: every part read, validated and added on one thread.
fn local(dir: &Path) -> u64 {
    let config =
        harmony_protocol::CollectionConfig::from_json(&std::fs::read_to_string(dir.join("spec.json")).unwrap())
            .unwrap();
    let task = harmony_tasks::build(&config).unwrap();
    let mut agg = task.aggregator();
    for f in part_files(dir).unwrap() {
        for_each_row(&f, &mut |r| {
            task.validate(r.body).map_err(|e| e.to_string())?;
            agg.add(r.body).map_err(|e| e.to_string())
        })
        .unwrap();
    }
    let _ = task.estimate(agg.as_ref(), &Query::default()).unwrap();
    agg.count()
}

/// DataFusion reading the body column and comparing each report with a constant (`count(*)
/// WHERE body <> X'00'`; reports' fields: `WHERE body.a <> -1 OR body.b <> -1`, both read):
/// what any aggregate over the reports costs at least. The reports.
fn scan(dir: &Path, partitions: usize) -> u64 {
    use datafusion::arrow::datatypes::DataType;
    use datafusion::functions::core::expr_ext::FieldAccessor;
    use datafusion::prelude::{col, lit};
    let files: Vec<String> = part_files(dir).unwrap().iter().map(|p| p.display().to_string()).collect();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(partitions).enable_all().build().unwrap();
    rt.block_on(async {
        let ctx = harmony_dist::context(partitions);
        let df = ctx.read_parquet(files, Default::default()).await.unwrap();
        let keep = match df.schema().field_with_unqualified_name("body").unwrap().data_type().clone() {
            DataType::Struct(fields) => {
                let minus_one = |t: &DataType| if *t == DataType::Int64 { lit(-1i64) } else { lit(-1i32) };
                let not_minus_one =
                    |i: usize| col("body").field(fields[i].name()).not_eq(minus_one(fields[i].data_type()));
                not_minus_one(0).or(not_minus_one(1))
            }
            _ => col("body").not_eq(lit(datafusion::scalar::ScalarValue::Binary(Some(vec![0])))),
        };
        let df = df.filter(keep).unwrap();
        let count = datafusion::functions_aggregate::expr_fn::count(lit(1));
        let batches = df.aggregate(vec![], vec![count]).unwrap().collect().await.unwrap();
        batches[0].column(0).as_any().downcast_ref::<datafusion::arrow::array::Int64Array>().unwrap().value(0) as u64
    })
}

/// The best of three timings of `f`, in seconds.
fn best_of_3(mut f: impl FnMut()) -> f64 {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn time(out: &Path, partitions: &[usize], with_local: bool) {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(out).unwrap().flatten().map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs.iter().filter(|d| d.join("spec.json").is_file()) {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let line = |engine: &str, p: usize, n: u64, s: f64| {
            let per_s = n as f64 / s;
            println!(
                "{}",
                serde_json::json!({"collection": name, "engine": engine, "partitions": p, "reports": n, "seconds": s, "per_s": per_s})
            );
        };
        let mut n = 0;
        if with_local {
            let s = best_of_3(|| n = local(dir));
            line("local", 1, n, s);
        }
        for &p in partitions {
            let s = best_of_3(|| n = scan(dir, p));
            line("scan", p, n, s);
            let s = best_of_3(|| {
                let (doc, _) = estimate_dir_blocking(dir, &Query::default(), p).unwrap();
                assert_eq!(doc.reports, n);
            });
            line("datafusion", p, n, s);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "scale generate OUT REPORTS MECHANISMS D [device-ids] [plain|dictionary] | scale time OUT PARTITIONS [--no-local]";
    let flags = args.get(5..).unwrap_or_default();
    match args.first().map(String::as_str) {
        Some("generate")
            if args.len() >= 5 && flags.iter().all(|f| ["device-ids", "plain", "dictionary"].contains(&f.as_str())) =>
        {
            let n: f64 = args[2].parse().expect("REPORTS");
            let ms: Vec<String> = args[3].split(',').map(str::to_string).collect();
            let ids = flags.iter().any(|f| f == "device-ids");
            let bodies = flags.iter().find_map(|f| match f.as_str() {
                "plain" => Some(Bodies::Plain),
                "dictionary" => Some(Bodies::Dictionary),
                _ => None,
            });
            generate(Path::new(&args[1]), n as u64, &ms, args[4].parse().expect("D"), ids, bodies);
        }
        Some("time") if args.len() == 3 || (args.len() == 4 && args[3] == "--no-local") => {
            let ps: Vec<usize> = args[2].split(',').map(|p| p.parse().expect("PARTITIONS")).collect();
            time(Path::new(&args[1]), &ps, args.len() == 3);
        }
        _ => {
            eprintln!("usage: {usage}");
            std::process::exit(2);
        }
    }
}
