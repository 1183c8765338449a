//! The steps every reconciler shares, written once: finalizers, the pause check, owner
//! references and labels, and patching status with conditions.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::Result;
use crate::api;
use crate::api::Cluster;
use crate::conditions::{self, NewCondition, Status};

/// How long an object whose every input is watched waits, once settled, before it is looked at
/// again anyway: upstream's sync period (`--sync-period`, 10 minutes). Shorter periodic
/// requeues of settled objects cost a fleet of a thousand clusters most of a core while
/// nothing changes. What no watch reports, a workload cluster's reachability, the health loop
/// of [`crate::workload::clusters`] announces.
pub const RESYNC: Duration = Duration::from_secs(600);

/// `period`, spread by up to a tenth either way by the object's uid, so that objects created
/// together (a fleet applied at once) do not all come due in the same second, as
/// controller-runtime jitters its resync.
pub fn spread<K: Resource>(object: &K, period: Duration) -> Duration {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    object.meta().uid.hash(&mut hasher);
    let fraction = (hasher.finish() % 1_000) as f64 / 1_000.0;
    period.mul_f64(0.9 + 0.2 * fraction)
}

/// The field manager capictl's controllers write as.
pub const MANAGER: &str = "capictl";

/// A kind whose status carries v1beta2 conditions, so the steps every reconciler shares (the
/// pause guard) can write them.
pub trait WithConditions: Resource + Clone + DeserializeOwned + Debug {
    type Status: Default + Clone + Serialize + PartialEq + Send + Sync;
    fn status(&self) -> Option<&Self::Status>;
    fn conditions(status: &mut Self::Status) -> &mut Option<Vec<Condition>>;
}

macro_rules! with_conditions {
    ($($kind:ty => $status:ty),* $(,)?) => {
        $(impl WithConditions for $kind {
            type Status = $status;
            fn status(&self) -> Option<&$status> {
                self.status.as_ref()
            }
            fn conditions(status: &mut $status) -> &mut Option<Vec<Condition>> {
                &mut status.conditions
            }
        })*
    };
}

with_conditions!(
    Cluster => crate::api::cluster::ClusterStatus,
    crate::api::Machine => crate::api::machine::MachineStatus,
    crate::api::MachineSet => crate::api::machine_set::MachineSetStatus,
    crate::api::MachinePool => crate::api::machine_pool::MachinePoolStatus,
    crate::api::DevMachinePool => crate::api::dev::DevMachinePoolStatus,
    crate::api::DockerMachinePool => crate::api::dev::DevMachinePoolStatus,
    crate::api::MachineDeployment => crate::api::machine_deployment::MachineDeploymentStatus,
    crate::api::MachineHealthCheck => crate::api::machine_health_check::MachineHealthCheckStatus,
    crate::api::KubeadmControlPlane => crate::api::kubeadm_control_plane::KubeadmControlPlaneStatus,
    crate::api::KubeadmConfig => crate::api::kubeadm_config::KubeadmConfigStatus,
    crate::api::InMemoryCluster => crate::api::in_memory::InMemoryClusterStatus,
    crate::api::InMemoryMachine => crate::api::in_memory::InMemoryMachineStatus,
    crate::api::DockerCluster => crate::api::docker::DockerClusterStatus,
    crate::api::DockerMachine => crate::api::docker::DockerMachineStatus,
    crate::api::DevCluster => crate::api::docker::DockerClusterStatus,
    crate::api::DevMachine => crate::api::docker::DockerMachineStatus,
    crate::api::ClusterClass => crate::api::cluster_class::ClusterClassStatus,
    crate::api::ClusterResourceSet => crate::api::cluster_resource_set::ClusterResourceSetStatus,
    crate::api::ExtensionConfig => crate::api::runtime::ExtensionConfigStatus,
);

/// The pause guard's write: a paused object gets its `Paused` condition (and nothing else),
/// and waits for a change (its Cluster's `spec.paused` or its annotation going).
pub async fn record_paused<K: WithConditions>(
    api: &Api<K>,
    object: &K,
    paused: NewCondition,
) -> Result<Action> {
    let mut status = object.status().cloned().unwrap_or_default();
    set_conditions(
        K::conditions(&mut status),
        object.meta().generation,
        vec![paused],
    );
    write_status(api, &object.name_any(), object.status(), &status).await?;
    Ok(Action::await_change())
}

/// Adds a finalizer; returns whether it was missing (the caller then waits for the change).
pub async fn ensure_finalizer<K>(api: &Api<K>, object: &K, finalizer: &str) -> Result<bool>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    if object.finalizers().iter().any(|f| f == finalizer) {
        return Ok(false);
    }
    let mut finalizers = object.finalizers().to_vec();
    finalizers.push(finalizer.to_string());
    // The resourceVersion makes this a compare-and-swap: a stale view gets a conflict.
    let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": object.resource_version()}});
    api.patch(
        &object.name_any(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await?;
    Ok(true)
}

/// Removes a finalizer if it is there.
pub async fn remove_finalizer<K>(api: &Api<K>, object: &K, finalizer: &str) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    if !object.finalizers().iter().any(|f| f == finalizer) {
        return Ok(());
    }
    let finalizers: Vec<&String> = object
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .collect();
    let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": object.resource_version()}});
    match api
        .patch(
            &object.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Whether an object is paused (its Cluster's `spec.paused`, its own paused annotation, or its
/// Cluster claimed by a management cluster other than `management`, this one's uid), and the
/// Paused condition that says so.
pub fn paused(
    management: &str,
    cluster: Option<&Cluster>,
    kind: &str,
    annotations: &BTreeMap<String, String>,
) -> (bool, NewCondition) {
    let mut reasons = paused_by_user(cluster, kind, annotations);
    if let Some(holder) = cluster.and_then(|c| claimed_elsewhere(c, management)) {
        reasons.push(format!(
            "the Cluster is claimed by management cluster {holder}, not this one (the Cluster's Paused condition says why)"
        ));
    }
    paused_condition(reasons)
}

/// Why the user paused an object: its Cluster's `spec.paused`, its own paused annotation.
pub fn paused_by_user(
    cluster: Option<&Cluster>,
    kind: &str,
    annotations: &BTreeMap<String, String>,
) -> Vec<String> {
    let mut reasons = Vec::new();
    if cluster.is_some_and(|c| c.spec.paused == Some(true)) {
        reasons.push("Cluster spec.paused is set to true".to_string());
    }
    if annotations.contains_key(api::PAUSED_ANNOTATION) {
        reasons.push(format!(
            "{kind} has the {} annotation",
            api::PAUSED_ANNOTATION
        ));
    }
    reasons
}

/// The management cluster other than `management` that holds the Cluster's claim, if one does.
pub fn claimed_elsewhere<'c>(cluster: &'c Cluster, management: &str) -> Option<&'c str> {
    cluster
        .annotations()
        .get(api::CLAIMED_BY_ANNOTATION)
        .map(String::as_str)
        .filter(|holder| *holder != management)
}

/// The Paused condition for these reasons (none: not paused).
pub fn paused_condition(reasons: Vec<String>) -> (bool, NewCondition) {
    if reasons.is_empty() {
        (
            false,
            NewCondition::new(
                conditions::types::PAUSED,
                Status::False,
                conditions::reasons::NOT_PAUSED,
            ),
        )
    } else {
        (
            true,
            NewCondition::new(
                conditions::types::PAUSED,
                Status::True,
                conditions::reasons::PAUSED,
            )
            .message(reasons.join(", ")),
        )
    }
}

/// An owner reference to `owner`; a controller reference when `controller`.
pub fn owner_reference<K: Resource<DynamicType = ()>>(
    owner: &K,
    controller: bool,
) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).to_string(),
        kind: K::kind(&()).to_string(),
        name: owner.name_any(),
        uid: owner.uid().unwrap_or_default(),
        controller: controller.then_some(true),
        block_owner_deletion: Some(true),
    }
}

/// Whether `refs` already has a reference to the owner with this uid.
pub fn has_owner(refs: &[OwnerReference], uid: &str) -> bool {
    refs.iter().any(|r| r.uid == uid)
}

/// The controller reference among owner references.
pub fn controller_of(refs: &[OwnerReference]) -> Option<&OwnerReference> {
    refs.iter().find(|r| r.controller == Some(true))
}

/// Sets conditions on a condition list, stamped with the object's generation.
pub fn set_conditions(
    list: &mut Option<Vec<Condition>>,
    generation: Option<i64>,
    new: Vec<NewCondition>,
) {
    let list = list.get_or_insert_with(Vec::new);
    let now = Timestamp::now();
    for c in new {
        conditions::set(list, generation.unwrap_or_default(), c, now);
    }
}

/// Writes an object's status with a merge patch on the status subresource.
pub async fn patch_status<K, S>(api: &Api<K>, name: &str, status: &S) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    S: Serialize,
{
    let patch = json!({"status": status});
    api.patch_status(name, &PatchParams::apply(MANAGER), &Patch::Merge(patch))
        .await?;
    Ok(())
}

/// Writes an object's status when it differs from the status read with the object (`read`):
/// one merge patch on the status subresource, nothing when they are the same.
pub async fn write_status<K, S>(
    api: &Api<K>,
    name: &str,
    read: Option<&S>,
    status: &S,
) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug,
    S: Serialize + PartialEq,
{
    if read != Some(status) {
        patch_status(api, name, status).await?;
    }
    Ok(())
}

/// Creates an object unless one of its name exists; whether this call created it. Creating
/// what an earlier, interrupted reconcile already made is how reconcilers stay idempotent.
pub async fn create_if_absent<K>(api: &Api<K>, object: &K) -> Result<bool>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    match api.create(&kube::api::PostParams::default(), object).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Records in a machine template's status what each of its machines has (`cpu`, `memory`,
/// `pods` as Kubernetes quantities), as infrastructure providers do for the cluster
/// autoscaler's scaling from zero; nothing is written when it already says so.
pub async fn record_template_capacity<K>(
    api: &Api<K>,
    template: &K,
    capacity: &BTreeMap<String, String>,
) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let current = serde_json::to_value(template).unwrap_or_default();
    if current["status"]["capacity"] == json!(capacity) {
        return Ok(());
    }
    api.patch_status(
        &template.name_any(),
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"capacity": capacity}})),
    )
    .await?;
    Ok(())
}

/// A merge patch of an object's spec or metadata.
pub async fn patch_merge<K>(api: &Api<K>, name: &str, patch: Value) -> Result<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    Ok(api
        .patch(name, &PatchParams::default(), &Patch::Merge(patch))
        .await?)
}

/// Whether a Machine's condition of this type is True.
pub fn machine_condition_true(m: &crate::api::Machine, condition_type: &str) -> bool {
    m.status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .is_some_and(|c| crate::conditions::is_true(c, condition_type))
}

/// In tests: the condition of this type in a status's list, or a panic naming what is missing.
#[cfg(test)]
pub fn expect_condition<'a>(
    list: Option<&'a Vec<Condition>>,
    type_: &str,
    case: &str,
) -> &'a Condition {
    list.and_then(|l| l.iter().find(|c| c.type_ == type_))
        .unwrap_or_else(|| panic!("{case}: no {type_} condition"))
}

/// The Machine that owns `object` (a bootstrap config or an infrastructure machine) and the
/// Machine's Cluster; None while either cannot be found yet.
pub async fn owning_machine_and_cluster<K: Resource>(
    client: &kube::Client,
    object: &K,
) -> Result<Option<(crate::api::Machine, Cluster)>> {
    owner_and_cluster(client, object, |m: &crate::api::Machine| {
        m.spec.cluster_name.as_str()
    })
    .await
}

/// The owner of kind `O` of `object` and the owner's Cluster (named by `cluster_of`); None
/// while either cannot be found yet.
pub async fn owner_and_cluster<K, O>(
    client: &kube::Client,
    object: &K,
    cluster_of: impl Fn(&O) -> &str,
) -> Result<Option<(O, Cluster)>>
where
    K: Resource,
    O: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug,
{
    let ns = object.meta().namespace.clone().unwrap_or_default();
    let kind = O::kind(&());
    let Some(owner) = object
        .meta()
        .owner_references
        .iter()
        .flatten()
        .find(|r| r.kind == kind)
    else {
        return Ok(None);
    };
    let Some(owner) = Api::<O>::namespaced(client.clone(), &ns)
        .get_opt(&owner.name)
        .await?
    else {
        return Ok(None);
    };
    let Some(cluster) = Api::<Cluster>::namespaced(client.clone(), &ns)
        .get_opt(cluster_of(&owner))
        .await?
    else {
        return Ok(None);
    };
    Ok(Some((owner, cluster)))
}

/// The Cluster an infrastructure object belongs to, by its `cluster.x-k8s.io/cluster-name`
/// label (which the Cluster controller sets).
pub async fn labelled_cluster<K: Resource>(
    client: &kube::Client,
    object: &K,
) -> Result<Option<Cluster>> {
    let Some(name) = object
        .meta()
        .labels
        .as_ref()
        .and_then(|l| l.get(api::CLUSTER_NAME_LABEL))
    else {
        return Ok(None);
    };
    Ok(Api::<Cluster>::namespaced(
        client.clone(),
        object.meta().namespace.as_deref().unwrap_or_default(),
    )
    .get_opt(name)
    .await?)
}

/// Whether an object is being deleted.
pub fn deleting<K: Resource>(object: &K) -> bool {
    object.meta().deletion_timestamp.is_some()
}

/// Seconds since a time, for durations like minReadySeconds.
pub fn seconds_since(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> i64 {
    Timestamp::now().as_second() - t.0.as_second()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resync_is_spread_within_a_tenth_by_uid() {
        let period = Duration::from_secs(600);
        let waits: Vec<Duration> = (0..200)
            .map(|i| {
                let machine: crate::api::Machine = serde_json::from_value(json!({
                    "metadata": {"name": "m", "uid": format!("uid-{i}")},
                    "spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "m"}}
                }))
                .unwrap();
                spread(&machine, period)
            })
            .collect();
        assert!(
            waits
                .iter()
                .all(|w| *w >= period.mul_f64(0.9) && *w <= period.mul_f64(1.1)),
            "{waits:?}"
        );
        let earliest = waits.iter().min().unwrap();
        let latest = waits.iter().max().unwrap();
        assert!(
            *latest - *earliest > Duration::from_secs(60),
            "200 objects come due over more than a minute, not together: {earliest:?}..{latest:?}"
        );
    }

    #[test]
    fn paused_table() {
        let mut cluster: Cluster =
            serde_json::from_value(json!({"metadata": {"name": "c"}, "spec": {}})).unwrap();
        let none = BTreeMap::new();
        let annotated = BTreeMap::from([(api::PAUSED_ANNOTATION.to_string(), String::new())]);
        assert!(!paused("mine", Some(&cluster), "Machine", &none).0);
        let (is, c) = paused("mine", Some(&cluster), "Machine", &annotated);
        assert!(is);
        assert_eq!(
            c.message,
            "Machine has the cluster.x-k8s.io/paused annotation"
        );
        cluster.spec.paused = Some(true);
        let (is, c) = paused("mine", Some(&cluster), "Machine", &annotated);
        assert!(is);
        assert_eq!(
            c.message,
            "Cluster spec.paused is set to true, Machine has the cluster.x-k8s.io/paused annotation"
        );
        assert_eq!(c.reason, "Paused");
    }

    #[test]
    fn a_cluster_claimed_by_another_management_cluster_pauses_its_objects() {
        let claimed = |by: &str| -> Cluster {
            serde_json::from_value(json!({"metadata": {"name": "c",
                "annotations": {(api::CLAIMED_BY_ANNOTATION): by}}, "spec": {}}))
            .unwrap()
        };
        let none = BTreeMap::new();
        let ours = claimed("mine");
        assert!(!paused("mine", Some(&ours), "Machine", &none).0);

        let theirs = claimed("6f1c");
        let (is, c) = paused("mine", Some(&theirs), "Machine", &none);
        assert!(is);
        assert_eq!(
            c.message,
            "the Cluster is claimed by management cluster 6f1c, not this one (the Cluster's Paused condition says why)"
        );
        assert!(paused_by_user(Some(&theirs), "Machine", &none).is_empty());
    }
}
