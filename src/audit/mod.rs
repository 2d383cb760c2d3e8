//! Audit: the ledger (Merkle tree, signed checkpoints, storage under `refs/atelier/ledger`) and
//! the offline verification of a repository's history against it.

pub mod checkpoint;
pub mod history;
pub mod ledger;
pub mod merkle;
pub mod view;
pub mod witness;
