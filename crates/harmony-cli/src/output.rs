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
