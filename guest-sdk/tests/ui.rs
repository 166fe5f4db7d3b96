//! Compile-time behaviour of `#[lovia::tool]`: what builds, and the
//! diagnostic of every rejected declaration (`TRYBUILD=overwrite` to bless).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
