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

/// kube's default `revisionHistoryLimit` for DaemonSets and StatefulSets.
pub const DEFAULT_LIMIT: i32 = 10;

/// A template as its revision holds it: the patch `kubectl rollout undo` applies to the set.
pub fn data(template: &PodTemplateSpec) -> Value {
    let mut template = serde_json::to_value(template).unwrap_or_default();
    template["$patch"] = json!("replace");
    json!({"spec": {"template": template}})
}

/// The template a set runs now, as its history sees it.
pub struct Current<'a> {
    pub template: &'a PodTemplateSpec,
    /// The revision's name (`<set>-<hash>`) and the hash its label carries.
    pub name: String,
    pub hash: String,
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
    /// Another template holds the current one's name: the set's `collisionCount` must grow,
    /// which changes the hash.
    pub collision: bool,
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
    let mut out = Plan::default();
    let newest = owned.iter().filter_map(|r| r.revision).max().unwrap_or(0);
    let holds = |r: &&&ControllerRevision| r.data.0 == data;
    // Of equal revisions, the one named for the template (another is an older collision's).
    let equal = owned
        .iter()
        .filter(holds)
        .max_by_key(|r| (r.name_any() == current.name, r.revision));
    let kept = match equal {
        Some(revision) => {
            if revision.revision.unwrap_or(0) < newest {
                out.renumber = Some((revision.name_any(), newest + 1));
            }
            revision.name_any()
        }
        None if owned.iter().any(|r| r.name_any() == current.name) => {
            out.collision = true;
            return out;
        }
        None => {
            out.create = Some(revision(owner, current, data, newest + 1));
            current.name.clone()
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
fn revision<K>(owner: &K, current: &Current, data: Value, number: i64) -> ControllerRevision
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
            name: Some(current.name.clone()),
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

/// The revisions `owner` controls, from those of its namespace.
pub fn owned_by<'a, K>(
    owner: &K,
    revisions: &'a [std::sync::Arc<ControllerRevision>],
) -> Vec<&'a ControllerRevision>
where
    K: Resource<DynamicType = ()>,
{
    let uid = owner.uid().unwrap_or_default();
    revisions
        .iter()
        .filter(|r| r.namespace() == owner.namespace())
        .filter(|r| {
            r.owner_references()
                .iter()
                .any(|o| o.controller == Some(true) && o.uid == uid)
        })
        .map(|r| &**r)
        .collect()
}

/// Carries out a history plan for `owner` (a collision is the caller's to record). A revision
/// made or removed already (the cache had not shown it) is as good as done.
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

    fn stored(image: &str, number: i64) -> ControllerRevision {
        let t = template(image);
        let current = Current {
            template: &t,
            name: format!("agent-{image}"),
            hash: image.into(),
        };
        revision(&owner(), &current, data(&t), number)
    }

    #[test]
    fn each_template_is_recorded_once_and_an_undo_renumbers_its_revision() {
        let (one, two) = (template("agent:1"), template("agent:2"));
        let current = |t, image: &str| Current {
            template: t,
            name: format!("agent-{image}"),
            hash: image.to_string(),
        };
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
        let current = Current {
            template: &five,
            name: "agent-agent:5".into(),
            hash: "agent:5".into(),
        };
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
        let current = Current {
            template: &two,
            name: "agent-agent:1".into(),
            hash: "agent:1".into(),
        };
        let out = plan(&owner(), &current, &[&other], &BTreeSet::new(), None);
        assert!(out.collision && out.create.is_none());
    }
}
