//! Cluster certificates and kubeconfig Secrets (`<cluster>-ca`, `<cluster>-kubeconfig`), in
//! upstream's format: type `cluster.x-k8s.io/secret`, keys `tls.crt`/`tls.key` and `value`.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::apiserver::tls::{KeyPairPem, Pki, TlsError};

/// The Secret type Cluster API gives the Secrets it generates.
pub const SECRET_TYPE: &str = "cluster.x-k8s.io/secret";
/// The label naming the Cluster an object belongs to.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

#[derive(Debug, thiserror::Error)]
pub enum CertsError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("Secret {0} has no {1}")]
    MissingKey(String, &'static str),
    #[error("Secret {0}: {1} is not UTF-8 PEM")]
    NotPem(String, &'static str),
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
                CLUSTER_NAME_LABEL.to_string(),
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
    let name = secret.metadata.name.clone().unwrap_or_default();
    let get = |key: &'static str| -> Result<String, CertsError> {
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .ok_or(CertsError::MissingKey(name.clone(), key))?;
        String::from_utf8(bytes.0.clone()).map_err(|_| CertsError::NotPem(name.clone(), key))
    };
    Ok(Pki {
        ca: KeyPairPem {
            cert: get("tls.crt")?,
            key: get("tls.key")?,
        },
    })
}

/// The admin kubeconfig of a workload cluster (user `kubernetes-admin` in `system:masters`,
/// signed by the cluster CA), as the `<cluster>-kubeconfig` Secret.
pub fn kubeconfig_secret(
    cluster: &str,
    namespace: &str,
    server: &str,
    ca: &Pki,
    owner: OwnerReference,
) -> Result<Secret, CertsError> {
    let admin = ca.client_certificate("kubernetes-admin", &["system:masters"])?;
    let config = crate::management::kubeconfig_for(
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
