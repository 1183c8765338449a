//! Cluster API's admission rules, as upstream's webhooks apply them: version defaulting on the
//! kinds that carry a Kubernetes version, the Cluster's network and reference checks, and the
//! KubeadmControlPlane's checks on replicas, the rollout strategy and version upgrades (one
//! minor at a time, never down). The embedded management
//! cluster runs them in-process; [`crate::apiserver::admission::webhook_router`] serves them.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::api::common::kubernetes_version;
use crate::apiserver::admission::{Admission, Chain, Operation, Request};
use crate::apiserver::status::{ApiError, FieldCause};

/// A kind a provider's webhooks take, for its webhook configurations.
pub struct WebhookTarget {
    /// The provider whose manager serves it.
    pub provider: crate::api::CrdSet,
    pub group: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
}

/// Every kind these rules cover, by provider; each is both defaulted and validated.
pub const TARGETS: &[WebhookTarget] = &[
    WebhookTarget {
        provider: crate::api::CrdSet::Core,
        group: "cluster.x-k8s.io",
        kind: "Cluster",
        plural: "clusters",
    },
    WebhookTarget {
        provider: crate::api::CrdSet::Core,
        group: "cluster.x-k8s.io",
        kind: "ClusterClass",
        plural: "clusterclasses",
    },
    WebhookTarget {
        provider: crate::api::CrdSet::Core,
        group: "cluster.x-k8s.io",
        kind: "Machine",
        plural: "machines",
    },
    WebhookTarget {
        provider: crate::api::CrdSet::Core,
        group: "cluster.x-k8s.io",
        kind: "MachineSet",
        plural: "machinesets",
    },
    WebhookTarget {
        provider: crate::api::CrdSet::Core,
        group: "cluster.x-k8s.io",
        kind: "MachineDeployment",
        plural: "machinedeployments",
    },
    WebhookTarget {
        provider: crate::api::CrdSet::Core,
        group: "cluster.x-k8s.io",
        kind: "MachineHealthCheck",
        plural: "machinehealthchecks",
    },
    WebhookTarget {
        provider: crate::api::CrdSet::KubeadmControlPlane,
        group: "controlplane.cluster.x-k8s.io",
        kind: "KubeadmControlPlane",
        plural: "kubeadmcontrolplanes",
    },
];

/// Registers every rule with a management cluster's admission chain.
pub fn register(chain: &Chain) {
    chain.register(Arc::new(ClusterNameLabel));
    chain.register(Arc::new(VersionDefaults));
    chain.register(Arc::new(ClusterRules));
    chain.register(Arc::new(ClusterClassRules));
    chain.register(Arc::new(KubeadmControlPlaneRules));
}

/// Puts the "v" on a version that lacks it, as upstream's defaulting webhooks do.
fn prefix_v(value: &mut Value) {
    if let Some(v) = value
        .as_str()
        .filter(|v| !v.is_empty() && !v.starts_with('v'))
    {
        *value = json!(format!("v{v}"));
    }
}

/// Where each kind keeps its Kubernetes version.
fn version_path(kind: &str) -> Option<&'static [&'static str]> {
    match kind {
        "Machine" => Some(&["spec", "version"]),
        "MachineSet" | "MachineDeployment" => Some(&["spec", "template", "spec", "version"]),
        "KubeadmControlPlane" => Some(&["spec", "version"]),
        _ => None,
    }
}

fn at_mut<'a>(object: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    path.iter().try_fold(object, |v, k| v.get_mut(*k))
}

fn at<'a>(object: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(object, |v, k| v.get(*k))
}

/// The `cluster.x-k8s.io/cluster-name` label from `spec.clusterName`, on the kinds that name
/// their Cluster, as upstream's defaulting webhooks set it: the Cluster finds its
/// MachineDeployments by that label, so one created without it would be missed until its
/// controller labelled it (a Cluster with workers on the way reported Available with none).
/// A MachineSet's and a MachineDeployment's selector and Machine template get it too, so their
/// Machines carry it and are found by it.
struct ClusterNameLabel;

impl Admission for ClusterNameLabel {
    fn name(&self) -> &str {
        "cluster-name.cluster.x-k8s.io"
    }

    fn handles(&self, group: &str, kind: &str) -> bool {
        group == "cluster.x-k8s.io"
            && matches!(
                kind,
                "Machine" | "MachineSet" | "MachineDeployment" | "MachineHealthCheck"
            )
    }

    fn default(&self, request: &Request<'_>, object: &mut Value) -> Result<(), ApiError> {
        let Some(cluster) = object["spec"]["clusterName"]
            .as_str()
            .filter(|c| !c.is_empty())
            .map(String::from)
        else {
            // The schema says clusterName is required; validation reports it.
            return Ok(());
        };
        let metadata = &mut object["metadata"];
        if !metadata["labels"].is_object() {
            metadata["labels"] = json!({});
        }
        metadata["labels"][crate::api::CLUSTER_NAME_LABEL] = json!(cluster);
        if matches!(request.kind, "MachineSet" | "MachineDeployment") {
            for path in [
                &["spec", "selector", "matchLabels"][..],
                &["spec", "template", "metadata", "labels"],
            ] {
                let labels = path.iter().fold(&mut *object, |v, k| &mut v[*k]);
                if !labels.is_object() {
                    *labels = json!({});
                }
                labels[crate::api::CLUSTER_NAME_LABEL] = json!(cluster);
            }
        }
        Ok(())
    }
}

/// `v1.30.4` for `1.30.4` on Machines, MachineSets, MachineDeployments and control planes.
struct VersionDefaults;

impl Admission for VersionDefaults {
    fn name(&self) -> &str {
        "versions.cluster.x-k8s.io"
    }

    fn handles(&self, group: &str, kind: &str) -> bool {
        matches!(group, "cluster.x-k8s.io" | "controlplane.cluster.x-k8s.io")
            && version_path(kind).is_some()
    }

    fn default(&self, request: &Request<'_>, object: &mut Value) -> Result<(), ApiError> {
        if let Some(version) = version_path(request.kind).and_then(|p| at_mut(object, p)) {
            prefix_v(version);
        }
        Ok(())
    }

    fn validate(&self, request: &Request<'_>, object: &Value) -> Result<Vec<String>, ApiError> {
        let path = version_path(request.kind).expect("handled kinds have a version");
        match at(object, path).and_then(Value::as_str) {
            Some(v) if kubernetes_version(v).is_none() => Err(ApiError::invalid(
                request.kind,
                request.group,
                request.name,
                vec![FieldCause::invalid(
                    path.join("."),
                    format!("{v:?} is not a Kubernetes version; use the form v1.30.4"),
                )],
            )),
            _ => Ok(Vec::new()),
        }
    }
}

/// upstream's Cluster webhook checks, beside what the schema says.
struct ClusterRules;

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
            let (c, w, cancelled) = topology_against_stored(lookup, namespace, object, request.old);
            if cancelled {
                causes.retain(|c| !c.message.contains("version cannot be decreased"));
            }
            causes.extend(c);
            warnings.extend(w);
        }
        let mut out = refuse_with(request, causes)?;
        out.extend(warnings);
        Ok(out)
    }
}

/// Skips the checks of a topology version change against the Cluster's parts (upstream's).
const DISABLE_UPDATE_VERSION_CHECK_ANNOTATION: &str =
    "unsafe.topology.cluster.x-k8s.io/disable-update-version-check";

/// A managed topology judged by what is stored, as upstream's webhook reads it: its class
/// (a warning when missing), its variables and MachineDeployment classes against the class,
/// and a version change only once every part has reached the current version. The flag says
/// the change goes back to the version every part still runs: a cancelled upgrade, allowed.
fn topology_against_stored(
    lookup: &dyn crate::apiserver::admission::Lookup,
    namespace: &str,
    object: &Value,
    old: Option<&Value>,
) -> (Vec<FieldCause>, Vec<String>, bool) {
    use crate::controllers::topology::variables;
    let topology = &object["spec"]["topology"];
    let (mut causes, mut warnings) = (Vec::new(), Vec::new());
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
                Err(_) => return (causes, warnings, false),
            };
            let definitions = class
                .status
                .as_ref()
                .and_then(|s| s.variables.clone())
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| crate::controllers::cluster_class::status_variables(&class.spec));
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
            let classes: Vec<&str> = class
                .spec
                .workers
                .iter()
                .flat_map(|w| w.machine_deployments.iter().flatten())
                .map(|c| c.class.as_str())
                .collect();
            for (i, md) in topology["workers"]["machineDeployments"].as_array().into_iter().flatten().enumerate() {
                let at = format!("spec.topology.workers.machineDeployments[{i}]");
                let md_class = md["class"].as_str().unwrap_or_default();
                if !classes.contains(&md_class) {
                    causes.push(FieldCause::invalid(
                        format!("{at}.class"),
                        format!(
                            "Invalid value: {md_class:?}: MachineDeployment class {md_class:?} is not defined in ClusterClass {class_namespace}/{class_name}; it has: {}",
                            classes.join(", ")
                        ),
                    ));
                }
                if let Err(c) = variables::overrides(&definitions, &given(&md["variables"]["overrides"]), &format!("{at}.variables.overrides")) {
                    causes.extend(c);
                }
            }
        }
    }
    // A version change waits until every part has reached the current version.
    let (Some(old), Some(version)) = (old, topology["version"].as_str()) else {
        return (causes, warnings, false);
    };
    let before = old["spec"]["topology"]["version"]
        .as_str()
        .unwrap_or_default();
    if version == before || before.is_empty() {
        return (causes, warnings, false);
    }
    if object["metadata"]["annotations"]
        .get(DISABLE_UPDATE_VERSION_CHECK_ANNOTATION)
        .is_some()
    {
        warnings.push(format!(
            "Cluster has the {DISABLE_UPDATE_VERSION_CHECK_ANNOTATION} annotation: the version change is not checked against the control plane and the MachineDeployments"
        ));
        return (causes, warnings, false);
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
    for md in lookup.list("cluster.x-k8s.io", "MachineDeployment", namespace) {
        let labels = &md["metadata"]["labels"];
        if labels[crate::api::CLUSTER_NAME_LABEL] != cluster
            || labels
                .get(crate::api::cluster_class::TOPOLOGY_OWNED_LABEL)
                .is_none()
        {
            continue;
        }
        parts.push((
            format!(
                "MachineDeployment {namespace}/{}",
                md["metadata"]["name"].as_str().unwrap_or_default()
            ),
            md["spec"]["template"]["spec"]["version"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            None,
        ));
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
        return (causes, warnings, true);
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
    (causes, warnings, false)
}

/// Ok when there is nothing to say; otherwise the 422 naming every field (never on deletion,
/// which must stay possible whatever the object holds).
fn refuse_with(request: &Request<'_>, causes: Vec<FieldCause>) -> Result<Vec<String>, ApiError> {
    if causes.is_empty() || request.operation == Operation::Delete {
        Ok(Vec::new())
    } else {
        Err(ApiError::invalid(
            request.kind,
            request.group,
            request.name,
            causes,
        ))
    }
}

/// upstream's ClusterClass webhook checks of variables and inline patches.
struct ClusterClassRules;

/// The values patches may take from `builtin`, as upstream defines them (a path may go deeper
/// into `metadata`, `network.services` and such).
const BUILTIN_VARIABLES: &[&str] = &[
    "builtin.cluster.name",
    "builtin.cluster.namespace",
    "builtin.cluster.uid",
    "builtin.cluster.metadata",
    "builtin.cluster.topology.version",
    "builtin.cluster.topology.classRef",
    "builtin.cluster.topology.class",
    "builtin.cluster.topology.classNamespace",
    "builtin.cluster.network.serviceDomain",
    "builtin.cluster.network.services",
    "builtin.cluster.network.pods",
    "builtin.controlPlane.version",
    "builtin.controlPlane.name",
    "builtin.controlPlane.replicas",
    "builtin.controlPlane.metadata",
    "builtin.controlPlane.machineTemplate.infrastructureRef.name",
    "builtin.machineDeployment.version",
    "builtin.machineDeployment.class",
    "builtin.machineDeployment.name",
    "builtin.machineDeployment.topologyName",
    "builtin.machineDeployment.replicas",
    "builtin.machineDeployment.metadata",
    "builtin.machineDeployment.bootstrap.configRef.name",
    "builtin.machineDeployment.infrastructureRef.name",
    "builtin.machinePool.version",
    "builtin.machinePool.class",
    "builtin.machinePool.name",
    "builtin.machinePool.topologyName",
    "builtin.machinePool.replicas",
    "builtin.machinePool.metadata",
    "builtin.machinePool.bootstrap.configRef.name",
    "builtin.machinePool.infrastructureRef.name",
];

fn is_builtin(variable: &str) -> bool {
    BUILTIN_VARIABLES.iter().any(|b| {
        variable == *b
            || variable
                .strip_prefix(b)
                .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
    })
}

/// Whether a patch selector (apiVersion, kind) picks a template reference.
fn picks(selector: &Value, reference: &Value) -> bool {
    reference.is_object()
        && selector["apiVersion"] == reference["apiVersion"]
        && selector["kind"] == reference["kind"]
}

/// What is wrong with a ClusterClass's variables and inline patches, as upstream's webhook
/// says it.
pub fn cluster_class_causes(object: &Value) -> Vec<FieldCause> {
    let spec = &object["spec"];
    let mut causes = Vec::new();
    let variables: Vec<&str> = spec["variables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["name"].as_str())
        .collect();
    for (i, name) in variables.iter().enumerate() {
        let field = format!("spec.variables[{i}].name");
        if *name == "builtin" {
            causes.push(FieldCause::invalid(
                field,
                "Invalid value: \"builtin\": \"builtin\" is a reserved variable name",
            ));
        } else if name.contains('.') {
            causes.push(FieldCause::invalid(
                field,
                format!("Invalid value: {name:?}: variable name cannot contain \".\""),
            ));
        } else if variables[..i].contains(name) {
            causes.push(FieldCause::duplicate(
                field,
                format!("{name:?}: variable names must be unique"),
            ));
        }
    }
    // A variable's schema is checked as a CRD's is: structural, with rules that compile.
    for (i, variable) in spec["variables"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let field = format!("spec.variables[{i}].schema.openAPIV3Schema");
        let schema = &variable["schema"]["openAPIV3Schema"];
        if !schema.is_object() {
            causes.push(FieldCause::required(field));
            continue;
        }
        let problems = crate::apiserver::schema::structural_problems(schema)
            .into_iter()
            .chain(crate::apiserver::cel::rule_problems(schema));
        for problem in problems {
            causes.push(FieldCause::invalid(field.clone(), problem));
        }
    }
    let md_classes: Vec<&Value> = spec["workers"]["machineDeployments"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    for (i, patch) in spec["patches"].as_array().into_iter().flatten().enumerate() {
        let at = format!("spec.patches[{i}]");
        if patch.get("external").is_some_and(|e| !e.is_null()) {
            causes.push(FieldCause::forbidden(
                format!("{at}.external"),
                "patch.external can be used only if the RuntimeSDK feature flag is enabled; capictl has no Runtime SDK: write the patch inline under definitions",
            ));
        }
        for (j, definition) in patch["definitions"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = format!("{at}.definitions[{j}]");
            let selector = &definition["selector"];
            let resources = &selector["matchResources"];
            let md_names: Vec<&str> = resources["machineDeploymentClass"]["names"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let cp = resources["controlPlane"] == true;
            let infra = resources["infrastructureCluster"] == true;
            let pools = resources["machinePoolClass"]["names"]
                .as_array()
                .is_some_and(|n| !n.is_empty());
            if !cp && !infra && md_names.is_empty() && !pools {
                causes.push(FieldCause::invalid(
                    format!("{at}.selector"),
                    "Invalid value: \"object\": no selector enabled; set matchResources.controlPlane, infrastructureCluster or machineDeploymentClass.names",
                ));
            }
            if infra && !picks(selector, &spec["infrastructure"]["templateRef"]) {
                causes.push(FieldCause::invalid(
                    format!("{at}.selector.matchResources.infrastructureCluster"),
                    "Invalid value: true: selector is enabled but does not match the infrastructure ref",
                ));
            }
            if cp
                && !picks(selector, &spec["controlPlane"]["templateRef"])
                && !picks(
                    selector,
                    &spec["controlPlane"]["machineInfrastructure"]["templateRef"],
                )
            {
                causes.push(FieldCause::invalid(
                    format!("{at}.selector.matchResources.controlPlane"),
                    "Invalid value: true: selector is enabled but matches neither the controlPlane ref nor the controlPlane machineInfrastructure ref",
                ));
            }
            let name_matches = |pattern: &str, class: &str| match (
                pattern.strip_suffix('*'),
                pattern.strip_prefix('*'),
            ) {
                _ if pattern == "*" => true,
                (Some(prefix), _) => class.starts_with(prefix),
                (_, Some(suffix)) => class.ends_with(suffix),
                _ => pattern == class,
            };
            if !md_names.is_empty() {
                let selected = md_classes.iter().any(|md| {
                    md_names
                        .iter()
                        .any(|n| name_matches(n, md["class"].as_str().unwrap_or_default()))
                        && (picks(selector, &md["bootstrap"]["templateRef"])
                            || picks(selector, &md["infrastructure"]["templateRef"]))
                });
                if !selected {
                    causes.push(FieldCause::invalid(
                        format!("{at}.selector.matchResources.machineDeploymentClass"),
                        format!("Invalid value: {md_names:?}: selector is enabled but matches neither the bootstrap ref nor the infrastructure ref of a MachineDeployment class"),
                    ));
                }
            }
            for (k, json_patch) in definition["jsonPatches"]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
            {
                let at = format!("{at}.jsonPatches[{k}]");
                let path = json_patch["path"].as_str().unwrap_or_default();
                if !path.starts_with("/spec") {
                    causes.push(FieldCause::invalid(
                        format!("{at}.path"),
                        format!(
                            "Invalid value: {path:?}: jsonPatch path must start with \"/spec\""
                        ),
                    ));
                }
                if path
                    .split('/')
                    .any(|seg| seg.parse::<u64>().is_ok_and(|n| n != 0))
                {
                    causes.push(FieldCause::invalid(
                        format!("{at}.path"),
                        format!("Invalid value: {path:?}: arrays can only be accessed using \"0\" (prepend) or \"-\" (append)"),
                    ));
                }
                let has_value = json_patch.get("value").is_some_and(|v| !v.is_null());
                let value_from = &json_patch["valueFrom"];
                let has_from = value_from.is_object();
                let removes = json_patch["op"] == "remove";
                if !removes && !has_value && !has_from {
                    causes.push(FieldCause::invalid(
                        at.clone(),
                        "Invalid value: \"object\": jsonPatch must define one of value or valueFrom",
                    ));
                }
                if has_value && has_from {
                    causes.push(FieldCause::invalid(
                        at.clone(),
                        "Invalid value: \"object\": jsonPatch can not define both value and valueFrom",
                    ));
                }
                if has_from {
                    let variable = value_from["variable"].as_str();
                    let template = value_from["template"].as_str();
                    if variable.is_some() == template.is_some() {
                        causes.push(FieldCause::invalid(
                            format!("{at}.valueFrom"),
                            "Invalid value: \"object\": valueFrom must set either template or variable",
                        ));
                    }
                    if let Some(variable) = variable {
                        let field = format!("{at}.valueFrom.variable");
                        let top = variable.split(['.', '[']).next().unwrap_or_default();
                        if top == "builtin" {
                            if !is_builtin(variable) {
                                causes.push(FieldCause::invalid(
                                    field,
                                    format!("Invalid value: {variable:?}: not a defined builtin variable"),
                                ));
                            }
                        } else if !variables.contains(&top) {
                            causes.push(FieldCause::invalid(
                                field,
                                format!("Invalid value: {variable:?}: variable with name {top} cannot be found"),
                            ));
                        }
                    }
                }
            }
        }
    }
    causes
}

impl Admission for ClusterClassRules {
    fn name(&self) -> &str {
        "clusterclass.cluster.x-k8s.io"
    }

    fn handles(&self, group: &str, kind: &str) -> bool {
        group == "cluster.x-k8s.io" && kind == "ClusterClass"
    }

    fn validate(&self, request: &Request<'_>, object: &Value) -> Result<Vec<String>, ApiError> {
        refuse_with(request, cluster_class_causes(object))
    }
}

/// upstream's KubeadmControlPlane webhook checks.
struct KubeadmControlPlaneRules;

/// What a running control plane cannot change: where its certificates and etcd data live,
/// stacked versus external etcd, how machines find and announce the API server, and the kind of
/// its infrastructure machines.
const KUBEADM_CONTROL_PLANE_IMMUTABLE: &[&[&str]] = &[
    &[
        "spec",
        "kubeadmConfigSpec",
        "clusterConfiguration",
        "certificatesDir",
    ],
    &[
        "spec",
        "kubeadmConfigSpec",
        "clusterConfiguration",
        "etcd",
        "local",
        "dataDir",
    ],
    &[
        "spec",
        "kubeadmConfigSpec",
        "clusterConfiguration",
        "etcd",
        "external",
    ],
    &[
        "spec",
        "kubeadmConfigSpec",
        "initConfiguration",
        "localAPIEndpoint",
    ],
    &[
        "spec",
        "kubeadmConfigSpec",
        "initConfiguration",
        "bootstrapTokens",
    ],
    &[
        "spec",
        "kubeadmConfigSpec",
        "joinConfiguration",
        "discovery",
    ],
    &[
        "spec",
        "machineTemplate",
        "spec",
        "infrastructureRef",
        "apiGroup",
    ],
    &[
        "spec",
        "machineTemplate",
        "spec",
        "infrastructureRef",
        "kind",
    ],
];

/// What is wrong with a KubeadmControlPlane, given its old self on updates.
pub fn kubeadm_control_plane_causes(object: &Value, old: Option<&Value>) -> Vec<FieldCause> {
    let spec = &object["spec"];
    let mut causes = Vec::new();
    let stacked_etcd = spec["kubeadmConfigSpec"]["clusterConfiguration"]["etcd"]
        .get("external")
        .is_none();
    let replicas = spec["replicas"].as_i64();
    match replicas {
        Some(n) if n <= 0 => causes.push(FieldCause::forbidden(
            "spec.replicas",
            "replicas must be greater than 0; delete the Cluster to remove its control plane",
        )),
        Some(n) if stacked_etcd && n % 2 == 0 => causes.push(FieldCause::forbidden(
            "spec.replicas",
            format!(
                "cannot be an even number when etcd is stacked: {n} members tolerate no more failures than {}; use {} or {}",
                n - 1,
                n - 1,
                n + 1
            ),
        )),
        _ => {}
    }
    let surge = &spec["rollout"]["strategy"]["rollingUpdate"]["maxSurge"];
    match surge {
        Value::Null => {}
        Value::Number(n) if n.as_i64() == Some(1) => {}
        Value::Number(n) if n.as_i64() == Some(0) => {
            if replicas.is_some_and(|r| r < 3) {
                causes.push(FieldCause::forbidden(
                    "spec.rollout.strategy.rollingUpdate.maxSurge",
                    "0 needs at least 3 replicas, since a rollout then removes a Machine before creating its replacement",
                ));
            }
        }
        other => causes.push(FieldCause::invalid(
            "spec.rollout.strategy.rollingUpdate.maxSurge",
            format!("{other} is not supported; use 0 or 1"),
        )),
    }
    if let Some(old) = old {
        for path in KUBEADM_CONTROL_PLANE_IMMUTABLE {
            if at(object, path) != at(old, path) {
                causes.push(FieldCause::forbidden(
                    path.join("."),
                    "cannot be changed once the control plane exists; create a new cluster to change it",
                ));
            }
        }
    }
    let new_version = spec["version"].as_str().and_then(kubernetes_version);
    let old_version = old
        .and_then(|o| o["spec"]["version"].as_str())
        .and_then(kubernetes_version);
    if let (Some(from), Some(to)) = (old_version, new_version)
        && to < from
    {
        causes.push(FieldCause::forbidden(
            "spec.version",
            format!(
                "cannot downgrade from v{}.{}.{} to v{}.{}.{}: kubeadm upgrades only; keep v{}.{}.{} or move forward",
                from.0, from.1, from.2, to.0, to.1, to.2, from.0, from.1, from.2
            ),
        ));
    }
    if let (Some(from), Some(to)) = (old_version, new_version)
        && (to.0 > from.0 || (to.0 == from.0 && to.1 > from.1 + 1))
    {
        let (major, minor, patch) = from;
        causes.push(FieldCause::forbidden(
            "spec.version",
            format!(
                "cannot upgrade from v{major}.{minor}.{patch} to v{}.{}.{} in one step: Kubernetes upgrades go one minor version at a time; upgrade to v{major}.{}.x first",
                to.0,
                to.1,
                to.2,
                minor + 1
            ),
        ));
    }
    causes
}

impl Admission for KubeadmControlPlaneRules {
    fn name(&self) -> &str {
        "kubeadmcontrolplane.controlplane.cluster.x-k8s.io"
    }

    fn handles(&self, group: &str, kind: &str) -> bool {
        group == "controlplane.cluster.x-k8s.io" && kind == "KubeadmControlPlane"
    }

    fn validate(&self, request: &Request<'_>, object: &Value) -> Result<Vec<String>, ApiError> {
        refuse_with(request, kubeadm_control_plane_causes(object, request.old))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_webhook_target_has_rules_and_every_rule_a_target() {
        let rules: Vec<Arc<dyn Admission>> = vec![
            Arc::new(ClusterNameLabel),
            Arc::new(VersionDefaults),
            Arc::new(ClusterRules),
            Arc::new(ClusterClassRules),
            Arc::new(KubeadmControlPlaneRules),
        ];
        for t in TARGETS {
            assert!(
                rules.iter().any(|r| r.handles(t.group, t.kind)),
                "{} has a webhook configuration but no rule",
                t.kind
            );
        }
        for (group, kind) in [
            ("cluster.x-k8s.io", "Cluster"),
            ("cluster.x-k8s.io", "ClusterClass"),
            ("cluster.x-k8s.io", "Machine"),
            ("cluster.x-k8s.io", "MachineSet"),
            ("cluster.x-k8s.io", "MachineDeployment"),
            ("cluster.x-k8s.io", "MachineHealthCheck"),
            ("controlplane.cluster.x-k8s.io", "KubeadmControlPlane"),
        ] {
            assert!(
                TARGETS.iter().any(|t| t.group == group && t.kind == kind),
                "the rules take {kind} but no webhook configuration sends it"
            );
        }
    }

    #[test]
    fn the_cluster_name_label_follows_spec_cluster_name() {
        let request = |kind| Request {
            operation: Operation::Create,
            group: "cluster.x-k8s.io",
            version: "v1beta2",
            kind,
            namespace: Some("default"),
            name: "a",
            old: None,
            dry_run: false,
            lookup: None,
        };
        for (kind, object, label) in [
            (
                "MachineDeployment",
                json!({"metadata": {"name": "a"}, "spec": {"clusterName": "c1"}}),
                Some("c1"),
            ),
            (
                "Machine",
                json!({"metadata": {"labels": {"keep": "me", "cluster.x-k8s.io/cluster-name": "wrong"}}, "spec": {"clusterName": "c2"}}),
                Some("c2"),
            ),
            ("MachineSet", json!({"metadata": {}, "spec": {}}), None),
        ] {
            let mut object = object;
            ClusterNameLabel
                .default(&request(kind), &mut object)
                .unwrap();
            assert_eq!(
                object["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"].as_str(),
                label,
                "{kind}"
            );
        }
        // A MachineDeployment's selector and Machine template get it too, beside their own.
        let mut md =
            json!({"spec": {"clusterName": "c1", "selector": {"matchLabels": {"pool": "a"}}}});
        ClusterNameLabel
            .default(&request("MachineDeployment"), &mut md)
            .unwrap();
        assert_eq!(
            md["spec"]["selector"]["matchLabels"],
            json!({"pool": "a", "cluster.x-k8s.io/cluster-name": "c1"})
        );
        assert_eq!(
            md["spec"]["template"]["metadata"]["labels"],
            json!({"cluster.x-k8s.io/cluster-name": "c1"})
        );
    }

    fn kcp(replicas: i64, version: &str) -> Value {
        json!({"spec": {"replicas": replicas, "version": version}})
    }

    fn messages(object: &Value, old: Option<&Value>) -> Vec<String> {
        kubeadm_control_plane_causes(object, old)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

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

    #[test]
    fn cluster_class_patches_and_variables() {
        let class = |variables: Value, patches: Value| {
            json!({"spec": {
                "infrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerClusterTemplate", "name": "c"}},
                "controlPlane": {
                    "templateRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlaneTemplate", "name": "cp"},
                    "machineInfrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachineTemplate", "name": "cpm"}},
                },
                "workers": {"machineDeployments": [{"class": "default-worker",
                    "bootstrap": {"templateRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate", "name": "b"}},
                    "infrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachineTemplate", "name": "w"}}}]},
                "variables": variables,
                "patches": patches,
            }})
        };
        let patch = |selector: Value, json_patch: Value| json!([{"name": "p", "definitions": [{"selector": selector, "jsonPatches": [json_patch]}]}]);
        let machines = |resources: Value| json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachineTemplate", "matchResources": resources});
        let image = json!([{"name": "imageRepository", "required": false, "schema": {"openAPIV3Schema": {"type": "string"}}}]);
        let set = |value_from: Value| json!({"op": "add", "path": "/spec/template/spec/customImage", "valueFrom": value_from});
        let cases = [
            (
                patch(
                    machines(json!({"controlPlane": true})),
                    set(json!({"variable": "builtin.controlPlane.version"})),
                ),
                vec![],
            ),
            (
                patch(
                    machines(json!({"machineDeploymentClass": {"names": ["default-*"]}})),
                    set(json!({"variable": "imageRepository"})),
                ),
                vec![],
            ),
            (
                patch(
                    machines(json!({})),
                    set(json!({"variable": "imageRepository"})),
                ),
                vec!["spec.patches[0].definitions[0].selector"],
            ),
            (
                patch(
                    machines(json!({"infrastructureCluster": true})),
                    set(json!({"variable": "imageRepository"})),
                ),
                vec![
                    "spec.patches[0].definitions[0].selector.matchResources.infrastructureCluster",
                ],
            ),
            (
                patch(
                    machines(json!({"machineDeploymentClass": {"names": ["gpu"]}})),
                    set(json!({"variable": "imageRepository"})),
                ),
                vec![
                    "spec.patches[0].definitions[0].selector.matchResources.machineDeploymentClass",
                ],
            ),
            (
                patch(
                    machines(json!({"controlPlane": true})),
                    json!({"op": "add", "path": "/metadata/labels/x", "value": "y"}),
                ),
                vec!["spec.patches[0].definitions[0].jsonPatches[0].path"],
            ),
            (
                patch(
                    machines(json!({"controlPlane": true})),
                    json!({"op": "add", "path": "/spec/list/3", "value": "y"}),
                ),
                vec!["spec.patches[0].definitions[0].jsonPatches[0].path"],
            ),
            (
                patch(
                    machines(json!({"controlPlane": true})),
                    json!({"op": "add", "path": "/spec/x"}),
                ),
                vec!["spec.patches[0].definitions[0].jsonPatches[0]"],
            ),
            (
                patch(
                    machines(json!({"controlPlane": true})),
                    json!({"op": "add", "path": "/spec/x", "value": 1, "valueFrom": {"variable": "imageRepository"}}),
                ),
                vec!["spec.patches[0].definitions[0].jsonPatches[0]"],
            ),
            (
                patch(
                    machines(json!({"controlPlane": true})),
                    set(json!({"variable": "registry"})),
                ),
                vec!["spec.patches[0].definitions[0].jsonPatches[0].valueFrom.variable"],
            ),
            (
                patch(
                    machines(json!({"controlPlane": true})),
                    set(json!({"variable": "builtin.cluster.flavour"})),
                ),
                vec!["spec.patches[0].definitions[0].jsonPatches[0].valueFrom.variable"],
            ),
            (
                patch(machines(json!({"controlPlane": true})), set(json!({}))),
                vec!["spec.patches[0].definitions[0].jsonPatches[0].valueFrom"],
            ),
            (
                json!([{"name": "ext", "external": {"generatePatchesExtension": "x"}}]),
                vec!["spec.patches[0].external"],
            ),
        ];
        for (patches, expected) in cases {
            let causes = cluster_class_causes(&class(image.clone(), patches.clone()));
            let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
            assert_eq!(fields, expected, "{patches}: {causes:?}");
        }
        let schema = json!({"openAPIV3Schema": {"type": "string"}});
        let named = |name: &str| json!({"name": name, "schema": schema});
        let untyped =
            json!([{"name": "loose", "schema": {"openAPIV3Schema": {"description": "no type"}}}]);
        let fields: Vec<String> = cluster_class_causes(&class(untyped, json!([])))
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, ["spec.variables[0].schema.openAPIV3Schema"]);
        let names = json!([named("a"), named("a"), named("builtin"), named("x.y")]);
        let fields: Vec<String> = cluster_class_causes(&class(names, json!([])))
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.variables[1].name",
                "spec.variables[2].name",
                "spec.variables[3].name"
            ]
        );
    }

    #[test]
    fn versions_get_their_v() {
        let mut v = json!("1.29.10");
        prefix_v(&mut v);
        assert_eq!(v, "v1.29.10");
    }

    #[test]
    fn kubeadm_control_plane_rules() {
        let table: [(Value, Option<Value>, &[&str]); 9] = [
            (kcp(5, "v1.29.10"), Some(kcp(3, "v1.29.10")), &[]),
            (kcp(3, "v1.29.10"), None, &[]),
            (kcp(3, "v1.29.10"), Some(kcp(3, "v1.28.13")), &[]),
            (kcp(3, "v1.28.15"), Some(kcp(3, "v1.28.13")), &[]),
            (
                kcp(3, "v1.28.13"),
                Some(kcp(3, "v1.29.10")),
                &["spec.version"],
            ),
            (
                kcp(3, "v1.30.4"),
                Some(kcp(3, "v1.28.13")),
                &["spec.version"],
            ),
            (kcp(2, "v1.30.4"), None, &["spec.replicas"]),
            (kcp(0, "v1.30.4"), None, &["spec.replicas"]),
            (
                json!({"spec": {"replicas": 1, "version": "v1.30.4", "rollout": {"strategy": {"rollingUpdate": {"maxSurge": 0}}}}}),
                None,
                &["spec.rollout.strategy.rollingUpdate.maxSurge"],
            ),
        ];
        for (object, old, fields) in table {
            let got: Vec<String> = kubeadm_control_plane_causes(&object, old.as_ref())
                .into_iter()
                .map(|c| c.field)
                .collect();
            assert_eq!(got, fields, "{object} after {old:?}");
        }
    }

    #[test]
    fn a_skipped_minor_names_the_version_to_go_to_first() {
        assert_eq!(
            messages(&kcp(3, "v1.30.4"), Some(&kcp(3, "v1.28.13"))),
            [
                "spec.version: Forbidden: cannot upgrade from v1.28.13 to v1.30.4 in one step: Kubernetes upgrades go one minor version at a time; upgrade to v1.29.x first"
            ]
        );
    }

    #[test]
    fn immutable_fields_stay() {
        let old = json!({"spec": {"replicas": 3, "version": "v1.30.4", "kubeadmConfigSpec": {"clusterConfiguration": {"certificatesDir": "/etc/kubernetes/pki"}}}});
        let mut new = old.clone();
        new["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["certificatesDir"] = json!("/pki");
        new["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["apiServer"] =
            json!({"certSANs": ["a"]});
        assert_eq!(
            messages(&new, Some(&old)),
            [
                "spec.kubeadmConfigSpec.clusterConfiguration.certificatesDir: Forbidden: cannot be changed once the control plane exists; create a new cluster to change it"
            ]
        );
    }

    #[test]
    fn even_replicas_with_external_etcd_are_fine() {
        let object = json!({"spec": {"replicas": 2, "version": "v1.30.4", "kubeadmConfigSpec": {"clusterConfiguration": {"etcd": {"external": {"endpoints": ["https://e:2379"]}}}}}});
        assert!(messages(&object, None).is_empty());
    }
}
