//! The `mcp-tasks-shim` binary: parse the command line, hand over to `cli`.

/// A proxy allocates and frees many small buffers per message (JSON
/// trees, header maps, bodies); mimalloc's thread-local free lists make
/// that a fraction of glibc malloc's cost (see docs/performance.md, "Ninth
/// pass"). Only the binary sets it: a library user keeps their own.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    mcp_tasks_shim::cli::main()
}
