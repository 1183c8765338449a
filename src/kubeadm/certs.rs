//! Cluster certificates and kubeconfig Secrets (`<cluster>-ca`, `<cluster>-kubeconfig`), in
//! upstream's format: type `cluster.x-k8s.io/secret`, keys `tls.crt`/`tls.key` and `value`.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::api;
use crate::api::kubeadm_config::ClusterConfiguration;
use crate::pki::{CertificatePolicy, KeyAlgorithm, KeyPairPem, Pki, PkiError};

/// The Secret type Cluster API gives the Secrets it generates.
pub const SECRET_TYPE: &str = "cluster.x-k8s.io/secret";

#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error(transparent)]
    Tls(#[from] PkiError),
    #[error("Secret {0} has no {1}")]
    MissingKey(String, &'static str),
    #[error("Secret {0}: {1} is not UTF-8 PEM")]
    NotPem(String, &'static str),
    /// The CA in a Secret cannot sign: the problem, and what to do.
    #[error(
        "Secret {secret}: {problem}; replace tls.crt and tls.key with a CA certificate and its key (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC)"
    )]
    UnusableCa { secret: String, problem: String },
    #[error("building the kubeconfig: {0}")]
    Kubeconfig(String),
}

pub fn ca_secret_name(cluster: &str) -> String {
    format!("{cluster}-ca")
}

pub fn kubeconfig_secret_name(cluster: &str) -> String {
    format!("{cluster}-kubeconfig")
}

fn secret(
    name: String,
    namespace: &str,
    cluster: &str,
    owner: OwnerReference,
    data: BTreeMap<String, ByteString>,
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([(
                api::CLUSTER_NAME_LABEL.to_string(),
                cluster.to_string(),
            )])),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        type_: Some(SECRET_TYPE.into()),
        data: Some(data),
        ..Default::default()
    }
}

/// A new cluster CA (CN `kubernetes`, ECDSA P-256) as the `<cluster>-ca` Secret.
pub fn new_ca_secret(
    cluster: &str,
    namespace: &str,
    owner: OwnerReference,
) -> Result<(Secret, Pki), CertsError> {
    let pki = Pki::generate("kubernetes")?;
    let data = BTreeMap::from([
        (
            "tls.crt".to_string(),
            ByteString(pki.ca.cert.clone().into_bytes()),
        ),
        (
            "tls.key".to_string(),
            ByteString(pki.ca.key.clone().into_bytes()),
        ),
    ]);
    Ok((
        secret(ca_secret_name(cluster), namespace, cluster, owner, data),
        pki,
    ))
}

/// The CA a `<cluster>-ca` Secret holds.
pub fn ca_from_secret(secret: &Secret) -> Result<Pki, CertsError> {
    let pki = Pki {
        ca: pem_pair(secret)?,
    };
    // A CA brought by the user is checked once here, so that what cannot sign is said by name.
    let unusable = |problem: String| CertsError::UnusableCa {
        secret: secret.metadata.name.clone().unwrap_or_default(),
        problem,
    };
    crate::pki::key_pair_from_pem(&pki.ca.key).map_err(|e| unusable(format!("tls.key: {e}")))?;
    {
        use rustls::pki_types::pem::PemObject;
        rustls::pki_types::CertificateDer::from_pem_slice(pki.ca.cert.as_bytes())
            .map_err(|e| unusable(format!("tls.crt is not a PEM certificate: {e}")))?;
    }
    Ok(pki)
}

/// The admin kubeconfig of a workload cluster (user `kubernetes-admin` in `system:masters`,
/// signed by the cluster CA, a key of the control plane's algorithm, valid a year), as the
/// `<cluster>-kubeconfig` Secret.
pub fn kubeconfig_secret(
    cluster: &str,
    namespace: &str,
    server: &str,
    ca: &Pki,
    owner: OwnerReference,
    key: KeyAlgorithm,
) -> Result<Secret, CertsError> {
    let policy = CertificatePolicy {
        key,
        ..CertificatePolicy::default()
    };
    let admin = ca.issue_with(
        &policy,
        "kubernetes-admin",
        &["system:masters"],
        &[],
        crate::pki::Usage::Client,
    )?;
    let config = crate::kubeconfig::build(
        cluster,
        &format!("{cluster}-admin"),
        &format!("{cluster}-admin@{cluster}"),
        server,
        &ca.ca.cert,
        &admin,
    );
    let text =
        crate::yaml::to_string(&config).map_err(|e| CertsError::Kubeconfig(e.to_string()))?;
    let data = BTreeMap::from([("value".to_string(), ByteString(text.into_bytes()))]);
    Ok(secret(
        kubeconfig_secret_name(cluster),
        namespace,
        cluster,
        owner,
        data,
    ))
}

/// How long before its client certificate expires a kubeconfig is written again: half of the
/// year it is valid for, as upstream does.
pub const CLIENT_CERT_RENEWAL: std::time::Duration =
    std::time::Duration::from_secs(365 * 24 * 3600 / 2);

/// Whether the client certificate of a `<cluster>-kubeconfig` Secret expires before `deadline`
/// (Unix seconds); a kubeconfig that cannot be read counts as expiring, so it is written anew.
pub fn kubeconfig_expires_before(secret: &Secret, deadline: i64) -> bool {
    use base64::Engine;
    use rustls::pki_types::pem::PemObject;
    let not_after = || -> Option<i64> {
        let text = secret.data.as_ref()?.get("value")?;
        let config =
            kube::config::Kubeconfig::from_yaml(std::str::from_utf8(&text.0).ok()?).ok()?;
        let data = config
            .auth_infos
            .first()?
            .auth_info
            .as_ref()?
            .client_certificate_data
            .clone()?;
        let pem = base64::engine::general_purpose::STANDARD
            .decode(data)
            .ok()?;
        let der = rustls::pki_types::CertificateDer::from_pem_slice(&pem).ok()?;
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
        Some(cert.validity().not_after.timestamp())
    };
    not_after().is_none_or(|t| t < deadline)
}

/// The four certificate Secrets of a kubeadm cluster and what they hold.
pub const CERTIFICATES: [(&str, &str); 4] = [
    ("ca", "kubernetes"),
    ("etcd", "etcd-ca"),
    ("proxy", "front-proxy-ca"),
    ("sa", "service-account"),
];

/// The certificates a ClusterConfiguration asks for: its `encryptionAlgorithm` (upstream's
/// default is RSA-2048; capictl's, ECDSA P-256, as kubeadm's other choice and faster) and its
/// lifetimes.
pub fn certificate_policy(configuration: Option<&ClusterConfiguration>) -> CertificatePolicy {
    let mut policy = CertificatePolicy::default();
    let Some(configuration) = configuration else {
        return policy;
    };
    if let Some(key) = configuration
        .encryption_algorithm
        .and_then(|a| serde_json::to_value(a).ok())
        .and_then(|name| name.as_str()?.parse().ok())
    {
        policy.key = key;
    }
    if let Some(days) = configuration.certificate_validity_period_days {
        policy.days = days.into();
    }
    if let Some(days) = configuration.ca_certificate_validity_period_days {
        policy.ca_days = days.into();
    }
    policy
}

/// A new certificate Secret (`<cluster>-<purpose>`): a CA for ca/etcd/proxy, a key pair (the
/// public key in `tls.crt`) for sa, with the policy's key.
pub fn new_certificate_secret(
    cluster: &str,
    namespace: &str,
    purpose: &str,
    common_name: &str,
    owner: OwnerReference,
    policy: &CertificatePolicy,
) -> Result<Secret, CertsError> {
    let (cert, key) = if purpose == "sa" {
        let key = policy.key.generate()?;
        (key.public_key_pem(), key.serialize_pem())
    } else {
        let pki = Pki::generate_with(common_name, policy)?;
        (pki.ca.cert, pki.ca.key)
    };
    let data = BTreeMap::from([
        ("tls.crt".to_string(), ByteString(cert.into_bytes())),
        ("tls.key".to_string(), ByteString(key.into_bytes())),
    ]);
    Ok(secret(
        format!("{cluster}-{purpose}"),
        namespace,
        cluster,
        owner,
        data,
    ))
}

/// A Secret's `tls.crt` and `tls.key`, as they are (the `sa` Secret holds a public key in
/// `tls.crt`, not a certificate).
pub fn pem_pair(secret: &Secret) -> Result<KeyPairPem, CertsError> {
    let name = secret.metadata.name.clone().unwrap_or_default();
    let get = |key: &'static str| -> Result<String, CertsError> {
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .ok_or(CertsError::MissingKey(name.clone(), key))?;
        String::from_utf8(bytes.0.clone()).map_err(|_| CertsError::NotPem(name.clone(), key))
    };
    Ok(KeyPairPem {
        cert: get("tls.crt")?,
        key: get("tls.key")?,
    })
}

/// kubeadm's discovery hash of a CA: `sha256:` and the hex SHA-256 of its public key info.
pub fn ca_cert_hash(ca_cert_pem: &str) -> Result<String, CertsError> {
    use rustls::pki_types::pem::PemObject;
    let der = rustls::pki_types::CertificateDer::from_pem_slice(ca_cert_pem.as_bytes())
        .map_err(|_| CertsError::NotPem("cluster CA".into(), "tls.crt"))?;
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref())
        .map_err(|_| CertsError::NotPem("cluster CA".into(), "tls.crt"))?;
    let digest = ring::digest::digest(&ring::digest::SHA256, cert.tbs_certificate.subject_pki.raw);
    Ok(format!("sha256:{}", crate::pki::hex(digest.as_ref())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: "Cluster".into(),
            name: "c".into(),
            uid: "u".into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_certificate_policy_follows_the_cluster_configuration() {
        assert_eq!(certificate_policy(None), CertificatePolicy::default());
        let configuration: ClusterConfiguration = serde_json::from_value(serde_json::json!({
            "encryptionAlgorithm": "RSA-4096",
            "certificateValidityPeriodDays": 90,
            "caCertificateValidityPeriodDays": 1000,
        }))
        .unwrap();
        assert_eq!(
            certificate_policy(Some(&configuration)),
            CertificatePolicy {
                key: KeyAlgorithm::Rsa(4096),
                days: 90,
                ca_days: 1000
            }
        );
        let p384 = CertificatePolicy {
            key: KeyAlgorithm::EcdsaP384,
            ..CertificatePolicy::default()
        };
        let ca = new_certificate_secret("c", "ns", "ca", "kubernetes", owner(), &p384).unwrap();
        let key = String::from_utf8(ca.data.unwrap()["tls.key"].0.clone()).unwrap();
        let key = crate::pki::key_pair_from_pem(&key).unwrap();
        assert!(key.is_compatible(&rcgen::PKCS_ECDSA_P384_SHA384));
    }

    #[test]
    fn kubeconfigs_are_renewed_in_the_second_half_of_their_year() {
        let ca = new_ca_secret("c", "ns", owner()).unwrap().1;
        let secret = kubeconfig_secret(
            "c",
            "ns",
            "https://10.0.0.1:6443",
            &ca,
            owner(),
            KeyAlgorithm::default(),
        )
        .unwrap();
        let now = k8s_openapi::jiff::Timestamp::now().as_second();
        let day = 24 * 3600;
        assert!(!kubeconfig_expires_before(
            &secret,
            now + CLIENT_CERT_RENEWAL.as_secs() as i64
        ));
        assert!(kubeconfig_expires_before(&secret, now + 366 * day));
        let mut broken = secret.clone();
        broken
            .data
            .as_mut()
            .unwrap()
            .insert("value".into(), ByteString(b"not a kubeconfig".to_vec()));
        assert!(kubeconfig_expires_before(&broken, now));
    }

    #[test]
    fn certificate_secrets_as_upstream_writes_them() {
        for (purpose, cn) in CERTIFICATES {
            let s = new_certificate_secret(
                "c",
                "ns",
                purpose,
                cn,
                owner(),
                &CertificatePolicy::default(),
            )
            .unwrap();
            assert_eq!(
                s.metadata.name.as_deref(),
                Some(format!("c-{purpose}").as_str())
            );
            assert_eq!(s.type_.as_deref(), Some(SECRET_TYPE));
            assert_eq!(
                s.metadata.labels.as_ref().unwrap()[api::CLUSTER_NAME_LABEL],
                "c"
            );
            let pair = pem_pair(&s).unwrap();
            let want = if purpose == "sa" {
                "PUBLIC KEY"
            } else {
                "CERTIFICATE"
            };
            assert!(pair.cert.contains(want), "{purpose}: {}", pair.cert);
            assert!(pair.key.contains("PRIVATE KEY"));
        }
    }

    #[test]
    fn the_ca_hash_is_stable_and_kubeadm_shaped() {
        let (secret, pki) = new_ca_secret("c", "ns", owner()).unwrap();
        let hash = ca_cert_hash(&pki.ca.cert).unwrap();
        assert!(hash.starts_with("sha256:") && hash.len() == 71, "{hash}");
        assert_eq!(
            hash,
            ca_cert_hash(&ca_from_secret(&secret).unwrap().ca.cert).unwrap()
        );
    }

    #[test]
    fn kubeconfig_secrets_carry_an_admin_certificate_for_the_endpoint() {
        let (_, pki) = new_ca_secret("c", "ns", owner()).unwrap();
        let s = kubeconfig_secret(
            "c",
            "ns",
            "https://127.0.0.1:6443",
            &pki,
            owner(),
            KeyAlgorithm::default(),
        )
        .unwrap();
        let text = String::from_utf8(s.data.unwrap()["value"].0.clone()).unwrap();
        let config: serde_json::Value = crate::yaml::from_str(&text).unwrap();
        assert_eq!(
            config["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:6443"
        );
        assert_eq!(config["current-context"], "c-admin@c");
        assert_eq!(config["users"][0]["name"], "c-admin");
    }
}
