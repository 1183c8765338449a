use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    capictl::install_crypto_provider();
    if let Some(code) = capictl::cli::run_as_node_program() {
        return code;
    }
    let args = capictl::cli::klog_verbosity(std::env::args_os());
    if let Some(replaced) = capictl::cli::replaced_command(&args) {
        eprintln!("Error: {replaced}");
        return ExitCode::from(2);
    }
    capictl::cli::run(capictl::cli::Cli::parse_from(args))
}
