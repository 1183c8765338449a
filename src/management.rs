//! Running the embedded management cluster from a state directory: serve in the foreground,
//! start in the background, stop, report, and hand out a kubeconfig for it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kube::config::Kubeconfig;
use serde::{Deserialize, Serialize};

use crate::apiserver::{self, ApiServer, listener, store::Store, tls};
use crate::pki::{KeyPairPem, Pki};
use crate::reconcile::claim;
use crate::reconcile::metrics::ClientMetricsLayer;

/// The default name of the kubeconfig context for the embedded cluster.
pub const DEFAULT_CONTEXT: &str = "capictl-management";

#[derive(Debug, thiserror::Error)]
pub enum ManagementError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] crate::pki::PkiError),
    #[error(transparent)]
    KubeconfigFile(#[from] crate::kubeconfig::KubeconfigError),
    #[error("opening the store in {path}: {source}")]
    Store {
        path: PathBuf,
        source: apiserver::store::StoreError,
    },
    #[error(
        "connecting to etcd at {endpoints}: {source}; check that it runs and the endpoints are right"
    )]
    Etcd {
        endpoints: String,
        source: apiserver::store::StoreError,
    },
    #[error(transparent)]
    Audit(#[from] apiserver::audit::AuditError),
    #[error("starting the API server: {0}")]
    Start(#[from] apiserver::status::ApiError),
    #[error("cannot listen on {address}: {source}")]
    Listen {
        address: String,
        source: std::io::Error,
    },
    #[error(
        "the kubeconfig {path} cannot be read: {message}; fix or move it, or pass --kubeconfig"
    )]
    Kubeconfig { path: PathBuf, message: String },
    #[error("the management cluster in {dir} did not start within {seconds}s; its log is {log}")]
    StartTimeout {
        dir: PathBuf,
        seconds: u64,
        log: PathBuf,
    },
    #[error("the management cluster in {dir} could not start:\n{reason}\n(its log is {log})")]
    StartFailed {
        dir: PathBuf,
        reason: String,
        log: PathBuf,
    },
    #[error("the management cluster (pid {pid}) did not stop within {seconds}s")]
    StopTimeout { pid: u32, seconds: u64 },
    #[error("{0} is already serving this directory")]
    Busy(String),
    #[error(
        "the management cluster of {dir} is running (pid {pid}); stop it first (capictl management down --dir {dir}), or restore into another directory"
    )]
    RestoreWhileRunning { dir: PathBuf, pid: u32 },
    #[error(
        "{dir} already holds a management cluster's objects ({store}); restore into a new directory (--dir), or move this one away first"
    )]
    RestoreOverState { dir: PathBuf, store: PathBuf },
    #[error(
        "{dir} has a CA ({ca}) other than the backup's; restore into a new directory, or the clients' kubeconfigs of one of the two stop working"
    )]
    RestoreOverOtherCa { dir: PathBuf, ca: PathBuf },
    #[error("{file} is not a capictl management backup: {source}")]
    NotABackup {
        file: PathBuf,
        source: apiserver::store::StoreError,
    },
    #[error(
        "{dir} holds no management cluster state to back up (no {store}); a management cluster on etcd is backed up while one of its servers runs, or with etcdctl snapshot save"
    )]
    NothingToBackUp { dir: PathBuf, store: PathBuf },
    #[error("the management cluster at {address} did not send its snapshot: {message}")]
    SnapshotRefused { address: String, message: String },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ManagementError + '_ {
    move |source| ManagementError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where a management cluster keeps its state.
#[derive(Clone, Debug)]
pub struct StateDir {
    pub path: PathBuf,
}

/// What a running server records about itself in its state directory.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunInfo {
    pub pid: u32,
    pub address: String,
    pub started_at: String,
}

impl StateDir {
    /// `$XDG_DATA_HOME/capictl/management`, else `~/.local/share/capictl/management`.
    pub fn default_path() -> PathBuf {
        let data = std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| home().join(".local/share"));
        data.join("capictl/management")
    }

    pub fn new(path: Option<PathBuf>) -> StateDir {
        StateDir {
            path: path.unwrap_or_else(StateDir::default_path),
        }
    }

    pub fn store(&self) -> PathBuf {
        self.path.join("state.redb")
    }

    pub fn run_info_path(&self) -> PathBuf {
        self.path.join("server.json")
    }

    pub fn log(&self) -> PathBuf {
        self.path.join("server.log")
    }

    /// The kubeconfig the server writes for itself, with the admin's client certificate.
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.path.join("admin.kubeconfig")
    }

    fn last_address(&self) -> PathBuf {
        self.path.join("address")
    }

    /// The running server's record, if a live process owns it.
    pub fn running(&self) -> Option<RunInfo> {
        let text = std::fs::read_to_string(self.run_info_path()).ok()?;
        let info: RunInfo = serde_json::from_str(&text).ok()?;
        process_alive(info.pid).then_some(info)
    }

    fn create(&self) -> Result<(), ManagementError> {
        std::fs::create_dir_all(&self.path).map_err(io(&self.path))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o700))
            .map_err(io(&self.path))
    }
}

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

fn process_alive(pid: u32) -> bool {
    // Signal 0 checks that the process exists without touching it. A killed server is no
    // longer running from the moment it is killed, though it exists a little longer: with
    // SIGKILL pending or exiting (a loaded machine can take a while to get there; `management
    // up` right after a `kill -9` saw it and started nothing), or as a zombie its parent
    // (`management up`, gone) left to an init that does not reap, as in many containers.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    !going_away(&stat, &status) && unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

/// Whether a process, by its `/proc/<pid>/stat` and `/proc/<pid>/status`, is a zombie, is
/// exiting (`PF_EXITING`), or has SIGKILL pending.
fn going_away(stat: &str, status: &str) -> bool {
    const PF_EXITING: u64 = 0x4;
    const SIGKILL_BIT: u64 = 1 << (libc::SIGKILL - 1);
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let zombie = fields
        .first()
        .is_some_and(|state| matches!(*state, "Z" | "X"));
    let exiting = fields
        .get(6)
        .and_then(|flags| flags.parse::<u64>().ok())
        .is_some_and(|flags| flags & PF_EXITING != 0);
    let killed = status.lines().any(|line| {
        ["SigPnd:", "ShdPnd:"].iter().any(|field| {
            line.strip_prefix(field)
                .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
                .is_some_and(|mask| mask & SIGKILL_BIT != 0)
        })
    });
    zombie || exiting || killed
}

/// The kubeconfig file a command writes to: the flag, else the first of $KUBECONFIG, else
/// `~/.kube/config`.
pub fn kubeconfig_path(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| {
        std::env::var_os("KUBECONFIG")
            .and_then(|v| std::env::split_paths(&v).find(|p| !p.as_os_str().is_empty()))
    })
    .unwrap_or_else(|| home().join(".kube/config"))
}

/// A kubeconfig with one cluster, user and context, all named after the context.
pub fn kubeconfig(context: &str, server: &str, ca_pem: &str, client: &KeyPairPem) -> Kubeconfig {
    crate::kubeconfig::build(
        context,
        &format!("{context}-admin"),
        context,
        server,
        ca_pem,
        client,
    )
}

/// What `serve` needs to know.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub dir: StateDir,
    /// `host:port`; port 0 means the port this directory used last, else a free one.
    pub listen: String,
    /// Where to merge a context for this cluster; `None` writes only the admin kubeconfig.
    pub kubeconfig: Option<PathBuf>,
    pub context: String,
    /// etcd to keep objects in instead of the embedded store.
    pub etcd_endpoints: Vec<String>,
    /// The CA, client certificate and key for etcd over TLS.
    pub etcd_tls: Option<[PathBuf; 3]>,
    pub audit: AuditOptions,
    pub limits: Limits,
    /// More names and addresses for the serving certificate (a load balancer's, a DNS name),
    /// beside localhost and the listening address.
    pub tls_sans: Vec<String>,
    /// Run the cluster autoscaler with the controllers.
    pub autoscaler: bool,
}

/// What one client may cost the server (kube-apiserver's `--request-timeout`, and a bound on
/// the watch history's memory that kube-apiserver does not have).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// How long a request may take to send its body.
    pub request_timeout: Duration,
    /// The bytes of past events kept for watches to resume from, across every resource.
    pub watch_history_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            request_timeout: apiserver::DEFAULT_REQUEST_TIMEOUT,
            watch_history_bytes: apiserver::store::DEFAULT_HISTORY_BYTES,
        }
    }
}

impl Limits {
    /// These limits as `management serve` flags.
    fn args(&self) -> Vec<String> {
        vec![
            format!("--request-timeout={}s", self.request_timeout.as_secs_f64()),
            format!("--watch-history-mb={}", self.watch_history_bytes >> 20),
        ]
    }
}

/// The audit log's policy, place and rotation (kube-apiserver's `--audit-*` flags).
#[derive(Clone, Debug)]
pub struct AuditOptions {
    /// An `audit.k8s.io/v1` Policy; every request at Metadata without one.
    pub policy_file: Option<PathBuf>,
    /// Where the log goes: `None` for `audit.log` in the state directory, an empty path for
    /// no log.
    pub log_path: Option<PathBuf>,
    /// Rotate at this many megabytes.
    pub max_size_mb: u64,
    /// Keep this many rotated files.
    pub max_backups: usize,
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            policy_file: None,
            log_path: None,
            max_size_mb: 100,
            max_backups: 3,
        }
    }
}

impl AuditOptions {
    /// The log of the management cluster in `dir`, or None when turned off.
    fn open(&self, dir: &StateDir) -> Result<Option<apiserver::audit::AuditLog>, ManagementError> {
        let path = match &self.log_path {
            Some(p) if p.as_os_str().is_empty() => return Ok(None),
            Some(p) => p.clone(),
            None => dir.path.join("audit.log"),
        };
        let policy = match &self.policy_file {
            Some(file) => apiserver::audit::Policy::read(file)?,
            None => apiserver::audit::Policy::default(),
        };
        let options = apiserver::audit::LogOptions {
            path,
            max_size: self.max_size_mb.max(1) * 1024 * 1024,
            max_backups: self.max_backups,
        };
        Ok(Some(apiserver::audit::AuditLog::open(policy, options)?))
    }

    /// These options as `management serve` flags.
    fn args(&self) -> Vec<std::ffi::OsString> {
        let mut args: Vec<std::ffi::OsString> = Vec::new();
        if let Some(file) = &self.policy_file {
            args.extend(["--audit-policy-file".into(), file.clone().into()]);
        }
        if let Some(path) = &self.log_path {
            args.extend(["--audit-log-path".into(), path.clone().into()]);
        }
        args.extend([
            "--audit-log-maxsize".into(),
            self.max_size_mb.to_string().into(),
            "--audit-log-maxbackup".into(),
            self.max_backups.to_string().into(),
        ]);
        args
    }
}

/// A running management cluster.
pub struct Running {
    pub server: Arc<ApiServer>,
    pub address: SocketAddr,
    shutdown: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<()>,
    stop_controllers: tokio::sync::oneshot::Sender<()>,
    controllers: tokio::task::JoinHandle<()>,
    system_controllers: tokio::task::JoinHandle<()>,
    /// Signs approved CertificateSigningRequests with the cluster CA, as
    /// kube-controller-manager's signers do.
    certificate_signer: tokio::task::JoinHandle<()>,
    dir: StateDir,
}

impl Running {
    /// Stops the controllers, then serving; finishes the writes in flight and releases the
    /// store.
    pub async fn stop(self) {
        let _ = self.stop_controllers.send(());
        let _ = self.controllers.await;
        self.system_controllers.abort();
        let _ = self.system_controllers.await;
        self.certificate_signer.abort();
        let _ = self.certificate_signer.await;
        let _ = self.shutdown.send(());
        let _ = self.task.await;
        let _ = std::fs::remove_file(self.dir.run_info_path());
    }
}

async fn bind(dir: &StateDir, listen: &str) -> Result<tokio::net::TcpListener, ManagementError> {
    let listen_error = |source| ManagementError::Listen {
        address: listen.to_string(),
        source,
    };
    let wanted: SocketAddr = listen.parse().map_err(|_| {
        listen_error(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "expected host:port, e.g. 127.0.0.1:6443",
        ))
    })?;
    if wanted.port() == 0
        && let Ok(last) = std::fs::read_to_string(dir.last_address())
        && let Ok(last) = last.trim().parse::<SocketAddr>()
        && last.ip() == wanted.ip()
        && let Ok(listener) = tokio::net::TcpListener::bind(last).await
    {
        return Ok(listener);
    }
    tokio::net::TcpListener::bind(wanted)
        .await
        .map_err(listen_error)
}

/// How long a start waits for a store file that another process still holds: a server that
/// was killed lets go of it only once it has exited, and a supervisor (or a user) may start
/// the next one before that.
const STORE_LOCK_WAIT: Duration = Duration::from_secs(10);

/// Opens the embedded store at `path`, waiting up to [`STORE_LOCK_WAIT`] while another process
/// still holds it.
async fn open_store(path: &Path) -> Result<Store, ManagementError> {
    let deadline = std::time::Instant::now() + STORE_LOCK_WAIT;
    let mut said = false;
    loop {
        match Store::open(path) {
            Err(apiserver::store::StoreError::Locked(_))
                if std::time::Instant::now() < deadline =>
            {
                if !said {
                    tracing::warn!(
                        store = %path.display(),
                        "the store is held by another process (a server still exiting?); waiting up to {}s",
                        STORE_LOCK_WAIT.as_secs()
                    );
                    said = true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            opened => {
                return opened.map_err(|source| ManagementError::Store {
                    path: path.to_path_buf(),
                    source,
                });
            }
        }
    }
}

/// Starts the management cluster of `options.dir` in this process.
pub async fn start(options: &ServeOptions) -> Result<Running, ManagementError> {
    let dir = &options.dir;
    dir.create()?;
    if let Some(info) = dir.running()
        && info.pid != std::process::id()
    {
        return Err(ManagementError::Busy(format!(
            "process {} ({})",
            info.pid, info.address
        )));
    }
    let store = if options.etcd_endpoints.is_empty() {
        open_store(&dir.store()).await?
    } else {
        let etcd_error = |source| ManagementError::Etcd {
            endpoints: options.etcd_endpoints.join(","),
            source,
        };
        let tls = match &options.etcd_tls {
            Some([ca, cert, key]) => {
                Some(apiserver::store::EtcdTls::from_files(ca, cert, key).map_err(etcd_error)?)
            }
            None => None,
        };
        Store::etcd(&options.etcd_endpoints, tls.as_ref())
            .await
            .map_err(etcd_error)?
    };
    // A bad policy stops the start before anything is served.
    let audit = options.audit.open(dir)?;
    store.set_history_limit(options.limits.watch_history_bytes);
    let server = ApiServer::start(store, apiserver::authz::Authorization::Rbac).await?;
    server.set_request_timeout(options.limits.request_timeout);
    if let Some(log) = audit {
        server.enable_audit(log);
    }
    crate::webhooks::register(&server.admission);
    crate::webhooks::conversion::register(&server);
    // The management cluster has no Service network; kubeadm's default range's first address.
    apiserver::ensure_kubernetes_service(&server).await;
    let system_controllers = server.start_system_controllers().await;
    let listener = bind(dir, &options.listen).await?;
    let address = listener.local_addr().map_err(io(&dir.path))?;
    std::fs::write(dir.last_address(), address.to_string()).map_err(io(&dir.last_address()))?;

    let pki = Pki::load_or_create(&dir.path)?;
    let mut hosts = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if !address.ip().is_unspecified() {
        hosts.push(address.ip().to_string());
    }
    hosts.extend(options.tls_sans.iter().cloned());
    hosts.dedup();
    let serving = pki.serving_certificate(&hosts)?;
    let config = tls::server_config(&pki.ca.cert, &serving)?;
    let admin = pki.client_certificate("capictl-admin", &["system:masters"])?;
    let host = if address.ip().is_unspecified() {
        "127.0.0.1".to_string()
    } else {
        address.ip().to_string()
    };
    let url = format!(
        "https://{}",
        SocketAddr::new(host.parse().expect("an IP address"), address.port())
    );
    let own = kubeconfig(&options.context, &url, &pki.ca.cert, &admin);
    crate::pki::write_private(
        &dir.admin_kubeconfig(),
        crate::kubeconfig::to_yaml(&own)?.as_bytes(),
    )
    .map_err(io(&dir.admin_kubeconfig()))?;
    if let Some(path) = &options.kubeconfig {
        crate::kubeconfig::merge(path, &own)?;
    }

    let certificate_signer = tokio::spawn(apiserver::csr::run(
        kube::Client::new(apiserver::local_router(server.clone()), "default"),
        pki.clone(),
    ));
    let (tx, rx) = tokio::sync::oneshot::channel();
    let router = apiserver::router(server.clone());
    let task = tokio::spawn(listener::serve(listener, router, config, async {
        let _ = rx.await;
    }));
    // The controllers of the providers installed here run in this process; on etcd, in one of
    // the processes serving it at a time.
    let shared_store = !options.etcd_endpoints.is_empty();
    let (stop_controllers, controllers_stopped) = tokio::sync::oneshot::channel();
    let options = crate::manager::Options {
        autoscaler: options.autoscaler,
        ..Default::default()
    };
    server.metrics.register(|r| options.metrics.register(r));
    let local = kube::Client::new(
        tower::ServiceBuilder::new()
            .layer(ClientMetricsLayer::new(options.metrics.clone()))
            .service(apiserver::controller_router(server.clone())),
        "default",
    );
    let stopped = async {
        let _ = controllers_stopped.await;
    };
    let controllers = if shared_store {
        tokio::spawn(lead_controllers(local, options, stopped))
    } else {
        tokio::spawn(crate::manager::run(local, options, stopped))
    };
    let info = RunInfo {
        pid: std::process::id(),
        address: url,
        started_at: apiserver::object::now(),
    };
    std::fs::write(
        dir.run_info_path(),
        serde_json::to_vec_pretty(&info).expect("JSON"),
    )
    .map_err(io(&dir.run_info_path()))?;
    Ok(Running {
        server,
        address,
        shutdown: tx,
        task,
        stop_controllers,
        controllers,
        system_controllers,
        certificate_signer,
        dir: dir.clone(),
    })
}

/// The Lease that the servers of one management cluster on etcd elect the one that runs the
/// providers' controllers with: several `management serve` processes share the objects, and
/// two sets of controllers reconciling them would make every Machine twice.
pub const CONTROLLERS_LEASE: &str = "capictl-management-controllers";

/// Runs the providers' controllers while this server holds [`CONTROLLERS_LEASE`] (in
/// `kube-system`), until `stop` resolves; after losing it, waits to lead again with fresh
/// controllers and caches.
async fn lead_controllers(
    client: kube::Client,
    options: crate::manager::Options,
    stop: impl std::future::Future<Output = ()>,
) {
    use crate::reconcile::leader::{self, LeaderElection, Term, Timings};
    let election = LeaderElection::new(
        client.clone(),
        "kube-system",
        CONTROLLERS_LEASE,
        &leader::candidate_identity(),
        Timings::default(),
    );
    let mut stop = std::pin::pin!(stop);
    loop {
        let term = election
            .lead(&mut stop, |stopping| {
                tracing::info!(
                    identity = election.identity(),
                    "leading: running the providers' controllers"
                );
                crate::manager::run(client.clone(), options.clone(), stopping)
            })
            .await;
        if term == Term::Stopped {
            return;
        }
        tracing::warn!(
            identity = election.identity(),
            "lost the controllers' Lease kube-system/{CONTROLLERS_LEASE}; waiting to lead again"
        );
    }
}

/// The files of a state directory a backup keeps beside the objects: the CA that signs the
/// server's and the clients' certificates, so that kubeconfigs keep working after a restore.
const BACKED_UP_FILES: [&str; 2] = ["ca.crt", "ca.key"];

/// What [`backup`] saved.
#[derive(Debug)]
pub struct Backup {
    pub objects: usize,
    pub revision: u64,
    /// Taken from the running server (else from the stopped one's store file).
    pub online: bool,
}

/// Saves the management cluster of `dir` to `file` (0600: it holds every Secret and the CA's
/// key): every object as of one revision, and the CA. From its server while it runs (a
/// consistent snapshot while it keeps serving, on either back end), else from its store file.
/// The backup is read back whole before it takes `file`'s place.
pub async fn backup(dir: &StateDir, file: &Path) -> Result<Backup, ManagementError> {
    use apiserver::store::Snapshot;
    let mut files = Vec::new();
    for name in BACKED_UP_FILES {
        let path = dir.path.join(name);
        if path.exists() {
            files.push((name, std::fs::read(&path).map_err(io(&path))?));
        }
    }
    let files: Vec<(&str, &[u8])> = files.iter().map(|(n, c)| (*n, c.as_slice())).collect();
    let online = dir.running();
    let partial = file.with_extension("partial");
    let store_error = |source| ManagementError::Store {
        path: partial.clone(),
        source,
    };
    let taken =
        async {
            match &online {
                Some(info) => download_snapshot(dir, info, &partial).await?,
                None if dir.store().exists() => Snapshot::copy_file(&dir.store(), &partial)
                    .map_err(|source| ManagementError::Store {
                        path: dir.store(),
                        source,
                    })?,
                None => {
                    return Err(ManagementError::NothingToBackUp {
                        dir: dir.path.clone(),
                        store: dir.store(),
                    });
                }
            }
            Snapshot::add_files(&partial, &files).map_err(store_error)?;
            Snapshot::read(&partial).map_err(store_error)
        }
        .await;
    let snapshot = match taken {
        Ok(snapshot) => snapshot,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    std::fs::rename(&partial, file).map_err(io(file))?;
    Ok(Backup {
        objects: snapshot.objects,
        revision: snapshot.revision,
        online: online.is_some(),
    })
}

/// Writes the running server's snapshot ([`apiserver::SNAPSHOT_PATH`]) to `to` (0600), asked
/// for with the admin kubeconfig of `dir`.
async fn download_snapshot(
    dir: &StateDir,
    info: &RunInfo,
    to: &Path,
) -> Result<(), ManagementError> {
    let refused = |message: String| ManagementError::SnapshotRefused {
        address: info.address.clone(),
        message,
    };
    let kubeconfig =
        Kubeconfig::read_from(dir.admin_kubeconfig()).map_err(|e| ManagementError::Kubeconfig {
            path: dir.admin_kubeconfig(),
            message: e.to_string(),
        })?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .map_err(|e| refused(e.to_string()))?;
    let client = kube::Client::try_from(config).map_err(|e| refused(e.to_string()))?;
    let request = http::Request::get(apiserver::SNAPSHOT_PATH)
        .body(Vec::new())
        .expect("a valid request");
    let body = client
        .request_stream(request)
        .await
        .map_err(|e| refused(e.to_string()))?;
    let file = crate::pki::create_private(to).map_err(io(to))?;
    let mut file = futures::io::AllowStdIo::new(file);
    futures::io::copy(body, &mut file)
        .await
        .map_err(|e| refused(e.to_string()))?;
    file.into_inner().sync_all().map_err(io(to))
}

/// Makes `dir` the state of the management cluster saved in `file` ([`backup`]): its objects
/// at the backup's revision and its CA. Refused, changing nothing, while a server runs from
/// `dir`, when `dir` already holds objects, or when its CA differs from the backup's.
pub fn restore(file: &Path, dir: &StateDir) -> Result<apiserver::store::Snapshot, ManagementError> {
    use apiserver::store::Snapshot;
    if let Some(info) = dir.running() {
        return Err(ManagementError::RestoreWhileRunning {
            dir: dir.path.clone(),
            pid: info.pid,
        });
    }
    if dir.store().exists() {
        return Err(ManagementError::RestoreOverState {
            dir: dir.path.clone(),
            store: dir.store(),
        });
    }
    let not_a_backup = |source| ManagementError::NotABackup {
        file: file.to_path_buf(),
        source,
    };
    let snapshot = Snapshot::read(file).map_err(not_a_backup)?;
    // Only the files a backup keeps, by their own names: the backup names no paths.
    let ca: Vec<(PathBuf, &Vec<u8>)> = snapshot
        .files
        .iter()
        .filter(|(name, _)| BACKED_UP_FILES.contains(&name.as_str()))
        .map(|(name, content)| (dir.path.join(name), content))
        .collect();
    for (path, content) in &ca {
        if path.exists() && std::fs::read(path).map_err(io(path))? != **content {
            return Err(ManagementError::RestoreOverOtherCa {
                dir: dir.path.clone(),
                ca: path.clone(),
            });
        }
    }
    dir.create()?;
    let partial = dir.store().with_extension("restoring");
    // The restored management cluster is another one than the backup's, which may still run:
    // it makes an identity of its own, and claims each workload cluster before it touches it.
    let identity = format!(
        "{}{}/{}",
        apiserver::registry::key_prefix("", "configmaps"),
        claim::IDENTITY_NAMESPACE,
        claim::IDENTITY_CONFIGMAP
    );
    let copied = Snapshot::copy_file(file, &partial)
        .and_then(|()| Snapshot::remove_objects(&partial, &[&identity]).map(drop));
    if let Err(source) = copied {
        let _ = std::fs::remove_file(&partial);
        return Err(ManagementError::Store {
            path: partial,
            source,
        });
    }
    for (path, content) in &ca {
        crate::pki::write_private(path, content).map_err(io(path))?;
    }
    std::fs::rename(&partial, dir.store()).map_err(io(&dir.store()))?;
    Ok(snapshot)
}

/// Starts `capictl management serve` for `dir` in the background and waits until it serves.
pub async fn up(
    options: &ServeOptions,
    wait: Duration,
    mut on_wait: impl FnMut(),
) -> Result<(RunInfo, bool), ManagementError> {
    if let Some(info) = options.dir.running() {
        if let Some(path) = &options.kubeconfig {
            let own = Kubeconfig::read_from(options.dir.admin_kubeconfig()).map_err(|e| {
                ManagementError::Kubeconfig {
                    path: options.dir.admin_kubeconfig(),
                    message: e.to_string(),
                }
            })?;
            crate::kubeconfig::merge(path, &own)?;
        }
        return Ok((info, false));
    }
    options.dir.create()?;
    let _ = std::fs::remove_file(options.dir.run_info_path());
    let log_path = options.dir.log();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(io(&log_path))?;
    let exe = std::env::current_exe().map_err(io(Path::new("capictl")))?;
    let mut command = std::process::Command::new(exe);
    command.args([
        "management",
        "serve",
        "--listen",
        &options.listen,
        "--context",
        &options.context,
    ]);
    command.arg("--dir").arg(&options.dir.path);
    command.args(options.audit.args());
    command.args(options.limits.args());
    if !options.tls_sans.is_empty() {
        command.arg("--tls-san").arg(options.tls_sans.join(","));
    }
    if options.autoscaler {
        command.arg("--autoscaler");
    }
    if !options.etcd_endpoints.is_empty() {
        command
            .arg("--etcd-endpoints")
            .arg(options.etcd_endpoints.join(","));
    }
    if let Some([ca, cert, key]) = &options.etcd_tls {
        command
            .arg("--etcd-cafile")
            .arg(ca)
            .arg("--etcd-certfile")
            .arg(cert)
            .arg("--etcd-keyfile")
            .arg(key);
    }
    match &options.kubeconfig {
        Some(path) => command.arg("--kubeconfig").arg(path),
        None => command.arg("--no-kubeconfig"),
    };
    use std::os::unix::process::CommandExt;
    command
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().map_err(io(&log_path))?)
        .stderr(log)
        // Its own process group: a Ctrl-C in this terminal does not stop it.
        .process_group(0);
    // What the server writes from here on is this start's; its last lines say why it failed.
    let log_start = std::fs::metadata(&log_path).map_or(0, |m| m.len());
    let mut child = command.spawn().map_err(io(&options.dir.path))?;
    let deadline = std::time::Instant::now() + wait;
    loop {
        if let Some(info) = options.dir.running() {
            return Ok((info, true));
        }
        if let Ok(Some(_)) = child.try_wait() {
            let written = std::fs::read(&log_path).unwrap_or_default();
            let text =
                String::from_utf8_lossy(written.get(log_start as usize..).unwrap_or_default());
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            let reason = lines[lines.len().saturating_sub(5)..].join("\n");
            return Err(ManagementError::StartFailed {
                dir: options.dir.path.clone(),
                reason,
                log: log_path,
            });
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        on_wait();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(ManagementError::StartTimeout {
        dir: options.dir.path.clone(),
        seconds: wait.as_secs(),
        log: log_path,
    })
}

/// Stops the server of `dir`; `None` when none was running.
pub async fn down(dir: &StateDir, wait: Duration) -> Result<Option<RunInfo>, ManagementError> {
    let Some(info) = dir.running() else {
        return Ok(None);
    };
    unsafe {
        libc::kill(info.pid as libc::pid_t, libc::SIGTERM);
    }
    let deadline = std::time::Instant::now() + wait;
    while process_alive(info.pid) {
        if std::time::Instant::now() > deadline {
            return Err(ManagementError::StopTimeout {
                pid: info.pid,
                seconds: wait.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = std::fs::remove_file(dir.run_info_path());
    Ok(Some(info))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_killed_exiting_or_zombie_server_is_not_running() {
        let stat = |state: &str, flags: u64| {
            format!("4242 (capictl) {state} 1 4242 4242 0 -1 {flags} 120 0 0 0 5 3 0 0 20 0 12 0")
        };
        let status = |shared: &str| {
            format!("Name:\tcapictl\nSigPnd:\t0000000000000000\nShdPnd:\t{shared}\n")
        };
        let quiet = status("0000000000000000");
        assert!(
            !going_away(&stat("S", 4194560), &quiet),
            "a sleeping server runs"
        );
        assert!(
            going_away(&stat("S", 4194560), &status("0000000000000100")),
            "SIGKILL pending"
        );
        assert!(
            !going_away(&stat("S", 4194560), &status("0000000000004000")),
            "SIGTERM is the server's to handle"
        );
        assert!(going_away(&stat("R", 4194564), &quiet), "exiting");
        assert!(going_away(&stat("Z", 4194564), &quiet), "a zombie");
        // A command name with spaces and parentheses does not shift the fields.
        let odd = "4242 (capictl (x) y) S 1 4242 4242 0 -1 4194560 120";
        assert!(!going_away(odd, &quiet));
        // This very process runs.
        assert!(process_alive(std::process::id()));
    }
}
