//! The `atelier` binary: all work happens in the library; see `atelier::cli`.

fn main() -> std::process::ExitCode {
    atelier::cli::main()
}
