//! What a Cluster with a managed topology should be made of, computed from the Cluster, its
//! class, the class's templates and what exists now; no I/O. Upstream's `desiredstate`:
//!
//! - the infrastructure cluster, from the class's template (`DevClusterTemplate` →
//!   `DevCluster`), named `<cluster>-<random>`;
//! - the control plane, from its template, with `spec.machineTemplate.spec.infrastructureRef`
//!   naming a copy of the class's machine template (`<cluster>-<random>`), its replicas, its
//!   version (see [`versions`](super::versions)), metadata, taints, readiness gates;
//! - one MachineDeployment per `workers.machineDeployments` entry
//!   (`<cluster>-<name>-<random>`), with copies of its class's bootstrap and infrastructure
//!   templates (`<cluster>-<name>-<random>`), labelled with the topology's name;
//! - MachineHealthChecks for the control plane and each MachineDeployment whose class or
//!   topology has a health check, named after what they check;
//! - the Cluster's `spec.infrastructureRef` and `spec.controlPlaneRef`.
//!
//! Objects that exist keep their names. Templates carry the name of the copy in use; the
//! apply step rotates a copy whose spec changed.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::patches::{self, Item, Role};
use super::versions::{self, Progress};
pub use super::versions::{ControlPlaneNow, Current, DeploymentNow};
use crate::api;
use crate::api::Cluster;
use crate::api::cluster_class::{
    ClusterClass, MachineDeploymentClass, TOPOLOGY_DEPLOYMENT_NAME_LABEL, TOPOLOGY_OWNED_LABEL,
};
use crate::reconcile::external::group_of;
use kube::ResourceExt;

/// The class's templates a Cluster's objects are made from.
#[derive(Clone, Debug)]
pub struct Blueprint {
    pub class: ClusterClass,
    pub infrastructure_cluster: Value,
    pub control_plane: Value,
    pub control_plane_machines: Option<Value>,
    /// By MachineDeployment class: its bootstrap and infrastructure templates.
    pub deployment_classes: BTreeMap<String, (Value, Value)>,
}

/// The desired objects. Each is a whole object as the topology controller applies it.
#[derive(Clone, Debug)]
pub struct Desired {
    /// What the topology controller sets on the Cluster: labels and references.
    pub cluster: Value,
    pub infrastructure_cluster: Value,
    pub control_plane: Value,
    pub control_plane_machines: Option<Value>,
    pub control_plane_health_check: Option<Value>,
    pub deployments: Vec<DesiredDeployment>,
    pub progress: Progress,
}

#[derive(Clone, Debug)]
pub struct DesiredDeployment {
    pub topology_name: String,
    pub object: Value,
    pub bootstrap: Value,
    pub infrastructure: Value,
    pub health_check: Option<Value>,
}

/// Five characters for a generated name, from the alphabet Kubernetes' name generator uses,
/// derived from `seed`: the same object gets the same name in a plan and in the reconcile
/// that follows it, and a reconcile interrupted after a create makes no second object.
pub fn suffix(seed: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    ring::digest::digest(&ring::digest::SHA256, seed.as_bytes())
        .as_ref()
        .iter()
        .take(5)
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

/// A name for a new object: `{{ .cluster.name }}-{{ .random }}` or the class's naming
/// template (`random` is [`suffix`] of `seed`); names longer than 63 characters are cut to 58
/// and given such a tail, as upstream does.
fn new_name(
    naming: Option<&str>,
    default: &str,
    data: Value,
    seed: &str,
) -> Result<String, String> {
    let mut data = data;
    data["random"] = json!(suffix(seed));
    let template = naming.filter(|t| !t.is_empty()).unwrap_or(default);
    let name = crate::gotemplate::render(template, &data)
        .map_err(|e| format!("failed to generate a name from {template:?}: {e}"))?;
    if name.contains("<no value>") {
        return Err(format!(
            "failed to generate a name from {template:?}: it names a value that does not exist"
        ));
    }
    Ok(if name.len() > 63 {
        format!("{}{}", &name[..58], suffix(&name))
    } else {
        name
    })
}

/// Labels or annotations as the JSON map the desired objects are built of.
fn as_map(entries: Option<&BTreeMap<String, String>>) -> Map<String, Value> {
    entries
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect()
}

fn labels_of(meta: Option<&api::common::ObjectMeta>) -> Map<String, Value> {
    as_map(meta.and_then(|m| m.labels.as_ref()))
}

fn annotations_of(meta: Option<&api::common::ObjectMeta>) -> Map<String, Value> {
    as_map(meta.and_then(|m| m.annotations.as_ref()))
}

/// `a` with `b`'s entries where `a` has none (the topology's metadata over the class's).
fn merged(mut a: Map<String, Value>, b: Map<String, Value>) -> Map<String, Value> {
    for (k, v) in b {
        a.entry(k).or_insert(v);
    }
    a
}

/// A contract reference (`{apiGroup, kind, name}`) to an object.
fn reference(object: &Value) -> Value {
    json!({
        "apiGroup": group_of(object["apiVersion"].as_str().unwrap_or_default()),
        "kind": object["kind"],
        "name": object["metadata"]["name"],
    })
}

fn name_of(object: &Value) -> Option<String> {
    object["metadata"]["name"].as_str().map(str::to_string)
}

fn owner(cluster: &Cluster) -> Value {
    json!([{
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "name": cluster.name_any(),
        "uid": cluster.uid().unwrap_or_default(),
    }])
}

/// The labels and annotations of an object made from `template`, whose own metadata is
/// `metadata`: those with the topology's labels, and where it was cloned from.
fn metadata_from(
    template: &Value,
    metadata: &Value,
    labels: &Map<String, Value>,
) -> (Map<String, Value>, Map<String, Value>) {
    let field = |f: &str| metadata[f].as_object().cloned().unwrap_or_default();
    let mut all_labels = field("labels");
    all_labels.extend(labels.clone());
    let mut annotations = field("annotations");
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    annotations.insert(
        api::CLONED_FROM_NAME_ANNOTATION.into(),
        template["metadata"]["name"].clone(),
    );
    annotations.insert(
        api::CLONED_FROM_GROUP_KIND_ANNOTATION.into(),
        json!(format!(
            "{}.{}",
            template["kind"].as_str().unwrap_or_default(),
            group_of(template["apiVersion"].as_str().unwrap_or_default())
        )),
    );
    (all_labels, annotations)
}

/// An object made from a template's `spec.template`: the kind without `Template`, the
/// template's labels and annotations with the topology's own, and where it was cloned from.
fn from_template(
    template: &Value,
    name: &str,
    namespace: &str,
    labels: &Map<String, Value>,
) -> Value {
    let kind = template["kind"].as_str().unwrap_or_default();
    let inner = &template["spec"]["template"];
    let (labels, annotations) = metadata_from(template, &inner["metadata"], labels);
    json!({
        "apiVersion": template["apiVersion"],
        "kind": kind.strip_suffix("Template").unwrap_or(kind),
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
        "spec": inner.get("spec").cloned().unwrap_or(json!({})),
    })
}

/// A copy of a class's template for the Cluster, owned by it.
fn template_copy(
    template: &Value,
    name: &str,
    namespace: &str,
    labels: &Map<String, Value>,
    cluster: &Cluster,
) -> Value {
    let (labels, annotations) = metadata_from(template, &template["metadata"], labels);
    json!({
        "apiVersion": template["apiVersion"],
        "kind": template["kind"],
        "metadata": {
            "name": name, "namespace": namespace, "labels": labels, "annotations": annotations,
            "ownerReferences": owner(cluster),
        },
        "spec": template["spec"],
    })
}

fn health_check(
    name: &str,
    namespace: &str,
    cluster: &Cluster,
    selector: Value,
    class: Option<&api::health_check::HealthCheck>,
    topology: Option<&api::health_check::HealthCheck>,
) -> Option<Value> {
    if topology.and_then(|t| t.enabled) == Some(false) {
        return None;
    }
    let defined =
        |h: &&api::health_check::HealthCheck| h.checks.is_some() || h.remediation.is_some();
    let source = topology.filter(defined).or(class.filter(defined))?;
    let mut spec =
        json!({"clusterName": cluster.name_any(), "selector": {"matchLabels": selector}});
    if let Some(checks) = &source.checks {
        spec["checks"] = serde_json::to_value(checks).expect("checks serialize");
    }
    if let Some(remediation) = &source.remediation {
        spec["remediation"] = serde_json::to_value(remediation).expect("remediation serializes");
    }
    Some(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "MachineHealthCheck",
        "metadata": {
            "name": name, "namespace": namespace,
            "labels": {(api::CLUSTER_NAME_LABEL): cluster.name_any(), (TOPOLOGY_OWNED_LABEL): ""},
            "ownerReferences": owner(cluster),
        },
        "spec": spec,
    }))
}

/// The Cluster's builtin variables (`builtin.cluster`).
fn cluster_builtins(cluster: &Cluster, class: &ClusterClass) -> Value {
    let topology = cluster.spec.topology.as_ref().expect("a managed topology");
    let network = cluster.spec.cluster_network.as_ref();
    let namespace = cluster.namespace().unwrap_or_default();
    let class_namespace = topology
        .class_ref
        .namespace
        .clone()
        .unwrap_or(namespace.clone());
    let mut builtin = json!({
        "name": cluster.name_any(),
        "namespace": namespace,
        "uid": cluster.uid().unwrap_or_default(),
        "metadata": {"labels": cluster.labels(), "annotations": cluster.annotations()},
        "topology": {
            "version": topology.version,
            "class": class.name_any(),
            "classNamespace": class_namespace,
            "classRef": {"name": class.name_any(), "namespace": class_namespace},
        },
    });
    if let Some(n) = network {
        let mut net = json!({});
        if let Some(d) = &n.service_domain {
            net["serviceDomain"] = json!(d);
        }
        if let Some(s) = &n.services {
            net["services"] = json!(s.cidr_blocks);
        }
        if let Some(p) = &n.pods {
            net["pods"] = json!(p.cidr_blocks);
        }
        builtin["network"] = net;
    }
    builtin
}

/// The variables a template is patched with: the Cluster's, a part's overrides over them, and
/// `builtin`.
fn variables_for(
    cluster_variables: &Map<String, Value>,
    overrides: &Map<String, Value>,
    builtin: Value,
) -> Value {
    let mut all = cluster_variables.clone();
    all.extend(overrides.clone());
    all.insert("builtin".into(), builtin);
    Value::Object(all)
}

/// Resolved variables: the Cluster's, the control plane's overrides, each MachineDeployment's.
#[derive(Clone, Debug, Default)]
pub struct Variables {
    pub cluster: Map<String, Value>,
    pub control_plane: Map<String, Value>,
    pub deployments: BTreeMap<String, Map<String, Value>>,
}

fn deployment_class<'a>(class: &'a ClusterClass, name: &str) -> Option<&'a MachineDeploymentClass> {
    class
        .spec
        .workers
        .as_ref()
        .and_then(|w| w.machine_deployments.as_ref())
        .and_then(|list| list.iter().find(|c| c.class == name))
}

/// What every object of a Cluster's desired state is named and labelled from.
struct Scope<'a> {
    cluster: &'a Cluster,
    class: &'a ClusterClass,
    topology: &'a api::cluster::Topology,
    namespace: String,
    cluster_name: String,
    /// The labels of every object the topology owns.
    owned_labels: Map<String, Value>,
}

impl<'a> Scope<'a> {
    fn new(cluster: &'a Cluster, class: &'a ClusterClass) -> Result<Self, String> {
        let topology = cluster
            .spec
            .topology
            .as_ref()
            .ok_or("the Cluster has no spec.topology")?;
        let cluster_name = cluster.name_any();
        let owned_labels = [
            (api::CLUSTER_NAME_LABEL.to_string(), json!(cluster_name)),
            (TOPOLOGY_OWNED_LABEL.to_string(), json!("")),
        ]
        .into_iter()
        .collect();
        Ok(Scope {
            cluster,
            class,
            topology,
            namespace: cluster.namespace().unwrap_or_default(),
            cluster_name,
            owned_labels,
        })
    }

    /// The seed of the generated names of the object playing `role`: stable per Cluster.
    fn seed(&self, role: &str) -> String {
        format!("{}/{}/{role}", self.namespace, self.cluster_name)
    }

    /// The control plane's part of the topology, if it has one.
    fn control_plane(&self) -> Option<&'a api::cluster::ControlPlaneTopology> {
        self.topology.control_plane.as_ref()
    }

    fn deployments(&self) -> impl Iterator<Item = &'a api::cluster::MachineDeploymentTopology> {
        self.topology
            .workers
            .as_ref()
            .and_then(|w| w.machine_deployments.as_ref())
            .into_iter()
            .flatten()
    }
}

/// The names of the infrastructure cluster and the control plane's objects: those they have,
/// or new ones.
struct ControlPlaneNames {
    infrastructure: String,
    control_plane: String,
    /// The copy of the control plane's machine template, when the class has one.
    machines: Option<String>,
}

fn control_plane_names(
    scope: &Scope,
    blueprint: &Blueprint,
    current: &Current,
) -> Result<ControlPlaneNames, String> {
    let naming_data = json!({"cluster": {"name": scope.cluster_name}});
    let spec = &scope.class.spec;
    let infrastructure = match current.infrastructure_cluster.as_ref().and_then(name_of) {
        Some(n) => n,
        None => new_name(
            spec.infrastructure
                .naming
                .as_ref()
                .and_then(|n| n.template.as_deref()),
            "{{ .cluster.name }}-{{ .random }}",
            naming_data.clone(),
            &scope.seed("infrastructure"),
        )?,
    };
    let control_plane = match current
        .control_plane
        .as_ref()
        .and_then(|c| name_of(&c.object))
    {
        Some(n) => n,
        None => new_name(
            spec.control_plane
                .naming
                .as_ref()
                .and_then(|n| n.template.as_deref()),
            "{{ .cluster.name }}-{{ .random }}",
            naming_data,
            &scope.seed("control-plane"),
        )?,
    };
    let machines = blueprint.control_plane_machines.as_ref().map(|_| {
        current
            .control_plane_machines
            .as_ref()
            .and_then(name_of)
            .unwrap_or_else(|| {
                let suffix = suffix(&scope.seed("control-plane-machines"));
                format!("{}-{suffix}", scope.cluster_name)
            })
    });
    Ok(ControlPlaneNames {
        infrastructure,
        control_plane,
        machines,
    })
}

/// The patch request's items for the infrastructure cluster and the control plane (and its
/// machine template), in that order, each with its variables.
fn control_plane_items(
    scope: &Scope,
    blueprint: &Blueprint,
    names: &ControlPlaneNames,
    version: &str,
    variables: &Variables,
    cluster_builtin: &Value,
) -> Vec<Item> {
    let cp_topology = scope.control_plane();
    let cp_metadata = cp_topology.and_then(|c| c.metadata.as_ref());
    let cp_builtin = json!({
        "cluster": cluster_builtin,
        "controlPlane": {
            "version": version,
            "name": names.control_plane,
            "replicas": cp_topology.and_then(|c| c.replicas),
            "metadata": {"labels": labels_of(cp_metadata), "annotations": annotations_of(cp_metadata)},
            "machineTemplate": {"infrastructureRef": {"name": names.machines}},
        },
    });
    let cp_variables = variables_for(&variables.cluster, &variables.control_plane, cp_builtin);
    let mut items = vec![
        Item {
            role: Role::InfrastructureCluster,
            what: format!(
                "the infrastructure cluster template {}",
                blueprint.infrastructure_cluster["metadata"]["name"]
            ),
            template: blueprint.infrastructure_cluster.clone(),
            variables: variables_for(
                &variables.cluster,
                &Map::new(),
                json!({"cluster": cluster_builtin}),
            ),
        },
        Item {
            role: Role::ControlPlane,
            what: format!(
                "the control plane template {}",
                blueprint.control_plane["metadata"]["name"]
            ),
            template: blueprint.control_plane.clone(),
            variables: cp_variables.clone(),
        },
    ];
    if let Some(t) = &blueprint.control_plane_machines {
        items.push(Item {
            role: Role::ControlPlaneMachines,
            what: format!(
                "the control plane machine template {}",
                t["metadata"]["name"]
            ),
            template: t.clone(),
            variables: cp_variables,
        });
    }
    items
}

/// A MachineDeployment of the topology, named, whose templates are being patched.
struct PlannedDeployment<'a> {
    topology: &'a api::cluster::MachineDeploymentTopology,
    class: &'a MachineDeploymentClass,
    name: String,
    bootstrap_name: String,
    infrastructure_name: String,
    version: String,
}

/// The `index`th MachineDeployment of the topology, named, with the patch request's items
/// for its bootstrap and infrastructure templates; `None` while its creation is deferred.
#[allow(clippy::too_many_arguments)]
fn plan_deployment<'a>(
    scope: &Scope<'a>,
    blueprint: &Blueprint,
    current: &Current,
    plan: &versions::Plan,
    names: &ControlPlaneNames,
    variables: &Variables,
    cluster_builtin: &Value,
    (index, md): (usize, &'a api::cluster::MachineDeploymentTopology),
) -> Result<Option<(PlannedDeployment<'a>, [Item; 2])>, String> {
    let cluster_name = &scope.cluster_name;
    let md_class = deployment_class(scope.class, &md.class).ok_or_else(|| {
        format!(
            "spec.topology.workers.machineDeployments[{index}].class: MachineDeployment class {:?} is not defined in ClusterClass {}",
            md.class,
            scope.class.name_any()
        )
    })?;
    let Some(version) = plan.deployment_versions.get(&md.name).cloned() else {
        return Ok(None);
    };
    let now = current.deployments.get(&md.name);
    let name = match now.and_then(|d| name_of(&d.object)) {
        Some(n) => n,
        None => new_name(
            md_class.naming.as_ref().and_then(|n| n.template.as_deref()),
            "{{ .cluster.name }}-{{ .machineDeployment.topologyName }}-{{ .random }}",
            json!({"cluster": {"name": cluster_name}, "machineDeployment": {"topologyName": md.name}}),
            &scope.seed(&format!("machine-deployment/{}", md.name)),
        )?,
    };
    let template_name = |t: Option<&Value>, part: &str| {
        t.and_then(name_of).unwrap_or_else(|| {
            let seed = scope.seed(&format!("machine-deployment/{}/{part}", md.name));
            format!("{cluster_name}-{}-{}", md.name, suffix(&seed))
        })
    };
    let bootstrap_name = template_name(now.and_then(|d| d.bootstrap.as_ref()), "bootstrap");
    let infrastructure_name = template_name(
        now.and_then(|d| d.infrastructure.as_ref()),
        "infrastructure",
    );
    let (bootstrap, infrastructure) =
        blueprint.deployment_classes.get(&md.class).ok_or_else(|| {
            format!(
                "the templates of MachineDeployment class {:?} were not read",
                md.class
            )
        })?;
    let builtin = json!({
        "cluster": cluster_builtin,
        "controlPlane": {"version": plan.control_plane_version, "name": names.control_plane},
        "machineDeployment": {
            "version": version,
            "class": md.class,
            "name": name,
            "topologyName": md.name,
            "replicas": md.replicas,
            "metadata": {"labels": labels_of(md.metadata.as_ref()), "annotations": annotations_of(md.metadata.as_ref())},
            "bootstrap": {"configRef": {"name": bootstrap_name}},
            "infrastructureRef": {"name": infrastructure_name},
        },
    });
    let md_variables = variables_for(
        &variables.cluster,
        variables.deployments.get(&md.name).unwrap_or(&Map::new()),
        builtin,
    );
    let item = |template: &Value, part: &str| Item {
        role: Role::MachineDeployment {
            class: md.class.clone(),
        },
        what: format!(
            "MachineDeployment {}'s {part} template {}",
            md.name, template["metadata"]["name"]
        ),
        template: template.clone(),
        variables: md_variables.clone(),
    };
    let items = [
        item(bootstrap, "bootstrap"),
        item(infrastructure, "infrastructure"),
    ];
    let planned = PlannedDeployment {
        topology: md,
        class: md_class,
        name,
        bootstrap_name,
        infrastructure_name,
        version,
    };
    Ok(Some((planned, items)))
}

/// The control plane made from its patched template: the topology's version and replicas,
/// and a machine template with the topology's and the class's metadata, taints, readiness
/// gates and deletion settings, pointing at `machines`.
fn desired_control_plane(
    scope: &Scope,
    template: &Value,
    name: &str,
    version: &str,
    machines: Option<&Value>,
) -> Value {
    let mut control_plane = from_template(template, name, &scope.namespace, &scope.owned_labels);
    let cp_topology = scope.control_plane();
    let cp_class = &scope.class.spec.control_plane;
    let mut machine_labels = merged(
        labels_of(cp_topology.and_then(|c| c.metadata.as_ref())),
        labels_of(cp_class.metadata.as_ref()),
    );
    machine_labels.extend(scope.owned_labels.clone());
    let machine_annotations = merged(
        annotations_of(cp_topology.and_then(|c| c.metadata.as_ref())),
        annotations_of(cp_class.metadata.as_ref()),
    );
    let spec = &mut control_plane["spec"];
    spec["version"] = json!(version);
    if let Some(replicas) = cp_topology.and_then(|c| c.replicas) {
        spec["replicas"] = json!(replicas);
    }
    let mut machine_template = spec["machineTemplate"].take();
    if !machine_template.is_object() {
        machine_template = json!({});
    }
    machine_template["metadata"] = json!({"labels": machine_labels});
    if !machine_annotations.is_empty() {
        machine_template["metadata"]["annotations"] = Value::Object(machine_annotations);
    }
    if !machine_template["spec"].is_object() {
        machine_template["spec"] = json!({});
    }
    if let Some(m) = machines {
        machine_template["spec"]["infrastructureRef"] = reference(m);
    }
    let settings = [
        (
            "readinessGates",
            cp_topology
                .and_then(|c| c.readiness_gates.as_ref())
                .map(to_value),
            cp_class.readiness_gates.as_ref().map(to_value),
        ),
        (
            "taints",
            cp_topology.and_then(|c| c.taints.as_ref()).map(to_value),
            cp_class.taints.as_ref().map(to_value),
        ),
        (
            "deletion",
            cp_topology.and_then(|c| c.deletion.as_ref()).map(to_value),
            cp_class.deletion.as_ref().map(to_value),
        ),
    ];
    for (field, topology, class) in settings {
        if let Some(v) = choose(topology, class) {
            machine_template["spec"][field] = v;
        }
    }
    spec["machineTemplate"] = machine_template;
    if let Some(after) = cp_topology
        .and_then(|c| c.rollout.as_ref())
        .and_then(|r| r.after.as_ref())
    {
        spec["rollout"]["after"] = json!(after);
    }
    control_plane
}

/// A MachineDeployment, its template copies and its health check, from its patched
/// templates: the topology's settings over its class's.
fn desired_deployment(
    scope: &Scope,
    p: PlannedDeployment,
    bootstrap: &Value,
    infrastructure: &Value,
) -> DesiredDeployment {
    let (namespace, cluster) = (&scope.namespace, scope.cluster);
    let mut labels = scope.owned_labels.clone();
    labels.insert(
        TOPOLOGY_DEPLOYMENT_NAME_LABEL.into(),
        json!(p.topology.name),
    );
    let bootstrap = template_copy(bootstrap, &p.bootstrap_name, namespace, &labels, cluster);
    let infrastructure = template_copy(
        infrastructure,
        &p.infrastructure_name,
        namespace,
        &labels,
        cluster,
    );
    let mut md_labels = merged(
        labels_of(p.topology.metadata.as_ref()),
        labels_of(p.class.metadata.as_ref()),
    );
    md_labels.extend(labels.clone());
    let mut md_annotations = merged(
        annotations_of(p.topology.metadata.as_ref()),
        annotations_of(p.class.metadata.as_ref()),
    );
    md_annotations.remove(api::cluster_class::DEFER_UPGRADE_ANNOTATION);
    md_annotations.remove(api::cluster_class::HOLD_UPGRADE_SEQUENCE_ANNOTATION);
    let mut template_metadata = json!({"labels": md_labels});
    if !md_annotations.is_empty() {
        template_metadata["annotations"] = Value::Object(md_annotations.clone());
    }
    let deletion = p.topology.deletion.as_ref().or(p.class.deletion.as_ref());
    let machine_spec = machine_spec(&scope.cluster_name, &p, &bootstrap, &infrastructure);
    let mut md_spec = json!({
        "clusterName": scope.cluster_name,
        "selector": {"matchLabels": labels},
        "template": {"metadata": template_metadata, "spec": machine_spec},
    });
    if let Some(r) = p.topology.replicas {
        md_spec["replicas"] = json!(r);
    }
    if let Some(order) = deletion.and_then(|d| d.order.as_ref()) {
        md_spec["deletion"] = json!({"order": to_value(order)});
    }
    if let Some(rollout) = p.topology.rollout.as_ref().or(p.class.rollout.as_ref()) {
        md_spec["rollout"] = to_value(rollout);
    }
    let mut metadata = json!({"name": p.name, "namespace": namespace, "labels": md_labels});
    if !md_annotations.is_empty() {
        metadata["annotations"] = Value::Object(md_annotations);
    }
    let health_check = health_check(
        &p.name,
        namespace,
        cluster,
        json!({(TOPOLOGY_OWNED_LABEL): "", (TOPOLOGY_DEPLOYMENT_NAME_LABEL): p.topology.name}),
        p.class.health_check.as_ref(),
        p.topology.health_check.as_ref(),
    );
    DesiredDeployment {
        topology_name: p.topology.name.clone(),
        object: json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "MachineDeployment",
            "metadata": metadata,
            "spec": md_spec,
        }),
        bootstrap,
        infrastructure,
        health_check,
    }
}

/// The Machines' spec in a MachineDeployment's template: its version, template copies,
/// failure domain, and the topology's settings over its class's.
fn machine_spec(
    cluster_name: &str,
    p: &PlannedDeployment,
    bootstrap: &Value,
    infrastructure: &Value,
) -> Value {
    let mut spec = json!({
        "clusterName": cluster_name,
        "version": p.version,
        "bootstrap": {"configRef": reference(bootstrap)},
        "infrastructureRef": reference(infrastructure),
    });
    if let Some(fd) = p
        .topology
        .failure_domain
        .as_ref()
        .or(p.class.failure_domain.as_ref())
    {
        spec["failureDomain"] = json!(fd);
    }
    if let Some(v) = p.topology.min_ready_seconds.or(p.class.min_ready_seconds) {
        spec["minReadySeconds"] = json!(v);
    }
    for (field, topology, class) in [
        (
            "readinessGates",
            p.topology.readiness_gates.as_ref().map(to_value),
            p.class.readiness_gates.as_ref().map(to_value),
        ),
        (
            "taints",
            p.topology.taints.as_ref().map(to_value),
            p.class.taints.as_ref().map(to_value),
        ),
    ] {
        if let Some(v) = choose(topology, class) {
            spec[field] = v;
        }
    }
    let deletion = p.topology.deletion.as_ref().or(p.class.deletion.as_ref());
    let timeouts: Map<String, Value> = [
        (
            "nodeDrainTimeoutSeconds",
            deletion.and_then(|d| d.node_drain_timeout_seconds),
        ),
        (
            "nodeVolumeDetachTimeoutSeconds",
            deletion.and_then(|d| d.node_volume_detach_timeout_seconds),
        ),
        (
            "nodeDeletionTimeoutSeconds",
            deletion.and_then(|d| d.node_deletion_timeout_seconds),
        ),
    ]
    .into_iter()
    .filter_map(|(field, value)| Some((field.to_string(), json!(value?))))
    .collect();
    if !timeouts.is_empty() {
        spec["deletion"] = Value::Object(timeouts);
    }
    spec
}

/// What the topology controller sets on the Cluster: its labels and references.
fn desired_cluster(scope: &Scope, infrastructure_cluster: &Value, control_plane: &Value) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "metadata": {"name": scope.cluster_name, "namespace": scope.namespace, "labels": scope.owned_labels},
        "spec": {
            "infrastructureRef": reference(infrastructure_cluster),
            "controlPlaneRef": reference(control_plane),
        },
    })
}

/// Computes the desired state: names first, then every template patched in one request
/// (as upstream's patch engine sees them), then the objects made from the patched templates.
pub fn generate(
    cluster: &Cluster,
    blueprint: &Blueprint,
    current: &Current,
    variables: &Variables,
) -> Result<Desired, String> {
    let scope = Scope::new(cluster, &blueprint.class)?;
    let names = control_plane_names(&scope, blueprint, current)?;
    // Versions: the control plane first, then the MachineDeployments in order.
    let plan = versions::plan(cluster, current)?;
    let cluster_builtin = cluster_builtins(cluster, &blueprint.class);

    let mut items = control_plane_items(
        &scope,
        blueprint,
        &names,
        &plan.control_plane_version,
        variables,
        &cluster_builtin,
    );
    let mut planned = Vec::new();
    for md in scope.deployments().enumerate() {
        let deployment = plan_deployment(
            &scope,
            blueprint,
            current,
            &plan,
            &names,
            variables,
            &cluster_builtin,
            md,
        )?;
        if let Some((deployment, templates)) = deployment {
            items.extend(templates);
            planned.push(deployment);
        }
    }
    patches::apply(
        blueprint.class.spec.patches.as_deref().unwrap_or_default(),
        &mut items,
    )?;

    // The patched templates, in the order of the items.
    let mut templates = items.into_iter().map(|item| item.template);
    let mut next = |what: &str| templates.next().unwrap_or_else(|| panic!("{what} item"));
    let infrastructure_cluster = from_template(
        &next("the infrastructure"),
        &names.infrastructure,
        &scope.namespace,
        &scope.owned_labels,
    );
    let control_plane_template = next("the control plane");
    let control_plane_machines = names.machines.as_ref().map(|name| {
        template_copy(
            &next("the machines"),
            name,
            &scope.namespace,
            &scope.owned_labels,
            cluster,
        )
    });
    let control_plane = desired_control_plane(
        &scope,
        &control_plane_template,
        &names.control_plane,
        &plan.control_plane_version,
        control_plane_machines.as_ref(),
    );
    let cp_topology = scope.control_plane();
    let control_plane_health_check = health_check(
        &names.control_plane,
        &scope.namespace,
        cluster,
        json!({(TOPOLOGY_OWNED_LABEL): "", (api::CONTROL_PLANE_LABEL): ""}),
        scope.class.spec.control_plane.health_check.as_ref(),
        cp_topology.and_then(|c| c.health_check.as_ref()),
    );
    let deployments = planned
        .into_iter()
        .map(|p| {
            let bootstrap = next("a bootstrap");
            let infrastructure = next("an infrastructure");
            desired_deployment(&scope, p, &bootstrap, &infrastructure)
        })
        .collect();

    Ok(Desired {
        cluster: desired_cluster(&scope, &infrastructure_cluster, &control_plane),
        infrastructure_cluster,
        control_plane,
        control_plane_machines,
        control_plane_health_check,
        deployments,
        progress: plan.progress,
    })
}

/// An API type as the JSON the desired objects are built of.
fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("API types serialize")
}

/// The topology's setting where it has one, else the class's.
fn choose(topology: Option<Value>, class: Option<Value>) -> Option<Value> {
    topology
        .filter(|v| !v.is_null())
        .or(class.filter(|v| !v.is_null()))
}
