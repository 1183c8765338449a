//! The command line: one file per subcommand, each an `Args` struct and a `run()`.

use std::io::Write;

mod alpha;
mod completion;
mod config;
mod connect;
mod convert;
mod delete;
pub mod describe;
mod generate;
mod get;
mod images;
mod init;
mod management;
mod manager;
mod r#move;
mod node;
mod quickstart;
mod topology;
mod upgrade;
mod version;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Kubernetes Cluster API in one binary: the controllers and a clusterctl-style command line.
#[derive(Debug, Parser)]
#[command(
    name = "capictl",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    /// More log output on stderr (-v info, -vv debug, -vvv trace; clusterctl's `-v N` works
    /// too: 1-2 info, 3-4 debug, 5 and more trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the quick-start cluster in one go: management cluster, providers, node images,
    /// the cluster, progress until Available, its tree and kubeconfig.
    Quickstart(quickstart::Args),
    /// Install Cluster API providers into a management cluster (the embedded one by default).
    Init(init::Args),
    /// Print YAML: cluster templates, provider components, CRDs.
    #[command(subcommand)]
    Generate(generate::Generate),
    /// Show a cluster's objects and their conditions as a tree.
    #[command(subcommand)]
    Describe(describe::Describe),
    /// Get things out of the management cluster, e.g. a workload cluster's kubeconfig.
    #[command(subcommand)]
    Get(get::Get),
    /// Move Clusters and their objects to another management cluster, or save them to a
    /// directory and restore them from it.
    Move(r#move::Args),
    /// Convert Cluster API YAML between v1beta1 and v1beta2, as the management cluster does.
    Convert(convert::Args),
    /// Managed topologies: what the topology controller will do for Clusters with
    /// `spec.topology`.
    #[command(subcommand)]
    Topology(topology::Topology),
    /// Plan and apply provider upgrades.
    #[command(subcommand)]
    Upgrade(upgrade::Upgrade),
    /// Build the Docker provider's node and load-balancer images from Debian packages.
    #[command(subcommand)]
    Images(images::Images),
    /// Commands that may change: `alpha rollout restart|pause|resume|undo`, as clusterctl's.
    #[command(subcommand)]
    Alpha(alpha::Alpha),
    /// Remove providers from the management cluster, or a workload Cluster (`delete cluster NAME`).
    Delete(delete::Args),
    /// Run the embedded management cluster: up, serve, down, status, backup, restore.
    #[command(subcommand)]
    Management(management::Management),
    /// Run the controllers of the providers installed in a management cluster.
    Manager(manager::Args),
    /// Print the version, git commit, build date and Cluster API contract.
    Version(version::Args),
    /// Print a shell completion script (bash, zsh or fish).
    Completion(completion::Args),
    /// What capictl is configured with: `config repositories` lists the providers it can install.
    #[command(subcommand)]
    Config(config::Config),
}

/// What replaced a clusterctl command that capictl does not have, when `args` call one
/// (`backup` and `restore`, which clusterctl itself dropped for `move`'s directories).
pub fn replaced_command(args: &[std::ffi::OsString]) -> Option<UsageError> {
    let command = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy())
        .find(|a| !a.starts_with('-'))?;
    let replacement = match command.as_ref() {
        "backup" => {
            "clusterctl's backup is now `capictl move --to-directory DIR` (with --namespace NS and --cluster NAME to choose the Clusters); `capictl management backup FILE` saves the whole embedded management cluster"
        }
        "restore" => {
            "clusterctl's restore is now `capictl move --from-directory DIR` (restores what `move --to-directory` saved); `capictl management restore FILE --dir DIR` restores what `management backup` saved"
        }
        _ => return None,
    };
    Some(UsageError(replacement.into()))
}

/// The command line with clusterctl's `-v N` (and `-v=N`, `--v N`, `--v=N`) read as capictl's
/// count: 0 nothing, 1-2 `-v`, 3-4 `-vv`, 5 and more `-vvv`.
pub fn klog_verbosity(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    let level = |n: u32| match n {
        0 => None,
        1 | 2 => Some("-v"),
        3 | 4 => Some("-vv"),
        _ => Some("-vvv"),
    };
    let mut out = Vec::new();
    let mut args = args.into_iter().peekable();
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy().to_string();
        let inline = ["-v=", "--v=", "--verbose="]
            .iter()
            .find_map(|p| text.strip_prefix(p))
            .and_then(|n| n.parse::<u32>().ok());
        if let Some(n) = inline {
            out.extend(level(n).map(Into::into));
            continue;
        }
        if matches!(text.as_str(), "-v" | "--v" | "--verbose")
            && let Some(n) = args
                .peek()
                .and_then(|next| next.to_str())
                .and_then(|n| n.parse::<u32>().ok())
        {
            args.next();
            out.extend(level(n).map(Into::into));
            continue;
        }
        out.push(arg);
    }
    out
}

/// Runs capictl as one of a node container's programs, outside the command line users see:
/// `capictl node agent` (PID 1), `capictl node <program> ARGS` (the static pods' processes), or
/// `kubeadm`/`crictl`/`ctr` (links to capictl in a node image, dispatched on argv[0]). None
/// when capictl was started as itself.
pub fn run_as_node_program() -> Option<ExitCode> {
    let args: Vec<String> = std::env::args().collect();
    let argv0 = std::path::Path::new(args.first()?)
        .file_name()?
        .to_str()?
        .to_string();
    if crate::providers::docker::images::NODE_ALIASES.contains(&argv0.as_str()) {
        init_logging(0);
        return Some(node::program(&argv0, &args[1..]));
    }
    if args.get(1).map(String::as_str) != Some("node") {
        return None;
    }
    init_logging(0);
    Some(match args.get(2).map(String::as_str) {
        Some("agent") => node::agent(),
        Some(program) => node::program(program, &args[3..]),
        None => {
            eprintln!(
                "capictl node: the programs of a capictl node container (agent, kubeadm, kube-apiserver, kube-controller-manager, kube-scheduler, crictl, ctr); the node image runs them"
            );
            ExitCode::from(2)
        }
    })
}

/// A mistake in how the command was called; exits with status 2 like clap's own usage errors.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Runs a parsed command line and turns its outcome into the process's exit status: 0 on
/// success, 1 on failure, 2 on a usage error.
pub fn run(cli: Cli) -> ExitCode {
    init_logging(cli.verbose);
    quiet_when_the_reader_leaves();
    let result = match cli.command {
        Command::Generate(cmd) => cmd.run(),
        Command::Version(args) => version::run(&args),
        Command::Completion(args) => completion::run(&args),
        Command::Management(cmd) => cmd.run(),
        Command::Manager(args) => manager::run(args),
        Command::Get(cmd) => cmd.run(),
        Command::Describe(cmd) => cmd.run(),
        Command::Quickstart(args) => quickstart::run(args),
        Command::Init(args) => init::run(args),
        Command::Delete(args) => delete::run(args),
        Command::Images(cmd) => cmd.run(),
        Command::Move(args) => r#move::run(args),
        Command::Convert(args) => convert::run(&args),
        Command::Upgrade(cmd) => cmd.run(),
        Command::Topology(cmd) => cmd.run(),
        Command::Alpha(cmd) => cmd.run(),
        Command::Config(cmd) => cmd.run(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`| head`): what it wanted it has; nothing to report.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            let err = connect::explain(err);
            // Not eprintln!: a closed stderr is no reason to panic.
            let _ = writeln!(std::io::stderr(), "Error: {}", error_text(&err));
            if err.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// A reader that goes away (`capictl ... | head -1`) ends the command quietly with success,
/// also where the output is printed with `println!`, whose failure is a panic.
fn quiet_when_the_reader_leaves() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

/// The error and its causes, each once: an error whose message already quotes its cause (a
/// `{source}` in its text) does not repeat it.
fn error_text(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if !text.contains(&part) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&part);
        }
    }
    text
}

/// A Go-style duration flag (30s, 1m, 1h30m; a bare number is seconds).
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    crate::api::parse_duration(text)
        .filter(|s| *s > 0.0)
        .map(std::time::Duration::from_secs_f64)
        .ok_or_else(|| format!("{text:?} is not a duration: write it as Go does, e.g. 30s or 1m"))
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    // kube's client logs every failed connection as an ERROR of its own before the command
    // reports it, and a watch whose server went away ("eof in poll") as a WARN though the
    // watcher reconnects; those lines are for -v.
    let default = if verbose == 0 {
        format!("{default},kube_client::client::builder=off,kube_client::client=error")
    } else {
        default.to_string()
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("CAPICTL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colour only for a terminal: a pipe or a file gets plain text.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_errors_cause_is_said_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("opening the store in /s: {source}")]
        struct Quoting {
            source: std::io::Error,
        }
        let quoting = anyhow::Error::new(Quoting {
            source: std::io::Error::other("invalid data"),
        });
        assert_eq!(
            error_text(&quoting),
            "opening the store in /s: invalid data"
        );
        let context = anyhow::Error::new(std::io::Error::other("refused")).context("connecting");
        assert_eq!(error_text(&context), "connecting: refused");
    }

    #[test]
    fn clusterctls_verbosity_levels_become_counts() {
        let args =
            |line: &str| -> Vec<std::ffi::OsString> { line.split(' ').map(Into::into).collect() };
        let cases = [
            (
                "capictl -v 5 describe cluster c",
                "capictl -vvv describe cluster c",
            ),
            (
                "capictl describe cluster c --v=3",
                "capictl describe cluster c -vv",
            ),
            ("capictl -v=1 version", "capictl -v version"),
            ("capictl --v 0 version", "capictl version"),
            ("capictl -vv version", "capictl -vv version"),
            // A number after -v that is a value of something else stays.
            (
                "capictl -v describe cluster 5",
                "capictl -v describe cluster 5",
            ),
        ];
        for (given, expected) in cases {
            assert_eq!(klog_verbosity(args(given)), args(expected), "{given}");
        }
    }
}
