//! Estimate documents as tables: what `harmony query` prints, and `harmony simulate` beside the
//! truth (the tables and truths are harmony-tasks' [`text`](harmony_tasks::text), every task's).
//! JSON output is the document itself.

use harmony_protocol::estimates::EstimateDocument;
pub use harmony_tasks::text::{Truth, coverage, linear_distribution, max_difference, range_bins, record_truth};

/// Prints a document as a table, with the truth beside it when given, then its notes.
pub fn print(doc: &EstimateDocument, truth: Option<&Truth>) {
    print!("{}", harmony_tasks::text::table(doc, truth));
}
