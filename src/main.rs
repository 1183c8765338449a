use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    capictl::install_crypto_provider();
    capictl::cli::run(capictl::cli::Cli::parse())
}
