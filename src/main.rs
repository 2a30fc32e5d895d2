//! The `mcp-tasks-shim` binary: parse the command line, hand over to `cli`.

// Every message is parsed into, and written from, a tree of small heap
// objects; mimalloc serves those in a fraction of glibc's instructions.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    mcp_tasks_shim::cli::main()
}
