//! Threat-model tests of issue 12: one file per area, one test per attack.

mod arguments;
