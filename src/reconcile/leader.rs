//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's: only one candidate
//! leads at a time; the others take over once the leader has not renewed the Lease for its
//! duration. Every write is a compare-and-swap on the Lease's resourceVersion.
//!
//! Two rules keep two leaders from overlapping, as client-go's do. A candidate judges a Lease
//! expired by its own clock, from when it first saw the Lease's current record, never by
//! comparing the holder's `renewTime` with its own clock (clocks of different hosts disagree).
//! And a leader gives up once it has not renewed within its renew deadline, which is shorter
//! than the lease duration, so it stops before anyone else may start.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use tokio::sync::oneshot;

/// How long a Lease lasts, how long its leader keeps trying to renew it, and how often
/// candidates try: controller-runtime's `--leader-elect-lease-duration`,
/// `--leader-elect-renew-deadline` and `--leader-elect-retry-period`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timings {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl Default for Timings {
    /// Cluster API's managers' defaults: 15 s, 10 s, 2 s.
    fn default() -> Self {
        Timings {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// client-go's jitter factor: a renew deadline must leave room for one retry period and its
/// jitter.
const JITTER_FACTOR: f64 = 1.2;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TimingsError {
    #[error(
        "the leader election's lease duration ({lease:?}) must be longer than its renew deadline ({renew:?}): a leader that cannot renew has to stop before another may take over; lengthen --leader-elect-lease-duration or shorten --leader-elect-renew-deadline"
    )]
    RenewDeadlineNotShorter { lease: Duration, renew: Duration },
    #[error(
        "the leader election's renew deadline ({renew:?}) must be longer than {JITTER_FACTOR} × its retry period ({retry:?}), so that a leader tries to renew at least once before it gives up; lengthen --leader-elect-renew-deadline or shorten --leader-elect-retry-period"
    )]
    RetryPeriodTooLong { renew: Duration, retry: Duration },
    #[error("the leader election's {0} must be longer than zero")]
    Zero(&'static str),
}

impl Timings {
    /// The default timings' proportions for another lease duration (renew deadline ⅔ of
    /// it, retry period 2/15).
    pub fn scaled(lease_duration: Duration) -> Timings {
        Timings {
            lease_duration,
            renew_deadline: lease_duration * 2 / 3,
            retry_period: lease_duration * 2 / 15,
        }
    }

    /// client-go's rules, which keep two leaders from overlapping.
    pub fn check(&self) -> Result<(), TimingsError> {
        for (what, value) in [
            ("lease duration", self.lease_duration),
            ("renew deadline", self.renew_deadline),
            ("retry period", self.retry_period),
        ] {
            if value.is_zero() {
                return Err(TimingsError::Zero(what));
            }
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(TimingsError::RenewDeadlineNotShorter {
                lease: self.lease_duration,
                renew: self.renew_deadline,
            });
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return Err(TimingsError::RetryPeriodTooLong {
                renew: self.renew_deadline,
                retry: self.retry_period,
            });
        }
        Ok(())
    }
}

/// A candidate's identity: its host and a name of its own, so that two processes on one host
/// (or a restarted one) are told apart, as controller-runtime's `<hostname>_<uuid>`.
pub fn candidate_identity() -> String {
    format!("{}_{}", host_name(), uuid::Uuid::new_v4())
}

/// This host's name (a Pod's name, in a Pod).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "capictl".into())
}

/// How a term of leadership ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Term {
    /// The candidate was asked to stop (and released the Lease, if it led).
    Stopped,
    /// Another candidate took the Lease, or it could not be renewed within the renew deadline.
    Lost,
}

/// Resolves when the leader is asked to stop: what it runs should wind down then.
pub struct Stopping(oneshot::Receiver<()>);

impl Future for Stopping {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx).map(|_| ())
    }
}

/// Whether `spec` says another candidate leads: it names a holder other than `identity`,
/// and its record has been the same for less than its lease duration by this candidate's
/// clock (`unchanged_for`, since this candidate first saw it).
fn held_by_other(spec: &LeaseSpec, identity: &str, unchanged_for: Duration) -> bool {
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder.is_empty() || holder == identity {
        return false;
    }
    let seconds = spec.lease_duration_seconds.unwrap_or(15).max(1);
    unchanged_for < Duration::from_secs(seconds as u64)
}

/// The Lease record a candidate last read, and when it first saw it.
#[derive(Default)]
struct Observed {
    record: Option<(LeaseSpec, Instant)>,
    /// The annotations of the Lease last read or written (who its holder is, for people).
    annotations: BTreeMap<String, String>,
    /// When the last successful write of ours was sent.
    renewed: Option<Instant>,
}

impl Observed {
    /// Records `spec` as read at `now`; how long it has been the same by this clock.
    fn see(&mut self, spec: &LeaseSpec, now: Instant) -> Duration {
        match &self.record {
            Some((seen, since)) if seen == spec => now.saturating_duration_since(*since),
            _ => {
                self.record = Some((spec.clone(), now));
                Duration::ZERO
            }
        }
    }
}

#[derive(Clone)]
pub struct LeaderElection {
    api: Api<Lease>,
    name: String,
    identity: String,
    timings: Timings,
    /// Written on the Lease with every acquisition and renewal.
    annotations: BTreeMap<String, String>,
    observed: Arc<Mutex<Observed>>,
}

impl LeaderElection {
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        timings: Timings,
    ) -> LeaderElection {
        LeaderElection {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            timings,
            annotations: BTreeMap::new(),
            observed: Default::default(),
        }
    }

    /// Writes `annotations` on the Lease with every acquisition and renewal: who holds it, for
    /// people and for the messages of those who wait.
    pub fn with_annotations(mut self, annotations: BTreeMap<String, String>) -> LeaderElection {
        self.annotations = annotations;
        self
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The Lease as this candidate last read or wrote it: its record, its annotations, and
    /// how long the record has been the same by this candidate's clock.
    pub fn last_seen(&self) -> Option<(LeaseSpec, BTreeMap<String, String>, Duration)> {
        let observed = self.observed.lock().unwrap();
        let (spec, since) = observed.record.clone()?;
        Some((spec, observed.annotations.clone(), since.elapsed()))
    }

    fn spec(&self, previous: Option<&LeaseSpec>) -> LeaseSpec {
        let now = MicroTime(Timestamp::now());
        let ours =
            previous.and_then(|p| p.holder_identity.as_deref()) == Some(self.identity.as_str());
        LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(self.timings.lease_duration.as_secs().max(1) as i32),
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

    /// Records a successful write of `lease` of ours, sent at `sent`.
    fn wrote(&self, lease: Lease, sent: Instant) {
        let mut observed = self.observed.lock().unwrap();
        observed.record = lease.spec.map(|s| (s, sent));
        observed.annotations = lease.metadata.annotations.unwrap_or_default();
        observed.renewed = Some(sent);
    }

    /// One attempt to take or renew the lease; whether we hold it now.
    pub async fn try_acquire(&self) -> Result<bool, kube::Error> {
        Ok(self.attempt(false).await?.is_some())
    }

    /// Takes the lease even from a holder whose term has not run out (the user says that
    /// holder is gone or must stop): the record it replaced (empty when there was no Lease),
    /// or None when another write came first.
    pub async fn take_over(&self) -> Result<Option<LeaseSpec>, kube::Error> {
        self.attempt(true).await
    }

    /// One attempt: the record replaced when we hold the lease now (empty when there was
    /// none), None when another holds it.
    async fn attempt(&self, force: bool) -> Result<Option<LeaseSpec>, kube::Error> {
        let sent = Instant::now();
        match self.api.get_opt(&self.name).await? {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        annotations: (!self.annotations.is_empty())
                            .then(|| self.annotations.clone()),
                        ..Default::default()
                    },
                    spec: Some(self.spec(None)),
                };
                match self.api.create(&PostParams::default(), &lease).await {
                    Ok(created) => {
                        self.wrote(created, sent);
                        Ok(Some(LeaseSpec::default()))
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
                    Err(e) => Err(e),
                }
            }
            Some(current) => {
                let spec = current.spec.clone().unwrap_or_default();
                let unchanged_for = {
                    let mut observed = self.observed.lock().unwrap();
                    observed.annotations = current.annotations().clone();
                    observed.see(&spec, Instant::now())
                };
                if !force && held_by_other(&spec, &self.identity, unchanged_for) {
                    return Ok(None);
                }
                let mut next = current.clone();
                next.spec = Some(self.spec(Some(&spec)));
                next.annotations_mut().extend(self.annotations.clone());
                // replace() sends the resourceVersion read: losing a race is a conflict.
                match self
                    .api
                    .replace(&current.name_any(), &PostParams::default(), &next)
                    .await
                {
                    Ok(replaced) => {
                        self.wrote(replaced, sent);
                        Ok(Some(spec))
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Waits until this candidate leads, trying every retry period.
    pub async fn acquire(&self) {
        loop {
            match self.try_acquire().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(error = %e, lease = %self.name, "leader election failed; retrying")
                }
            }
            tokio::time::sleep(self.timings.retry_period).await;
        }
    }

    /// Renews the lease every retry period; returns once leadership is lost: another
    /// candidate took the Lease, or no renewal went through within the renew deadline (the
    /// others wait out the rest of the lease duration, so the two never lead at once).
    pub async fn hold(&self) {
        loop {
            tokio::time::sleep(self.timings.retry_period).await;
            let renewed = self.observed.lock().unwrap().renewed;
            let left = renewed.map_or(Duration::ZERO, |at| {
                self.timings.renew_deadline.saturating_sub(at.elapsed())
            });
            if left.is_zero() {
                return;
            }
            match tokio::time::timeout(left, self.try_acquire()).await {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => return,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, lease = %self.name, "renewing the leader lease failed")
                }
                Err(_) => tracing::warn!(lease = %self.name, "renewing the leader lease timed out"),
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

    /// One term: waits to lead, then runs `lead` until `stop` resolves or leadership is lost.
    ///
    /// On stop, `lead`'s [`Stopping`] resolves and `lead` is awaited (it winds down), then the
    /// Lease is released so that another candidate takes over at once; `lead` returning by
    /// itself counts as a stop. On loss `lead` is dropped at once, as client-go's leaders exit:
    /// the renew deadline it missed leaves it no time to wind down. Until this candidate leads,
    /// `stop` ends the wait.
    pub async fn lead<F, Fut>(&self, stop: &mut (impl Future<Output = ()> + Unpin), lead: F) -> Term
    where
        F: FnOnce(Stopping) -> Fut,
        Fut: Future<Output = ()>,
    {
        tokio::select! {
            _ = self.acquire() => {}
            _ = &mut *stop => return Term::Stopped,
        }
        let (stopping, stopped) = oneshot::channel();
        let work = lead(Stopping(stopped));
        tokio::pin!(work);
        tokio::select! {
            _ = self.hold() => return Term::Lost,
            _ = &mut work => {}
            _ = &mut *stop => {
                let _ = stopping.send(());
                work.await;
            }
        }
        self.release().await;
        Term::Stopped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, seconds: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: (!holder.is_empty()).then(|| holder.to_string()),
            lease_duration_seconds: Some(seconds),
            ..Default::default()
        }
    }

    #[test]
    fn a_lease_is_held_by_another_until_it_has_gone_unchanged_for_its_duration() {
        let s = Duration::from_secs;
        for (spec, unchanged_for, held) in [
            (lease("", 15), s(0), false),
            (lease("me", 15), s(0), false),
            (lease("other", 15), s(0), true),
            (lease("other", 15), s(14), true),
            (lease("other", 15), s(15), false),
            (lease("other", 60), s(30), true),
        ] {
            assert_eq!(
                held_by_other(&spec, "me", unchanged_for),
                held,
                "{spec:?} unchanged for {unchanged_for:?}"
            );
        }
    }

    #[test]
    fn expiry_is_judged_by_this_candidates_clock_from_when_the_record_changed() {
        let mut observed = Observed::default();
        let start = Instant::now();
        let mut record = lease("other", 15);
        // A renewTime far in the past (the holder's clock is behind) does not make it expired.
        record.renew_time = Some(MicroTime(Timestamp::UNIX_EPOCH));
        assert_eq!(observed.see(&record, start), Duration::ZERO);
        let later = start + Duration::from_secs(10);
        assert_eq!(observed.see(&record, later), Duration::from_secs(10));
        // A renewal restarts the count.
        record.renew_time = Some(MicroTime(Timestamp::now()));
        assert_eq!(observed.see(&record, later), Duration::ZERO);
        assert_eq!(
            observed.see(&record, later + Duration::from_secs(3)),
            Duration::from_secs(3)
        );
    }

    #[test]
    fn timings_are_checked_as_client_go_checks_them() {
        let s = Duration::from_secs;
        let timings = |lease, renew, retry| Timings {
            lease_duration: s(lease),
            renew_deadline: s(renew),
            retry_period: s(retry),
        };
        assert_eq!(Timings::default().check(), Ok(()));
        assert_eq!(Timings::scaled(s(60)), timings(60, 40, 8));
        assert_eq!(Timings::scaled(Duration::from_millis(1500)).check(), Ok(()));
        assert_eq!(
            timings(10, 10, 2).check(),
            Err(TimingsError::RenewDeadlineNotShorter {
                lease: s(10),
                renew: s(10)
            })
        );
        assert_eq!(
            timings(15, 10, 9).check(),
            Err(TimingsError::RetryPeriodTooLong {
                renew: s(10),
                retry: s(9)
            })
        );
        assert_eq!(
            timings(15, 10, 0).check(),
            Err(TimingsError::Zero("retry period"))
        );
        assert!(
            timings(10, 10, 2)
                .check()
                .unwrap_err()
                .to_string()
                .contains("--leader-elect-renew-deadline")
        );
    }
}
