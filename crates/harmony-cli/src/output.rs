//! Output helpers shared by the commands: format flag and progress bars (stderr only).

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Output format of a command.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Human-readable table.
    Table,
    /// JSON on stdout (progress stays on stderr).
    Json,
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
pub fn progress(total: u64, what: &str, _format: Format) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed_precise} (eta {eta})")
            .expect("valid template")
            .progress_chars("=> "),
    );
    pb.set_message(what.to_string());
    pb
}

/// Finishes a command: draws the optional `--plot` PNG (saying so on stderr), then prints the
/// result on stdout as pretty JSON or as the command's table.
pub fn emit<T: serde::Serialize>(
    out: &T,
    format: Format,
    plot: Option<&std::path::Path>,
    write_plot: impl FnOnce(&std::path::Path, &T) -> anyhow::Result<()>,
    print_table: impl FnOnce(&T),
) -> anyhow::Result<()> {
    if let Some(path) = plot {
        write_plot(path, out)?;
        eprintln!("wrote {}", path.display());
    }
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(out)?),
        Format::Table => print_table(out),
    }
    Ok(())
}

/// An error and its causes on one line, each text once: a cause whose text the message so far
/// already holds (an error that prints its source, as `path: {source}` does) is not repeated.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let part = cause.to_string();
        if part.is_empty() || text.contains(&part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&part);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// "No such file or directory (os error 2)" once, not after its own prefix again.
    #[test]
    fn every_error_text_is_printed_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let os = io.to_string();
        let data = harmony_data::Error::Io { path: "x.csv".into(), source: io };
        let e = anyhow::Error::new(data).context("--data x.csv");
        let text = error_text(&e);
        assert_eq!(text.matches(&os).count(), 1, "{text}");
        assert!(text.starts_with("--data x.csv: x.csv: "), "{text}");
        assert_eq!(format!("{e:#}").matches(&os).count(), 2, "anyhow's {{:#}} repeats it");
    }
}
