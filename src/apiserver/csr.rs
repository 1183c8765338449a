//! CertificateSigningRequests signed as kube-controller-manager's signers sign them
//! (`pkg/controller/certificates/signer`): once a request is approved and has no certificate,
//! the signer its `signerName` names checks what it asks for and either issues a certificate
//! with the cluster CA or marks it `Failed`.
//!
//! - `kubernetes.io/kube-apiserver-client`: any subject; client usages only.
//! - `kubernetes.io/kube-apiserver-client-kubelet`: `CN=system:node:<name>`, `O=system:nodes`,
//!   no subject alternative names; client usages.
//! - `kubernetes.io/kubelet-serving`: the same subject, with at least one DNS name or IP
//!   address and no e-mail or URI; server usages.
//!
//! Certificates are valid from five minutes ago (for clocks slightly behind) until the
//! request's `expirationSeconds`, at most a year (kube-controller-manager's
//! `--cluster-signing-duration`) and never past the CA's own expiry. CAs in every format
//! openssl and kubeadm write (RSA or EC keys) sign ([`crate::pki::key_pair_from_pem`]).
//!
//! [`decide`] is pure; [`run`] is the controller around it, which the embedded management
//! cluster and capictl nodes' controller-manager both run.

use base64::Engine;
use serde_json::{Value, json};

use crate::pki::Pki;

pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";
pub const KUBELET_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
pub const KUBELET_SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";

/// kube-controller-manager's `--cluster-signing-duration` default.
const MAX_SECONDS: i64 = 365 * 24 * 3600;
/// How far back a certificate starts, for clocks slightly behind.
const BACKDATE_SECONDS: i64 = 5 * 60;

/// What the signer does with a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Not this signer's, not approved, denied, failed or already issued.
    Nothing,
    /// A PEM certificate for `status.certificate`.
    Issue(String),
    /// Why the signer will not issue it, for a `Failed` condition.
    Fail(String),
}

/// A request's subject and what it asks for, read from its PEM.
struct Requested {
    params: rcgen::CertificateSigningRequestParams,
    common_name: String,
    organizations: Vec<String>,
}

fn read_request(csr: &Value) -> Result<Requested, String> {
    let pem = csr["spec"]["request"]
        .as_str()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or("spec.request is not a base64-encoded PEM certificate request")?;
    let params = rcgen::CertificateSigningRequestParams::from_pem(&pem)
        .map_err(|e| format!("spec.request is not a certificate request: {e}"))?;
    let text = |v: &rcgen::DnValue| match v {
        rcgen::DnValue::Utf8String(s) => s.clone(),
        rcgen::DnValue::PrintableString(s) => s.as_str().to_string(),
        other => format!("{other:?}"),
    };
    let mut common_name = String::new();
    let mut organizations = Vec::new();
    for (kind, value) in params.params.distinguished_name.iter() {
        match kind {
            rcgen::DnType::CommonName => common_name = text(value),
            rcgen::DnType::OrganizationName => organizations.push(text(value)),
            _ => {}
        }
    }
    Ok(Requested {
        params,
        common_name,
        organizations,
    })
}

/// Whether a condition of `kind` is set on the request.
fn has_condition(csr: &Value, kind: &str) -> bool {
    csr["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["status"] != "False")
}

/// The usages a signer allows (kube-controller-manager's names), and those it requires.
fn usages_for(signer: &str) -> (&'static [&'static str], &'static [&'static str]) {
    match signer {
        KUBELET_SERVING_SIGNER => (
            &["digital signature", "key encipherment", "server auth"],
            &["server auth"],
        ),
        _ => (
            &["digital signature", "key encipherment", "client auth"],
            &["client auth"],
        ),
    }
}

/// Why `signer` will not sign what `requested` asks for; None when it will.
fn refusal(signer: &str, requested: &Requested, usages: &[String]) -> Option<String> {
    let (allowed, required) = usages_for(signer);
    if let Some(bad) = usages.iter().find(|u| !allowed.contains(&u.as_str())) {
        return Some(format!(
            "invalid usage for {} certificate: {bad:?} (allowed: {})",
            if signer == KUBELET_SERVING_SIGNER {
                "serving"
            } else {
                "client"
            },
            allowed.join(", ")
        ));
    }
    if let Some(missing) = required.iter().find(|r| !usages.iter().any(|u| u == *r)) {
        return Some(format!("missing required usage {missing:?}"));
    }
    let sans = &requested.params.params.subject_alt_names;
    let (dns_or_ip, other): (Vec<_>, Vec<_>) = sans
        .iter()
        .partition(|s| matches!(s, rcgen::SanType::DnsName(_) | rcgen::SanType::IpAddress(_)));
    match signer {
        CLIENT_SIGNER => None,
        KUBELET_CLIENT_SIGNER | KUBELET_SERVING_SIGNER => {
            if requested.organizations != ["system:nodes"] {
                return Some(format!(
                    "subject organization is not system:nodes: {:?}",
                    requested.organizations
                ));
            }
            if !requested.common_name.starts_with("system:node:") {
                return Some(format!(
                    "subject common name does not begin with system:node: {:?}",
                    requested.common_name
                ));
            }
            if signer == KUBELET_CLIENT_SIGNER && !sans.is_empty() {
                return Some("subject alternative names are not allowed".into());
            }
            if signer == KUBELET_SERVING_SIGNER && (dns_or_ip.is_empty() || !other.is_empty()) {
                return Some(
                    "DNS or IP subjectAltName is required, and e-mail and URI subjectAltNames are not allowed"
                        .into(),
                );
            }
            None
        }
        _ => Some(format!("{signer} is not a signer this cluster has")),
    }
}

/// The verb on `signers` (kube-apiserver's CertificateApproval and CertificateSigning
/// admission) that a write of `new` over `old` needs: `approve` to add an Approved or Denied
/// condition, `sign` to set the certificate; with the signer's name.
pub fn signer_verb<'a>(old: &Value, new: &'a Value) -> Option<(&'static str, &'a str)> {
    let signer = new["spec"]["signerName"].as_str().unwrap_or_default();
    let decided = |csr: &Value, kind| has_condition(csr, kind);
    if ["Approved", "Denied"]
        .into_iter()
        .any(|kind| decided(new, kind) && !decided(old, kind))
    {
        return Some(("approve", signer));
    }
    let certificate = |csr: &Value| csr["status"]["certificate"].clone();
    (certificate(new) != certificate(old) && !certificate(new).is_null())
        .then_some(("sign", signer))
}

/// What the signer does with `csr` (as stored) at Unix time `now`, signing with `ca`.
pub fn decide(csr: &Value, ca: &Pki, now: time::OffsetDateTime) -> Decision {
    let signer = csr["spec"]["signerName"].as_str().unwrap_or_default();
    if ![CLIENT_SIGNER, KUBELET_CLIENT_SIGNER, KUBELET_SERVING_SIGNER].contains(&signer)
        || !has_condition(csr, "Approved")
        || has_condition(csr, "Denied")
        || has_condition(csr, "Failed")
        || csr["status"]["certificate"]
            .as_str()
            .is_some_and(|c| !c.is_empty())
    {
        return Decision::Nothing;
    }
    let requested = match read_request(csr) {
        Ok(r) => r,
        Err(why) => return Decision::Fail(why),
    };
    let usages: Vec<String> = csr["spec"]["usages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|u| u.as_str().map(String::from))
        .collect();
    if let Some(why) = refusal(signer, &requested, &usages) {
        return Decision::Fail(why);
    }
    let seconds = csr["spec"]["expirationSeconds"]
        .as_i64()
        .map_or(MAX_SECONDS, |s| s.clamp(600, MAX_SECONDS));
    match issue(requested.params, &usages, ca, now, seconds) {
        Ok(pem) => Decision::Issue(pem),
        Err(why) => Decision::Fail(why),
    }
}

fn issue(
    mut request: rcgen::CertificateSigningRequestParams,
    usages: &[String],
    ca: &Pki,
    now: time::OffsetDateTime,
    seconds: i64,
) -> Result<String, String> {
    let ca_key = crate::pki::key_pair_from_pem(&ca.ca.key).map_err(|e| format!("the CA: {e}"))?;
    let ca_expiry = x509_parser::pem::parse_x509_pem(ca.ca.cert.as_bytes())
        .ok()
        .and_then(|(_, pem)| {
            let (_, cert) = x509_parser::parse_x509_certificate(&pem.contents).ok()?;
            time::OffsetDateTime::from_unix_timestamp(cert.validity().not_after.timestamp()).ok()
        });
    let issuer = rcgen::Issuer::from_ca_cert_pem(&ca.ca.cert, ca_key)
        .map_err(|e| format!("the CA certificate: {e}"))?;
    let params = &mut request.params;
    params.not_before = now - time::Duration::seconds(BACKDATE_SECONDS);
    let mut not_after = now + time::Duration::seconds(seconds);
    if let Some(expiry) = ca_expiry {
        not_after = not_after.min(expiry);
    }
    params.not_after = not_after;
    params.is_ca = rcgen::IsCa::NoCa;
    params.key_usages = usages
        .iter()
        .filter_map(|u| match u.as_str() {
            "digital signature" => Some(rcgen::KeyUsagePurpose::DigitalSignature),
            "key encipherment" => Some(rcgen::KeyUsagePurpose::KeyEncipherment),
            _ => None,
        })
        .collect();
    params.extended_key_usages = usages
        .iter()
        .filter_map(|u| match u.as_str() {
            "client auth" => Some(rcgen::ExtendedKeyUsagePurpose::ClientAuth),
            "server auth" => Some(rcgen::ExtendedKeyUsagePurpose::ServerAuth),
            _ => None,
        })
        .collect();
    request
        .signed_by(&issuer)
        .map(|c| c.pem())
        .map_err(|e| format!("signing: {e}"))
}

/// The status patch that records `decision` on `csr`: its conditions (a Failed one added when
/// the signer refuses) and the certificate it issued; None when there is nothing to record.
pub fn status_patch(csr: &Value, decision: &Decision, now: &str) -> Option<Value> {
    let mut conditions = csr["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut status = json!({});
    match decision {
        Decision::Nothing => return None,
        Decision::Issue(pem) => {
            status["certificate"] = json!(base64::engine::general_purpose::STANDARD.encode(pem));
        }
        Decision::Fail(why) => conditions.push(json!({"type": "Failed", "status": "True", "reason": "SignerValidationFailure", "message": why, "lastUpdateTime": now, "lastTransitionTime": now})),
    }
    status["conditions"] = json!(conditions);
    Some(json!({"status": status}))
}

/// Signs the approved requests of the cluster `client` reaches with `ca`, as they come, until
/// the task is dropped. A failed write is tried again at the next change or after a minute.
pub async fn run(client: kube::Client, ca: Pki) {
    use futures::StreamExt;
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    use kube::api::{Api, Patch, PatchParams};
    use kube::runtime::watcher;
    let csrs: Api<CertificateSigningRequest> = Api::all(client);
    let stream = watcher::watcher(csrs.clone(), watcher::Config::default());
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        let objects = match event {
            Ok(watcher::Event::Apply(csr) | watcher::Event::InitApply(csr)) => vec![csr],
            Ok(_) => continue,
            Err(e) => {
                tracing::debug!(error = %e, "CSR signer: the watch failed; it starts again");
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                continue;
            }
        };
        for csr in objects {
            let value = serde_json::to_value(&csr).unwrap_or_default();
            let decision = decide(&value, &ca, time::OffsetDateTime::now_utc());
            let Some(patch) = status_patch(&value, &decision, &super::object::now()) else {
                continue;
            };
            let name = kube::ResourceExt::name_any(&csr);
            match csrs
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) if matches!(decision, Decision::Issue(_)) => {
                    tracing::info!(csr = %name, "signed")
                }
                Ok(_) => tracing::info!(csr = %name, "refused to sign"),
                Err(e) => {
                    tracing::warn!(csr = %name, error = %e, "CSR signer: recording the decision failed")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(common_name: &str, organizations: &[&str], sans: Vec<String>) -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(sans).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, common_name);
        for o in organizations {
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, *o);
        }
        let pem = params.serialize_request(&key).unwrap().pem().unwrap();
        base64::engine::general_purpose::STANDARD.encode(pem)
    }

    fn csr(signer: &str, request: String, usages: &[&str], approved: bool) -> Value {
        let mut csr = json!({"spec": {"signerName": signer, "request": request, "usages": usages}});
        if approved {
            csr["status"]["conditions"] = json!([{"type": "Approved", "status": "True"}]);
        }
        csr
    }

    fn subject_of(pem: &str) -> (String, Vec<String>, i64) {
        let (_, pem) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&pem.contents).unwrap();
        let cn = cert
            .subject()
            .iter_common_name()
            .next()
            .unwrap()
            .as_str()
            .unwrap()
            .to_string();
        let orgs = cert
            .subject()
            .iter_organization()
            .map(|o| o.as_str().unwrap().to_string())
            .collect();
        let lifetime =
            cert.validity().not_after.timestamp() - cert.validity().not_before.timestamp();
        (cn, orgs, lifetime)
    }

    #[test]
    fn each_signer_signs_what_it_allows_and_fails_the_rest() {
        crate::install_crypto_provider();
        let ca = Pki::generate("test-ca").unwrap();
        let now = time::OffsetDateTime::now_utc();
        let client = &["digital signature", "key encipherment", "client auth"];
        let serving = &["digital signature", "key encipherment", "server auth"];
        let alice = || request("alice", &["developers"], vec![]);
        let node = |sans| request("system:node:w1", &["system:nodes"], sans);

        assert_eq!(
            decide(&csr(CLIENT_SIGNER, alice(), client, false), &ca, now),
            Decision::Nothing
        );
        let Decision::Issue(pem) = decide(&csr(CLIENT_SIGNER, alice(), client, true), &ca, now)
        else {
            panic!("an approved client request is signed");
        };
        let (cn, orgs, lifetime) = subject_of(&pem);
        assert_eq!(
            (cn.as_str(), orgs),
            ("alice", vec!["developers".to_string()])
        );
        assert_eq!(lifetime, MAX_SECONDS + BACKDATE_SECONDS);
        let mut short = csr(CLIENT_SIGNER, alice(), client, true);
        short["spec"]["expirationSeconds"] = json!(3600);
        let Decision::Issue(pem) = decide(&short, &ca, now) else {
            panic!()
        };
        assert_eq!(subject_of(&pem).2, 3600 + BACKDATE_SECONDS);

        let cases: Vec<(&str, Value, bool)> = vec![
            (
                "client usages for a server",
                csr(CLIENT_SIGNER, alice(), serving, true),
                false,
            ),
            (
                "a kubelet client",
                csr(KUBELET_CLIENT_SIGNER, node(vec![]), client, true),
                true,
            ),
            (
                "a kubelet client for a user",
                csr(KUBELET_CLIENT_SIGNER, alice(), client, true),
                false,
            ),
            (
                "a kubelet client with names",
                csr(KUBELET_CLIENT_SIGNER, node(vec!["w1".into()]), client, true),
                false,
            ),
            (
                "kubelet serving",
                csr(
                    KUBELET_SERVING_SIGNER,
                    node(vec!["w1".into(), "10.0.0.7".into()]),
                    serving,
                    true,
                ),
                true,
            ),
            (
                "kubelet serving without names",
                csr(KUBELET_SERVING_SIGNER, node(vec![]), serving, true),
                false,
            ),
            (
                "kubelet serving for clients",
                csr(
                    KUBELET_SERVING_SIGNER,
                    node(vec!["w1".into()]),
                    client,
                    true,
                ),
                false,
            ),
        ];
        for (what, request, signs) in cases {
            match decide(&request, &ca, now) {
                Decision::Issue(_) => assert!(signs, "{what} was signed"),
                Decision::Fail(why) => assert!(!signs, "{what} failed: {why}"),
                Decision::Nothing => panic!("{what}: nothing done"),
            }
        }
        let mut denied = csr(CLIENT_SIGNER, alice(), client, true);
        denied["status"]["conditions"] =
            json!([{"type": "Approved", "status": "True"}, {"type": "Denied", "status": "True"}]);
        assert_eq!(decide(&denied, &ca, now), Decision::Nothing);
        let other = csr("example.com/signer", alice(), client, true);
        assert_eq!(decide(&other, &ca, now), Decision::Nothing);
    }

    #[test]
    fn cas_openssl_made_sign_requests() {
        crate::install_crypto_provider();
        let ca = Pki {
            ca: crate::pki::KeyPairPem {
                cert: include_str!("testdata/rsa-pkcs1.crt").into(),
                key: include_str!("testdata/rsa-pkcs1.key").into(),
            },
        };
        let request = csr(
            KUBELET_CLIENT_SIGNER,
            request("system:node:w1", &["system:nodes"], vec![]),
            &["digital signature", "key encipherment", "client auth"],
            true,
        );
        let decision = decide(&request, &ca, time::OffsetDateTime::now_utc());
        assert!(matches!(decision, Decision::Issue(_)), "{decision:?}");
    }
}
