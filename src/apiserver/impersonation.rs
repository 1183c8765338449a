//! Impersonation, as kube-apiserver's filter has it (`endpoints/filters/impersonation.go`):
//! `Impersonate-User` (a ServiceAccount's `system:serviceaccount:NS:NAME` or any user name),
//! `Impersonate-Group` (repeated), `Impersonate-Uid` and `Impersonate-Extra-<key>` turn the
//! request into one made by that user, once the caller is allowed the `impersonate` verb on
//! each part: `users`, `serviceaccounts` (in their namespace), `groups`, `uids` and
//! `userextras/<key>` (the last two in `authentication.k8s.io`). Every endpoint then sees only
//! the impersonated user; the audit log records both.

use std::collections::BTreeMap;

use http::HeaderMap;

use super::User;
use super::authz::{self, Target};
use super::status::ApiError;

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA_PREFIX: &str = "impersonate-extra-";

/// What a request's headers ask to impersonate.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Requested {
    pub user: String,
    pub groups: Vec<String>,
    pub uid: Option<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

fn text(value: &http::HeaderValue) -> Result<String, ApiError> {
    value
        .to_str()
        .map(String::from)
        .map_err(|_| ApiError::bad_request("impersonation headers must be visible ASCII"))
}

/// The impersonation the headers ask for; None without any. Groups, a uid or extras without a
/// user are refused, as kube-apiserver refuses them.
pub fn requested(headers: &HeaderMap) -> Result<Option<Requested>, ApiError> {
    let mut requested = Requested::default();
    let mut any = false;
    if let Some(user) = headers.get(USER) {
        requested.user = text(user)?;
        any = !requested.user.is_empty();
    }
    for group in headers.get_all(GROUP) {
        requested.groups.push(text(group)?);
    }
    if let Some(uid) = headers.get(UID) {
        requested.uid = Some(text(uid)?).filter(|u| !u.is_empty());
    }
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA_PREFIX) {
            // Header names cannot hold every key: kube-apiserver's clients percent-encode them.
            let key = super::request::percent_decode(key);
            requested.extra.entry(key).or_default().push(text(value)?);
        }
    }
    let others =
        !requested.groups.is_empty() || requested.uid.is_some() || !requested.extra.is_empty();
    if others && !any {
        return Err(ApiError::internal(
            "Internal error occurred: requested impersonation of groups, a uid or extras without impersonating a user",
        ));
    }
    Ok(any.then_some(requested))
}

/// The user `caller` becomes, once `allowed` grants `impersonate` on every part; the refusal
/// names the first part that is not.
pub fn impersonate(
    caller: &User,
    requested: Requested,
    allowed: impl Fn(&User, &Target<'_>) -> Result<(), ApiError>,
) -> Result<User, ApiError> {
    let check = |resource: &str,
                 subresource: Option<&str>,
                 group: &str,
                 namespace: Option<&str>,
                 name: &str| {
        allowed(
            caller,
            &Target::Resource {
                group,
                resource,
                subresource,
                namespace,
                name: Some(name),
            },
        )
    };
    let groups_given = !requested.groups.is_empty();
    let mut groups = Vec::new();
    match service_account(&requested.user) {
        Some((namespace, name)) => {
            check("serviceaccounts", None, "", Some(namespace), name)?;
            if !groups_given {
                groups = vec![
                    "system:serviceaccounts".to_string(),
                    format!("system:serviceaccounts:{namespace}"),
                ];
            }
        }
        None => check("users", None, "", None, &requested.user)?,
    }
    for group in &requested.groups {
        check("groups", None, "", None, group)?;
        groups.push(group.clone());
    }
    for (key, values) in &requested.extra {
        for value in values {
            check(
                "userextras",
                Some(key),
                "authentication.k8s.io",
                None,
                value,
            )?;
        }
    }
    if let Some(uid) = &requested.uid {
        check("uids", None, "authentication.k8s.io", None, uid)?;
    }
    // Every user but the anonymous one is authenticated, unless the groups asked say otherwise.
    if requested.user == "system:anonymous" {
        if !groups.iter().any(|g| g == authz::UNAUTHENTICATED) {
            groups.push(authz::UNAUTHENTICATED.into());
        }
    } else if !groups
        .iter()
        .any(|g| g == authz::AUTHENTICATED || g == authz::UNAUTHENTICATED)
    {
        groups.push(authz::AUTHENTICATED.into());
    }
    Ok(User {
        name: requested.user,
        groups,
        uid: requested.uid.unwrap_or_default(),
        extra: requested.extra,
    })
}

/// The namespace and name of `system:serviceaccount:NS:NAME`.
fn service_account(user: &str) -> Option<(&str, &str)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then_some((namespace, name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    fn bob() -> User {
        User {
            name: "bob".into(),
            groups: vec![authz::AUTHENTICATED.into()],
            ..User::default()
        }
    }

    /// Allows impersonating only what `grants` lists as (resource, name).
    fn only(
        grants: &'static [(&'static str, &'static str)],
    ) -> impl Fn(&User, &Target<'_>) -> Result<(), ApiError> {
        move |user, target| {
            let Target::Resource {
                resource,
                subresource,
                name,
                ..
            } = target
            else {
                unreachable!()
            };
            let what = match subresource {
                Some(s) => format!("{resource}/{s}"),
                None => resource.to_string(),
            };
            if grants.iter().any(|(r, n)| *r == what && Some(*n) == *name) {
                Ok(())
            } else {
                Err(ApiError::forbidden(authz::forbidden_message(
                    user,
                    "impersonate",
                    target,
                )))
            }
        }
    }

    #[test]
    fn no_headers_no_impersonation_and_groups_alone_are_refused() {
        assert_eq!(requested(&headers(&[])).unwrap(), None);
        let e = requested(&headers(&[("Impersonate-Group", "admins")])).unwrap_err();
        assert_eq!(e.code, 500);
    }

    #[test]
    fn a_user_with_groups_uid_and_extras_each_authorized() {
        let asked = requested(&headers(&[
            ("Impersonate-User", "alice"),
            ("Impersonate-Group", "devs"),
            ("Impersonate-Group", "ops"),
            ("Impersonate-Uid", "u-1"),
            ("Impersonate-Extra-Scopes", "view"),
            ("Impersonate-Extra-Example.com%2fteam", "blue"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(asked.extra["example.com/team"], ["blue"]);
        let all = only(&[
            ("users", "alice"),
            ("groups", "devs"),
            ("groups", "ops"),
            ("uids", "u-1"),
            ("userextras/scopes", "view"),
            ("userextras/example.com/team", "blue"),
        ]);
        let alice = impersonate(&bob(), asked, all).unwrap();
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.groups, ["devs", "ops", authz::AUTHENTICATED]);
        assert_eq!(alice.uid, "u-1");

        let asked = requested(&headers(&[
            ("Impersonate-User", "alice"),
            ("Impersonate-Group", "system:masters"),
        ]))
        .unwrap()
        .unwrap();
        let e = impersonate(&bob(), asked, only(&[("users", "alice")])).unwrap_err();
        assert_eq!(e.code, 403);
        assert_eq!(
            e.message,
            "groups \"system:masters\" is forbidden: User \"bob\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope"
        );
    }

    #[test]
    fn a_service_account_gets_its_groups_and_anonymous_stays_unauthenticated() {
        let asked = requested(&headers(&[(
            "Impersonate-User",
            "system:serviceaccount:ci:robot",
        )]))
        .unwrap()
        .unwrap();
        let refused = impersonate(
            &bob(),
            asked,
            only(&[("users", "system:serviceaccount:ci:robot")]),
        );
        assert!(
            refused.is_err(),
            "a ServiceAccount is impersonated through serviceaccounts"
        );
        let asked = requested(&headers(&[(
            "Impersonate-User",
            "system:serviceaccount:ci:robot",
        )]))
        .unwrap()
        .unwrap();
        let robot = impersonate(&bob(), asked, only(&[("serviceaccounts", "robot")])).unwrap();
        assert_eq!(
            robot.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ci",
                authz::AUTHENTICATED
            ]
        );
        let asked = requested(&headers(&[("Impersonate-User", "system:anonymous")]))
            .unwrap()
            .unwrap();
        let anonymous = impersonate(&bob(), asked, only(&[("users", "system:anonymous")])).unwrap();
        assert_eq!(anonymous.groups, [authz::UNAUTHENTICATED]);
    }
}
