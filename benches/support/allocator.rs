//! The shipped binary's global allocator, for the benches that time the
//! shim's own code in this process: what they measure is what
//! `mcp-tasks-shim` runs (see `src/main.rs`).

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
