use super::*;
use crate::simulate;
use harmony_analytics::heavy::HeavyHitterReport;
use harmony_analytics::heavy::sketch;
use harmony_core::frequency::olh::OlhReport;
use harmony_core::frequency::{Hcms, HcmsReport, Olh};
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
    /// L²[V(f) + mean π(1−π) + (mean π² − f²)(n − n_j)/(n − 1)]/n_j, V(f) the per-report variance
    /// of the method's oracle at ε = 4: OLH's Var* + f(1−p−q)/(p−q), or the sketch's
    /// family-averaged (m/(m−1))²(c² − f − (1 − f)(1/m² + (1 − 1/m)/(km))).
    fn variance(&self, n_j: u64, method: HeavyMethod) -> f64 {
        let noise = match method {
            HeavyMethod::Sketch => Hcms::with_params(4.0, 2, 32, 1024, sketch::SEED).unwrap().family_variance(self.f),
            _ => Olh::new(4.0, 2).unwrap().pure_params().aggregate_variance(self.f),
        };
        let (nj, n, l) = (n_j as f64, self.n, self.pad);
        l * l * (noise + self.within + self.spread * (n - nj) / (n - 1.0)) / nj
    }
}

/// Through the simulated devices (each drawing its level), PEM, TreeHist and the sketch find
/// every heavy item and its estimate is within z = 4.42 closed-form standard errors (at the
/// truth, with the realized level count) of its share of devices — one item per device and sets
/// padded to L = 2 (the sketch over sets: the four items of 12% to 9%, the sixth at 7% being
/// only 4.9 of its standard errors above zero). False failure: 1e-5 per check, 27 checks:
/// < 3e-4 (the sketch's collision bias for its fixed hash family is about 1e-3 of a share here,
/// a fifth of a standard error).
/// The reported standard error (plug-in) is within 10% of the closed form.
#[test]
fn estimates_are_unbiased_with_the_closed_form_standard_error() {
    for (method, heavy, sets, pad) in [
        (HeavyMethod::Pem, 5, false, 1),
        (HeavyMethod::Treehist, 5, false, 1),
        (HeavyMethod::Pem, 6, true, 2),
        (HeavyMethod::Sketch, 5, false, 1),
        (HeavyMethod::Sketch, 4, true, 2),
    ] {
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
            let (f, var) = (truth.share, truth.variance(n_j, method));
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

fn spec_of(req: &CreateCollection) -> HeavyHittersSpec {
    let TaskSpec::HeavyHitters(s) = &req.task else { unreachable!() };
    s.clone()
}

/// The published config goes through JSON unchanged, builds the same task, and resolving it
/// again changes nothing (the sketch's rows and columns written out).
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
    assert_eq!((out.rows, out.columns), (None, None), "rows and columns are the sketch's");
    let sketch = HeavyHittersSpec { method: HeavyMethod::Sketch, ..spec_of(&req) };
    let req_sketch = CreateCollection { schema: None, epsilon: 2.0, task: TaskSpec::HeavyHitters(sketch) };
    let published = crate::resolve(&req_sketch, "s").unwrap();
    let TaskSpec::HeavyHitters(out) = &published.task else { unreachable!() };
    assert_eq!((out.rows, out.columns), (Some(32), Some(1024)), "the sketch's shape is published");
    assert_eq!(out.levels.as_deref(), Some(&[12, 18, 24][..]), "PEM's schedule at B = 24");
    let again = CreateCollection { schema: None, epsilon: 2.0, task: published.task.clone() };
    assert_eq!(crate::resolve(&again, "s").unwrap(), published);
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
    let t = task(HeavyMethod::Sketch, 5, 16, 1, None);
    let mut good = Vec::new();
    t.randomize(&Input::Items(&["a".to_string()]), &mut simulate::device_rng(1, 0), &mut good).unwrap();
    t.validate(&good).unwrap();
    let back = wire::decode::<SketchReport>(&good).unwrap();
    assert_eq!(wire::encode(&back), good, "the sketch report round-trips through the wire");
    assert!(good.len() <= 9, "{} bytes", good.len());
    let sketch = |level, j, l| wire::encode(&SketchReport { level, hcms: HcmsReport { j, l, bit: true } });
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (sketch(2, 0, 0), "level is 2"),
        (sketch(0, 32, 0), "j is 32"),
        (sketch(1, 0, 1024), "l is 1024"),
        (wire::encode(&HeavyHitterReport { level: 0, olh: OlhReport { seed: 1, y: 0 } }), "kind"),
        (good[..good.len() - 1].to_vec(), "payload"),
    ];
    for (bytes, field) in cases {
        let e = t.validate(&bytes).unwrap_err().to_string();
        assert!(e.contains(field), "sketch {field}: {e}");
    }
}

/// The state is the multiset of reports: two halves merged give the one-pass estimate, and the
/// parallel chunked run gives the same.
/// For PEM the state is the multiset of reports; for the sketch its sums, saved dense or sparse:
/// in both, through the saved states too.
#[test]
fn merge_of_two_halves_equals_one_pass() {
    let pop = population(12_000, 5, true);
    let inputs: Vec<Input> = pop.iter().map(|s| Input::Items(s)).collect();
    for method in [HeavyMethod::Pem, HeavyMethod::Sketch] {
        let t = task(method, 6, 16, 2, None);
        let one = simulate::sequential(t.as_ref(), &inputs, 11, 0).unwrap();
        let mut a = t.simulate(&inputs[..5_000], 11, 0).unwrap();
        let b = t.simulate(&inputs[5_000..], 11, 5_000).unwrap();
        let mut saved = t.aggregator();
        for part in [&a, &b] {
            let state = crate::state::save(t.as_ref(), part.as_ref()).unwrap();
            crate::state::merge(t.as_ref(), saved.as_mut(), &state).unwrap();
        }
        a.merge(b.as_ref()).unwrap();
        let chunked = simulate::run(t.as_ref(), &inputs, 11).unwrap();
        let want = doc(t.as_ref(), one.as_ref());
        assert!(!want.items.is_empty());
        assert_eq!(doc(t.as_ref(), a.as_ref()), want, "{method:?}");
        assert_eq!(doc(t.as_ref(), chunked.as_ref()), want, "{method:?}");
        assert_eq!(doc(t.as_ref(), saved.as_ref()), want, "{method:?}");
        assert_eq!(a.count(), 12_000);
    }
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
        (HeavyHittersSpec { rows: Some(8), ..base.clone() }, "task.rows is 8"),
        (HeavyHittersSpec { method: HeavyMethod::Treehist, columns: Some(8), ..base.clone() }, "task.columns is 8"),
        (HeavyHittersSpec { method: HeavyMethod::Sketch, rows: Some(0), ..base.clone() }, "task.rows is 0"),
        (HeavyHittersSpec { method: HeavyMethod::Sketch, columns: Some(1000), ..base.clone() }, "task.columns is 1000"),
        (HeavyHittersSpec { method: HeavyMethod::Sketch, rows: Some(1 << 20), ..base.clone() }, "task.rows"),
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
/// band is ±4.7 of them (false failure < 1e-5 per method). The sketch (one signed bit per
/// report: at ε = 4 its standard error is about 0.0066 here, so the 3% items are not found in
/// every run) over its six largest items (12% to 7%) and R = 400: 2,400 terms, ±5.2 standard
/// deviations; its fixed hash family's collision bias adds about 4% to its MSE. Each method has
/// its own device seeds (shared seeds would correlate the methods' errors through the devices'
/// first draws).
#[test]
#[ignore]
fn calibration_mse_over_predicted() {
    let configs = [
        (HeavyMethod::Pem, false, 1, 200, 10),
        (HeavyMethod::Treehist, false, 1, 200, 10),
        (HeavyMethod::Pem, true, 2, 200, 10),
        (HeavyMethod::Sketch, false, 1, 400, 6),
    ];
    for (c, (method, sets, pad, r, checked)) in configs.into_iter().enumerate() {
        let pop = population(50_000, 10, sets);
        let inputs: Vec<Input> = pop.iter().map(|s| Input::Items(s)).collect();
        let levels = (method != HeavyMethod::Treehist).then(|| vec![6, 12]);
        let t = task(method, 10 + sets as usize, 12, pad, levels);
        let names: Vec<String> = (0..checked).map(|j| format!("h{j}")).collect();
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
                pred += truth.variance(n_j, method);
            }
        }
        let ratio = mse / pred;
        eprintln!("heavy-hitters {method:?} L={pad}: MSE/predicted = {ratio:.4} over {r} runs");
        assert!((0.85..=1.15).contains(&ratio), "{method:?} L={pad}: MSE/predicted = {ratio}");
    }
}
