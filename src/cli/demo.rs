//! `atelier demo`: the whole governed loop in a temporary repository, offline, narrated.

use std::process::ExitCode;

use clap::Args;

#[derive(Args, Debug)]
pub struct DemoArgs {}

pub fn demo(_args: DemoArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("the demo is not built yet")
}
