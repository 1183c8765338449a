//! `kube-controller-manager` and `kube-scheduler` in a capictl node. Both serve `/healthz` on
//! their secure ports (self-signed, as kubeadm's components do) so that their static pods are
//! Ready. The controller-manager, as the elected leader among the control planes, runs the
//! node lifecycle controller: a Node whose Lease has not been renewed for 40 s gets
//! `Ready=Unknown` ("Kubelet stopped posting node status.") and the
//! `node.kubernetes.io/unreachable` taints, which health checks act on; both go when the kubelet
//! is back. It also approves and signs the kubelet client certificates joining workers ask for
//! (CertificateSigningRequests for `kubernetes.io/kube-apiserver-client-kubelet` from a
//! bootstrap token, or from the node itself when it renews), with the cluster CA
//! (`--cluster-signing-cert-file`, `--cluster-signing-key-file`), and the workload controllers
//! ([`crate::kubernetes::run_controllers`]). As kubeadm runs kube-controller-manager
//! (`--use-service-account-credentials`), each controller acts as its own ServiceAccount of
//! `kube-system`, which the API server's bootstrap policy binds to its
//! `system:controller:<name>` role. It publishes the cluster CA (`--root-ca-file`) as every
//! namespace's `kube-root-ca.crt`, which Pods' token volumes read. The scheduler places Pods
//! ([`crate::kubernetes::scheduler`]).

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::kube_apiserver::parse_flags;
use super::{NodeError, Result};
use crate::apiserver::{csr, listener, tls};
use crate::reconcile::leader::{self, LeaderElection, Term, Timings};

/// kube-controller-manager's `--node-monitor-grace-period`.
pub const NODE_MONITOR_GRACE: Duration = Duration::from_secs(40);
const NODE_MONITOR_PERIOD: Duration = Duration::from_secs(2);
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";

/// Serves `/healthz` over HTTPS with a self-signed certificate, on the component's
/// `--bind-address` (127.0.0.1) and `--secure-port` (`default_port`).
async fn serve_health(
    flags: &std::collections::BTreeMap<String, String>,
    default_port: u16,
) -> Result<()> {
    let bind = flags
        .get("bind-address")
        .map(String::as_str)
        .unwrap_or("127.0.0.1");
    let port = flags
        .get("secure-port")
        .and_then(|p| p.parse().ok())
        .unwrap_or(default_port);
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .map_err(|e| NodeError::Failed(format!("a serving certificate: {e}")))?;
    let serving = crate::pki::KeyPairPem {
        cert: certified.cert.pem(),
        key: certified.signing_key.serialize_pem(),
    };
    let config = tls::plain_server_config(&serving)?;
    let address = super::kubeadm::pki::join_host_port(bind, port);
    let listener = tokio::net::TcpListener::bind(&address)
        .await
        .map_err(super::io_error(address.as_ref()))?;
    let router = Router::new().route("/healthz", get(|| async { "ok" }));
    tokio::spawn(listener::serve(
        listener,
        router,
        config,
        std::future::pending(),
    ));
    Ok(())
}

async fn terminated() {
    if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        s.recv().await;
    }
}

/// What the node lifecycle controller changes on a Node, given its Lease and the time: None
/// when the Node is as it should be.
pub fn node_lifecycle(
    node: &Value,
    lease_renewed: Option<i64>,
    now: i64,
    now_text: &str,
) -> Option<(Option<Value>, Option<Value>)> {
    let grace = NODE_MONITOR_GRACE.as_secs() as i64;
    let created = node["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(parse_time)
        .unwrap_or(now);
    let heard = lease_renewed.unwrap_or(created);
    let stale = now - heard > grace;
    let conditions: Vec<Value> = node["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ready = conditions
        .iter()
        .find(|c| c["type"] == "Ready")
        .map(|c| c["status"].as_str().unwrap_or_default().to_string());
    let taints: Vec<Value> = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let tainted = taints.iter().any(|t| t["key"] == UNREACHABLE_TAINT);
    if stale {
        let status = (ready.as_deref() != Some("Unknown")).then(|| {
            let unknown: Vec<Value> = conditions
                .iter()
                .map(|c| {
                    let mut c = c.clone();
                    c["status"] = json!("Unknown");
                    c["reason"] = json!("NodeStatusUnknown");
                    c["message"] = json!("Kubelet stopped posting node status.");
                    c["lastTransitionTime"] = json!(now_text);
                    c
                })
                .collect();
            json!({"status": {"conditions": if unknown.is_empty() {
                vec![json!({"type": "Ready", "status": "Unknown", "reason": "NodeStatusNeverUpdated", "message": "Kubelet never posted node status.", "lastTransitionTime": now_text})]
            } else { unknown }}})
        });
        let spec = (!tainted).then(|| {
            let mut all = taints.clone();
            for effect in ["NoSchedule", "NoExecute"] {
                all.push(
                    json!({"key": UNREACHABLE_TAINT, "effect": effect, "timeAdded": now_text}),
                );
            }
            json!({"spec": {"taints": all}})
        });
        return (status.is_some() || spec.is_some()).then_some((status, spec));
    }
    if tainted && ready.as_deref() == Some("True") {
        let kept: Vec<Value> = taints
            .into_iter()
            .filter(|t| t["key"] != UNREACHABLE_TAINT)
            .collect();
        return Some((None, Some(json!({"spec": {"taints": kept}}))));
    }
    None
}

fn parse_time(text: &str) -> Option<i64> {
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .ok()
        .map(|t| t.unix_timestamp())
}

/// One pass of the node lifecycle controller.
async fn monitor_nodes(client: &Client) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let renewed: std::collections::HashMap<String, i64> = leases
        .list(&ListParams::default())
        .await?
        .into_iter()
        .filter_map(|l| Some((l.name_any(), l.spec?.renew_time?.0.as_second())))
        .collect();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let now_text = crate::apiserver::object::now();
    for node in nodes.list(&ListParams::default()).await? {
        let name = node.name_any();
        let value = serde_json::to_value(&node).unwrap_or_default();
        let Some((status, spec)) =
            node_lifecycle(&value, renewed.get(&name).copied(), now, &now_text)
        else {
            continue;
        };
        if let Some(status) = status {
            println!("Node {name} stopped posting its status: marking it Unknown");
            nodes
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
                .await?;
        }
        if let Some(spec) = spec {
            nodes
                .patch(&name, &PatchParams::default(), &Patch::Merge(spec))
                .await?;
        }
    }
    Ok(())
}

/// The signer of kubelet client certificates.
pub const KUBELET_CLIENT_SIGNER: &str = csr::KUBELET_CLIENT_SIGNER;

/// Why a CSR is not approved automatically (None: it is).
pub fn csr_refusal(csr: &Value) -> Option<String> {
    let spec = &csr["spec"];
    if spec["signerName"] != KUBELET_CLIENT_SIGNER {
        return Some(format!(
            "signer {} is not auto-approved",
            spec["signerName"]
        ));
    }
    let groups: Vec<&str> = spec["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let username = spec["username"].as_str().unwrap_or_default();
    let request = spec["request"].as_str().and_then(|b| {
        use base64::Engine;
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b).ok()?).ok()
    });
    let Some(request) = request else {
        return Some("spec.request is not a base64 PEM certificate request".into());
    };
    let Ok(params) = rcgen::CertificateSigningRequestParams::from_pem(&request) else {
        return Some("spec.request is not a certificate request".into());
    };
    let dn = &params.params.distinguished_name;
    let text = |t: rcgen::DnType| match dn.get(&t) {
        Some(rcgen::DnValue::Utf8String(s)) => s.clone(),
        Some(rcgen::DnValue::PrintableString(s)) => s.as_str().to_string(),
        _ => String::new(),
    };
    let common_name = text(rcgen::DnType::CommonName);
    if !common_name.starts_with("system:node:")
        || text(rcgen::DnType::OrganizationName) != "system:nodes"
    {
        return Some(format!(
            "the request is for {common_name:?}, not a node (CN system:node:<name>, O system:nodes)"
        ));
    }
    let bootstrapper = groups.contains(&"system:bootstrappers");
    let renewal = username == common_name && groups.contains(&"system:nodes");
    (!bootstrapper && !renewal)
        .then(|| format!("{username} may not ask for a certificate for {common_name}"))
}

/// One pass of the CSR approver and signer: kubelet client requests from bootstrap tokens or
/// from the node itself are approved; every approved request is signed as
/// kube-controller-manager's signers sign ([`csr::decide`]).
async fn approve_and_sign(client: &Client, ca: &crate::pki::Pki) -> Result<()> {
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
    for request in csrs.list(&ListParams::default()).await? {
        let name = request.name_any();
        let mut value = serde_json::to_value(&request).unwrap_or_default();
        let undecided = value["status"]["conditions"]
            .as_array()
            .is_none_or(|c| c.is_empty());
        let now = crate::apiserver::object::now();
        if undecided {
            if let Some(reason) = csr_refusal(&value) {
                tracing::debug!(%name, %reason, "CSR left for a person to approve");
                continue;
            }
            value["status"]["conditions"] = json!([{"type": "Approved", "status": "True", "reason": "AutoApproved", "message": "Auto approving kubelet client certificate after SubjectAccessReview.", "lastUpdateTime": now, "lastTransitionTime": now}]);
        }
        let decision = csr::decide(&value, ca, time::OffsetDateTime::now_utc());
        let Some(status) = csr::status_patch(&value, &decision, &now) else {
            continue;
        };
        csrs.patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await?;
        match decision {
            csr::Decision::Issue(_) => println!("Signed the certificate request {name}"),
            _ => println!("Refused to sign the certificate request {name}"),
        }
    }
    Ok(())
}

/// This process's candidacy for the control planes' `kube-system` Lease
/// (kube's components elect one leader of each kind with a Lease of their name).
fn election(client: &Client, lease: &str) -> LeaderElection {
    LeaderElection::new(
        client.clone(),
        "kube-system",
        lease,
        &leader::candidate_identity(),
        Timings::default(),
    )
}

/// How long a controller's token lives, and how often each is renewed.
const TOKEN_SECONDS: i64 = 3600;
const TOKEN_RENEWAL: Duration = Duration::from_secs(20 * 60);

/// The controllers' identities: a token per ServiceAccount, requested with the
/// controller-manager's own credentials and kept in a file (0600) that each controller's client
/// reads again as it is renewed.
struct ServiceAccountCredentials {
    client: Client,
    config: kube::Config,
    dir: std::path::PathBuf,
}

impl ServiceAccountCredentials {
    fn new(client: Client, config: kube::Config) -> Result<ServiceAccountCredentials> {
        use std::os::unix::fs::DirBuilderExt;
        // One directory per node, not per process: a restarted controller-manager writes over
        // the tokens it had, leaving none behind.
        let dir = std::env::temp_dir().join("kube-controller-manager-tokens");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(super::io_error(&dir))?;
        Ok(ServiceAccountCredentials {
            client,
            config,
            dir,
        })
    }

    fn token_file(&self, account: &str) -> std::path::PathBuf {
        self.dir.join(format!("{account}.token"))
    }

    /// Makes the ServiceAccount where missing and writes a fresh token for it.
    async fn renew(&self, account: &str) -> Result<()> {
        use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
        use k8s_openapi::api::core::v1::ServiceAccount;
        use kube::api::PostParams;
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client.clone(), "kube-system");
        if accounts.get_opt(account).await?.is_none() {
            let new = ServiceAccount {
                metadata: kube::api::ObjectMeta {
                    name: Some(account.into()),
                    ..Default::default()
                },
                ..Default::default()
            };
            match accounts.create(&PostParams::default(), &new).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                expiration_seconds: Some(TOKEN_SECONDS),
                ..Default::default()
            }),
            ..Default::default()
        };
        let issued = accounts
            .create_token_request(account, &PostParams::default(), &request)
            .await?;
        let token = issued.status.and_then(|s| s.token).unwrap_or_default();
        // Written beside, then renamed: a client never reads half a token.
        let path = self.token_file(account);
        crate::pki::write_private(&path, token.as_bytes()).map_err(super::io_error(&path))
    }

    /// Renews every account's token, then builds each one's client.
    async fn clients(
        &self,
        accounts: &[&str],
    ) -> Result<std::collections::BTreeMap<String, Client>> {
        let mut clients = std::collections::BTreeMap::new();
        for account in accounts {
            self.renew(account).await?;
            let mut config = self.config.clone();
            config.auth_info = kube::config::AuthInfo {
                token_file: Some(self.token_file(account).display().to_string()),
                ..Default::default()
            };
            clients.insert(account.to_string(), Client::try_from(config)?);
        }
        Ok(clients)
    }

    /// Renews the tokens until the future is dropped.
    async fn keep_renewed(&self, accounts: &[&str]) {
        loop {
            tokio::time::sleep(TOKEN_RENEWAL).await;
            for account in accounts {
                if let Err(e) = self.renew(account).await {
                    tracing::warn!(account, error = %e, "controller-manager: renewing a controller's token failed; retried later");
                }
            }
        }
    }
}

/// The ServiceAccounts of the controllers this process runs itself (the workload controllers'
/// are [`crate::kubernetes::CONTROLLER_ACCOUNTS`]).
const NODE_LIFECYCLE_ACCOUNT: &str = "node-controller";
const CERTIFICATE_ACCOUNT: &str = "certificate-controller";
const ROOT_CA_ACCOUNT: &str = "root-ca-cert-publisher";

/// Runs the controller-manager until SIGTERM.
pub async fn run_controller_manager(args: &[String]) -> Result<()> {
    let flags = parse_flags(args);
    serve_health(&flags, super::kubeadm::manifests::CONTROLLER_MANAGER_PORT).await?;
    let kubeconfig = flags
        .get("kubeconfig")
        .ok_or_else(|| NodeError::Config("--kubeconfig is required".into()))?;
    let config = super::kubelet::config_from(kubeconfig.as_ref()).await?;
    let client = Client::try_from(config.clone())?;
    let credentials = ServiceAccountCredentials::new(client.clone(), config)?;
    let accounts = crate::apiserver::component_policy::controller_accounts();
    let signing = match (
        flags.get("cluster-signing-cert-file"),
        flags.get("cluster-signing-key-file"),
    ) {
        (Some(cert), Some(key)) => Some(crate::pki::Pki {
            ca: crate::pki::KeyPairPem {
                cert: super::read_file(cert.as_ref())?,
                key: super::read_file(key.as_ref())?,
            },
        }),
        _ => None,
    };
    // What every namespace's `kube-root-ca.crt` publishes (`--root-ca-file`).
    let root_ca = match flags.get("root-ca-file") {
        Some(path) => Some(super::read_file(path.as_ref())?),
        None => None,
    };
    let election = election(&client, "kube-controller-manager");
    let identity = election.identity().to_string();
    let mut stop = std::pin::pin!(terminated());
    loop {
        let term = election.lead(&mut stop, |stopping| async {
            println!("{identity} became the leader");
            let clients = loop {
                match credentials.clients(&accounts).await {
                    Ok(clients) => break clients,
                    Err(e) => {
                        tracing::warn!(error = %e, "controller-manager: the controllers' credentials are not ready; retrying");
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                }
            };
            let client_for = |account: &str| {
                clients
                    .get(account)
                    .cloned()
                    .unwrap_or_else(|| panic!("{account} is one of the controllers' accounts"))
            };
            let (nodes_client, certificates_client) = (
                client_for(NODE_LIFECYCLE_ACCOUNT),
                client_for(CERTIFICATE_ACCOUNT),
            );
            let root_ca = async {
                if let Some(ca) = &root_ca {
                    crate::kubernetes::root_ca::run(client_for(ROOT_CA_ACCOUNT), ca.clone()).await
                }
            };
            let lifecycle = async {
                loop {
                    if let Err(e) = monitor_nodes(&nodes_client).await {
                        tracing::warn!(error = %e, "node lifecycle: a pass failed");
                    }
                    if let Some(ca) = &signing
                        && let Err(e) = approve_and_sign(&certificates_client, ca).await
                    {
                        tracing::warn!(error = %e, "CSR signer: a pass failed");
                    }
                    tokio::time::sleep(NODE_MONITOR_PERIOD).await;
                }
            };
            let lead = async {
                tokio::join!(
                    lifecycle,
                    root_ca,
                    credentials.keep_renewed(&accounts),
                    crate::kubernetes::run_controllers(client_for)
                )
            };
            tokio::select! {
                _ = stopping => {}
                _ = lead => {}
            }
        });
        if term.await == Term::Stopped {
            break;
        }
        println!("{identity} lost the leader lease");
    }
    Ok(())
}

/// Runs the scheduler until SIGTERM: its health endpoint, and kube-scheduler's placement of
/// Pods while it holds the `kube-scheduler` lease (one scheduler of the control planes binds).
pub async fn run_scheduler(args: &[String]) -> Result<()> {
    let flags = parse_flags(args);
    serve_health(&flags, super::kubeadm::manifests::SCHEDULER_PORT).await?;
    let kubeconfig = flags
        .get("kubeconfig")
        .ok_or_else(|| NodeError::Config("--kubeconfig is required".into()))?;
    let client = super::kubelet::client_from(kubeconfig.as_ref()).await?;
    let election = election(&client, "kube-scheduler");
    let mut stop = std::pin::pin!(terminated());
    loop {
        let term = election.lead(&mut stop, |stopping| async {
            tokio::select! {
                _ = stopping => {}
                _ = crate::kubernetes::scheduler::run(client.clone()) => {}
            }
        });
        if term.await == Term::Stopped {
            break;
        }
        println!("{} lost the leader lease", election.identity());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_controller_run_has_a_role_and_an_account() {
        let policy = crate::apiserver::component_policy::controller_accounts();
        let run = crate::kubernetes::CONTROLLER_ACCOUNTS.iter().chain(&[
            NODE_LIFECYCLE_ACCOUNT,
            CERTIFICATE_ACCOUNT,
            ROOT_CA_ACCOUNT,
        ]);
        for account in run {
            assert!(
                policy.contains(account),
                "{account} runs without a system:controller role"
            );
        }
    }

    fn node(ready: &str, taints: Value) -> Value {
        json!({
            "metadata": {"name": "w1", "creationTimestamp": "2026-12-01T08:00:00Z"},
            "spec": {"taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady"}, {"type": "MemoryPressure", "status": "False"}]},
        })
    }

    #[test]
    fn nodes_that_stop_renewing_their_lease_become_unknown_and_unreachable() {
        let created = parse_time("2026-12-01T08:00:00Z").unwrap();
        let t = "2026-12-01T09:00:00Z";
        // Fresh lease: nothing to do.
        assert_eq!(
            node_lifecycle(
                &node("True", json!([])),
                Some(created + 100),
                created + 110,
                t
            ),
            None
        );
        // Stale lease: Unknown and tainted.
        let (status, spec) = node_lifecycle(
            &node("True", json!([])),
            Some(created + 100),
            created + 141,
            t,
        )
        .unwrap();
        let status = status.unwrap();
        assert_eq!(status["status"]["conditions"][0]["status"], "Unknown");
        assert_eq!(
            status["status"]["conditions"][0]["message"],
            "Kubelet stopped posting node status."
        );
        assert_eq!(
            status["status"]["conditions"][1]["status"], "Unknown",
            "every condition goes Unknown"
        );
        let taints = spec.unwrap()["spec"]["taints"].clone();
        assert_eq!(taints.as_array().unwrap().len(), 2);
        assert_eq!(taints[1]["effect"], "NoExecute");
        // Already marked: nothing more.
        let marked = node(
            "Unknown",
            json!([{"key": UNREACHABLE_TAINT, "effect": "NoSchedule"}]),
        );
        assert_eq!(
            node_lifecycle(&marked, Some(created), created + 1000, t),
            None
        );
        // Back: the kubelet wrote Ready=True again; the taints go.
        let back = node(
            "True",
            json!([{"key": UNREACHABLE_TAINT, "effect": "NoSchedule"}, {"key": "a", "effect": "NoSchedule"}]),
        );
        let (status, spec) =
            node_lifecycle(&back, Some(created + 1000), created + 1005, t).unwrap();
        assert!(status.is_none());
        assert_eq!(
            spec.unwrap()["spec"]["taints"],
            json!([{"key": "a", "effect": "NoSchedule"}])
        );
        // A Node without a Lease counts from its creation.
        assert!(node_lifecycle(&node("True", json!([])), None, created + 30, t).is_none());
        assert!(node_lifecycle(&node("True", json!([])), None, created + 50, t).is_some());
    }
}
