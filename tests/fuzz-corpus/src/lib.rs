//! The committed fuzz corpora (`fuzz/corpus/TARGET`), replayed on stable Rust by this
//! package's tests: every input a fuzz run kept is checked against the target's invariants
//! on each CI run, without a nightly toolchain. Apart from the crates it checks, so that
//! their packages hold no path outside themselves.
