//! One management cluster at a time (seed 003 §17: "never let two management clusters
//! reconcile the same real resources at once"). No upstream tool does this.
//!
//! A management cluster has an identity: a uid in the ConfigMap
//! `kube-system/capictl-management-identity`, made by the first controller to start and shared
//! by every replica and every `management serve` process of that management cluster (a
//! restore makes a new one). It claims each workload cluster it reconciles with a Lease,
//! `kube-system/capictl-management`, in that workload cluster: the one resource every
//! management cluster holding a copy of the Cluster reaches. The Lease is taken and renewed
//! as client-go's leader election does ([`LeaderElection`]): a compare-and-swap on every
//! write, and expiry judged by the waiting side's own clock from when it first saw the
//! Lease's record, never by comparing the holder's clock with its own.
//!
//! The Cluster controller takes the claim ([`Claims::claim`]) and records the holder on the
//! Cluster ([`crate::api::CLAIMED_BY_ANNOTATION`]); every controller here leaves a Cluster
//! claimed by another management cluster alone, as a paused one
//! ([`super::common::paused`]). A loop here renews the claims held, and wakes the Cluster
//! whose claim another management cluster took.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use tokio::sync::broadcast;

use super::leader::{LeaderElection, Timings};
use crate::api::Cluster;
use crate::workload::clusters::WorkloadClusters;

pub use crate::api::{
    MANAGEMENT_IDENTITY_CONFIGMAP as IDENTITY_CONFIGMAP,
    MANAGEMENT_IDENTITY_NAMESPACE as IDENTITY_NAMESPACE,
};
/// The claim, in the workload cluster.
pub const LEASE_NAMESPACE: &str = "kube-system";
pub const LEASE_NAME: &str = "capictl-management";
/// On the claim Lease, for people and for the messages of the management clusters that wait:
/// the holder's host, and the Cluster's namespace/name in the holder.
pub const HOST_ANNOTATION: &str = "management.capictl.io/host";
pub const CLUSTER_ANNOTATION: &str = "management.capictl.io/cluster";
/// How long a claim lasts unrenewed, at least; with many clusters, renewals spread out
/// ([`renew_interval`]) and claims last longer.
pub const MIN_LEASE_DURATION: Duration = Duration::from_secs(60);
/// How often a claim is renewed with few clusters; and the most renewals a second.
const RENEW_INTERVAL: Duration = Duration::from_secs(10);
const RENEWALS_PER_SECOND: f64 = 20.0;

/// Who this management cluster is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagementIdentity {
    /// Shared by every replica and server of one management cluster.
    pub uid: String,
    /// This process's host (a Pod's name), for people.
    pub host: String,
}

impl ManagementIdentity {
    /// The management cluster's identity, made by the first to ask.
    pub async fn of(client: &Client) -> Result<ManagementIdentity, kube::Error> {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), IDENTITY_NAMESPACE);
        loop {
            let existing = api.get_opt(IDENTITY_CONFIGMAP).await?;
            if let Some(uid) = existing
                .as_ref()
                .and_then(|c| c.data.as_ref()?.get("uid").cloned())
                .filter(|uid| !uid.is_empty())
            {
                return Ok(ManagementIdentity {
                    uid,
                    host: super::leader::host_name(),
                });
            }
            let identity = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(IDENTITY_CONFIGMAP.into()),
                    resource_version: existing.and_then(|c| c.metadata.resource_version),
                    ..Default::default()
                },
                data: Some(BTreeMap::from([(
                    "uid".to_string(),
                    uuid::Uuid::new_v4().to_string(),
                )])),
                ..Default::default()
            };
            let written = match identity.metadata.resource_version {
                None => api.create(&PostParams::default(), &identity).await,
                // One without a uid (edited by hand) is made whole.
                Some(_) => {
                    api.replace(IDENTITY_CONFIGMAP, &PostParams::default(), &identity)
                        .await
                }
            };
            match written {
                // Another replica made it first: read theirs.
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(e) => return Err(e),
                Ok(_) => continue,
            }
        }
    }

    /// An identity that holds no claim (a plan that reconciles nothing).
    pub fn none() -> ManagementIdentity {
        ManagementIdentity {
            uid: String::new(),
            host: super::leader::host_name(),
        }
    }
}

/// The management cluster holding a claim, as the Lease says.
#[derive(Clone, Debug, PartialEq)]
pub struct Holder {
    pub uid: String,
    pub host: Option<String>,
    /// The Cluster's namespace/name in the holder.
    pub cluster: Option<String>,
    /// How long until the claim runs out unless renewed, by this management cluster's clock.
    pub expires_in: Duration,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "management cluster {}", self.uid)?;
        if let Some(host) = &self.host {
            write!(f, " (host {host}")?;
            if let Some(cluster) = &self.cluster {
                write!(f, ", Cluster {cluster} there")?;
            }
            write!(f, ")")?;
        }
        Ok(())
    }
}

/// What claiming a Cluster's workload cluster found.
#[derive(Clone, Debug, PartialEq)]
pub enum Claim {
    /// There is no workload cluster to claim yet (its kubeconfig Secret does not exist).
    NoWorkload,
    /// The workload cluster did not answer. `lapsed` when this management cluster held the
    /// claim and has not renewed it for longer than its renew deadline: another may have
    /// taken it over since.
    Unreachable { error: String, lapsed: bool },
    /// This management cluster holds the claim. After a take-over, `settling` is how long it
    /// still gives the previous holder to notice before it acts.
    Ours { settling: Option<Duration> },
    /// Another management cluster holds it.
    Theirs(Holder),
}

/// How often each claim is renewed with `claims` held: every 10 s, spread out to at most 20
/// renewals a second.
pub fn renew_interval(claims: usize) -> Duration {
    RENEW_INTERVAL.max(Duration::from_secs_f64(claims as f64 / RENEWALS_PER_SECOND))
}

/// How long a claim lasts unrenewed with `claims` held: three renewals at least.
fn lease_duration(claims: usize) -> Duration {
    MIN_LEASE_DURATION.max(renew_interval(claims) * 3)
}

/// The holder the Lease last seen names, when another.
fn holder(election: &LeaderElection, me: &str) -> Option<Holder> {
    let (spec, annotations, unchanged_for) = election.last_seen()?;
    let uid = spec.holder_identity.filter(|h| !h.is_empty() && h != me)?;
    let duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(60).max(1) as u64);
    Some(Holder {
        uid,
        host: annotations.get(HOST_ANNOTATION).cloned(),
        cluster: annotations.get(CLUSTER_ANNOTATION).cloned(),
        expires_in: duration.saturating_sub(unchanged_for),
    })
}

/// One Cluster's claim.
struct Entry {
    /// None after a failed request: made again, from the current client, on the next try.
    election: Option<LeaderElection>,
    held: bool,
    /// When the claim was last taken or renewed.
    renewed: Option<Instant>,
    /// After a take-over: until when the previous holder is given to notice.
    settle_until: Option<Instant>,
}

struct Shared {
    entries: Mutex<HashMap<(String, String), Entry>>,
    /// Clusters whose claim another management cluster took, for the Cluster controller.
    lost: broadcast::Sender<ObjectRef<Cluster>>,
}

/// This management cluster's claims on its workload clusters.
pub struct Claims {
    identity: ManagementIdentity,
    shared: Arc<Shared>,
    renewing: std::sync::OnceLock<tokio::task::JoinHandle<()>>,
}

impl Drop for Claims {
    fn drop(&mut self) {
        if let Some(renewing) = self.renewing.get() {
            renewing.abort();
        }
    }
}

impl Claims {
    pub fn new(identity: ManagementIdentity) -> Claims {
        Claims {
            identity,
            shared: Arc::new(Shared {
                entries: Mutex::new(HashMap::new()),
                lost: broadcast::channel(1024).0,
            }),
            renewing: std::sync::OnceLock::new(),
        }
    }

    pub fn identity(&self) -> &ManagementIdentity {
        &self.identity
    }

    /// The Clusters whose claim another management cluster took, from now on.
    pub fn lost(&self) -> impl futures::Stream<Item = ObjectRef<Cluster>> + Send + 'static {
        crate::cache::received(&self.shared.lost)
    }

    /// Takes or renews the claim on `cluster`'s workload cluster (from whoever holds it when
    /// `take_over`); what that found. A claim renewed recently is not asked for again.
    pub async fn claim(
        &self,
        workloads: &WorkloadClusters,
        cluster: &Cluster,
        take_over: bool,
    ) -> crate::workload::Result<Claim> {
        let (namespace, name) = (cluster.namespace().unwrap_or_default(), cluster.name_any());
        let key = (namespace.clone(), name.clone());
        let now = Instant::now();
        // A claim renewed within its interval is ours without asking anyone: each of the
        // Cluster's reconciles comes here, and the workload client costs a Secret read.
        if !take_over {
            let entries = self.shared.entries.lock().unwrap();
            let interval = renew_interval(entries.len());
            if let Some(entry) = entries.get(&key)
                && entry.held
                && entry
                    .renewed
                    .is_some_and(|at| now.duration_since(at) < interval)
            {
                return Ok(Claim::Ours {
                    settling: settling(entry.settle_until, now),
                });
            }
        }
        let Some(client) = workloads.client(&namespace, &name).await? else {
            return Ok(Claim::NoWorkload);
        };
        let election = {
            let mut entries = self.shared.entries.lock().unwrap();
            let claims = entries.len() + 1;
            let entry = entries.entry(key.clone()).or_insert(Entry {
                election: None,
                held: false,
                renewed: None,
                settle_until: None,
            });
            entry
                .election
                .get_or_insert_with(|| self.election(client, &namespace, &name, claims))
                .clone()
        };
        // Taken over: the record replaced, whose holder is given time to notice.
        let attempt = if take_over {
            election.take_over().await.map(|replaced| {
                let held = replaced.is_some();
                let grace = replaced
                    .filter(|r| {
                        r.holder_identity
                            .as_deref()
                            .is_some_and(|h| !h.is_empty() && h != self.identity.uid)
                    })
                    // The previous holder renews within a third of its lease; half of it
                    // gives it time to notice and stop.
                    .map(|r| {
                        Duration::from_secs(r.lease_duration_seconds.unwrap_or(60).max(1) as u64)
                            / 2
                    });
                (held, grace)
            })
        } else {
            election.try_acquire().await.map(|held| (held, None))
        };
        let mut entries = self.shared.entries.lock().unwrap();
        let claims = entries.len();
        let Some(entry) = entries.get_mut(&key) else {
            // Forgotten meanwhile (the Cluster went): nothing is held for it.
            return Ok(Claim::NoWorkload);
        };
        match attempt {
            Ok((true, grace)) => {
                if let Some(grace) = grace {
                    entry.settle_until = Some(now + grace);
                }
                entry.held = true;
                entry.renewed = Some(now);
                self.start_renewing(workloads);
                Ok(Claim::Ours {
                    settling: settling(entry.settle_until, now),
                })
            }
            Ok((false, _)) => {
                entry.held = false;
                Ok(match holder(&election, &self.identity.uid) {
                    Some(holder) => Claim::Theirs(holder),
                    // A write lost a race: the next try says who won.
                    None => Claim::Unreachable {
                        error: "another write to the claim came first".into(),
                        lapsed: false,
                    },
                })
            }
            Err(e) => {
                entry.election = None;
                // Past the renew deadline client-go's leaders stop at.
                let deadline = Timings::scaled(lease_duration(claims)).renew_deadline;
                let lapsed = entry.held
                    && entry
                        .renewed
                        .is_none_or(|at| now.duration_since(at) > deadline);
                Ok(Claim::Unreachable {
                    error: e.to_string(),
                    lapsed,
                })
            }
        }
    }

    fn election(
        &self,
        client: Client,
        namespace: &str,
        name: &str,
        claims: usize,
    ) -> LeaderElection {
        LeaderElection::new(
            client,
            LEASE_NAMESPACE,
            LEASE_NAME,
            &self.identity.uid,
            Timings::scaled(lease_duration(claims)),
        )
        .with_annotations(BTreeMap::from([
            (HOST_ANNOTATION.to_string(), self.identity.host.clone()),
            (
                CLUSTER_ANNOTATION.to_string(),
                format!("{namespace}/{name}"),
            ),
        ]))
    }

    /// Gives up the claim on a Cluster's workload cluster (the Cluster is paused: moved, say),
    /// so that another management cluster may take it at once.
    pub async fn release(&self, namespace: &str, cluster: &str) {
        let entry = self
            .shared
            .entries
            .lock()
            .unwrap()
            .remove(&(namespace.to_string(), cluster.to_string()));
        if let Some(Entry {
            election: Some(election),
            held: true,
            ..
        }) = entry
        {
            election.release().await;
        }
    }

    /// Whether this management cluster holds the claim on the Cluster's workload cluster.
    pub fn holds(&self, namespace: &str, cluster: &str) -> bool {
        self.shared
            .entries
            .lock()
            .unwrap()
            .get(&(namespace.to_string(), cluster.to_string()))
            .is_some_and(|e| e.held)
    }

    /// Gives up every claim (the manager stops), each within a few seconds or not at all.
    pub async fn release_all(&self) {
        let held: Vec<LeaderElection> = {
            let mut entries = self.shared.entries.lock().unwrap();
            entries
                .drain()
                .filter(|(_, e)| e.held)
                .filter_map(|(_, e)| e.election)
                .collect()
        };
        let releases = held
            .iter()
            .map(|election| tokio::time::timeout(Duration::from_secs(5), election.release()));
        futures::future::join_all(releases).await;
    }

    /// Starts the loop that renews the claims held and forgets those of Clusters that leave.
    fn start_renewing(&self, workloads: &WorkloadClusters) {
        self.renewing.get_or_init(|| {
            tokio::spawn(renew(Arc::downgrade(&self.shared), workloads.removals()))
        });
    }
}

/// How long a take-over still waits, if it does.
fn settling(until: Option<Instant>, now: Instant) -> Option<Duration> {
    until
        .map(|until| until.saturating_duration_since(now))
        .filter(|left| !left.is_zero())
}

/// Renews each claim held when due; a claim another management cluster took is let go and
/// its Cluster woken. A Cluster that leaves the management cluster (deleted, or moved away
/// without a reconcile) is forgotten, its claim released.
async fn renew(shared: Weak<Shared>, mut removals: broadcast::Receiver<(String, String)>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let removed = tokio::select! {
            _ = tick.tick() => None,
            removed = removals.recv() => match removed {
                Ok(key) => Some(key),
                Err(broadcast::error::RecvError::Lagged(_)) => None,
                Err(broadcast::error::RecvError::Closed) => return,
            },
        };
        let Some(shared) = shared.upgrade() else {
            return;
        };
        if let Some(key) = removed {
            let entry = shared.entries.lock().unwrap().remove(&key);
            if let Some(Entry {
                election: Some(election),
                held: true,
                ..
            }) = entry
            {
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(Duration::from_secs(5), election.release()).await;
                });
            }
            continue;
        }
        let now = Instant::now();
        let due: Vec<((String, String), LeaderElection)> = {
            let entries = shared.entries.lock().unwrap();
            let interval = renew_interval(entries.len());
            entries
                .iter()
                .filter(|(_, e)| {
                    e.held
                        && e.renewed
                            .is_none_or(|at| now.duration_since(at) >= interval)
                })
                .filter_map(|(key, e)| Some((key.clone(), e.election.clone()?)))
                .collect()
        };
        let renewals = due.into_iter().map(|(key, election)| async move {
            let outcome = election.try_acquire().await;
            (key, outcome)
        });
        for (key, outcome) in futures::future::join_all(renewals).await {
            let mut entries = shared.entries.lock().unwrap();
            let Some(entry) = entries.get_mut(&key) else {
                continue;
            };
            match outcome {
                Ok(true) => entry.renewed = Some(now),
                Ok(false) => {
                    entry.held = false;
                    let cluster = ObjectRef::new(&key.1).within(&key.0);
                    // No receiver is fine: the Cluster's next reconcile finds out.
                    let _ = shared.lost.send(cluster);
                }
                // Tried again at the next tick; the Cluster controller judges a lapse.
                Err(e) => {
                    tracing::debug!(namespace = %key.0, cluster = %key.1, error = %e, "renewing the claim on a workload cluster failed")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_are_renewed_every_ten_seconds_and_last_a_minute_until_a_fleet_spreads_them() {
        for (claims, interval, duration) in [
            (1, 10.0, 60.0),
            (200, 10.0, 60.0),
            (400, 20.0, 60.0),
            (1_000, 50.0, 150.0),
        ] {
            assert_eq!(
                (renew_interval(claims), lease_duration(claims)),
                (
                    Duration::from_secs_f64(interval),
                    Duration::from_secs_f64(duration)
                ),
                "{claims} claims"
            );
        }
    }

    #[test]
    fn a_holder_is_named_by_its_uid_host_and_cluster() {
        let holder = Holder {
            uid: "6f1c".into(),
            host: Some("mgmt-a".into()),
            cluster: Some("default/prod".into()),
            expires_in: Duration::from_secs(40),
        };
        assert_eq!(
            holder.to_string(),
            "management cluster 6f1c (host mgmt-a, Cluster default/prod there)"
        );
        let bare = Holder {
            host: None,
            cluster: None,
            ..holder
        };
        assert_eq!(bare.to_string(), "management cluster 6f1c");
    }
}
