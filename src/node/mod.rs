//! What runs inside a node container made from capictl's node image (see
//! [`image`]; the Docker provider builds it): the node agent as PID 1 ([`agent`]), which supervises the
//! static pods of `/etc/kubernetes/manifests` as kubelet does ([`static_pods`]) and keeps the
//! Node, its Lease and the mirror Pods ([`kubelet`]); `kubeadm init` and `kubeadm join`
//! ([`kubeadm`]), which make kubeadm's certificates, kubeconfigs and manifests and upload what a
//! kubeadm cluster has; the processes the manifests name — real etcd, capictl's API server on
//! it ([`kube_apiserver`]), the controller-manager's and scheduler's loops
//! ([`controller_manager`]); and stand-ins for `crictl` and `ctr` ([`tools`]), so that the
//! Docker provider's exec contract holds for this image as for `kindest/node`.
//!
//! Nothing here needs privileges: etcd, the API server and the agent are ordinary processes.

pub mod agent;
pub mod containers;
pub mod controller_manager;
pub mod dns;
pub mod engine;
pub mod image;
pub mod kube_apiserver;
pub mod kubeadm;
pub mod kubelet;
pub mod node_ports;
pub mod pods;
pub mod probe;
pub mod prober;
pub mod service_proxy;
pub mod static_pods;
pub mod tools;

use std::path::{Path, PathBuf};

/// Where a node keeps its files: kubeadm's layout under a root (`/` in a node container, a
/// temporary directory in tests).
#[derive(Clone, Debug)]
pub struct Layout {
    root: PathBuf,
}

impl Layout {
    pub fn new(root: impl Into<PathBuf>) -> Layout {
        Layout { root: root.into() }
    }

    /// The node's own layout: `/`, or `$CAPICTL_NODE_ROOT` when set.
    pub fn from_env() -> Layout {
        Layout::new(
            std::env::var_os("CAPICTL_NODE_ROOT").map_or_else(|| PathBuf::from("/"), PathBuf::from),
        )
    }

    /// A path under the root (`path` is absolute, as kubeadm writes it).
    pub fn path(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    pub fn kubernetes(&self) -> PathBuf {
        self.path("/etc/kubernetes")
    }

    pub fn pki(&self) -> PathBuf {
        self.path("/etc/kubernetes/pki")
    }

    pub fn manifests(&self) -> PathBuf {
        self.path("/etc/kubernetes/manifests")
    }

    /// kubelet's state: its flags from kubeadm, its configuration.
    pub fn kubelet(&self) -> PathBuf {
        self.path("/var/lib/kubelet")
    }

    /// The agent's state for `crictl` and the Docker provider (on tmpfs: gone on restart).
    pub fn run(&self) -> PathBuf {
        self.path("/run/capictl")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Tls(#[from] crate::pki::PkiError),
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Failed(String),
}

pub type Result<T, E = NodeError> = std::result::Result<T, E>;

pub(crate) fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> NodeError + '_ {
    move |source| NodeError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Writes a file, making its directory, with `mode` (keys and kubeconfigs 0600).
pub(crate) fn write_file(path: &Path, contents: &[u8], mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    }
    if mode == 0o600 {
        crate::pki::write_private(path, contents).map_err(io_error(path))
    } else {
        std::fs::write(path, contents).map_err(io_error(path))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(io_error(path))
    }
}

pub(crate) fn read_file(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(io_error(path))
}

/// This node's IP address: the source address of its default route (a Docker network gives
/// every container one).
pub fn node_ip() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    // Connecting a UDP socket sends nothing; it only picks the route.
    socket.connect("192.0.2.1:9").ok()?;
    Some(socket.local_addr().ok()?.ip()).filter(|ip| !ip.is_loopback() && !ip.is_unspecified())
}

/// This node's host name (a Docker container's is its name).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// The Kubernetes version this node reports (the node image's).
pub fn kubernetes_version() -> String {
    std::env::var(image::VERSION_ENV).unwrap_or_else(|_| image::DEFAULT_VERSION.into())
}
