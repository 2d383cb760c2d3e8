//! Atelier: a self-improving agent swarm behind a human-signed governance gate.
//!
//! Start with ARCHITECTURE.md for the codemap and invariants. In short: `governance` decides
//! (pure), `workflow` gathers data and acts (one loop for every forge), `forge` carries pull
//! requests (local or GitHub, behind the `Forge` trait), `audit` keeps and verifies the ledger,
//! `git` holds the repository operations the others share, and `cli` is the only module that
//! prints.

pub mod agent;
pub mod audit;
pub mod cli;
pub mod clock;
pub mod config;
pub mod errors;
pub mod forge;
pub mod fsutil;
pub mod git;
pub mod governance;
pub mod improve;
pub mod keys;
pub mod panel;
pub mod proposal;
pub mod swarm;
pub mod text;
pub mod workflow;
