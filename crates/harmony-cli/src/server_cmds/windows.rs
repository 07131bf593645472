//! `harmony query --from/--to`, `--series PERIOD` and `--compare A B`: continuous collection's
//! windows, series and change test (the server's `GET …/estimates?from=&to=`, `…/series` and
//! `…/compare`).

use super::QueryArgs;
use crate::output::Format;
use anyhow::{Context, Result, bail};
use clap::Args;
use harmony_client::Client;
use harmony_protocol::estimates::{EstimateDocument, Query};

/// The window options of `harmony query`.
#[derive(Args, Debug, Clone, Default)]
pub struct WindowArgs {
    /// The window's first instant: an ISO date (YYYY-MM-DD) or a UTC timestamp
    /// (YYYY-MM-DDTHH:MM[:SS]Z) on a boundary of the collection's period (inclusive).
    #[arg(long)]
    pub from: Option<String>,
    /// The first instant after the window (exclusive), as --from.
    #[arg(long)]
    pub to: Option<String>,
    /// One estimate document per period (hour, day or week; the collection's or longer) within
    /// --from/--to.
    #[arg(long, value_name = "PERIOD")]
    pub series: Option<String>,
    /// The change from window A to window B, each FROM..TO (an empty side is open, e.g.
    /// `2026-11-01..2026-11-08 2026-11-08..`): differences with standard errors, z and the
    /// Holm–Bonferroni significance.
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub compare: Option<Vec<String>>,
}

impl WindowArgs {
    /// Whether any window option is given.
    pub fn any(&self) -> bool {
        self.from.is_some() || self.to.is_some() || self.series.is_some() || self.compare.is_some()
    }
}

/// `FROM..TO` as its two sides.
fn sides(arg: &str) -> Result<(&str, &str)> {
    arg.split_once("..")
        .with_context(|| format!("--compare window {arg:?}: expected FROM..TO (either side may be empty)"))
}

/// Runs `harmony query` with window options.
pub fn query(client: &Client, a: &QueryArgs, query: &Query) -> Result<()> {
    let w = &a.window;
    let mut params: Vec<(&str, &str)> = Vec::new();
    let (endpoint, compare) = match (&w.series, &w.compare) {
        (Some(_), Some(_)) => bail!("invalid options: --series and --compare together; give one"),
        (Some(p), None) => {
            params.push(("period", p));
            ("series", false)
        }
        (None, Some(ab)) => {
            if w.from.is_some() || w.to.is_some() {
                bail!(
                    "invalid options: --compare takes its windows as FROM..TO; --from/--to are for one window or a series"
                );
            }
            let ((af, at), (bf, bt)) = (sides(&ab[0])?, sides(&ab[1])?);
            for (k, v) in [("a_from", af), ("a_to", at), ("b_from", bf), ("b_to", bt)] {
                if !v.is_empty() {
                    params.push((k, v));
                }
            }
            ("compare", true)
        }
        (None, None) => ("estimates", false),
    };
    if !compare {
        params.extend(w.from.as_deref().map(|v| ("from", v)));
        params.extend(w.to.as_deref().map(|v| ("to", v)));
    }
    let bytes = client.window_json(&a.collection, endpoint, &params, query)?;
    if a.format == Format::Json {
        println!("{}", String::from_utf8_lossy(&bytes));
        return Ok(());
    }
    let v: serde_json::Value = serde_json::from_slice(&bytes).context("the server's answer")?;
    match endpoint {
        "estimates" => print_doc(serde_json::from_value(v)?),
        "series" => {
            let points = v["points"].as_array().context("a series without points")?;
            println!("{} points per {}", points.len(), v["period"].as_str().unwrap_or("?"));
            for p in points {
                let doc: EstimateDocument = serde_json::from_value(p["document"].clone())?;
                println!(
                    "\n{} .. {} ({} reports)",
                    p["from"].as_str().unwrap_or("?"),
                    p["to"].as_str().unwrap_or("?"),
                    doc.reports
                );
                print_doc(doc);
            }
        }
        _ => print_comparison(&v),
    }
    Ok(())
}

fn print_doc(doc: EstimateDocument) {
    crate::render::print(&super::printable::doc(&doc), None);
}

fn print_comparison(v: &serde_json::Value) {
    let side = |w: &serde_json::Value| {
        let s = |k: &str| w[k].as_str().unwrap_or("…").to_string();
        format!("{} .. {} ({} reports)", s("from"), s("to"), w["reports"])
    };
    println!("A: {}\nB: {}", side(&v["a"]), side(&v["b"]));
    println!("{:<40} {:>10} {:>10} {:>10} {:>9} {:>7} {:>8}", "estimate", "A", "B", "B − A", "SE", "z", "p");
    for d in v["differences"].as_array().into_iter().flatten() {
        let n = |k: &str| d[k].as_f64().unwrap_or(f64::NAN);
        let mark = if d["significant"].as_bool() == Some(true) { " *" } else { "" };
        println!(
            "{:<40} {:>10.4} {:>10.4} {:>10.4} {:>9.4} {:>7.2} {:>8.4}{mark}",
            d["path"].as_str().unwrap_or("?"),
            n("a"),
            n("b"),
            n("difference"),
            n("std_error"),
            n("z"),
            n("p")
        );
    }
    println!("* significant: {}", v["rule"].as_str().unwrap_or(""));
    println!("{}", v["independence"].as_str().unwrap_or(""));
}
