//! ClusterResourceSet: upstream's clusterresourceset controller. The objects held in a set's
//! ConfigMaps and Secrets (each value YAML documents or a JSON list) are created in every
//! Cluster of its namespace that its selector matches, once the Cluster's control plane is
//! initialized and its API server answers; each Cluster's ClusterResourceSetBinding records,
//! per set and resource, the hash of the data applied and whether it all went in.
//!
//! `ApplyOnce` creates each object once (one that exists already is left alone); `Reconcile`
//! applies the objects again whenever a resource's data hash changes, server-side, as
//! `capi-clusterresourceset` (upstream merge-patches the whole object, which also drops
//! fields other managers set; applying leaves those alone). The set becomes an owner of its
//! ConfigMaps and Secrets, so they move and go with it. Deleting a set removes it from every
//! binding and leaves what it created in the Clusters.
//!
//! Conditions: `ResourcesApplied` (False naming each resource that is missing or of the wrong
//! Secret type, and each Cluster whose objects failed or that is not reachable yet), `Paused`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::Value;

use crate::api::Cluster;
use crate::api::cluster_resource_set::{
    CLUSTER_RESOURCE_SET_FINALIZER, ClusterResourceSet, ClusterResourceSetBinding,
    ClusterResourceSetBindingSpec, RESOURCE_SET_SECRET_TYPE, ResourceBinding, ResourceKind,
    ResourceRef, Strategy, conditions, reasons,
};
use crate::cache::Cache;
use crate::conditions::{NewCondition, Status};
use crate::kubernetes::selectors::label_selector_matches;
use crate::reconcile::common;
use crate::reconcile::events::Severity;
use crate::reconcile::external::add_owner;
use crate::reconcile::runtime::Wiring;
use crate::reconcile::{Context, Result, StepContext};

pub const CONTROLLER: &str = "clusterresourceset";
/// The field manager of what `Reconcile` applies in the workload clusters.
const FIELD_MANAGER: &str = "capi-clusterresourceset";
/// How soon a set some Cluster did not take yet is tried again.
const RETRY: Duration = Duration::from_secs(10);

/// One resource of a set as read from the management cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct Resource {
    pub reference: ResourceRef,
    /// Its data's values ordered by key, a Secret's decoded: what is hashed and parsed.
    pub parts: Vec<Vec<u8>>,
}

/// What reading one resource of a set found.
#[derive(Clone, Debug, PartialEq)]
pub enum Read {
    Found(Resource),
    Missing,
    /// A Secret whose type is not [`RESOURCE_SET_SECRET_TYPE`].
    WrongSecretType(String),
}

/// The resource's data as upstream hashes it: values ordered by key.
pub fn parts(data: impl IntoIterator<Item = (String, Vec<u8>)>) -> Vec<Vec<u8>> {
    let sorted: BTreeMap<String, Vec<u8>> = data.into_iter().collect();
    sorted.into_values().collect()
}

/// `sha256:` and the hex digest of the parts one after another, as upstream's binding records.
pub fn hash(parts: &[Vec<u8>]) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    for part in parts {
        context.update(part);
    }
    let digest = context.finish();
    format!("sha256:{}", crate::pki::hex(digest.as_ref()))
}

/// Where a kind goes in creation order (upstream's `SortForCreate`): what others need first.
fn creation_rank(kind: &str) -> i32 {
    match kind {
        "Namespace" => -100,
        "CustomResourceDefinition" => -99,
        "StorageClass" => -98,
        "PersistentVolume" => -97,
        "PersistentVolumeClaim" => -96,
        "Secret" => -95,
        "ConfigMap" => -94,
        "ServiceAccount" => -93,
        "LimitRange" => -92,
        "Pod" => -91,
        "ReplicaSet" => -90,
        "Endpoints" => -89,
        _ => 0,
    }
}

/// The objects of a resource: each value's YAML documents (JSON is YAML) or JSON list, each
/// value's objects in creation order, the values in key order. An object without apiVersion,
/// kind or name is an error naming the value and the document.
pub fn objects(parts: &[Vec<u8>]) -> std::result::Result<Vec<Value>, String> {
    let mut all = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let text = std::str::from_utf8(part).map_err(|_| format!("value {i} is not UTF-8"))?;
        let documents: Vec<Value> =
            crate::yaml::from_multiple(text).map_err(|e| format!("value {i}: {e}"))?;
        let mut objects = Vec::new();
        for document in documents {
            match document {
                Value::Array(list) => objects.extend(list),
                Value::Null => {}
                other => objects.push(other),
            }
        }
        for (n, object) in objects.iter().enumerate() {
            for field in ["apiVersion", "kind"] {
                if !object[field].is_string() {
                    return Err(format!("value {i}, object {n}: {field} is missing"));
                }
            }
            if !object["metadata"]["name"].is_string() {
                return Err(format!("value {i}, object {n}: metadata.name is missing"));
            }
        }
        objects.sort_by_key(|o| creation_rank(o["kind"].as_str().unwrap_or_default()));
        all.extend(objects);
    }
    Ok(all)
}

/// Whether a resource is to be applied to a Cluster whose binding records `record` for it.
pub fn needs_apply(strategy: Strategy, record: Option<&ResourceBinding>, hash: &str) -> bool {
    let applied = record.is_some_and(|r| r.applied == Some(true));
    match strategy {
        Strategy::ApplyOnce => !applied,
        Strategy::Reconcile => !applied || record.and_then(|r| r.hash.as_deref()) != Some(hash),
    }
}

/// Whether a set selects a Cluster: same namespace, labels matching a selector that says
/// something (an empty selector selects nothing, as upstream's).
pub fn selects(set: &ClusterResourceSet, cluster: &Cluster) -> bool {
    let selector = &set.spec.cluster_selector;
    let says_something = selector
        .match_labels
        .as_ref()
        .is_some_and(|m| !m.is_empty())
        || selector
            .match_expressions
            .as_ref()
            .is_some_and(|m| !m.is_empty());
    says_something
        && set.namespace() == cluster.namespace()
        && label_selector_matches(selector, cluster.labels())
}

/// What stands between a set and having applied everything, for its condition.
#[derive(Clone, Debug, PartialEq)]
pub enum Problem {
    Missing(ResourceRef),
    WrongSecretType {
        name: String,
        type_: String,
    },
    /// A resource's data is not objects.
    Unreadable {
        resource: ResourceRef,
        why: String,
    },
    /// The Cluster cannot be reached yet (control plane not initialized, API server down).
    Waiting {
        cluster: String,
        why: String,
    },
    /// Objects of a resource failed in a Cluster.
    Failed {
        cluster: String,
        resource: ResourceRef,
        why: String,
    },
}

fn describe(r: &ResourceRef) -> String {
    format!("{} {}", r.kind.as_str(), r.name)
}

/// The `ResourcesApplied` condition for what stood in the way, if anything.
pub fn resources_applied(problems: &[Problem]) -> NewCondition {
    if problems.is_empty() {
        return NewCondition::new(
            conditions::RESOURCES_APPLIED,
            Status::True,
            reasons::APPLIED,
        );
    }
    let reason = if problems
        .iter()
        .any(|p| matches!(p, Problem::WrongSecretType { .. }))
    {
        reasons::WRONG_SECRET_TYPE
    } else if problems.iter().any(|p| matches!(p, Problem::Missing(_))) {
        reasons::INTERNAL_ERROR
    } else {
        reasons::NOT_APPLIED
    };
    let lines: Vec<String> = problems
        .iter()
        .map(|p| match p {
            Problem::Missing(r) => format!("{} not found; waiting for it to be created", describe(r)),
            Problem::WrongSecretType { name, type_ } => format!(
                "Secret {name} has type {type_:?}; only Secrets of type {RESOURCE_SET_SECRET_TYPE} are applied"
            ),
            Problem::Unreadable { resource, why } => {
                format!("{} does not hold objects: {why}", describe(resource))
            }
            Problem::Waiting { cluster, why } => format!("Cluster {cluster}: {why}"),
            Problem::Failed {
                cluster,
                resource,
                why,
            } => format!("Cluster {cluster}: applying {}: {why}", describe(resource)),
        })
        .collect();
    NewCondition::new(conditions::RESOURCES_APPLIED, Status::False, reason)
        .message(lines.join("; "))
}

pub fn controller(w: &Wiring) -> BoxFuture<'static, ()> {
    let controller = w.controller::<ClusterResourceSet>(CONTROLLER);
    let sets = controller.store();
    let clusters = w.ctx.clusters();
    // Clusters that appear, change labels or get their control plane initialized, and those
    // whose API server becomes reachable, wake the sets selecting them.
    let cluster_store = clusters.store();
    let mut seen: std::collections::HashMap<(Option<String>, String), Selection> =
        Default::default();
    let by_cluster = {
        let sets = sets.clone();
        clusters
            .changes()
            .filter(move |c| {
                let key = (c.namespace(), c.name_any());
                if cluster_store
                    .get(&ObjectRef::from_obj(c.as_ref()))
                    .is_none()
                {
                    seen.remove(&key);
                    return std::future::ready(false);
                }
                let now = (c.labels().clone(), control_plane_initialized(c));
                std::future::ready(seen.insert(key, now.clone()) != Some(now))
            })
            .flat_map(move |c| futures::stream::iter(sets_selecting(&sets, &c)))
    };
    let by_health = {
        let (sets, clusters) = (sets.clone(), clusters.store());
        w.ctx.workloads.health_changes().flat_map(move |change| {
            let cluster = clusters.get(&ObjectRef::new(&change.cluster).within(&change.namespace));
            futures::stream::iter(
                cluster
                    .map(|c| sets_selecting(&sets, &c))
                    .unwrap_or_default(),
            )
        })
    };
    // A ConfigMap or Secret created or changed wakes the sets owning it or listing it.
    let by_config_map =
        resource_changes::<ConfigMap>(w.client.clone(), sets.clone(), ResourceKind::ConfigMap);
    let by_secret =
        resource_changes::<Secret>(w.client.clone(), sets.clone(), ResourceKind::Secret);
    let controller = controller
        .reconcile_on(by_cluster)
        .reconcile_on(by_health)
        .reconcile_on(by_config_map)
        .reconcile_on(by_secret);
    let bindings: Arc<Cache<ClusterResourceSetBinding>> =
        Arc::new(Cache::watch(Api::all(w.client.clone())));
    w.run(CONTROLLER, controller, move |set, ctx| {
        reconcile(set, ctx, bindings.clone())
    })
}

/// What a set's work on a Cluster depends on: the Cluster's labels, and whether its control
/// plane is initialized.
type Selection = (BTreeMap<String, String>, bool);

fn control_plane_initialized(cluster: &Cluster) -> bool {
    cluster
        .status
        .as_ref()
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.control_plane_initialized)
        == Some(true)
}

fn sets_selecting(
    sets: &Store<ClusterResourceSet>,
    cluster: &Cluster,
) -> Vec<ObjectRef<ClusterResourceSet>> {
    sets.state()
        .iter()
        .filter(|s| selects(s, cluster))
        .map(|s| ObjectRef::from_obj(s.as_ref()))
        .collect()
}

/// The sets to wake when a ConfigMap or Secret (of `kind`) is created or changed: its owners
/// among them, or, before it has any, those listing it by name.
fn resource_changes<K>(
    client: Client,
    sets: Store<ClusterResourceSet>,
    kind: ResourceKind,
) -> impl futures::Stream<Item = ObjectRef<ClusterResourceSet>> + Send + 'static
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    watcher(
        Api::<PartialObjectMeta<K>>::all(client),
        watcher::Config::default(),
    )
    .default_backoff()
    .applied_objects()
    .filter_map(|o| std::future::ready(o.ok()))
    .flat_map(move |meta| {
        let namespace = meta.namespace().unwrap_or_default();
        let owners: Vec<ObjectRef<ClusterResourceSet>> = meta
            .owner_references()
            .iter()
            .filter(|r| r.kind == "ClusterResourceSet")
            .map(|r| ObjectRef::new(&r.name).within(&namespace))
            .collect();
        let wake = if owners.is_empty() {
            sets.state()
                .iter()
                .filter(|s| {
                    s.namespace().as_deref() == Some(namespace.as_str())
                        && s.spec
                            .resources
                            .iter()
                            .any(|r| r.kind == kind && r.name == meta.name_any())
                })
                .map(|s| ObjectRef::from_obj(s.as_ref()))
                .collect()
        } else {
            owners
        };
        futures::stream::iter(wake)
    })
}

pub async fn reconcile(
    set: Arc<ClusterResourceSet>,
    ctx: Arc<Context>,
    bindings: Arc<Cache<ClusterResourceSetBinding>>,
) -> Result<kube::runtime::controller::Action> {
    use kube::runtime::controller::Action;
    let namespace = set.namespace().unwrap_or_default();
    let api: Api<ClusterResourceSet> = Api::namespaced(ctx.client.clone(), &namespace);
    if common::deleting(set.as_ref()) {
        forget_set(&ctx, &set, &bindings)
            .await
            .step("removing the set from its bindings")?;
        common::remove_finalizer(&api, set.as_ref(), CLUSTER_RESOURCE_SET_FINALIZER).await?;
        return Ok(Action::await_change());
    }
    if common::ensure_finalizer(&api, set.as_ref(), CLUSTER_RESOURCE_SET_FINALIZER).await? {
        return Ok(Action::await_change());
    }
    let (is_paused, paused) = common::paused(
        ctx.management_uid(),
        None,
        "ClusterResourceSet",
        set.annotations(),
    );
    if is_paused {
        return common::record_paused(&api, set.as_ref(), paused).await;
    }

    let clusters: Vec<Arc<Cluster>> = ctx
        .clusters()
        .list(&namespace, |c| !common::deleting(c) && selects(&set, c))
        .await
        .step("reading the selected Clusters")?;
    let mut problems = Vec::new();
    let mut resources = Vec::new();
    for reference in &set.spec.resources {
        match read_resource(&ctx.client, &set, &namespace, reference)
            .await
            .step("reading the set's resources")?
        {
            Read::Found(resource) => resources.push(resource),
            Read::Missing => problems.push(Problem::Missing(reference.clone())),
            Read::WrongSecretType(type_) => problems.push(Problem::WrongSecretType {
                name: reference.name.clone(),
                type_,
            }),
        }
    }
    let strategy = set.spec.strategy.unwrap_or_default();
    for cluster in &clusters {
        problems.extend(
            apply_to_cluster(&ctx, &set, strategy, cluster, &resources, &bindings)
                .await
                .step("applying the resources")?,
        );
    }

    let mut status = set.status.clone().unwrap_or_default();
    common::set_conditions(
        &mut status.conditions,
        set.metadata.generation,
        vec![paused, resources_applied(&problems)],
    );
    status.observed_generation = set.metadata.generation;
    common::write_status(&api, &set.name_any(), set.status.as_ref(), &status).await?;
    let waiting_for_creation = problems
        .iter()
        .all(|p| matches!(p, Problem::Missing(_) | Problem::WrongSecretType { .. }));
    Ok(if waiting_for_creation {
        // The resource's creation or change wakes the set.
        Action::await_change()
    } else {
        Action::requeue(RETRY)
    })
}

/// Reads one resource of a set and makes the set one of its owners (so that it moves and goes
/// with the set, as upstream's do).
async fn read_resource(
    client: &Client,
    set: &ClusterResourceSet,
    namespace: &str,
    reference: &ResourceRef,
) -> Result<Read> {
    let data = match reference.kind {
        ResourceKind::ConfigMap => {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
            let Some(map) = api.get_opt(&reference.name).await? else {
                return Ok(Read::Missing);
            };
            add_owner(&api, &map, set).await?;
            let data = map
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.into_bytes()));
            parts(data)
        }
        ResourceKind::Secret => {
            let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
            let Some(secret) = api.get_opt(&reference.name).await? else {
                return Ok(Read::Missing);
            };
            let type_ = secret.type_.clone().unwrap_or_default();
            if type_ != RESOURCE_SET_SECRET_TYPE {
                return Ok(Read::WrongSecretType(type_));
            }
            add_owner(&api, &secret, set).await?;
            let data = secret
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0));
            parts(data)
        }
    };
    Ok(Read::Found(Resource {
        reference: reference.clone(),
        parts: data,
    }))
}

/// Applies what is due of a set's resources to one Cluster and records it in the Cluster's
/// binding; what stood in the way.
async fn apply_to_cluster(
    ctx: &Context,
    set: &ClusterResourceSet,
    strategy: Strategy,
    cluster: &Cluster,
    resources: &[Resource],
    bindings: &Cache<ClusterResourceSetBinding>,
) -> Result<Vec<Problem>> {
    let namespace = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let api: Api<ClusterResourceSetBinding> = Api::namespaced(ctx.client.clone(), &namespace);
    let hashes: Vec<String> = resources.iter().map(|r| hash(&r.parts)).collect();
    let pending = |binding: Option<&ClusterResourceSetBinding>| -> Vec<usize> {
        let entry = binding.and_then(|b| {
            b.spec
                .bindings
                .iter()
                .flatten()
                .find(|e| e.cluster_resource_set_name == set.name_any())
        });
        let owned = binding.is_some_and(|b| {
            common::has_owner(
                b.owner_references(),
                set.uid().as_deref().unwrap_or_default(),
            )
        });
        (0..resources.len())
            .filter(|&i| {
                !owned
                    || needs_apply(
                        strategy,
                        entry.and_then(|e| e.resource(&resources[i].reference)),
                        &hashes[i],
                    )
            })
            .collect()
    };
    // The cache says whether anything is due; the binding itself is read again before acting
    // on it, as the cache may not hold this set's last write yet.
    let cached = bindings
        .store()
        .get(&ObjectRef::new(&name).within(&namespace));
    if pending(cached.as_deref()).is_empty() {
        return Ok(Vec::new());
    }
    let current = api.get_opt(&name).await?;
    let due = pending(current.as_ref());
    if due.is_empty() {
        return Ok(Vec::new());
    }
    if !control_plane_initialized(cluster) {
        return Ok(vec![Problem::Waiting {
            cluster: name,
            why: "waiting for its control plane to be initialized".into(),
        }]);
    }
    let reachable = ctx.workloads.health(&namespace, &name).await?;
    let client = match (reachable, ctx.workloads.client(&namespace, &name).await?) {
        (Some(health), Some(client)) if health.reachable() => client,
        (health, _) => {
            let why = match health.and_then(|h| h.last_error) {
                Some(e) => format!("waiting for its API server to answer (last try: {e})"),
                None => "waiting for its kubeconfig Secret and API server".into(),
            };
            return Ok(vec![Problem::Waiting { cluster: name, why }]);
        }
    };

    let mut binding = current.unwrap_or_else(|| ClusterResourceSetBinding {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            ..Default::default()
        },
        spec: ClusterResourceSetBindingSpec {
            bindings: None,
            cluster_name: name.clone(),
        },
    });
    let owner = common::owner_reference(set, false);
    let owners = binding
        .metadata
        .owner_references
        .get_or_insert_with(Vec::new);
    if !common::has_owner(owners, &owner.uid) {
        owners.push(owner);
    }
    let mut problems = Vec::new();
    let mut applied = Vec::new();
    let mut discovery = Discovery::default();
    for i in due {
        let resource = &resources[i];
        let outcome = match objects(&resource.parts) {
            Err(why) => {
                problems.push(Problem::Unreadable {
                    resource: resource.reference.clone(),
                    why,
                });
                false
            }
            Ok(objects) => match apply_objects(&client, &mut discovery, strategy, &objects).await {
                Ok(()) => {
                    applied.push(describe(&resource.reference));
                    true
                }
                Err(why) => {
                    problems.push(Problem::Failed {
                        cluster: name.clone(),
                        resource: resource.reference.clone(),
                        why,
                    });
                    false
                }
            },
        };
        binding
            .spec
            .binding_of(&set.name_any())
            .set(ResourceBinding {
                name: resource.reference.name.clone(),
                kind: resource.reference.kind,
                hash: Some(hashes[i].clone()),
                last_applied_time: Some(Time(Timestamp::now())),
                applied: Some(outcome),
            });
    }
    // Where the set had no entry yet (all of its resources missing), it gets an empty one.
    binding.spec.binding_of(&set.name_any());
    write_binding(&api, &binding).await?;
    if !applied.is_empty() {
        ctx.events.publish(
            CONTROLLER,
            set,
            Severity::Normal,
            "ResourcesApplied",
            format!("applied {} to Cluster {name}", applied.join(", ")),
        );
    }
    Ok(problems)
}

/// Creates the binding, or replaces it at the version read (a set that raced another on the
/// same binding gets a conflict and tries again).
async fn write_binding(
    api: &Api<ClusterResourceSetBinding>,
    binding: &ClusterResourceSetBinding,
) -> Result<()> {
    if binding.metadata.resource_version.is_none() {
        api.create(&PostParams::default(), binding).await?;
    } else {
        api.replace(&binding.name_any(), &PostParams::default(), binding)
            .await?;
    }
    Ok(())
}

/// What the workload cluster serves, learnt as objects of each kind are applied.
#[derive(Default)]
struct Discovery {
    resources: std::collections::HashMap<(String, String), (kube::api::ApiResource, bool)>,
}

impl Discovery {
    /// The API of an object's kind (its namespace, `default` where a namespaced kind has none,
    /// as kubectl does), or why there is none.
    async fn api_for(
        &mut self,
        client: &Client,
        object: &Value,
    ) -> std::result::Result<Api<DynamicObject>, String> {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let key = (api_version.to_string(), kind.to_string());
        if !self.resources.contains_key(&key) {
            let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
            let gvk = GroupVersionKind::gvk(group, version, kind);
            let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk)
                .await
                .map_err(|e| format!("{kind} {api_version} is not served: {e}"))?;
            let namespaced = capabilities.scope == kube::discovery::Scope::Namespaced;
            self.resources.insert(key.clone(), (resource, namespaced));
        }
        let (resource, namespaced) = &self.resources[&key];
        Ok(if *namespaced {
            let namespace = object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default");
            Api::namespaced_with(client.clone(), namespace, resource)
        } else {
            Api::all_with(client.clone(), resource)
        })
    }
}

/// Applies a resource's objects in order; the first failure, naming its object, ends it.
async fn apply_objects(
    client: &Client,
    discovery: &mut Discovery,
    strategy: Strategy,
    objects: &[Value],
) -> std::result::Result<(), String> {
    for object in objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let what = match object["metadata"]["namespace"].as_str() {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        };
        let api = discovery
            .api_for(client, object)
            .await
            .map_err(|e| format!("{what}: {e}"))?;
        let result = match strategy {
            Strategy::ApplyOnce => {
                let typed: DynamicObject =
                    serde_json::from_value(object.clone()).map_err(|e| format!("{what}: {e}"))?;
                match api.create(&PostParams::default(), &typed).await {
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
                    other => other.map(drop),
                }
            }
            Strategy::Reconcile => api
                .patch(
                    name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(object),
                )
                .await
                .map(drop),
        };
        result.map_err(|e| format!("{what}: {e}"))?;
    }
    Ok(())
}

/// Takes a deleted set out of every binding of its namespace, deleting bindings left empty.
async fn forget_set(
    ctx: &Context,
    set: &ClusterResourceSet,
    bindings: &Cache<ClusterResourceSetBinding>,
) -> Result<()> {
    let namespace = set.namespace().unwrap_or_default();
    let api: Api<ClusterResourceSetBinding> = Api::namespaced(ctx.client.clone(), &namespace);
    let uid = set.uid().unwrap_or_default();
    let name = set.name_any();
    let holding = bindings
        .list(&namespace, |b| {
            common::has_owner(b.owner_references(), &uid)
                || b.spec
                    .bindings
                    .iter()
                    .flatten()
                    .any(|e| e.cluster_resource_set_name == name)
        })
        .await?;
    for cached in holding {
        let Some(mut binding) = api.get_opt(&cached.name_any()).await? else {
            continue;
        };
        if let Some(entries) = binding.spec.bindings.as_mut() {
            entries.retain(|e| e.cluster_resource_set_name != name);
        }
        if let Some(owners) = binding.metadata.owner_references.as_mut() {
            owners.retain(|o| o.uid != uid);
        }
        if binding.spec.bindings.as_ref().is_none_or(Vec::is_empty) {
            match api.delete(&binding.name_any(), &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        } else {
            api.replace(&binding.name_any(), &PostParams::default(), &binding)
                .await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn reference(kind: ResourceKind, name: &str) -> ResourceRef {
        ResourceRef {
            name: name.into(),
            kind,
        }
    }

    #[test]
    fn the_hash_is_of_the_values_in_key_order() {
        let one = parts([
            ("b".to_string(), b"2".to_vec()),
            ("a".to_string(), b"1".to_vec()),
        ]);
        let other = parts([
            ("a".to_string(), b"1".to_vec()),
            ("b".to_string(), b"2".to_vec()),
        ]);
        assert_eq!(one, [b"1".to_vec(), b"2".to_vec()]);
        assert_eq!(hash(&one), hash(&other));
        // sha256("12"), as upstream's computeHash writes the values one after another.
        assert_eq!(
            hash(&one),
            "sha256:6b51d431df5d7f141cbececcf79edf3dd861c3b4069f0b11661a3eefacbba918"
        );
    }

    #[test]
    fn objects_come_from_yaml_documents_and_json_lists_in_creation_order() {
        let yaml = b"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: cni, namespace: kube-system}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cni-config, namespace: kube-system}\n---\n".to_vec();
        let json =
            br#"[{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tigera"}}]"#
                .to_vec();
        let found: Vec<String> = objects(&[yaml, json])
            .unwrap()
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect();
        // Within a value the ConfigMap goes before the DaemonSet that mounts it; values keep
        // their order.
        assert_eq!(
            found,
            ["ConfigMap/cni-config", "DaemonSet/cni", "Namespace/tigera"]
        );
    }

    #[test]
    fn data_that_is_not_objects_is_named() {
        for (data, want) in [
            (
                &b"kind: ConfigMap\nmetadata: {name: a}\n"[..],
                "value 0, object 0: apiVersion is missing",
            ),
            (
                &b"apiVersion: v1\nkind: ConfigMap\n"[..],
                "value 0, object 0: metadata.name is missing",
            ),
            (&b"- [unclosed"[..], "value 0:"),
        ] {
            let error = objects(&[data.to_vec()]).unwrap_err();
            assert!(error.starts_with(want), "{error}");
        }
    }

    #[test]
    fn what_each_strategy_applies() {
        let record = |hash: &str, applied: bool| ResourceBinding {
            name: "cni".into(),
            kind: ResourceKind::ConfigMap,
            hash: Some(hash.into()),
            last_applied_time: None,
            applied: Some(applied),
        };
        let cases = [
            ("never tried", Strategy::ApplyOnce, None, true),
            (
                "applied",
                Strategy::ApplyOnce,
                Some(record("sha256:a", true)),
                false,
            ),
            (
                "changed since, once",
                Strategy::ApplyOnce,
                Some(record("sha256:b", true)),
                false,
            ),
            (
                "failed",
                Strategy::ApplyOnce,
                Some(record("sha256:a", false)),
                true,
            ),
            ("never tried, reconciled", Strategy::Reconcile, None, true),
            (
                "same hash",
                Strategy::Reconcile,
                Some(record("sha256:a", true)),
                false,
            ),
            (
                "changed since",
                Strategy::Reconcile,
                Some(record("sha256:b", true)),
                true,
            ),
            (
                "failed, reconciled",
                Strategy::Reconcile,
                Some(record("sha256:a", false)),
                true,
            ),
        ];
        for (name, strategy, record, want) in cases {
            assert_eq!(
                needs_apply(strategy, record.as_ref(), "sha256:a"),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn a_set_selects_clusters_of_its_namespace_by_labels() {
        let set = |selector: Value| -> ClusterResourceSet {
            serde_json::from_value(json!({
                "metadata": {"name": "cni", "namespace": "default"},
                "spec": {"clusterSelector": selector, "resources": [{"name": "cni", "kind": "ConfigMap"}]},
            }))
            .unwrap()
        };
        let cluster = |namespace: &str, labels: Value| -> Cluster {
            serde_json::from_value(json!({
                "metadata": {"name": "c1", "namespace": namespace, "labels": labels},
                "spec": {},
            }))
            .unwrap()
        };
        let calico = set(json!({"matchLabels": {"cni": "calico"}}));
        assert!(selects(
            &calico,
            &cluster("default", json!({"cni": "calico"}))
        ));
        assert!(!selects(
            &calico,
            &cluster("default", json!({"cni": "cilium"}))
        ));
        assert!(!selects(
            &calico,
            &cluster("other", json!({"cni": "calico"}))
        ));
        let any_cni = set(json!({"matchExpressions": [{"key": "cni", "operator": "Exists"}]}));
        assert!(selects(
            &any_cni,
            &cluster("default", json!({"cni": "cilium"}))
        ));
        assert!(!selects(
            &set(json!({})),
            &cluster("default", json!({"cni": "calico"}))
        ));
    }

    #[test]
    fn the_condition_names_what_is_wrong_and_what_is_awaited() {
        let cni = reference(ResourceKind::ConfigMap, "cni");
        let cases = [
            (vec![], Status::True, "Applied", ""),
            (
                vec![Problem::Missing(cni.clone())],
                Status::False,
                "InternalError",
                "ConfigMap cni not found; waiting for it to be created",
            ),
            (
                vec![
                    Problem::Missing(cni.clone()),
                    Problem::WrongSecretType {
                        name: "creds".into(),
                        type_: "Opaque".into(),
                    },
                ],
                Status::False,
                "WrongSecretType",
                "ConfigMap cni not found; waiting for it to be created; Secret creds has type \"Opaque\"; only Secrets of type addons.cluster.x-k8s.io/resource-set are applied",
            ),
            (
                vec![
                    Problem::Waiting {
                        cluster: "c1".into(),
                        why: "waiting for its control plane to be initialized".into(),
                    },
                    Problem::Failed {
                        cluster: "c2".into(),
                        resource: cni.clone(),
                        why: "DaemonSet kube-system/cni: forbidden".into(),
                    },
                ],
                Status::False,
                "NotApplied",
                "Cluster c1: waiting for its control plane to be initialized; Cluster c2: applying ConfigMap cni: DaemonSet kube-system/cni: forbidden",
            ),
        ];
        for (problems, status, reason, message) in cases {
            let c = resources_applied(&problems);
            assert_eq!(
                (c.status, c.reason.as_str(), c.message.as_str()),
                (status, reason, message)
            );
        }
    }
}
