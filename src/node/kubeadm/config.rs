//! kubeadm's configuration as `kubeadm init --config` and `kubeadm join --config` read it:
//! the YAML documents the KubeadmConfig controller writes (`kubeadm.k8s.io/v1beta3` or
//! `v1beta4`; extra arguments as maps or as name/value lists), CAPD's appended
//! KubeProxyConfiguration ignored, kubeadm's defaults filled in.

use serde_json::{Value, json};

use crate::node::{NodeError, Result};
use crate::pki::CertificatePolicy;

/// The defaults kubeadm gives a ClusterConfiguration.
pub const DEFAULT_SERVICE_SUBNET: &str = "10.96.0.0/12";
pub const DEFAULT_DNS_DOMAIN: &str = "cluster.local";
pub const DEFAULT_IMAGE_REPOSITORY: &str = "registry.k8s.io";
pub const DEFAULT_CERTIFICATES_DIR: &str = "/etc/kubernetes/pki";
pub const API_SERVER_PORT: u16 = 6443;

/// What `kubeadm init` or `kubeadm join` was asked to do.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The ClusterConfiguration, defaulted (init only; a join reads it from the cluster).
    pub cluster: Value,
    /// InitConfiguration or JoinConfiguration.
    pub node: Value,
    pub api_version: String,
}

/// A node's registration: its name, taints, labels and extra kubelet arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    pub name: String,
    /// None: kubeadm's default (control planes get the control-plane NoSchedule taint).
    pub taints: Option<Vec<Value>>,
    pub kubelet_args: Vec<(String, String)>,
}

/// Extra arguments as kubeadm writes them: a map (v1beta3) or `[{name, value}]` (v1beta4).
pub fn extra_args(value: &Value) -> Vec<(String, String)> {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    match value {
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), text(v))).collect(),
        Value::Array(list) => list
            .iter()
            .filter_map(|a| Some((a["name"].as_str()?.to_string(), text(&a["value"]))))
            .collect(),
        _ => Vec::new(),
    }
}

/// Reads the documents of a kubeadm configuration file.
pub fn parse(text: &str) -> Result<Config> {
    let docs: Vec<Value> = crate::yaml::from_multiple(text)
        .map_err(|e| NodeError::Config(format!("the kubeadm configuration is not YAML: {e}")))?;
    let find = |kind: &str| {
        docs.iter()
            .find(|d| {
                d["kind"] == kind
                    && d["apiVersion"]
                        .as_str()
                        .is_some_and(|v| v.starts_with("kubeadm.k8s.io/"))
            })
            .cloned()
    };
    let node = find("InitConfiguration")
        .or_else(|| find("JoinConfiguration"))
        .ok_or_else(|| {
            NodeError::Config(
                "the kubeadm configuration has neither an InitConfiguration nor a JoinConfiguration".into(),
            )
        })?;
    let api_version = node["apiVersion"].as_str().unwrap_or_default().to_string();
    if !matches!(
        api_version.as_str(),
        "kubeadm.k8s.io/v1beta3" | "kubeadm.k8s.io/v1beta4"
    ) {
        return Err(NodeError::Config(format!(
            "kubeadm configuration {api_version} is not supported: write kubeadm.k8s.io/v1beta3 or v1beta4"
        )));
    }
    let mut cluster = find("ClusterConfiguration")
        .unwrap_or_else(|| json!({"apiVersion": api_version, "kind": "ClusterConfiguration"}));
    default_cluster(&mut cluster);
    Ok(Config {
        cluster,
        node,
        api_version,
    })
}

/// kubeadm's defaults for what the ClusterConfiguration leaves out.
pub fn default_cluster(cluster: &mut Value) {
    let defaults = [
        ("/networking/serviceSubnet", json!(DEFAULT_SERVICE_SUBNET)),
        ("/networking/dnsDomain", json!(DEFAULT_DNS_DOMAIN)),
        ("/imageRepository", json!(DEFAULT_IMAGE_REPOSITORY)),
        ("/certificatesDir", json!(DEFAULT_CERTIFICATES_DIR)),
        ("/clusterName", json!("kubernetes")),
        ("/etcd/local/dataDir", json!("/var/lib/etcd")),
    ];
    for (pointer, value) in defaults {
        let missing = cluster
            .pointer(pointer)
            .is_none_or(|v| v.is_null() || v == "");
        if missing {
            set_pointer(cluster, pointer, value);
        }
    }
}

fn set_pointer(target: &mut Value, pointer: &str, value: Value) {
    let mut at = target;
    let parts: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        if !at.is_object() {
            *at = json!({});
        }
        if i + 1 == parts.len() {
            at[*part] = value;
            return;
        }
        at = at
            .as_object_mut()
            .expect("made an object")
            .entry(part.to_string())
            .or_insert_with(|| json!({}));
    }
}

impl Config {
    pub fn is_join(&self) -> bool {
        self.node["kind"] == "JoinConfiguration"
    }

    /// A join of another control plane (`controlPlane` is set).
    pub fn is_control_plane_join(&self) -> bool {
        self.is_join() && self.node.get("controlPlane").is_some_and(|c| !c.is_null())
    }

    /// The node's registration; the name is the host's when none is given or when it is an
    /// unrendered cloud-init template (`{{ local_hostname }}`).
    pub fn registration(&self, hostname: &str) -> Registration {
        let reg = &self.node["nodeRegistration"];
        let name = reg["name"]
            .as_str()
            .filter(|n| !n.is_empty() && !n.contains("{{"))
            .unwrap_or(hostname)
            .to_string();
        Registration {
            name,
            taints: reg["taints"].as_array().cloned(),
            kubelet_args: extra_args(&reg["kubeletExtraArgs"]),
        }
    }

    /// The address this node's API server advertises: `localAPIEndpoint.advertiseAddress`
    /// (of `controlPlane` on a join), else the node's own.
    pub fn advertise_address(&self, node_ip: &str) -> String {
        let local = if self.is_join() {
            &self.node["controlPlane"]["localAPIEndpoint"]
        } else {
            &self.node["localAPIEndpoint"]
        };
        local["advertiseAddress"]
            .as_str()
            .filter(|a| !a.is_empty())
            .unwrap_or(node_ip)
            .to_string()
    }

    /// `host:port` every node reaches the API servers at; the first control plane's own
    /// address when the cluster names none.
    pub fn control_plane_endpoint(&self, advertise: &str) -> String {
        match self.cluster["controlPlaneEndpoint"]
            .as_str()
            .filter(|e| !e.is_empty())
        {
            Some(e) if e.contains(':') && !e.ends_with(']') => e.to_string(),
            Some(e) => format!("{e}:{API_SERVER_PORT}"),
            None => format!("{advertise}:{API_SERVER_PORT}"),
        }
    }

    /// How kubeadm makes this node's certificates: the ClusterConfiguration's
    /// `encryptionAlgorithm` and `certificateValidityPeriod` (v1beta4; kubeadm's defaults
    /// otherwise, ECDSA P-256 standing in for RSA-2048).
    pub fn certificate_policy(&self) -> Result<CertificatePolicy> {
        let mut policy = CertificatePolicy::default();
        let algorithm = self.str_at("/encryptionAlgorithm");
        if !algorithm.is_empty() {
            policy.key = algorithm.parse().map_err(|e| {
                NodeError::Config(format!("ClusterConfiguration encryptionAlgorithm: {e}"))
            })?;
        }
        for (field, days) in [
            ("certificateValidityPeriod", &mut policy.days),
            ("caCertificateValidityPeriod", &mut policy.ca_days),
        ] {
            let text = self.str_at(&format!("/{field}"));
            if text.is_empty() {
                continue;
            }
            let seconds = crate::api::common::parse_duration(text)
                .filter(|s| *s >= 24.0 * 3600.0)
                .ok_or_else(|| {
                    NodeError::Config(format!(
                        "ClusterConfiguration {field}: {text:?} is not a duration of a day or more, such as 8760h0m0s"
                    ))
                })?;
            *days = (seconds / (24.0 * 3600.0)) as i64;
        }
        Ok(policy)
    }

    pub fn str_at<'a>(&'a self, pointer: &str) -> &'a str {
        self.cluster
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The join's discovery: the endpoint, the token and the pinned CA hashes.
    pub fn discovery(&self) -> Option<Discovery> {
        let b = &self.node["discovery"]["bootstrapToken"];
        Some(Discovery {
            endpoint: b["apiServerEndpoint"].as_str()?.to_string(),
            token: b["token"]
                .as_str()
                .or_else(|| self.node["discovery"]["tlsBootstrapToken"].as_str())?
                .to_string(),
            ca_cert_hashes: b["caCertHashes"]
                .as_array()
                .map(|h| {
                    h.iter()
                        .filter_map(|h| h.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
            skip_ca_verification: b["unsafeSkipCAVerification"] == true,
        })
    }
}

/// How a joining node finds and trusts the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Discovery {
    pub endpoint: String,
    pub token: String,
    pub ca_cert_hashes: Vec<String>,
    pub skip_ca_verification: bool,
}

/// The first address of a service subnet (`10.96.0.0/12` → `10.96.0.1`): the `kubernetes`
/// Service's cluster IP, which the API server's certificate names. The tenth is CoreDNS's.
pub fn service_ip(subnet: &str, offset: u32) -> Option<std::net::Ipv4Addr> {
    let first = subnet.split(',').next()?.trim();
    let (base, _) = first.split_once('/')?;
    let base: std::net::Ipv4Addr = base.parse().ok()?;
    Some(std::net::Ipv4Addr::from(u32::from(base) + offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INIT_V1BETA3: &str = "---\napiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\nclusterName: capi-quickstart\ncontrolPlaneEndpoint: 172.18.0.3:6443\nkubernetesVersion: v1.28.13\napiServer:\n  certSANs: [localhost, 127.0.0.1]\n---\napiVersion: kubeadm.k8s.io/v1beta3\nkind: InitConfiguration\nnodeRegistration:\n  name: '{{ local_hostname }}'\n  kubeletExtraArgs:\n    eviction-hard: nodefs.available<0%\n---\napiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nconntrack:\n  maxPerCore: 0\n";

    #[test]
    fn init_configuration_with_capds_three_documents() {
        let config = parse(INIT_V1BETA3).unwrap();
        assert!(!config.is_join());
        assert_eq!(
            config.str_at("/networking/serviceSubnet"),
            DEFAULT_SERVICE_SUBNET
        );
        assert_eq!(config.str_at("/clusterName"), "capi-quickstart");
        let reg = config.registration("node-1");
        assert_eq!(reg.name, "node-1", "a jinja leftover means the host name");
        assert_eq!(
            reg.kubelet_args,
            vec![(
                "eviction-hard".to_string(),
                "nodefs.available<0%".to_string()
            )]
        );
        assert_eq!(reg.taints, None);
        assert_eq!(config.advertise_address("172.18.0.4"), "172.18.0.4");
        assert_eq!(config.control_plane_endpoint("x"), "172.18.0.3:6443");
    }

    #[test]
    fn the_certificate_policy_comes_from_the_cluster_configuration() {
        let config = parse(INIT_V1BETA3).unwrap();
        assert_eq!(
            config.certificate_policy().unwrap(),
            CertificatePolicy::default()
        );
        let v1beta4 = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nencryptionAlgorithm: ECDSA-P384\ncertificateValidityPeriod: 720h0m0s\ncaCertificateValidityPeriod: 87600h0m0s\n---\napiVersion: kubeadm.k8s.io/v1beta4\nkind: InitConfiguration\n";
        assert_eq!(
            parse(v1beta4).unwrap().certificate_policy().unwrap(),
            CertificatePolicy {
                key: crate::pki::KeyAlgorithm::EcdsaP384,
                days: 30,
                ca_days: 3650
            }
        );
        for (written, wrong, field) in [
            ("ECDSA-P384", "ECDSA-P521", "encryptionAlgorithm"),
            ("720h0m0s", "1h", "certificateValidityPeriod"),
        ] {
            let text = v1beta4.replace(written, wrong);
            let e = parse(&text).unwrap().certificate_policy().unwrap_err();
            let e = e.to_string();
            assert!(e.contains(field) && e.contains(wrong), "{e}");
        }
    }

    #[test]
    fn join_configuration_v1beta4() {
        let text = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: JoinConfiguration\ncontrolPlane:\n  localAPIEndpoint:\n    advertiseAddress: 10.0.0.9\ndiscovery:\n  bootstrapToken:\n    apiServerEndpoint: 10.0.0.1:6443\n    token: abcdef.0123456789abcdef\n    caCertHashes: [\"sha256:aa\"]\nnodeRegistration:\n  name: w1\n  taints: []\n  kubeletExtraArgs:\n  - name: node-labels\n    value: a=b\n";
        let config = parse(text).unwrap();
        assert!(config.is_join() && config.is_control_plane_join());
        let d = config.discovery().unwrap();
        assert_eq!(d.endpoint, "10.0.0.1:6443");
        assert_eq!(d.ca_cert_hashes, vec!["sha256:aa"]);
        let reg = config.registration("h");
        assert_eq!(reg.name, "w1");
        assert_eq!(reg.taints, Some(vec![]), "an empty list means no taints");
        assert_eq!(reg.kubelet_args, vec![("node-labels".into(), "a=b".into())]);
        assert_eq!(config.advertise_address("10.0.0.2"), "10.0.0.9");
    }

    #[test]
    fn bad_configurations_say_what_is_wrong() {
        let err = parse("apiVersion: v1\nkind: ConfigMap\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("InitConfiguration"), "{err}");
        let err = parse("apiVersion: kubeadm.k8s.io/v1beta2\nkind: InitConfiguration\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("v1beta2") && err.contains("v1beta3"), "{err}");
    }

    #[test]
    fn service_ips_count_from_the_subnet() {
        assert_eq!(
            service_ip("10.96.0.0/12", 1).unwrap().to_string(),
            "10.96.0.1"
        );
        assert_eq!(
            service_ip("10.128.0.0/12", 10).unwrap().to_string(),
            "10.128.0.10"
        );
        assert_eq!(service_ip("nonsense", 1), None);
    }
}
