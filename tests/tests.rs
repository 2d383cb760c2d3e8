//! The one integration-test binary: a module per user story (adopt, approve, gate and merge,
//! audit, review panel, swarm run, containment, cycle, GitHub, output), all driving the real
//! `atelier` program in temporary repositories (see support/). A regression test is named after
//! what broke.

mod support;

mod adopt;
mod approve;
mod audit;
mod containment;
mod cycle;
mod gate_and_merge;
mod gate_key;
mod gate_table;
mod github;
mod github_emulator;
mod github_fixtures;
mod hackbench;
mod one_loop;
mod output;
mod own_repository;
mod plans;
mod propose;
mod proposers;
mod review_panel;
mod signers_vs_sshkeygen;
mod stats;
mod swarm_run;
mod tidy;
mod tokens;
