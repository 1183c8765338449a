//! The command line: one file per subcommand, each an `Args` struct and a `run()`.

use std::io::Write;

mod alpha;
mod completion;
mod connect;
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
    /// More log output on stderr (-v info, -vv debug, -vvv trace).
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
    /// Run the embedded management cluster: up, serve, down, status.
    #[command(subcommand)]
    Management(management::Management),
    /// Run the controllers of the providers installed in a management cluster.
    Manager(manager::Args),
    /// Print the version, git commit, build date and Cluster API contract.
    Version(version::Args),
    /// Print a shell completion script (bash, zsh or fish).
    Completion(completion::Args),
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
        Command::Upgrade(cmd) => cmd.run(),
        Command::Topology(cmd) => cmd.run(),
        Command::Alpha(cmd) => cmd.run(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`| head`): what it wanted it has; nothing to report.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            // Not eprintln!: a closed stderr is no reason to panic.
            let _ = writeln!(std::io::stderr(), "Error: {err:#}");
            if err.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
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
    let filter = tracing_subscriber::EnvFilter::try_from_env("CAPICTL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
