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
