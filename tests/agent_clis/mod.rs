//! The real agent CLIs (Claude Code, Codex, Aider), installed as their registries ship them,
//! each run through its preset under default containment against a fake model server of ours
//! (support/model): the task's file written, the tokens each reported recorded, a slow answer
//! not killed, a blocked endpoint refused fast.
