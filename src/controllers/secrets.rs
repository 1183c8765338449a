//! The Secrets a cluster's control plane depends on, made once for every reconciler that needs
//! them: the cluster certificates (`<cluster>-ca`, `-etcd`, `-proxy`, `-sa`) and the admin
//! kubeconfig (`<cluster>-kubeconfig`) (upstream's `util/secret` and `util/kubeconfig`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::Api;
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::api::Cluster;
use crate::kubeadm::certs::{self, CERTIFICATES};
use crate::pki::{CertificatePolicy, KeyAlgorithm};
use crate::reconcile::Result;
use crate::reconcile::common;

/// The cluster certificates (`<cluster>-ca`, `-etcd`, `-proxy`, `-sa`), by purpose; those
/// missing are made as the policy says, owned by `owner`, when an owner is given, else the
/// answer is None.
pub async fn cluster_certificates(
    client: &Client,
    cluster: &Cluster,
    owner: Option<OwnerReference>,
    policy: CertificatePolicy,
) -> Result<Option<BTreeMap<String, Secret>>> {
    let ns = cluster.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let mut found = BTreeMap::new();
    for (purpose, common_name) in CERTIFICATES {
        let name = format!("{}-{purpose}", cluster.name_any());
        let secret = match (secrets.get_opt(&name).await?, &owner) {
            (Some(s), _) => s,
            (None, Some(owner)) => {
                let (cluster_name, ns, owner) = (cluster.name_any(), ns.clone(), owner.clone());
                // An RSA key takes up to a second to make: off the reconcilers' threads.
                let s = tokio::task::spawn_blocking(move || {
                    certs::new_certificate_secret(
                        &cluster_name,
                        &ns,
                        purpose,
                        common_name,
                        owner,
                        &policy,
                    )
                })
                .await
                .expect("making a certificate does not panic")?;
                common::create_if_absent(&secrets, &s).await?;
                secrets.get(&name).await?
            }
            (None, None) => return Ok(None),
        };
        found.insert(purpose.to_string(), secret);
    }
    Ok(Some(found))
}

/// Writes the `<cluster>-kubeconfig` Secret (admin client certificate signed by `<cluster>-ca`)
/// when it is missing, and again when its certificate has less than half of its year left, as
/// upstream rotates it. `owner` owns it: the control plane, or the Cluster when there is none;
/// its key is of the control plane's `encryptionAlgorithm`. Whether it waits for the cluster
/// CA.
pub async fn reconcile_kubeconfig(
    client: &kube::Client,
    cluster: &Cluster,
    owner: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
    key: KeyAlgorithm,
) -> Result<bool> {
    let Some(endpoint) = cluster
        .spec
        .control_plane_endpoint
        .as_ref()
        .filter(|e| e.is_valid())
    else {
        return Ok(false);
    };
    let ns = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let existing = secrets
        .get_opt(&certs::kubeconfig_secret_name(&name))
        .await?;
    let renew_before = k8s_openapi::jiff::Timestamp::now().as_second()
        + certs::CLIENT_CERT_RENEWAL.as_secs() as i64;
    if existing
        .as_ref()
        .is_some_and(|s| !certs::kubeconfig_expires_before(s, renew_before))
    {
        return Ok(false);
    }
    let Some(ca) = secrets.get_opt(&certs::ca_secret_name(&name)).await? else {
        // The CA comes from the bootstrap or infrastructure provider, or the user.
        return Ok(true);
    };
    let pki = certs::ca_from_secret(&ca)?;
    let server = format!("https://{endpoint}");
    let secret = certs::kubeconfig_secret(&name, &ns, &server, &pki, owner, key)?;
    match existing {
        None => {
            common::create_if_absent(&secrets, &secret).await?;
        }
        Some(old) => {
            tracing::info!(cluster = %name, "rotating the admin kubeconfig's client certificate");
            common::patch_merge(
                &secrets,
                &old.name_any(),
                json!({"metadata": {"resourceVersion": old.resource_version()}, "data": secret.data}),
            )
            .await?;
        }
    }
    Ok(false)
}
