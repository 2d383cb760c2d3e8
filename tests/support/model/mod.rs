//! Fake model servers of our own on loopback, one per protocol the agent CLIs speak: Anthropic
//! Messages (Claude Code), OpenAI Responses (Codex) and OpenAI chat completions (Aider). Each
//! plays a scripted model that edits one file through the CLI's own tools, can answer slowly,
//! reports usage, and records every request it received.
