//! The gate decides and the merge lands: `gate` refuses until the policy is met and says what is
//! missing, `merge` lands exactly once by compare-and-swap, and forge records cannot override the
//! ledger.

mod gate;
mod merge;
mod records;
mod table;
