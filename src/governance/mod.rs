//! Governance: approval tokens, allowed signers, policy and the gate's decision.
//!
//! Everything here is pure — no IO, no async, no network, no clock: time is passed in and
//! files arrive as bytes — so it can be tested with plain data and later become its own crate.
//! `workflow` and `audit` gather the inputs (from git, the forge and the ledger); this module
//! only decides.

pub mod allowed_signers;
pub mod code;
pub mod decision;
pub mod handoff;
pub mod paths;
pub mod policy;
pub mod review;
pub mod time;
pub mod token;

pub use code::{Code, Coded};
