//! `harmony submit` for `adaptive-rounds` linear-queries collections: the open round is answered
//! by the next devices of the file, as many as the round still takes. Device i (row i) answers
//! round ⌊i/batch_size⌋ + 1, as `harmony simulate` runs the rounds, so seeded devices
//! (`--simulate-devices --seed`) give the simulation's answers; real devices randomize with the
//! OS CSPRNG. Each device answers through the client SDK's public API ([`DeviceTask`]).

use crate::output::Format;
use crate::population::Population;
use anyhow::{Context, Result, bail};
use clap::Args;
use harmony_client::{Client, DeviceTask, Input, Policy, SimulatedDevices};
use harmony_protocol::{AnswerPost, CollectionConfig, DeviceKey, QueryRound};

/// `harmony collection ask`: the next query of an `adaptive-rounds` collection.
#[derive(Args, Debug)]
pub struct AskArgs {
    #[command(flatten)]
    pub at: super::tokens::ServerToken,
    /// Collection id (an `adaptive-rounds` linear-queries collection).
    #[arg(long)]
    pub collection: String,
    /// The next round's query, a JSON object: `{"range": [a, b]}`, `{"in": [...]}`,
    /// `{"weights": [...]}` or `{"and": [...]}`, with an optional `name` and `attribute`; or
    /// `@FILE` holding one. Taken only when every round so far is full.
    #[arg(long)]
    pub query: String,
    /// Output format (json: the round it opened, as `GET …/query`).
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// Runs `harmony collection ask`: posts the query and prints the round it opened.
pub fn ask(a: &AskArgs) -> Result<()> {
    let text = match a.query.strip_prefix('@') {
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("--query @{path}: cannot read the file"))?
        }
        None => a.query.clone(),
    };
    let query: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("--query is not a JSON object: {}", text.chars().take(80).collect::<String>()))?;
    let round = a.at.client()?.post_query(&a.collection, &query)?;
    match a.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&round)?),
        Format::Table => println!("{}", describe(&round)),
    }
    Ok(())
}

/// One line on a round: its number, name, query, scale and answers.
fn describe(r: &QueryRound) -> String {
    let state = if r.open { "open" } else { "full" };
    format!(
        "round {} \"{}\": {} (scale {}), {} of {} answers, {state}",
        r.round, r.name, r.query, r.scale, r.received, r.batch_size
    )
}

/// Answers the open round with rows `(t − 1)·g + received .. t·g` of `population`; with
/// `keys` (a collection of enrolled devices), row i answers as enrolled device i, with its key.
pub fn submit(
    client: &Client,
    config: &CollectionConfig,
    population: &Population,
    seed: Option<u64>,
    policy: &Policy,
    keys: Option<&[DeviceKey]>,
) -> Result<()> {
    let task = DeviceTask::with_policy(config.clone(), policy.clone())?;
    let round = client.query_round(&config.id)?;
    let id = &config.id;
    if !round.open {
        bail!(
            "round {} of collection {id} is full ({} answers): post the next query first (`harmony collection ask --collection {id} --query JSON`)",
            round.round,
            round.received
        );
    }
    let first = ((round.round - 1) * round.batch_size + round.received) as usize;
    let last = (round.round * round.batch_size) as usize;
    let n = keys.map_or(population.len(), |k| k.len().min(population.len()));
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
        match keys {
            Some(k) => client
                .clone()
                .with_token(&k[i].key)
                .post_answer(id, &AnswerPost { device_id: k[i].device_id.clone(), report: item.report })?,
            None => client.post_answer(id, &AnswerPost { device_id: item.id, report: item.report })?,
        };
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

#[cfg(test)]
mod tests {
    use super::*;
    use harmony_client::RetryPolicy;
    use harmony_core::schema::{Attribute, Schema, Value};
    use harmony_protocol::spec::{LinearMechanism, LinearQueriesSpec, TaskSpec};
    use harmony_protocol::{CreateCollection, TaskEstimate};
    use harmony_tasks::Query;
    use serde_json::json;

    /// A server on loopback over a fresh SQLite file in a scratch directory named after `name`,
    /// a client of it (admin token, no retries) and a one-attribute schema of three colors.
    fn served(name: &str) -> (std::path::PathBuf, harmony_server::Running, Client, Schema) {
        let dir = std::env::temp_dir().join(format!("harmony-cli-answers-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = harmony_server::open_store(&format!("sqlite://{}", dir.join("db.sqlite").display())).unwrap();
        let server = harmony_server::spawn(store, "tok", "127.0.0.1:0", 2).unwrap();
        let client = Client::new(&format!("http://{}", server.addr))
            .with_token("tok")
            .with_retry(RetryPolicy { attempts: 1, ..Default::default() });
        let colors = vec!["red".to_string(), "green".into(), "blue".into()];
        let schema = Schema::new(vec![Attribute::Categorical { name: "color".into(), categories: colors }]).unwrap();
        (dir, server, client, schema)
    }

    fn request(schema: &Schema, queries: serde_json::Value) -> CreateCollection {
        let spec = LinearQueriesSpec {
            attributes: vec!["color".into()],
            bins: Default::default(),
            workload: queries,
            mechanism: LinearMechanism::AdaptiveRounds,
            delta: None,
            hull: Default::default(),
            enrollment: Some(false),
            batch_size: Some(5),
        };
        CreateCollection { schema: Some(schema.clone()), epsilon: 1.0, task: TaskSpec::LinearQueries(spec) }
    }

    /// Seeded devices answer one round per run (refused while the round is full), and the
    /// served document equals the task's in-process rounds for the same queries and seed.
    #[test]
    fn submit_answers_the_open_round_as_simulate_does() {
        let (dir, server, client, schema) = served("plain");
        let values: Vec<Value> = (0..12).map(|i| Value::Category(i % 3)).collect();
        let population = Population::records(&schema, values.clone());
        let (q1, q2) = (json!({"range": [0, 0]}), json!({"in": ["green", "blue"]}));
        let config = client.create_collection(&request(&schema, json!({"queries": [q1]}))).unwrap().config;
        let policy = Policy::default();
        submit(&client, &config, &population, Some(9), &policy, None).unwrap();
        let e = submit(&client, &config, &population, Some(9), &policy, None).unwrap_err().to_string();
        assert!(e.contains("round 1") && e.contains("full"), "{e}");
        client.post_query(&config.id, &q2).unwrap();
        submit(&client, &config, &population, Some(9), &policy, None).unwrap();
        let served = client.estimates(&config.id, &Query::default()).unwrap().result;

        let sim = harmony_tasks::resolve(&request(&schema, json!({"queries": [q1, q2]})), "sim").unwrap();
        let task = harmony_tasks::build(&sim).unwrap();
        let agg = task.simulate(&population.inputs(), 9, 0).unwrap();
        let simulated = task.estimate(agg.as_ref(), &Query::default()).unwrap();
        assert!(matches!(&served, TaskEstimate::LinearQueries(l) if l.group_reports == [5, 5]));
        assert_eq!(served, simulated, "submit == simulate, bit for bit");
        server.stop();
        let _ = std::fs::remove_dir_all(dir);
    }

    /// A collection of enrolled devices: answers without keys are refused (401) and count for
    /// nothing; with the keys of `collection token enroll`, row i answers as enrolled device i.
    #[test]
    fn enrolled_devices_answer_with_their_keys() {
        let (dir, server, client, schema) = served("keys");
        let population = Population::records(&schema, (0..12).map(|i| Value::Category(i % 3)).collect());
        let mut req = request(&schema, json!({"queries": [{"range": [0, 0]}]}));
        if let TaskSpec::LinearQueries(s) = &mut req.task {
            s.enrollment = Some(true);
        }
        let config = client.create_collection(&req).unwrap().config;
        let e = submit(&client, &config, &population, Some(9), &Policy::default(), None).unwrap_err();
        assert!(format!("{e:#}").contains("(401)") && format!("{e:#}").contains("device key"), "{e:#}");
        assert_eq!(client.query_round(&config.id).unwrap().received, 0);
        let keys = client.enroll(&config.id, 3, "").unwrap().devices;
        submit(&client, &config, &population, Some(9), &Policy::default(), Some(&keys)).unwrap();
        let round = client.query_round(&config.id).unwrap();
        assert_eq!((round.received, round.open), (3, true), "three keys, three answers");
        server.stop();
        let _ = std::fs::remove_dir_all(dir);
    }
}
