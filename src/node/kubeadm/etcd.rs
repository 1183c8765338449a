//! A joining control plane's etcd membership, done safely: every member must answer first,
//! this node is added as a learner (not counted in quorum, so a joiner that never starts cannot
//! stall the cluster), a member left at this address by an earlier attempt is reused rather
//! than added twice, and the learner is promoted once it has caught up — or removed again when
//! the join fails. (kubeadm: `CreateStackedEtcdStaticPodManifestFile`.)

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::manifests::{ETCD_ADVERTISE_ANNOTATION, ETCD_PEER_PORT};
use super::pki::join_host_port;
use crate::node::{NodeError, Result, read_file};

/// How long a learner may take to catch up before the join gives up.
const PROMOTE_WAIT: Duration = Duration::from_secs(120);
/// How often a learner that has not started is checked against the cluster's membership.
const RESTART_CHECK_EVERY: Duration = Duration::from_secs(10);
/// How long a join waits for etcd to accept another member.
const MEMBER_ADD_WAIT: Duration = Duration::from_secs(90);

/// A client from a kubeconfig's text.
pub async fn client_from_yaml(kubeconfig: &str) -> Result<Client> {
    let config = kube::config::Kubeconfig::from_yaml(kubeconfig)
        .map_err(|e| NodeError::Config(format!("the join kubeconfig: {e}")))?;
    let mut config = kube::Config::from_custom_kubeconfig(config, &Default::default())
        .await
        .map_err(|e| NodeError::Config(format!("the join kubeconfig: {e}")))?;
    config.connect_timeout = Some(Duration::from_secs(10));
    Ok(Client::try_from(config)?)
}

/// The ClusterConfiguration in `kube-system/kubeadm-config`.
pub async fn cluster_configuration(client: &Client) -> Result<Value> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let config = super::patiently(
        "reading kube-system/kubeadm-config from the cluster",
        || api.get("kubeadm-config"),
    )
    .await?;
    let text = config
        .data
        .and_then(|d| d.get("ClusterConfiguration").cloned())
        .ok_or_else(|| {
            NodeError::Failed("kube-system/kubeadm-config has no ClusterConfiguration".into())
        })?;
    crate::yaml::from_str(&text)
        .map_err(|e| NodeError::Failed(format!("kube-system/kubeadm-config: {e}")))
}

/// An etcd client over TLS with the health-check client certificate.
async fn etcd_client(pki: &Path, endpoints: &[String]) -> Result<etcd_client::Client> {
    let tls = etcd_client::TlsOptions::new()
        .ca_certificate(etcd_client::Certificate::from_pem(read_file(
            &pki.join("etcd/ca.crt"),
        )?))
        .identity(etcd_client::Identity::from_pem(
            read_file(&pki.join("etcd/healthcheck-client.crt"))?,
            read_file(&pki.join("etcd/healthcheck-client.key"))?,
        ));
    let options = etcd_client::ConnectOptions::new()
        .with_tls(tls)
        .with_connect_timeout(Duration::from_secs(5))
        .with_timeout(Duration::from_secs(15));
    etcd_client::Client::connect(endpoints, Some(options))
        .await
        .map_err(|e| {
            NodeError::Failed(format!(
                "connecting to etcd at {}: {e}",
                endpoints.join(",")
            ))
        })
}

/// The client URLs of the cluster's etcd members, from their mirror Pods (as kubeadm finds them).
async fn etcd_endpoints(client: &Client) -> Result<Vec<String>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
    let params = ListParams::default().labels("component=etcd,tier=control-plane");
    let listed = super::patiently("listing the etcd members' Pods", || pods.list(&params)).await?;
    // A member whose Pod is going (its Node removed) is not one to check.
    let endpoints: Vec<String> = listed
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter_map(|p| p.annotations().get(ETCD_ADVERTISE_ANNOTATION).cloned())
        .collect();
    if endpoints.is_empty() {
        return Err(NodeError::Failed(
            "no etcd member announces itself (no kube-system Pod with component=etcd carries the advertise-client-urls annotation)".into(),
        ));
    }
    Ok(endpoints)
}

async fn list_members(etcd: &mut etcd_client::Client) -> Result<Vec<etcd_client::Member>> {
    Ok(etcd
        .member_list()
        .await
        .map_err(|e| NodeError::Failed(format!("listing etcd members: {e}")))?
        .members()
        .to_vec())
}

/// etcd's `--initial-cluster` for the member `id` (not named yet, so named `name` here)
/// joining `members`: every member's `name=peer-url`, which must be exactly the cluster's.
fn initial_cluster(members: &[etcd_client::Member], id: u64, name: &str) -> Vec<String> {
    members
        .iter()
        .flat_map(|m| {
            let member_name = if m.id() == id || m.name().is_empty() {
                name
            } else {
                m.name()
            };
            m.peer_urls()
                .iter()
                .map(move |u| format!("{member_name}={u}"))
        })
        .collect()
}

/// Whether etcd refused a promotion because the member already votes (an earlier attempt
/// promoted it). etcd says "can only promote a learner member" for that, and the same words
/// followed by "which is in sync with leader" while a learner catches up.
fn already_voting(error: &str) -> bool {
    error.contains("can only promote a learner member") && !error.contains("in sync with leader")
}

/// Joins this node to etcd; `write_manifest` is given the initial cluster and writes this
/// node's etcd manifest (which starts the member). Returns the initial cluster.
pub async fn join_member(
    client: &Client,
    pki: &Path,
    name: &str,
    address: &str,
    mut write_manifest: impl FnMut(Vec<String>) -> Result<()>,
) -> Result<Vec<String>> {
    let endpoints = etcd_endpoints(client).await?;
    println!(
        "[check-etcd] Checking that the etcd cluster is healthy ({})",
        endpoints.join(", ")
    );
    for endpoint in &endpoints {
        let mut one = etcd_client(pki, std::slice::from_ref(endpoint)).await?;
        one.status()
            .await
            .map_err(|e| NodeError::Failed(format!("etcd member {endpoint} is not healthy: {e}; not joining a cluster that might lose quorum")))?;
    }
    let mut etcd = etcd_client(pki, &endpoints).await?;
    let peer_url = format!("https://{}", join_host_port(address, ETCD_PEER_PORT));
    let existing = list_members(&mut etcd)
        .await?
        .iter()
        .find(|m| m.peer_urls().contains(&peer_url))
        .map(|m| m.id());
    let (id, added) = match existing {
        Some(id) => {
            println!("[etcd] Reusing etcd member {id:x} at {peer_url}, left by an earlier attempt");
            (id, false)
        }
        None => {
            // etcd refuses to grow while a member is not yet connected (a join just before
            // this one) or another learner catches up: wait, as kubeadm does.
            let started = Instant::now();
            let response = loop {
                match etcd
                    .member_add(
                        [peer_url.as_str()],
                        Some(etcd_client::MemberAddOptions::new().with_is_learner()),
                    )
                    .await
                {
                    Ok(r) => break r,
                    Err(e)
                        if started.elapsed() < MEMBER_ADD_WAIT
                            && ["unhealthy cluster", "too many learner", "not started"]
                                .iter()
                                .any(|m| e.to_string().contains(m)) =>
                    {
                        println!("[etcd] etcd cannot take a new member yet ({e}); retrying");
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                    Err(e) => {
                        return Err(NodeError::Failed(format!(
                            "adding {name} as an etcd learner: {e}"
                        )));
                    }
                }
            };
            let id = response.member().map(|m| m.id()).unwrap_or_default();
            println!("[etcd] Added {name} ({peer_url}) to etcd as a learner");
            (id, true)
        }
    };
    let outcome = async {
        let mut written = initial_cluster(&list_members(&mut etcd).await?, id, name);
        write_manifest(written.clone())?;
        println!("[etcd] Waiting for the new etcd member to catch up and be promoted");
        let started = Instant::now();
        let mut looked = Instant::now();
        loop {
            match etcd.member_promote(id).await {
                Ok(_) => break,
                Err(e) if already_voting(&e.to_string()) => break,
                Err(e) if started.elapsed() < PROMOTE_WAIT => {
                    tracing::debug!(error = %e, "etcd learner not promoted yet");
                    if looked.elapsed() >= RESTART_CHECK_EVERY {
                        looked = Instant::now();
                        // etcd refuses to start a member whose initial cluster is not the
                        // cluster's (a member removed or added after the list above): while
                        // the learner has not started (etcd names a member once it runs),
                        // start it again with the cluster as it is now.
                        let members = list_members(&mut etcd).await?;
                        let now = initial_cluster(&members, id, name);
                        let unstarted = members.iter().any(|m| m.id() == id && m.name().is_empty());
                        if unstarted && now != written {
                            println!(
                                "[etcd] The etcd membership changed while {name} was starting; starting it again with {}",
                                now.join(",")
                            );
                            write_manifest(now.clone())?;
                            written = now;
                        }
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => {
                    return Err(NodeError::Failed(format!(
                        "the etcd learner {name} did not catch up within {}s: {e} (its log is this node's container log: docker logs <node>)",
                        PROMOTE_WAIT.as_secs()
                    )));
                }
            }
        }
        println!("[etcd] Promoted {name} to a voting etcd member");
        Ok(written)
    }
    .await;
    if outcome.is_err() && added {
        // Leave no learner behind that no node will ever run.
        if etcd.member_remove(id).await.is_ok() {
            eprintln!("[etcd] Removed the learner {name} again");
        }
    }
    outcome
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_promotion_refused_for_a_voter_is_told_from_one_still_catching_up() {
        let voter = "status: FailedPrecondition, message: \"etcdserver: can only promote a learner member\"";
        let catching_up =
            "etcdserver: can only promote a learner member which is in sync with leader";
        assert!(super::already_voting(voter));
        assert!(!super::already_voting(catching_up));
        assert!(!super::already_voting("etcdserver: request timed out"));
    }
}
