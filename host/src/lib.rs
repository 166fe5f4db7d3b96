//! lovia host
