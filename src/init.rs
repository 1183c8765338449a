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

    /// Whether its manager serves webhooks on a real management cluster: admission for its
    /// kinds, or conversion of its CRDs that serve v1beta1 too.
    pub fn serves_webhooks(&self) -> bool {
        self.webhook_targets().next().is_some()
            || self
                .crds
                .crds()
                .iter()
                .any(|crd| crd.spec.conversion.is_some())
    }

    /// Its CRDs, those that convert between versions sent to its webhook Service in
    /// `namespace` (`/convert`), as upstream's CRDs are.
    pub fn crds(&self, namespace: &str) -> Vec<Value> {
        self.crds
            .crds()
            .into_iter()
            .map(|crd| {
                let mut crd = serde_json::to_value(crd).expect("CRDs serialize");
                if crd["spec"]["conversion"]["strategy"] == "Webhook" {
                    crd["spec"]["conversion"]["webhook"]["clientConfig"] = json!({"service": {
                        "name": self.webhook_service(), "namespace": namespace,
                        "path": "/convert", "port": 443,
                    }});
                }
                crd
            })
            .collect()
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
    json!({(crate::api::CLUSTERCTL_LABEL): "", (crate::api::PROVIDER_LABEL): p.label()})
}

/// The templates of `templates/provider/`, embedded at build time.
mod template {
    pub const NAMESPACE: &str = include_str!("../templates/provider/namespace.yaml");
    pub const MANAGER: &str = include_str!("../templates/provider/manager.yaml");
    pub const WEBHOOKS: &str = include_str!("../templates/provider/webhooks.yaml");
    pub const WEBHOOK: &str = include_str!("../templates/provider/webhook.yaml");
}

/// Renders one of the provider templates with clusterctl's variable rules. The templates are
/// part of the binary and the variables all come from here, so a failure is a bug in capictl.
fn render(template: &str, variables: &[(&str, &str)]) -> Vec<Value> {
    let parsed = crate::envsubst::Template::parse(template).expect("provider templates parse");
    let text = parsed
        .render(&|name| {
            variables
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        })
        .expect("provider templates name only the variables init sets");
    crate::yaml::from_multiple(&text).expect("provider templates are YAML")
}

/// The provider's objects, in the order they are installed. `workloads` adds RBAC and the
/// Deployment (left out on the embedded management cluster, which runs the controllers itself).
pub fn components(p: &ProviderInfo, image: &str, namespace: &str, workloads: bool) -> Vec<Value> {
    let mut api_groups: Vec<String> = Vec::new();
    for crd in p.crds.crds() {
        if !api_groups.contains(&crd.spec.group) {
            api_groups.push(crd.spec.group);
        }
    }
    let api_groups = serde_json::to_string(&api_groups).expect("strings serialize");
    let variables = [
        ("PROVIDER_NAMESPACE", namespace),
        ("PROVIDER_LABEL", p.label()),
        ("PROVIDER_PREFIX", p.prefix()),
        ("PROVIDER_DEPLOYMENT", p.deployment),
        ("PROVIDER_API_GROUPS", api_groups.as_str()),
        ("MANAGER_IMAGE", image),
    ];
    let mut objects = render(template::NAMESPACE, &variables);
    objects.extend(p.crds(namespace));
    if workloads {
        objects.extend(render(template::MANAGER, &variables));
        if p.crds == CrdSet::Docker {
            for deployment in objects.iter_mut().filter(|o| o["kind"] == "Deployment") {
                reach_the_engine(deployment);
            }
        }
        if p.serves_webhooks() {
            for deployment in objects.iter_mut().filter(|o| o["kind"] == "Deployment") {
                serve_webhooks(p, deployment);
            }
            objects.extend(webhook_objects(p, &variables));
        }
    }
    // As clusterctl does, every component carries the provider's labels.
    for object in &mut objects {
        for (k, v) in labels(p).as_object().expect("labels are a map") {
            object["metadata"]["labels"][k] = v.clone();
        }
    }
    objects
}

/// The port the managers serve admission webhooks on, and where their certificate is mounted
/// (controller-runtime's defaults, which upstream's manifests use).
pub const WEBHOOK_PORT: u16 = 9443;
pub const WEBHOOK_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

/// Makes the manager's Deployment serve the provider's webhooks: the port, and the serving
/// certificate's Secret mounted where the manager reads it.
fn serve_webhooks(p: &ProviderInfo, deployment: &mut Value) {
    let pod = &mut deployment["spec"]["template"]["spec"];
    let container = &mut pod["containers"][0];
    for arg in [
        format!("--webhook-port={WEBHOOK_PORT}"),
        format!("--webhook-cert-dir={WEBHOOK_CERT_DIR}"),
    ] {
        container["args"]
            .as_array_mut()
            .expect("the manager template has args")
            .push(json!(arg));
    }
    push(
        &mut container["ports"],
        json!({"containerPort": WEBHOOK_PORT, "name": "webhook-server", "protocol": "TCP"}),
    );
    push(
        &mut container["volumeMounts"],
        json!({"mountPath": WEBHOOK_CERT_DIR, "name": "cert", "readOnly": true}),
    );
    push(
        &mut pod["volumes"],
        json!({"name": "cert", "secret": {"secretName": p.webhook_secret()}}),
    );
}

/// Gives the Docker provider's manager the Docker Engine, as upstream's CAPD Deployment has it:
/// the host's Engine socket by hostPath (capictl's nodes give Pods that one hostPath; kind's
/// nodes need it mounted, as upstream's quick-start says). Upstream runs the container
/// privileged; the socket needs less: its owner, root, with every capability still dropped.
fn reach_the_engine(deployment: &mut Value) {
    let socket = crate::api::docker::ENGINE_SOCKET_HOST_PATH;
    let pod = &mut deployment["spec"]["template"]["spec"];
    let container = &mut pod["containers"][0];
    container["securityContext"]["runAsUser"] = json!(0);
    container["securityContext"]["runAsNonRoot"] = json!(false);
    push(
        &mut container["volumeMounts"],
        json!({"mountPath": socket, "name": "dockersock"}),
    );
    push(
        &mut pod["volumes"],
        json!({"name": "dockersock", "hostPath": {"path": socket, "type": "Socket"}}),
    );
}

/// Appends to a list that may not exist yet.
fn push(list: &mut Value, item: Value) {
    if !list.is_array() {
        *list = json!([]);
    }
    list.as_array_mut().expect("a list").push(item);
}

/// The webhook Service (which the CRDs' conversion also goes to) and the mutating and
/// validating configurations that send the provider's kinds to it. Their caBundle is filled in
/// by [`with_ca_bundle`] once the serving certificate exists.
fn webhook_objects(p: &ProviderInfo, variables: &[(&str, &str)]) -> Vec<Value> {
    let entries = |operation: &str, path: &str| -> Vec<Value> {
        p.webhook_targets()
            .flat_map(|t| {
                let kind = t.kind.to_lowercase();
                let mut v = variables.to_vec();
                v.extend([
                    ("WEBHOOK_OPERATION", operation),
                    ("WEBHOOK_PATH", path),
                    ("WEBHOOK_KIND", kind.as_str()),
                    ("WEBHOOK_GROUP", t.group),
                    ("WEBHOOK_RESOURCE", t.plural),
                ]);
                render(template::WEBHOOK, &v)
            })
            .collect()
    };
    let mut objects = render(template::WEBHOOKS, variables);
    // A provider whose webhook server only converts has no admission configurations.
    let admits = p.webhook_targets().next().is_some();
    objects.retain(|o| admits || o["kind"] == "Service");
    for object in &mut objects {
        match object["kind"].as_str() {
            Some("MutatingWebhookConfiguration") => {
                object["webhooks"] = json!(entries("default", "/mutate"))
            }
            Some("ValidatingWebhookConfiguration") => {
                object["webhooks"] = json!(entries("validation", "/validate"))
            }
            _ => {}
        }
    }
    objects
}

/// The webhook serving certificate's Secret (kubernetes.io/tls, with the CA that signed it in
/// `ca.crt`), for a provider's webhook Service.
pub fn webhook_secret(
    p: &ProviderInfo,
    namespace: &str,
    ca: &str,
    serving: &crate::pki::KeyPairPem,
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

/// Puts the CA that signed the webhook serving certificate into the webhook configurations and
/// the CRDs' conversion webhooks, so the API server trusts the managers' webhooks.
pub fn with_ca_bundle(mut objects: Vec<Value>, ca: &str) -> Vec<Value> {
    use base64::Engine;
    let bundle = base64::engine::general_purpose::STANDARD.encode(ca);
    for object in &mut objects {
        match object["kind"].as_str() {
            Some("MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration") => {
                for webhook in object["webhooks"].as_array_mut().into_iter().flatten() {
                    webhook["clientConfig"]["caBundle"] = json!(bundle);
                }
            }
            Some("CustomResourceDefinition") => {
                let webhook = &mut object["spec"]["conversion"]["webhook"];
                if webhook.is_object() {
                    webhook["clientConfig"]["caBundle"] = json!(bundle);
                }
            }
            _ => {}
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
    fn what_init_installs_for_each_provider() {
        for p in PROVIDERS {
            let mut objects = components(&p, "capictl:v0.1.0", p.namespace, true);
            // The CRDs have snapshots of their own; here only which ones, and their labels.
            for o in objects
                .iter_mut()
                .filter(|o| o["kind"] == "CustomResourceDefinition")
            {
                o["spec"] = json!("(see tests/snapshots/crds__*.snap)");
            }
            let name = format!("components-{}", p.label());
            insta::assert_snapshot!(name, serde_json::to_string_pretty(&objects).unwrap());
        }
    }

    #[test]
    fn unknown_providers_name_the_known_ones() {
        assert_eq!(
            find("InfrastructureProvider", "aws").unwrap_err(),
            "there is no InfrastructureProvider named \"aws\"; capictl has docker, in-memory"
        );
    }
}
