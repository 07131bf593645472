use super::*;
use crate::simulate;
use harmony_analytics::heavy::HeavyHitterReport;
use harmony_core::frequency::Olh;
use harmony_core::frequency::olh::OlhReport;
use harmony_protocol::CreateCollection;
use harmony_protocol::estimates::EstimateDocument;

/// Heavy items and their shares of the devices (per mille); the other devices hold unique items.
const HEAVY: [u32; 10] = [120, 110, 100, 90, 80, 70, 60, 50, 40, 30];

/// n devices: device i holds heavy item `h{j}` for the first HEAVY[j]‰ of each 1000, else a unique
/// item; with `sets`, every third device also holds `common` (so sets have 1 or 2 items).
fn population(n: usize, heavy: usize, sets: bool) -> Vec<Vec<String>> {
    (0..n)
        .map(|i| {
            let mut acc = 0;
            let slot = (i % 1000) as u32;
            let first = HEAVY[..heavy].iter().position(|&s| {
                acc += s;
                slot < acc
            });
            let mut set = vec![first.map_or_else(|| format!("u{i}"), |j| format!("h{j}"))];
            if sets && i % 3 == 0 {
                set.push("common".into());
            }
            set
        })
        .collect()
}

fn task(method: HeavyMethod, top: usize, bits: u32, pad: usize, levels: Option<Vec<u32>>) -> Box<dyn Task> {
    let mut candidates: Vec<String> = (0..10).map(|j| format!("h{j}")).collect();
    candidates.push("common".into());
    let spec = HeavyHittersSpec {
        method,
        top: Some(top),
        bits: Some(bits),
        items: ItemEncoding::Hash,
        pad_length: Some(pad),
        levels,
        rows: None,
        columns: None,
        candidates,
    };
    let req = CreateCollection { schema: None, epsilon: 4.0, task: TaskSpec::HeavyHitters(spec) };
    crate::build(&crate::resolve(&req, "hh").unwrap()).unwrap()
}

fn doc(task: &dyn Task, agg: &dyn TaskAggregator) -> HeavyHittersEstimate {
    match task.estimate(agg, &Query::default()).unwrap() {
        TaskEstimate::HeavyHitters(d) => d,
        other => panic!("{other:?}"),
    }
}

/// An item's share of the devices and what its closed-form variance needs: π_i = 1[item ∈
/// S_i]/L, f = mean π, mean π(1−π) and mean π² − f².
struct Truth {
    share: f64,
    f: f64,
    within: f64,
    spread: f64,
    pad: f64,
    n: f64,
}

impl Truth {
    fn new(pop: &[Vec<String>], item: &str, pad: usize) -> Self {
        let (l, n) = (pad as f64, pop.len() as f64);
        let pi: Vec<f64> = pop.iter().map(|s| if s.iter().any(|x| x == item) { 1.0 / l } else { 0.0 }).collect();
        let f = pi.iter().sum::<f64>() / n;
        let within = pi.iter().map(|p| p * (1.0 - p)).sum::<f64>() / n;
        let spread = pi.iter().map(|p| p * p).sum::<f64>() / n - f * f;
        Truth { share: l * f, f, within, spread, pad: l, n }
    }
    /// Var(L·f̂) from the last level's n_j reports:
    /// L²[Var*_OLH + f(1−p−q)/(p−q) + mean π(1−π) + (mean π² − f²)(n − n_j)/(n − 1)]/n_j.
    fn variance(&self, n_j: u64) -> f64 {
        let olh = Olh::new(4.0, 2).unwrap().pure_params();
        let (nj, n, l) = (n_j as f64, self.n, self.pad);
        l * l * (olh.aggregate_variance(self.f) + self.within + self.spread * (n - nj) / (n - 1.0)) / nj
    }
}

/// Through the simulated devices (each drawing its level), PEM and TreeHist find every heavy
/// item and its estimate is within z = 4.42 closed-form standard errors (at the truth, with the
/// realized level count) of its share of devices — one item per device and sets padded to
/// L = 2. False failure: 1e-5 per check, 17 checks: < 2e-4. The reported standard error (plug-in)
/// is within 10% of the closed form.
#[test]
fn estimates_are_unbiased_with_the_closed_form_standard_error() {
    for (method, heavy, sets, pad) in
        [(HeavyMethod::Pem, 5, false, 1), (HeavyMethod::Treehist, 5, false, 1), (HeavyMethod::Pem, 6, true, 2)]
    {
        let pop = population(40_000, heavy, sets);
        let t = task(method, heavy + sets as usize, 16, pad, None);
        let inputs: Vec<Input> = pop.iter().map(|s| Input::Items(s)).collect();
        let agg = simulate::run(t.as_ref(), &inputs, 7).unwrap();
        let d = doc(t.as_ref(), agg.as_ref());
        assert_eq!(d.pad_length, pad);
        let n_j = d.levels.last().unwrap().reports;
        assert_eq!(d.levels.iter().map(|l| l.reports).sum::<u64>(), 40_000);
        let mut names: Vec<String> = (0..heavy).map(|j| format!("h{j}")).collect();
        if sets {
            names.push("common".into());
        }
        for name in names {
            let h = d.items.iter().find(|h| h.item.as_deref() == Some(&name));
            let h = h.unwrap_or_else(|| panic!("{method:?}: {name} not found in {:?}", d.items));
            let truth = Truth::new(&pop, &name, pad);
            let (f, var) = (truth.share, truth.variance(n_j));
            let z = (h.frequency.value() - f) / var.sqrt();
            assert!(
                z.abs() < 4.42,
                "{method:?} L={pad} {name}: {} vs {f}, sd {} (z {z:.2})",
                h.frequency.value(),
                var.sqrt()
            );
            let ratio = h.frequency.se() / var.sqrt();
            assert!((ratio - 1.0).abs() < 0.1, "{method:?} {name}: reported se / closed form = {ratio}");
        }
    }
}

/// The published config goes through JSON unchanged, builds the same task, and resolving it
/// again changes nothing.
#[test]
fn config_round_trips_and_resolve_is_idempotent() {
    let spec = HeavyHittersSpec {
        method: HeavyMethod::Treehist,
        top: None,
        bits: Some(24),
        items: ItemEncoding::Id,
        pad_length: None,
        levels: None,
        rows: None,
        columns: None,
        candidates: vec!["17".into(), "4".into()],
    };
    let req = CreateCollection { schema: None, epsilon: 2.0, task: TaskSpec::HeavyHitters(spec) };
    let config = crate::resolve(&req, "c").unwrap();
    let TaskSpec::HeavyHitters(out) = &config.task else { unreachable!() };
    assert_eq!((out.top, out.bits, out.pad_length), (Some(DEFAULT_TOP), Some(24), Some(1)));
    assert_eq!(out.levels.as_ref().unwrap().first(), Some(&5), "TreeHist: ⌊log2 20⌋ + 1 bits first");
    let text = serde_json::to_string(&config).unwrap();
    let back = CollectionConfig::from_json(&text).unwrap();
    assert_eq!(back, config);
    let again = CreateCollection { schema: None, epsilon: 2.0, task: config.task.clone() };
    assert_eq!(crate::resolve(&again, "c").unwrap(), config);
    let (a, b) = (crate::build(&config).unwrap(), crate::build(&back).unwrap());
    let items: Vec<Vec<String>> = (0..3000).map(|i| vec![format!("{}", i % 7)]).collect();
    let inputs: Vec<Input> = items.iter().map(|s| Input::Items(s)).collect();
    let agg = simulate::run(a.as_ref(), &inputs, 3).unwrap();
    let doc = EstimateDocument {
        collection: "c".into(),
        reports: agg.count(),
        epsilon: 2.0,
        result: a.estimate(agg.as_ref(), &Query::default()).unwrap(),
    };
    assert_eq!(doc.result, b.estimate(agg.as_ref(), &Query::default()).unwrap());
    let json = serde_json::to_string(&doc).unwrap();
    assert_eq!(serde_json::from_str::<EstimateDocument>(&json).unwrap(), doc);
}

/// `validate` rejects a bad report and names the field; a valid one passes.
#[test]
fn bad_reports_are_rejected_naming_the_field() {
    let t = task(HeavyMethod::Pem, 5, 16, 1, None);
    let mut good = Vec::new();
    t.randomize(&Input::Items(&["a".to_string()]), &mut simulate::device_rng(1, 0), &mut good).unwrap();
    t.validate(&good).unwrap();
    let g = Olh::new(4.0, 2).unwrap().g();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "header"),
        (good[..good.len() - 1].to_vec(), "payload"),
        ([good.as_slice(), &[0]].concat(), "payload"),
        ([&[9u8][..], &good[1..]].concat(), "version"),
        ([&good[..1], &[31u8][..], &good[2..]].concat(), "kind"),
        (wire::encode(&HeavyHitterReport { level: 2, olh: OlhReport { seed: 1, y: 0 } }), "level is 2"),
        (wire::encode(&HeavyHitterReport { level: 0, olh: OlhReport { seed: 1, y: g } }), "y is"),
    ];
    for (bytes, field) in cases {
        let e = t.validate(&bytes).unwrap_err().to_string();
        assert!(e.contains(field), "{field}: {e}");
    }
}

/// The state is the multiset of reports: two halves merged give the one-pass estimate, and the
/// parallel chunked run gives the same.
#[test]
fn merge_of_two_halves_equals_one_pass() {
    let pop = population(12_000, 5, true);
    let inputs: Vec<Input> = pop.iter().map(|s| Input::Items(s)).collect();
    let t = task(HeavyMethod::Pem, 6, 16, 2, None);
    let one = simulate::sequential(t.as_ref(), &inputs, 11, 0).unwrap();
    let mut a = t.simulate(&inputs[..5_000], 11, 0).unwrap();
    let b = t.simulate(&inputs[5_000..], 11, 5_000).unwrap();
    a.merge(b.as_ref()).unwrap();
    let chunked = simulate::run(t.as_ref(), &inputs, 11).unwrap();
    let want = doc(t.as_ref(), one.as_ref());
    assert!(!want.items.is_empty());
    assert_eq!(doc(t.as_ref(), a.as_ref()), want);
    assert_eq!(doc(t.as_ref(), chunked.as_ref()), want);
    assert_eq!(a.count(), 12_000);
}

/// No report, or a level without reports: no items (not made-up ones), the levels' counts.
#[test]
fn without_reports_there_is_no_estimate() {
    let t = task(HeavyMethod::Pem, 5, 32, 1, None);
    let empty = doc(t.as_ref(), t.aggregator().as_ref());
    assert!(empty.items.is_empty());
    assert_eq!(empty.levels.len(), 4);
    assert!(empty.levels.iter().all(|l| l.reports == 0 && l.candidates == 0));
    let inputs = [Input::Items(&[])];
    let one = simulate::run(t.as_ref(), &inputs, 1).unwrap();
    let d = doc(t.as_ref(), one.as_ref());
    assert!(d.items.is_empty());
    assert_eq!(d.levels.iter().map(|l| l.reports).sum::<u64>(), 1);
}

/// Spec and input errors name the field, the value and what was expected.
#[test]
fn errors_name_the_field() {
    let base = HeavyHittersSpec {
        method: HeavyMethod::Pem,
        top: None,
        bits: None,
        items: ItemEncoding::Hash,
        pad_length: None,
        levels: None,
        rows: None,
        columns: None,
        candidates: vec![],
    };
    let bad = [
        (HeavyHittersSpec { top: Some(0), ..base.clone() }, "task.top is 0"),
        (HeavyHittersSpec { bits: Some(1), ..base.clone() }, "task.bits is 1"),
        (HeavyHittersSpec { bits: Some(65), ..base.clone() }, "task.bits is 65"),
        (HeavyHittersSpec { bits: Some(4), top: Some(20), ..base.clone() }, "task.top is 20"),
        (HeavyHittersSpec { pad_length: Some(0), ..base.clone() }, "task.pad_length is 0"),
        (HeavyHittersSpec { levels: Some(vec![12, 12, 32]), ..base.clone() }, "task.levels"),
        (HeavyHittersSpec { levels: Some(vec![2, 32]), ..base.clone() }, "bits per level"),
        (HeavyHittersSpec { items: ItemEncoding::Id, candidates: vec!["x".into()], ..base.clone() }, "task.candidates"),
    ];
    for (spec, want) in bad {
        let e = resolve(&spec, 1.0).unwrap_err().to_string();
        assert!(e.contains(want), "{want}: {e}");
    }
    let req = CreateCollection { schema: None, epsilon: 1.0, task: TaskSpec::HeavyHitters(base.clone()) };
    let t = crate::build(&crate::resolve(&req, "c").unwrap()).unwrap();
    let mut out = Vec::new();
    let e = t.randomize(&Input::Record(&[]), &mut simulate::device_rng(1, 0), &mut out).unwrap_err();
    assert!(e.to_string().contains("a set of items"), "{e}");
    let ids = HeavyHittersSpec { items: ItemEncoding::Id, ..base };
    let req = CreateCollection { schema: None, epsilon: 1.0, task: TaskSpec::HeavyHitters(ids) };
    let t = crate::build(&crate::resolve(&req, "c").unwrap()).unwrap();
    let e = t.randomize(&Input::Items(&["7".into(), "x".into()]), &mut simulate::device_rng(1, 0), &mut out);
    assert!(e.unwrap_err().to_string().contains("item id is \"x\""));
}

/// Heavy tier (release): MSE / predicted variance over R = 200 collections of 50,000 devices,
/// summed over the 10 heavy items (every one found in every run; the prediction at the truth
/// with each run's realized last-level count), in [0.85, 1.15] for PEM, TreeHist and PEM over
/// sets (L = 2). 2,000 terms: the ratio's standard deviation is about √(2/2000) = 0.032, so the
/// band is ±4.7 of them (false failure < 1e-5 per method). Each method has its own device seeds
/// (shared seeds would correlate the methods' errors through the devices' first draws).
#[test]
#[ignore]
fn calibration_mse_over_predicted() {
    let r = 200;
    let configs = [(HeavyMethod::Pem, false, 1), (HeavyMethod::Treehist, false, 1), (HeavyMethod::Pem, true, 2)];
    for (c, (method, sets, pad)) in configs.into_iter().enumerate() {
        let pop = population(50_000, 10, sets);
        let inputs: Vec<Input> = pop.iter().map(|s| Input::Items(s)).collect();
        let levels = (method == HeavyMethod::Pem).then(|| vec![6, 12]);
        let t = task(method, 10 + sets as usize, 12, pad, levels);
        let names: Vec<String> = (0..10).map(|j| format!("h{j}")).collect();
        let truths: Vec<Truth> = names.iter().map(|x| Truth::new(&pop, x, pad)).collect();
        let (mut mse, mut pred) = (0.0, 0.0);
        for run in 0..r {
            let agg = simulate::run(t.as_ref(), &inputs, 1_000_000 * (c as u64 + 1) + run).unwrap();
            let d = doc(t.as_ref(), agg.as_ref());
            let n_j = d.levels.last().unwrap().reports;
            for (name, truth) in names.iter().zip(&truths) {
                let h = d.items.iter().find(|h| h.item.as_deref() == Some(name.as_str()));
                let h = h.unwrap_or_else(|| panic!("{method:?} run {run}: {name} not found"));
                mse += (h.frequency.value() - truth.share).powi(2);
                pred += truth.variance(n_j);
            }
        }
        let ratio = mse / pred;
        eprintln!("heavy-hitters {method:?} L={pad}: MSE/predicted = {ratio:.4} over {r} runs");
        assert!((0.85..=1.15).contains(&ratio), "{method:?} L={pad}: MSE/predicted = {ratio}");
    }
}
