//! The providers `capictl init` installs and what each one is made of, as clusterctl installs
//! upstream's: a Namespace, the CRDs, RBAC, the controller Deployment (running
//! `capictl manager` for that provider), and the inventory `Provider` object; every object
//! labelled `clusterctl.cluster.x-k8s.io` and `cluster.x-k8s.io/provider`.

use serde_json::{Value, json};

use crate::api::CrdSet;

/// One installable provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderInfo {
    /// `cluster-api`, `kubeadm`, `docker`, `in-memory`.
    pub name: &'static str,
    /// `CoreProvider`, `BootstrapProvider`, `ControlPlaneProvider`, `InfrastructureProvider`.
    pub type_: &'static str,
    pub namespace: &'static str,
    pub deployment: &'static str,
    pub crds: CrdSet,
}

impl ProviderInfo {
    /// The manifest label: `cluster-api`, `bootstrap-kubeadm`, `infrastructure-docker`, …
    pub fn label(&self) -> &'static str {
        self.crds.provider_label()
    }

    /// What its objects' names start with: `capi`, `capi-kubeadm-control-plane`, `capd`, …
    fn prefix(&self) -> &'static str {
        self.deployment.trim_end_matches("-controller-manager")
    }

    /// The kinds its manager's admission webhooks take.
    pub fn webhook_targets(&self) -> impl Iterator<Item = &'static crate::webhooks::WebhookTarget> {
        let set = self.crds;
        crate::webhooks::TARGETS
            .iter()
            .filter(move |t| t.provider == set)
    }

    pub fn webhook_service(&self) -> String {
        format!("{}-webhook-service", self.prefix())
    }

    pub fn webhook_secret(&self) -> String {
        format!("{}-webhook-service-cert", self.prefix())
    }
}

pub const PROVIDERS: [ProviderInfo; 5] = [
    ProviderInfo {
        name: "cluster-api",
        type_: "CoreProvider",
        namespace: "capi-system",
        deployment: "capi-controller-manager",
        crds: CrdSet::Core,
    },
    ProviderInfo {
        name: "kubeadm",
        type_: "BootstrapProvider",
        namespace: "capi-kubeadm-bootstrap-system",
        deployment: "capi-kubeadm-bootstrap-controller-manager",
        crds: CrdSet::KubeadmBootstrap,
    },
    ProviderInfo {
        name: "kubeadm",
        type_: "ControlPlaneProvider",
        namespace: "capi-kubeadm-control-plane-system",
        deployment: "capi-kubeadm-control-plane-controller-manager",
        crds: CrdSet::KubeadmControlPlane,
    },
    ProviderInfo {
        name: "docker",
        type_: "InfrastructureProvider",
        namespace: "capd-system",
        deployment: "capd-controller-manager",
        crds: CrdSet::Docker,
    },
    ProviderInfo {
        name: "in-memory",
        type_: "InfrastructureProvider",
        namespace: "capim-system",
        deployment: "capim-controller-manager",
        crds: CrdSet::InMemory,
    },
];

/// The provider of a type by name, or an error that lists the ones there are.
pub fn find(type_: &str, name: &str) -> Result<ProviderInfo, String> {
    let of_type: Vec<&ProviderInfo> = PROVIDERS.iter().filter(|p| p.type_ == type_).collect();
    of_type
        .iter()
        .find(|p| p.name == name)
        .map(|p| **p)
        .ok_or_else(|| {
            let names: Vec<&str> = of_type.iter().map(|p| p.name).collect();
            format!(
                "there is no {type_} named {name:?}; capictl has {}",
                names.join(", ")
            )
        })
}

fn labels(p: &ProviderInfo) -> Value {
    json!({"clusterctl.cluster.x-k8s.io": "", "cluster.x-k8s.io/provider": p.label()})
}

/// What the provider's controller may touch: its own API groups, the core ones it reads and
/// writes (Secrets, ConfigMaps, Events, Leases), and CRDs for the contract labels.
fn rules(p: &ProviderInfo) -> Value {
    let own_groups: Vec<String> = p.crds.crds().iter().map(|c| c.spec.group.clone()).collect();
    json!([
        {"apiGroups": own_groups, "resources": ["*"], "verbs": ["*"]},
        {"apiGroups": ["cluster.x-k8s.io", "bootstrap.cluster.x-k8s.io", "controlplane.cluster.x-k8s.io", "infrastructure.cluster.x-k8s.io"], "resources": ["*"], "verbs": ["get", "list", "watch", "patch", "update", "create", "delete"]},
        {"apiGroups": [""], "resources": ["secrets", "configmaps", "events", "nodes"], "verbs": ["*"]},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["*"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["*"]},
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get", "list", "watch"]},
    ])
}

/// The provider's objects, in the order they are installed. `workloads` adds RBAC and the
/// Deployment (left out on the embedded management cluster, which runs the controllers itself).
pub fn components(p: &ProviderInfo, image: &str, namespace: &str, workloads: bool) -> Vec<Value> {
    let labels = labels(p);
    let mut objects = vec![json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": namespace, "labels": labels},
    })];
    for crd in p.crds.crds() {
        let mut crd = serde_json::to_value(crd).expect("CRDs serialize");
        for (k, v) in labels.as_object().expect("labels are a map") {
            crd["metadata"]["labels"][k] = v.clone();
        }
        objects.push(crd);
    }
    if !workloads {
        return objects;
    }
    let manager = format!("{}-manager", p.prefix());
    let webhooks = p.webhook_targets().next().is_some();
    let mut container = json!({
        "name": "manager",
        "image": image,
        "command": ["capictl"],
        "args": ["manager", "--providers", p.label(), "--leader-election-namespace", namespace],
        "securityContext": {"allowPrivilegeEscalation": false, "runAsNonRoot": true, "runAsUser": 65532, "capabilities": {"drop": ["ALL"]}},
    });
    let mut volumes = json!([]);
    if webhooks {
        for arg in [
            format!("--webhook-port={WEBHOOK_PORT}"),
            format!("--webhook-cert-dir={WEBHOOK_CERT_DIR}"),
        ] {
            container["args"]
                .as_array_mut()
                .expect("args")
                .push(json!(arg));
        }
        container["ports"] =
            json!([{"containerPort": WEBHOOK_PORT, "name": "webhook-server", "protocol": "TCP"}]);
        container["volumeMounts"] =
            json!([{"mountPath": WEBHOOK_CERT_DIR, "name": "cert", "readOnly": true}]);
        volumes = json!([{"name": "cert", "secret": {"secretName": p.webhook_secret()}}]);
    }
    objects.extend([
        json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "manager", "namespace": namespace, "labels": labels},
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": format!("{manager}-role"), "labels": labels},
            "rules": rules(p),
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": format!("{manager}-rolebinding"), "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("{manager}-role")},
            "subjects": [{"kind": "ServiceAccount", "name": "manager", "namespace": namespace}],
        }),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": p.deployment, "namespace": namespace, "labels": labels},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"cluster.x-k8s.io/provider": p.label(), "control-plane": "controller-manager"}},
                "template": {
                    "metadata": {"labels": {"cluster.x-k8s.io/provider": p.label(), "control-plane": "controller-manager"}},
                    "spec": {
                        "serviceAccountName": "manager",
                        "terminationGracePeriodSeconds": 10,
                        "containers": [container],
                        "volumes": volumes,
                    },
                },
            },
        }),
    ]);
    if webhooks {
        objects.extend(webhook_objects(p, namespace, &labels));
    }
    objects
}

/// The port the managers serve admission webhooks on, and where their certificate is mounted
/// (controller-runtime's defaults, which upstream's manifests use).
pub const WEBHOOK_PORT: u16 = 9443;
pub const WEBHOOK_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

/// The webhook Service and the mutating and validating configurations that send the
/// provider's kinds to it. Their caBundle is filled in by [`with_ca_bundle`] once the
/// serving certificate exists (upstream leaves that to cert-manager's CA injector).
fn webhook_objects(p: &ProviderInfo, namespace: &str, labels: &Value) -> Vec<Value> {
    let service = p.webhook_service();
    let webhooks = |operation: &str, path: &str| -> Vec<Value> {
        p.webhook_targets()
            .map(|t| {
                json!({
                    "name": format!("{operation}.{}.{}", t.kind.to_lowercase(), t.group),
                    "admissionReviewVersions": ["v1"],
                    "clientConfig": {"service": {"name": service, "namespace": namespace, "path": path, "port": 443}},
                    "failurePolicy": "Fail",
                    "matchPolicy": "Equivalent",
                    "sideEffects": "None",
                    "rules": [{
                        "apiGroups": [t.group], "apiVersions": ["v1beta2"],
                        "operations": ["CREATE", "UPDATE"], "resources": [t.plural],
                    }],
                })
            })
            .collect()
    };
    vec![
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": service, "namespace": namespace, "labels": labels},
            "spec": {
                "ports": [{"port": 443, "targetPort": "webhook-server"}],
                "selector": {"cluster.x-k8s.io/provider": p.label(), "control-plane": "controller-manager"},
            },
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": format!("{}-mutating-webhook-configuration", p.prefix()), "labels": labels},
            "webhooks": webhooks("default", "/mutate"),
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": format!("{}-validating-webhook-configuration", p.prefix()), "labels": labels},
            "webhooks": webhooks("validation", "/validate"),
        }),
    ]
}

/// The webhook serving certificate's Secret (kubernetes.io/tls, with the CA that signed it in
/// `ca.crt`), for a provider's webhook Service.
pub fn webhook_secret(
    p: &ProviderInfo,
    namespace: &str,
    ca: &str,
    serving: &crate::apiserver::tls::KeyPairPem,
) -> Value {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": p.webhook_secret(), "namespace": namespace, "labels": labels(p)},
        "data": {"tls.crt": b64(&serving.cert), "tls.key": b64(&serving.key), "ca.crt": b64(ca)},
    })
}

/// The DNS names the webhook Service answers to inside the cluster.
pub fn webhook_hosts(p: &ProviderInfo, namespace: &str) -> Vec<String> {
    let service = p.webhook_service();
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
    ]
}

/// Puts the CA that signed the webhook serving certificate into the webhook configurations, so
/// the API server trusts the managers' webhooks.
pub fn with_ca_bundle(mut objects: Vec<Value>, ca: &str) -> Vec<Value> {
    use base64::Engine;
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca);
    for object in objects.iter_mut().filter(|o| {
        matches!(
            o["kind"].as_str(),
            Some("MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration")
        )
    }) {
        for webhook in object["webhooks"].as_array_mut().into_iter().flatten() {
            webhook["clientConfig"]["caBundle"] = json!(bundle);
        }
    }
    objects
}

/// The inventory entry clusterctl keeps for an installed provider.
pub fn inventory(p: &ProviderInfo, version: &str, namespace: &str) -> Value {
    json!({
        "apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3", "kind": "Provider",
        "metadata": {
            "name": p.label(), "namespace": namespace,
            "labels": {"clusterctl.cluster.x-k8s.io": "", "cluster.x-k8s.io/provider": p.label(), "clusterctl.cluster.x-k8s.io/core": "inventory"},
        },
        "providerName": p.name, "type": p.type_, "version": version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_object_carries_the_provider_labels() {
        let p = find("InfrastructureProvider", "docker").unwrap();
        let objects = components(&p, "capictl:v0.1.0", "capd-system", true);
        assert_eq!(objects[0]["kind"], "Namespace");
        for o in &objects {
            assert_eq!(
                o["metadata"]["labels"]["cluster.x-k8s.io/provider"], "infrastructure-docker",
                "{o}"
            );
            assert_eq!(
                o["metadata"]["labels"]["clusterctl.cluster.x-k8s.io"], "",
                "{o}"
            );
        }
        let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
        assert_eq!(deployment["metadata"]["name"], "capd-controller-manager");
        assert_eq!(
            deployment["spec"]["template"]["spec"]["containers"][0]["name"],
            "manager"
        );
        assert_eq!(
            components(&p, "i", "capd-system", false)
                .iter()
                .filter(|o| o["kind"] == "Deployment")
                .count(),
            0
        );
    }

    #[test]
    fn unknown_providers_name_the_known_ones() {
        assert_eq!(
            find("InfrastructureProvider", "aws").unwrap_err(),
            "there is no InfrastructureProvider named \"aws\"; capictl has docker, in-memory"
        );
    }
}
