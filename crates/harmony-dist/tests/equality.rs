//! DataFusion equals the in-process aggregation: for every task and method of the fuzz table
//! (fuzz/src/wire_reports.rs), reports written as `harmony export` writes them (three days,
//! several part files each), aggregated by `estimate_dir` on 1, 2 and 3 partitions and by SQL
//! (`harmony_estimate`, and daily `harmony_state` partials merged by `harmony_merge`), give the
//! estimate document of one in-process aggregator of the same files to 1e-12; with the bodies
//! written plain, as a dictionary and (OLH's reports) as fields (harmony_data::reports::Bodies).

#[path = "../../../fuzz/src/wire_reports.rs"]
#[allow(dead_code)]
mod wire_reports;

use datafusion::arrow::array::AsArray;
use harmony_data::reports::{Bodies, ReportsWriter, for_each_row, part_files};
use harmony_dist::{context, estimate_dir};
use harmony_protocol::TaskKind;
use harmony_protocol::estimates::{EstimateDocument, Query};
use std::path::{Path, PathBuf};
use wire_reports::{Entry, rel_diff, table};

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("harmony-dist-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Writes `n` reports of `e` under `out/<label>/collection=ID` (three days) with its spec.
fn export(e: &Entry, out: &Path, n: u64) -> PathBuf {
    export_as(e, out, n, Bodies::Plain)
}

/// [`export`] with the bodies written as `bodies` (under `out/<label>-<bodies>`).
fn export_as(e: &Entry, out: &Path, n: u64, bodies: Bodies) -> PathBuf {
    let label = format!("{}-{bodies:?}", e.label.replace(' ', "_"));
    let dir = out.join(label).join(format!("collection={}", e.config.id));
    let mut w = ReportsWriter::create(&dir).unwrap().with_bodies(bodies);
    for i in 0..n {
        w.push(&format!("r{i}"), Some(20_000 + (i % 3) as i32), &wire_reports::varied_report(e, i, 7000)).unwrap();
    }
    w.finish().unwrap();
    std::fs::write(dir.join("spec.json"), serde_json::to_string(&e.config).unwrap()).unwrap();
    dir
}

/// The body encodings `e`'s reports can be written in: fields too where they are OLH's or
/// one-attribute fixed-point records (all of the 1,500 the tests write).
fn layouts(e: &Entry) -> Vec<Bodies> {
    use harmony_core::{frequency::OlhReport, strategy::RecordReport, wire};
    let reports: Vec<Vec<u8>> = (0..1500).map(|i| wire_reports::varied_report(e, i, 7000)).collect();
    let olh = reports.iter().all(|r| OlhReport::decode_fast(r).is_some_and(|o| wire::encode(&o) == *r));
    let record = |r: &Vec<u8>| wire::decode::<RecordReport>(r).ok().filter(|x| wire::encode(x) == *r);
    let one_fixed = reports.iter().all(|r| record(r).is_some_and(|x| x.as_one_fixed().is_some()));
    let fields = [(olh, Bodies::OlhFields), (one_fixed, Bodies::RecordFields)];
    let fields = fields.into_iter().filter_map(|(ok, b)| ok.then_some(b));
    [Bodies::Plain, Bodies::Dictionary].into_iter().chain(fields).collect()
}

/// One in-process aggregator of every part (the reference).
fn local(e: &Entry, dir: &Path) -> EstimateDocument {
    let mut agg = e.task.aggregator();
    for f in part_files(dir).unwrap() {
        for_each_row(&f, &mut |r| {
            e.task.validate(r.body).map_err(|x| x.to_string())?;
            agg.add(r.body).map_err(|x| x.to_string())
        })
        .unwrap();
    }
    harmony_tasks::document(e.task.as_ref(), agg.as_ref(), &Query::default()).unwrap()
}

/// A context on `partitions` partitions with the parts of `dir` registered as table `reports`.
fn reports_table(dir: &Path, partitions: usize, rt: &tokio::runtime::Runtime) -> datafusion::prelude::SessionContext {
    let ctx = context(partitions);
    let files: Vec<String> = part_files(dir).unwrap().iter().map(|p| p.display().to_string()).collect();
    rt.block_on(async {
        let df = ctx.read_parquet(files, Default::default()).await.unwrap();
        ctx.register_table("reports", df.into_view()).unwrap();
    });
    ctx
}

fn sql_text(ctx: &datafusion::prelude::SessionContext, rt: &tokio::runtime::Runtime, sql: &str) -> String {
    let batches = rt.block_on(async { ctx.sql(sql).await.unwrap().collect().await.unwrap() });
    let col = batches[0].column(0);
    match col.data_type() {
        datafusion::arrow::datatypes::DataType::Utf8View => col.as_string_view().value(0).to_string(),
        _ => col.as_string::<i32>().value(0).to_string(),
    }
}

#[test]
fn datafusion_equals_in_process_for_every_task() {
    let out = temp("equality");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut checked = 0;
    let mut fields = [0, 0];
    for e in table().iter().filter(|e| e.task.mergeable()) {
        for bodies in layouts(e) {
            fields[usize::from(bodies == Bodies::RecordFields)] +=
                usize::from(bodies != Bodies::Plain && bodies != Bodies::Dictionary);
            let dir = export_as(e, &out, 1500, bodies);
            let want = serde_json::to_value(local(e, &dir)).unwrap();
            for partitions in [1, 2, 3] {
                let (doc, files) = rt.block_on(estimate_dir(&context(partitions), &dir, &Query::default())).unwrap();
                assert!(files >= 3, "{}: {files} part files", e.label);
                let d = rel_diff(&want, &serde_json::to_value(&doc).unwrap());
                assert!(
                    d <= 1e-12,
                    "{} ({bodies:?}) on {partitions} partitions: {d:e}\n{want}\n{}",
                    e.label,
                    serde_json::to_value(&doc).unwrap()
                );
            }
        }
        checked += 1;
    }
    assert!(checked > 30, "{checked} entries");
    assert!(fields[0] >= 2 && fields[1] >= 2, "entries written as OLH's fields, as records' fields: {fields:?}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn sql_estimates_and_daily_partials_merge() {
    let out = temp("sql");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    // One entry per task kind.
    let mut seen = std::collections::BTreeSet::new();
    for e in table().iter().filter(|e| e.task.mergeable() && seen.insert(e.config.task.kind().name())) {
        let dir = export(e, &out, 900);
        let want = serde_json::to_value(local(e, &dir)).unwrap();
        let spec = std::fs::read_to_string(dir.join("spec.json")).unwrap().replace('\'', "''");
        let ctx = reports_table(&dir, 2, &rt);
        let direct = sql_text(&ctx, &rt, &format!("SELECT harmony_estimate(body, '{spec}') FROM reports"));
        let d = rel_diff(&want, &serde_json::from_str(&direct).unwrap());
        assert!(d <= 1e-12, "{}: SQL differs by {d:e}", e.label);
        rt.block_on(async {
            let daily = ctx
                .sql(&format!("SELECT day, harmony_state(body, '{spec}') AS s FROM reports GROUP BY day"))
                .await
                .unwrap();
            ctx.register_table("daily", daily.into_view()).unwrap();
        });
        let merged = sql_text(&ctx, &rt, &format!("SELECT harmony_merge(s, '{spec}') FROM daily"));
        let d = rel_diff(&want, &serde_json::from_str(&merged).unwrap());
        assert!(d <= 1e-12, "{}: merged daily partials differ by {d:e}", e.label);
    }
    assert!(seen.len() >= 6, "{seen:?}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn errors_name_the_argument_the_row_and_the_collection() {
    let out = temp("errors");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let e = table().iter().find(|e| e.config.task.kind() == TaskKind::Frequency).unwrap();
    for bodies in [Bodies::Plain, Bodies::Dictionary] {
        errors_of(&export_as(e, &out, 50, bodies), &rt);
    }
    // OLH's fields: a null field and a value outside [0, g) are named.
    let olh = table().iter().find(|e| layouts(e).contains(&Bodies::OlhFields)).unwrap();
    let dir = export_as(olh, &out, 50, Bodies::OlhFields);
    let spec = std::fs::read_to_string(dir.join("spec.json")).unwrap().replace('\'', "''");
    let ctx = reports_table(&dir, 1, &rt);
    let run = |fields: &str| -> String {
        let sql = format!("SELECT harmony_estimate(named_struct({fields}), '{spec}') FROM reports");
        let result = rt.block_on(async { ctx.sql(&sql).await?.collect().await });
        result.map(|_| "ok".to_string()).unwrap_or_else(|e| e.to_string())
    };
    assert_eq!(run("'seed', get_field(body, 'seed'), 'y', get_field(body, 'y')"), "ok");
    let err = run("'seed', CAST(NULL AS BIGINT), 'y', get_field(body, 'y')");
    assert!(err.contains("a null body.seed"), "{err}");
    let err = run("'seed', get_field(body, 'seed'), 'y', CAST(get_field(body, 'y') + 1000 AS INT)");
    assert!(err.contains("row 0 of the batch: invalid report") && err.contains("y is 1001"), "{err}");
    let _ = std::fs::remove_dir_all(&out);
}

fn errors_of(dir: &Path, rt: &tokio::runtime::Runtime) {
    let spec = std::fs::read_to_string(dir.join("spec.json")).unwrap();
    let ctx = reports_table(dir, 2, rt);
    let run = |sql: String| -> String {
        rt.block_on(async {
            match ctx.sql(&sql).await {
                Err(e) => e.to_string(),
                Ok(df) => df.collect().await.map(|_| "ok".to_string()).unwrap_or_else(|e| e.to_string()),
            }
        })
    };
    let err = run("SELECT harmony_estimate(report_id, '{}') FROM reports".into());
    assert!(err.contains("argument 1 (report bodies) must be binary"), "{err}");
    let err = run("SELECT harmony_estimate(body, '{\"config_version\": 3}') FROM reports".into());
    assert!(err.contains("harmony_estimate: argument 2 (spec)"), "{err}");
    let err = run("SELECT harmony_estimate(body, report_id) FROM reports".into());
    assert!(err.contains("argument 2 (spec) must be a string literal"), "{err}");
    let spec_sql = spec.replace('\'', "''");
    let err = run(format!("SELECT harmony_estimate(body, '{spec_sql}', 'quantiles=2') FROM reports"));
    assert!(err.contains("argument 3 (query)"), "{err}");
    // Another collection's reports: the first is named by its row and refused.
    let other = table().iter().find(|o| o.config.task.kind() == TaskKind::Marginals).unwrap();
    let other_spec = serde_json::to_string(&other.config).unwrap().replace('\'', "''");
    let err = run(format!("SELECT harmony_estimate(body, '{other_spec}') FROM reports"));
    assert!(err.contains("invalid report") && err.contains("row 0"), "{err}");
    // States of another collection do not merge.
    let err = run(format!(
        "SELECT harmony_merge(s, '{other_spec}') FROM (SELECT harmony_state(body, '{spec_sql}') AS s FROM reports)"
    ));
    assert!(err.contains("another collection"), "{err}");
}

#[test]
fn long_columns_tally_short_reports_or_switch_the_tally_off() {
    // 150,000 reports: past the tally's trial (65,536 reports) on 1 and on 2 partitions. GRR's
    // and Hadamard's few distinct reports stay counted; OLH's (distinct seeds, some longer than
    // 12 bytes) switch the tally off after its trial; unary reports sit in between.
    let out = temp("long");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut checked = 0;
    for e in table().iter().filter(|e| e.config.task.kind() == TaskKind::Frequency) {
        if !["grr", "olh", "oue", "hadamard"].iter().any(|m| e.label.split(' ').any(|w| w == *m)) {
            continue;
        }
        for bodies in layouts(e) {
            let dir = export_as(e, &out, 150_000, bodies);
            let want = serde_json::to_value(local(e, &dir)).unwrap();
            // DataFusion reads the column as written (a dictionary reaches the dictionary path).
            let files: Vec<String> = part_files(&dir).unwrap().iter().map(|p| p.display().to_string()).collect();
            let df = rt.block_on(context(1).read_parquet(files, Default::default())).unwrap();
            let ty = df.schema().field_with_unqualified_name("body").unwrap().data_type().clone();
            use datafusion::arrow::datatypes::DataType;
            let read = match ty {
                DataType::Dictionary(..) => Bodies::Dictionary,
                DataType::Struct(_) => bodies, // read as written: checked in harmony-data
                _ => Bodies::Plain,            // binary, read as a view
            };
            assert_eq!(read, bodies, "{}: {ty}", e.label);
            for partitions in [1, 2] {
                let (doc, _) = rt.block_on(estimate_dir(&context(partitions), &dir, &Query::default())).unwrap();
                let d = rel_diff(&want, &serde_json::to_value(&doc).unwrap());
                assert!(d <= 1e-12, "{} ({bodies:?}) on {partitions} partitions: {d:e}", e.label);
            }
            // A bad report late in the column is still named by its row.
            let mut w = ReportsWriter::append(&dir).unwrap().with_bodies(bodies);
            for i in 0..70_000u64 {
                let body = match (i, bodies) {
                    // A y outside [0, g) (a bad report that fields can hold).
                    (69_990, Bodies::OlhFields) => {
                        harmony_core::wire::encode(&harmony_core::frequency::OlhReport { seed: i, y: u32::MAX })
                    }
                    (69_990, _) => vec![0xff; 3],
                    _ => wire_reports::varied_report(e, i, 1),
                };
                w.push(&format!("late{i}"), Some(20_003), &body).unwrap();
            }
            w.finish().unwrap();
            let err = rt.block_on(estimate_dir(&context(1), &dir, &Query::default())).unwrap_err().to_string();
            assert!(err.contains("invalid report") && err.contains("row "), "{} ({bodies:?}): {err}", e.label);
        }
        checked += 1;
    }
    assert!(checked >= 4, "{checked} entries");
    let _ = std::fs::remove_dir_all(&out);
}
