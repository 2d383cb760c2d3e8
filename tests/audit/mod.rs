//! TODO story doc

mod verify;
mod witnesses;
