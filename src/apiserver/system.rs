//! What a Kubernetes control plane keeps in place beside serving requests, for clients that
//! expect it: a `default` ServiceAccount in every namespace (kube-controller-manager's
//! serviceaccount controller), the rules of aggregated ClusterRoles written into them (its
//! clusterrole-aggregation controller, so `kubectl describe clusterrole admin` shows what
//! `admin` may do), and an APIService for every served group version (kube-apiserver's
//! autoregister controller, so `kubectl get apiservices` lists them).
//!
//! Level-triggered: each pass compares what is stored with what should be and writes the
//! difference, woken by namespace and CRD writes and otherwise every few seconds.

use std::sync::{Arc, Weak};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{ApiServer, object, registry::Resource};

/// The label kube-apiserver's autoregister controller puts on the APIServices it keeps.
pub const AUTOMANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";

/// The namespaces that lack a `default` ServiceAccount: active ones only, since a terminating
/// namespace's objects are being removed.
pub fn namespaces_without_default_account(namespaces: &[Value], accounts: &[Value]) -> Vec<String> {
    namespaces
        .iter()
        .filter(|ns| !object::is_deleting(ns))
        .map(|ns| object::name_of(ns).to_string())
        .filter(|name| {
            !accounts.iter().any(|a| {
                object::name_of(a) == "default" && a["metadata"]["namespace"] == name.as_str()
            })
        })
        .collect()
}

/// The rules an aggregated ClusterRole should hold: those of every other ClusterRole its
/// aggregation rule selects, each once, in name order; None for a role without one.
pub fn aggregated_rules(role: &Value, roles: &[Value]) -> Option<Vec<Value>> {
    let selectors = role["aggregationRule"]["clusterRoleSelectors"].as_array()?;
    let mut sources: Vec<&Value> = roles
        .iter()
        .filter(|other| object::name_of(other) != object::name_of(role))
        .filter(|other| {
            selectors
                .iter()
                .any(|s| super::authz::labels_match(s, &other["metadata"]["labels"]))
        })
        .collect();
    sources.sort_by_key(|r| object::name_of(r).to_string());
    let mut rules: Vec<Value> = Vec::new();
    for rule in sources
        .iter()
        .flat_map(|r| r["rules"].as_array().into_iter().flatten())
    {
        if !rules.contains(rule) {
            rules.push(rule.clone());
        }
    }
    Some(rules)
}

/// Every ClusterRole with its aggregated rules filled in, through chains of aggregation
/// (`admin` takes `edit`'s, which takes `view`'s): worked out to the end here, so that one
/// pass writes each role once and the next writes nothing.
pub fn aggregate_all(roles: &[Value]) -> Vec<Value> {
    let mut roles = roles.to_vec();
    for _ in 0..=roles.len() {
        let mut changed = false;
        for i in 0..roles.len() {
            if let Some(rules) = aggregated_rules(&roles[i], &roles)
                && roles[i]["rules"].as_array() != Some(&rules)
            {
                roles[i]["rules"] = json!(rules);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    roles
}

/// kube-apiserver's name of a group version's APIService: `v1.apps`, `v1.` for the core group.
fn api_service_name(group: &str, version: &str) -> String {
    format!("{version}.{group}")
}

/// The APIService of a group version this server serves itself.
pub fn local_api_service(group: &str, version: &str, built_in: bool, now: &str) -> Value {
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {
            "name": api_service_name(group, version),
            "labels": {AUTOMANAGED_LABEL: if built_in { "onstart" } else { "true" }},
        },
        "spec": {
            "group": group,
            "version": version,
            "groupPriorityMinimum": if built_in { 18000 } else { 1000 },
            "versionPriority": 15,
        },
        "status": {"conditions": [{
            "type": "Available",
            "status": "True",
            "reason": "Local",
            "message": "Local APIServices are always available",
            "lastTransitionTime": now,
        }]},
    })
}

/// Which APIServices to create (group, version) and which automanaged ones to delete (names),
/// for the served group versions (`custom` tells those that CRDs serve).
pub fn api_service_changes(
    served: &[(String, String, bool)],
    stored: &[Value],
) -> (Vec<(String, String, bool)>, Vec<String>) {
    let names: Vec<String> = served
        .iter()
        .map(|(g, v, _)| api_service_name(g, v))
        .collect();
    let create = served
        .iter()
        .filter(|(g, v, _)| {
            let name = api_service_name(g, v);
            !stored.iter().any(|s| object::name_of(s) == name)
        })
        .cloned()
        .collect();
    let delete = stored
        .iter()
        .filter(|s| s["metadata"]["labels"][AUTOMANAGED_LABEL].is_string())
        .map(|s| object::name_of(s).to_string())
        .filter(|name| !names.contains(name))
        .collect();
    (create, delete)
}

fn stored(server: &ApiServer, resource: &Resource) -> Vec<Value> {
    let (records, _, _) = server.store.list(&resource.prefix(), None, None, |_| true);
    records.iter().map(|r| r.value()).collect()
}

async fn create(
    server: &ApiServer,
    resource: &Resource,
    namespace: Option<&str>,
    mut value: Value,
) {
    let name = object::name_of(&value).to_string();
    let made = object::prepare_create(resource, &mut value, namespace)
        .and_then(|()| server.strategy_create(resource, &mut value));
    if let Err(e) = made {
        tracing::warn!(kind = %resource.kind, %name, error = %e.message, "could not make a system object");
        return;
    }
    // Another API server on the same store may have made it first: that is as good.
    let _ = server
        .create_object(resource, resource.key(namespace, &name), value)
        .await;
}

/// One pass: the missing ServiceAccounts and APIServices made, stale APIServices removed.
pub async fn reconcile(server: &ApiServer) {
    let registry = &server.registry;
    let (Some(accounts), Some(api_services)) = (
        registry.get("", "v1", "serviceaccounts"),
        registry.get("apiregistration.k8s.io", "v1", "apiservices"),
    ) else {
        return;
    };
    let namespaces = stored(server, &server.namespaces());
    for namespace in namespaces_without_default_account(&namespaces, &stored(server, &accounts)) {
        let account = json!({"metadata": {"name": "default", "namespace": namespace}});
        create(server, &accounts, Some(&namespace), account).await;
    }
    if let Some(cluster_roles) = registry.get("rbac.authorization.k8s.io", "v1", "clusterroles") {
        let (records, _, _) = server
            .store
            .list(&cluster_roles.prefix(), None, None, |_| true);
        let stored: Vec<Value> = records.iter().map(|r| r.value()).collect();
        let aggregated = aggregate_all(&stored);
        for ((record, old), aggregated) in records.iter().zip(&stored).zip(aggregated) {
            if old["rules"] == aggregated["rules"] {
                continue;
            }
            let mut updated = old.clone();
            updated["rules"] = aggregated["rules"].clone();
            if object::prepare_update(&cluster_roles, old, &mut updated, object::Target::Main)
                .is_ok()
            {
                // A conflict means someone changed it meanwhile: the next pass looks again.
                let _ = server
                    .update_object(&cluster_roles, record, old, updated)
                    .await;
            }
        }
    }
    let all = registry.all();
    let mut served: Vec<(String, String, bool)> = all
        .iter()
        .map(|r| (r.group.clone(), r.version.clone(), r.crd_name.is_none()))
        .collect();
    served.sort();
    served.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    let (missing, stale) = api_service_changes(&served, &stored(server, &api_services));
    let now = object::now();
    for (group, version, built_in) in missing {
        create(
            server,
            &api_services,
            None,
            local_api_service(&group, &version, built_in, &now),
        )
        .await;
    }
    for name in stale {
        let _ = server
            .store
            .delete(api_services.key(None, &name), None)
            .await;
    }
}

/// Runs the passes until the server is gone.
pub async fn run(server: Weak<ApiServer>, wake: Arc<Notify>) {
    loop {
        let _ = tokio::time::timeout(Duration::from_secs(10), wake.notified()).await;
        let Some(s) = server.upgrade() else { return };
        reconcile(&s).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_namespaces_get_a_default_account() {
        let ns = |name: &str, deleting: bool| {
            let mut v = json!({"metadata": {"name": name}});
            if deleting {
                v["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
            }
            v
        };
        let account = |ns: &str, name: &str| json!({"metadata": {"name": name, "namespace": ns}});
        let missing = namespaces_without_default_account(
            &[
                ns("default", false),
                ns("apps", false),
                ns("going", true),
                ns("team", false),
            ],
            &[account("default", "default"), account("apps", "robot")],
        );
        assert_eq!(missing, ["apps", "team"]);
    }

    #[test]
    fn aggregated_roles_hold_the_rules_of_the_roles_they_select() {
        let role = |name: &str, labels: Value, rules: Value| json!({"metadata": {"name": name, "labels": labels}, "rules": rules});
        let read = json!({"verbs": ["get"], "resources": ["pods"], "apiGroups": [""]});
        let write = json!({"verbs": ["create"], "resources": ["pods"], "apiGroups": [""]});
        let mut admin = role("admin", json!({}), json!([]));
        admin["aggregationRule"] =
            json!({"clusterRoleSelectors": [{"matchLabels": {"to-admin": "true"}}]});
        let roles = vec![
            admin.clone(),
            role(
                "b-writer",
                json!({"to-admin": "true"}),
                json!([write.clone(), read.clone()]),
            ),
            role(
                "a-reader",
                json!({"to-admin": "true"}),
                json!([read.clone()]),
            ),
            role("other", json!({}), json!([{"verbs": ["*"]}])),
        ];
        assert_eq!(
            aggregated_rules(&admin, &roles),
            Some(vec![read.clone(), write.clone()])
        );
        assert_eq!(aggregated_rules(&roles[1], &roles), None);
        // A chain settles in one pass: admin takes edit's rules, which edit takes from writer.
        let aggregating = |name: &str, from: &str, labels: Value| {
            let mut r = role(name, labels, json!([]));
            r["aggregationRule"] =
                json!({"clusterRoleSelectors": [{"matchLabels": {from: "true"}}]});
            r
        };
        let chain = vec![
            aggregating("admin", "to-admin", json!({})),
            aggregating("edit", "to-edit", json!({"to-admin": "true"})),
            role("writer", json!({"to-edit": "true"}), json!([write.clone()])),
        ];
        let settled = aggregate_all(&chain);
        assert_eq!(settled[0]["rules"], json!([write.clone()]));
        assert_eq!(
            aggregate_all(&settled),
            settled,
            "a second pass changes nothing"
        );
    }

    #[test]
    fn api_services_follow_what_is_served() {
        let served = vec![
            ("".to_string(), "v1".to_string(), true),
            ("cluster.x-k8s.io".to_string(), "v1beta2".to_string(), false),
        ];
        let now = "2024-01-01T00:00:00Z";
        let core = local_api_service("", "v1", true, now);
        assert_eq!(object::name_of(&core), "v1.");
        let gone = local_api_service("example.com", "v1", false, now);
        let theirs = json!({"metadata": {"name": "v1beta1.metrics.k8s.io"}});
        let (create, delete) = api_service_changes(&served, &[core, gone, theirs]);
        assert_eq!(create, [served[1].clone()]);
        // An APIService a user registered (no automanaged label) stays.
        assert_eq!(delete, ["v1.example.com"]);
    }
}
