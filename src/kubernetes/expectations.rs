//! kube-controller-manager's expectations: the Pods a controller's pass created and deleted,
//! remembered per owner until its cache shows them. Without them the pass after a create,
//! run on a cache that lacks the new Pod, creates a second one for the same slot; the pass
//! after that deletes one of the two, and on a cache that still shows both, the next may
//! delete the other.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

/// How long created or deleted Pods may take to show in the cache before the owner is looked
/// at afresh (kube gives up after five minutes; a cache here lags by milliseconds).
const TIMEOUT: Duration = Duration::from_secs(30);

/// The Pods a cache holds, by `namespace/name`, and whether each is being deleted.
pub struct CachedPods(BTreeMap<String, bool>);

impl CachedPods {
    pub fn of(pods: &[Arc<Pod>]) -> CachedPods {
        CachedPods(
            pods.iter()
                .map(|p| {
                    (
                        key(&p.namespace().unwrap_or_default(), &p.name_any()),
                        p.metadata.deletion_timestamp.is_some(),
                    )
                })
                .collect(),
        )
    }

    fn shows_created(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    fn shows_deleted(&self, key: &str) -> bool {
        self.0.get(key).is_none_or(|deleting| *deleting)
    }
}

/// A Pod's key in [`CachedPods`] and in what a pass reports it created or deleted.
pub fn key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// What one pass wrote for an owner.
#[derive(Debug, Default)]
pub struct Writes {
    pub created: BTreeSet<String>,
    pub deleted: BTreeSet<String>,
}

/// Per owner uid, the writes its cache has not shown yet.
#[derive(Default)]
pub struct Expectations {
    pending: BTreeMap<String, (Writes, Instant)>,
}

impl Expectations {
    /// Whether the owner may be planned again: the cache shows everything its last pass
    /// wrote, or that pass is older than the timeout. Forgets the writes when so.
    pub fn settled(&mut self, owner: &str, cache: &CachedPods) -> bool {
        let Some((writes, at)) = self.pending.get(owner) else {
            return true;
        };
        let shown = writes.created.iter().all(|k| cache.shows_created(k))
            && writes.deleted.iter().all(|k| cache.shows_deleted(k));
        if shown || at.elapsed() >= TIMEOUT {
            self.pending.remove(owner);
            return true;
        }
        false
    }

    /// Remembers what a pass wrote for `owner` (nothing, when it wrote nothing).
    pub fn expect(&mut self, owner: String, writes: Writes) {
        if !writes.created.is_empty() || !writes.deleted.is_empty() {
            self.pending.insert(owner, (writes, Instant::now()));
        }
    }

    /// Forgets owners that are gone.
    pub fn retain(&mut self, live: impl IntoIterator<Item = String>) {
        let live: BTreeSet<String> = live.into_iter().collect();
        self.pending.retain(|uid, _| live.contains(uid));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(pods: &[(&str, bool)]) -> CachedPods {
        let pods: Vec<Arc<Pod>> = pods
            .iter()
            .map(|(name, deleting)| {
                let mut pod = Pod::default();
                pod.metadata.namespace = Some("ns".into());
                pod.metadata.name = Some((*name).into());
                if *deleting {
                    pod.metadata.deletion_timestamp =
                        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                        ));
                }
                Arc::new(pod)
            })
            .collect();
        CachedPods::of(&pods)
    }

    fn writes(created: &[&str], deleted: &[&str]) -> Writes {
        Writes {
            created: created.iter().map(|n| key("ns", n)).collect(),
            deleted: deleted.iter().map(|n| key("ns", n)).collect(),
        }
    }

    #[test]
    fn an_owner_waits_until_the_cache_shows_its_writes() {
        let cases: &[(&str, Writes, CachedPods, bool)] = &[
            ("nothing written", writes(&[], &[]), cache(&[]), true),
            (
                "created, not seen yet",
                writes(&["a"], &[]),
                cache(&[]),
                false,
            ),
            (
                "created and seen",
                writes(&["a"], &[]),
                cache(&[("a", false)]),
                true,
            ),
            (
                "created, seen already being deleted",
                writes(&["a"], &[]),
                cache(&[("a", true)]),
                true,
            ),
            (
                "deleted, still shown",
                writes(&[], &["b"]),
                cache(&[("b", false)]),
                false,
            ),
            (
                "deleted, shown terminating",
                writes(&[], &["b"]),
                cache(&[("b", true)]),
                true,
            ),
            ("deleted and gone", writes(&[], &["b"]), cache(&[]), true),
            (
                "one of two creates seen",
                writes(&["a", "c"], &[]),
                cache(&[("a", false)]),
                false,
            ),
        ];
        for (case, w, cache, settled) in cases {
            let mut expectations = Expectations::default();
            expectations.expect(
                "owner".into(),
                Writes {
                    created: w.created.clone(),
                    deleted: w.deleted.clone(),
                },
            );
            assert_eq!(expectations.settled("owner", cache), *settled, "{case}");
            assert!(expectations.settled("other", cache), "{case}: other owners");
        }
    }

    #[test]
    fn settled_writes_are_forgotten_and_gone_owners_too() {
        let mut expectations = Expectations::default();
        expectations.expect("owner".into(), writes(&["a"], &[]));
        assert!(expectations.settled("owner", &cache(&[("a", false)])));
        // Forgotten: a later cache without the Pod (deleted since) does not hold the owner.
        assert!(expectations.settled("owner", &cache(&[])));
        expectations.expect("owner".into(), writes(&["a"], &[]));
        expectations.retain(["someone-else".to_string()]);
        assert!(expectations.settled("owner", &cache(&[])));
    }
}
