//! ServiceAccount tokens as kube-apiserver issues and checks them: the TokenRequest
//! subresource (`kubectl create token`, the kubelet's projected tokens) answers with a JWT
//! (ES256) whose claims bind it to the ServiceAccount's namespace, name and uid, its audiences
//! and an expiry; a bearer token is the ServiceAccount's identity only while its signature,
//! times and audience hold and the ServiceAccount still exists with that uid.
//!
//! The signing key is kept in the store (`kube-system/capictl-service-account-key`, readable
//! only by those who may read kube-system Secrets, who could mint tokens anyway), so every API
//! server on one store signs and checks alike and a restart keeps issued tokens valid.

use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

/// Who tokens are issued by, and for, unless a request names other audiences.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The Secret holding the signing key.
pub const KEY_SECRET_NAMESPACE: &str = "kube-system";
pub const KEY_SECRET_NAME: &str = "capictl-service-account-key";
/// kube-apiserver's default and shortest token lifetimes.
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
pub const MIN_EXPIRATION_SECONDS: i64 = 600;
/// At most 2^32 seconds, as kube-apiserver allows.
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

/// Why a bearer token is not a ServiceAccount's.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TokenError {
    #[error("not a signed token")]
    Malformed,
    #[error("the signature does not match")]
    BadSignature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token is not for this server (audiences {0:?})")]
    WrongAudience(Vec<String>),
    #[error("the token was not issued by this server")]
    WrongIssuer,
    #[error("the token names no ServiceAccount")]
    NoServiceAccount,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn unb64(text: &str) -> Result<Vec<u8>, TokenError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|_| TokenError::Malformed)
}

/// A signing key: ECDSA P-256, as PKCS#8.
pub struct Signer {
    key: EcdsaKeyPair,
    key_id: String,
}

impl Signer {
    /// A new key's PKCS#8 bytes.
    pub fn generate() -> Vec<u8> {
        EcdsaKeyPair::generate_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &SystemRandom::new(),
        )
        .expect("the system random source works")
        .as_ref()
        .to_vec()
    }

    pub fn from_pkcs8(der: &[u8]) -> Result<Signer, String> {
        let key = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            der,
            &SystemRandom::new(),
        )
        .map_err(|e| format!("the service account signing key cannot be read: {e}"))?;
        let digest = ring::digest::digest(&ring::digest::SHA256, key.public_key().as_ref());
        Ok(Signer {
            key,
            key_id: b64(digest.as_ref()),
        })
    }

    /// The JWT for these claims.
    pub fn sign(&self, claims: &Value) -> String {
        let header = json!({"alg": "ES256", "kid": self.key_id});
        let signing_input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let signature = self
            .key
            .sign(&SystemRandom::new(), signing_input.as_bytes())
            .expect("ECDSA signing does not fail");
        format!("{signing_input}.{}", b64(signature.as_ref()))
    }

    /// The claims of a token this key signed; their times and audiences are [`check`]'s.
    pub fn verify(&self, token: &str) -> Result<Value, TokenError> {
        let mut parts = token.split('.');
        let (Some(header), Some(claims), Some(sig), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenError::Malformed);
        };
        let public = signature::UnparsedPublicKey::new(
            &signature::ECDSA_P256_SHA256_FIXED,
            self.key.public_key().as_ref(),
        );
        public
            .verify(format!("{header}.{claims}").as_bytes(), &unb64(sig)?)
            .map_err(|_| TokenError::BadSignature)?;
        let header: Value =
            serde_json::from_slice(&unb64(header)?).map_err(|_| TokenError::Malformed)?;
        if header["alg"] != "ES256" {
            return Err(TokenError::Malformed);
        }
        serde_json::from_slice(&unb64(claims)?).map_err(|_| TokenError::Malformed)
    }
}

/// What a TokenRequest asks for, defaulted and bounded as kube-apiserver does.
#[derive(Debug, PartialEq)]
pub struct Request {
    pub audiences: Vec<String>,
    pub expiration_seconds: i64,
    /// The Pod or Secret the token is bound to: kind, name, uid.
    pub bound: Option<(String, String, String)>,
}

/// Reads a TokenRequest's spec; the error names the field.
pub fn request_of(token_request: &Value) -> Result<Request, (String, String)> {
    let spec = &token_request["spec"];
    let audiences: Vec<String> = spec["audiences"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default();
    let expiration_seconds = spec["expirationSeconds"]
        .as_i64()
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    if expiration_seconds < MIN_EXPIRATION_SECONDS {
        return Err((
            "spec.expirationSeconds".into(),
            format!(
                "Invalid value: {expiration_seconds}: may not specify a duration less than 10 minutes"
            ),
        ));
    }
    if expiration_seconds > MAX_EXPIRATION_SECONDS {
        return Err((
            "spec.expirationSeconds".into(),
            format!(
                "Invalid value: {expiration_seconds}: may not specify a duration longer than 2^32 seconds"
            ),
        ));
    }
    let bound = spec["boundObjectRef"].as_object().map(|r| {
        let field = |k: &str| {
            r.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        (field("kind"), field("name"), field("uid"))
    });
    if let Some((kind, _, _)) = &bound
        && !matches!(kind.as_str(), "Pod" | "Secret" | "Node")
    {
        return Err((
            "spec.boundObjectRef.kind".into(),
            format!("Unsupported value: {kind:?}: supported values: \"Pod\", \"Secret\", \"Node\""),
        ));
    }
    Ok(Request {
        audiences: if audiences.is_empty() {
            vec![ISSUER.to_string()]
        } else {
            audiences
        },
        expiration_seconds,
        bound,
    })
}

/// The claims of a token for a ServiceAccount, issued at Unix time `now`.
pub fn claims(
    namespace: &str,
    name: &str,
    uid: &str,
    request: &Request,
    now: i64,
    id: &str,
) -> Value {
    let mut kubernetes = json!({
        "namespace": namespace,
        "serviceaccount": {"name": name, "uid": uid},
    });
    if let Some((kind, bound_name, bound_uid)) = &request.bound {
        kubernetes[kind.to_lowercase()] = json!({"name": bound_name, "uid": bound_uid});
    }
    json!({
        "aud": request.audiences,
        "exp": now + request.expiration_seconds,
        "iat": now,
        "iss": ISSUER,
        "jti": id,
        "kubernetes.io": kubernetes,
        "nbf": now,
        "sub": format!("system:serviceaccount:{namespace}:{name}"),
    })
}

/// Whom verified claims stand for: a ServiceAccount, and the object the token is bound to.
#[derive(Debug, PartialEq, Eq)]
pub struct Subject {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// The Pod, Secret or Node the token lives only as long as: kind, name, uid.
    pub bound: Option<(String, String, String)>,
}

/// Whom verified claims stand for at Unix time `now`, for a server that accepts `audiences`.
pub fn check(claims: &Value, now: i64, audiences: &[&str]) -> Result<Subject, TokenError> {
    if claims["iss"] != ISSUER {
        return Err(TokenError::WrongIssuer);
    }
    if claims["exp"].as_i64().is_none_or(|exp| exp <= now) {
        return Err(TokenError::Expired);
    }
    if claims["nbf"].as_i64().is_some_and(|nbf| nbf > now) {
        return Err(TokenError::NotYetValid);
    }
    let aud: Vec<String> = match &claims["aud"] {
        Value::String(one) => vec![one.clone()],
        Value::Array(many) => many
            .iter()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        _ => Vec::new(),
    };
    if !aud.iter().any(|a| audiences.contains(&a.as_str())) {
        return Err(TokenError::WrongAudience(aud));
    }
    let k = &claims["kubernetes.io"];
    let field = |v: &Value| {
        v.as_str()
            .map(String::from)
            .ok_or(TokenError::NoServiceAccount)
    };
    let bound = ["Pod", "Secret", "Node"].into_iter().find_map(|kind| {
        let object = &k[kind.to_lowercase()];
        Some((
            kind.to_string(),
            object["name"].as_str()?.to_string(),
            object["uid"].as_str()?.to_string(),
        ))
    });
    Ok(Subject {
        namespace: field(&k["namespace"])?,
        name: field(&k["serviceaccount"]["name"])?,
        uid: field(&k["serviceaccount"]["uid"])?,
        bound,
    })
}

/// Whether a bearer token looks like a JWT (three base64url parts), not a bootstrap token.
pub fn is_jwt(bearer: &str) -> bool {
    bearer.split('.').count() == 3 && bearer.starts_with("eyJ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer() -> Signer {
        Signer::from_pkcs8(&Signer::generate()).unwrap()
    }

    #[test]
    fn a_signed_token_verifies_and_a_changed_one_does_not() {
        let s = signer();
        let request = request_of(&json!({"spec": {}})).unwrap();
        let claims = claims("apps", "robot", "u-1", &request, 1000, "j-1");
        let token = s.sign(&claims);
        assert!(is_jwt(&token));
        assert_eq!(s.verify(&token).unwrap(), claims);
        let mut parts: Vec<&str> = token.split('.').collect();
        let forged = b64(json!({"sub": "system:serviceaccount:kube-system:admin"})
            .to_string()
            .as_bytes());
        parts[1] = &forged;
        assert_eq!(s.verify(&parts.join(".")), Err(TokenError::BadSignature));
        assert_eq!(signer().verify(&token), Err(TokenError::BadSignature));
        assert_eq!(s.verify("a.b"), Err(TokenError::Malformed));
    }

    #[test]
    fn claims_hold_between_their_times_for_their_audiences() {
        let request = request_of(&json!({"spec": {"expirationSeconds": 600}})).unwrap();
        let claims = claims("apps", "robot", "u-1", &request, 1000, "j-1");
        let ours = [ISSUER];
        assert_eq!(
            check(&claims, 1000, &ours),
            Ok(Subject {
                namespace: "apps".into(),
                name: "robot".into(),
                uid: "u-1".into(),
                bound: None,
            })
        );
        assert_eq!(check(&claims, 1600, &ours), Err(TokenError::Expired));
        assert_eq!(check(&claims, 999, &ours), Err(TokenError::NotYetValid));
        assert!(matches!(
            check(&claims, 1000, &["vault"]),
            Err(TokenError::WrongAudience(_))
        ));
    }

    #[test]
    fn requests_are_defaulted_and_bounded() {
        let r = request_of(&json!({"spec": {"audiences": ["vault"]}})).unwrap();
        assert_eq!(r.audiences, ["vault"]);
        assert_eq!(r.expiration_seconds, 3600);
        let short = request_of(&json!({"spec": {"expirationSeconds": 60}})).unwrap_err();
        assert_eq!(short.0, "spec.expirationSeconds");
        let bound = request_of(
            &json!({"spec": {"boundObjectRef": {"kind": "Pod", "name": "p", "uid": "u"}}}),
        )
        .unwrap();
        let c = claims("apps", "robot", "u-1", &bound, 0, "j");
        assert_eq!(c["kubernetes.io"]["pod"], json!({"name": "p", "uid": "u"}));
        assert_eq!(
            check(&c, 1, &[ISSUER]).unwrap().bound,
            Some(("Pod".into(), "p".into(), "u".into()))
        );
        assert!(request_of(&json!({"spec": {"boundObjectRef": {"kind": "Deployment"}}})).is_err());
    }
}
