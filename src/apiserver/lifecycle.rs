//! The one write path of the store, as kube-apiserver's generic registry store is: creating,
//! updating and deleting objects, and what follows each write (a CRD served or no longer
//! served, the collectors woken). A DELETE marks an object deleting while finalizers or a
//! grace period hold it (a running Pod's, until its kubelet confirms), else removes it; an
//! update that takes the last finalizer off an object being deleted without a grace period
//! removes it (`BeforeDelete`, `updateForGracefulDeletionAndFinalizers`, `finalizeDelete`).
//! The handlers, the garbage collector and the namespace deleter all write through here, so
//! the generation bump, a namespace's `Terminating` phase, waking the collectors and a CRD's
//! after-delete cleanup happen whoever writes.
//!
//! Every write is a compare-and-swap on the revision of the record the caller read: a
//! [`StoreError::Conflict`] means someone else wrote first, and the caller reads again.

use std::sync::Arc;

use serde_json::{Value, json};

use super::ApiServer;
use super::gc::Propagation;
use super::object;
use super::registry::Resource;
use super::store::{Record, StoreError};

/// What a delete does to an object, decided from the object alone.
#[derive(Debug, PartialEq)]
pub enum DeletePlan {
    /// Nothing holds it: it goes now.
    Remove,
    /// Finalizers hold it: it is stored as this, marked deleting.
    Mark(Value),
    /// It is being deleted already and this delete adds no finalizer.
    AlreadyDeleting,
}

/// What a delete did.
#[derive(Debug)]
pub enum Deleted {
    /// The object as now stored: marked deleting, held by finalizers.
    Marked(Arc<Record>),
    /// It was being deleted already; nothing was written.
    AlreadyDeleting,
    /// It is gone, at this revision.
    Removed(u64),
}

/// What an update did.
#[derive(Debug)]
pub enum Updated {
    /// The object as now stored.
    Stored(Arc<Record>),
    /// The update changed nothing, so nothing was written (the record was still current).
    Unchanged,
    /// The update took the last finalizer off a deleting object, which is gone: the object as
    /// the update left it, and the revision of its removal.
    Removed(Value, u64),
}

/// Whether objects of this resource always pass through a deletion phase, finalizers or not
/// (a namespace is emptied before it goes).
fn finalizes_on_delete(resource: &Resource) -> bool {
    resource.group.is_empty() && resource.plural == "namespaces"
}

/// The grace period a DELETE gives `current`, as kube-apiserver's Pod strategy decides it: a
/// Pod bound to a Node and not finished gets the one the request asks (`gracePeriodSeconds`),
/// else its `terminationGracePeriodSeconds`, and stays until its kubelet has stopped it and
/// confirms with a grace period of 0; everything else goes at once (finalizers aside). A
/// mirror Pod goes at once too: deleting it stops nothing (its static Pod runs from the
/// node's manifest), and one of a Node that is gone would otherwise linger, still announcing
/// the member it was (kubeadm's join reads etcd's endpoints from them).
pub fn grace_period(resource: &Resource, current: &Value, requested: Option<i64>) -> i64 {
    if !(resource.group.is_empty() && resource.plural == "pods") {
        return 0;
    }
    if current["metadata"]["annotations"][super::node_authz::MIRROR_ANNOTATION].is_string() {
        return 0;
    }
    let bound = current["spec"]["nodeName"]
        .as_str()
        .is_some_and(|n| !n.is_empty());
    let finished = matches!(
        current["status"]["phase"].as_str(),
        Some("Succeeded" | "Failed")
    );
    if !bound || finished {
        return 0;
    }
    requested
        .or_else(|| current["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(30)
        .max(0)
}

/// The grace period a deleting object was given.
fn deletion_grace(object: &Value) -> i64 {
    object["metadata"]["deletionGracePeriodSeconds"]
        .as_i64()
        .unwrap_or(0)
}

/// What a delete with `propagation` and a grace period of `grace` seconds
/// ([`grace_period`]) does to `current`.
pub fn plan_delete(
    resource: &Resource,
    current: &Value,
    propagation: Propagation,
    grace: i64,
) -> DeletePlan {
    let mut finalizers = object::finalizers(current);
    let added = match propagation.finalizer() {
        Some(f) if !finalizers.iter().any(|x| x == f) => {
            finalizers.push(f.to_string());
            true
        }
        _ => false,
    };
    let held = !finalizers.is_empty() || finalizes_on_delete(resource);
    if !held && grace == 0 {
        return DeletePlan::Remove;
    }
    let deleting = object::is_deleting(current);
    // A shorter grace period shortens a graceful deletion (a kubelet's confirmation is 0).
    let shortened = deleting && grace < deletion_grace(current);
    if deleting && !added && !shortened {
        return DeletePlan::AlreadyDeleting;
    }
    let mut marked = current.clone();
    if !finalizers.is_empty() {
        marked["metadata"]["finalizers"] = json!(finalizers);
    }
    if !deleting || shortened {
        mark_deleting(resource, &mut marked, grace);
    }
    DeletePlan::Mark(marked)
}

/// Stamps the deletion: when it is due (now, plus the grace period) and the grace period, a
/// new generation where the resource counts them (controllers see the change as spec-level),
/// and a namespace's phase.
fn mark_deleting(resource: &Resource, object: &mut Value, grace: i64) {
    object["metadata"]["deletionTimestamp"] = json!(object::seconds_from_now(grace));
    object["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
    if resource.tracks_generation {
        let generation = object["metadata"]["generation"].as_i64().unwrap_or(1);
        object["metadata"]["generation"] = json!(generation + 1);
    }
    if finalizes_on_delete(resource) {
        object["status"]["phase"] = json!("Terminating");
    }
}

impl ApiServer {
    /// Refuses the deletion of an object a registered guard says must stay
    /// ([`super::admission::Chain::guard_deletion`]), and of a namespace that holds one,
    /// whoever asks: 403 with the guards' reasons.
    pub fn refuse_guarded_deletion(
        &self,
        resource: &Resource,
        object: &Value,
    ) -> Result<(), super::status::ApiError> {
        let name = object::name_of(object);
        let refuse = |message: String| {
            let qualified = if resource.group.is_empty() {
                resource.plural.clone()
            } else {
                format!("{}.{}", resource.plural, resource.group)
            };
            Err(super::status::ApiError::forbidden(format!(
                "{qualified} {name:?} is forbidden: {message}"
            )))
        };
        if let Some(why) =
            self.admission
                .deletion_refusal(&resource.group, &resource.plural, object)
        {
            return refuse(why);
        }
        if resource.group.is_empty() && resource.plural == "namespaces" {
            let held = self.guarded_in_namespace(name);
            if !held.is_empty() {
                return refuse(format!(
                    "the namespace holds objects with deletion protection: {}",
                    held.join("; ")
                ));
            }
        }
        Ok(())
    }

    /// Why the guarded objects of `namespace` may not be deleted.
    pub fn guarded_in_namespace(&self, namespace: &str) -> Vec<String> {
        let mut held = Vec::new();
        for (group, plural) in self.admission.guarded() {
            let Some(kind) = self
                .registry
                .all()
                .into_iter()
                .find(|r| r.group == group && r.plural == plural)
            else {
                continue;
            };
            let (records, _, _) =
                self.store
                    .list(&kind.namespace_prefix(Some(namespace)), None, None, |_| {
                        true
                    });
            held.extend(
                records
                    .iter()
                    .filter_map(|r| self.admission.deletion_refusal(&group, &plural, &r.value())),
            );
        }
        held
    }

    /// Stores a new object under `key` (refused if one is there).
    pub async fn create_object(
        &self,
        resource: &Resource,
        key: String,
        object: Value,
    ) -> Result<Arc<Record>, StoreError> {
        let event = self.store.create(key, object).await?;
        self.after_write(resource, &event.record);
        Ok(event.record.clone())
    }

    /// Deletes `current` as a DELETE with `propagation` and the grace period it asks
    /// (`gracePeriodSeconds`; None: the object's own) does.
    pub async fn delete_object(
        &self,
        resource: &Resource,
        current: &Record,
        propagation: Propagation,
        requested_grace: Option<i64>,
    ) -> Result<Deleted, StoreError> {
        let value = current.value();
        let grace = grace_period(resource, &value, requested_grace);
        match plan_delete(resource, &value, propagation, grace) {
            DeletePlan::Remove => self
                .remove_object(resource, current)
                .await
                .map(Deleted::Removed),
            DeletePlan::AlreadyDeleting => Ok(Deleted::AlreadyDeleting),
            DeletePlan::Mark(marked) => {
                let event = self
                    .store
                    .update(current.key.clone(), marked, Some(current.mod_revision))
                    .await?;
                self.after_write(resource, &event.record);
                Ok(Deleted::Marked(event.record.clone()))
            }
        }
    }

    /// Stores `new` in place of `current` (`old` is its object, decoded). An update that leaves
    /// a deleting object without finalizers removes it; one that changes nothing writes nothing
    /// but still checks that `current` is current, so a stale write is refused whether or not it
    /// changes anything.
    pub async fn update_object(
        &self,
        resource: &Resource,
        current: &Record,
        old: &Value,
        new: Value,
    ) -> Result<Updated, StoreError> {
        if object::is_deleting(&new)
            && object::finalizers(&new).is_empty()
            && deletion_grace(&new) == 0
        {
            let revision = self.remove_object(resource, current).await?;
            return Ok(Updated::Removed(new, revision));
        }
        if object::unchanged(old, &new) {
            self.store
                .confirm(&current.key, current.mod_revision)
                .await?;
            return Ok(Updated::Unchanged);
        }
        let event = self
            .store
            .update(current.key.clone(), new, Some(current.mod_revision))
            .await?;
        self.after_write(resource, &event.record);
        Ok(Updated::Stored(event.record.clone()))
    }

    /// Removes `current` from the store; the revision of its removal.
    pub async fn remove_object(
        &self,
        resource: &Resource,
        current: &Record,
    ) -> Result<u64, StoreError> {
        let event = self
            .store
            .delete(current.key.clone(), Some(current.mod_revision))
            .await?;
        self.after_delete(resource, current).await;
        Ok(event.revision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(group: &str, version: &str, plural: &str) -> Arc<Resource> {
        crate::apiserver::builtin::registry()
            .get(group, version, plural)
            .unwrap()
    }

    fn object(finalizers: &[&str], deleting: bool) -> Value {
        let mut o = json!({"metadata": {"name": "x", "generation": 3, "finalizers": finalizers}});
        if deleting {
            o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        }
        o
    }

    #[test]
    fn what_a_delete_does() {
        let configmaps = resource("", "v1", "configmaps");
        let deployments = resource("apps", "v1", "deployments");
        let namespaces = resource("", "v1", "namespaces");
        let marked = |plan: DeletePlan| match plan {
            DeletePlan::Mark(v) => v,
            other => panic!("expected the object to be marked, got {other:?}"),
        };
        /// A case's name, what is deleted and how, and the finalizers it is left with when it is
        /// marked (None: removed).
        type Case<'a> = (
            &'a str,
            &'a Arc<Resource>,
            Value,
            Propagation,
            Option<Vec<&'a str>>,
        );
        let cases: Vec<Case> = vec![
            (
                "nothing holds it",
                &configmaps,
                object(&[], false),
                Propagation::Background,
                None,
            ),
            (
                "a finalizer holds it",
                &configmaps,
                object(&["f"], false),
                Propagation::Background,
                Some(vec!["f"]),
            ),
            (
                "foreground adds its finalizer",
                &configmaps,
                object(&[], false),
                Propagation::Foreground,
                Some(vec!["foregroundDeletion"]),
            ),
            (
                "orphan adds its finalizer after the others",
                &configmaps,
                object(&["f"], false),
                Propagation::Orphan,
                Some(vec!["f", "orphan"]),
            ),
            (
                "a namespace always passes through Terminating",
                &namespaces,
                object(&[], false),
                Propagation::Background,
                Some(vec![]),
            ),
        ];
        for (case, resource, current, propagation, expected) in cases {
            let plan = plan_delete(resource, &current, propagation, 0);
            match expected {
                None => assert_eq!(plan, DeletePlan::Remove, "{case}"),
                Some(finalizers) => {
                    let v = marked(plan);
                    assert_eq!(object::finalizers(&v), finalizers, "{case}");
                    assert!(object::is_deleting(&v), "{case}");
                    assert_eq!(v["metadata"]["deletionGracePeriodSeconds"], 0, "{case}");
                }
            }
        }
        // Generations count the deletion only where the resource tracks them.
        let v = marked(plan_delete(
            &deployments,
            &object(&["f"], false),
            Propagation::Background,
            0,
        ));
        assert_eq!(v["metadata"]["generation"], 4);
        let v = marked(plan_delete(
            &configmaps,
            &object(&["f"], false),
            Propagation::Background,
            0,
        ));
        assert_eq!(v["metadata"]["generation"], 3);
        let v = marked(plan_delete(
            &namespaces,
            &object(&[], false),
            Propagation::Background,
            0,
        ));
        assert_eq!(v["status"]["phase"], "Terminating");
        // A second delete changes nothing unless it brings a new finalizer.
        let deleting = object(&["f"], true);
        assert_eq!(
            plan_delete(&configmaps, &deleting, Propagation::Background, 0),
            DeletePlan::AlreadyDeleting
        );
        let v = marked(plan_delete(
            &configmaps,
            &deleting,
            Propagation::Foreground,
            0,
        ));
        assert_eq!(object::finalizers(&v), ["f", "foregroundDeletion"]);
        assert_eq!(v["metadata"]["deletionTimestamp"], "2026-01-01T00:00:00Z");
    }

    #[test]
    fn a_running_pod_goes_gracefully_until_its_kubelet_confirms() {
        let pods = resource("", "v1", "pods");
        let configmaps = resource("", "v1", "configmaps");
        let pod = |node: &str, phase: &str| {
            json!({"metadata": {"name": "web", "finalizers": []},
                "spec": {"nodeName": node, "terminationGracePeriodSeconds": 5},
                "status": {"phase": phase}})
        };
        // (what, object, the request's grace period, the grace period given)
        let cases = [
            ("a running Pod gets its own", pod("w1", "Running"), None, 5),
            ("or the one asked", pod("w1", "Running"), Some(1), 1),
            ("an unscheduled Pod none", pod("", "Pending"), None, 0),
            ("a finished Pod none", pod("w1", "Succeeded"), None, 0),
            (
                "a mirror Pod none",
                {
                    let mut p = pod("w1", "Running");
                    p["metadata"]["annotations"] =
                        json!({super::super::node_authz::MIRROR_ANNOTATION: "abc"});
                    p
                },
                None,
                0,
            ),
        ];
        for (what, object, requested, expected) in cases {
            assert_eq!(grace_period(&pods, &object, requested), expected, "{what}");
        }
        assert_eq!(grace_period(&configmaps, &object(&[], false), Some(30)), 0);
        let running = pod("w1", "Running");
        let marked = match plan_delete(&pods, &running, Propagation::Background, 5) {
            DeletePlan::Mark(v) => v,
            other => panic!("a graceful deletion marks the Pod, got {other:?}"),
        };
        assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 5);
        let due = marked["metadata"]["deletionTimestamp"].as_str().unwrap();
        let due = time::OffsetDateTime::parse(due, &time::format_description::well_known::Rfc3339)
            .unwrap();
        let ahead = due - time::OffsetDateTime::now_utc();
        assert!(
            ahead > time::Duration::seconds(3) && ahead <= time::Duration::seconds(5),
            "{ahead}"
        );
        // Deleting it again with the same grace changes nothing; the kubelet's 0 removes it.
        assert_eq!(
            plan_delete(&pods, &marked, Propagation::Background, 5),
            DeletePlan::AlreadyDeleting
        );
        assert_eq!(
            plan_delete(&pods, &marked, Propagation::Background, 0),
            DeletePlan::Remove
        );
        // A shorter one shortens it.
        match plan_delete(&pods, &marked, Propagation::Background, 2) {
            DeletePlan::Mark(v) => assert_eq!(v["metadata"]["deletionGracePeriodSeconds"], 2),
            other => panic!("a shorter grace period marks the Pod again, got {other:?}"),
        }
    }
}
