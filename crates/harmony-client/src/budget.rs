//! The privacy-budget ledger across collections: every ε a device spends, keyed by the
//! collection id the device asked for, so the policy's [`Budget`] (at most `epsilon` in any
//! rolling window of `days` days) bounds what a server learns from many collections together.
//!
//! # Privacy
//! Reports to different collections compose sequentially (basic composition): k reports at
//! (ε₁, δ₁)…(ε_k, δ_k) are (Σ εᵢ, Σ δᵢ)-LDP together (whatever the server does with them); a
//! pure ε-LDP report has δ = 0. The ledger charges a collection's ε and δ with its report, in
//! one update of the device's [`Ledger`](crate::Ledger) before anything is sent, and refuses a
//! collection that would make the ε (or δ) spent in the window (`now − days`, `now`] exceed
//! the budget. A collection is charged once: the device reports to it once, and a retry
//! resends the same bytes, which costs nothing more. A charge with no report kept beside it is
//! a refusal, never a fresh report (the device fails closed). The keys are the ids the device
//! asked for ([`Client::config`](crate::Client::config) refuses a config with another id), so
//! a server cannot reset the budget by renaming a collection; a server running many
//! collections is bounded by the budget, not by the per-collection `max_epsilon`.
//!
//! The core here is plain data: the spends live in the device's [`Ledger`](crate::Ledger)
//! state with its reports, and a [`Clock`] gives seconds since the Unix epoch (injected in
//! tests, `Date.now()` in a browser).

use crate::Result;
use crate::policy::{Budget, refuse};
use serde::{Deserialize, Serialize};

/// Seconds in a day.
pub const DAY: u64 = 86_400;

/// One collection's charge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// The collection id the device asked for.
    pub collection: String,
    /// The ε charged.
    pub epsilon: f64,
    /// The δ charged (0 for a pure ε-LDP mechanism).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delta: f64,
    /// When (seconds since the Unix epoch).
    pub at: u64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
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

/// What one collection costs: its ε and its δ (0 for pure ε-LDP).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    /// ε.
    pub epsilon: f64,
    /// δ.
    pub delta: f64,
}

impl Cost {
    /// A pure ε-LDP cost.
    pub fn pure(epsilon: f64) -> Self {
        Cost { epsilon, delta: 0.0 }
    }
}

/// The [`Spend`] that lets `key` (a collection id, or a series' permanent report) spend `cost`
/// at `now`, refused as [`ClientError::Policy`]:
/// * rule `ledger` when `key` was already charged: a device reports once per key, and a charge
///   whose report is not kept beside it (a ledger that lost it) is never re-randomized — the
///   device fails closed;
/// * rule `budget` (naming what the window already holds, the request and the limit) when the
///   ε or the δ spent in the window would exceed `budget` (basic composition: the ε of the
///   window's spends add up, and so do their δ).
///
/// With no budget the spend is still returned (recorded: a later stricter policy counts it).
pub fn admit(spends: &[Spend], budget: Option<&Budget>, key: &str, cost: Cost, now: u64) -> Result<Spend> {
    // One pass over the ledger: whether the key was charged and the ε and δ spent in the
    // window (only spends in the window are added: a long ledger of old spends costs one
    // comparison each, no chain of float additions).
    let (mut charged, mut eps, mut delta) = (false, 0.0, 0.0);
    let inside = budget.map(|b| Window::new(b, now));
    for s in spends {
        charged |= s.collection == key;
        if let Some(w) = &inside
            && w.contains(s.at)
        {
            eps += s.epsilon;
            delta += s.delta;
        }
    }
    if charged {
        return Err(refuse(
            "ledger",
            format!("{key} already charged, with no report kept for it"),
            "one report per charge: a lost report is never made again",
        ));
    }
    let Cost { epsilon, delta: d } = cost;
    if !(epsilon.is_finite() && epsilon > 0.0) {
        return Err(refuse("budget", format!("a request of ε {epsilon}"), "a finite ε > 0"));
    }
    if !(0.0..1.0).contains(&d) {
        return Err(refuse("budget", format!("a request of δ {d}"), "a δ in [0, 1)"));
    }
    if let Some(b) = budget {
        // A relative slack of 1e-12 so that, e.g., ten charges of 0.1 fit a budget of 1.
        if eps + epsilon > b.epsilon * (1.0 + 1e-12) {
            let value =
                format!("ε {} already spent in the window + ε {epsilon} requested by collection {key}", fmt(eps));
            return Err(refuse("budget", value, b));
        }
        if d > 0.0 && delta + d > b.delta * (1.0 + 1e-12) {
            let value = format!("δ {delta:e} already spent in the window + δ {d:e} requested by collection {key}");
            return Err(refuse("budget", value, b));
        }
    }
    Ok(Spend { collection: key.to_string(), epsilon, delta: d, at: now })
}

/// [`admit`] and the spend's record in `ledger`, in one update of it (under its lock: two
/// processes charging one ledger never both pass the check), for callers that randomize
/// nothing in between (the CLI charges a whole file of devices once).
pub fn charge(
    ledger: &mut dyn crate::Ledger,
    budget: Option<&Budget>,
    key: &str,
    cost: Cost,
    now: u64,
) -> Result<Spend> {
    let mut out = None;
    ledger.update(&mut |state| {
        let spend = admit(&state.spends, budget, key, cost, now)?;
        state.spends.push(spend.clone());
        out = Some(spend);
        Ok(true)
    })?;
    Ok(out.expect("the update ran"))
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
