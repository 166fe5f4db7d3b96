//! The workspace's policy: what a path or a command may do (docs/workspace.md,
//! "The policy"). Pure judgement over resolved paths and command text; the
//! file operations themselves go through the directory capability (`fs`).

pub(crate) mod command;
pub(crate) mod path;

pub(crate) use path::{PathPolicy, Verdict, Why};
