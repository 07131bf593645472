//! `harmony simulate --task …` (heavy): in progress.

use crate::simulate::SimulateArgs;
use anyhow::{Result, bail};

pub fn run(args: &SimulateArgs) -> Result<()> {
    bail!("--task {:?} is not available in this build yet", args.task.task)
}
