//! The command line per task: `harmony simulate range --column age …`,
//! `harmony collection create range …` (also `demo` and `load`).
//!
//! Each of these commands takes the options of every task (`--task X` and the union of their
//! options, as before). Written with the task's name after the command instead, it reads only
//! the options that task takes and refuses the others, and `harmony simulate range --help` shows
//! just those, with the task's examples; the command's own help hides the task options and lists
//! the tasks. Each task's [`CliTask`](crate::simulate_tasks::CliTask) says which options it takes.

use crate::simulate_tasks::{ALL, by_name};
use clap::parser::ValueSource;
use std::ffi::OsString;

/// The commands that take a task.
const COMMANDS: &[&[&str]] = &[&["simulate"], &["collection", "create"], &["demo"], &["load"]];

/// Whether `task` does not take the command option `id` ([`CliTask::not_taken`](crate::simulate_tasks::CliTask::not_taken)).
fn not_taken(task: &str, id: &str) -> bool {
    by_name(task).is_some_and(|c| c.not_taken.contains(&id))
}

/// Every id some task takes, and `task` itself.
fn task_ids() -> impl Iterator<Item = &'static str> {
    ALL.iter().flat_map(|c| c.options.iter().copied()).chain(["task"])
}

fn options_of(task: &str) -> Option<&'static [&'static str]> {
    by_name(task).map(|c| c.options)
}

/// `argv` with a task name after one of [`COMMANDS`] turned into `--task NAME`, and the command
/// path and task when it was so written.
pub fn rewrite(argv: Vec<OsString>) -> (Vec<OsString>, Option<(Vec<String>, String)>) {
    for path in COMMANDS {
        let n = path.len();
        let matches = argv.len() > n + 1 && argv[1..=n].iter().zip(path.iter()).all(|(a, p)| a == p);
        let task = if matches { argv[n + 1].to_str().filter(|t| options_of(t).is_some()) } else { None };
        if let Some(task) = task {
            let task = task.to_string();
            let mut out = argv[..=n].to_vec();
            out.extend([OsString::from("--task"), OsString::from(&task)]);
            out.extend(argv[n + 2..].iter().cloned());
            return (out, Some((path.iter().map(|s| s.to_string()).collect(), task)));
        }
    }
    (argv, None)
}

/// `cmd` with each task command's task options hidden from its help, and the tasks listed.
pub fn attach(mut cmd: clap::Command) -> clap::Command {
    for path in COMMANDS {
        cmd = at(cmd, path, &|c| {
            let c = c.mut_args(|a| if task_ids().any(|id| id == a.get_id()) { a.hide(true) } else { a });
            let list: Vec<String> = ALL.iter().map(|c| format!("  {:<15} {}", c.name, c.about)).collect();
            let after = c.get_after_help().map(|s| format!("\n\n{s}")).unwrap_or_default();
            let tasks =
                format!("Tasks (`harmony {} TASK --help`: the task's options):\n{}", path.join(" "), list.join("\n"));
            c.override_usage(format!("harmony {} [TASK] [OPTIONS]", path.join(" ")))
                .after_help(format!("{tasks}{after}"))
        });
    }
    cmd
}

/// `cmd` with `f` applied to its subcommand at `path` (`["collection", "create"]`).
pub fn at(cmd: clap::Command, path: &[&str], f: &dyn Fn(clap::Command) -> clap::Command) -> clap::Command {
    match path {
        [] => f(cmd),
        [first, rest @ ..] => cmd.mut_subcommand(*first, |sub| at(sub, rest, f)),
    }
}

/// Every command's `-h` and `--help` print its short help (one line per option): the long one
/// was three times as long.
pub fn short_help(cmd: clap::Command) -> clap::Command {
    let help = clap::Arg::new("help").short('h').long("help").action(clap::ArgAction::HelpShort).help("Print help");
    let cmd = cmd.disable_help_flag(true).arg(help);
    let names: Vec<String> = cmd.get_subcommands().map(|s| s.get_name().to_string()).collect();
    names.iter().fold(cmd, |c, n| c.mut_subcommand(n, short_help))
}

/// The help of `harmony PATH TASK`: the command's own options and the task's, its examples.
pub fn task_help(root: &clap::Command, path: &[String], task: &str) -> String {
    let mut c = root.clone();
    for p in path {
        c = c.find_subcommand(p).expect("a task command").clone();
    }
    let ids = options_of(task).unwrap_or(&[]);
    let about = by_name(task).map_or("", |c| c.about);
    let own_help = by_name(task).map_or(&[][..], |c| c.help);
    let own = |id: &str| (!task_ids().any(|t| t == id) && !not_taken(task, id)) || ids.contains(&id);
    let mut c = c
        .mut_args(|a| {
            let id = a.get_id().as_str().to_string();
            let help = own_help.iter().find(|(i, _)| *i == id).map(|(_, h)| *h);
            match (own(&id) && id != "task", ids.contains(&id.as_str())) {
                (false, _) => a.hide(true),
                (true, true) => {
                    let a = a.hide(false).help_heading("Options of the task");
                    match help {
                        Some(h) => a.help(h).long_help(None),
                        None => a,
                    }
                }
                (true, false) => a,
            }
        })
        .bin_name(format!("harmony {} {task}", path.join(" ")))
        .about(format!("{}: {about}", path.join(" ")))
        .long_about(None)
        .override_usage(format!("harmony {} {task} [OPTIONS]", path.join(" ")));
    let examples = crate::examples::task_examples(&path.join(" "), task);
    c = c.after_help(examples.map(|e| format!("Examples:\n{e}")).unwrap_or_default());
    c.render_help().to_string()
}

/// Errors on an option given on the command line that `task` does not take.
pub fn check_given(matches: &clap::ArgMatches, cmd: &clap::Command, task: &str) -> Result<(), String> {
    let ids = options_of(task).unwrap_or(&[]);
    let refused = by_name(task).map_or(&[][..], |c| c.not_taken).iter().copied();
    for id in task_ids().filter(|id| *id != "task" && !ids.contains(id)).chain(refused) {
        if matches!(matches.try_get_raw(id), Ok(Some(_))) && matches.value_source(id) == Some(ValueSource::CommandLine)
        {
            let long = |id: &str| {
                let long = cmd.get_arguments().find(|a| a.get_id() == id).and_then(|a| a.get_long());
                format!("--{}", long.unwrap_or(id))
            };
            let takes: Vec<String> =
                ids.iter().filter(|i| cmd.get_arguments().any(|a| a.get_id() == **i)).map(|i| long(i)).collect();
            return Err(format!("{} is not an option of task {task}: it takes {}", long(id), takes.join(", ")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<OsString> {
        s.split(' ').map(OsString::from).collect()
    }

    #[test]
    fn a_task_after_its_command_reads_as_task() {
        let (out, form) = rewrite(argv("harmony simulate range --column age"));
        assert_eq!(out, argv("harmony simulate --task range --column age"));
        assert_eq!(form, Some((vec!["simulate".to_string()], "range".to_string())));
        let (out, form) = rewrite(argv("harmony collection create train --epsilon 1"));
        assert_eq!(out, argv("harmony collection create --task train --epsilon 1"));
        assert!(form.is_some());
        for plain in ["harmony simulate --task range", "harmony simulate --runs 2", "harmony query --server x"] {
            assert_eq!(rewrite(argv(plain)), (argv(plain), None));
        }
    }

    #[test]
    fn a_task_refuses_the_options_of_the_others() {
        let parse = |s: &str| crate::parse(argv(s));
        assert!(parse("harmony simulate range --column age --bins 8 --epsilon 1").is_ok());
        // `--devices`, and `--users` as its alias.
        assert!(parse("harmony simulate train --target income --devices 5000").is_ok());
        assert!(parse("harmony simulate train --target income --users 5000").is_ok());
        assert!(parse("harmony plan --users 5000").is_ok());
        let e = parse("harmony simulate range --column age --top 5").unwrap_err().to_string();
        assert!(e.contains("--top is not an option of task range") && e.contains("--bins"), "{e}");
        let e = parse("harmony collection create means --server s --epsilon 1 --column age").unwrap_err().to_string();
        assert!(e.contains("--column is not an option of task means") && e.contains("--strategy"), "{e}");
        // The flat form takes every task's options, as before.
        assert!(parse("harmony simulate --task range --column age --top 5").is_ok());
    }

    #[test]
    fn the_main_help_pages_fit_in_60_lines_with_two_examples() {
        let root = crate::cli_command();
        for path in [&["simulate"][..], &["collection", "create"], &["submit"], &["query"]] {
            let mut c = root.clone();
            for p in path {
                c = c.find_subcommand(p).unwrap().clone();
            }
            let help = c.render_help().to_string();
            let lines = help.lines().count();
            assert!(lines <= 60, "harmony {} --help: {lines} lines\n{help}", path.join(" "));
            assert!(help.matches("\n  harmony ").count() + help.matches("=$(harmony ").count() >= 2, "{help}");
        }
        for task in ALL.iter().map(|c| c.name) {
            for path in [vec!["simulate".to_string()], vec!["collection".into(), "create".into()]] {
                let help = task_help(&root, &path, task);
                let lines = help.lines().count();
                assert!(lines <= 60, "harmony {} {task} --help: {lines} lines\n{help}", path.join(" "));
            }
        }
        let help = task_help(&root, &["collection".into(), "create".into()], "train");
        assert!(!help.contains("--period") && !help.contains("--recurring"), "{help}");
        let help = task_help(&root, &["simulate".into()], "range");
        assert!(help.contains("--column") && help.contains("--bins") && !help.contains("--top"), "{help}");
        assert!(help.contains("harmony simulate range --column age"), "{help}");
    }

    #[test]
    fn every_task_of_simulate_and_collection_create_has_two_examples() {
        for path in ["simulate", "collection create"] {
            for task in ALL.iter().map(|c| c.name) {
                let e = crate::examples::task_examples(path, task).unwrap_or_default();
                let own = format!("harmony {path} {task} ");
                assert!(e.matches(own.as_str()).count() >= 2, "harmony {path} {task}: {e}");
            }
        }
    }
}
