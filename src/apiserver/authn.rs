//! Who a request comes from, besides client certificates (which the TLS listener reads) and
//! ServiceAccount tokens ([`super::tokens`]):
//! bootstrap tokens (`Authorization: Bearer <id>.<secret>`), checked against their
//! `kube-system/bootstrap-token-<id>` Secret as kube-apiserver's `--enable-bootstrap-token-auth`
//! does, so that a joining worker can ask for its kubelet certificate.

use base64::Engine;
use serde_json::Value;

use super::{ApiServer, User, tokens};

/// The namespace and Secret name prefix of bootstrap tokens.
pub const BOOTSTRAP_TOKEN_NAMESPACE: &str = "kube-system";
pub const BOOTSTRAP_TOKEN_PREFIX: &str = "bootstrap-token-";

/// The token id and secret of a `<id>.<secret>` bearer token, if it has that shape (six and
/// sixteen lowercase letters or digits).
pub fn bootstrap_token(bearer: &str) -> Option<(&str, &str)> {
    let (id, secret) = bearer.split_once('.')?;
    let ok = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    (ok(id, 6) && ok(secret, 16)).then_some((id, secret))
}

/// Compares secrets in time that does not depend on where they differ.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The user a bootstrap token Secret (as stored: `data` base64) makes of `secret`, at Unix
/// time `now`; None when the token is wrong, expired or not for authentication.
pub fn bootstrap_token_user(stored: &Value, id: &str, secret: &str, now: i64) -> Option<User> {
    if stored["type"] != "bootstrap.kubernetes.io/token" {
        return None;
    }
    let field = |key: &str| -> Option<String> {
        let b64 = stored["data"][key].as_str()?;
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b64).ok()?).ok()
    };
    let matches = field("token-id").as_deref() == Some(id)
        && field("token-secret").is_some_and(|s| same_secret(s.as_bytes(), secret.as_bytes()));
    if !matches || field("usage-bootstrap-authentication").as_deref() != Some("true") {
        return None;
    }
    if let Some(expiration) = field("expiration") {
        let expires = time::OffsetDateTime::parse(
            &expiration,
            &time::format_description::well_known::Rfc3339,
        )
        .ok()?;
        if expires.unix_timestamp() <= now {
            return None;
        }
    }
    let mut groups = vec!["system:bootstrappers".to_string()];
    if let Some(extra) = field("auth-extra-groups") {
        groups.extend(
            extra
                .split(',')
                .map(str::trim)
                .filter(|g| g.starts_with("system:bootstrappers:"))
                .map(String::from),
        );
    }
    Some(User {
        name: format!("system:bootstrap:{id}"),
        groups,
        ..User::default()
    })
}

/// The user of a request without a client certificate: a valid ServiceAccount or bootstrap
/// token's.
pub(super) async fn token_user(server: &ApiServer, headers: &http::HeaderMap) -> Option<User> {
    let bearer = headers
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")?
        .trim();
    if tokens::is_jwt(bearer) {
        return service_account_user(server, bearer).await;
    }
    let (id, secret) = bootstrap_token(bearer)?;
    let secrets = server.registry.get("", "v1", "secrets")?;
    let stored = server.store.get(&secrets.key(
        Some(BOOTSTRAP_TOKEN_NAMESPACE),
        &format!("{}{id}", BOOTSTRAP_TOKEN_PREFIX),
    ))?;
    bootstrap_token_user(
        &stored.value(),
        id,
        secret,
        time::OffsetDateTime::now_utc().unix_timestamp(),
    )
}

/// The ServiceAccount a token stands for, while it exists with the uid the token names.
pub(super) async fn service_account_user(server: &ApiServer, token: &str) -> Option<User> {
    let signer = server.token_signer(false).await.ok()??;
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let checked = signer
        .verify(token)
        .and_then(|claims| tokens::check(&claims, now, &[tokens::ISSUER]));
    let subject = match checked {
        Ok(found) => found,
        Err(e) => {
            tracing::debug!(error = %e, "a bearer token was refused");
            return None;
        }
    };
    // The account, and the object the token is bound to, must still be the ones it names:
    // deleting (or recreating) either revokes it.
    let alive = |plural: &str, namespace: Option<&str>, name: &str, uid: &str| {
        let resource = server.registry.get("", "v1", plural)?;
        let stored = server.store.get(&resource.key(namespace, name))?;
        (*stored.meta().uid == *uid).then_some(())
    };
    let namespace = subject.namespace.as_str();
    alive(
        "serviceaccounts",
        Some(namespace),
        &subject.name,
        &subject.uid,
    )?;
    if let Some((kind, name, uid)) = &subject.bound {
        match kind.as_str() {
            "Pod" => alive("pods", Some(namespace), name, uid)?,
            "Secret" => alive("secrets", Some(namespace), name, uid)?,
            _ => alive("nodes", None, name, uid)?,
        }
    }
    Some(User {
        name: format!("system:serviceaccount:{namespace}:{}", subject.name),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{namespace}"),
        ],
        uid: subject.uid,
        ..User::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored(expiration: Option<&str>, usage: &str) -> Value {
        let b = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let mut data = json!({
            "token-id": b("abcdef"),
            "token-secret": b("0123456789abcdef"),
            "usage-bootstrap-authentication": b(usage),
            "auth-extra-groups": b("system:bootstrappers:kubeadm:default-node-token,system:masters"),
        });
        if let Some(e) = expiration {
            data["expiration"] = json!(b(e));
        }
        json!({"type": "bootstrap.kubernetes.io/token", "data": data})
    }

    #[test]
    fn bootstrap_tokens_authenticate_as_bootstrappers() {
        assert_eq!(
            bootstrap_token("abcdef.0123456789abcdef"),
            Some(("abcdef", "0123456789abcdef"))
        );
        assert_eq!(bootstrap_token("ABCDEF.0123456789abcdef"), None);
        assert_eq!(bootstrap_token("abc.def"), None);
        let now = 1_800_000_000;
        let user =
            bootstrap_token_user(&stored(None, "true"), "abcdef", "0123456789abcdef", now).unwrap();
        assert_eq!(user.name, "system:bootstrap:abcdef");
        assert_eq!(
            user.groups,
            [
                "system:bootstrappers",
                "system:bootstrappers:kubeadm:default-node-token"
            ],
            "extra groups outside system:bootstrappers: are dropped"
        );
        assert!(
            bootstrap_token_user(&stored(None, "true"), "abcdef", "fedcba9876543210", now)
                .is_none(),
            "wrong secret"
        );
        assert!(
            bootstrap_token_user(&stored(None, "false"), "abcdef", "0123456789abcdef", now)
                .is_none(),
            "not for authentication"
        );
        assert!(
            bootstrap_token_user(
                &stored(Some("2020-01-01T00:00:00Z"), "true"),
                "abcdef",
                "0123456789abcdef",
                now
            )
            .is_none(),
            "expired"
        );
        assert!(
            bootstrap_token_user(
                &stored(Some("2099-01-01T00:00:00Z"), "true"),
                "abcdef",
                "0123456789abcdef",
                now
            )
            .is_some()
        );
    }
}
