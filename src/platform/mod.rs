//! Platform adapters. Each is compiled only for its target; nothing outside
//! this module names a platform type.

#[cfg(target_os = "wasi")]
mod wasi;
