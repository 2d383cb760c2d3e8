//! The self-improvement cycle's runners: what turns a proposer's change into a proposal with
//! its evidence, stopping at "awaiting approval". It never prints: it reports through the
//! [`cycle::Host`] its caller (the cli) implements.

pub mod cycle;
pub mod propose;
