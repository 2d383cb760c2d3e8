//! The one integration-test binary: a module per user story, all driving the real `atelier`
//! program in temporary repositories (see support/).

mod support;

mod swarm;

mod adopt;
mod approvals;
mod audit;
mod constitution;
mod containment;
mod containment_review;
mod containment_review2;
mod cycle;
mod gate_key_move;
mod gate_table;
mod github;
mod github_emulator;
mod github_fixtures;
mod hackbench;
mod hardening;
mod merge;
mod one_loop;
mod own_repository;
mod plans;
mod proposers;
mod review;
mod review12;
mod review12b;
mod review_adversary;
mod review_control;
mod review_cycle;
mod review_cycle2;
mod review_cycle3;
mod review_escapes;
mod review_fixes;
mod review_gate;
mod review_live;
mod review_one_loop;
mod review_third;
mod review_ui;
mod signers_vs_sshkeygen;
mod stats;
mod tidy;
mod tokens;
mod ui;
