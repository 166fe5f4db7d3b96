//! The threat model (issue 12, "Hold the line between tenants"): one test
//! per attack, from a real hostile guest or real traffic over real sockets.

mod sandbox;
