//! `capictl move`: hands Clusters and everything that belongs to them from one management
//! cluster to another, or saves them to a directory and restores them from it.
//!
//! The order of a move to another cluster, and what is different from clusterctl's:
//! 1. Discover the objects and plan ([`graph`]); refuse Clusters still provisioning or paused.
//! 2. Check the target before anything changes: every source provider installed there at an
//!    equal or newer version, every moved kind served, and a server-side dry-run create of
//!    every object. clusterctl pauses first and checks as it goes.
//! 3. Record the move in a journal (a ConfigMap in the source namespace), pause the source's
//!    Clusters and ClusterClasses, wait for `block-move` annotations to go.
//! 4. Create the objects in the target, owners first, owner references rewritten to the new
//!    uids, managedFields restored to the source's. A failure here removes what this run
//!    created in the target and unpauses the source: nothing changed.
//! 5. Delete the objects from the source, in reverse order, without their finalizers (the
//!    source's controllers are paused and leave the infrastructure alone). A failure from
//!    here on leaves the journal; running the same move again finishes it.
//! 6. Unpause the target's Clusters and ClusterClasses, remove the journal.

pub mod directory;
pub mod graph;
pub mod take_over;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::api;
use graph::{Graph, Node, ObjectRef, Plan, Type};

/// The field manager of the mover's writes (its entries are replaced by the source's).
const FIELD_MANAGER: &str = "capictl-move";
/// The journal of a move in progress, in the source namespace.
pub const JOURNAL: &str = "capictl-move-journal";
/// How many objects of one group are written at once.
const IN_FLIGHT: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    #[error("{0}")]
    Refused(String),
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
}

type Result<T, E = MoveError> = std::result::Result<T, E>;

fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> MoveError {
    let what = what.into();
    move |source| MoveError::Api { what, source }
}

fn refused<T>(message: impl Into<String>) -> Result<T> {
    Err(MoveError::Refused(message.into()))
}

fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// A management cluster and how to name it in messages.
#[derive(Clone)]
pub struct Endpoint {
    pub client: Client,
    pub name: String,
}

impl Endpoint {
    /// What tells two clusters apart, whatever URL reaches them: the uid of kube-system.
    pub async fn identity(&self) -> Result<String> {
        let ns = Api::<Namespace>::all(self.client.clone())
            .get("kube-system")
            .await
            .map_err(api_error(format!(
                "reaching {} (check that it runs and that the kubeconfig names it)",
                self.name
            )))?;
        Ok(ns.uid().unwrap_or_default())
    }

    fn dynamic(&self, object: &ObjectRef) -> Api<DynamicObject> {
        dynamic(&self.client, object)
    }
}

fn resource(object: &ObjectRef) -> ApiResource {
    let (group, version) = object
        .api_version
        .rsplit_once('/')
        .unwrap_or(("", object.api_version.as_str()));
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, &object.kind),
        &object.plural,
    )
}

fn dynamic(client: &Client, object: &ObjectRef) -> Api<DynamicObject> {
    match &object.namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource(object)),
        None => Api::all_with(client.clone(), &resource(object)),
    }
}

/// What the command line shows while a move runs: steps, and objects as they go.
pub trait Progress: Sync {
    fn step(&self, line: &str);
    /// A phase over `total` objects starts; [`Progress::object`] is called for each.
    fn phase(&self, what: &str, total: usize);
    fn object(&self, verb: &str, object: &ObjectRef);
    fn phase_done(&self);
}

/// What to move.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub namespace: String,
    /// Only these Clusters (and what belongs to them); every Cluster when empty.
    pub clusters: Vec<String>,
    pub dry_run: bool,
    /// Move even when some objects cannot be (their owner does not move): they stay.
    pub force: bool,
}

/// The types a move considers: the storage version of every CRD labelled for clusterctl,
/// Secrets and ConfigMaps.
pub async fn discovery_types(client: &Client) -> Result<Vec<Type>> {
    let crds = Api::<CustomResourceDefinition>::all(client.clone())
        .list(&ListParams::default().labels(api::CLUSTERCTL_LABEL))
        .await
        .map_err(api_error(
            "failed to get the list of CRDs required for the move discovery phase",
        ))?;
    let mut types: Vec<Type> = crds
        .items
        .iter()
        .filter_map(|crd| {
            let version = crd.spec.versions.iter().find(|v| v.storage)?;
            Some(Type::from_crd(
                &crd.spec.group,
                &version.name,
                &crd.spec.names.kind,
                &crd.spec.names.plural,
                crd.spec.scope == "Namespaced",
                crd.metadata.labels.as_ref().unwrap_or(&BTreeMap::new()),
            ))
        })
        .collect();
    types.push(Type::core("Secret"));
    types.push(Type::core("ConfigMap"));
    Ok(types)
}

/// The source's objects of `types` in `namespace` (cluster-scoped ones all), by uid.
async fn list_objects(
    client: &Client,
    types: &[Type],
    namespace: &str,
) -> Result<Vec<(Type, Value)>> {
    let lists = futures::stream::iter(types.iter().cloned())
        .map(|t| async move {
            let object = ObjectRef {
                api_version: t.api_version.clone(),
                kind: t.kind.clone(),
                plural: t.plural.clone(),
                namespace: t.namespaced.then(|| namespace.to_string()),
                name: String::new(),
            };
            match dynamic(client, &object).list(&ListParams::default()).await {
                Ok(list) => Ok(list
                    .items
                    .into_iter()
                    .filter(|o| o.name_any() != JOURNAL)
                    .map(|o| {
                        (
                            t.clone(),
                            serde_json::to_value(o).expect("objects serialize"),
                        )
                    })
                    .collect::<Vec<_>>()),
                Err(e) if not_found(&e) => Ok(Vec::new()),
                Err(e) => Err(api_error(format!(
                    "failed to list \"{}, Kind={}\" resources",
                    t.api_version, t.kind
                ))(e)),
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<_>>()
        .await?;
    Ok(lists.into_iter().flatten().collect())
}

/// Why the moved Clusters cannot move yet, as clusterctl says it: infrastructure or control
/// plane still coming up, or Machines without a Node.
fn still_provisioning(plan: &Plan, objects: &BTreeMap<String, Value>) -> Vec<String> {
    let mut errors = Vec::new();
    for n in plan.nodes() {
        let (o, object) = (&objects[&n.uid], &n.object);
        let (gvk, key) = (
            format!("\"{}, Kind={}\"", object.api_version, object.kind),
            object.key(),
        );
        let init = &o["status"]["initialization"];
        match object.kind.as_str() {
            _ if !object.api_version.starts_with("cluster.x-k8s.io/") => {}
            "Cluster" => {
                if init["infrastructureProvisioned"] != json!(true) {
                    errors.push(format!("cannot start the move operation while {gvk} {key} is still provisioning the infrastructure"));
                } else if !o["spec"]["controlPlaneRef"].is_null()
                    && init["controlPlaneInitialized"] != json!(true)
                {
                    errors.push(format!("cannot start the move operation while the control plane for {gvk} {key} is not yet initialized"));
                }
            }
            "Machine" if o["status"]["nodeRef"].is_null() => errors.push(format!(
                "cannot start the move operation while {gvk} {key} is still provisioning the node"
            )),
            _ => {}
        }
    }
    errors
}

fn is_paused(cluster: &Value) -> bool {
    cluster["spec"]["paused"] == json!(true)
        || cluster["metadata"]["annotations"][api::PAUSED_ANNOTATION].is_string()
}

fn keys(objects: &[&ObjectRef]) -> String {
    objects
        .iter()
        .map(|o| o.key())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The plan of a move or save, and the objects as they were when discovered.
pub struct Discovered {
    pub plan: Plan,
    /// The listed objects by uid.
    pub objects: BTreeMap<String, Value>,
}

/// Discovers what moves and checks that it may: the `--cluster` names exist, no object is
/// stranded (unless forced), no Cluster is still provisioning, and none is paused but those
/// an unfinished move paused (`paused_by_move`).
pub async fn discover(
    source: &Endpoint,
    options: &Options,
    paused_by_move: &BTreeSet<ObjectRef>,
) -> Result<Discovered> {
    let types = discovery_types(&source.client).await?;
    let listed = list_objects(&source.client, &types, &options.namespace).await?;
    let classes_in_use = classes_in_use(source, &types, &listed).await?;
    for name in &options.clusters {
        let known = listed.iter().any(|(t, o)| {
            t.kind == "Cluster" && t.group() == "cluster.x-k8s.io" && o["metadata"]["name"] == *name
        });
        if !known {
            return refused(format!(
                "there is no Cluster {name:?} in namespace {:?} of {}; `kubectl get clusters -n {}` lists them",
                options.namespace, source.name, options.namespace
            ));
        }
    }
    let plan = plan_objects(&listed, options, &classes_in_use)?;
    let objects = listed
        .into_iter()
        .filter_map(|(_, o)| Some((o["metadata"]["uid"].as_str()?.to_string(), o)))
        .collect();
    let discovered = Discovered { plan, objects };
    let provisioning = still_provisioning(&discovered.plan, &discovered.objects);
    if !provisioning.is_empty() {
        return refused(format!(
            "failed to get object graph: failed to check for provisioned infrastructure: {}",
            aggregate(&provisioning)
        ));
    }
    paused_roots(&discovered, paused_by_move)?;
    Ok(discovered)
}

/// The ClusterClasses every Cluster of the source uses, in any namespace, so that one
/// Clusters elsewhere still use stays. Only read when a ClusterClass is among the listed.
async fn classes_in_use(
    source: &Endpoint,
    types: &[Type],
    listed: &[(Type, Value)],
) -> Result<Vec<(String, String)>> {
    let is_core = |t: &Type, kind: &str| t.kind == kind && t.group() == "cluster.x-k8s.io";
    let Some(cluster) = types.iter().find(|t| is_core(t, "Cluster")) else {
        return Ok(Vec::new());
    };
    if !listed.iter().any(|(t, _)| is_core(t, "ClusterClass")) {
        return Ok(Vec::new());
    }
    let everywhere = ObjectRef {
        api_version: cluster.api_version.clone(),
        kind: cluster.kind.clone(),
        plural: cluster.plural.clone(),
        namespace: None,
        name: String::new(),
    };
    let clusters = dynamic(&source.client, &everywhere)
        .list(&ListParams::default())
        .await
        .map_err(api_error("listing the Clusters"))?;
    Ok(clusters
        .items
        .iter()
        .filter_map(|c| graph::class_in_use(&serde_json::to_value(c).ok()?))
        .collect())
}

/// The plan for objects listed or read from files; stranded objects refused unless forced.
fn plan_objects(
    listed: &[(Type, Value)],
    options: &Options,
    classes_in_use: &[(String, String)],
) -> Result<Plan> {
    let mut g = Graph::default();
    for (t, o) in listed {
        g.add(t, o);
    }
    let plan = g.plan(&options.clusters, classes_in_use);
    if !plan.stranded.is_empty() && !options.force {
        let lines: Vec<String> = plan
            .stranded
            .iter()
            .map(|(o, why)| format!("  {o}: {why}"))
            .collect();
        return refused(format!(
            "these objects belong to the moved Clusters but cannot move, because an owner of theirs does not:\n{}\nmove their owners too (label their CRD or them {}), or pass --force to leave them in the source",
            lines.join("\n"),
            graph::MOVE_LABEL
        ));
    }
    Ok(plan)
}

/// Errors as Kubernetes aggregates them: one alone, several in brackets.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

/// The paused Clusters and ClusterClasses among those a move takes, not counting those an
/// unfinished move paused.
fn paused_roots(discovered: &Discovered, paused_by_move: &BTreeSet<ObjectRef>) -> Result<()> {
    let paused = |kind: &str| -> Vec<&ObjectRef> {
        discovered
            .plan
            .nodes()
            .filter(|n| n.object.is_core(kind))
            .filter(|n| !paused_by_move.contains(&n.object))
            .filter(|n| {
                let o = &discovered.objects[&n.uid];
                if kind == "Cluster" {
                    is_paused(o)
                } else {
                    o["metadata"]["annotations"][api::PAUSED_ANNOTATION].is_string()
                }
            })
            .map(|n| &n.object)
            .collect()
    };
    let clusters = paused("Cluster");
    if !clusters.is_empty() {
        return refused(format!(
            "cannot start operation while the following Clusters are paused: {}; unpause them (`kubectl patch cluster NAME --type merge -p '{{\"spec\":{{\"paused\":null}}}}'`) or leave them out with --cluster",
            keys(&clusters)
        ));
    }
    let classes = paused("ClusterClass");
    if !classes.is_empty() {
        return refused(format!(
            "cannot start operation while the following ClusterClasses are paused: {}; remove their {} annotation first",
            keys(&classes),
            api::PAUSED_ANNOTATION
        ));
    }
    Ok(())
}

/// The journal of a move from a namespace: enough to finish it after a failure.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Journal {
    /// The target's identity ([`Endpoint::identity`]) and its name for messages.
    pub target: String,
    pub target_name: String,
    pub phase: Phase,
    pub clusters: Vec<ObjectRef>,
    pub cluster_classes: Vec<ObjectRef>,
    /// In creation order; `keep` for what stays in the source too.
    pub objects: Vec<JournalEntry>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct JournalEntry {
    #[serde(flatten)]
    pub object: ObjectRef,
    /// Its group in the plan: deletions go group by group, last first.
    pub group: usize,
    #[serde(default)]
    pub keep: bool,
}

#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub enum Phase {
    /// Pausing the source and creating in the target: a failure is undone.
    Creating,
    /// Deleting from the source: from here on the move only goes forward.
    Deleting,
}

impl Journal {
    fn for_plan(target: String, target_name: String, plan: &Plan) -> Journal {
        Journal {
            target,
            target_name,
            phase: Phase::Creating,
            clusters: plan.core("Cluster"),
            cluster_classes: plan.core("ClusterClass"),
            objects: plan
                .groups
                .iter()
                .enumerate()
                .flat_map(|(group, nodes)| {
                    nodes.iter().map(move |n| JournalEntry {
                        object: n.object.clone(),
                        group,
                        keep: n.keep_in_source || n.global,
                    })
                })
                .collect(),
        }
    }
}

fn journal_api(source: &Endpoint, namespace: &str) -> Api<ConfigMap> {
    Api::namespaced(source.client.clone(), namespace)
}

async fn read_journal(source: &Endpoint, namespace: &str) -> Result<Option<Journal>> {
    let Some(cm) = journal_api(source, namespace)
        .get_opt(JOURNAL)
        .await
        .map_err(api_error("reading the move journal"))?
    else {
        return Ok(None);
    };
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get("journal"))
        .cloned()
        .unwrap_or_default();
    serde_json::from_str(&text).map(Some).map_err(|e| {
        MoveError::Refused(format!(
            "the move journal ConfigMap {namespace}/{JOURNAL} cannot be read ({e}); if no move is under way, delete it"
        ))
    })
}

async fn write_journal(source: &Endpoint, namespace: &str, journal: &Journal) -> Result<()> {
    let cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": JOURNAL, "namespace": namespace},
        "data": {"journal": serde_json::to_string(journal).expect("journals serialize")},
    });
    journal_api(source, namespace)
        .patch(
            JOURNAL,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&cm),
        )
        .await
        .map_err(api_error("writing the move journal"))?;
    Ok(())
}

async fn remove_journal(source: &Endpoint, namespace: &str) -> Result<()> {
    match journal_api(source, namespace)
        .delete(JOURNAL, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if not_found(&e) => Ok(()),
        Err(e) => Err(api_error("removing the move journal")(e)),
    }
}

/// Every source provider must be in the target, at an equal or newer version.
async fn check_target_providers(source: &Endpoint, target: &Endpoint) -> Result<()> {
    let inventory = |e: &Endpoint| {
        let client = e.client.clone();
        let name = e.name.clone();
        async move {
            match Api::<api::Provider>::all(client)
                .list(&ListParams::default())
                .await
            {
                Ok(list) => Ok(list.items),
                Err(e) if not_found(&e) => Ok(Vec::new()),
                Err(e) => Err(api_error(format!("listing the providers of {name}"))(e)),
            }
        }
    };
    let (ours, theirs) = (inventory(source).await?, inventory(target).await?);
    let mut errors = Vec::new();
    for p in &ours {
        let same: Vec<&api::Provider> = theirs
            .iter()
            .filter(|t| {
                t.spec.provider_name == p.spec.provider_name && t.spec.type_ == p.spec.type_
            })
            .collect();
        let version = p.spec.version.clone().unwrap_or_default();
        let Some(newest) = same
            .iter()
            .filter_map(|t| t.spec.version.as_deref())
            .filter_map(|v| api::common::kubernetes_version(v).map(|s| (s, v)))
            .max()
        else {
            errors.push(format!(
                "provider {} not found in the target cluster",
                p.name_any()
            ));
            continue;
        };
        if api::common::kubernetes_version(&version).is_some_and(|v| v > newest.0) {
            errors.push(format!(
                "provider {} in the target cluster is older than in the source cluster (source: {}, target: {})",
                p.name_any(),
                version.trim_start_matches('v'),
                newest.1.trim_start_matches('v')
            ));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        refused(format!(
            "failed to check providers in target cluster: {}; install them there first (`capictl init --kubeconfig TARGET ...`)",
            aggregate(&errors)
        ))
    }
}

/// Every moved kind served by the target at the version the move writes.
async fn check_target_kinds(target: &Endpoint, plan: &Plan) -> Result<()> {
    let crds = Api::<CustomResourceDefinition>::all(target.client.clone());
    let kinds: BTreeSet<(String, String, String)> = plan
        .nodes()
        .filter(|n| n.object.api_version.contains('/'))
        .map(|n| {
            let (group, version) = n.object.api_version.rsplit_once('/').unwrap();
            (
                format!("{}.{group}", n.object.plural),
                version.to_string(),
                n.object.kind.clone(),
            )
        })
        .collect();
    let mut missing = Vec::new();
    for (crd, version, kind) in kinds {
        let served = crds
            .get_opt(&crd)
            .await
            .map_err(api_error(format!("reading the CRD {crd} in the target")))?
            .is_some_and(|c| {
                c.spec
                    .versions
                    .iter()
                    .any(|v| v.name == version && v.served)
            });
        if !served {
            missing.push(format!("{kind} {version} (CRD {crd})"));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        refused(format!(
            "the target cluster {} does not serve {}; install the providers there (`capictl init`) before moving",
            target.name,
            missing.join(", ")
        ))
    }
}

/// A source object as the target gets it: no server-set metadata and no status, its owner
/// references pointing at the owners' uids in the target (`new_uids`; kept in a dry run).
fn for_target(source: &Value, new_uids: &BTreeMap<String, String>) -> Value {
    let mut object = source.clone();
    if let Some(o) = object.as_object_mut() {
        o.remove("status");
    }
    let mut refs = object["metadata"]["ownerReferences"].take();
    for r in refs.as_array_mut().into_iter().flatten() {
        if let Some(uid) = r["uid"].as_str().and_then(|u| new_uids.get(u)) {
            r["uid"] = json!(uid);
        }
    }
    let meta = object["metadata"]
        .as_object_mut()
        .expect("objects have metadata");
    for field in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
        "selfLink",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "ownerReferences",
    ] {
        meta.remove(field);
    }
    if meta.contains_key("name") {
        meta.remove("generateName");
    }
    if !refs.is_null() {
        meta.insert("ownerReferences".into(), refs);
    }
    object
}

/// Namespaces the target lacks, created now; the caller removes them if the move is undone.
async fn ensure_namespaces(target: &Endpoint, plan: &Plan, dry_run: bool) -> Result<Vec<String>> {
    let namespaces: BTreeSet<&str> = plan
        .nodes()
        .filter_map(|n| n.object.namespace.as_deref())
        .collect();
    let api = Api::<Namespace>::all(target.client.clone());
    let mut created = Vec::new();
    for ns in namespaces {
        if api
            .get_opt(ns)
            .await
            .map_err(api_error(format!("reading namespace {ns} in the target")))?
            .is_some()
        {
            continue;
        }
        let params = PostParams {
            dry_run,
            field_manager: Some(FIELD_MANAGER.into()),
        };
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).expect("a Namespace");
        api.create(&params, &namespace)
            .await
            .map_err(api_error(format!("creating namespace {ns} in the target")))?;
        if !dry_run {
            created.push(ns.to_string());
        }
    }
    Ok(created)
}

/// A server-side dry-run create of every object: what the target's validation and webhooks
/// would refuse, found before anything is paused. An object already there will be updated.
async fn dry_run_creates(
    target: &Endpoint,
    plan: &Plan,
    objects: &BTreeMap<String, Value>,
) -> Result<()> {
    let none = BTreeMap::new();
    let params = PostParams {
        dry_run: true,
        field_manager: Some(FIELD_MANAGER.into()),
    };
    // A namespace a dry run did not create is one the real run creates first.
    let new_namespace = |e: &kube::Error| matches!(e, kube::Error::Api(s) if s.code == 404 && s.message.starts_with("namespaces "));
    let errors: Vec<String> = futures::stream::iter(plan.nodes())
        .map(|n| {
            let object = for_target(&objects[&n.uid], &none);
            let params = &params;
            async move {
                let dynamic: DynamicObject = match serde_json::from_value(object) {
                    Ok(d) => d,
                    Err(e) => return Some(format!("{}: {e}", n.object)),
                };
                match target.dynamic(&n.object).create(params, &dynamic).await {
                    Ok(_) => None,
                    Err(e) if conflict(&e) || new_namespace(&e) => None,
                    Err(e) => Some(format!("{}: {e}", n.object)),
                }
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .filter_map(std::future::ready)
        .collect()
        .await;
    if errors.is_empty() {
        Ok(())
    } else {
        refused(format!(
            "the target cluster {} would refuse these objects (server-side dry run):\n  {}",
            target.name,
            errors.join("\n  ")
        ))
    }
}

async fn merge_patch(
    endpoint: &Endpoint,
    object: &ObjectRef,
    patch: Value,
) -> Result<(), kube::Error> {
    endpoint
        .dynamic(object)
        .patch(&object.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// Pauses (or resumes) Clusters by `spec.paused` and ClusterClasses by annotation. Resuming
/// drops the field, so the mover owns no part of the Cluster.
async fn set_paused(
    endpoint: &Endpoint,
    clusters: &[ObjectRef],
    classes: &[ObjectRef],
    paused: bool,
) -> Result<()> {
    let (spec, annotation) = if paused {
        (json!(true), json!(""))
    } else {
        (Value::Null, Value::Null)
    };
    for c in clusters {
        match merge_patch(endpoint, c, json!({"spec": {"paused": spec}})).await {
            Err(e) if paused || !not_found(&e) => {
                return Err(api_error(format!(
                    "error setting Cluster.Spec.Paused={paused} on {c} in {}",
                    endpoint.name
                ))(e));
            }
            _ => {}
        }
    }
    for c in classes {
        match merge_patch(
            endpoint,
            c,
            json!({"metadata": {"annotations": {(api::PAUSED_ANNOTATION): annotation}}}),
        )
        .await
        {
            Err(e) if paused || !not_found(&e) => {
                let verb = if paused { "pausing" } else { "resuming" };
                return Err(api_error(format!(
                    "error {verb} ClusterClass {c} in {}",
                    endpoint.name
                ))(e));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Waits until no moved object carries the block-move annotation (a provider saying it is
/// not ready to move), about two minutes at most, as clusterctl does.
async fn wait_for_block_move(
    source: &Endpoint,
    plan: &Plan,
    progress: &dyn Progress,
) -> Result<()> {
    let blocking: Vec<&Node> = plan.nodes().filter(|n| n.blocking).collect();
    for n in blocking {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        let mut said = false;
        loop {
            let live = source
                .dynamic(&n.object)
                .get_opt(&n.object.name)
                .await
                .map_err(api_error(format!("reading {}", n.object)))?;
            if live.is_none_or(|o| !o.annotations().contains_key(graph::BLOCK_MOVE_ANNOTATION)) {
                break;
            }
            if !said {
                progress.step(&format!(
                    "Move blocked by {} annotation on {}, waiting for it to be removed",
                    graph::BLOCK_MOVE_ANNOTATION,
                    n.object
                ));
                said = true;
            }
            if tokio::time::Instant::now() > deadline {
                return refused(format!(
                    "error waiting for resources to be ready to move: resource is not ready to move: {}",
                    n.object
                ));
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
    Ok(())
}

/// Waits, briefly, until the source's Cluster controller has seen each paused Cluster (its
/// Paused condition of the current generation) and so given up its claim on the workload
/// cluster: the target then takes the claim at once rather than when it runs out.
async fn wait_for_claims_released(
    source: &Endpoint,
    clusters: &[ObjectRef],
    progress: &dyn Progress,
) -> Result<()> {
    let deadline = tokio::time::Instant::now() + CLAIM_RELEASE_WAIT;
    for c in clusters {
        loop {
            let live = source
                .dynamic(c)
                .get_opt(&c.name)
                .await
                .map_err(api_error(format!("reading {c}")))?;
            let Some(live) = live else { break };
            let claimed = live.annotations().contains_key(api::CLAIMED_BY_ANNOTATION);
            if !claimed || paused_seen(&serde_json::to_value(&live).expect("objects serialize")) {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                progress.step(&format!(
                    "The source's controllers have not confirmed that {c} is paused; the target takes its workload cluster over once the source's claim runs out (about a minute)"
                ));
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    Ok(())
}

/// How long a move waits for the source's controllers to see the pause.
const CLAIM_RELEASE_WAIT: Duration = Duration::from_secs(20);

/// Whether a Cluster's Paused condition is True for its current generation.
fn paused_seen(cluster: &Value) -> bool {
    let generation = cluster["metadata"]["generation"].as_i64().unwrap_or(0);
    cluster["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| {
            c["type"] == "Paused"
                && c["status"] == "True"
                && c["observedGeneration"].as_i64().unwrap_or(0) >= generation
        })
}

fn what(verb: &str, object: &ObjectRef) -> String {
    format!(
        "error {verb} \"{}, Kind={}\" {}",
        object.api_version,
        object.kind,
        object.key()
    )
}

/// Reads an object from the source.
async fn read_source(source: &Endpoint, object: &ObjectRef) -> Result<Value> {
    let live = source
        .dynamic(object)
        .get(&object.name)
        .await
        .map_err(api_error(what("reading", object)))?;
    Ok(serde_json::to_value(live).expect("objects serialize"))
}

/// Creates one object (`live`, as the source has it) in the target, returning its uid there
/// and whether this call created it. One already there is made to match (`update_existing`,
/// left by an earlier run of the same move) or kept as it is.
async fn create_in_target(
    target: &Endpoint,
    node: &Node,
    live: &Value,
    update_existing: bool,
    new_uids: &BTreeMap<String, String>,
) -> Result<(String, bool)> {
    let what = |verb: &str| what(verb, &node.object);
    let object = for_target(live, new_uids);
    let api = target.dynamic(&node.object);
    let params = PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.into()),
    };
    let dynamic: DynamicObject = serde_json::from_value(object.clone())
        .map_err(|e| MoveError::Refused(format!("{}: {e}", node.object)))?;
    let (written, created) = match api.create(&params, &dynamic).await {
        Ok(o) => (o, true),
        Err(e) if conflict(&e) => {
            let existing = api
                .get(&node.object.name)
                .await
                .map_err(api_error(what("reading")))?;
            if node.global || !update_existing {
                return Ok((existing.uid().unwrap_or_default(), false));
            } else {
                let mut replacement = dynamic.clone();
                replacement.metadata.resource_version = existing.resource_version();
                let updated = api
                    .replace(&node.object.name, &params, &replacement)
                    .await
                    .map_err(api_error(what("updating")))?;
                (updated, false)
            }
        }
        Err(e) => return Err(api_error(what("creating"))(e)),
    };
    // The fields keep the managers they had in the source (capi-topology's ownership, for
    // one), and the mover owns nothing. `[{}]` clears them where the source had none.
    let managed = match &live["metadata"]["managedFields"] {
        Value::Array(list) if !list.is_empty() => Value::Array(list.clone()),
        _ => json!([{}]),
    };
    merge_patch(
        target,
        &node.object,
        json!({"metadata": {"managedFields": managed}}),
    )
    .await
    .map_err(api_error(format!(
        "error patching the managed fields {}",
        node.object
    )))?;
    Ok((written.uid().unwrap_or_default(), created))
}

/// Deletes one object without running its finalizers: from the source, whose controllers are
/// paused, or from the target when a failed move is undone.
async fn delete_without_finalizers(endpoint: &Endpoint, object: &ObjectRef) -> Result<()> {
    let what = |verb: &str| what(verb, object);
    let api = endpoint.dynamic(object);
    let Some(live) = api
        .get_opt(&object.name)
        .await
        .map_err(api_error(what("reading")))?
    else {
        return Ok(());
    };
    let gone = |r: Result<(), kube::Error>| match r {
        Err(e) if !not_found(&e) => Err(e),
        _ => Ok(()),
    };
    // The move is committed: the copy in the target keeps any deletion protection, which this
    // source object gives up so that it can go.
    gone(
        merge_patch(
            endpoint,
            object,
            json!({"metadata": {"annotations": {
                (graph::DELETE_FOR_MOVE_ANNOTATION): "",
                (crate::api::DELETION_PROTECTION_ANNOTATION): null,
            }}}),
        )
        .await,
    )
    .map_err(api_error(what("adding delete-for-move annotation from")))?;
    gone(
        api.delete(&object.name, &DeleteParams::default())
            .await
            .map(|_| ()),
    )
    .map_err(api_error(what("deleting")))?;
    if !live.finalizers().is_empty() {
        gone(merge_patch(endpoint, object, json!({"metadata": {"finalizers": []}})).await)
            .map_err(api_error(what("removing finalizers from")))?;
    }
    Ok(())
}

/// Deletes from the source what the journal lists, in reverse order, except what stays.
async fn delete_sources(
    source: &Endpoint,
    journal: &Journal,
    progress: &dyn Progress,
) -> Result<()> {
    let entries: Vec<&JournalEntry> = journal.objects.iter().filter(|e| !e.keep).collect();
    progress.phase("Deleting objects from the source cluster", entries.len());
    // Group by group, last first: what owns goes after what it owns.
    let mut batches: Vec<Vec<&JournalEntry>> = Vec::new();
    for e in entries.into_iter().rev() {
        match batches.last_mut() {
            Some(b) if b[0].group == e.group => b.push(e),
            _ => batches.push(vec![e]),
        }
    }
    for batch in batches {
        futures::stream::iter(batch)
            .map(|e| async move {
                delete_without_finalizers(source, &e.object).await?;
                progress.object("Deleting", &e.object);
                Ok::<_, MoveError>(())
            })
            .buffer_unordered(IN_FLIGHT)
            .try_collect::<Vec<_>>()
            .await?;
    }
    progress.phase_done();
    Ok(())
}

/// Removes what a failed move created in the target, newest first, finalizers and all.
async fn undo_creates(
    target: &Endpoint,
    created: &[ObjectRef],
    namespaces: &[String],
) -> Vec<String> {
    let mut problems = Vec::new();
    for object in created.iter().rev() {
        if let Err(e) = delete_without_finalizers(target, object).await {
            problems.push(e.to_string());
        }
    }
    for ns in namespaces {
        if let Err(e) = Api::<Namespace>::all(target.client.clone())
            .delete(ns, &DeleteParams::default())
            .await
            && !not_found(&e)
        {
            problems.push(format!("deleting namespace {ns}: {e}"));
        }
    }
    problems
}

/// What a move did.
pub enum Outcome {
    /// Moved (or, dry, would move) what the plan holds.
    Moved(Plan),
    /// Finished an earlier move that failed while deleting from the source.
    Finished,
}

/// Moves the Clusters of `options` from `source` to `target`.
pub async fn move_to_cluster(
    source: &Endpoint,
    target: &Endpoint,
    options: &Options,
    progress: &dyn Progress,
) -> Result<Outcome> {
    progress.step("Performing move...");
    if options.dry_run {
        progress.step("********************************************************");
        progress.step("This is a dry-run move, will not perform any real action");
        progress.step("********************************************************");
    }
    let (source_id, target_id) = (source.identity().await?, target.identity().await?);
    if source_id == target_id {
        return refused(format!(
            "the source and the target are the same cluster ({} and {}); pass the other management cluster's kubeconfig with --to-kubeconfig",
            source.name, target.name
        ));
    }
    let journal = read_journal(source, &options.namespace).await?;
    if let Some(j) = &journal {
        if j.target != target_id {
            return refused(format!(
                "an unfinished move from namespace {} to {} is recorded in ConfigMap {}/{JOURNAL}; run that move again to finish it",
                options.namespace, j.target_name, options.namespace
            ));
        }
        if j.phase == Phase::Deleting {
            progress.step(&format!(
                "Finishing the move recorded in {}/{JOURNAL}: deleting what is left in the source",
                options.namespace
            ));
            if !options.dry_run {
                delete_sources(source, j, progress).await?;
                progress.step("Resuming the target cluster");
                set_paused(target, &j.clusters, &j.cluster_classes, false).await?;
                remove_journal(source, &options.namespace).await?;
            }
            return Ok(Outcome::Finished);
        }
    }
    let paused_by_move: BTreeSet<ObjectRef> = journal
        .iter()
        .flat_map(|j| j.clusters.iter().chain(&j.cluster_classes).cloned())
        .collect();

    // 1. What moves.
    progress.step("Discovering Cluster API objects");
    let discovered = discover(source, options, &paused_by_move).await?;
    let plan = &discovered.plan;
    let (clusters, classes) = (plan.core("Cluster"), plan.core("ClusterClass"));
    progress.step(&format!(
        "Moving Cluster API objects Clusters={}",
        clusters.len()
    ));
    progress.step(&format!(
        "Moving Cluster API objects ClusterClasses={}",
        classes.len()
    ));

    // 2. The target, checked before anything changes.
    check_target_providers(source, target).await?;
    check_target_kinds(target, plan).await?;
    let namespaces = ensure_namespaces(target, plan, options.dry_run).await?;
    if let Err(e) = dry_run_creates(target, &discovered.plan, &discovered.objects).await {
        undo_creates(target, &[], &namespaces).await;
        return Err(e);
    }
    if options.dry_run {
        return Ok(Outcome::Moved(discovered.plan));
    }

    // 3.–4. Pause, look again, create; undone on failure.
    let mut journal = Journal::for_plan(target_id.clone(), target.name.clone(), plan);
    write_journal(source, &options.namespace, &journal).await?;
    let mut paused = Roots::of(plan);
    let mut created = Vec::new();
    let result = async {
        pause(source, plan, progress).await?;
        // What moves, looked at again now that the controllers have stopped: until the pause
        // they went on, and what they deleted meanwhile (an old MachineSet of a rollout, say)
        // must not be read back.
        let settled = discover(source, options, &paused.with(&paused_by_move)).await?;
        // A Cluster created meanwhile moves too, paused like the others.
        let settled_roots = Roots::of(&settled.plan);
        if !settled_roots.within(&paused) {
            paused.add(settled_roots);
            pause(source, &settled.plan, progress).await?;
        }
        journal = Journal::for_plan(target_id, target.name.clone(), &settled.plan);
        write_journal(source, &options.namespace, &journal).await?;
        create_all(source, target, &settled.plan, progress, &mut created).await?;
        Ok::<_, MoveError>(settled.plan)
    }
    .await;
    let plan = match result {
        Ok(plan) => plan,
        Err(e) => {
            progress.phase_done();
            let problems = undo_creates(target, &created, &namespaces).await;
            let resumed = set_paused(source, &paused.clusters, &paused.classes, false).await;
            let journal_removed = remove_journal(source, &options.namespace).await;
            let undone = if problems.is_empty() && resumed.is_ok() && journal_removed.is_ok() {
                "nothing was changed: the objects created in the target were removed and the source resumed".to_string()
            } else {
                format!(
                    "undoing it failed too, check both clusters: {}",
                    problems
                        .into_iter()
                        .chain(resumed.err().map(|e| e.to_string()))
                        .chain(journal_removed.err().map(|e| e.to_string()))
                        .collect::<Vec<_>>()
                        .join("; ")
                )
            };
            return refused(format!("{e}\n{undone}"));
        }
    };

    // 5.–6. Delete from the source, resume the target: from here on, forward only.
    journal.phase = Phase::Deleting;
    write_journal(source, &options.namespace, &journal).await?;
    let forward = async {
        delete_sources(source, &journal, progress).await?;
        progress.step("Resuming the target cluster");
        set_paused(target, &journal.clusters, &journal.cluster_classes, false).await?;
        remove_journal(source, &options.namespace).await
    };
    forward.await.map_err(|e| {
        MoveError::Refused(format!(
            "{e}\nthe objects are all in the target; run the same move again to finish deleting them from the source and resume the target"
        ))
    })?;
    Ok(Outcome::Moved(plan))
}

/// The Clusters and ClusterClasses a move pauses.
struct Roots {
    clusters: Vec<ObjectRef>,
    classes: Vec<ObjectRef>,
}

impl Roots {
    fn of(plan: &Plan) -> Roots {
        Roots {
            clusters: plan.core("Cluster"),
            classes: plan.core("ClusterClass"),
        }
    }

    fn add(&mut self, other: Roots) {
        for (ours, theirs) in [
            (&mut self.clusters, other.clusters),
            (&mut self.classes, other.classes),
        ] {
            for o in theirs {
                if !ours.contains(&o) {
                    ours.push(o);
                }
            }
        }
    }

    fn within(&self, other: &Roots) -> bool {
        self.clusters.iter().all(|c| other.clusters.contains(c))
            && self.classes.iter().all(|c| other.classes.contains(c))
    }

    /// These and `others`, as a set.
    fn with(&self, others: &BTreeSet<ObjectRef>) -> BTreeSet<ObjectRef> {
        self.clusters
            .iter()
            .chain(&self.classes)
            .chain(others)
            .cloned()
            .collect()
    }
}

/// Pauses the plan's Clusters and ClusterClasses and waits until their providers are ready
/// to move and the source's controllers have let go of them.
async fn pause(source: &Endpoint, plan: &Plan, progress: &dyn Progress) -> Result<()> {
    progress.step("Pausing the source cluster");
    let roots = Roots::of(plan);
    set_paused(source, &roots.clusters, &roots.classes, true).await?;
    progress.step("Waiting for all resources to be ready to move");
    wait_for_block_move(source, plan, progress).await?;
    wait_for_claims_released(source, &roots.clusters, progress).await
}

/// Creates the plan's objects in the target, group by group, recording what it created.
async fn create_all(
    source: &Endpoint,
    target: &Endpoint,
    plan: &Plan,
    progress: &dyn Progress,
    created: &mut Vec<ObjectRef>,
) -> Result<()> {
    progress.phase("Creating objects in the target cluster", plan.len());
    let mut new_uids: BTreeMap<String, String> = BTreeMap::new();
    for group in &plan.groups {
        let results: Vec<(&Node, Result<(String, bool)>)> = futures::stream::iter(group)
            .map(|n| {
                let new_uids = &new_uids;
                async move {
                    let r = match read_source(source, &n.object).await {
                        Ok(live) => create_in_target(target, n, &live, true, new_uids).await,
                        Err(e) => Err(e),
                    };
                    progress.object("Creating", &n.object);
                    (n, r)
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        let mut errors = Vec::new();
        for (n, r) in results {
            match r {
                Ok((new_uid, was_created)) => {
                    if was_created {
                        created.push(n.object.clone());
                    }
                    new_uids.insert(n.uid.clone(), new_uid);
                }
                Err(e) => errors.push(e.to_string()),
            }
        }
        if !errors.is_empty() {
            return refused(aggregate(&errors));
        }
    }
    progress.phase_done();
    Ok(())
}
