//! Leader election on a `coordination.k8s.io/v1` Lease, so that only one manager reconciles a
//! management cluster at a time: take the Lease when it is free or has expired, renew it, and
//! say when it is lost. Every write is a compare-and-swap on the Lease's resourceVersion.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};

#[derive(Clone)]
pub struct LeaderElection {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
}

impl LeaderElection {
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        duration: Duration,
    ) -> LeaderElection {
        LeaderElection {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            duration,
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    fn spec(&self, previous: Option<&LeaseSpec>) -> LeaseSpec {
        let now = MicroTime(Timestamp::now());
        let ours =
            previous.and_then(|p| p.holder_identity.as_deref()) == Some(self.identity.as_str());
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.duration.as_secs().max(1) as i32),
            acquire_time: if ours {
                previous.and_then(|p| p.acquire_time.clone())
            } else {
                Some(now.clone())
            },
            renew_time: Some(now),
            lease_transitions: Some(
                previous.and_then(|p| p.lease_transitions).unwrap_or(0)
                    + i32::from(!ours && previous.is_some()),
            ),
            ..Default::default()
        }
    }

    /// Whether someone else holds an unexpired lease.
    fn held_by_other(&self, spec: &LeaseSpec) -> bool {
        let holder = spec.holder_identity.as_deref().unwrap_or_default();
        if holder.is_empty() || holder == self.identity {
            return false;
        }
        let duration = i64::from(spec.lease_duration_seconds.unwrap_or(15));
        let renewed = spec
            .renew_time
            .as_ref()
            .map(|t| t.0.as_second())
            .unwrap_or(0);
        Timestamp::now().as_second() <= renewed + duration
    }

    /// One attempt to take or renew the lease; whether we hold it now.
    pub async fn try_acquire(&self) -> Result<bool, kube::Error> {
        match self.api.get_opt(&self.name).await? {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..Default::default()
                    },
                    spec: Some(self.spec(None)),
                };
                match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
            Some(current) => {
                let spec = current.spec.clone().unwrap_or_default();
                if self.held_by_other(&spec) {
                    return Ok(false);
                }
                let mut next = current.clone();
                next.spec = Some(self.spec(Some(&spec)));
                // replace() sends the resourceVersion read: losing a race is a conflict.
                match self
                    .api
                    .replace(&current.name_any(), &PostParams::default(), &next)
                    .await
                {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Waits until this candidate leads.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, lease = %self.name, "leader election failed; retrying")
                }
            }
            tokio::time::sleep(self.duration / 4).await;
        }
    }

    /// Renews the lease until it cannot be renewed for a whole lease duration; then returns
    /// (leadership is lost and the caller must stop).
    pub async fn hold(&self) {
        let mut last_renewed = std::time::Instant::now();
        loop {
            tokio::time::sleep(self.duration / 3).await;
            match self.try_acquire().await {
                Ok(true) => last_renewed = std::time::Instant::now(),
                Ok(false) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "renewing the leader lease failed");
                    if last_renewed.elapsed() > self.duration {
                        return;
                    }
                }
            }
        }
    }

    /// Gives the lease up, so that another candidate takes over at once.
    pub async fn release(&self) {
        if let Ok(Some(mut lease)) = self.api.get_opt(&self.name).await
            && lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref())
                == Some(self.identity.as_str())
        {
            if let Some(spec) = lease.spec.as_mut() {
                spec.holder_identity = None;
            }
            let _ = self
                .api
                .replace(&self.name, &PostParams::default(), &lease)
                .await;
        }
    }
}
