//! `harmony simulate --task heavy-hitters`: top-k items of a string column, of the
//! `attribute=value` items of each row (`--column '*'`), or of a transactions file (see
//! [`crate::items`]), by PEM and/or TreeHist through the `heavy-hitters` task a server runs (the
//! experiment runner): per method and ε, precision, recall and F1 against the true top k, and
//! run 1's estimate document beside the true frequencies.

use crate::experiment::{self, Analysis, Column, Metrics, Setting, Show};
use crate::items::{self, Sets, Source};
use crate::population::Population;
use crate::render::Truth;
use crate::simulate::SimulateArgs;
use anyhow::{Result, bail};
use harmony_analytics::heavy::{ItemCodec, SetSampler, precision_recall_f1};
use harmony_core::schema::Schema;
use harmony_protocol::estimates::{EstimateDocument, HeavyHittersEstimate};
use harmony_protocol::spec::{HeavyHittersSpec, ItemEncoding, TaskSpec};
use harmony_tasks::{Input, Task, TaskAggregator};
use std::collections::{BTreeMap, HashMap};

struct Heavy {
    title: String,
    population: Population,
    specs: Vec<(String, HeavyHittersSpec)>,
    epsilons: Vec<f64>,
    /// The codes of the true top k.
    true_top: Vec<u64>,
    truth: Truth,
}

impl Analysis for Heavy {
    fn title(&self) -> String {
        self.title.clone()
    }
    fn schema(&self) -> Option<Schema> {
        None
    }
    fn settings(&self) -> Result<Vec<Setting>> {
        let specs = self.specs.iter().map(|(label, s)| (label.clone(), TaskSpec::from(s.clone())));
        Ok(Setting::grid(specs, &self.epsilons))
    }
    fn inputs(&self) -> Vec<Input<'_>> {
        self.population.inputs()
    }
    fn metrics(&self, _: &Setting, _: &dyn Task, _: &dyn TaskAggregator, doc: &EstimateDocument) -> Result<Metrics> {
        let h: &HeavyHittersEstimate = (&doc.result).try_into()?;
        let found = h.items.iter().map(|i| u64::from_str_radix(&i.code, 16)).collect::<Result<Vec<u64>, _>>()?;
        let (p, r, f1) = precision_recall_f1(&found, &self.true_top);
        Ok(vec![("precision", p), ("recall", r), ("f1", f1)])
    }
    fn columns(&self) -> Vec<Column> {
        vec![
            Column { header: "precision", metric: "precision", show: Show::Percent },
            Column { header: "recall", metric: "recall", show: Show::Percent },
            Column { header: "F1", metric: "f1", show: Show::Percent },
        ]
    }
    fn truth(&self) -> Option<Truth> {
        Some(self.truth.clone())
    }
    fn plot_metric(&self) -> (&'static str, &'static str) {
        ("f1", "F1")
    }
}

/// The item sets of the options: `--transactions FILE` or `--column COL` of the data.
fn read_sets(args: &SimulateArgs) -> Result<(String, Sets)> {
    let t = &args.task;
    let source = match (&t.transactions, &t.column) {
        (Some(_), Some(_)) => bail!("--transactions and --column are exclusive, give one"),
        (None, None) => bail!(
            "--task heavy-hitters needs --column COL (a CSV column, or '*' for attribute=value items of each row) or --transactions FILE"
        ),
        (Some(path), None) => Source::Transactions(path.clone(), t.separator.unwrap_or(',')),
        (None, Some(col)) => Source::Column(col.clone()),
    };
    let data = args.data.clone().unwrap_or_else(|| crate::data::bundled("data/adult.csv"));
    let star = match &source {
        Source::Column(c) if c == "*" => {
            let (_, file, _) = crate::simulate::load_inputs(&args.data, &args.schema, args.max_categories)?;
            Some(file.attributes.iter().map(|a| a.name().to_string()).collect())
        }
        _ => None,
    };
    let name = match &source {
        Source::Transactions(p, _) => p.display().to_string(),
        Source::Column(_) => data.display().to_string(),
    };
    Ok((name, items::read(&source, &data, star)?))
}

/// The true top k (codes, by frequency then name) and the truth printed beside the estimates:
/// the true share of the 10k most frequent codes (items on one code summed and named together).
pub fn true_top(sets: &Sets, codec: &ItemCodec, k: usize) -> Result<(Vec<u64>, Truth)> {
    let d = sets.names.len();
    if k > d {
        bail!("--top is {k}, but {} has only {d} distinct items; expected at most {d}", sets.source);
    }
    let codes: Vec<u64> = sets.names.iter().map(|s| codec.encode(s)).collect::<Result<_, _>>()?;
    let mut counts = vec![0u64; d];
    for &i in &sets.items {
        counts[i as usize] += 1;
    }
    let mut order: Vec<usize> = (0..d).collect();
    order.sort_by(|&a, &b| counts[b].cmp(&counts[a]).then_with(|| sets.names[a].cmp(&sets.names[b])));
    let top = order[..k].iter().map(|&i| codes[i]).collect();
    let width = codec.bits().div_ceil(4) as usize;
    let mut by_code: HashMap<u64, (Vec<&str>, u64)> = HashMap::new();
    for &i in &order[..(10 * k).min(d)] {
        let e = by_code.entry(codes[i]).or_default();
        e.0.push(&sets.names[i]);
        e.1 += counts[i];
    }
    let n = sets.n() as f64;
    let truth: BTreeMap<String, (String, f64)> = by_code
        .into_iter()
        .map(|(c, (names, count))| (format!("{c:0width$x}"), (names.join(" | "), count as f64 / n)))
        .collect();
    Ok((top, Truth::Items(truth)))
}

/// The padding length: `--pad-length`, else 1 for single items, else the 90th percentile of
/// the set sizes.
fn pad_length(sets: &Sets, given: Option<usize>) -> Result<usize> {
    let sizes: Vec<usize> = (0..sets.n()).map(|i| sets.user(i).len()).collect();
    Ok(match given {
        Some(l) => l,
        None if sizes.iter().all(|&s| s <= 1) => 1,
        None => SetSampler::percentile_length(&sizes, 0.9)?,
    })
}

/// Runs `harmony simulate --task heavy-hitters`.
pub fn run(args: &SimulateArgs) -> Result<()> {
    let t = &args.task;
    let mut specs = crate::specs::heavy(t)?;
    let (data_name, sets) = read_sets(args)?;
    let pad = pad_length(&sets, t.pad_length)?;
    let bits = t.item_bits.unwrap_or(harmony_tasks::heavy::DEFAULT_BITS);
    let codec = match specs[0].1.items {
        ItemEncoding::Hash => ItemCodec::hashed(bits)?,
        ItemEncoding::Id => ItemCodec::ids(bits)?,
    };
    let k = t.top.unwrap_or(harmony_tasks::heavy::DEFAULT_TOP);
    let (true_top, truth) = true_top(&sets, &codec, k)?;
    for (_, s) in &mut specs {
        s.pad_length = Some(pad);
    }
    let a = Heavy {
        title: format!(
            "harmony simulate --task heavy-hitters: {data_name} ({}) — n = {} devices, {} distinct items, {bits}-bit {} codes (collision bound {:.2e}), padding L = {pad}, top {k}",
            sets.source,
            sets.n(),
            sets.names.len(),
            format!("{:?}", codec.encoding()).to_lowercase(),
            codec.collision_bound(sets.names.len())
        ),
        population: sets.population(),
        specs,
        epsilons: args.epsilon.clone().unwrap_or(vec![1.0, 2.0, 4.0]),
        true_top,
        truth,
    };
    experiment::emit(&a, args.runs, args.seed, args.format, args.plot.as_deref())
}

/// The `heavy-hitters` task on the command line (the one task whose collections need no schema).
pub const CLI: super::CliTask = super::CliTask {
    name: "heavy-hitters",
    about: "the top items of a string column or of item sets",
    options: &["column", "method", "top", "transactions", "separator", "items", "item_bits", "pad_length"],
    help: &[],
    not_taken: &[],
    simulate_examples: "# The 5 most frequent occupations:
harmony simulate heavy-hitters --column occupation --top 5 --epsilon 4 --runs 2
# Every row as the set of its attribute=value items, TreeHist:
harmony simulate heavy-hitters --column '*' --method treehist --top 10 --epsilon 4 --runs 1",
    create_examples: "# The top 10 items devices hold (strings; no schema needed):
harmony collection create heavy-hitters --server http://127.0.0.1:8080 --epsilon 4 --top 10
# TreeHist over 16-bit item codes:
harmony collection create heavy-hitters --server http://127.0.0.1:8080 --epsilon 4 --method treehist --item-bits 16 --top 5",
    spec,
    simulate: run,
    demo: None,
};

fn spec(a: &super::SpecArgs<'_>) -> Result<TaskSpec> {
    let [spec] = &crate::specs::heavy(a.task)?[..] else {
        bail!("--method has several values, expected one for a collection")
    };
    Ok(spec.1.clone().into())
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
        assert!(e.contains("sfp") && e.contains("pem, treehist or sketch"), "{e}");
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
