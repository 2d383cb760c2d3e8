//! The commands only GitHub has: `submit` (publish a proposal as a pull request) and `serve`
//! (the webhook receiver). `approve`, `gate` and `merge` are the same commands on every forge.

use std::path::Path;
use std::process::ExitCode;

use clap::Args;

use super::{json, now, out};
use crate::forge::github::serve::{Timeouts, SECRET_VAR};
use crate::workflow::{self, Workspace};

#[derive(Args, Debug)]
pub struct SubmitArgs {
    /// The proposal id.
    id: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn submit(dir: &Path, args: SubmitArgs) -> anyhow::Result<ExitCode> {
    let ws = Workspace::open(dir)?;
    let s = workflow::submit(&ws, &args.id, now()?)?;
    if args.json {
        json(&serde_json::json!({
            "id": args.id, "pull": s.pull, "url": s.url, "created": s.created, "head": s.head,
        }))?;
    } else {
        out(&format!(
            "{} pull request #{} for proposal {} (head {})\n  {}\n",
            if s.created { "opened" } else { "updated" },
            s.pull,
            args.id,
            s.head,
            s.url
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:8787")]
    listen: String,
    /// Milliseconds a client has to send a request's headers.
    #[arg(long, default_value_t = 5_000, value_name = "MS")]
    header_timeout_ms: u64,
    /// Milliseconds from the end of the headers to the body's first byte.
    #[arg(long, default_value_t = 2_000, value_name = "MS")]
    first_byte_timeout_ms: u64,
    /// Milliseconds from the end of the headers to the end of the body.
    #[arg(long, default_value_t = 5_000, value_name = "MS")]
    body_timeout_ms: u64,
    /// Once a body has started, each window of this many milliseconds must bring at least
    /// `--min-body-rate` bytes a second of it (or the rest of it), or the upload is dropped.
    #[arg(long, default_value_t = 1_000, value_name = "MS")]
    rate_window_ms: u64,
    /// The slowest a body may arrive, in bytes a second (GitHub sends it at once).
    #[arg(long, default_value_t = 16_384, value_name = "BYTES")]
    min_body_rate: u64,
}

pub fn serve(dir: &Path, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let ready = workflow::serve::prepare(dir)?;
    let secret = std::env::var(SECRET_VAR)
        .ok()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{SECRET_VAR} is not set: the webhook secret verifies every delivery (the same value as the webhook's secret on GitHub)"
            )
        })?;
    let addr: std::net::SocketAddr = args.listen.parse().map_err(|e| {
        anyhow::anyhow!(
            "--listen {}: {e} (expected host:port, e.g. 127.0.0.1:8787)",
            args.listen
        )
    })?;
    let ms = std::time::Duration::from_millis;
    let timeouts = Timeouts {
        headers: ms(args.header_timeout_ms.max(1)),
        first_byte: ms(args.first_byte_timeout_ms.max(1)),
        body: ms(args.body_timeout_ms.max(1)),
        rate_window: ms(args.rate_window_ms.max(1)),
        min_rate: args.min_body_rate,
    };
    ready.serve(
        addr,
        secret.into_bytes(),
        timeouts,
        std::sync::Arc::new(Operator),
    )?;
    Ok(ExitCode::SUCCESS)
}

/// `serve`'s lines for the operator: notes on stderr, the address on stdout.
struct Operator;

impl workflow::serve::Reporter for Operator {
    fn note(&self, line: &str) {
        super::note!("{line}");
    }

    fn listening(&self, at: std::net::SocketAddr) {
        // A closed stdout must not stop a server: the address is also in its notes then.
        if out(&format!("listening on http://{at}\n")).is_err() {
            super::note!("listening on http://{at}");
        }
    }
}
