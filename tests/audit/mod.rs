//! An auditor verifies the history: `audit verify` finds what bypassed the gate, and witnesses
//! (checkpoints, the local memory) catch a ledger rewound behind them.

mod checkpoints_vs_c2sp;
mod verify;
mod witnesses;
