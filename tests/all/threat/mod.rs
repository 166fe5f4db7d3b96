//! Issue 12 ("Hold the line between tenants"): one module per area, each
//! attack a test.

mod serve;
