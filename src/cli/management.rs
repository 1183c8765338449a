//! `capictl management up|serve|down|status|backup|restore`: the embedded management cluster.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::Subcommand;

use crate::management::{self, AuditOptions, DEFAULT_CONTEXT, ServeOptions, StateDir};

#[derive(Debug, Subcommand)]
pub enum Management {
    /// Start the management cluster in the background and point a kubeconfig context at it.
    Up(ServeArgs),
    /// Run the management cluster in the foreground (what `up` starts).
    Serve(ServeArgs),
    /// Stop the management cluster.
    Down(DirArgs),
    /// Say whether the management cluster runs, where, since when, and what it holds.
    Status(DirArgs),
    /// Save every object as of one revision, and the CA, to a file (0600), while the
    /// management cluster runs or after it stopped.
    Backup(BackupArgs),
    /// Make a new state directory the management cluster saved in a backup; then start it with
    /// `capictl management up --dir DIR`.
    Restore(BackupArgs),
}

#[derive(Debug, clap::Args)]
pub struct BackupArgs {
    /// The backup file.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    #[command(flatten)]
    dir: DirArgs,
}

#[derive(Debug, clap::Args)]
pub struct DirArgs {
    /// The state directory [default: $XDG_DATA_HOME/capictl/management]
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

impl DirArgs {
    /// The flag as given, to repeat in a hint.
    fn repeated(&self) -> String {
        self.dir
            .as_ref()
            .map(|d| format!(" --dir {}", d.display()))
            .unwrap_or_default()
    }
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    dir: DirArgs,
    /// Address to listen on; port 0 reuses this directory's last port, else picks a free one.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    listen: String,
    /// The kubeconfig to add a context to [default: $KUBECONFIG, else ~/.kube/config]
    #[arg(long, value_name = "PATH", conflicts_with = "no_kubeconfig")]
    kubeconfig: Option<PathBuf>,
    /// Write no kubeconfig context (the admin kubeconfig in the state directory is always there).
    #[arg(long)]
    no_kubeconfig: bool,
    /// The name of the kubeconfig context (and cluster and user) to write.
    #[arg(long, value_name = "NAME", default_value = DEFAULT_CONTEXT)]
    context: String,
    /// More names or addresses the serving certificate carries, for clients that reach the
    /// server by them: a load balancer in front of several servers, a DNS name, this host's
    /// address when listening on 0.0.0.0.
    #[arg(long, value_name = "NAME[,NAME...]", value_delimiter = ',')]
    tls_san: Vec<String>,
    /// Keep objects in etcd (comma-separated client URLs) instead of the embedded store.
    #[arg(long, value_name = "URL[,URL...]", value_delimiter = ',')]
    etcd_endpoints: Vec<String>,
    /// The CA that etcd's serving certificates chain to (etcd over TLS).
    #[arg(long, value_name = "PATH", requires_all = ["etcd_certfile", "etcd_keyfile", "etcd_endpoints"])]
    etcd_cafile: Option<PathBuf>,
    /// The client certificate to present to etcd.
    #[arg(long, value_name = "PATH", requires = "etcd_cafile")]
    etcd_certfile: Option<PathBuf>,
    /// The client certificate's private key.
    #[arg(long, value_name = "PATH", requires = "etcd_cafile")]
    etcd_keyfile: Option<PathBuf>,
    /// The audit policy (an audit.k8s.io/v1 Policy) [default: every request at Metadata]
    #[arg(long, value_name = "PATH")]
    audit_policy_file: Option<PathBuf>,
    /// Where the audit log goes; "" for none [default: audit.log in the state directory]
    #[arg(long, value_name = "PATH")]
    audit_log_path: Option<PathBuf>,
    /// Rotate the audit log at this many megabytes.
    #[arg(long, value_name = "MB", default_value_t = 100)]
    audit_log_maxsize: u64,
    /// How many rotated audit logs are kept.
    #[arg(long, value_name = "N", default_value_t = 3)]
    audit_log_maxbackup: usize,
    /// How long a request may take to send its body (a Go duration: 30s, 1m).
    #[arg(long, value_name = "DURATION", default_value = "1m", value_parser = super::parse_duration)]
    request_timeout: Duration,
    /// Megabytes of past events kept for watches to resume from, across every resource; a
    /// watcher further behind gets 410 Gone and lists again.
    #[arg(long, value_name = "MB", default_value_t = 256)]
    watch_history_mb: usize,
    /// Run the cluster autoscaler: node groups (MachineDeployments, and MachineSets of their
    /// own, with the cluster-api-autoscaler-node-group-min-size and -max-size annotations) grow
    /// for Pods no Node fits and shrink by Nodes left empty (docs/autoscaler.md).
    #[arg(long)]
    autoscaler: bool,
}

impl ServeArgs {
    fn options(&self) -> ServeOptions {
        ServeOptions {
            dir: StateDir::new(self.dir.dir.clone()),
            listen: self.listen.clone(),
            kubeconfig: (!self.no_kubeconfig)
                .then(|| management::kubeconfig_path(self.kubeconfig.clone())),
            context: self.context.clone(),
            etcd_endpoints: self.etcd_endpoints.clone(),
            etcd_tls: match (&self.etcd_cafile, &self.etcd_certfile, &self.etcd_keyfile) {
                (Some(ca), Some(cert), Some(key)) => Some([ca.clone(), cert.clone(), key.clone()]),
                _ => None,
            },
            audit: AuditOptions {
                policy_file: self.audit_policy_file.clone(),
                log_path: self.audit_log_path.clone(),
                max_size_mb: self.audit_log_maxsize,
                max_backups: self.audit_log_maxbackup,
            },
            limits: management::Limits {
                request_timeout: self.request_timeout,
                watch_history_bytes: self.watch_history_mb << 20,
            },
            tls_sans: self.tls_san.clone(),
            autoscaler: self.autoscaler,
        }
    }
}

impl Management {
    pub fn run(self) -> anyhow::Result<()> {
        let runtime = tokio::runtime::Runtime::new()?;
        runtime.block_on(async {
            match self {
                Management::Up(args) => {
                    up(&args.options()).await?;
                    eprintln!();
                    eprintln!("Next:");
                    eprintln!("  kubectl get namespaces");
                    eprintln!("  capictl init --infrastructure in-memory");
                    Ok(())
                }
                Management::Serve(args) => serve(&args.options()).await,
                Management::Down(args) => down(&StateDir::new(args.dir)).await,
                Management::Status(args) => {
                    let flags = args.repeated();
                    status(&StateDir::new(args.dir), &flags).await
                }
                Management::Backup(args) => backup(&args.file, &StateDir::new(args.dir.dir)).await,
                Management::Restore(args) => restore(&args.file, &StateDir::new(args.dir.dir)),
            }
        })
    }
}

fn where_to(options: &ServeOptions) -> String {
    match &options.kubeconfig {
        Some(path) => format!("context {:?} in {}", options.context, path.display()),
        None => format!("{}", options.dir.admin_kubeconfig().display()),
    }
}

pub(super) async fn up(options: &ServeOptions) -> anyhow::Result<()> {
    let spinner =
        indicatif::ProgressBar::new_spinner().with_message("Starting the management cluster");
    spinner.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    let (info, started) =
        management::up(options, Duration::from_secs(30), || spinner.tick()).await?;
    spinner.finish_and_clear();
    if started {
        eprintln!(
            "Management cluster started at {} (state in {})",
            info.address,
            options.dir.path.display()
        );
    } else {
        eprintln!(
            "Management cluster already running at {} since {} (pid {})",
            info.address, info.started_at, info.pid
        );
    }
    eprintln!("Kubeconfig: {}", where_to(options));
    Ok(())
}

async fn serve(options: &ServeOptions) -> anyhow::Result<()> {
    let running = management::start(options).await?;
    eprintln!(
        "Serving the management cluster at https://{} (state in {}); kubeconfig: {}",
        running.address,
        options.dir.path.display(),
        where_to(options)
    );
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    eprintln!("Stopping the management cluster");
    running.stop().await;
    Ok(())
}

async fn down(dir: &StateDir) -> anyhow::Result<()> {
    match management::down(dir, Duration::from_secs(30)).await? {
        Some(info) => eprintln!(
            "Management cluster at {} stopped; its state is kept in {}",
            info.address,
            dir.path.display()
        ),
        None => eprintln!(
            "No management cluster is running from {}",
            dir.path.display()
        ),
    }
    Ok(())
}

async fn backup(file: &std::path::Path, dir: &StateDir) -> anyhow::Result<()> {
    let spinner = indicatif::ProgressBar::new_spinner().with_message(format!(
        "Saving the management cluster of {}",
        dir.path.display()
    ));
    spinner.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    spinner.enable_steady_tick(Duration::from_millis(100));
    let saved = management::backup(dir, file).await;
    spinner.finish_and_clear();
    let saved = saved?;
    eprintln!(
        "Saved {} objects as of revision {} and the CA of {} to {}{}",
        saved.objects,
        saved.revision,
        dir.path.display(),
        file.display(),
        if saved.online {
            " (from the running server)"
        } else {
            ""
        }
    );
    eprintln!("It holds every Secret and the CA's key: keep it as you keep those.");
    Ok(())
}

fn restore(file: &std::path::Path, dir: &StateDir) -> anyhow::Result<()> {
    let snapshot = management::restore(file, dir)?;
    eprintln!(
        "Restored {} objects as of revision {} into {}",
        snapshot.objects,
        snapshot.revision,
        dir.path.display()
    );
    eprintln!();
    eprintln!("Next:");
    eprintln!("  capictl management up --dir {}", dir.path.display());
    eprintln!(
        "It is a management cluster of its own: while the one the backup was taken of still runs, it leaves their Clusters alone (they show as Paused, saying why) until that one's claims are released or run out, or `capictl move --take-over` takes them."
    );
    Ok(())
}

/// `flags`: the user's own, repeated in the hint.
async fn status(dir: &StateDir, flags: &str) -> anyhow::Result<()> {
    let Some(info) = dir.running() else {
        println!("Status:  not running");
        println!("State:   {}", dir.path.display());
        println!("Start it with `capictl management up{flags}`.");
        return Ok(());
    };
    let config = kube::config::Kubeconfig::read_from(dir.admin_kubeconfig())?;
    let options = kube::config::KubeConfigOptions::default();
    let client_config = kube::Config::from_custom_kubeconfig(config, &options).await?;
    let client = kube::Client::try_from(client_config)?;
    let request = http::Request::get(crate::apiserver::STATUS_PATH).body(Vec::new())?;
    let answer: serde_json::Value = client
        .request(request)
        .await
        .with_context(|| format!("the management cluster at {} does not answer", info.address))?;
    println!("Status:  running (pid {})", info.pid);
    println!("Address: {}", info.address);
    println!("Since:   {}", info.started_at);
    println!("Objects: {}", answer["objects"]);
    println!("State:   {}", dir.path.display());
    Ok(())
}
