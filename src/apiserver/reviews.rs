//! The review APIs clients ask the server's authentication and authorization through: nothing
//! is stored, the answer is the object sent back with its status. `kubectl auth can-i` sends
//! SelfSubjectAccessReviews (and SelfSubjectRulesReviews for `--list`), `kubectl auth whoami`
//! a SelfSubjectReview; SubjectAccessReview and LocalSubjectAccessReview ask about someone
//! else (their `create` is itself authorized: `admin` may ask about its namespace).

use serde_json::{Value, json};

use super::authz::{self, Target};
use super::{ApiServer, User};

/// The review kinds, by (group, plural).
pub const REVIEWS: [(&str, &str); 5] = [
    ("authorization.k8s.io", "selfsubjectaccessreviews"),
    ("authorization.k8s.io", "subjectaccessreviews"),
    ("authorization.k8s.io", "localsubjectaccessreviews"),
    ("authorization.k8s.io", "selfsubjectrulesreviews"),
    ("authentication.k8s.io", "selfsubjectreviews"),
];

pub fn is_review(group: &str, plural: &str) -> bool {
    REVIEWS.contains(&(group, plural))
}

/// The user a review asks about: the caller, or the one a SubjectAccessReview names.
fn subject(review: &Value, caller: &User, about_self: bool) -> User {
    if about_self {
        return caller.clone();
    }
    User {
        name: review["spec"]["user"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        groups: review["spec"]["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g.as_str().map(String::from))
            .collect(),
        uid: review["spec"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        extra: serde_json::from_value(review["spec"]["extra"].clone()).unwrap_or_default(),
    }
}

/// An access review's answer: `{allowed, reason}` or `{allowed: false, reason}`.
fn access(server: &ApiServer, user: &User, spec: &Value, namespace: Option<&str>) -> Value {
    let decision = if let Some(a) = spec["resourceAttributes"].as_object() {
        let text = |k: &str| a.get(k).and_then(Value::as_str).filter(|s| !s.is_empty());
        let target = Target::Resource {
            group: text("group").unwrap_or_default(),
            resource: text("resource").unwrap_or_default(),
            subresource: text("subresource"),
            namespace: namespace.or(text("namespace")),
            name: text("name"),
        };
        server.authorize(user, text("verb").unwrap_or_default(), &target)
    } else if let Some(a) = spec["nonResourceAttributes"].as_object() {
        let path = a.get("path").and_then(Value::as_str).unwrap_or_default();
        let verb = a.get("verb").and_then(Value::as_str).unwrap_or_default();
        server.authorize(user, verb, &Target::Path(path))
    } else {
        return json!({"allowed": false, "evaluationError": "spec.resourceAttributes or spec.nonResourceAttributes is required"});
    };
    match decision {
        Ok(()) => {
            json!({"allowed": true, "reason": if user.groups.iter().any(|g| g == authz::MASTERS) { "the user is a member of system:masters" } else { "allowed by RBAC" }})
        }
        // kube-apiserver's RBAC gives no reason for a refusal (kubectl prints a bare "no").
        Err(_) => json!({"allowed": false}),
    }
}

/// The rules `user` has in `namespace`, as a SelfSubjectRulesReview's status.
fn rules(server: &ApiServer, user: &User, namespace: Option<&str>) -> Value {
    if !server.authorization.rbac() || user.groups.iter().any(|g| g == authz::MASTERS) {
        return json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        });
    }
    let policy = server.policy();
    let (mut resource_rules, mut non_resource_rules) = (Vec::new(), Vec::new());
    for rule in policy.rules_for(user, namespace) {
        if rule["nonResourceURLs"].is_array() {
            non_resource_rules
                .push(json!({"verbs": rule["verbs"], "nonResourceURLs": rule["nonResourceURLs"]}));
        } else {
            let mut r = json!({"verbs": rule["verbs"], "apiGroups": rule["apiGroups"], "resources": rule["resources"]});
            if rule["resourceNames"].is_array() {
                r["resourceNames"] = rule["resourceNames"].clone();
            }
            resource_rules.push(r);
        }
    }
    json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false})
}

/// The review `body` answered for `caller`.
pub fn answer(
    server: &ApiServer,
    plural: &str,
    namespace: Option<&str>,
    caller: &User,
    mut review: Value,
) -> Value {
    let status = match plural {
        "selfsubjectreviews" => {
            let mut info = json!({"username": caller.name, "groups": caller.groups});
            if !caller.uid.is_empty() {
                info["uid"] = json!(caller.uid);
            }
            if !caller.extra.is_empty() {
                info["extra"] = json!(caller.extra);
            }
            json!({"userInfo": info})
        }
        "selfsubjectrulesreviews" => {
            let ns = review["spec"]["namespace"].as_str().map(String::from);
            rules(server, caller, ns.as_deref())
        }
        _ => {
            let user = subject(&review, caller, plural == "selfsubjectaccessreviews");
            let namespace = if plural == "localsubjectaccessreviews" {
                namespace
            } else {
                None
            };
            access(server, &user, &review["spec"], namespace)
        }
    };
    review["status"] = status;
    review
}
