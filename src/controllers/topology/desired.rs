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
//! - one MachinePool per `workers.machinePools` entry (`<cluster>-<name>-<random>`), with a
//!   bootstrap config and an infrastructure machine pool made from its class's templates
//!   (`<cluster>-<name>-<random>`, changed in place);
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
    ClusterClass, MachineDeploymentClass, MachinePoolClass, TOPOLOGY_DEPLOYMENT_NAME_LABEL,
    TOPOLOGY_OWNED_LABEL, TOPOLOGY_POOL_NAME_LABEL,
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
    /// By MachinePool class: its bootstrap and infrastructure templates.
    pub pool_classes: BTreeMap<String, (Value, Value)>,
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
    pub pools: Vec<DesiredPool>,
    pub progress: Progress,
}

/// A MachinePool of the topology with its bootstrap config and infrastructure machine pool.
#[derive(Clone, Debug)]
pub struct DesiredPool {
    pub topology_name: String,
    pub object: Value,
    pub bootstrap: Value,
    pub infrastructure: Value,
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
    pub pools: BTreeMap<String, Map<String, Value>>,
}

fn pool_class<'a>(class: &'a ClusterClass, name: &str) -> Option<&'a MachinePoolClass> {
    class
        .spec
        .workers
        .as_ref()
        .and_then(|w| w.machine_pools.as_ref())
        .and_then(|list| list.iter().find(|c| c.class == name))
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

    fn pools(&self) -> impl Iterator<Item = &'a api::cluster::MachinePoolTopology> {
        self.topology
            .workers
            .as_ref()
            .and_then(|w| w.machine_pools.as_ref())
            .into_iter()
            .flatten()
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

/// An external patch's `holderReference`: the object that will refer to what is made from a
/// template, and where.
fn holder(api_version: &str, kind: &str, scope: &Scope, name: &str, field_path: &str) -> Value {
    json!({
        "apiVersion": api_version, "kind": kind, "namespace": scope.namespace,
        "name": name, "fieldPath": field_path,
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
    let of_cluster = |field: &str| {
        holder(
            "cluster.x-k8s.io/v1beta2",
            "Cluster",
            scope,
            &scope.cluster_name,
            field,
        )
    };
    let mut items = vec![
        Item {
            role: Role::InfrastructureCluster,
            holder: of_cluster("spec.infrastructureRef"),
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
            holder: of_cluster("spec.controlPlaneRef"),
            what: format!(
                "the control plane template {}",
                blueprint.control_plane["metadata"]["name"]
            ),
            template: blueprint.control_plane.clone(),
            variables: cp_variables.clone(),
        },
    ];
    if let Some(t) = &blueprint.control_plane_machines {
        let control_plane = &blueprint.control_plane;
        let kind = control_plane["kind"].as_str().unwrap_or_default();
        items.push(Item {
            role: Role::ControlPlaneMachines,
            holder: holder(
                control_plane["apiVersion"].as_str().unwrap_or_default(),
                kind.strip_suffix("Template").unwrap_or(kind),
                scope,
                &names.control_plane,
                "spec.machineTemplate.spec.infrastructureRef",
            ),
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

/// A worker of the topology (a MachineDeployment or a MachinePool) as its names and patch
/// items are made alike.
struct Worker<'a> {
    /// `MachineDeployment` or `MachinePool`.
    kind: &'static str,
    /// Its builtin variables' key (`machineDeployment`, `machinePool`).
    key: &'static str,
    /// Where its generated names' seeds start (`machine-deployment/<name>`).
    seed: &'static str,
    name: &'a str,
    class: &'a str,
    replicas: Option<i32>,
    metadata: Option<&'a api::common::ObjectMeta>,
    naming: Option<&'a str>,
    role: Role,
    /// Its class's templates, by class.
    templates: &'a BTreeMap<String, (Value, Value)>,
    /// What exists of it, the version it runs now (None: its creation waits) and its
    /// variable overrides.
    now: Option<&'a DeploymentNow>,
    version: Option<&'a String>,
    overrides: Option<&'a Map<String, Value>>,
}

/// A worker of the topology, named, at the version it runs now.
struct PlannedWorker {
    name: String,
    bootstrap_name: String,
    infrastructure_name: String,
    version: String,
}

/// The `index`th worker of its list, named, with the patch request's items for its bootstrap
/// and infrastructure templates; `None` while its creation is deferred.
fn plan_worker(
    scope: &Scope,
    names: &ControlPlaneNames,
    plan: &versions::Plan,
    variables: &Variables,
    cluster_builtin: &Value,
    w: Worker,
) -> Result<Option<(PlannedWorker, [Item; 2])>, String> {
    let cluster_name = &scope.cluster_name;
    let (now, templates, overrides) = (w.now, w.templates, w.overrides);
    let Some(version) = w.version.cloned() else {
        return Ok(None);
    };
    let key = w.key;
    let name = match now.and_then(|d| name_of(&d.object)) {
        Some(n) => n,
        None => new_name(
            w.naming,
            &format!("{{{{ .cluster.name }}}}-{{{{ .{key}.topologyName }}}}-{{{{ .random }}}}"),
            json!({"cluster": {"name": cluster_name}, (key): {"topologyName": w.name}}),
            &scope.seed(&format!("{}/{}", w.seed, w.name)),
        )?,
    };
    let template_name = |t: Option<&Value>, part: &str| {
        t.and_then(name_of).unwrap_or_else(|| {
            let seed = scope.seed(&format!("{}/{}/{part}", w.seed, w.name));
            format!("{cluster_name}-{}-{}", w.name, suffix(&seed))
        })
    };
    let bootstrap_name = template_name(now.and_then(|d| d.bootstrap.as_ref()), "bootstrap");
    let infrastructure_name = template_name(
        now.and_then(|d| d.infrastructure.as_ref()),
        "infrastructure",
    );
    let (bootstrap, infrastructure) = templates.get(w.class).ok_or_else(|| {
        format!(
            "the templates of {} class {:?} were not read",
            w.kind, w.class
        )
    })?;
    let builtin = json!({
        "cluster": cluster_builtin,
        "controlPlane": {"version": plan.control_plane_version, "name": names.control_plane},
        (key): {
            "version": version,
            "class": w.class,
            "name": name,
            "topologyName": w.name,
            "replicas": w.replicas,
            "metadata": {"labels": labels_of(w.metadata), "annotations": annotations_of(w.metadata)},
            "bootstrap": {"configRef": {"name": bootstrap_name}},
            "infrastructureRef": {"name": infrastructure_name},
        },
    });
    let worker_variables = variables_for(
        &variables.cluster,
        overrides.unwrap_or(&Map::new()),
        builtin,
    );
    let item = |template: &Value, part: &str, field: &str| Item {
        role: w.role.clone(),
        holder: holder("cluster.x-k8s.io/v1beta2", w.kind, scope, &name, field),
        what: format!(
            "{} {}'s {part} template {}",
            w.kind, w.name, template["metadata"]["name"]
        ),
        template: template.clone(),
        variables: worker_variables.clone(),
    };
    let items = [
        item(
            bootstrap,
            "bootstrap",
            "spec.template.spec.bootstrap.configRef",
        ),
        item(
            infrastructure,
            "infrastructure",
            "spec.template.spec.infrastructureRef",
        ),
    ];
    Ok(Some((
        PlannedWorker {
            name,
            bootstrap_name,
            infrastructure_name,
            version,
        },
        items,
    )))
}

/// A MachineDeployment of the topology, named, whose templates are being patched.
struct PlannedDeployment<'a> {
    topology: &'a api::cluster::MachineDeploymentTopology,
    class: &'a MachineDeploymentClass,
    worker: PlannedWorker,
}

/// The `index`th MachineDeployment of the topology, planned ([`plan_worker`]).
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
    let md_class = deployment_class(scope.class, &md.class).ok_or_else(|| {
        format!(
            "spec.topology.workers.machineDeployments[{index}].class: MachineDeployment class {:?} is not defined in ClusterClass {}",
            md.class,
            scope.class.name_any()
        )
    })?;
    let worker = Worker {
        kind: "MachineDeployment",
        key: "machineDeployment",
        seed: "machine-deployment",
        name: &md.name,
        class: &md.class,
        replicas: md.replicas,
        metadata: md.metadata.as_ref(),
        naming: md_class.naming.as_ref().and_then(|n| n.template.as_deref()),
        role: Role::MachineDeployment {
            class: md.class.clone(),
        },
        templates: &blueprint.deployment_classes,
        now: current.deployments.get(&md.name),
        version: plan.deployment_versions.get(&md.name),
        overrides: variables.deployments.get(&md.name),
    };
    let planned = plan_worker(scope, names, plan, variables, cluster_builtin, worker)?;
    Ok(planned.map(|(worker, items)| {
        (
            PlannedDeployment {
                topology: md,
                class: md_class,
                worker,
            },
            items,
        )
    }))
}

/// A MachinePool of the topology, named, whose templates are being patched.
struct PlannedPool<'a> {
    topology: &'a api::cluster::MachinePoolTopology,
    class: &'a MachinePoolClass,
    worker: PlannedWorker,
}

/// The `index`th MachinePool of the topology, planned ([`plan_worker`]).
#[allow(clippy::too_many_arguments)]
fn plan_pool<'a>(
    scope: &Scope<'a>,
    blueprint: &Blueprint,
    current: &Current,
    plan: &versions::Plan,
    names: &ControlPlaneNames,
    variables: &Variables,
    cluster_builtin: &Value,
    (index, mp): (usize, &'a api::cluster::MachinePoolTopology),
) -> Result<Option<(PlannedPool<'a>, [Item; 2])>, String> {
    let mp_class = pool_class(scope.class, &mp.class).ok_or_else(|| {
        format!(
            "spec.topology.workers.machinePools[{index}].class: MachinePool class {:?} is not defined in ClusterClass {}",
            mp.class,
            scope.class.name_any()
        )
    })?;
    let worker = Worker {
        kind: "MachinePool",
        key: "machinePool",
        seed: "machine-pool",
        name: &mp.name,
        class: &mp.class,
        replicas: mp.replicas,
        metadata: mp.metadata.as_ref(),
        naming: mp_class.naming.as_ref().and_then(|n| n.template.as_deref()),
        role: Role::MachinePool {
            class: mp.class.clone(),
        },
        templates: &blueprint.pool_classes,
        now: current.pools.get(&mp.name),
        version: plan.pool_versions.get(&mp.name),
        overrides: variables.pools.get(&mp.name),
    };
    let planned = plan_worker(scope, names, plan, variables, cluster_builtin, worker)?;
    Ok(planned.map(|(worker, items)| {
        (
            PlannedPool {
                topology: mp,
                class: mp_class,
                worker,
            },
            items,
        )
    }))
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
    let bootstrap = template_copy(
        bootstrap,
        &p.worker.bootstrap_name,
        namespace,
        &labels,
        cluster,
    );
    let infrastructure = template_copy(
        infrastructure,
        &p.worker.infrastructure_name,
        namespace,
        &labels,
        cluster,
    );
    let (md_labels, md_annotations) = worker_metadata(
        p.topology.metadata.as_ref(),
        p.class.metadata.as_ref(),
        &labels,
    );
    let mut template_metadata = json!({"labels": md_labels});
    if !md_annotations.is_empty() {
        template_metadata["annotations"] = Value::Object(md_annotations.clone());
    }
    let deletion = p.topology.deletion.as_ref().or(p.class.deletion.as_ref());
    let machine_spec = machine_spec(
        &scope.cluster_name,
        &p.worker.version,
        &bootstrap,
        &infrastructure,
        deployment_settings(&p),
    );
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
    let mut metadata = json!({"name": p.worker.name, "namespace": namespace, "labels": md_labels});
    if !md_annotations.is_empty() {
        metadata["annotations"] = Value::Object(md_annotations);
    }
    let health_check = health_check(
        &p.worker.name,
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

/// A worker's labels and annotations: the topology's over its class's, with the topology's own
/// labels; the annotations that order upgrades stay on the Cluster's topology.
fn worker_metadata(
    topology: Option<&api::common::ObjectMeta>,
    class: Option<&api::common::ObjectMeta>,
    labels: &Map<String, Value>,
) -> (Map<String, Value>, Map<String, Value>) {
    let mut all_labels = merged(labels_of(topology), labels_of(class));
    all_labels.extend(labels.clone());
    let mut annotations = merged(annotations_of(topology), annotations_of(class));
    annotations.remove(api::cluster_class::DEFER_UPGRADE_ANNOTATION);
    annotations.remove(api::cluster_class::HOLD_UPGRADE_SEQUENCE_ANNOTATION);
    (all_labels, annotations)
}

/// What a worker's Machines get beside their version and templates: the topology's settings
/// over its class's.
#[derive(Default)]
struct MachineSettings {
    failure_domain: Option<String>,
    min_ready_seconds: Option<i32>,
    readiness_gates: Option<Value>,
    taints: Option<Value>,
    /// Drain, volume detach and deletion timeouts, in seconds.
    timeouts: [Option<i32>; 3],
}

/// The Machines' spec in a MachineDeployment's or MachinePool's template: its version,
/// template copies (or a pool's objects) and settings.
fn machine_spec(
    cluster_name: &str,
    version: &str,
    bootstrap: &Value,
    infrastructure: &Value,
    settings: MachineSettings,
) -> Value {
    let mut spec = json!({
        "clusterName": cluster_name,
        "version": version,
        "bootstrap": {"configRef": reference(bootstrap)},
        "infrastructureRef": reference(infrastructure),
    });
    if let Some(fd) = settings.failure_domain {
        spec["failureDomain"] = json!(fd);
    }
    if let Some(v) = settings.min_ready_seconds {
        spec["minReadySeconds"] = json!(v);
    }
    if let Some(v) = settings.readiness_gates {
        spec["readinessGates"] = v;
    }
    if let Some(v) = settings.taints {
        spec["taints"] = v;
    }
    let timeouts: Map<String, Value> = [
        "nodeDrainTimeoutSeconds",
        "nodeVolumeDetachTimeoutSeconds",
        "nodeDeletionTimeoutSeconds",
    ]
    .into_iter()
    .zip(settings.timeouts)
    .filter_map(|(field, value)| Some((field.to_string(), json!(value?))))
    .collect();
    if !timeouts.is_empty() {
        spec["deletion"] = Value::Object(timeouts);
    }
    spec
}

/// A MachineDeployment's settings for its Machines.
fn deployment_settings(p: &PlannedDeployment) -> MachineSettings {
    let deletion = p.topology.deletion.as_ref().or(p.class.deletion.as_ref());
    MachineSettings {
        failure_domain: p
            .topology
            .failure_domain
            .clone()
            .or(p.class.failure_domain.clone()),
        min_ready_seconds: p.topology.min_ready_seconds.or(p.class.min_ready_seconds),
        readiness_gates: choose(
            p.topology.readiness_gates.as_ref().map(to_value),
            p.class.readiness_gates.as_ref().map(to_value),
        ),
        taints: choose(
            p.topology.taints.as_ref().map(to_value),
            p.class.taints.as_ref().map(to_value),
        ),
        timeouts: [
            deletion.and_then(|d| d.node_drain_timeout_seconds),
            deletion.and_then(|d| d.node_volume_detach_timeout_seconds),
            deletion.and_then(|d| d.node_deletion_timeout_seconds),
        ],
    }
}

/// A MachinePool, its bootstrap config and infrastructure (made from its class's templates,
/// changed in place as upstream's pools are), from its patched templates: the topology's
/// settings over its class's.
fn desired_pool(
    scope: &Scope,
    p: PlannedPool,
    bootstrap: &Value,
    infrastructure: &Value,
) -> DesiredPool {
    let (namespace, cluster) = (&scope.namespace, scope.cluster);
    let mut labels = scope.owned_labels.clone();
    labels.insert(TOPOLOGY_POOL_NAME_LABEL.into(), json!(p.topology.name));
    let owned = |template: &Value, name: &str| {
        let mut object = from_template(template, name, namespace, &labels);
        object["metadata"]["ownerReferences"] = owner(cluster);
        object
    };
    let bootstrap = owned(bootstrap, &p.worker.bootstrap_name);
    let infrastructure = owned(infrastructure, &p.worker.infrastructure_name);
    let (mp_labels, mp_annotations) = worker_metadata(
        p.topology.metadata.as_ref(),
        p.class.metadata.as_ref(),
        &labels,
    );
    let mut template_metadata = json!({"labels": mp_labels});
    if !mp_annotations.is_empty() {
        template_metadata["annotations"] = Value::Object(mp_annotations.clone());
    }
    let deletion = p.topology.deletion.as_ref().or(p.class.deletion.as_ref());
    let settings = MachineSettings {
        min_ready_seconds: p.topology.min_ready_seconds.or(p.class.min_ready_seconds),
        taints: choose(
            p.topology.taints.as_ref().map(to_value),
            p.class.taints.as_ref().map(to_value),
        ),
        timeouts: [
            deletion.and_then(|d| d.node_drain_timeout_seconds),
            deletion.and_then(|d| d.node_volume_detach_timeout_seconds),
            deletion.and_then(|d| d.node_deletion_timeout_seconds),
        ],
        ..Default::default()
    };
    let machine_spec = machine_spec(
        &scope.cluster_name,
        &p.worker.version,
        &bootstrap,
        &infrastructure,
        settings,
    );
    let mut mp_spec = json!({
        "clusterName": scope.cluster_name,
        "template": {"metadata": template_metadata, "spec": machine_spec},
    });
    if let Some(r) = p.topology.replicas {
        mp_spec["replicas"] = json!(r);
    }
    if let Some(fds) = p
        .topology
        .failure_domains
        .as_ref()
        .or(p.class.failure_domains.as_ref())
    {
        mp_spec["failureDomains"] = json!(fds);
    }
    let mut metadata = json!({"name": p.worker.name, "namespace": namespace, "labels": mp_labels});
    if !mp_annotations.is_empty() {
        metadata["annotations"] = Value::Object(mp_annotations);
    }
    DesiredPool {
        topology_name: p.topology.name.clone(),
        object: json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "MachinePool",
            "metadata": metadata,
            "spec": mp_spec,
        }),
        bootstrap,
        infrastructure,
    }
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
pub async fn generate(
    cluster: &Cluster,
    blueprint: &Blueprint,
    current: &Current,
    variables: &Variables,
    extensions: &dyn patches::PatchExtensions,
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
    let mut planned_pools = Vec::new();
    for mp in scope.pools().enumerate() {
        let pool = plan_pool(
            &scope,
            blueprint,
            current,
            &plan,
            &names,
            variables,
            &cluster_builtin,
            mp,
        )?;
        if let Some((pool, templates)) = pool {
            items.extend(templates);
            planned_pools.push(pool);
        }
    }
    patches::apply(
        blueprint.class.spec.patches.as_deref().unwrap_or_default(),
        &mut items,
        extensions,
    )
    .await?;

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
    let pools = planned_pools
        .into_iter()
        .map(|p| {
            let bootstrap = next("a pool's bootstrap");
            let infrastructure = next("a pool's infrastructure");
            desired_pool(&scope, p, &bootstrap, &infrastructure)
        })
        .collect();

    Ok(Desired {
        cluster: desired_cluster(&scope, &infrastructure_cluster, &control_plane),
        infrastructure_cluster,
        control_plane,
        control_plane_machines,
        control_plane_health_check,
        deployments,
        pools,
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
