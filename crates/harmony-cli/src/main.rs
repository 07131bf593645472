//! The `harmony` command line.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod bench;
mod data;
mod examples;
mod experiment;
mod items;
mod output;
mod plan;
mod plot;
mod population;
mod render;
mod server_cmds;
mod shuffle;
mod simulate;
mod simulate_tasks;
mod specs;
mod task_cli;
mod train;

/// `harmony --version`: the version and the optional features this binary was built with.
const VERSION: &str = if cfg!(feature = "datafusion") {
    concat!(env!("CARGO_PKG_VERSION"), " (features: datafusion)")
} else {
    env!("CARGO_PKG_VERSION")
};

/// Harmony: local differential privacy collection and analysis.
#[derive(Parser, Debug)]
#[command(name = "harmony", version = VERSION, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Randomize every row of a table as a client would, aggregate, and compare with the truth.
    Simulate(simulate::SimulateArgs),
    /// Predict each attribute's standard error for every strategy before collecting.
    Plan(plan::PlanArgs),
    /// Schema utilities.
    #[command(subcommand)]
    Schema(SchemaCommand),
    /// Measure randomize and aggregation throughput of every mechanism.
    Bench(bench::BenchArgs),
    /// Train linear regression, logistic regression or an SVM under LDP (k-fold cross-validation).
    Train(train::TrainArgs),
    /// Run the collection server (HTTP API, see docs/SERVER.md; the analyst dashboard at
    /// /dashboard/, see docs/DASHBOARD.md).
    Serve(server_cmds::ServeArgs),
    /// Manage collections on a server.
    #[command(subcommand)]
    Collection(server_cmds::CollectionCommand),
    /// Submit a CSV to a collection: one simulated device per row, each randomizing its own row
    /// (a training collection: its gradient, round by round).
    Submit(server_cmds::SubmitArgs),
    /// Print a collection's current estimates, or a training collection's model (--data scores it).
    Query(server_cmds::QueryArgs),
    /// Serve on loopback, collect Adult from 48,842 simulated devices, print estimates beside the truth.
    Demo(server_cmds::demo::DemoArgs),
    /// Ingest load generator: throughput and batch latency of a server.
    Load(server_cmds::load::LoadArgs),
    /// Export a collection's stored reports as Parquet (partitioned by day) with its spec
    /// (docs/EXPORT.md).
    Export(server_cmds::export::ExportArgs),
    /// Aggregate exported reports into the estimate document `harmony query` prints.
    Aggregate(server_cmds::export::AggregateArgs),
    /// A shuffler relay between devices and a server: strips identities and timing, permutes
    /// rounds of at least --min-batch reports and forwards them (docs/SHUFFLE.md).
    Shuffle(shuffle::ShuffleArgs),
}

#[derive(Subcommand, Debug)]
enum SchemaCommand {
    /// Print a schema (TOML) inferred from a table, with a note per column on stderr and in
    /// the schema's leading comments.
    Infer(InferArgs),
}

#[derive(clap::Args, Debug)]
struct InferArgs {
    /// Data: CSV, .csv.xz, Parquet or Arrow IPC (detected; `-` = stdin).
    #[arg(long)]
    data: std::path::PathBuf,
    /// Categorical columns with more labels than this are left out.
    #[arg(long, default_value_t = 100)]
    max_categories: usize,
    /// Columns to leave out (comma-separated).
    #[arg(long, value_delimiter = ',')]
    skip: Vec<String>,
    /// Cell texts meaning "missing", comma-separated, matched ignoring case (an empty cell
    /// always is). Default: NA,N/A,NaN,null,None,?
    #[arg(long, value_delimiter = ',')]
    missing_tokens: Option<Vec<String>>,
    /// Integer columns with at most this many distinct values are numeric without gaps
    /// (counts, scores) and categorical with gaps (codes).
    #[arg(long, default_value_t = 12)]
    few_integers: usize,
}

fn schema_infer(a: &InferArgs) -> anyhow::Result<()> {
    let mut options = harmony_data::InferOptions {
        max_categories: a.max_categories,
        skip: a.skip.clone(),
        few_integers: a.few_integers,
        ..Default::default()
    };
    if let Some(tokens) = &a.missing_tokens {
        options.missing = harmony_data::MissingTokens::new(tokens);
    }
    let inf = harmony_data::infer_path(&a.data, &options)?;
    for n in &inf.notes {
        eprintln!("note: {n}");
    }
    eprintln!("WARNING: {}", harmony_data::infer::NOT_PRIVATE);
    let mut head = format!("# Inferred by `harmony schema infer` from {} ({} rows).\n", a.data.display(), inf.rows);
    for line in
        std::iter::once(format!("WARNING: {}", harmony_data::infer::NOT_PRIVATE)).chain(inf.notes.iter().cloned())
    {
        head.push_str(&format!("# {line}\n"));
    }
    print!("{head}\n{}", toml::to_string(&inf.file)?);
    Ok(())
}

/// Rust ignores SIGPIPE, so a closed stdout (`harmony simulate | head`) makes `println!` panic;
/// with the default action restored the process ends quietly, as other Unix tools do.
///
/// Only for commands that write a report to stdout and talk to no peer: a network command keeps
/// SIGPIPE ignored, because hyper writes to sockets with `writev` (no `MSG_NOSIGNAL`), so with the
/// default action any client that closes its connection early would kill `harmony serve` (exit
/// 141, no log line). There a closed socket is an `EPIPE` error for that connection only.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called in `main` right after argument parsing, before any thread exists, so nothing can race on the
    // signal disposition; SIG_DFL is a valid action for SIGPIPE and no handler code runs.
    #[allow(unsafe_code)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Whether the command talks to network peers (a server, or devices posting to one): these keep
/// SIGPIPE ignored (see [`restore_sigpipe`]).
fn talks_to_peers(command: &Command) -> bool {
    matches!(
        command,
        Command::Serve(_)
            | Command::Demo(_)
            | Command::Load(_)
            | Command::Submit(_)
            | Command::Collection(_)
            | Command::Query(_)
            | Command::Export(_)
            | Command::Shuffle(_)
    )
}

/// The command line: each command's help short and ending with its examples, the task options
/// of the task commands hidden from their help and the tasks listed (`task_cli`).
fn cli_command() -> clap::Command {
    task_cli::short_help(task_cli::attach(examples::attach(Cli::command())))
}

/// The arguments of the process, parsed: a task written after its command (`harmony simulate
/// range …`) reads as `--task range`, shows its own help and refuses the options it does not take.
fn parse(argv: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
    let (argv, task_form) = task_cli::rewrite(argv);
    let mut cmd = cli_command();
    if let Some((path, task)) = &task_form
        && argv.iter().any(|a| a == "--help" || a == "-h")
    {
        print!("{}", task_cli::task_help(&cmd, path, task));
        std::process::exit(0);
    }
    let matches = cmd.try_get_matches_from_mut(argv)?;
    if let Some((path, task)) = &task_form {
        let (mut m, mut c) = (&matches, &cmd);
        for p in path {
            m = m.subcommand_matches(p).expect("the task's command matched");
            c = c.find_subcommand(p).expect("the task's command");
        }
        task_cli::check_given(m, c, task).map_err(|e| c.clone().error(clap::error::ErrorKind::ArgumentConflict, e))?;
    }
    Cli::from_arg_matches(&matches)
}

fn main() {
    let cli = parse(std::env::args_os().collect()).unwrap_or_else(|e| e.exit());
    if !talks_to_peers(&cli.command) {
        // Still single-threaded: argument parsing starts no thread.
        restore_sigpipe();
    }
    let result = match cli.command {
        Command::Simulate(args) => simulate::run(args),
        Command::Plan(args) => plan::run(args),
        Command::Schema(SchemaCommand::Infer(a)) => schema_infer(&a),
        Command::Bench(args) => bench::run(args),
        Command::Train(args) => train::run(args),
        Command::Serve(args) => server_cmds::serve(args),
        Command::Collection(cmd) => server_cmds::collection(cmd),
        Command::Submit(args) => server_cmds::submit(args),
        Command::Query(args) => server_cmds::query(args),
        Command::Demo(args) => server_cmds::demo::run(args),
        Command::Load(args) => server_cmds::load::run(args),
        Command::Export(args) => server_cmds::export::export(args),
        Command::Aggregate(args) => server_cmds::export::aggregate(args),
        Command::Shuffle(args) => shuffle::run(args),
    };
    if let Err(e) = result {
        eprintln!("error: {}", output::error_text(&e));
        std::process::exit(2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Negative numbers are values, not flags: `--epsilon -1` reaches the validation that names
    /// the option and the valid range, instead of clap's "unexpected argument '-1'".
    #[test]
    fn negative_numbers_parse_as_values() {
        for argv in [
            &["harmony", "simulate", "--epsilon", "-1"][..],
            &["harmony", "plan", "--epsilon", "1,-2", "--target-error", "-0.1"],
            &["harmony", "simulate", "--task", "quantiles", "--quantiles", "-0.5"],
            &["harmony", "simulate", "--task", "linear-queries", "--delta", "-1"],
            &["harmony", "train", "--target", "t", "--task", "linear", "--epsilon", "-1", "--lambda", "-1"],
            &["harmony", "train", "--target", "t", "--task", "logistic", "--threshold", "-5", "--kappa", "-2"],
            &["harmony", "demo", "--epsilon", "-1"],
        ] {
            if let Err(e) = Cli::try_parse_from(argv) {
                panic!("{argv:?}: {e}");
            }
        }
    }
}
