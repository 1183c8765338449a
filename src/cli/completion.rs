//! `capictl completion bash|zsh|fish`.

use clap::CommandFactory;
use clap_complete::Shell;

use super::Cli;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: CompletionShell,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

impl From<CompletionShell> for Shell {
    fn from(shell: CompletionShell) -> Shell {
        match shell {
            CompletionShell::Bash => Shell::Bash,
            CompletionShell::Zsh => Shell::Zsh,
            CompletionShell::Fish => Shell::Fish,
        }
    }
}

/// The completion script for a shell, as `capictl completion` prints it.
pub fn script(shell: CompletionShell) -> String {
    let mut out = Vec::new();
    clap_complete::generate(Shell::from(shell), &mut Cli::command(), "capictl", &mut out);
    String::from_utf8(out).expect("clap_complete writes UTF-8")
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    print!("{}", script(args.shell));
    Ok(())
}
