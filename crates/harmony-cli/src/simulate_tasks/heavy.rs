//! `harmony simulate --task heavy-hitters`: top-k items of a string column, of the
//! `attribute=value` items of each row (`--column '*'`), or of a transactions file, by PEM
//! and/or TreeHist (harmony_analytics::heavy), against the true top k.
//!
//! Transactions file: UTF-8 text, one user per line, the user's items separated by
//! `--separator` (default `,`); items are trimmed, empty items dropped, duplicates within a line
//! counted once; a blank line is a user with an empty set. A file with no item at all is an
//! error.

use crate::output::progress;
use crate::simulate::SimulateArgs;
use anyhow::{Context, Result, anyhow, bail};
use harmony_analytics::heavy::{
    HeavyHitters, ItemCodec, PrefixProtocol, SetSampler, precision_recall_f1, treehist::treehist,
};
use harmony_core::sampling::stream_seed;
use serde::Serialize;
use std::collections::HashMap;
use std::time::Instant;

/// Users as sets of interned items (CSR layout), with the item names.
struct Sets {
    /// Item names, by item index.
    names: Vec<String>,
    /// offsets[i]..offsets[i + 1] indexes user i's items in `items`.
    offsets: Vec<usize>,
    items: Vec<u32>,
    /// What the items are (for the output).
    source: String,
}

impl Sets {
    fn n(&self) -> usize {
        self.offsets.len() - 1
    }
    fn user(&self, i: usize) -> &[u32] {
        &self.items[self.offsets[i]..self.offsets[i + 1]]
    }
}

/// Interns item names.
#[derive(Default)]
struct Interner {
    ids: HashMap<String, u32>,
    names: Vec<String>,
}

impl Interner {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.ids.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.ids.insert(name.to_string(), i);
        self.names.push(name.to_string());
        i
    }
}

fn read_transactions(path: &std::path::Path, sep: char) -> Result<Sets> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading --transactions {}", path.display()))?;
    let mut int = Interner::default();
    let mut offsets = vec![0];
    let mut items = Vec::new();
    for line in text.lines() {
        let start = items.len();
        for it in line.split(sep).map(str::trim).filter(|s| !s.is_empty()) {
            let id = int.id(it);
            if !items[start..].contains(&id) {
                items.push(id);
            }
        }
        offsets.push(items.len());
    }
    if items.is_empty() {
        bail!(
            "--transactions {}: no items ({} lines), expected one set of items per line separated by '{sep}'",
            path.display(),
            offsets.len() - 1
        );
    }
    Ok(Sets { names: int.names, offsets, items, source: format!("transactions {}", path.display()) })
}

/// A fast non-cryptographic hasher for the interning maps (keys are data values, not
/// adversarial input to a long-running server).
#[derive(Default, Clone, Copy)]
struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            h = (h.rotate_left(5) ^ u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
        for &b in chunks.remainder() {
            h = (h.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
        self.0 = h;
    }
    fn finish(&self) -> u64 {
        harmony_core::sampling::splitmix64(self.0)
    }
}

type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<FastHasher>>;

/// Users' item sets from CSV columns: one item (the value) per user for a column, or the
/// `attribute=value` items of the schema's attributes for `*`. Streams the CSV and interns only
/// the columns used (no table of strings).
fn read_columns(args: &SimulateArgs, column: &str) -> Result<(String, Sets)> {
    let data_path = args.data.clone().unwrap_or_else(|| crate::data::bundled("data/adult.csv"));
    let data_name = data_path.display().to_string();
    let schema_path = match (&args.data, &args.schema) {
        (_, Some(s)) => Some(s.clone()),
        (None, None) => Some(crate::data::bundled("examples/adult.toml")),
        (Some(_), None) => None,
    };
    let wanted: Option<Vec<String>> = if column != "*" {
        None
    } else if let Some(p) = &schema_path {
        Some(crate::data::SchemaFile::load(p)?.attributes.iter().map(|a| a.name().to_string()).collect())
    } else {
        // No schema: infer one from the whole table, as `simulate` does.
        let (_, file, _) = crate::simulate::load_inputs(&args.data, &args.schema, args.max_categories)?;
        Some(file.attributes.iter().map(|a| a.name().to_string()).collect())
    };
    let mut rdr =
        csv::ReaderBuilder::new().has_headers(true).flexible(true).from_reader(crate::data::open_data(&data_path)?);
    let header: Vec<String> =
        rdr.headers().context("reading the CSV header")?.iter().map(|s| s.trim().to_string()).collect();
    let cols: Vec<(usize, String)> = match &wanted {
        Some(attrs) => attrs
            .iter()
            .map(|a| {
                header
                    .iter()
                    .position(|h| h == a)
                    .map(|j| (j, a.clone()))
                    .ok_or_else(|| anyhow!("schema attribute \"{a}\" is not a column of {data_name}"))
            })
            .collect::<Result<_>>()?,
        None => {
            let j = header.iter().position(|h| h == column).ok_or_else(|| {
                anyhow!("--column \"{column}\" is not a column of {data_name}; columns: {}", header.join(", "))
            })?;
            vec![(j, String::new())]
        }
    };
    let mut maps: Vec<FastMap<Box<[u8]>, u32>> = vec![FastMap::default(); cols.len()];
    let mut names: Vec<String> = Vec::new();
    let mut offsets = vec![0usize];
    let mut items: Vec<u32> = Vec::new();
    let mut rec = csv::ByteRecord::new();
    let mut row = 1usize;
    while rdr.read_byte_record(&mut rec).with_context(|| format!("{data_name}: reading row {}", row + 1))? {
        row += 1;
        if rec.len() != header.len() {
            bail!(
                "{data_name}: row {row} has {} fields, expected {} (the header's column count)",
                rec.len(),
                header.len()
            );
        }
        for ((j, attr), map) in cols.iter().zip(maps.iter_mut()) {
            let v = rec[*j].trim_ascii();
            if v.is_empty() {
                continue;
            }
            let id = match map.get(v) {
                Some(&id) => id,
                None => {
                    let text = std::str::from_utf8(v)
                        .with_context(|| format!("{data_name}: row {row}, column {}: not UTF-8", header[*j]))?;
                    names.push(if attr.is_empty() { text.to_string() } else { format!("{attr}={text}") });
                    let id = (names.len() - 1) as u32;
                    map.insert(v.into(), id);
                    id
                }
            };
            items.push(id);
        }
        offsets.push(items.len());
    }
    let n = offsets.len() - 1;
    if n == 0 {
        bail!("{data_name}: no data rows");
    }
    if items.is_empty() {
        bail!("--column \"{column}\" of {data_name} is empty: no non-empty value in {n} rows");
    }
    let source = if column == "*" {
        format!("{} attributes as attribute=value items", cols.len())
    } else {
        format!("column {column}")
    };
    Ok((data_name, Sets { names, offsets, items, source }))
}

#[derive(Serialize)]
struct Item {
    item: String,
    code: u64,
    estimate: f64,
    std_error: f64,
    ci95: (f64, f64),
    true_frequency: f64,
    in_true_top_k: bool,
}

#[derive(Serialize)]
struct Level {
    prefix_bits: u32,
    users: u64,
    candidates: usize,
    kept: usize,
}

#[derive(Serialize)]
struct MethodResult {
    method: String,
    epsilon: f64,
    olh_g: u32,
    levels: Vec<Level>,
    precision_mean: f64,
    precision_sd: f64,
    recall_mean: f64,
    recall_sd: f64,
    f1_mean: f64,
    f1_sd: f64,
    /// Randomize + aggregate + estimate, per run.
    seconds_per_run: f64,
    /// The first run's top k.
    top: Vec<Item>,
}

#[derive(Serialize)]
struct Output {
    data: String,
    items: String,
    n: usize,
    distinct_items: usize,
    encoding: String,
    item_bits: u32,
    collision_bound: f64,
    colliding_items: usize,
    pad_length: usize,
    k: usize,
    runs: usize,
    seed: u64,
    parse_seconds: f64,
    true_top_k: Vec<(String, f64)>,
    results: Vec<MethodResult>,
}

fn mean_sd(x: &[f64]) -> (f64, f64) {
    let m = x.iter().sum::<f64>() / x.len() as f64;
    let v = if x.len() > 1 { x.iter().map(|a| (a - m).powi(2)).sum::<f64>() / (x.len() - 1) as f64 } else { 0.0 };
    (m, v.sqrt())
}

/// Runs `harmony simulate --task heavy-hitters`.
pub fn run(args: &SimulateArgs) -> Result<()> {
    let t = &args.task;
    let t_parse = Instant::now();
    let (data_name, sets) = match (&t.transactions, &t.column) {
        (Some(_), Some(_)) => bail!("--transactions and --column are exclusive, give one"),
        (None, None) => bail!(
            "--task heavy-hitters needs --column COL (a CSV column, or '*' for attribute=value items of each row) or --transactions FILE"
        ),
        (Some(path), None) => {
            let s = read_transactions(path, t.separator.unwrap_or(','))?;
            (path.display().to_string(), s)
        }
        (None, Some(col)) => read_columns(args, col)?,
    };
    let n = sets.n();
    let d = sets.names.len();
    // Item codes.
    let bits = t.item_bits.unwrap_or(32);
    let codec = match t.items.as_deref().unwrap_or("hash") {
        "hash" => ItemCodec::hashed(bits)?,
        "id" => ItemCodec::ids(bits)?,
        other => bail!("--items is \"{other}\", expected hash or id"),
    };
    let codes: Vec<u64> = sets.names.iter().map(|s| codec.encode(s)).collect::<Result<_, _>>()?;
    let mut by_code: HashMap<u64, Vec<u32>> = HashMap::with_capacity(d);
    for (i, &c) in codes.iter().enumerate() {
        by_code.entry(c).or_default().push(i as u32);
    }
    let colliding_items = by_code.values().filter(|v| v.len() > 1).map(|v| v.len()).sum::<usize>();
    let user_codes: Vec<u64> = sets.items.iter().map(|&i| codes[i as usize]).collect();
    // Truth: the fraction of users holding each item.
    let mut counts = vec![0u64; d];
    for &i in &sets.items {
        counts[i as usize] += 1;
    }
    let k = t.top.unwrap_or(20);
    if k == 0 {
        bail!("--top is 0, expected an integer >= 1");
    }
    if k > d {
        bail!("--top is {k}, but {} has only {d} distinct items; expected at most {d}", sets.source);
    }
    let mut order: Vec<usize> = (0..d).collect();
    order.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then_with(|| sets.names[a].cmp(&sets.names[b])));
    let true_top: Vec<u64> = order[..k].iter().map(|&i| codes[i]).collect();
    let freq = |i: usize| counts[i] as f64 / n as f64;
    // Padding length.
    let max_size = (0..n).map(|i| sets.user(i).len()).max().unwrap_or(0);
    let pad = match t.pad_length {
        Some(l) => l,
        None if max_size <= 1 => 1,
        None => {
            let sizes: Vec<usize> = (0..n).map(|i| sets.user(i).len()).collect();
            SetSampler::percentile_length(&sizes, 0.9)?
        }
    };
    let sampler = SetSampler::new(pad, codec.padding_code())?;
    let parse_seconds = t_parse.elapsed().as_secs_f64();

    let epsilons = args.epsilon.clone().unwrap_or(vec![1.0, 2.0, 4.0]);
    let methods: Vec<String> = t.method.clone().unwrap_or(vec!["pem".into()]);
    for m in &methods {
        if m != "pem" && m != "treehist" {
            bail!("--method \"{m}\" is not a heavy-hitters method, expected pem or treehist");
        }
    }
    let pb = progress((epsilons.len() * methods.len() * args.runs) as u64, "heavy-hitters", args.format);
    let mut results = Vec::new();
    for (mi, m) in methods.iter().enumerate() {
        for (ei, &eps) in epsilons.iter().enumerate() {
            let proto = match m.as_str() {
                "pem" => PrefixProtocol::pem(eps, bits, k),
                _ => treehist(eps, bits, k),
            }
            .with_context(|| format!("method {m} at epsilon {eps}"))?;
            let (mut ps, mut rs, mut fs) = (Vec::new(), Vec::new(), Vec::new());
            let mut first: Option<HeavyHitters> = None;
            let start = Instant::now();
            for r in 0..args.runs {
                let seed = stream_seed(args.seed, ((mi as u64) << 40) | ((ei as u64) << 32) | r as u64);
                let agg = proto.collect_parallel(n, seed, |i, rng| {
                    let s = &user_codes[sets.offsets[i]..sets.offsets[i + 1]];
                    sampler.sample(s, rng)
                })?;
                let hh = agg.estimate_sets(pad)?;
                let found: Vec<u64> = hh.items.iter().map(|h| h.code).collect();
                let (p, rc, f1) = precision_recall_f1(&found, &true_top);
                ps.push(p);
                rs.push(rc);
                fs.push(f1);
                if first.is_none() {
                    first = Some(hh);
                }
                pb.inc(1);
            }
            let seconds_per_run = start.elapsed().as_secs_f64() / args.runs as f64;
            let hh = first.expect("runs >= 1");
            let top = hh
                .items
                .iter()
                .map(|h| {
                    let (item, f) = match by_code.get(&h.code) {
                        // Several items on one code: the code's frequency is the sum (named by the first).
                        Some(ids) => (
                            ids.iter().map(|&i| sets.names[i as usize].clone()).collect::<Vec<_>>().join(" | "),
                            ids.iter().map(|&i| freq(i as usize)).sum(),
                        ),
                        None => (format!("<code {:#x}, not in the data>", h.code), 0.0),
                    };
                    Item {
                        item,
                        code: h.code,
                        estimate: h.estimate,
                        std_error: h.std_error,
                        ci95: h.ci95(),
                        true_frequency: f,
                        in_true_top_k: true_top.contains(&h.code),
                    }
                })
                .collect();
            let (precision_mean, precision_sd) = mean_sd(&ps);
            let (recall_mean, recall_sd) = mean_sd(&rs);
            let (f1_mean, f1_sd) = mean_sd(&fs);
            results.push(MethodResult {
                method: m.clone(),
                epsilon: eps,
                olh_g: proto.olh().g(),
                levels: hh
                    .levels
                    .iter()
                    .map(|l| Level {
                        prefix_bits: l.prefix_bits,
                        users: l.users,
                        candidates: l.candidates,
                        kept: l.kept,
                    })
                    .collect(),
                precision_mean,
                precision_sd,
                recall_mean,
                recall_sd,
                f1_mean,
                f1_sd,
                seconds_per_run,
                top,
            });
        }
    }
    pb.finish_and_clear();
    let out = Output {
        data: data_name,
        items: sets.source.clone(),
        n,
        distinct_items: d,
        encoding: format!("{:?}", codec.encoding()).to_lowercase(),
        item_bits: bits,
        collision_bound: codec.collision_bound(d),
        colliding_items,
        pad_length: pad,
        k,
        runs: args.runs,
        seed: args.seed,
        parse_seconds,
        true_top_k: order[..k].iter().map(|&i| (sets.names[i].clone(), freq(i))).collect(),
        results,
    };
    crate::output::emit(&out, args.format, args.plot.as_deref(), write_plot, print_table)
}

fn print_table(out: &Output) {
    println!(
        "heavy hitters: {} ({}), n = {}, {} distinct items, {}-bit {} codes (collision bound {:.2e}, {} colliding), padding L = {}, top {}, {} runs, parse {:.2} s",
        out.data,
        out.items,
        out.n,
        out.distinct_items,
        out.item_bits,
        out.encoding,
        out.collision_bound,
        out.colliding_items,
        out.pad_length,
        out.k,
        out.runs,
        out.parse_seconds
    );
    println!(
        "{:<9} {:>5} {:>7} {:>16} {:>16} {:>16} {:>10}",
        "method", "eps", "levels", "precision", "recall", "F1", "s/run"
    );
    for r in &out.results {
        println!(
            "{:<9} {:>5} {:>7} {:>8.3} ± {:<5.3} {:>8.3} ± {:<5.3} {:>8.3} ± {:<5.3} {:>10.3}",
            r.method,
            r.epsilon,
            r.levels.len(),
            r.precision_mean,
            r.precision_sd,
            r.recall_mean,
            r.recall_sd,
            r.f1_mean,
            r.f1_sd,
            r.seconds_per_run
        );
    }
    if let Some(r) = out.results.last() {
        println!(
            "\ntop {} by {} at eps = {} (first run): estimate ± standard error, true frequency",
            out.k, r.method, r.epsilon
        );
        for (i, it) in r.top.iter().enumerate() {
            println!(
                "{:>3}. {:<50} {:>8.4} ± {:<7.4} true {:.4}{}",
                i + 1,
                it.item,
                it.estimate,
                it.std_error,
                it.true_frequency,
                if it.in_true_top_k { "" } else { "  (not in the true top k)" }
            );
        }
    }
}

/// F1, precision and recall against ε, one line per method.
fn write_plot(path: &std::path::Path, out: &Output) -> Result<()> {
    use crate::plot::{Panel, Series};
    let panel = |title: &str, pick: fn(&MethodResult) -> f64| {
        let mut series: Vec<Series> = Vec::new();
        for r in &out.results {
            match series.iter_mut().find(|s| s.label == r.method) {
                Some(s) => s.points.push((r.epsilon, pick(r))),
                None => series.push(Series { label: r.method.clone(), points: vec![(r.epsilon, pick(r))] }),
            }
        }
        Panel { title: title.into(), y_label: title.into(), series }
    };
    let panels =
        [panel("F1", |r| r.f1_mean), panel("precision", |r| r.precision_mean), panel("recall", |r| r.recall_mean)];
    let title = format!("top-{} heavy hitters: {}", out.k, out.items);
    crate::plot::line_panels_png_scaled(path, &title, &panels, crate::plot::YScale::Linear)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sim: SimulateArgs,
    }

    fn args(extra: &[&str]) -> SimulateArgs {
        let mut v = vec!["x", "--task", "heavy-hitters", "--runs", "1", "--format", "json"];
        v.extend_from_slice(extra);
        Cli::parse_from(v).sim
    }

    fn tmp(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("harmony-heavy-{}-{name}", std::process::id()));
        std::fs::write(&p, text).unwrap();
        p
    }

    fn err(a: &[&str]) -> String {
        format!("{:#}", run(&args(a)).unwrap_err())
    }

    #[test]
    fn bad_inputs_give_clear_errors() {
        let e = err(&["--column", "no_such_column"]);
        assert!(e.contains("no_such_column") && e.contains("columns:"), "{e}");
        let e = err(&["--column", "sex", "--top", "0"]);
        assert!(e.contains("--top is 0"), "{e}");
        let e = err(&["--column", "sex", "--top", "5"]);
        assert!(e.contains("--top is 5") && e.contains("only 2 distinct items"), "{e}");
        let empty = tmp("empty.txt", "\n\n  \n");
        let e = err(&["--transactions", empty.to_str().unwrap()]);
        assert!(e.contains("no items"), "{e}");
        let e = err(&[]);
        assert!(e.contains("--column") && e.contains("--transactions"), "{e}");
        let csv = tmp("empty-col.csv", "a,b\n1,\n2,\n");
        let e = err(&["--data", csv.to_str().unwrap(), "--column", "b"]);
        assert!(e.contains("is empty"), "{e}");
        let e = err(&["--column", "sex", "--top", "1", "--method", "sfp"]);
        assert!(e.contains("sfp") && e.contains("pem or treehist"), "{e}");
        let ids = tmp("ids.txt", "1,2\nx\n");
        let e = err(&["--transactions", ids.to_str().unwrap(), "--items", "id", "--top", "1"]);
        assert!(e.contains("item id") && e.contains("\"x\""), "{e}");
        let e = err(&["--column", "sex", "--top", "1", "--item-bits", "70"]);
        assert!(e.contains("item bits") && e.contains("70"), "{e}");
        for p in [empty, csv, ids] {
            std::fs::remove_file(p).ok();
        }
    }

    #[test]
    fn transactions_run_end_to_end() {
        let mut text = String::new();
        for i in 0..20_000 {
            let mut items = vec![format!("item{}", i % 3)];
            if i % 2 == 0 {
                items.push("common".into());
            }
            items.push(format!("rare{i}"));
            text.push_str(&items.join(" , "));
            text.push('\n');
        }
        let p = tmp("tx.txt", &text);
        run(&args(&["--transactions", p.to_str().unwrap(), "--top", "2", "--epsilon", "4", "--pad-length", "3"]))
            .unwrap();
        std::fs::remove_file(p).ok();
    }
}
