//! RBAC escalation prevention, as kube-apiserver's RBAC storage has it
//! (`pkg/registry/rbac/{role,clusterrole,rolebinding,clusterrolebinding}/policybased`): a user
//! can only hand out permissions they hold.
//!
//! - A Role or ClusterRole may be written by whoever holds every permission it grants (in the
//!   Role's namespace, or cluster-wide for a ClusterRole), or has the `escalate` verb on it.
//! - An `aggregationRule` gathers any ClusterRole that carries its labels, so setting or
//!   changing one needs `escalate` or every permission there is ("must have cluster-admin
//!   privileges to use the aggregationRule").
//! - A RoleBinding or ClusterRoleBinding may be written by whoever holds every permission of
//!   the role it refers to (in the binding's namespace), or has the `bind` verb on that role.
//! - An update that only changes what the garbage collector needs (owner references,
//!   finalizers) is always allowed.
//!
//! `system:masters` and servers that allow everything skip this (see
//! [`super::ApiServer::check_rbac_write`]). Everything here is a pure function of the policy,
//! the user and the objects; the refusal is kube-apiserver's 403, listing the permissions the
//! user does not hold.

use std::collections::BTreeSet;

use serde_json::Value;

use super::User;
use super::authz::{Policy, Target};
use super::status::ApiError;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// A PolicyRule as lists of strings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    pub verbs: Vec<String>,
    pub api_groups: Vec<String>,
    pub resources: Vec<String>,
    pub resource_names: Vec<String>,
    pub non_resource_urls: Vec<String>,
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(String::from))
        .collect()
}

impl Rule {
    pub fn of(rule: &Value) -> Rule {
        Rule {
            verbs: strings(&rule["verbs"]),
            api_groups: strings(&rule["apiGroups"]),
            resources: strings(&rule["resources"]),
            resource_names: strings(&rule["resourceNames"]),
            non_resource_urls: strings(&rule["nonResourceURLs"]),
        }
    }

    /// kube-apiserver's `CompactString`: `{APIGroups:["apps"], Resources:["deployments"],
    /// Verbs:["get"]}`, each list as Go's `%q` prints a slice.
    pub fn compact_string(&self) -> String {
        let quoted = |list: &[String]| {
            let items: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
            format!("[{}]", items.join(" "))
        };
        let parts: Vec<String> = [
            ("APIGroups", &self.api_groups),
            ("Resources", &self.resources),
            ("NonResourceURLs", &self.non_resource_urls),
            ("ResourceNames", &self.resource_names),
            ("Verbs", &self.verbs),
        ]
        .into_iter()
        .filter(|(_, list)| !list.is_empty())
        .map(|(name, list)| format!("{name}:{}", quoted(list)))
        .collect();
        format!("{{{}}}", parts.join(", "))
    }
}

fn has(list: &[String], wanted: &str) -> bool {
    list.iter().any(|s| s == wanted)
}

fn has_all(list: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| has(list, w))
}

/// A rule split into rules of one verb, one group, one resource and at most one name (or one
/// URL and one verb), as kube-apiserver's `BreakdownRule`.
pub fn breakdown(rule: &Rule) -> Vec<Rule> {
    let mut out = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let simple = |names: Vec<String>| Rule {
                    verbs: vec![verb.clone()],
                    api_groups: vec![group.clone()],
                    resources: vec![resource.clone()],
                    resource_names: names,
                    non_resource_urls: Vec::new(),
                };
                if rule.resource_names.is_empty() {
                    out.push(simple(Vec::new()));
                } else {
                    out.extend(rule.resource_names.iter().map(|n| simple(vec![n.clone()])));
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            out.push(Rule {
                verbs: vec![verb.clone()],
                non_resource_urls: vec![url.clone()],
                ..Rule::default()
            });
        }
    }
    out
}

/// Whether `owner` grants every resource in `wanted`: `*`, the resource itself, or
/// `*/<subresource>` for a subresource.
fn resources_cover(owner: &[String], wanted: &[String]) -> bool {
    if has(owner, "*") {
        return true;
    }
    wanted.iter().all(|path| {
        has(owner, path)
            || path
                .split_once('/')
                .is_some_and(|(_, sub)| has(owner, &format!("*/{sub}")))
    })
}

/// Whether the owner's non-resource URL covers `wanted`: equal, or a prefix ending in `*`.
pub fn url_covers(owner: &str, wanted: &str) -> bool {
    owner == wanted
        || owner
            .strip_suffix('*')
            .is_some_and(|prefix| wanted.starts_with(prefix.trim_end_matches('*')))
}

fn rule_covers(owner: &Rule, sub: &Rule) -> bool {
    let verbs = has(&owner.verbs, "*") || has_all(&owner.verbs, &sub.verbs);
    let groups = has(&owner.api_groups, "*") || has_all(&owner.api_groups, &sub.api_groups);
    let resources = resources_cover(&owner.resources, &sub.resources);
    let urls = sub
        .non_resource_urls
        .iter()
        .all(|u| owner.non_resource_urls.iter().any(|o| url_covers(o, u)));
    let names = owner.resource_names.is_empty()
        || (!sub.resource_names.is_empty() && has_all(&owner.resource_names, &sub.resource_names));
    verbs && groups && resources && names && urls
}

/// The parts of `wanted` that no rule of `owner` grants (empty: `owner` covers them all), as
/// kube-apiserver's `Covers`.
pub fn uncovered(owner: &[Rule], wanted: &[Rule]) -> Vec<Rule> {
    wanted
        .iter()
        .flat_map(breakdown)
        .filter(|sub| !owner.iter().any(|o| rule_covers(o, sub)))
        .collect()
}

/// Simple rules of the same group, resource and name merged into one with their verbs, as
/// kube-apiserver's `CompactRules` (the rest kept as they are).
fn compact(rules: Vec<Rule>) -> Vec<Rule> {
    let mut out: Vec<Rule> = Vec::new();
    let mut simple: Vec<Rule> = Vec::new();
    for rule in rules {
        let is_simple = rule.resource_names.len() <= 1
            && rule.non_resource_urls.is_empty()
            && rule.api_groups.len() == 1
            && rule.resources.len() == 1;
        if !is_simple {
            out.push(rule);
            continue;
        }
        match simple.iter_mut().find(|s| {
            s.api_groups == rule.api_groups
                && s.resources == rule.resources
                && s.resource_names == rule.resource_names
        }) {
            Some(existing) => {
                for verb in rule.verbs {
                    if !has(&existing.verbs, &verb) {
                        existing.verbs.push(verb);
                    }
                }
            }
            None => simple.push(rule),
        }
    }
    out.extend(simple);
    out
}

/// Every permission there is: what setting an aggregation rule needs.
fn full_authority() -> Vec<Rule> {
    let all = || vec!["*".to_string()];
    vec![
        Rule {
            verbs: all(),
            api_groups: all(),
            resources: all(),
            ..Rule::default()
        },
        Rule {
            verbs: all(),
            non_resource_urls: all(),
            ..Rule::default()
        },
    ]
}

/// An RBAC write about to be stored.
pub struct Write<'a> {
    /// `roles`, `clusterroles`, `rolebindings` or `clusterrolebindings`.
    pub plural: &'a str,
    /// The request's namespace (None for the cluster-scoped kinds).
    pub namespace: Option<&'a str>,
    /// The name in the request's path (None for a create, as kube-apiserver's request info).
    pub path_name: Option<&'a str>,
    pub old: Option<&'a Value>,
    pub new: &'a Value,
}

impl Write<'_> {
    fn name(&self) -> &str {
        self.new["metadata"]["name"].as_str().unwrap_or_default()
    }

    fn forbidden(&self, why: &str) -> ApiError {
        ApiError::forbidden(format!(
            "{}.{RBAC_GROUP} {:?} is forbidden: {why}",
            self.plural,
            self.name()
        ))
        .with_details(RBAC_GROUP, self.plural, self.name())
    }
}

/// Whether `user` may store `write` under `policy`; kube-apiserver's refusal otherwise.
pub fn check(policy: &Policy, user: &User, write: &Write<'_>) -> Result<(), ApiError> {
    if write
        .old
        .is_some_and(|old| only_garbage_collector_fields(old, write.new))
    {
        return Ok(());
    }
    let allowed = |verb: &str, target: Target<'_>| policy.authorize(user, verb, &target).is_ok();
    match write.plural {
        "roles" | "clusterroles" => {
            let escalate = Target::Resource {
                group: RBAC_GROUP,
                resource: write.plural,
                subresource: None,
                namespace: write.namespace,
                name: write.path_name,
            };
            if allowed("escalate", escalate) {
                return Ok(());
            }
            let rules: Vec<Rule> = write.new["rules"]
                .as_array()
                .into_iter()
                .flatten()
                .map(Rule::of)
                .collect();
            confirm_no_escalation(policy, user, write.namespace, &rules)
                .map_err(|why| write.forbidden(&why))?;
            let aggregation = &write.new["aggregationRule"];
            let aggregation_changed = !aggregation.is_null()
                && write
                    .old
                    .is_none_or(|old| old["aggregationRule"] != *aggregation);
            if write.plural == "clusterroles"
                && aggregation_changed
                && confirm_no_escalation(policy, user, None, &full_authority()).is_err()
            {
                return Err(write
                    .forbidden("must have cluster-admin privileges to use the aggregationRule"));
            }
            Ok(())
        }
        "rolebindings" | "clusterrolebindings" => {
            let role_ref = &write.new["roleRef"];
            let role_kind = role_ref["kind"].as_str().unwrap_or_default();
            let role_name = role_ref["name"].as_str().unwrap_or_default();
            let role_plural = if role_kind == "Role" {
                "roles"
            } else {
                "clusterroles"
            };
            let bind = Target::Resource {
                group: RBAC_GROUP,
                resource: role_plural,
                subresource: None,
                namespace: write.namespace,
                name: Some(role_name),
            };
            if allowed("bind", bind) {
                return Ok(());
            }
            let rules = role_rules(policy, role_kind, role_name, write.namespace)?;
            confirm_no_escalation(policy, user, write.namespace, &rules)
                .map_err(|why| write.forbidden(&why))
        }
        _ => Ok(()),
    }
}

/// The rules of the role a binding refers to; 404 when there is no such role.
fn role_rules(
    policy: &Policy,
    kind: &str,
    name: &str,
    namespace: Option<&str>,
) -> Result<Vec<Rule>, ApiError> {
    let (plural, found) = match kind {
        "Role" => (
            "roles",
            policy.roles.iter().find(|r| {
                r["metadata"]["name"] == name && r["metadata"]["namespace"].as_str() == namespace
            }),
        ),
        _ => (
            "clusterroles",
            policy
                .cluster_roles
                .iter()
                .find(|r| r["metadata"]["name"] == name),
        ),
    };
    if found.is_none() {
        return Err(ApiError::not_found(RBAC_GROUP, plural, name));
    }
    let rules = match kind {
        "Role" => policy.role_rules(namespace.unwrap_or_default(), name),
        _ => policy.cluster_role_rules(name),
    };
    Ok(rules.into_iter().map(Rule::of).collect())
}

/// kube-apiserver's `ConfirmNoEscalation`: the message naming what `user` does not hold.
fn confirm_no_escalation(
    policy: &Policy,
    user: &User,
    namespace: Option<&str>,
    wanted: &[Rule],
) -> Result<(), String> {
    let owner: Vec<Rule> = policy
        .rules_for(user, namespace)
        .into_iter()
        .map(Rule::of)
        .collect();
    let missing = uncovered(&owner, wanted);
    if missing.is_empty() {
        return Ok(());
    }
    let described: BTreeSet<String> = compact(missing).iter().map(Rule::compact_string).collect();
    let groups: Vec<String> = user.groups.iter().map(|g| format!("{g:?}")).collect();
    Err(format!(
        "user {:?} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        groups.join(" "),
        described.into_iter().collect::<Vec<_>>().join("\n")
    ))
}

/// Whether `new` differs from `old` only in what the garbage collector writes (owner
/// references and finalizers) and what the server keeps itself.
fn only_garbage_collector_fields(old: &Value, new: &Value) -> bool {
    let strip = |object: &Value| {
        let mut object = object.clone();
        if let Some(meta) = object["metadata"].as_object_mut() {
            for field in [
                "ownerReferences",
                "finalizers",
                "managedFields",
                "resourceVersion",
                "generation",
            ] {
                meta.remove(field);
            }
        }
        object
    };
    strip(old) == strip(new)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rule(groups: &[&str], verbs: &[&str], resources: &[&str]) -> Rule {
        let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect();
        Rule {
            verbs: list(verbs),
            api_groups: list(groups),
            resources: list(resources),
            ..Rule::default()
        }
    }

    fn named(mut r: Rule, names: &[&str]) -> Rule {
        r.resource_names = names.iter().map(|s| s.to_string()).collect();
        r
    }

    fn urls(urls: &[&str], verbs: &[&str]) -> Rule {
        Rule {
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            non_resource_urls: urls.iter().map(|s| s.to_string()).collect(),
            ..Rule::default()
        }
    }

    /// kube-apiserver's own cases (`pkg/registry/rbac/validation/policy_comparator_test.go`):
    /// owner rules, the rules asked for, and what stays uncovered.
    #[test]
    fn covers_as_kube_apiserver() {
        /// A case's name, the owner's rules, the rules asked for, and what stays uncovered.
        type Case = (&'static str, Vec<Rule>, Vec<Rule>, Vec<Rule>);
        let cases: Vec<Case> = vec![
            (
                "exact match",
                vec![rule(&["v1"], &["get"], &["builds"])],
                vec![rule(&["v1"], &["get"], &["builds"])],
                vec![],
            ),
            (
                "subresource wildcard",
                vec![rule(&["v1"], &["get"], &["*/scale"])],
                vec![rule(&["v1"], &["get"], &["foo/scale"])],
                vec![],
            ),
            (
                "multiple rules covering a single rule",
                vec![
                    rule(&["v1"], &["delete"], &["deployments"]),
                    rule(&["v1"], &["delete"], &["builds"]),
                    rule(&["v1"], &["update"], &["builds", "deployments"]),
                ],
                vec![rule(
                    &["v1"],
                    &["delete", "update"],
                    &["builds", "deployments"],
                )],
                vec![],
            ),
            (
                "multiple API groups covering a single rule",
                vec![
                    rule(&["group1"], &["delete"], &["deployments"]),
                    rule(&["group1"], &["delete"], &["builds"]),
                    rule(&["group1"], &["update"], &["builds", "deployments"]),
                    rule(&["group2"], &["delete"], &["deployments"]),
                    rule(&["group2"], &["delete"], &["builds"]),
                    rule(&["group2"], &["update"], &["builds", "deployments"]),
                ],
                vec![rule(
                    &["group1", "group2"],
                    &["delete", "update"],
                    &["builds", "deployments"],
                )],
                vec![],
            ),
            (
                "a single rule covering several",
                vec![rule(
                    &["group1", "group2"],
                    &["delete", "update"],
                    &["builds", "deployments"],
                )],
                vec![
                    rule(&["group1"], &["delete"], &["deployments"]),
                    rule(&["group2"], &["update"], &["builds", "deployments"]),
                ],
                vec![],
            ),
            (
                "a verb and resource combination missing",
                vec![
                    rule(&["v1"], &["delete", "update"], &["builds", "deployments"]),
                    rule(&["v1"], &["delete"], &["pods"]),
                ],
                vec![rule(
                    &["v1"],
                    &["delete", "update"],
                    &["builds", "deployments", "pods"],
                )],
                vec![rule(&["v1"], &["update"], &["pods"])],
            ),
            (
                "API group star covering several",
                vec![rule(&["*"], &["get"], &["roles"])],
                vec![rule(&["group1", "group2"], &["get"], &["roles"])],
                vec![],
            ),
            (
                "an enumeration does not cover the API group star",
                vec![rule(&["dummy-group"], &["get"], &["roles"])],
                vec![rule(&["*"], &["get"], &["roles"])],
                vec![rule(&["*"], &["get"], &["roles"])],
            ),
            (
                "API group star covering star",
                vec![rule(&["*"], &["get"], &["roles"])],
                vec![rule(&["*"], &["get"], &["roles"])],
                vec![],
            ),
            (
                "verb star covering several",
                vec![rule(&["v1"], &["*"], &["roles"])],
                vec![rule(&["v1"], &["watch", "list"], &["roles"])],
                vec![],
            ),
            (
                "an enumeration does not cover the verb star",
                vec![rule(
                    &["v1"],
                    &["get", "list", "watch", "create", "update", "delete", "exec"],
                    &["roles"],
                )],
                vec![rule(&["v1"], &["*"], &["roles"])],
                vec![rule(&["v1"], &["*"], &["roles"])],
            ),
            (
                "resource star covering a resource",
                vec![rule(&["v1"], &["get"], &["*"])],
                vec![rule(&["v1"], &["get"], &["resourcegroup:deployments"])],
                vec![],
            ),
            (
                "an enumeration does not cover the resource star",
                vec![rule(
                    &["v1"],
                    &["get"],
                    &["roles", "resourcegroup:deployments"],
                )],
                vec![rule(&["v1"], &["get"], &["*"])],
                vec![rule(&["v1"], &["get"], &["*"])],
            ),
            (
                "no resource names covering names",
                vec![rule(&["v1"], &["get"], &["pods"])],
                vec![named(rule(&["v1"], &["get"], &["pods"]), &["foo", "bar"])],
                vec![],
            ),
            (
                "names do not cover all names",
                vec![named(rule(&["v1"], &["get"], &["pods"]), &["foo", "bar"])],
                vec![rule(&["v1"], &["get"], &["pods"])],
                vec![rule(&["v1"], &["get"], &["pods"])],
            ),
            (
                "non-resource URLs",
                vec![urls(&["/apis"], &["*"])],
                vec![urls(&["/apis"], &["*"])],
                vec![],
            ),
            (
                "non-resource URL star",
                vec![urls(&["*"], &["*"])],
                vec![urls(&["/apis", "/apis/v1", "/"], &["*"])],
                vec![],
            ),
            (
                "a star after a prefix does not cover the prefix",
                vec![urls(&["/apis/*"], &["*"])],
                vec![urls(&["/apis", "/apis/v1"], &["get"])],
                vec![urls(&["/apis"], &["get"])],
            ),
            (
                "a star after a prefix",
                vec![urls(&["/apis/*"], &["*"])],
                vec![urls(&["/apis/v1/foo", "/apis/v1"], &["get"])],
                vec![],
            ),
            (
                "non-resource URLs with other fields",
                vec![Rule {
                    non_resource_urls: vec!["/apis".into()],
                    ..rule(&["v1"], &["get"], &["builds"])
                }],
                vec![Rule {
                    non_resource_urls: vec!["/apis".into()],
                    ..rule(&["v1"], &["get"], &["builds"])
                }],
                vec![],
            ),
            (
                "non-resource URLs with other fields, not held",
                vec![rule(&["v1"], &["get"], &["builds"])],
                vec![Rule {
                    non_resource_urls: vec!["/apis".into()],
                    ..rule(&["v1"], &["get"], &["builds"])
                }],
                vec![urls(&["/apis"], &["get"])],
            ),
        ];
        for (name, owner, wanted, missing) in cases {
            assert_eq!(uncovered(&owner, &wanted), missing, "{name}");
        }
    }

    #[test]
    fn non_resource_url_covers_as_kube_apiserver() {
        for (owner, wanted, covers) in [
            ("*", "", true),
            ("*", "/", true),
            ("*", "/api", true),
            ("/*", "", false),
            ("/*", "/", true),
            ("/*", "/foo", true),
            ("/api", "/api", true),
            ("/apis", "/api", false),
            ("/api/v1", "/api", false),
            ("/api/v1", "/api/v1", true),
            ("/api/*", "/api/v1", true),
            ("/api/*", "/api", false),
            ("/api/*/*", "/api/v1", false),
            ("/*/v1/*", "/api/v1", false),
        ] {
            assert_eq!(url_covers(owner, wanted), covers, "{owner} covers {wanted}");
        }
    }

    fn user(name: &str) -> User {
        User {
            name: name.into(),
            groups: vec!["system:authenticated".into()],
            ..User::default()
        }
    }

    /// The default policy, plus rules and bindings for `alice`.
    fn policy(extra: Vec<Value>) -> Policy {
        let mut objects = super::super::authz::default_policy();
        objects.extend(extra);
        super::super::authz::policy_of(&objects)
    }

    fn grant_cluster(name: &str, rules: Value) -> Vec<Value> {
        vec![
            json!({"kind": "ClusterRole", "metadata": {"name": name}, "rules": rules}),
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": name}, "roleRef": {"kind": "ClusterRole", "name": name}, "subjects": [{"kind": "User", "name": "alice"}]}),
        ]
    }

    fn grant_in(namespace: &str, name: &str, rules: Value) -> Vec<Value> {
        vec![
            json!({"kind": "Role", "metadata": {"name": name, "namespace": namespace}, "rules": rules}),
            json!({"kind": "RoleBinding", "metadata": {"name": name, "namespace": namespace}, "roleRef": {"kind": "Role", "name": name}, "subjects": [{"kind": "User", "name": "alice"}]}),
        ]
    }

    fn create<'a>(plural: &'a str, namespace: Option<&'a str>, new: &'a Value) -> Write<'a> {
        Write {
            plural,
            namespace,
            path_name: None,
            old: None,
            new,
        }
    }

    #[test]
    fn a_binding_to_a_role_she_does_not_hold_is_refused_with_what_she_lacks() {
        let p = policy(grant_cluster(
            "bind-anything",
            json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterrolebindings"], "verbs": ["create"]}]),
        ));
        let binding = json!({"metadata": {"name": "me-admin"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}, "subjects": [{"kind": "User", "name": "alice"}]});
        let e = check(
            &p,
            &user("alice"),
            &create("clusterrolebindings", None, &binding),
        )
        .unwrap_err();
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "clusterrolebindings.rbac.authorization.k8s.io \"me-admin\" is forbidden: user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}\n{NonResourceURLs:[\"*\"], Verbs:[\"*\"]}"
        );
    }

    #[test]
    fn bind_on_the_role_allows_binding_it_and_only_it() {
        let p = policy(grant_cluster(
            "binder",
            json!([
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["view"]},
            ]),
        ));
        let to = |role: &str| json!({"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": role}, "subjects": [{"kind": "User", "name": "bob"}]});
        let view = to("view");
        assert!(
            check(
                &p,
                &user("alice"),
                &create("clusterrolebindings", None, &view)
            )
            .is_ok()
        );
        let admin = to("cluster-admin");
        assert!(
            check(
                &p,
                &user("alice"),
                &create("clusterrolebindings", None, &admin)
            )
            .is_err()
        );
    }

    #[test]
    fn a_binding_of_what_she_holds_is_allowed_and_a_missing_role_is_not_found() {
        let mut objects = grant_in(
            "team",
            "reader",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]),
        );
        objects.push(json!({"kind": "Role", "metadata": {"name": "cm", "namespace": "team"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}));
        let p = policy(objects);
        let binding = |role: &str| json!({"metadata": {"name": "b", "namespace": "team"}, "roleRef": {"kind": "Role", "name": role}, "subjects": [{"kind": "User", "name": "bob"}]});
        let cm = binding("cm");
        assert!(
            check(
                &p,
                &user("alice"),
                &create("rolebindings", Some("team"), &cm)
            )
            .is_ok()
        );
        let missing = binding("nope");
        let e = check(
            &p,
            &user("alice"),
            &create("rolebindings", Some("team"), &missing),
        )
        .unwrap_err();
        assert_eq!(e.code, 404, "{}", e.message);
        assert!(
            check(
                &p,
                &user("alice"),
                &create("rolebindings", Some("other"), &cm)
            )
            .is_err(),
            "the role is checked in the binding's namespace"
        );
    }

    #[test]
    fn a_role_granting_more_than_she_holds_is_refused_unless_she_may_escalate() {
        let writer = json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create", "update"]}, {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]);
        let p = policy(grant_in("team", "writer", writer.clone()));
        let star = json!({"metadata": {"name": "all", "namespace": "team"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
        let e = check(&p, &user("alice"), &create("roles", Some("team"), &star)).unwrap_err();
        assert!(
            e.message.starts_with(
                "roles.rbac.authorization.k8s.io \"all\" is forbidden: user \"alice\""
            ),
            "{}",
            e.message
        );
        let pods = json!({"metadata": {"name": "pods", "namespace": "team"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]});
        assert!(check(&p, &user("alice"), &create("roles", Some("team"), &pods)).is_ok());
        let mut escalate = writer.as_array().unwrap().clone();
        escalate.push(json!({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]}));
        let p = policy(grant_in("team", "writer", json!(escalate)));
        assert!(check(&p, &user("alice"), &create("roles", Some("team"), &star)).is_ok());
    }

    #[test]
    fn an_aggregation_rule_needs_every_permission() {
        let p = policy(grant_cluster(
            "roles",
            json!([
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["create", "update"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
            ]),
        ));
        let aggregating = json!({"metadata": {"name": "gather"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}, "rules": []});
        let e = check(
            &p,
            &user("alice"),
            &create("clusterroles", None, &aggregating),
        )
        .unwrap_err();
        assert_eq!(
            e.message,
            "clusterroles.rbac.authorization.k8s.io \"gather\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
        );
        // Joining the built-in view role with Secrets needs the Secrets first.
        let joins_view = json!({"metadata": {"name": "more-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}, "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]});
        let e = check(
            &p,
            &user("alice"),
            &create("clusterroles", None, &joins_view),
        )
        .unwrap_err();
        assert!(
            e.message.ends_with(
                "not currently held:\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\"]}"
            ),
            "{}",
            e.message
        );
        let configmaps = json!({"metadata": {"name": "cm-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]});
        assert!(
            check(
                &p,
                &user("alice"),
                &create("clusterroles", None, &configmaps)
            )
            .is_ok()
        );
    }

    #[test]
    fn an_update_that_only_changes_owner_references_is_allowed() {
        let p = policy(vec![]);
        let old = json!({"metadata": {"name": "all", "namespace": "team"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
        let mut new = old.clone();
        new["metadata"]["ownerReferences"] =
            json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "1"}]);
        let write = Write {
            plural: "roles",
            namespace: Some("team"),
            path_name: Some("all"),
            old: Some(&old),
            new: &new,
        };
        assert!(check(&p, &user("alice"), &write).is_ok());
        let mut widened = new.clone();
        widened["rules"][0]["verbs"] = json!(["get"]);
        let write = Write {
            new: &widened,
            ..write
        };
        assert!(check(&p, &user("alice"), &write).is_err());
    }
}
