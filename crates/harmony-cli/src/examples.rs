//! The examples each command's help ends with (`Examples:`), two or more per command.
//!
//! They are written to run as shown, in this order, from a clone (they read `data/` and
//! `examples/`): the `serve` examples start the server the later ones talk to, `collection
//! create` sets `$ID`, and so on. The guide's command-line reference (book/gen_cli.py) prints
//! them as one shell block per command, and CI runs that page (book/run_examples.py); the tests
//! below check that every command has them and that each `harmony …` line parses.

/// (command path, examples): each example is a `# comment` line followed by its shell lines.
pub const EXAMPLES: &[(&str, &str)] = &[
    (
        "simulate",
        "# Means and frequencies of every attribute of the bundled data, three strategies, ε = 1:
harmony simulate --epsilon 1 --runs 2
# Range queries over one column of a CSV with its schema, at two budgets:
harmony simulate range --column age --data data/adult.csv --schema examples/adult.toml --epsilon 1,2 --runs 2",
    ),
    (
        "plan",
        "# Devices needed for a standard error of 0.01 on every bundled attribute at ε = 1:
harmony plan --devices 100000 --epsilon 1 --target-error 0.01
# The central ε that shuffling 100,000 reports of ε₀ = 4 gives (δ = 1e-6):
harmony plan --shuffle 100000 --epsilon 4 --delta 1e-6",
    ),
    (
        "schema infer",
        "# A schema from a table, with a note on stderr for each column:
harmony schema infer --data data/adult.csv > adult.toml
# Leave columns out and keep categorical columns of at most 20 labels:
harmony schema infer --data data/adult.csv --skip fnlwgt,education_num --max-categories 20 > small.toml",
    ),
    (
        "bench",
        "# Every mechanism, short (n = 100,000, ε = 1):
harmony bench --quick
# Two oracles over 64 values, as JSON:
harmony bench --mechanisms grr,oue --d 64 --epsilon 1 --n 100000 --format json > bench.json",
    ),
    (
        "train",
        "# Logistic regression of income, 2-fold cross-validation, ε = 2 per gradient:
harmony train --target income --task logistic --epsilon 2 --folds 2 --repeats 1
# Linear regression of hours per week, as JSON:
harmony train --target hours_per_week --task linear --epsilon 4 --folds 2 --repeats 1 --format json > train.json",
    ),
    (
        "serve",
        "# SQLite in a file; the admin token from the environment (argv is visible to all):
export HARMONY_ADMIN_TOKEN=secret
harmony serve --db sqlite://harmony.db --listen 127.0.0.1:8080 &
# A second server on its own database, fewer connections, warnings only:
harmony serve --db sqlite://other.db --listen 127.0.0.1:8081 --max-connections 256 --log-level warn &",
    ),
    (
        "collection create",
        "# Ranges and quantiles of age at ε = 1 (prints the new collection's id):
ID=$(harmony collection create range --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 1 --column age)
# Means and frequencies of every attribute, named, with weekly windows:
MEANS=$(harmony collection create means --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 2 --name 'Adult means' --period week)",
    ),
    (
        "collection list",
        "# The collections the token reads, with their report counts:
harmony collection list --server http://127.0.0.1:8080
# The same as JSON:
harmony collection list --server http://127.0.0.1:8080 --format json > collections.json",
    ),
    (
        "collection token create",
        "# An analyst token that reads one collection (printed once):
harmony collection token create --server http://127.0.0.1:8080 --collection $ID --label analyst@example.org
# Its id, label and secret as JSON:
harmony collection token create --server http://127.0.0.1:8080 --collection $ID --label dashboard --format json > token.json",
    ),
    (
        "collection token list",
        "# A collection's analyst tokens (ids and labels, never the secrets):
harmony collection token list --server http://127.0.0.1:8080 --collection $ID
# As JSON:
harmony collection token list --server http://127.0.0.1:8080 --collection $ID --format json > tokens.json",
    ),
    (
        "collection token revoke",
        "# The id of the collection's first token, from the list:
TOKEN_ID=$(harmony collection token list --server http://127.0.0.1:8080 --collection $ID | awk 'NR == 2 {print $1}')
# Revoke it: its requests are refused from now on:
harmony collection token revoke --server http://127.0.0.1:8080 --collection $ID --token-id $TOKEN_ID
# Revoke every token of the collection still active:
for T in $(harmony collection token list --server http://127.0.0.1:8080 --collection $ID | awk '$2 == \"active\" {print $1}'); do
  harmony collection token revoke --server http://127.0.0.1:8080 --collection $ID --token-id $T
done",
    ),
    (
        "collection token enroll",
        "# A training collection (logistic regression of income, 1,000 gradients a round):
TRAIN=$(harmony collection create train --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 4 --target income --model logistic --batch-size 1000 --devices 5000)
# Keys for 5,000 devices, one per row of keys.csv (for `harmony submit --device-keys`):
harmony collection token enroll --server http://127.0.0.1:8080 --collection $TRAIN --count 5000 --out keys.csv
# Ten more for a pilot group:
harmony collection token enroll --server http://127.0.0.1:8080 --collection $TRAIN --count 10 --label pilot --out pilot.csv",
    ),
    (
        "collection token devices",
        "# The enrolled devices of a collection, by label:
harmony collection token devices --server http://127.0.0.1:8080 --collection $TRAIN
# As JSON:
harmony collection token devices --server http://127.0.0.1:8080 --collection $TRAIN --format json > devices.json",
    ),
    (
        "collection ask",
        "# Adaptive linear queries, 500 enrolled devices a round; round 1 asks the file's query:
ASK=$(harmony collection create linear-queries --server http://127.0.0.1:8080 --schema examples/adult.toml --epsilon 1 --method adaptive-rounds --queries examples/queries/adult_women.json --batch-size 500)
harmony collection token enroll --server http://127.0.0.1:8080 --collection $ASK --count 1000 --out ask-keys.csv
harmony submit --server http://127.0.0.1:8080 --collection $ASK --data data/adult.csv --device-keys ask-keys.csv
# Round 2, chosen after round 1's answer:
harmony collection ask --server http://127.0.0.1:8080 --collection $ASK --query '{\"name\": \"men\", \"attribute\": \"sex\", \"in\": [\"Male\"]}'
# Its answers (the next 500 devices), then both rounds' estimates:
harmony submit --server http://127.0.0.1:8080 --collection $ASK --data data/adult.csv --device-keys ask-keys.csv
harmony query --server http://127.0.0.1:8080 --collection $ASK
# Round 3, its query read from a file:
echo '{\"name\": \"women, again\", \"attribute\": \"sex\", \"in\": [\"Female\"]}' > round3.json
harmony collection ask --server http://127.0.0.1:8080 --collection $ASK --query @round3.json",
    ),
    (
        "submit",
        "# One simulated device per row, each randomizing its own row with the OS's CSPRNG:
harmony submit --server http://127.0.0.1:8080 --collection $ID --data data/adult.csv
# A training collection's enrolled devices, round by round, under a policy of ε ≤ 4:
harmony submit --server http://127.0.0.1:8080 --collection $TRAIN --data data/adult.csv --device-keys keys.csv --max-epsilon 4",
    ),
    (
        "query",
        "# The estimates with their standard errors and CIs, the truth beside them:
harmony query --server http://127.0.0.1:8080 --collection $ID --data data/adult.csv --ranges 18:30,30:65 --quantiles 0.25,0.5
# One estimate document per day, as JSON:
harmony query --server http://127.0.0.1:8080 --collection $ID --series day --format json > series.json",
    ),
    (
        "demo",
        "# Serve on loopback, 48,842 seeded devices, the estimates beside the truth:
harmony demo --seed 1
# The frequencies of education at ε = 2 instead, as JSON:
harmony demo frequency --column education --seed 1 --epsilon 2 --format json > demo.json",
    ),
    (
        "load",
        "# 200,000 synthetic reports into an embedded server, 4 connections:
harmony load --reports 200000 --batch 5000 --concurrency 4
# Against the running server (admin token from HARMONY_ADMIN_TOKEN), as JSON:
harmony load --server http://127.0.0.1:8080 --reports 100000 --batch 5000 --json > load.json",
    ),
    (
        "export",
        "# Stored reports as Parquet under exports/collection=ID/, partitioned by day:
harmony export --db sqlite://harmony.db --collection $ID --out exports/
# Another collection into its own directory (its reports so far):
harmony export --db sqlite://harmony.db --collection $MEANS --out means-exports/",
    ),
    (
        "aggregate",
        "# The estimate document `harmony query` prints, from the export alone:
harmony aggregate --reports exports/ --collection $ID
# With ranges and quantiles, as JSON:
harmony aggregate --reports exports/ --collection $ID --ranges 18:30 --quantiles 0.5 --format json > aggregate.json",
    ),
    (
        "shuffle",
        "# A relay in front of the server; it forwards rounds of at least 1,000 reports:
harmony shuffle --listen 127.0.0.1:8082 --upstream http://127.0.0.1:8080 --min-batch 1000 --buffer relay/ &
RELAY=$!
# Devices need only the relay's address:
harmony submit --server http://127.0.0.1:8082 --collection $MEANS --data data/adult.csv
# At the end of the collection: stop the relay, forward what its buffer still holds:
kill $RELAY && wait $RELAY || true
harmony shuffle --flush --upstream http://127.0.0.1:8080 --buffer relay/ --min-batch 1",
    ),
];

/// The examples of `harmony PATH TASK --help`, indented as in a help page.
pub fn task_examples(path: &str, task: &str) -> Option<String> {
    task_examples_raw(path, task).map(indent)
}

/// A task's examples of `harmony PATH TASK` ([`crate::simulate_tasks::CliTask`]), as written.
fn task_examples_raw(path: &str, task: &str) -> Option<&'static str> {
    let cli = crate::simulate_tasks::by_name(task)?;
    match path {
        "simulate" => Some(cli.simulate_examples),
        "collection create" => Some(cli.create_examples),
        _ => None,
    }
}

/// Appends each command's examples to its help (`after_help`).
pub fn attach(mut cmd: clap::Command) -> clap::Command {
    for (path, text) in EXAMPLES {
        let path: Vec<&str> = path.split(' ').collect();
        cmd = crate::task_cli::at(cmd, &path, &|c| c.after_help(format!("Examples:\n{}", indent(text))));
    }
    cmd
}

/// The examples indented by two, each command line broken with ` \\` before an option that
/// would pass 90 columns (clap would wrap it without the backslash, and the copied command would
/// not run).
fn indent(text: &str) -> String {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut cur = String::from("  ");
        for unit in units(line) {
            if cur.trim().is_empty() {
                cur.push_str(&unit);
            } else if !line.starts_with('#') && cur.len() + 1 + unit.len() > 88 {
                out.push(format!("{cur} \\"));
                cur = format!("      {unit}");
            } else {
                cur = format!("{cur} {unit}");
            }
        }
        out.push(cur);
    }
    out.join("\n")
}

/// The words of `line`, an option joined with the values after it.
fn units(line: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in shell_words(line) {
        match out.last_mut() {
            Some(last) if !word.starts_with('-') && last.starts_with('-') => *last = format!("{last} {word}"),
            _ => out.push(word),
        }
    }
    out
}

/// `line` split at the spaces outside single quotes.
fn shell_words(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    for c in line.chars() {
        match c {
            ' ' if !quoted => out.extend((!cur.is_empty()).then(|| std::mem::take(&mut cur))),
            '\'' => {
                quoted = !quoted;
                cur.push(c);
            }
            _ => cur.push(c),
        }
    }
    out.extend((!cur.is_empty()).then_some(cur));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `harmony …` command of an example, as words: the part inside `$(…)`, without a
    /// trailing `&` or redirection; single-quoted words kept whole.
    fn commands(text: &str) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some(at) = line.find("harmony ") else { continue };
            let mut cmd = &line[at..];
            if line[..at].ends_with("$(") {
                cmd = &cmd[..cmd.rfind(')').expect("$( closed")];
            }
            let cmd = cmd.split(" | ").next().unwrap().split(" > ").next().unwrap().trim_end_matches(" &");
            out.push(words(cmd));
        }
        out
    }

    fn words(cmd: &str) -> Vec<String> {
        shell_words(cmd).into_iter().map(|w| w.replace('\'', "")).collect()
    }

    fn leaves(cmd: &clap::Command, path: Vec<String>, out: &mut Vec<String>) {
        let subs: Vec<_> = cmd.get_subcommands().filter(|s| s.get_name() != "help").collect();
        if subs.is_empty() && !path.is_empty() {
            out.push(path.join(" "));
        }
        for s in subs {
            leaves(s, [path.clone(), vec![s.get_name().to_string()]].concat(), out);
        }
    }

    #[test]
    fn every_command_has_two_examples_of_itself() {
        let mut all = Vec::new();
        leaves(&crate::cli_command(), vec![], &mut all);
        for path in &all {
            let text = EXAMPLES.iter().find(|(p, _)| p == path).map(|(_, t)| *t);
            let text = text.unwrap_or_else(|| panic!("`harmony {path}` has no examples"));
            let own = commands(text).into_iter().filter(|w| w[1..].join(" ").starts_with(path.as_str())).count();
            assert!(own >= 2, "`harmony {path}` has {own} examples of itself, not 2");
            assert!(text.lines().next().unwrap().starts_with("# "), "`harmony {path}`: examples open with a comment");
            for l in text.lines().filter(|l| l.starts_with('#')) {
                assert!(l.chars().count() <= 88, "`harmony {path}`: a comment clap would wrap: {l}");
            }
        }
        for (path, _) in EXAMPLES {
            assert!(all.iter().any(|p| p == path), "examples for `harmony {path}`, which is not a command");
        }
    }

    #[test]
    fn every_example_parses() {
        let pages = EXAMPLES.iter().map(|(p, t)| (p.to_string(), *t));
        let tasks = crate::simulate_tasks::ALL.iter().flat_map(|c| {
            ["simulate", "collection create"]
                .map(|p| (format!("{p} {}", c.name), task_examples_raw(p, c.name).unwrap_or("")))
        });
        for (page, text) in pages.chain(tasks) {
            for w in commands(text) {
                let w: Vec<String> = w.into_iter().map(|s| if s.starts_with('$') { "abc".into() } else { s }).collect();
                let argv = w.iter().map(std::ffi::OsString::from).collect();
                crate::parse(argv)
                    .unwrap_or_else(|e| panic!("an example of `harmony {page}` does not parse: {w:?}: {e}"));
            }
        }
    }

    #[test]
    fn the_help_ends_with_the_examples() {
        let mut cmd = crate::cli_command();
        let sub = cmd.find_subcommand_mut("simulate").unwrap();
        let help = sub.render_help().to_string();
        assert!(help.contains("Examples:\n  # Means and frequencies"), "{help}");
        assert!(help.trim_end().ends_with("--runs 2"), "{help}");
    }
}
