use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    capictl::install_crypto_provider();
    if let Some(code) = capictl::cli::run_as_node_program() {
        return code;
    }
    capictl::cli::run(capictl::cli::Cli::parse())
}
