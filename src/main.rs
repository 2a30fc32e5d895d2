//! The `mcp-tasks-shim` binary: parse the command line, hand over to `cli`.

// No `#[global_allocator]`: the system allocator, on purpose. mimalloc
// cut a fifth of the instructions per round trip but no latency that
// stood out of the noise, and it kept a varying share of a burst's peak
// after the tasks expired (the load test's memory-flat check failed twice
// in CI). The measurements are in the history of docs/performance.md
// (git log -S mimalloc -- docs/performance.md).

fn main() -> std::process::ExitCode {
    mcp_tasks_shim::cli::main()
}
