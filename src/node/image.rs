//! What a node image is to the node agent inside it and to the Docker provider that builds and
//! runs it: where capictl lives and how it learns its Kubernetes version.

/// Where capictl lives in a node (the agent is PID 1; `kubeadm`, `crictl` and `ctr` link to it).
pub const NODE_BINARY: &str = "/usr/local/bin/capictl";
/// Where the node agent finds its Kubernetes version.
pub const VERSION_ENV: &str = "CAPICTL_KUBERNETES_VERSION";
/// The Kubernetes version built when none is asked for: the seeds' quick-start.
pub const DEFAULT_VERSION: &str = "v1.28.13";
