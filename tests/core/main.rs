//! Host tests of the core through its HTTP function, with `MemoryStore` and
//! a fixed clock.

mod errors;
mod support;
mod transcript;
