//! The one integration-test binary: a module per user story (adopt, approve, gate and merge,
//! audit, review panel, swarm run, containment, cycle, GitHub, output), all driving the real
//! `atelier` program in temporary repositories (see support/). A regression test is named after
//! what broke.

mod support;

mod adopt;
mod agent_clis;
mod approve;
mod audit;
mod containment;
mod cycle;
mod gate_and_merge;
mod gate_key;
mod github;
mod output;
mod panel;
mod propose;
mod structure;
mod swarm_run;
mod tidy;
