//! kubeadm's own configuration files, rendered from a KubeadmConfigSpec in the API version the
//! Kubernetes version needs: `kubeadm.k8s.io/v1beta3` below 1.31, `v1beta4` from 1.31 (which
//! writes extra arguments as name/value lists instead of maps).

use serde_json::{Map, Value, json};

use crate::api::conversion::go_duration;
use crate::api::kubeadm_config::KubeadmConfigSpec;

/// The kubeadm config API version for a Kubernetes version.
pub fn api_version(kubernetes_version: &str) -> &'static str {
    if crate::api::common::kubernetes_version(kubernetes_version)
        .is_some_and(|(_, minor, _)| minor >= 31)
    {
        "kubeadm.k8s.io/v1beta4"
    } else {
        "kubeadm.k8s.io/v1beta3"
    }
}

/// Rewrites `[{name, value}]` argument lists as maps for v1beta3, at the places kubeadm has them.
fn args_as_maps(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if matches!(key.as_str(), "extraArgs" | "kubeletExtraArgs")
                    && let Some(list) = v.as_array()
                {
                    let as_map: Map<String, Value> = list
                        .iter()
                        .filter_map(|a| Some((a["name"].as_str()?.to_string(), a["value"].clone())))
                        .collect();
                    *v = Value::Object(as_map);
                } else {
                    args_as_maps(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(args_as_maps),
        _ => {}
    }
}

fn document(api_version: &str, kind: &str, body: Option<Value>) -> Value {
    let mut doc = body.filter(Value::is_object).unwrap_or_else(|| json!({}));
    doc["apiVersion"] = json!(api_version);
    doc["kind"] = json!(kind);
    if api_version.ends_with("v1beta3") {
        args_as_maps(&mut doc);
    }
    doc
}

/// The certificate settings as kubeadm's API version has them, as upstream converts them:
/// v1beta4 takes the lifetimes as durations (`certificateValidityPeriod: 8760h0m0s`); v1beta3
/// has none of the lifetimes nor `encryptionAlgorithm`, so they are left out.
fn certificate_settings(cluster: &mut Value, api_version: &str) {
    let Some(fields) = cluster.as_object_mut() else {
        return;
    };
    let v1beta4 = api_version.ends_with("v1beta4");
    for (days, duration) in [
        ("certificateValidityPeriodDays", "certificateValidityPeriod"),
        (
            "caCertificateValidityPeriodDays",
            "caCertificateValidityPeriod",
        ),
    ] {
        if let Some(days) = fields.remove(days).and_then(|d| d.as_i64())
            && v1beta4
        {
            let seconds = days * 24 * 3600;
            fields.insert(duration.into(), json!(go_duration(seconds)));
        }
    }
    if !v1beta4 {
        fields.remove("encryptionAlgorithm");
    }
}

/// The files kubeadm reads on the first control-plane machine: ClusterConfiguration and
/// InitConfiguration, as one multi-document YAML.
pub fn init_config(
    spec: &KubeadmConfigSpec,
    kubernetes_version: &str,
    cluster_name: &str,
    endpoint: &str,
) -> String {
    let api = api_version(kubernetes_version);
    let mut cluster = document(
        api,
        "ClusterConfiguration",
        serde_json::to_value(&spec.cluster_configuration).ok(),
    );
    certificate_settings(&mut cluster, api);
    cluster["kubernetesVersion"] = json!(kubernetes_version);
    cluster["clusterName"] = json!(cluster_name);
    if cluster.get("controlPlaneEndpoint").is_none() {
        cluster["controlPlaneEndpoint"] = json!(endpoint);
    }
    let init = document(
        api,
        "InitConfiguration",
        serde_json::to_value(&spec.init_configuration).ok(),
    );
    crate::yaml::to_multiple(&[cluster, init]).expect("kubeadm configuration serializes")
}

/// The file kubeadm reads to join: JoinConfiguration with the bootstrap token discovery.
pub fn join_config(
    spec: &KubeadmConfigSpec,
    kubernetes_version: &str,
    endpoint: &str,
    token: &str,
    ca_cert_hash: &str,
    control_plane: bool,
) -> String {
    let api = api_version(kubernetes_version);
    let mut join = document(
        api,
        "JoinConfiguration",
        serde_json::to_value(&spec.join_configuration).ok(),
    );
    let discovery = &mut join["discovery"];
    if !discovery.is_object() {
        *discovery = json!({});
    }
    // What the user left out of bootstrap-token discovery is filled in, as upstream does.
    if discovery.get("file").is_none() {
        let bootstrap = discovery
            .as_object_mut()
            .expect("made an object above")
            .entry("bootstrapToken")
            .or_insert_with(|| json!({}));
        for (field, value) in [
            ("apiServerEndpoint", json!(endpoint)),
            ("token", json!(token)),
            ("caCertHashes", json!([ca_cert_hash])),
        ] {
            if bootstrap.get(field).is_none() {
                bootstrap[field] = value;
            }
        }
    }
    if control_plane && join.get("controlPlane").is_none() {
        join["controlPlane"] = json!({});
    }
    crate::yaml::to_multiple(&[join]).expect("kubeadm configuration serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> KubeadmConfigSpec {
        serde_json::from_value(json!({
            "clusterConfiguration": {"apiServer": {"certSANs": ["localhost"], "extraArgs": [{"name": "v", "value": "2"}]}},
            "initConfiguration": {"nodeRegistration": {"kubeletExtraArgs": [{"name": "eviction-hard", "value": "nodefs.available<0%"}]}},
            "joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": [{"name": "eviction-hard", "value": "nodefs.available<0%"}]}}
        }))
        .unwrap()
    }

    #[test]
    fn api_version_follows_the_kubernetes_version() {
        assert_eq!(api_version("v1.28.13"), "kubeadm.k8s.io/v1beta3");
        assert_eq!(api_version("v1.30.0"), "kubeadm.k8s.io/v1beta3");
        assert_eq!(api_version("v1.31.0"), "kubeadm.k8s.io/v1beta4");
    }

    #[test]
    fn v1beta3_writes_arguments_as_maps_and_v1beta4_as_lists() {
        let old: Vec<Value> =
            crate::yaml::from_multiple(&init_config(&spec(), "v1.28.13", "c", "10.0.0.1:6443"))
                .unwrap();
        assert_eq!(old[0]["kind"], "ClusterConfiguration");
        assert_eq!(old[0]["apiServer"]["extraArgs"], json!({"v": "2"}));
        assert_eq!(old[0]["apiServer"]["certSANs"], json!(["localhost"]));
        assert_eq!(old[0]["controlPlaneEndpoint"], "10.0.0.1:6443");
        assert_eq!(old[0]["kubernetesVersion"], "v1.28.13");
        assert_eq!(
            old[1]["nodeRegistration"]["kubeletExtraArgs"],
            json!({"eviction-hard": "nodefs.available<0%"})
        );
        let new: Vec<Value> =
            crate::yaml::from_multiple(&init_config(&spec(), "v1.31.2", "c", "e:6443")).unwrap();
        assert_eq!(new[0]["apiVersion"], "kubeadm.k8s.io/v1beta4");
        assert_eq!(
            new[0]["apiServer"]["extraArgs"],
            json!([{"name": "v", "value": "2"}])
        );
    }

    #[test]
    fn certificate_settings_follow_the_kubeadm_api_version() {
        let mut spec = spec();
        let cluster = spec.cluster_configuration.as_mut().unwrap();
        cluster.certificate_validity_period_days = Some(30);
        cluster.ca_certificate_validity_period_days = Some(3650);
        cluster.encryption_algorithm =
            Some(crate::api::kubeadm_config::EncryptionAlgorithm::Rsa3072);
        let new: Vec<Value> =
            crate::yaml::from_multiple(&init_config(&spec, "v1.31.2", "c", "e:6443")).unwrap();
        assert_eq!(new[0]["certificateValidityPeriod"], "720h0m0s");
        assert_eq!(new[0]["caCertificateValidityPeriod"], "87600h0m0s");
        assert_eq!(new[0]["encryptionAlgorithm"], "RSA-3072");
        assert!(new[0].get("certificateValidityPeriodDays").is_none());
        // What is written is what the node's kubeadm makes its certificates with.
        let node =
            crate::node::kubeadm::config::parse(&init_config(&spec, "v1.31.2", "c", "e:6443"))
                .unwrap();
        assert_eq!(
            node.certificate_policy().unwrap(),
            crate::pki::CertificatePolicy {
                key: crate::pki::KeyAlgorithm::Rsa(3072),
                days: 30,
                ca_days: 3650
            }
        );
        let old: Vec<Value> =
            crate::yaml::from_multiple(&init_config(&spec, "v1.30.4", "c", "e:6443")).unwrap();
        for field in [
            "certificateValidityPeriod",
            "certificateValidityPeriodDays",
            "caCertificateValidityPeriod",
            "encryptionAlgorithm",
        ] {
            assert!(old[0].get(field).is_none(), "{field} in v1beta3");
        }
    }

    #[test]
    fn joins_discover_the_cluster_with_a_bootstrap_token() {
        let docs: Vec<Value> = crate::yaml::from_multiple(&join_config(
            &spec(),
            "v1.29.10",
            "10.0.0.1:6443",
            "abcdef.0123456789abcdef",
            "sha256:00",
            true,
        ))
        .unwrap();
        let join = &docs[0];
        assert_eq!(join["kind"], "JoinConfiguration");
        assert_eq!(
            join["discovery"]["bootstrapToken"]["token"],
            "abcdef.0123456789abcdef"
        );
        assert_eq!(
            join["discovery"]["bootstrapToken"]["caCertHashes"],
            json!(["sha256:00"])
        );
        assert_eq!(join["controlPlane"], json!({}));
        let mut with_token = spec();
        with_token.join_configuration.as_mut().unwrap().discovery =
            serde_json::from_value(json!({"bootstrapToken": {"token": "kept00.0123456789abcdef"}}))
                .unwrap();
        let docs: Vec<Value> = crate::yaml::from_multiple(&join_config(
            &with_token,
            "v1.29.10",
            "10.0.0.1:6443",
            "abcdef.0123456789abcdef",
            "sha256:00",
            false,
        ))
        .unwrap();
        let bootstrap = &docs[0]["discovery"]["bootstrapToken"];
        assert_eq!(
            bootstrap["token"], "kept00.0123456789abcdef",
            "the spec's token is kept"
        );
        assert_eq!(bootstrap["apiServerEndpoint"], "10.0.0.1:6443");
        assert!(docs[0].get("controlPlane").is_none());
    }
}
