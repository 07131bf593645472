//! The privacy-budget ledger across collections: every ε a device spends, keyed by the
//! collection id the device asked for, so the policy's [`Budget`] (at most `epsilon` in any
//! rolling window of `days` days) bounds what a server learns from many collections together.
//!
//! # Privacy
//! Reports to different collections compose sequentially: k reports at ε₁…ε_k are
//! (Σ εᵢ)-LDP together (whatever the server does with them). The ledger charges a collection's
//! ε before its report is recorded or sent, and refuses a collection that would make the ε
//! spent in the window (`now − days`, `now`] exceed the budget. A collection is charged once:
//! the device reports to it once ([`Ledger`](crate::Ledger)), and a retry resends the same
//! bytes, which costs nothing more. The keys are the ids the device asked for
//! ([`Client::config`](crate::Client::config) refuses a config with another id), so a server
//! cannot reset the budget by renaming a collection; a server running many collections is
//! bounded by the budget, not by the per-collection `max_epsilon`.
//!
//! The core here is plain data and a trait: [`BudgetStore`] (where spends are kept: memory,
//! a file, the browser's storage) and [`Clock`] (seconds since the Unix epoch; injected in
//! tests, `Date.now()` in a browser). [`FileBudget`] is the native file implementation.

use crate::policy::{Budget, refuse};
use crate::{ClientError, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Seconds in a day.
pub const DAY: u64 = 86_400;

/// One collection's charge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// The collection id the device asked for.
    pub collection: String,
    /// The ε charged.
    pub epsilon: f64,
    /// When (seconds since the Unix epoch).
    pub at: u64,
}

/// Where a device keeps its spends. `record` must be durable before it returns: a report is
/// sent only after its charge is recorded.
pub trait BudgetStore {
    /// Every spend recorded.
    fn spends(&self) -> &[Spend];
    /// Records a spend durably.
    fn record(&mut self, spend: Spend) -> Result<()>;
}

/// The current time, in seconds since the Unix epoch.
pub trait Clock {
    /// Now.
    fn now(&self) -> u64;
}

impl<F: Fn() -> u64> Clock for F {
    fn now(&self) -> u64 {
        self()
    }
}

/// The system clock (native targets; a browser passes `Date.now()` as a closure).
#[cfg(not(target_arch = "wasm32"))]
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

#[cfg(not(target_arch = "wasm32"))]
impl Clock for SystemClock {
    fn now(&self) -> u64 {
        // A clock before 1970 reads as 1970: every spend is then in the window (stricter).
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
    }
}

/// Spends in memory (tests, simulations, an app that persists them itself).
#[derive(Debug, Clone, Default)]
pub struct MemoryBudget(Vec<Spend>);

impl BudgetStore for MemoryBudget {
    fn spends(&self) -> &[Spend] {
        &self.0
    }
    fn record(&mut self, spend: Spend) -> Result<()> {
        self.0.push(spend);
        Ok(())
    }
}

/// Spends in a JSON file, rewritten atomically (temporary file, fsync, rename).
#[derive(Debug, Clone)]
pub struct FileBudget {
    path: PathBuf,
    spends: Vec<Spend>,
}

impl FileBudget {
    /// Opens (or starts) the budget ledger at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let err = |m: String| ClientError::Ledger { path: path.to_path_buf(), message: m };
        let spends = match std::fs::read(path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| err(e.to_string()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(err(e.to_string())),
        };
        Ok(FileBudget { path: path.to_path_buf(), spends })
    }
}

impl BudgetStore for FileBudget {
    fn spends(&self) -> &[Spend] {
        &self.spends
    }
    fn record(&mut self, spend: Spend) -> Result<()> {
        use std::io::Write;
        // The spend joins the list only once the file holding it is in place (no copy of the
        // list: pushed, written, popped again if the write fails).
        self.spends.push(spend);
        let written = (|| -> std::io::Result<()> {
            let tmp = self.path.with_extension("tmp");
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&serde_json::to_vec_pretty(&self.spends).expect("JSON of spends"))?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        })();
        written.map_err(|e| {
            self.spends.pop();
            ClientError::Ledger { path: self.path.clone(), message: e.to_string() }
        })
    }
}

/// The ε spent in the window of `budget` ending at `now`: spends at `at` with
/// `now − at < days·86400` (a spend exactly `days` old has left the window).
pub fn spent(spends: &[Spend], budget: &Budget, now: u64) -> f64 {
    let inside = Window::new(budget, now);
    spends.iter().map(|s| if inside.contains(s.at) { s.epsilon } else { 0.0 }).sum()
}

/// The test `(now − at) as f64 < days·86400` of [`spent`], with the window rounded up to whole
/// seconds once so that each spend costs one integer comparison: for an age `d` < 2^53 (exact
/// as f64), `d < w ⟺ d < ⌈w⌉`; an age ≥ 2^53 is outside both ways when ⌈w⌉ ≤ 2^53. A window
/// longer than 2^53 seconds keeps the float comparison.
#[derive(Clone, Copy)]
struct Window {
    now: u64,
    seconds: f64,
    whole: Option<u64>,
}

impl Window {
    fn new(budget: &Budget, now: u64) -> Self {
        let seconds = budget.window_seconds();
        let up = seconds.ceil();
        let whole = (up <= (1u64 << 53) as f64).then_some(up as u64);
        Window { now, seconds, whole }
    }
    fn contains(&self, at: u64) -> bool {
        let age = self.now.saturating_sub(at);
        match self.whole {
            Some(w) => age < w,
            None => (age as f64) < self.seconds,
        }
    }
}

/// Whether `collection` may spend `epsilon` at `now`: `None` if it was already charged (a
/// device reports once per collection: a retry costs nothing); else refused as
/// [`ClientError::Policy`] with rule `budget` (naming the ε already spent in the window, the
/// request and the limit) when the total would exceed `budget`; else the [`Spend`] to record
/// once the report is made and before it is sent. With no budget the spend is still returned
/// (recorded, a later stricter policy counts it).
pub fn admit(
    spends: &[Spend],
    budget: Option<&Budget>,
    collection: &str,
    epsilon: f64,
    now: u64,
) -> Result<Option<Spend>> {
    // One pass over the ledger: whether the collection was charged and the ε spent in the
    // window (the sum of [`spent`], in the same order; only spends in the window are added, so
    // a long ledger of old spends costs one comparison each, no chain of float additions).
    let (mut charged, mut already) = (false, 0.0);
    let inside = budget.map(|b| Window::new(b, now));
    for s in spends {
        charged |= s.collection == collection;
        if let Some(w) = &inside
            && w.contains(s.at)
        {
            already += s.epsilon;
        }
    }
    if charged {
        return Ok(None);
    }
    if !(epsilon.is_finite() && epsilon > 0.0) {
        return Err(refuse("budget", format!("a request of ε {epsilon}"), "a finite ε > 0"));
    }
    if let Some(b) = budget {
        // A relative slack of 1e-12 so that, e.g., ten charges of 0.1 fit a budget of 1.
        if already + epsilon > b.epsilon * (1.0 + 1e-12) {
            let value = format!(
                "ε {} already spent in the window + ε {epsilon} requested by collection {collection}",
                fmt(already)
            );
            return Err(refuse("budget", value, b));
        }
    }
    Ok(Some(Spend { collection: collection.to_string(), epsilon, at: now }))
}

/// [`admit`], then records the spend in `store` (for callers that randomize nothing between).
pub fn charge(
    store: &mut dyn BudgetStore,
    budget: Option<&Budget>,
    collection: &str,
    epsilon: f64,
    now: u64,
) -> Result<()> {
    match admit(store.spends(), budget, collection, epsilon, now)? {
        Some(s) => store.record(s),
        None => Ok(()),
    }
}

/// A sum of ε printed without float noise (`2`, `0.3`).
fn fmt(x: f64) -> String {
    let r = (x * 1e9).round() / 1e9;
    format!("{r}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The integer window test is the float one, `(now − at) as f64 < days·86400`, at and
    /// around each boundary, for whole, fractional and huge (> 2^53 s, the float path) windows.
    #[test]
    fn window_is_the_float_comparison() {
        let now = u64::MAX / 2;
        for seconds in [1.0, 1.5, 43_200.0, 86_399.999, 86_400.0, 2f64.powi(53) - 1.0, 2f64.powi(53), 1e17, 1e300] {
            let b = Budget::new(1.0, seconds / DAY as f64).unwrap();
            let w = Window::new(&b, now);
            let edge = seconds.min(now as f64) as u64;
            let ages =
                [0, 1, 2, edge.saturating_sub(2), edge.saturating_sub(1), edge, edge + 1, edge + 2, now, u64::MAX];
            for age in ages {
                let at = now.saturating_sub(age);
                let float = (now.saturating_sub(at) as f64) < b.window_seconds();
                assert_eq!(w.contains(at), float, "window {seconds} s, age {age}");
            }
        }
    }
}
