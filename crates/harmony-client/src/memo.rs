//! Memoized (permanent) randomized response for recurring collections, on a data-independent
//! schedule.
//!
//! A device that reports the same value in every collection of a recurring series (a daily
//! question) would, with a fresh report each time, let the server average its noise away: k
//! independent reports at ε are kε-LDP together. With memoization the device draws a
//! permanent report once per *epoch* of the series and resends it in every collection of the
//! epoch ([`Device::prepare_series`](crate::Device::prepare_series)).
//!
//! # The schedule and what it promises
//! The policy's `series_refresh = k` (collections per epoch; `None`: one epoch for the whole
//! series) fixes the epochs by counting: collections 0…k−1 of the series (as this device was
//! served them) are epoch 0, k…2k−1 epoch 1, and so on. At the first collection of an epoch the
//! device randomizes its *current* value at the collection's ε, charges ε once (keyed by the
//! series, the randomizer's fingerprint and the epoch, never by the value), and keeps the
//! report; every other collection of the epoch resends those bytes under a new report id.
//! * **Over T collections** the server receives ⌈T/k⌉ independent ε-LDP reports, each
//!   repeated; the repeats are a function of the report alone (the same bytes whatever the
//!   device's values in between), so all T reports together are (⌈T/k⌉·ε)-LDP (basic
//!   composition), and that is exactly what the budget is charged.
//! * **Value changes.** A value that changes inside an epoch changes nothing the server sees.
//!   Across epochs the reports are independent draws *even when the value is unchanged*, so two
//!   value histories that differ only in when a value changed give likelihood ratios of at most
//!   e^{ε·m}, m the number of epochs whose first value differs (never the certainty of a
//!   memo keyed on the value, where an unchanged value resends identical bytes and a changed
//!   one cannot).
//! * **Refusals** depend on public quantities only: the budget is charged at the first
//!   collection of each epoch, whatever the value, so whether the device answers depends on
//!   the number of collections it was served and on the policy, never on its data.
//! * **Cost.** The server's estimate for a collection is that of the values at the start of
//!   each device's epoch (stale by up to k − 1 collections); a smaller k trades ε for
//!   freshness.
//!
//! # Design
//! * **Series.** A series is named by its id (`Device::prepare_series(task, series, input)`).
//!   The key also holds a fingerprint of the randomizer (task spec, schema, ε): a report is
//!   reused only by an identical randomizer, so a server changing ε or the oracle within a
//!   series gets a fresh report, charged again (and the server knows it changed them).
//! * **Storage.** The permanent report, the epoch and the count of collections live in the
//!   device's [`LedgerState`](crate::LedgerState) with its reports and spends, written in one
//!   update: an epoch charged whose report is not kept is a refusal (fail closed), never a
//!   fresh report.
//! * **Tasks.** Frequency only: one categorical value, a finite domain. Means records are
//!   randomized whole in one draw; heavy hitters and training are out (item sets; gradients
//!   change with the model).
//! * **Limits.** The permanent report is identical across an epoch: it links a device's
//!   reports within it (the report ids differ; the bytes do not).

use crate::policy::refuse;
use crate::{DeviceTask, Input, Result};
use harmony_core::schema::Value;

/// The key of a frequency collection's series: the series and the randomizer's fingerprint
/// (task spec, schema, ε: what makes two collections' reports interchangeable). Never the
/// value. Refused (rule `memoization`) for another task, or an input without the attribute's
/// category.
pub(crate) fn series_key(task: &DeviceTask, series: &str, input: &Input<'_>) -> Result<String> {
    let c = task.config();
    let Some(attribute) = task.task().memo_attribute() else {
        return Err(refuse("memoization", c.task.kind().name(), "frequency"));
    };
    let schema = c.schema()?;
    let j = schema.attributes().iter().position(|a| a.name() == attribute).unwrap_or(usize::MAX);
    let value = match input {
        Input::Record(r) => r.get(j).copied(),
        _ => None,
    };
    let Some(Value::Category(_)) = value else {
        return Err(refuse("memoization", "an input without the attribute's category", "a record"));
    };
    let fingerprint = serde_json::to_string(&(&c.task, &c.schema, c.epsilon)).expect("JSON of a config");
    Ok(format!("series:{series}\u{1f}{fingerprint}"))
}

/// The spend key of a series' epoch.
pub(crate) fn epoch_key(series_key: &str, epoch: u64) -> String {
    format!("{series_key}\u{1f}epoch {epoch}")
}
