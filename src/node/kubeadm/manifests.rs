//! The static pod manifests kubeadm writes on a control-plane node (etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler), in kubeadm's shape: the images follow the
//! configuration's `imageRepository` and version, so an upgrade shows in them, and the
//! commands and probes are kubeadm's, which the node agent turns into processes.

use serde_json::{Value, json};

use super::config::{Config, extra_args};
use super::pki::join_host_port;

/// The etcd image tag kubeadm uses when `etcd.local.imageTag` is not set.
pub const ETCD_IMAGE_TAG: &str = "3.5.16-0";
pub const ETCD_CLIENT_PORT: u16 = 2379;
pub const ETCD_PEER_PORT: u16 = 2380;
pub const ETCD_METRICS_PORT: u16 = 2381;
pub const CONTROLLER_MANAGER_PORT: u16 = 10257;
pub const SCHEDULER_PORT: u16 = 10259;

/// The annotation on the etcd mirror Pod that real `kubeadm join` finds etcd by.
pub const ETCD_ADVERTISE_ANNOTATION: &str = "kubeadm.kubernetes.io/etcd.advertise-client-urls";
pub const API_SERVER_ADVERTISE_ANNOTATION: &str =
    "kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint";

/// What the manifests of one node depend on.
#[derive(Clone, Debug)]
pub struct Inputs<'a> {
    pub config: &'a Config,
    pub node_name: &'a str,
    pub address: &'a str,
    pub kubernetes_version: &'a str,
    /// `name=https://ip:2380` of every etcd member, this one included.
    pub initial_cluster: Vec<String>,
    /// Joining an existing etcd cluster rather than starting a new one.
    pub existing_cluster: bool,
    /// etcd's `--initial-cluster-token`: unique per cluster, so that two clusters whose first
    /// members had the same address (Docker reuses addresses) never get the same member and
    /// cluster IDs and never take each other's members for their own.
    pub cluster_token: String,
}

/// `--name=value` flags from kubeadm's defaults, with the user's extra arguments replacing
/// same-named defaults and adding the rest, in order.
fn flags(program: &str, defaults: Vec<(&str, String)>, extra: &Value) -> Vec<String> {
    let mut args: Vec<(String, String)> = defaults
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    for (name, value) in extra_args(extra) {
        match args.iter_mut().find(|(k, _)| *k == name) {
            Some(slot) => slot.1 = value,
            None => args.push((name, value)),
        }
    }
    std::iter::once(program.to_string())
        .chain(args.into_iter().map(|(k, v)| format!("--{k}={v}")))
        .collect()
}

fn probe(host: &str, port: u16, path: &str, scheme: &str, failure_threshold: u32) -> Value {
    json!({
        "failureThreshold": failure_threshold,
        "httpGet": {"host": host, "path": path, "port": port, "scheme": scheme},
        "initialDelaySeconds": 10,
        "periodSeconds": 10,
        "timeoutSeconds": 15,
    })
}

fn host_path(name: &str, path: &str, kind: &str) -> (Value, Value) {
    (
        json!({"name": name, "hostPath": {"path": path, "type": kind}}),
        json!({"name": name, "mountPath": path}),
    )
}

fn pod(
    component: &str,
    image: String,
    command: Vec<String>,
    probes: Value,
    volumes: &[(Value, Value)],
    annotations: Value,
) -> Value {
    let mut container = json!({
        "name": component,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "resources": {"requests": {"cpu": "100m"}},
        "volumeMounts": volumes.iter().map(|(_, m)| m.clone()).collect::<Vec<_>>(),
    });
    for (k, v) in probes.as_object().into_iter().flatten() {
        container[k] = v.clone();
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": component,
            "namespace": "kube-system",
            "labels": {"component": component, "tier": "control-plane"},
            "annotations": annotations,
        },
        "spec": {
            "containers": [container],
            "hostNetwork": true,
            "priority": 2000001000,
            "priorityClassName": "system-node-critical",
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": volumes.iter().map(|(v, _)| v.clone()).collect::<Vec<_>>(),
        },
    })
}

/// The four manifests, by file name.
pub fn control_plane(inputs: &Inputs) -> Vec<(&'static str, Value)> {
    vec![
        ("etcd.yaml", etcd(inputs)),
        ("kube-apiserver.yaml", api_server(inputs)),
        ("kube-controller-manager.yaml", controller_manager(inputs)),
        ("kube-scheduler.yaml", scheduler(inputs)),
    ]
}

fn repository(inputs: &Inputs) -> String {
    inputs.config.str_at("/imageRepository").to_string()
}

fn pki(inputs: &Inputs) -> String {
    inputs.config.str_at("/certificatesDir").to_string()
}

pub fn etcd(inputs: &Inputs) -> Value {
    let pki = pki(inputs);
    let ip = inputs.address;
    let client_url = format!("https://{}", join_host_port(ip, ETCD_CLIENT_PORT));
    let peer_url = format!("https://{}", join_host_port(ip, ETCD_PEER_PORT));
    let data_dir = inputs.config.str_at("/etcd/local/dataDir").to_string();
    let mut defaults = vec![
        ("advertise-client-urls", client_url.clone()),
        ("cert-file", format!("{pki}/etcd/server.crt")),
        ("client-cert-auth", "true".into()),
        ("data-dir", data_dir.clone()),
        // etcd 3.4's names for what kubeadm passes as feature gates to 3.5.
        ("experimental-initial-corrupt-check", "true".into()),
        ("experimental-watch-progress-notify-interval", "5s".into()),
        ("initial-advertise-peer-urls", peer_url.clone()),
        ("initial-cluster", inputs.initial_cluster.join(",")),
        ("key-file", format!("{pki}/etcd/server.key")),
        (
            "listen-client-urls",
            format!("https://127.0.0.1:{ETCD_CLIENT_PORT},{client_url}"),
        ),
        (
            "listen-metrics-urls",
            format!("http://127.0.0.1:{ETCD_METRICS_PORT}"),
        ),
        ("listen-peer-urls", peer_url),
        ("name", inputs.node_name.to_string()),
        ("peer-cert-file", format!("{pki}/etcd/peer.crt")),
        ("peer-client-cert-auth", "true".into()),
        ("peer-key-file", format!("{pki}/etcd/peer.key")),
        ("peer-trusted-ca-file", format!("{pki}/etcd/ca.crt")),
        ("initial-cluster-token", inputs.cluster_token.clone()),
        ("snapshot-count", "10000".into()),
        ("trusted-ca-file", format!("{pki}/etcd/ca.crt")),
    ];
    if inputs.existing_cluster {
        defaults.push(("initial-cluster-state", "existing".into()));
    }
    let tag = inputs.config.str_at("/etcd/local/imageTag").to_string();
    let tag = if tag.is_empty() {
        ETCD_IMAGE_TAG.to_string()
    } else {
        tag
    };
    let health = "/health?exclude=NOSPACE&serializable=true";
    pod(
        "etcd",
        format!("{}/etcd:{tag}", repository(inputs)),
        flags(
            "etcd",
            defaults,
            inputs
                .config
                .cluster
                .pointer("/etcd/local/extraArgs")
                .unwrap_or(&Value::Null),
        ),
        json!({
            "livenessProbe": probe("127.0.0.1", ETCD_METRICS_PORT, health, "HTTP", 8),
            "startupProbe": probe("127.0.0.1", ETCD_METRICS_PORT, health, "HTTP", 24),
        }),
        &[
            host_path("etcd-certs", &format!("{pki}/etcd"), "DirectoryOrCreate"),
            host_path("etcd-data", &data_dir, "DirectoryOrCreate"),
        ],
        json!({ETCD_ADVERTISE_ANNOTATION: client_url}),
    )
}

pub fn api_server(inputs: &Inputs) -> Value {
    let pki = pki(inputs);
    let ip = inputs.address;
    let dns_domain = inputs.config.str_at("/networking/dnsDomain");
    let defaults = vec![
        ("advertise-address", ip.to_string()),
        ("allow-privileged", "true".into()),
        ("authorization-mode", "Node,RBAC".into()),
        ("client-ca-file", format!("{pki}/ca.crt")),
        ("enable-admission-plugins", "NodeRestriction".into()),
        ("enable-bootstrap-token-auth", "true".into()),
        ("etcd-cafile", format!("{pki}/etcd/ca.crt")),
        ("etcd-certfile", format!("{pki}/apiserver-etcd-client.crt")),
        ("etcd-keyfile", format!("{pki}/apiserver-etcd-client.key")),
        (
            "etcd-servers",
            format!("https://127.0.0.1:{ETCD_CLIENT_PORT}"),
        ),
        (
            "kubelet-client-certificate",
            format!("{pki}/apiserver-kubelet-client.crt"),
        ),
        (
            "kubelet-client-key",
            format!("{pki}/apiserver-kubelet-client.key"),
        ),
        (
            "proxy-client-cert-file",
            format!("{pki}/front-proxy-client.crt"),
        ),
        (
            "proxy-client-key-file",
            format!("{pki}/front-proxy-client.key"),
        ),
        (
            "requestheader-client-ca-file",
            format!("{pki}/front-proxy-ca.crt"),
        ),
        ("secure-port", super::config::API_SERVER_PORT.to_string()),
        (
            "service-account-issuer",
            format!("https://kubernetes.default.svc.{dns_domain}"),
        ),
        ("service-account-key-file", format!("{pki}/sa.pub")),
        ("service-account-signing-key-file", format!("{pki}/sa.key")),
        (
            "service-cluster-ip-range",
            inputs
                .config
                .str_at("/networking/serviceSubnet")
                .to_string(),
        ),
        ("tls-cert-file", format!("{pki}/apiserver.crt")),
        ("tls-private-key-file", format!("{pki}/apiserver.key")),
    ];
    let port = super::config::API_SERVER_PORT;
    pod(
        "kube-apiserver",
        format!(
            "{}/kube-apiserver:{}",
            repository(inputs),
            inputs.kubernetes_version
        ),
        flags(
            "kube-apiserver",
            defaults,
            inputs
                .config
                .cluster
                .pointer("/apiServer/extraArgs")
                .unwrap_or(&Value::Null),
        ),
        json!({
            "livenessProbe": probe(ip, port, "/livez", "HTTPS", 8),
            "readinessProbe": probe(ip, port, "/readyz", "HTTPS", 3),
            "startupProbe": probe(ip, port, "/livez", "HTTPS", 24),
        }),
        &[
            host_path("ca-certs", "/etc/ssl/certs", "DirectoryOrCreate"),
            host_path("k8s-certs", &pki, "DirectoryOrCreate"),
        ],
        json!({API_SERVER_ADVERTISE_ANNOTATION: join_host_port(ip, port)}),
    )
}

pub fn controller_manager(inputs: &Inputs) -> Value {
    let pki = pki(inputs);
    let conf = "/etc/kubernetes/controller-manager.conf".to_string();
    let defaults = vec![
        ("authentication-kubeconfig", conf.clone()),
        ("authorization-kubeconfig", conf.clone()),
        ("bind-address", "127.0.0.1".into()),
        ("client-ca-file", format!("{pki}/ca.crt")),
        (
            "cluster-name",
            inputs.config.str_at("/clusterName").to_string(),
        ),
        ("cluster-signing-cert-file", format!("{pki}/ca.crt")),
        ("cluster-signing-key-file", format!("{pki}/ca.key")),
        ("controllers", "*,bootstrapsigner,tokencleaner".into()),
        ("kubeconfig", conf.clone()),
        ("leader-elect", "true".into()),
        (
            "requestheader-client-ca-file",
            format!("{pki}/front-proxy-ca.crt"),
        ),
        ("root-ca-file", format!("{pki}/ca.crt")),
        ("service-account-private-key-file", format!("{pki}/sa.key")),
        ("use-service-account-credentials", "true".into()),
    ];
    pod(
        "kube-controller-manager",
        format!(
            "{}/kube-controller-manager:{}",
            repository(inputs),
            inputs.kubernetes_version
        ),
        flags(
            "kube-controller-manager",
            defaults,
            inputs
                .config
                .cluster
                .pointer("/controllerManager/extraArgs")
                .unwrap_or(&Value::Null),
        ),
        json!({
            "livenessProbe": probe("127.0.0.1", CONTROLLER_MANAGER_PORT, "/healthz", "HTTPS", 8),
            "startupProbe": probe("127.0.0.1", CONTROLLER_MANAGER_PORT, "/healthz", "HTTPS", 24),
        }),
        &[
            host_path("k8s-certs", &pki, "DirectoryOrCreate"),
            host_path("kubeconfig", &conf, "FileOrCreate"),
        ],
        json!({}),
    )
}

pub fn scheduler(inputs: &Inputs) -> Value {
    let conf = "/etc/kubernetes/scheduler.conf".to_string();
    let defaults = vec![
        ("authentication-kubeconfig", conf.clone()),
        ("authorization-kubeconfig", conf.clone()),
        ("bind-address", "127.0.0.1".into()),
        ("kubeconfig", conf.clone()),
        ("leader-elect", "true".into()),
    ];
    pod(
        "kube-scheduler",
        format!(
            "{}/kube-scheduler:{}",
            repository(inputs),
            inputs.kubernetes_version
        ),
        flags(
            "kube-scheduler",
            defaults,
            inputs
                .config
                .cluster
                .pointer("/scheduler/extraArgs")
                .unwrap_or(&Value::Null),
        ),
        json!({
            "livenessProbe": probe("127.0.0.1", SCHEDULER_PORT, "/healthz", "HTTPS", 8),
            "startupProbe": probe("127.0.0.1", SCHEDULER_PORT, "/healthz", "HTTPS", 24),
        }),
        &[host_path("kubeconfig", &conf, "FileOrCreate")],
        json!({}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_follow_the_configuration() {
        let config = super::super::config::parse(
            "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\nimageRepository: registry.example\netcd:\n  local:\n    extraArgs:\n      snapshot-count: '500'\n      quota-backend-bytes: '8589934592'\napiServer:\n  extraArgs:\n    v: '2'\n---\napiVersion: kubeadm.k8s.io/v1beta3\nkind: InitConfiguration\n",
        )
        .unwrap();
        let inputs = Inputs {
            config: &config,
            node_name: "cp-1",
            address: "172.18.0.5",
            kubernetes_version: "v1.28.13",
            initial_cluster: vec!["cp-1=https://172.18.0.5:2380".into()],
            existing_cluster: false,
            cluster_token: "c-0123".into(),
        };
        let all = control_plane(&inputs);
        let names: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "etcd.yaml",
                "kube-apiserver.yaml",
                "kube-controller-manager.yaml",
                "kube-scheduler.yaml"
            ]
        );
        let etcd = &all[0].1;
        let command: Vec<&str> = etcd["spec"]["containers"][0]["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        assert_eq!(command[0], "etcd");
        assert!(
            command.contains(&"--snapshot-count=500"),
            "the user's value replaces the default: {command:?}"
        );
        assert!(!command.contains(&"--snapshot-count=10000"));
        assert!(command.contains(&"--quota-backend-bytes=8589934592"));
        assert!(command.contains(&"--initial-cluster=cp-1=https://172.18.0.5:2380"));
        assert!(command.contains(&"--initial-cluster-token=c-0123"));
        assert!(
            !command
                .iter()
                .any(|c| c.starts_with("--initial-cluster-state"))
        );
        assert_eq!(
            etcd["metadata"]["annotations"][ETCD_ADVERTISE_ANNOTATION],
            "https://172.18.0.5:2379"
        );
        let api = &all[1].1;
        assert_eq!(
            api["spec"]["containers"][0]["image"],
            "registry.example/kube-apiserver:v1.28.13"
        );
        assert_eq!(
            api["metadata"]["labels"],
            json!({"component": "kube-apiserver", "tier": "control-plane"})
        );
        assert!(
            api["spec"]["containers"][0]["command"]
                .as_array()
                .unwrap()
                .contains(&json!("--v=2"))
        );
        let joining = Inputs {
            existing_cluster: true,
            ..inputs.clone()
        };
        let etcd = etcd_command(&super::etcd(&joining));
        assert!(etcd.contains(&"--initial-cluster-state=existing".to_string()));
    }

    fn etcd_command(pod: &Value) -> Vec<String> {
        pod["spec"]["containers"][0]["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect()
    }
}
