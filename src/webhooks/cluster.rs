//! The Cluster's rules: its network and references, and a managed topology judged against
//! its class and what is stored (upstream's `internal/webhooks/cluster.go`).

use serde_json::Value;

use crate::api::common::kubernetes_version;
use crate::apiserver::admission::{Admission, Operation, Request};
use crate::apiserver::status::{ApiError, FieldCause};

use super::refuse_with;

/// upstream's Cluster webhook checks, beside what the schema says.
pub(super) struct ClusterRules;

/// `10.0.0.0/8` or `fd00::/108` as an address and a prefix length no longer than it allows.
fn parse_cidr(block: &str) -> Option<std::net::IpAddr> {
    let (address, prefix) = block.split_once('/')?;
    let address: std::net::IpAddr = address.parse().ok()?;
    let prefix: u8 = prefix.parse().ok().filter(|_| prefix.len() <= 3)?;
    let bits = if address.is_ipv4() { 32 } else { 128 };
    (prefix <= bits).then_some(address)
}

/// What is wrong with a Cluster, given its old self on updates: CIDR blocks that do not parse
/// or are not one family (or one of each, dual-stack), and references whose kind changed.
pub fn cluster_causes(object: &Value, old: Option<&Value>) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    for network in ["pods", "services"] {
        let path = format!("spec.clusterNetwork.{network}.cidrBlocks");
        let blocks = object["spec"]["clusterNetwork"][network]["cidrBlocks"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut families = Vec::new();
        for (i, block) in blocks.iter().enumerate() {
            let text = block.as_str().unwrap_or_default();
            match parse_cidr(text) {
                Some(address) => families.push(address.is_ipv4()),
                None => causes.push(FieldCause::invalid(
                    format!("{path}[{i}]"),
                    format!(
                        "Invalid value: {text:?}: invalid CIDR address: {text}; use an address and a prefix length, like 192.168.0.0/16 or fd00::/64"
                    ),
                )),
            }
        }
        let dual_stack = families.len() == 2 && families[0] != families[1];
        if families.len() == blocks.len() && blocks.len() > 1 && !dual_stack {
            causes.push(FieldCause::invalid(
                path,
                "Invalid value: more than one CIDR block is dual-stack: exactly one IPv4 and one IPv6 block",
            ));
        }
    }
    causes.extend(topology_causes(object, old));
    if let Some(old) = old {
        for reference in ["infrastructureRef", "controlPlaneRef"] {
            let before = &old["spec"][reference];
            let after = &object["spec"][reference];
            let kind_of = |r: &Value| (r["apiGroup"].clone(), r["kind"].clone());
            if before.is_object() && kind_of(before) != kind_of(after) {
                causes.push(FieldCause::forbidden(
                    format!("spec.{reference}"),
                    "apiGroup and kind cannot be changed once set; the Cluster's objects of that kind would be abandoned",
                ));
            }
        }
    }
    causes
}

/// A managed topology's checks: a class and a Kubernetes version, MachineDeployment and
/// variable names each once, the topology kept once set, and its version moving up one minor
/// at a time.
fn topology_causes(object: &Value, old: Option<&Value>) -> Vec<FieldCause> {
    let topology = &object["spec"]["topology"];
    let old_topology = old.map(|o| &o["spec"]["topology"]);
    let mut causes = Vec::new();
    if !topology.is_object() {
        if old_topology.is_some_and(Value::is_object) {
            causes.push(FieldCause::forbidden(
                "spec.topology",
                "cannot be removed from an existing Cluster: its objects are managed through it",
            ));
        }
        return causes;
    }
    if topology["classRef"]["name"]
        .as_str()
        .is_none_or(str::is_empty)
    {
        causes.push(FieldCause::required("spec.topology.classRef.name"));
    }
    let version = topology["version"].as_str().unwrap_or_default();
    let parsed = kubernetes_version(version);
    if parsed.is_none() {
        causes.push(FieldCause::invalid(
            "spec.topology.version",
            format!(
                "Invalid value: {version:?}: version must be a valid semantic version, like v1.30.4"
            ),
        ));
    }
    let unique = |list: &Value, path: &str, causes: &mut Vec<FieldCause>| {
        let names: Vec<&str> = list
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| i["name"].as_str().unwrap_or_default())
            .collect();
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                causes.push(FieldCause::invalid(
                    format!("{path}[{i}].name"),
                    format!("Invalid value: {name:?}: name must be unique"),
                ));
            }
        }
    };
    unique(
        &topology["workers"]["machineDeployments"],
        "spec.topology.workers.machineDeployments",
        &mut causes,
    );
    unique(
        &topology["variables"],
        "spec.topology.variables",
        &mut causes,
    );
    let before = old_topology
        .and_then(|t| t["version"].as_str())
        .and_then(kubernetes_version);
    if let (Some(from), Some(to)) = (before, parsed) {
        let show = |v: (u64, u64, u64)| format!("v{}.{}.{}", v.0, v.1, v.2);
        if to < from {
            causes.push(FieldCause::invalid(
                "spec.topology.version",
                format!(
                    "Invalid value: {version:?}: version cannot be decreased from {:?} to {:?}",
                    show(from),
                    show(to)
                ),
            ));
        } else if to.0 > from.0 || to.1 > from.1 + 1 {
            causes.push(FieldCause::invalid(
                "spec.topology.version",
                format!(
                    "Invalid value: {version:?}: version cannot be increased from {:?} to {:?}: one minor at a time, so upgrade to v{}.{}.x first",
                    show(from),
                    show(to),
                    from.0,
                    from.1 + 1
                ),
            ));
        }
    }
    causes
}

impl Admission for ClusterRules {
    fn name(&self) -> &str {
        "cluster.cluster.x-k8s.io"
    }

    fn handles(&self, group: &str, kind: &str) -> bool {
        group == "cluster.x-k8s.io" && kind == "Cluster"
    }

    fn validate(&self, request: &Request<'_>, object: &Value) -> Result<Vec<String>, ApiError> {
        let mut causes = cluster_causes(object, request.old);
        let mut warnings = Vec::new();
        if let Some(lookup) = request.lookup
            && object["spec"]["topology"].is_object()
            && request.operation != Operation::Delete
        {
            let namespace = request.namespace.unwrap_or("default");
            let stored = topology_against_stored(lookup, namespace, object, request.old);
            if stored.cancelled {
                causes.retain(|c| !c.message.contains("version cannot be decreased"));
            }
            // A class that lists its versions upgrades through them: any of them is reachable.
            if stored.chained {
                causes.retain(|c| !c.message.contains("one minor at a time"));
            }
            causes.extend(stored.causes);
            warnings.extend(stored.warnings);
        }
        let mut out = refuse_with(request, causes)?;
        out.extend(warnings);
        Ok(out)
    }
}

/// Skips the checks of a topology version change against the Cluster's parts (upstream's).
const DISABLE_UPDATE_VERSION_CHECK_ANNOTATION: &str =
    "unsafe.topology.cluster.x-k8s.io/disable-update-version-check";

/// What the checks against the stored objects found.
#[derive(Default)]
struct StoredChecks {
    causes: Vec<FieldCause>,
    warnings: Vec<String>,
    /// The change goes back to the version every part still runs: a cancelled upgrade,
    /// allowed.
    cancelled: bool,
    /// The class lists its Kubernetes versions: the version must be one of them, and an
    /// upgrade may cross several minors (a chained upgrade).
    chained: bool,
}

/// A managed topology judged by what is stored, as upstream's webhook reads it: its class
/// (a warning when missing), its variables and MachineDeployment classes against the class,
/// its version among the class's `kubernetesVersions` when it lists them, and a version change
/// only once every part has reached the current version.
fn topology_against_stored(
    lookup: &dyn crate::apiserver::admission::Lookup,
    namespace: &str,
    object: &Value,
    old: Option<&Value>,
) -> StoredChecks {
    use crate::topology::variables;
    let topology = &object["spec"]["topology"];
    let (mut causes, mut warnings) = (Vec::new(), Vec::new());
    let mut chained = false;
    let class_name = topology["classRef"]["name"].as_str().unwrap_or_default();
    let class_namespace = topology["classRef"]["namespace"]
        .as_str()
        .filter(|n| !n.is_empty())
        .unwrap_or(namespace);
    match lookup.get("cluster.x-k8s.io", "ClusterClass", class_namespace, class_name) {
        None => warnings.push(format!(
            "Cluster refers to ClusterClass {class_namespace}/{class_name}, but this ClusterClass does not exist. Cluster topology has not been fully validated. The ClusterClass must be created to reconcile the Cluster"
        )),
        Some(class) => {
            let class: crate::api::ClusterClass = match serde_json::from_value(class) {
                Ok(c) => c,
                Err(_) => return StoredChecks::default(),
            };
            let class_versions = class.spec.kubernetes_versions.clone().unwrap_or_default();
            if !class_versions.is_empty() {
                chained = true;
                let version = topology["version"].as_str().unwrap_or_default();
                if !class_versions.iter().any(|v| v == version) {
                    causes.push(FieldCause::invalid(
                        "spec.topology.version",
                        format!("Invalid value: {version:?}: version must match one of the versions defined in the ClusterClass"),
                    ));
                }
            }
            let definitions = class
                .status
                .as_ref()
                .and_then(|s| s.variables.clone())
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| variables::of_class(&class.spec));
            let given = |v: &Value| -> Vec<crate::api::cluster::ClusterVariable> {
                serde_json::from_value(v.clone()).unwrap_or_default()
            };
            if let Err(c) = variables::resolve(&definitions, &given(&topology["variables"]), "spec.topology.variables") {
                causes.extend(c);
            }
            if let Err(c) = variables::overrides(
                &definitions,
                &given(&topology["controlPlane"]["variables"]["overrides"]),
                "spec.topology.controlPlane.variables.overrides",
            ) {
                causes.extend(c);
            }
            let workers = class.spec.workers.as_ref();
            let deployment_classes: Vec<&str> = workers
                .and_then(|w| w.machine_deployments.as_ref())
                .into_iter()
                .flatten()
                .map(|c| c.class.as_str())
                .collect();
            let pool_classes: Vec<&str> = workers
                .and_then(|w| w.machine_pools.as_ref())
                .into_iter()
                .flatten()
                .map(|c| c.class.as_str())
                .collect();
            for (list, kind, classes) in [
                ("machineDeployments", "MachineDeployment", deployment_classes),
                ("machinePools", "MachinePool", pool_classes),
            ] {
                for (i, worker) in topology["workers"][list].as_array().into_iter().flatten().enumerate() {
                    let at = format!("spec.topology.workers.{list}[{i}]");
                    let worker_class = worker["class"].as_str().unwrap_or_default();
                    if !classes.contains(&worker_class) {
                        causes.push(FieldCause::invalid(
                            format!("{at}.class"),
                            format!(
                                "Invalid value: {worker_class:?}: {kind} class {worker_class:?} is not defined in ClusterClass {class_namespace}/{class_name}; it has: {}",
                                classes.join(", ")
                            ),
                        ));
                    }
                    if let Err(c) = variables::overrides(&definitions, &given(&worker["variables"]["overrides"]), &format!("{at}.variables.overrides")) {
                        causes.extend(c);
                    }
                }
            }
        }
    }
    // A version change waits until every part has reached the current version.
    let (Some(old), Some(version)) = (old, topology["version"].as_str()) else {
        return StoredChecks {
            causes,
            warnings,
            chained,
            ..Default::default()
        };
    };
    let before = old["spec"]["topology"]["version"]
        .as_str()
        .unwrap_or_default();
    if version == before || before.is_empty() {
        return StoredChecks {
            causes,
            warnings,
            chained,
            ..Default::default()
        };
    }
    if object["metadata"]["annotations"]
        .get(DISABLE_UPDATE_VERSION_CHECK_ANNOTATION)
        .is_some()
    {
        warnings.push(format!(
            "Cluster has the {DISABLE_UPDATE_VERSION_CHECK_ANNOTATION} annotation: the version change is not checked against the control plane and the MachineDeployments"
        ));
        return StoredChecks {
            causes,
            warnings,
            chained,
            ..Default::default()
        };
    }
    // Every part with its version (and, for the control plane, the version it runs).
    let mut parts: Vec<(String, String, Option<String>)> = Vec::new();
    let cp_ref = &object["spec"]["controlPlaneRef"];
    if let (Some(group), Some(kind), Some(name)) = (
        cp_ref["apiGroup"].as_str(),
        cp_ref["kind"].as_str(),
        cp_ref["name"].as_str(),
    ) && let Some(cp) = lookup.get(group, kind, namespace, name)
    {
        parts.push((
            format!("{kind} {namespace}/{name}"),
            cp["spec"]["version"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            Some(
                cp["status"]["version"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            ),
        ));
    }
    let cluster = object["metadata"]["name"].as_str().unwrap_or_default();
    for kind in ["MachineDeployment", "MachinePool"] {
        for worker in lookup.list("cluster.x-k8s.io", kind, namespace) {
            let labels = &worker["metadata"]["labels"];
            if labels[crate::api::CLUSTER_NAME_LABEL] != cluster
                || labels
                    .get(crate::api::cluster_class::TOPOLOGY_OWNED_LABEL)
                    .is_none()
            {
                continue;
            }
            parts.push((
                format!(
                    "{kind} {namespace}/{}",
                    worker["metadata"]["name"].as_str().unwrap_or_default()
                ),
                worker["spec"]["template"]["spec"]["version"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                None,
            ));
        }
    }
    // Going back to the version every part still runs cancels an upgrade that has not started
    // (upstream refuses it, and a mistyped version gets a Cluster stuck: #7428).
    let decrease = kubernetes_version(version) < kubernetes_version(before);
    if decrease
        && !parts.is_empty()
        && parts.iter().all(|(_, spec, status)| {
            spec == version && status.as_deref().is_none_or(|s| s == version)
        })
    {
        warnings.push(format!(
            "the upgrade to {before} had not started: it is cancelled, and the Cluster stays at {version}"
        ));
        return StoredChecks {
            causes,
            warnings,
            cancelled: true,
            chained,
        };
    }
    let moving: Vec<String> = parts
        .iter()
        .filter_map(|(what, spec, status)| {
            if spec != before {
                Some(format!("{what} is at version {spec}, not yet at {before}"))
            } else if status.as_ref().is_some_and(|s| s != spec) {
                Some(format!("{what} is still upgrading to version {spec}"))
            } else {
                None
            }
        })
        .collect();
    if !moving.is_empty() {
        causes.push(FieldCause::invalid(
            "spec.topology.version",
            format!(
                "Invalid value: {version:?}: version cannot be changed: {}; wait until the upgrade to {before} is done",
                moving.join(", ")
            ),
        ));
    }
    StoredChecks {
        causes,
        warnings,
        chained,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cluster_networks_and_references() {
        let cluster = |pods: Value, infra_kind: &str| {
            json!({"spec": {
                "clusterNetwork": {"pods": {"cidrBlocks": pods}},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": infra_kind, "name": "a"},
            }})
        };
        let old = cluster(json!(["192.168.0.0/16"]), "DockerCluster");
        for (pods, kind, expected) in [
            (json!(["192.168.0.0/16"]), "DockerCluster", vec![]),
            (json!(["10.0.0.0/8", "fd00::/64"]), "DockerCluster", vec![]),
            (
                json!(["not-a-cidr"]),
                "DockerCluster",
                vec!["spec.clusterNetwork.pods.cidrBlocks[0]"],
            ),
            (
                json!(["10.0.0.0/33"]),
                "DockerCluster",
                vec!["spec.clusterNetwork.pods.cidrBlocks[0]"],
            ),
            (
                json!(["10.0.0.0/8", "10.1.0.0/16"]),
                "DockerCluster",
                vec!["spec.clusterNetwork.pods.cidrBlocks"],
            ),
            (
                json!(["10.0.0.0/8"]),
                "InMemoryCluster",
                vec!["spec.infrastructureRef"],
            ),
        ] {
            let causes = cluster_causes(&cluster(pods.clone(), kind), Some(&old));
            let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
            assert_eq!(fields, expected, "{pods} {kind}: {causes:?}");
        }
        let bad = &cluster_causes(&cluster(json!(["not-a-cidr"]), "DockerCluster"), None)[0];
        assert!(
            bad.message.contains("invalid CIDR address: not-a-cidr"),
            "{bad:?}"
        );
    }

    #[test]
    fn topology_rules() {
        let cluster = |topology: Value| json!({"spec": {"topology": topology}});
        let topology = |version: &str| {
            json!({"classRef": {"name": "quick-start"}, "version": version,
            "workers": {"machineDeployments": [{"class": "default-worker", "name": "md-0"}]}})
        };
        let fields = |object: &Value, old: Option<&Value>| -> Vec<String> {
            topology_causes(object, old)
                .into_iter()
                .map(|c| c.field)
                .collect()
        };
        assert!(fields(&cluster(topology("v1.30.4")), None).is_empty());
        assert_eq!(
            fields(&cluster(topology("latest")), None),
            ["spec.topology.version"]
        );
        assert_eq!(
            fields(&cluster(json!({"version": "v1.30.4"})), None),
            ["spec.topology.classRef.name"]
        );
        let mut twice = topology("v1.30.4");
        twice["workers"]["machineDeployments"] = json!([{"name": "md-0"}, {"name": "md-0"}]);
        assert_eq!(
            fields(&cluster(twice), None),
            ["spec.topology.workers.machineDeployments[1].name"]
        );
        let old = cluster(topology("v1.30.4"));
        assert!(fields(&cluster(topology("v1.31.0")), Some(&old)).is_empty());
        assert_eq!(
            fields(&cluster(topology("v1.29.9")), Some(&old)),
            ["spec.topology.version"]
        );
        let skipped = topology_causes(&cluster(topology("v1.32.0")), Some(&old));
        assert!(
            skipped[0].message.contains("upgrade to v1.31.x first"),
            "{skipped:?}"
        );
        assert_eq!(fields(&json!({"spec": {}}), Some(&old)), ["spec.topology"]);
    }
}
