//! The one write path of the store, as kube-apiserver's generic registry store is: creating,
//! updating and deleting objects, and what follows each write (a CRD served or no longer
//! served, the collectors woken). A DELETE marks an object deleting while finalizers hold it,
//! else removes it; an update that takes the last finalizer off an object being deleted
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

/// What a delete with `propagation` does to `current`.
pub fn plan_delete(resource: &Resource, current: &Value, propagation: Propagation) -> DeletePlan {
    let mut finalizers = object::finalizers(current);
    let added = match propagation.finalizer() {
        Some(f) if !finalizers.iter().any(|x| x == f) => {
            finalizers.push(f.to_string());
            true
        }
        _ => false,
    };
    if finalizers.is_empty() && !finalizes_on_delete(resource) {
        return DeletePlan::Remove;
    }
    if object::is_deleting(current) && !added {
        return DeletePlan::AlreadyDeleting;
    }
    let mut marked = current.clone();
    if !finalizers.is_empty() {
        marked["metadata"]["finalizers"] = json!(finalizers);
    }
    if !object::is_deleting(&marked) {
        mark_deleting(resource, &mut marked);
    }
    DeletePlan::Mark(marked)
}

/// Stamps the deletion: the time, a zero grace period, a new generation where the resource
/// counts them (controllers see the change as spec-level), and a namespace's phase.
fn mark_deleting(resource: &Resource, object: &mut Value) {
    object["metadata"]["deletionTimestamp"] = json!(object::now());
    object["metadata"]["deletionGracePeriodSeconds"] = json!(0);
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

    /// Deletes `current` as a DELETE with `propagation` does.
    pub async fn delete_object(
        &self,
        resource: &Resource,
        current: &Record,
        propagation: Propagation,
    ) -> Result<Deleted, StoreError> {
        match plan_delete(resource, &current.value(), propagation) {
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
        if object::is_deleting(&new) && object::finalizers(&new).is_empty() {
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
            let plan = plan_delete(resource, &current, propagation);
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
        ));
        assert_eq!(v["metadata"]["generation"], 4);
        let v = marked(plan_delete(
            &configmaps,
            &object(&["f"], false),
            Propagation::Background,
        ));
        assert_eq!(v["metadata"]["generation"], 3);
        let v = marked(plan_delete(
            &namespaces,
            &object(&[], false),
            Propagation::Background,
        ));
        assert_eq!(v["status"]["phase"], "Terminating");
        // A second delete changes nothing unless it brings a new finalizer.
        let deleting = object(&["f"], true);
        assert_eq!(
            plan_delete(&configmaps, &deleting, Propagation::Background),
            DeletePlan::AlreadyDeleting
        );
        let v = marked(plan_delete(&configmaps, &deleting, Propagation::Foreground));
        assert_eq!(object::finalizers(&v), ["f", "foregroundDeletion"]);
        assert_eq!(v["metadata"]["deletionTimestamp"], "2026-01-01T00:00:00Z");
    }
}
