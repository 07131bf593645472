//! `harmony submit` for `adaptive-rounds` linear-queries collections: the open round is answered
//! by the next devices of the file, as many as the round still takes. Device i (row i) answers
//! round ⌊i/batch_size⌋ + 1, as `harmony simulate` runs the rounds, so seeded devices
//! (`--simulate-devices --seed`) give the simulation's answers; real devices randomize with the
//! OS CSPRNG. Each device answers through the client SDK's public API ([`DeviceTask`]).

use crate::population::Population;
use anyhow::{Context, Result, bail};
use harmony_client::{Client, DeviceTask, Input, Policy, SimulatedDevices};
use harmony_protocol::{AnswerPost, CollectionConfig};

/// Answers the open round with rows `(t − 1)·g + received .. t·g` of `population`.
pub fn submit(
    client: &Client,
    config: &CollectionConfig,
    population: &Population,
    seed: Option<u64>,
    policy: &Policy,
) -> Result<()> {
    let task = DeviceTask::with_policy(config.clone(), policy.clone())?;
    let round = client.query_round(&config.id)?;
    let id = &config.id;
    if !round.open {
        bail!(
            "round {} of collection {id} is full ({} answers): post the next query first (POST /v1/collections/{id}/queries)",
            round.round,
            round.received
        );
    }
    let first = ((round.round - 1) * round.batch_size + round.received) as usize;
    let last = (round.round * round.batch_size) as usize;
    let n = population.len();
    if first >= n {
        bail!("round {} takes devices {first}..{last} of the file, which has {n} rows", round.round);
    }
    let inputs = population.inputs();
    let mut sim = seed.map(SimulatedDevices::new);
    let (mut rng, mut ids) = (harmony_core::sampling::secure_rng(), harmony_core::sampling::secure_rng());
    for (i, input) in inputs.iter().enumerate().take(last.min(n)).skip(first) {
        let record = input.record("linear-queries")?;
        let answer = Input::Answer { record, round: &round };
        let item = match &mut sim {
            Some(s) => s.item(&task, i as u64, &answer)?,
            None => task.item(&answer, &mut rng, &mut ids).with_context(|| format!("device {i} (row {})", i + 2))?,
        };
        client.post_answer(id, &AnswerPost { device_id: item.id, report: item.report })?;
    }
    eprintln!(
        "answered round {} (\"{}\") with devices {first}..{} of the file; {} of {} answers",
        round.round,
        round.name,
        last.min(n),
        round.received + (last.min(n) - first) as u64,
        round.batch_size
    );
    Ok(())
}
