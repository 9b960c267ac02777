//! `tokenmeter verify`: the engine checks itself on this adapter (`engine::verify`) with the
//! model and switches a run would use.

use super::model::{load_with, open, ModelArgs, Opened};
use clap::Args;
use tokenmeter::bench::record::run_config::KernelPath;
use tokenmeter::engine::verify;
use tokenmeter::Result;

#[derive(Args)]
pub(crate) struct VerifyArgs {
    #[command(flatten)]
    pub(crate) model: ModelArgs,
    /// Print the outcome as JSON on stdout (the checks, the kernel path, the seconds).
    #[arg(long)]
    pub(crate) json: bool,
}

pub(crate) async fn main(args: VerifyArgs) -> Result<()> {
    let opened = open(&args.model).await?;
    let outcome = match &opened {
        Opened::Disk(c, _) => {
            let mut pass = load_with(&args.model, c, verify::PROMPT).await?;
            let path = KernelPath::of(&pass.kernel_options()).describe();
            verify::run(&mut pass, c, path).await?
        }
        Opened::Synthetic(s) => {
            let mut pass = load_with(&args.model, s, verify::PROMPT).await?;
            let path = KernelPath::of(&pass.kernel_options()).describe();
            verify::run(&mut pass, s, path).await?
        }
    };
    let width = outcome.checks.iter().map(|c| c.what.chars().count()).max().unwrap_or(0);
    for c in &outcome.checks {
        eprintln!("{} {:<width$}  {}", if c.passed { "ok  " } else { "FAIL" }, c.what, c.worst);
    }
    eprintln!("{} ({})", outcome.line(), outcome.kernel_path);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&outcome).expect("serialisable"));
    }
    match outcome.failure() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
