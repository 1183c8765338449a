//! What a KubeadmControlPlane keeps in step with its version inside the workload cluster, as
//! upstream does: `kube-system/kubeadm-config`'s ClusterConfiguration before Machines of a new
//! version join (kubeadm join reads its `kubernetesVersion` to pick the control plane's
//! version), and, once every Machine is up to date, the image of the kube-proxy DaemonSet and
//! of the CoreDNS Deployment (each skipped with its annotation on the KubeadmControlPlane).
//!
//! The changes are computed by pure functions; `sync_*` read and write the workload cluster.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, PodSpec};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::api::KubeadmControlPlane;
use crate::api::kubeadm_config::ClusterConfiguration;
use crate::reconcile::Result;

/// On a KubeadmControlPlane: leave CoreDNS as it is.
pub const SKIP_COREDNS_ANNOTATION: &str = "controlplane.cluster.x-k8s.io/skip-coredns";
/// On a KubeadmControlPlane: leave kube-proxy as it is.
pub const SKIP_KUBE_PROXY_ANNOTATION: &str = "controlplane.cluster.x-k8s.io/skip-kube-proxy";

const DEFAULT_REPOSITORY: &str = "registry.k8s.io";

/// The ClusterConfiguration `current` with `kubernetesVersion` set to `version` and the image
/// repository, feature gates and DNS image the KubeadmControlPlane's spec sets; None when it
/// already says all that.
pub fn cluster_configuration(
    current: &Value,
    version: &str,
    spec: Option<&ClusterConfiguration>,
) -> Option<Value> {
    let mut desired = current.clone();
    desired["kubernetesVersion"] = json!(version);
    if let Some(spec) = spec {
        if let Some(repository) = &spec.image_repository {
            desired["imageRepository"] = json!(repository);
        }
        if let Some(gates) = &spec.feature_gates {
            desired["featureGates"] = json!(gates);
        }
        if let Some(dns) = &spec.dns {
            if let Some(repository) = &dns.image_repository {
                desired["dns"]["imageRepository"] = json!(repository);
            }
            if let Some(tag) = &dns.image_tag {
                desired["dns"]["imageTag"] = json!(tag);
            }
        }
    }
    (desired != *current).then_some(desired)
}

/// `image` with `tag`, under `repository` when one is given (keeping the image's own name).
pub fn retag(image: &str, repository: Option<&str>, tag: &str) -> String {
    let without_digest = image.split('@').next().unwrap_or(image);
    // A ':' after the last '/' starts the tag; one before it is a registry's port.
    let name_start = without_digest.rfind('/').map_or(0, |i| i + 1);
    let untagged = match without_digest[name_start..].find(':') {
        Some(i) => &without_digest[..name_start + i],
        None => without_digest,
    };
    match repository {
        Some(repository) => {
            let name = &untagged[untagged.rfind('/').map_or(0, |i| i + 1)..];
            format!("{repository}/{name}:{tag}")
        }
        None => format!("{untagged}:{tag}"),
    }
}

/// The kube-proxy image for `version`: the current one re-tagged, under the spec's image
/// repository when it sets one.
pub fn kube_proxy_image(
    current: &str,
    version: &str,
    spec: Option<&ClusterConfiguration>,
) -> String {
    let repository = spec.and_then(|s| s.image_repository.as_deref());
    retag(current, repository, version)
}

/// The CoreDNS image for `version`: the spec's DNS tag, else the one kubeadm installs with that
/// minor version; under the spec's DNS or image repository when one is set.
pub fn coredns_image(current: &str, version: &str, spec: Option<&ClusterConfiguration>) -> String {
    let dns = spec.and_then(|s| s.dns.as_ref());
    let minor = crate::api::common::kubernetes_version(version).map_or(28, |(_, m, _)| m);
    let tag = dns
        .and_then(|d| d.image_tag.clone())
        .unwrap_or_else(|| crate::kubeadm::coredns_tag(minor).to_string());
    let repository = dns.and_then(|d| d.image_repository.clone()).or_else(|| {
        spec.and_then(|s| s.image_repository.clone())
            .filter(|r| r != DEFAULT_REPOSITORY)
    });
    retag(current, repository.as_deref(), &tag)
}

fn cluster_spec(kcp: &KubeadmControlPlane) -> Option<&ClusterConfiguration> {
    kcp.spec
        .kubeadm_config_spec
        .as_ref()?
        .cluster_configuration
        .as_ref()
}

/// Brings `kube-system/kubeadm-config` to the control plane's version (a conflict leaves it to
/// the next reconcile).
pub async fn sync_kubeadm_config(client: &Client, kcp: &KubeadmControlPlane) -> Result<()> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let Some(mut config) = api.get_opt("kubeadm-config").await? else {
        return Ok(());
    };
    let Some(text) = config
        .data
        .as_ref()
        .and_then(|d| d.get("ClusterConfiguration"))
    else {
        return Ok(());
    };
    let current: Value = crate::yaml::from_str(text).map_err(|e| {
        crate::reconcile::Error::Invalid(format!(
            "kube-system/kubeadm-config in the workload cluster holds no valid ClusterConfiguration: {e}"
        ))
    })?;
    let Some(desired) = cluster_configuration(&current, &kcp.spec.version, cluster_spec(kcp))
    else {
        return Ok(());
    };
    let text = crate::yaml::to_string(&desired).expect("a ClusterConfiguration serializes");
    config
        .data
        .get_or_insert_default()
        .insert("ClusterConfiguration".into(), text);
    match api
        .replace("kubeadm-config", &PostParams::default(), &config)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Sets the image of the container named `container` in a Pod template, by a JSON patch that
/// only applies to the spec it was computed from.
async fn set_image<K>(
    api: &Api<K>,
    name: &str,
    pod: Option<&PodSpec>,
    container: &str,
    image: impl Fn(&str) -> String,
) -> Result<()>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let Some(containers) = pod.map(|p| &p.containers) else {
        return Ok(());
    };
    let Some((index, current)) = containers
        .iter()
        .enumerate()
        .find(|(_, c)| c.name == container)
        .and_then(|(i, c)| Some((i, c.image.as_deref()?)))
    else {
        return Ok(());
    };
    let desired = image(current);
    if desired == current {
        return Ok(());
    }
    let path = format!("/spec/template/spec/containers/{index}/image");
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": path, "value": current},
        {"op": "replace", "path": path, "value": desired},
    ]))
    .expect("a JSON patch");
    match api
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
    {
        Ok(_) => Ok(()),
        // Changed under us: the next reconcile computes it again.
        Err(kube::Error::Api(s)) if s.code == 409 || s.code == 422 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Brings kube-proxy and CoreDNS to the control plane's version, unless the
/// KubeadmControlPlane says to leave them; a missing add-on is left missing.
pub async fn sync_addons(client: &Client, kcp: &KubeadmControlPlane) -> Result<()> {
    let version = kcp.spec.version.as_str();
    let spec = cluster_spec(kcp);
    if !kcp.annotations().contains_key(SKIP_KUBE_PROXY_ANNOTATION) {
        let api: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
        if let Some(ds) = api.get_opt("kube-proxy").await? {
            let pod = ds.spec.template.spec.as_ref();
            set_image(&api, "kube-proxy", pod, "kube-proxy", |image| {
                kube_proxy_image(image, version, spec)
            })
            .await?;
        }
    }
    if !kcp.annotations().contains_key(SKIP_COREDNS_ANNOTATION) {
        let api: Api<Deployment> = Api::namespaced(client.clone(), "kube-system");
        if let Some(deployment) = api.get_opt("coredns").await? {
            let pod = deployment.spec.template.spec.as_ref();
            set_image(&api, "coredns", pod, "coredns", |image| {
                coredns_image(image, version, spec)
            })
            .await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(value: Value) -> ClusterConfiguration {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn images_are_retagged_keeping_registry_ports_and_names() {
        for (image, repository, tag, want) in [
            (
                "registry.k8s.io/kube-proxy:v1.28.13",
                None,
                "v1.29.10",
                "registry.k8s.io/kube-proxy:v1.29.10",
            ),
            (
                "mirror.local:5000/kube-proxy:v1.28.13@sha256:abc",
                None,
                "v1.29.10",
                "mirror.local:5000/kube-proxy:v1.29.10",
            ),
            (
                "registry.k8s.io/coredns/coredns:v1.10.1",
                Some("mirror.local:5000/k8s"),
                "v1.11.1",
                "mirror.local:5000/k8s/coredns:v1.11.1",
            ),
            ("kube-proxy", None, "v1.29.10", "kube-proxy:v1.29.10"),
        ] {
            assert_eq!(retag(image, repository, tag), want, "{image}");
        }
    }

    #[test]
    fn coredns_follows_kubeadm_unless_the_spec_pins_it() {
        let current = "registry.k8s.io/coredns/coredns:v1.10.1";
        assert_eq!(
            coredns_image(current, "v1.29.10", None),
            "registry.k8s.io/coredns/coredns:v1.11.1"
        );
        let pinned = spec(json!({"dns": {"imageTag": "v1.11.3"}}));
        assert_eq!(
            coredns_image(current, "v1.29.10", Some(&pinned)),
            "registry.k8s.io/coredns/coredns:v1.11.3"
        );
        let mirrored = spec(json!({"imageRepository": "mirror.local/k8s"}));
        assert_eq!(
            coredns_image(current, "v1.28.13", Some(&mirrored)),
            "mirror.local/k8s/coredns:v1.10.1"
        );
        assert_eq!(
            kube_proxy_image(
                "registry.k8s.io/kube-proxy:v1.28.13",
                "v1.29.10",
                Some(&mirrored)
            ),
            "mirror.local/k8s/kube-proxy:v1.29.10"
        );
    }

    #[test]
    fn the_cluster_configuration_takes_the_version_and_what_the_spec_sets() {
        let current = json!({"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration", "kubernetesVersion": "v1.28.13", "networking": {"serviceSubnet": "10.96.0.0/12"}});
        let desired = cluster_configuration(
            &current,
            "v1.29.10",
            Some(&spec(
                json!({"featureGates": {"EtcdLearnerMode": true}, "dns": {"imageTag": "v1.11.3"}}),
            )),
        )
        .expect("a change");
        assert_eq!(desired["kubernetesVersion"], "v1.29.10");
        assert_eq!(desired["featureGates"]["EtcdLearnerMode"], true);
        assert_eq!(desired["dns"]["imageTag"], "v1.11.3");
        assert_eq!(
            desired["networking"], current["networking"],
            "the rest is kept"
        );
        assert_eq!(
            cluster_configuration(&desired, "v1.29.10", None),
            None,
            "nothing to do"
        );
    }
}
