//! TODO story doc

mod gate;
mod merge;
mod records;
