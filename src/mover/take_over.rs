//! `capictl move --take-over`: this management cluster takes its Clusters' workload clusters
//! from whichever management cluster claims them (seed 003 §17: a management cluster rebuilt
//! from a backup takes the objects over). The Cluster controller does the taking
//! ([`crate::api::TAKE_OVER_ANNOTATION`]); this asks for it and waits until it is done.

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::{Endpoint, Options, Progress, Result, api_error, refused};
use crate::api::{self, Cluster};

/// How long a take-over may take: the previous holder is given half its claim (30 s) to
/// notice, and a fleet's claims are spread out.
const TAKE_OVER_WAIT: Duration = Duration::from_secs(300);

/// What a take-over did to one Cluster.
#[derive(Debug, PartialEq)]
pub struct TakenOver {
    /// namespace/name.
    pub cluster: String,
    /// The management cluster that held it before, if another.
    pub from: Option<String>,
}

/// The management cluster's own uid (its controllers make it when they start).
async fn own_identity(endpoint: &Endpoint) -> Result<String> {
    let identity =
        Api::<ConfigMap>::namespaced(endpoint.client.clone(), api::MANAGEMENT_IDENTITY_NAMESPACE)
            .get_opt(api::MANAGEMENT_IDENTITY_CONFIGMAP)
            .await
            .map_err(api_error(format!(
                "reading the identity of {}",
                endpoint.name
            )))?;
    match identity.and_then(|c| c.data?.get("uid").cloned()) {
        Some(uid) if !uid.is_empty() => Ok(uid),
        _ => refused(format!(
            "{} has no identity yet ({}/{}): its Cluster API controllers have not started; install them (`capictl init`) and try again",
            endpoint.name,
            api::MANAGEMENT_IDENTITY_NAMESPACE,
            api::MANAGEMENT_IDENTITY_CONFIGMAP
        )),
    }
}

/// The Clusters of `options` (every one of its namespace when it names none).
async fn clusters(endpoint: &Endpoint, options: &Options) -> Result<Vec<Cluster>> {
    let api: Api<Cluster> = Api::namespaced(endpoint.client.clone(), &options.namespace);
    let all = api
        .list(&ListParams::default())
        .await
        .map_err(api_error(format!(
            "listing the Clusters of namespace {} in {}",
            options.namespace, endpoint.name
        )))?
        .items;
    let missing: Vec<&String> = options
        .clusters
        .iter()
        .filter(|name| !all.iter().any(|c| c.name_any() == **name))
        .collect();
    if !missing.is_empty() {
        return refused(format!(
            "no Cluster {} in namespace {} of {}",
            missing
                .iter()
                .map(|m| m.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            options.namespace,
            endpoint.name
        ));
    }
    Ok(all
        .into_iter()
        .filter(|c| options.clusters.is_empty() || options.clusters.contains(&c.name_any()))
        .collect())
}

/// Takes the Clusters of `options` over in `endpoint`, the management cluster that is to
/// reconcile them from now on; with `dry_run`, says who holds each and changes nothing.
pub async fn take_over(
    endpoint: &Endpoint,
    options: &Options,
    progress: &dyn Progress,
) -> Result<Vec<TakenOver>> {
    let me = own_identity(endpoint).await?;
    let clusters = clusters(endpoint, options).await?;
    if clusters.is_empty() {
        return refused(format!(
            "no Cluster in namespace {} of {} to take over",
            options.namespace, endpoint.name
        ));
    }
    let taken: Vec<TakenOver> = clusters
        .iter()
        .map(|c| TakenOver {
            cluster: format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any()),
            from: c
                .annotations()
                .get(api::CLAIMED_BY_ANNOTATION)
                .filter(|holder| **holder != me)
                .cloned(),
        })
        .collect();
    if options.dry_run {
        return Ok(taken);
    }
    let api: Api<Cluster> = Api::namespaced(endpoint.client.clone(), &options.namespace);
    let asked = k8s_openapi::jiff::Timestamp::now().to_string();
    for c in &clusters {
        if c.spec.paused == Some(true) {
            return refused(format!(
                "Cluster {} is paused (spec.paused): resume it first; a paused Cluster holds no claim",
                c.name_any()
            ));
        }
        api.patch(
            &c.name_any(),
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {(api::TAKE_OVER_ANNOTATION): asked}}}),
            ),
        )
        .await
        .map_err(api_error(format!(
            "asking to take over Cluster {}",
            c.name_any()
        )))?;
    }
    progress.phase("Taking the workload clusters' claims", clusters.len());
    let deadline = tokio::time::Instant::now() + TAKE_OVER_WAIT;
    let mut waiting: Vec<String> = clusters.iter().map(|c| c.name_any()).collect();
    while !waiting.is_empty() {
        let mut still = Vec::new();
        for name in waiting {
            let live = api
                .get(&name)
                .await
                .map_err(api_error(format!("reading Cluster {name}")))?;
            let annotations = live.annotations();
            if !annotations.contains_key(api::TAKE_OVER_ANNOTATION)
                && annotations.get(api::CLAIMED_BY_ANNOTATION) == Some(&me)
                // Reconciled since: the Paused condition no longer says it waits.
                && live.waiting_for_claim(true).is_none()
            {
                let object = super::graph::ObjectRef {
                    api_version: "cluster.x-k8s.io/v1beta2".into(),
                    kind: "Cluster".into(),
                    plural: "clusters".into(),
                    namespace: live.namespace(),
                    name,
                };
                progress.object("Took over", &object);
            } else {
                still.push(name);
            }
        }
        waiting = still;
        if waiting.is_empty() {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            progress.phase_done();
            return refused(format!(
                "the Cluster controller of {} has not taken over {} within {}s; `kubectl get cluster {} -o yaml` shows its Paused condition",
                endpoint.name,
                waiting.join(", "),
                TAKE_OVER_WAIT.as_secs(),
                waiting[0]
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    progress.phase_done();
    Ok(taken)
}
