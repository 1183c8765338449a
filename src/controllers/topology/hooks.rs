//! The Runtime Extensions the topology controller calls, at upstream's points: the lifecycle
//! hooks — BeforeClusterCreate before any topology object exists, AfterControlPlaneInitialized
//! once, the upgrade hooks around each step of an upgrade ([`upgrade`]), BeforeClusterDelete
//! before the Cluster controller may delete anything (it then marks the Cluster
//! `runtime.cluster.x-k8s.io/ok-to-delete`) — and a ClusterClass's external patches
//! ([`PatchesOf`]). Hooks still to call are tracked in the Cluster's
//! `runtime.cluster.x-k8s.io/pending-hooks` annotation. A hook that answers
//! `retryAfterSeconds` holds what waits for it; its message says why.

use std::time::Duration;

use kube::ResourceExt;
use kube::api::Api;
use serde_json::{Map, Value, json};

use super::versions::{self, Current};
use crate::api::Cluster;
use crate::api::runtime::hooks::{Hook, Response};
use crate::api::runtime::{OK_TO_DELETE_ANNOTATION, PENDING_HOOKS_ANNOTATION};
use crate::reconcile::{Context, Result, common};

/// The ClusterClass's external patches of a Cluster (in `namespace`), called through the
/// registered extensions.
pub struct PatchesOf<'a> {
    pub ctx: &'a Context,
    pub namespace: String,
}

impl super::patches::PatchExtensions for PatchesOf<'_> {
    fn call<'a>(
        &'a self,
        hook: Hook,
        handler: &'a str,
        settings: &'a std::collections::BTreeMap<String, String>,
        body: Map<String, Value>,
    ) -> futures::future::BoxFuture<'a, std::result::Result<Response, String>> {
        Box::pin(async move {
            self.ctx
                .extensions
                .call_one(hook, handler, &self.namespace, settings, body)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// A hook holding what waits for it: for how long, and why (upstream's words).
#[derive(Clone, Debug, PartialEq)]
pub struct Hold {
    pub retry_after: Duration,
    pub message: String,
}

/// `Following hooks are blocking <action>: <Hook>: <message>`, as upstream says it.
fn hold(hook: Hook, action: &str, retry_after: i32, message: &str) -> Hold {
    let hook_message = if message.is_empty() {
        hook.name().to_string()
    } else {
        format!("{}: {message}", hook.name())
    };
    Hold {
        retry_after: Duration::from_secs(retry_after.max(1) as u64),
        message: format!("Following hooks are blocking {action}: {hook_message}"),
    }
}

/// The Cluster as a request carries it: no status, no managed fields, no last-applied
/// annotation (upstream's `cleanupCluster`).
fn request_cluster(cluster: &Cluster) -> Value {
    let mut value = serde_json::to_value(cluster).expect("Clusters serialize");
    if let Some(o) = value.as_object_mut() {
        o.remove("status");
    }
    if let Some(meta) = value["metadata"].as_object_mut() {
        meta.remove("managedFields");
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    }
    value
}

fn body(cluster: &Cluster, fields: Value) -> Map<String, Value> {
    let mut body = Map::new();
    body.insert("cluster".into(), request_cluster(cluster));
    if let Value::Object(fields) = fields {
        body.extend(fields);
    }
    body
}

/// Calls a hook that can hold; its Hold when it does.
async fn call_holding(
    ctx: &Context,
    cluster: &Cluster,
    hook: Hook,
    action: &str,
    fields: Value,
) -> Result<Option<Hold>> {
    let ns = cluster.namespace().unwrap_or_default();
    let response = ctx
        .extensions
        .call_all(hook, &ns, body(cluster, fields))
        .await?;
    Ok((response.retry_after() != 0)
        .then(|| hold(hook, action, response.retry_after(), &response.message)))
}

/// BeforeClusterCreate, while the topology is yet to be created (the Cluster refers to no
/// infrastructure cluster nor control plane).
pub async fn before_cluster_create(ctx: &Context, cluster: &Cluster) -> Result<Option<Hold>> {
    if !being_created(cluster) {
        return Ok(None);
    }
    call_holding(
        ctx,
        cluster,
        Hook::BeforeClusterCreate,
        "Cluster topology creation",
        json!({}),
    )
    .await
}

fn being_created(cluster: &Cluster) -> bool {
    cluster.spec.infrastructure_ref.is_none() && cluster.spec.control_plane_ref.is_none()
}

/// The upgrade hooks, in upstream's order, each holding the next part of the upgrade:
/// BeforeClusterUpgrade (once per upgrade) and BeforeControlPlaneUpgrade before each step of
/// the control plane; AfterControlPlaneUpgrade after each (holding the next step and the
/// workers); BeforeWorkersUpgrade before the workers move, AfterWorkersUpgrade once they have,
/// AfterClusterUpgrade once everything has. The hooks after a step are tracked as pending from
/// the moment the step starts. What holds is recorded in `current` for the plan.
pub async fn upgrade(ctx: &Context, cluster: &Cluster, current: &mut Current) -> Result<()> {
    let Some(target) = cluster.spec.topology.as_ref().map(|t| t.version.clone()) else {
        return Ok(());
    };
    let Some((control_plane, stable)) = versions::control_plane_now(current) else {
        return Ok(());
    };
    let steps = versions::control_plane_steps(&current.class_versions, &control_plane, &target);
    let plan = |steps: &[String]| {
        json!(
            steps
                .iter()
                .map(|v| json!({"version": v}))
                .collect::<Vec<_>>()
        )
    };
    let behind = versions::workers_behind_at(cluster, current);
    let workers_plan = plan(&behind.iter().map(|_| target.clone()).collect::<Vec<_>>());
    let mut done = Vec::new();
    if stable && is_pending(cluster, Hook::AfterControlPlaneUpgrade) {
        let fields = json!({
            "kubernetesVersion": control_plane,
            "controlPlaneUpgrades": plan(&steps),
            "workersUpgrades": workers_plan,
        });
        if let Some(hold) = call_holding(
            ctx,
            cluster,
            Hook::AfterControlPlaneUpgrade,
            "upgrade",
            fields,
        )
        .await?
        {
            current.upgrade_hold = Some(hold.message.clone());
            current.workers_hold = Some(hold.message);
            return update_pending(ctx, cluster, &done, &[]).await;
        }
        done.push(Hook::AfterControlPlaneUpgrade);
    }
    if let Some((from, to)) = versions::upgrade_starts(cluster, current) {
        let fields = json!({
            "fromKubernetesVersion": from,
            "toKubernetesVersion": to,
            "controlPlaneUpgrades": plan(&steps),
            "workersUpgrades": workers_plan,
        });
        let first = !is_pending(cluster, Hook::AfterClusterUpgrade);
        let before = [Hook::BeforeClusterUpgrade, Hook::BeforeControlPlaneUpgrade];
        for hook in before.into_iter().skip(if first { 0 } else { 1 }) {
            if let Some(hold) = call_holding(ctx, cluster, hook, "upgrade", fields.clone()).await? {
                current.upgrade_hold = Some(hold.message);
                // Past BeforeClusterUpgrade, the upgrade has started: it is not asked again.
                let started = if hook == Hook::BeforeControlPlaneUpgrade {
                    vec![Hook::AfterClusterUpgrade]
                } else {
                    Vec::new()
                };
                return update_pending(ctx, cluster, &done, &started).await;
            }
        }
        let mut after = vec![Hook::AfterClusterUpgrade, Hook::AfterControlPlaneUpgrade];
        if behind.is_some() {
            after.extend([Hook::BeforeWorkersUpgrade, Hook::AfterWorkersUpgrade]);
        }
        return update_pending(ctx, cluster, &done, &after).await;
    }
    if !versions::control_plane_upgraded(cluster, current) {
        return update_pending(ctx, cluster, &done, &[]).await;
    }
    if is_pending(cluster, Hook::BeforeWorkersUpgrade) {
        let fields = json!({
            "fromKubernetesVersion": behind.as_deref().unwrap_or(&target),
            "toKubernetesVersion": target,
            "controlPlaneUpgrades": [],
            "workersUpgrades": workers_plan,
        });
        if let Some(hold) =
            call_holding(ctx, cluster, Hook::BeforeWorkersUpgrade, "upgrade", fields).await?
        {
            current.workers_hold = Some(hold.message);
            return update_pending(ctx, cluster, &done, &[]).await;
        }
        done.push(Hook::BeforeWorkersUpgrade);
    }
    if versions::workers_upgrading(cluster, current) {
        return update_pending(ctx, cluster, &done, &[]).await;
    }
    for hook in [Hook::AfterWorkersUpgrade, Hook::AfterClusterUpgrade] {
        if !is_pending(cluster, hook) {
            continue;
        }
        let fields = if hook == Hook::AfterClusterUpgrade {
            json!({"kubernetesVersion": target})
        } else {
            json!({"kubernetesVersion": target, "controlPlaneUpgrades": [], "workersUpgrades": []})
        };
        if let Some(hold) = call_holding(ctx, cluster, hook, "upgrade", fields).await? {
            current.finish_hold = Some(hold.message);
            break;
        }
        done.push(hook);
    }
    update_pending(ctx, cluster, &done, &[]).await
}

/// AfterControlPlaneInitialized: marked pending while the topology is being created (when the
/// management cluster has extensions), called once the Cluster's ControlPlaneInitialized is
/// True, then marked done.
pub async fn after_control_plane_initialized(ctx: &Context, cluster: &Cluster) -> Result<()> {
    let hook = Hook::AfterControlPlaneInitialized;
    if being_created(cluster) {
        return update_pending(ctx, cluster, &[], &[hook]).await;
    }
    let initialized = cluster
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| {
            crate::conditions::get(
                c,
                crate::api::cluster::conditions::CONTROL_PLANE_INITIALIZED,
            )
        })
        .is_some_and(|c| c.status == "True");
    if is_pending(cluster, hook) && initialized {
        let ns = cluster.namespace().unwrap_or_default();
        ctx.extensions
            .call_all(hook, &ns, body(cluster, json!({})))
            .await?;
        update_pending(ctx, cluster, &[hook], &[]).await?;
    }
    Ok(())
}

/// BeforeClusterDelete for a deleting Cluster not yet ok to delete: None once it is (marked
/// here when no handler holds it). Without ExtensionConfigs there is nothing to ask and
/// nothing to mark: the Cluster controller does not wait then.
pub async fn before_cluster_delete(ctx: &Context, cluster: &Cluster) -> Result<Option<Hold>> {
    if cluster.annotations().contains_key(OK_TO_DELETE_ANNOTATION)
        || !ctx.extensions.in_use().await?
    {
        return Ok(None);
    }
    if let Some(hold) =
        call_holding(ctx, cluster, Hook::BeforeClusterDelete, "delete", json!({})).await?
    {
        return Ok(Some(hold));
    }
    patch_annotations(ctx, cluster, json!({OK_TO_DELETE_ANNOTATION: ""})).await?;
    Ok(None)
}

fn pending(cluster: &Cluster) -> Vec<String> {
    cluster
        .annotations()
        .get(PENDING_HOOKS_ANNOTATION)
        .map(|v| {
            v.split(',')
                .filter(|h| !h.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn is_pending(cluster: &Cluster, hook: Hook) -> bool {
    pending(cluster).iter().any(|h| h == hook.name())
}

/// Marks `done` hooks as called and `started` ones as pending (the latter only when the
/// management cluster has extensions), in one write; the annotation goes with the last hook.
async fn update_pending(
    ctx: &Context,
    cluster: &Cluster,
    done: &[Hook],
    started: &[Hook],
) -> Result<()> {
    let before = pending(cluster);
    let mut hooks: Vec<String> = before
        .iter()
        .filter(|h| !done.iter().any(|d| d.name() == *h))
        .cloned()
        .collect();
    let kept = hooks.len();
    for h in started {
        if !hooks.iter().any(|p| p == h.name()) {
            hooks.push(h.name().to_string());
        }
    }
    if hooks.len() > kept && !ctx.extensions.in_use().await? {
        hooks.truncate(kept);
    }
    if hooks == before {
        return Ok(());
    }
    hooks.sort();
    let value = if hooks.is_empty() {
        Value::Null
    } else {
        json!(hooks.join(","))
    };
    patch_annotations(ctx, cluster, json!({PENDING_HOOKS_ANNOTATION: value})).await
}

async fn patch_annotations(ctx: &Context, cluster: &Cluster, annotations: Value) -> Result<()> {
    let api: Api<Cluster> =
        Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
    let patch = json!({"metadata": {"annotations": annotations}});
    common::patch_merge(&api, &cluster.name_any(), patch).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_say_which_hook_blocks_what() {
        assert_eq!(
            hold(Hook::BeforeClusterUpgrade, "upgrade", 7, "waiting for the backup"),
            Hold {
                retry_after: Duration::from_secs(7),
                message: "Following hooks are blocking upgrade: BeforeClusterUpgrade: waiting for the backup".into()
            }
        );
        assert_eq!(
            hold(Hook::BeforeClusterDelete, "delete", 1, "").message,
            "Following hooks are blocking delete: BeforeClusterDelete"
        );
    }
}
