//! The guide's pages (`docs/book/src`) and the README as doctests: every Rust snippet in them
//! compiles, and those not marked `no_run` run, in `cargo test --workspace` (no mdbook needed).
//! A page with a Rust snippet is listed here; `cargo xtask book`'s check (run by `cargo test`
//! too) refuses a page with one that is not.

/// Each page, one item whose docs are the page.
macro_rules! pages {
    ($($name:ident = $path:literal;)*) => {
        $(
            #[doc = include_str!($path)]
            #[cfg(doctest)]
            pub struct $name;
        )*
    };
}

pages! {
    Readme = "../../README.md";
    GettingStarted = "src/getting-started.md";
    Flows = "src/flows.md";
    Testing = "src/testing.md";
    Http = "src/doors/http.md";
    Kinesis = "src/doors/kinesis.md";
    Invoke = "src/doors/invoke.md";
    Postgres = "src/stores/postgres.md";
    Durable = "src/doors/durable.md";
}
