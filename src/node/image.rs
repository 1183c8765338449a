//! What a node image is to the node agent inside it and to the Docker provider that builds and
//! runs it: where capictl lives and how it learns its Kubernetes version.

/// Where capictl lives in a node (the agent is PID 1; `kubeadm`, `crictl` and `ctr` link to it).
pub const NODE_BINARY: &str = "/usr/local/bin/capictl";
/// Where the node agent finds its Kubernetes version.
pub const VERSION_ENV: &str = "CAPICTL_KUBERNETES_VERSION";
/// The Kubernetes version built when none is asked for: the seeds' quick-start.
pub const DEFAULT_VERSION: &str = "v1.28.13";
/// Where the Docker provider mounts the host's Docker Engine socket in capictl's node
/// containers, for the kubelet to run Pods on (never mounted into a Pod).
pub const ENGINE_SOCKET: &str = "/capictl/docker.sock";
/// On every container and volume the kubelet makes for a Pod: the node container it runs for,
/// so that removing a node removes its Pods' containers too.
pub const POD_NODE_LABEL: &str = "io.x-k8s.capictl.pod-node";
/// capictl's owner label on the Docker provider's containers, and on the Pods' containers a
/// node runs: `<namespace>/<cluster>`, so that clusters of one name in two namespaces (or a kind
/// cluster) never share containers.
pub const OWNER_LABEL: &str = "io.x-k8s.capictl.cluster";
