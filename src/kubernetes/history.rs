//! Controller history, as kube-controller-manager's `pkg/controller/history`: the DaemonSet and
//! StatefulSet controllers record every template they run as a ControllerRevision owned by the
//! set, numbered in the order the templates were last current, holding the strategic merge
//! patch that puts the template back. `kubectl rollout history` lists them and `kubectl
//! rollout undo` applies one; a template equal to an older revision (an undo) renumbers that
//! revision as the newest instead of making another, and the revisions no Pod runs are kept
//! up to `revisionHistoryLimit` (10 by default), oldest removed first.
//!
//! [`plan`] decides, purely; [`sync`] does what it says.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use super::daemon_set::REVISION_LABEL;
use super::replica_set::controller_of;

/// kube's default `revisionHistoryLimit` for DaemonSets and StatefulSets.
pub const DEFAULT_LIMIT: i32 = 10;

/// A template as its revision holds it: the patch `kubectl rollout undo` applies to the set.
pub fn data(template: &PodTemplateSpec) -> Value {
    let mut template = serde_json::to_value(template).unwrap_or_default();
    template["$patch"] = json!("replace");
    json!({"spec": {"template": template}})
}

/// The name of a set's revision whose label carries `hash`: `<set>-<hash>`.
pub fn revision_name(set: &str, hash: &str) -> String {
    format!("{set}-{hash}")
}

/// The template a set runs now, as its history sees it.
pub struct Current<'a> {
    pub template: &'a PodTemplateSpec,
    /// The template's hash, its revision's label (and, after the set's name, its name).
    pub hash: String,
    /// The set's `status.collisionCount`, which the hash includes.
    pub collision_count: i32,
}

/// What a set's history needs.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// The revision of the current template, when none holds it yet.
    pub create: Option<ControllerRevision>,
    /// The revision holding the current template renumbered as the newest: (name, number).
    pub renumber: Option<(String, i64)>,
    /// Revisions no Pod runs beyond the limit, oldest first.
    pub delete: Vec<String>,
    /// Another template holds the current one's name: the set's `collisionCount` to record,
    /// which changes the hash.
    pub collision: Option<i32>,
}

/// What the history of `owner` (its revisions `owned`, the revisions its Pods run `live`, and
/// its `revisionHistoryLimit`) needs for its current template.
pub fn plan<K>(
    owner: &K,
    current: &Current,
    owned: &[&ControllerRevision],
    live: &BTreeSet<String>,
    limit: Option<i32>,
) -> Plan
where
    K: Resource<DynamicType = ()>,
{
    let data = data(current.template);
    let name = revision_name(&owner.name_any(), &current.hash);
    let mut out = Plan::default();
    let newest = owned.iter().filter_map(|r| r.revision).max().unwrap_or(0);
    let holds = |r: &&&ControllerRevision| r.data.0 == data;
    // Of equal revisions, the one named for the template (another is an older collision's).
    let equal = owned
        .iter()
        .filter(holds)
        .max_by_key(|r| (r.name_any() == name, r.revision));
    let kept = match equal {
        Some(revision) => {
            if revision.revision.unwrap_or(0) < newest {
                out.renumber = Some((revision.name_any(), newest + 1));
            }
            revision.name_any()
        }
        None if owned.iter().any(|r| r.name_any() == name) => {
            out.collision = Some(current.collision_count + 1);
            return out;
        }
        None => {
            out.create = Some(revision(owner, current, &name, data, newest + 1));
            name
        }
    };
    let limit = usize::try_from(limit.unwrap_or(DEFAULT_LIMIT)).unwrap_or(0);
    let mut idle: Vec<&&ControllerRevision> = owned
        .iter()
        .filter(|r| r.name_any() != kept && !live.contains(&r.name_any()))
        .collect();
    idle.sort_by_key(|r| (r.revision, r.name_any()));
    let excess = idle.len().saturating_sub(limit);
    out.delete = idle[..excess].iter().map(|r| r.name_any()).collect();
    out
}

/// The revision of `current`, numbered `number`: the template's labels and the hash, the
/// set's annotations (its `kubernetes.io/change-cause` is what `rollout history` shows).
fn revision<K>(
    owner: &K,
    current: &Current,
    name: &str,
    data: Value,
    number: i64,
) -> ControllerRevision
where
    K: Resource<DynamicType = ()>,
{
    let mut labels: BTreeMap<String, String> = current
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.insert(REVISION_LABEL.into(), current.hash.clone());
    let annotations = owner.annotations().clone();
    ControllerRevision {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            namespace: owner.namespace(),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![super::controller_reference(owner)]),
            ..Default::default()
        },
        data: RawExtension(data),
        revision: Some(number),
    }
}

/// The revisions `owner` controls, among `revisions`.
pub fn owned_by<'a, K>(
    owner: &K,
    revisions: &'a [std::sync::Arc<ControllerRevision>],
) -> Vec<&'a ControllerRevision>
where
    K: Resource<DynamicType = ()>,
{
    let uid = owner.uid();
    revisions
        .iter()
        .filter(|r| uid.is_some() && controller_of(&***r) == uid)
        .map(|r| &**r)
        .collect()
}

/// Carries out a history plan for `owner` (a collision is the caller's to record in the set's
/// status). A revision made or removed already (the cache had not shown it) is as good as done.
pub async fn sync<K>(client: &Client, owner: &K, plan: &Plan) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = ()>,
{
    let api: Api<ControllerRevision> =
        Api::namespaced(client.clone(), &owner.namespace().unwrap_or_default());
    let settled = |result: Result<(), kube::Error>| match result {
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => Ok(()),
        other => other,
    };
    if let Some(revision) = &plan.create {
        settled(api.create(&PostParams::default(), revision).await.map(drop))?;
    }
    if let Some((name, number)) = &plan.renumber {
        let patch = Patch::Merge(json!({"revision": number}));
        settled(
            api.patch(name, &PatchParams::default(), &patch)
                .await
                .map(drop),
        )?;
    }
    for name in &plan.delete {
        settled(api.delete(name, &DeleteParams::default()).await.map(drop))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::DaemonSet;

    fn template(image: &str) -> PodTemplateSpec {
        serde_json::from_value(json!({
            "metadata": {"labels": {"app": "agent"}},
            "spec": {"containers": [{"name": "agent", "image": image}]},
        }))
        .unwrap()
    }

    fn owner() -> DaemonSet {
        serde_json::from_value(json!({
            "metadata": {"name": "agent", "namespace": "default", "uid": "ds-1",
                         "annotations": {"kubernetes.io/change-cause": "image agent:2"}},
            "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": template("agent:2")},
        }))
        .unwrap()
    }

    fn current<'a>(template: &'a PodTemplateSpec, image: &str) -> Current<'a> {
        Current {
            template,
            hash: image.into(),
            collision_count: 0,
        }
    }

    fn stored(image: &str, number: i64) -> ControllerRevision {
        let t = template(image);
        let name = revision_name("agent", image);
        revision(&owner(), &current(&t, image), &name, data(&t), number)
    }

    #[test]
    fn each_template_is_recorded_once_and_an_undo_renumbers_its_revision() {
        let (one, two) = (template("agent:1"), template("agent:2"));
        let none = BTreeSet::new();
        // The first template: revision 1, labelled and annotated as kube makes it.
        let first = plan(&owner(), &current(&one, "agent:1"), &[], &none, None);
        let made = first.create.clone().unwrap();
        assert_eq!(
            (made.name_any(), made.revision.unwrap_or(0)),
            ("agent-agent:1".into(), 1)
        );
        assert_eq!(made.labels()[REVISION_LABEL], "agent:1");
        assert_eq!(made.labels()["app"], "agent");
        assert_eq!(
            made.annotations()["kubernetes.io/change-cause"],
            "image agent:2"
        );
        assert_eq!(made.owner_references()[0].uid, "ds-1");
        assert_eq!(
            made.data.0["spec"]["template"]["$patch"], "replace",
            "the patch replaces the whole template, as kubectl rollout undo applies it"
        );
        // Unchanged: nothing to do.
        let r1 = stored("agent:1", 1);
        assert_eq!(
            plan(&owner(), &current(&one, "agent:1"), &[&r1], &none, None),
            Plan::default()
        );
        // A new template: revision 2.
        let second = plan(&owner(), &current(&two, "agent:2"), &[&r1], &none, None);
        assert_eq!(second.create.and_then(|r| r.revision), Some(2));
        // Back to the first (an undo): revision 1 becomes 3, nothing new.
        let r2 = stored("agent:2", 2);
        assert_eq!(
            plan(
                &owner(),
                &current(&one, "agent:1"),
                &[&r1, &r2],
                &none,
                None
            ),
            Plan {
                renumber: Some(("agent-agent:1".into(), 3)),
                ..Default::default()
            }
        );
    }

    #[test]
    fn idle_revisions_beyond_the_limit_go_oldest_first_and_live_ones_stay() {
        let revisions: Vec<ControllerRevision> =
            (1..=5).map(|n| stored(&format!("agent:{n}"), n)).collect();
        let refs: Vec<&ControllerRevision> = revisions.iter().collect();
        let five = template("agent:5");
        let current = current(&five, "agent:5");
        // Pods still run revision 1: it stays whatever its age.
        let live = BTreeSet::from(["agent-agent:1".to_string()]);
        let trimmed = plan(&owner(), &current, &refs, &live, Some(1));
        assert_eq!(trimmed.delete, ["agent-agent:2", "agent-agent:3"]);
        assert_eq!(
            plan(&owner(), &current, &refs, &live, Some(0)).delete,
            ["agent-agent:2", "agent-agent:3", "agent-agent:4"]
        );
        assert!(
            plan(&owner(), &current, &refs, &live, None)
                .delete
                .is_empty()
        );
    }

    #[test]
    fn a_name_holding_another_template_is_a_collision() {
        let other = stored("agent:1", 1);
        let two = template("agent:2");
        let mut current = current(&two, "agent:1");
        current.collision_count = 2;
        let out = plan(&owner(), &current, &[&other], &BTreeSet::new(), None);
        assert_eq!(out.collision, Some(3), "the count grows by one");
        assert!(out.create.is_none());
    }
}
