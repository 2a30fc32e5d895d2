//! The `mcp-tasks-shim` binary: parse the command line, hand over to `cli`.

fn main() -> std::process::ExitCode {
    mcp_tasks_shim::cli::main()
}
