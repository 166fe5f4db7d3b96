//! lovia's integration tests: one binary, one module per subsystem.

mod args;
mod bench;
mod cli;
mod code_mode;
mod console;
mod contract;
mod docs;
mod exec;
mod fuzz;
mod load;
mod mcp;
mod mcp_sources;
mod outcomes;
mod parts;
mod providers;
mod python;
mod replicas;
mod runner;
mod sandbox;
mod schemas;
mod serve;
mod supply;
mod threat;
mod typescript;
mod web;
mod workspace;
