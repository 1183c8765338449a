//! What the control plane provider needs of a workload cluster's etcd — its members, who leads,
//! alarms, moving leadership and removing a member — as an async, fallible contract, so that a
//! network client of real etcd and the in-memory provider's simulation answer alike, and a
//! reconciler can tell "etcd said no" from "etcd could not be reached".
//!
//! Members are named after the Nodes of their control-plane Machines, as kubeadm names them;
//! nothing here knows the infrastructure. (Upstream: `controlplane/kubeadm/internal/etcd`.)

use std::sync::Arc;

use futures::future::BoxFuture;

/// One etcd member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub id: u64,
    /// The Node name of the control-plane Machine it runs on.
    pub name: String,
    /// Not yet a voting member (a joining control plane's member starts as a learner).
    pub learner: bool,
}

/// An alarm etcd raised on a member; while one is active etcd refuses writes or is unsafe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Alarm {
    /// The member's database reached its quota.
    NoSpace { member: String },
    /// The member's data is inconsistent with the others'.
    Corrupt { member: String },
}

impl std::fmt::Display for Alarm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Alarm::NoSpace { member } => write!(f, "etcd member {member} is out of space"),
            Alarm::Corrupt { member } => write!(f, "etcd member {member} reports corrupt data"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// No answer: not running yet, the network, or credentials that are not there yet.
    #[error("etcd cannot be reached: {0}")]
    Unreachable(String),
    /// The named member is not in the member list.
    #[error("etcd has no member named {0}")]
    NoSuchMember(String),
    /// The operation would remove the last member, or a member that etcd itself refuses to.
    #[error("etcd refused: {0}")]
    Refused(String),
}

pub type Result<T, E = EtcdError> = std::result::Result<T, E>;

/// The etcd of one workload cluster.
pub trait EtcdClient: Send + Sync {
    fn members(&self) -> BoxFuture<'_, Result<Vec<Member>>>;
    /// The member that leads now; None while there is no leader (an election is on).
    fn leader(&self) -> BoxFuture<'_, Result<Option<Member>>>;
    fn alarms(&self) -> BoxFuture<'_, Result<Vec<Alarm>>>;
    /// Makes `to` the leader. Asked of the current leader, as etcd requires.
    fn move_leader<'a>(&'a self, to: &'a str) -> BoxFuture<'a, Result<()>>;
    /// Removes `name` from the cluster. Asked of another member; never the last one.
    fn remove_member<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<()>>;
}

/// Reaches the etcd of any workload cluster, by the Cluster's namespace and name.
pub trait EtcdClients: Send + Sync {
    fn connect<'a>(
        &'a self,
        namespace: &'a str,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<Arc<dyn EtcdClient>>>;
}

/// Moves etcd leadership off `member` to `successor` when `member` leads, before its Machine is
/// deleted (a member that is not there, or does not lead, needs nothing).
pub async fn forward_leadership(
    etcd: &dyn EtcdClient,
    member: &str,
    successor: Option<&str>,
) -> Result<()> {
    let leads = etcd.leader().await?.is_some_and(|l| l.name == member);
    match (leads, successor) {
        (false, _) => Ok(()),
        (true, Some(successor)) => etcd.move_leader(successor).await,
        (true, None) => Err(EtcdError::Refused(format!(
            "{member} leads etcd and no Ready control-plane Machine is there to take over; waiting for one"
        ))),
    }
}

/// Takes `member` out of etcd before its Machine goes: leadership moves to `successor` first
/// when `member` leads (a leaderless cluster stalls writes while it elects), then the member is
/// removed. A member that is already gone is fine: a crash after the removal, before the
/// Machine's deletion, repeats this step.
pub async fn release_member(
    etcd: &dyn EtcdClient,
    member: &str,
    successor: Option<&str>,
) -> Result<()> {
    let members = etcd.members().await?;
    if !members.iter().any(|m| m.name == member) {
        return Ok(());
    }
    if members.len() == 1 {
        return Err(EtcdError::Refused(format!(
            "{member} is the last etcd member; removing it would destroy the cluster's data: scale the control plane up first"
        )));
    }
    let leads = etcd.leader().await?.is_some_and(|l| l.name == member);
    if leads {
        let Some(successor) = successor else {
            return Err(EtcdError::Refused(format!(
                "{member} leads etcd and no Ready control-plane Machine is there to take over; waiting for one"
            )));
        };
        etcd.move_leader(successor).await?;
    }
    etcd.remove_member(member).await
}

/// An etcd in memory, for unit tests and for the in-memory provider's simulated clusters:
/// members join once, the first leads, leadership passes on when the leader goes.
#[derive(Debug, Default)]
pub struct SimulatedEtcd {
    state: std::sync::Mutex<Simulation>,
}

#[derive(Debug, Default)]
struct Simulation {
    members: Vec<Member>,
    leader: Option<u64>,
    next_id: u64,
    /// When set, every call fails as if etcd were down.
    down: bool,
}

impl SimulatedEtcd {
    /// Adds a member (once, by name); the first one leads.
    pub fn join(&self, name: &str) {
        let mut s = self.state.lock().unwrap();
        if s.members.iter().any(|m| m.name == name) {
            return;
        }
        s.next_id += 1;
        let id = s.next_id;
        s.members.push(Member {
            id,
            name: name.to_string(),
            learner: false,
        });
        s.leader.get_or_insert(id);
    }

    /// A member whose machine is gone leaves, the last one too (the cluster is torn down);
    /// leadership passes to another member.
    pub fn leave(&self, name: &str) {
        self.state.lock().unwrap().remove(name);
    }

    /// Makes every call fail as unreachable (true) or answer again (false).
    pub fn set_down(&self, down: bool) {
        self.state.lock().unwrap().down = down;
    }

    fn with<T>(&self, f: impl FnOnce(&mut Simulation) -> Result<T>) -> BoxFuture<'_, Result<T>>
    where
        T: Send + 'static,
    {
        let mut s = self.state.lock().unwrap();
        let out = if s.down {
            Err(EtcdError::Unreachable("connection refused".into()))
        } else {
            f(&mut s)
        };
        Box::pin(std::future::ready(out))
    }
}

impl Simulation {
    fn remove(&mut self, name: &str) {
        self.members.retain(|m| m.name != name);
        if !self.members.iter().any(|m| Some(m.id) == self.leader) {
            self.leader = self.members.first().map(|m| m.id);
        }
    }

    fn id_of(&self, name: &str) -> Result<u64> {
        self.members
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.id)
            .ok_or_else(|| EtcdError::NoSuchMember(name.to_string()))
    }
}

impl EtcdClient for SimulatedEtcd {
    fn members(&self) -> BoxFuture<'_, Result<Vec<Member>>> {
        self.with(|s| Ok(s.members.clone()))
    }

    fn leader(&self) -> BoxFuture<'_, Result<Option<Member>>> {
        self.with(|s| Ok(s.members.iter().find(|m| Some(m.id) == s.leader).cloned()))
    }

    fn alarms(&self) -> BoxFuture<'_, Result<Vec<Alarm>>> {
        // A simulated member never runs out of space or corrupts its data.
        self.with(|_| Ok(Vec::new()))
    }

    fn move_leader<'a>(&'a self, to: &'a str) -> BoxFuture<'a, Result<()>> {
        self.with(|s| {
            s.leader = Some(s.id_of(to)?);
            Ok(())
        })
    }

    fn remove_member<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<()>> {
        self.with(|s| {
            s.id_of(name)?;
            if s.members.len() == 1 {
                return Err(EtcdError::Refused(format!(
                    "{name} is the last member of the cluster"
                )));
            }
            s.remove(name);
            Ok(())
        })
    }
}

/// Real etcd of a kubeadm workload cluster, reached as upstream's control plane provider
/// reaches it: each member through its etcd mirror Pod's `pods/portforward` on the workload
/// API server (a [`Tunnel`](super::tunnel::Tunnel) on 127.0.0.1, so this host needs to reach
/// only the cluster's load balancer), the member's port from the Pod's
/// `kubeadm.kubernetes.io/etcd.advertise-client-urls` annotation; TLS with a client
/// certificate (CN `cluster-api.x-k8s.io`) from the cluster's `<cluster>-etcd` CA, the chain
/// checked against that CA (etcd's server certificates name 127.0.0.1, as kubeadm's do).
pub struct NetworkEtcd {
    management: kube::Client,
    workloads: super::clusters::WorkloadClusters,
}

impl NetworkEtcd {
    pub fn new(management: kube::Client) -> NetworkEtcd {
        NetworkEtcd {
            workloads: super::clusters::WorkloadClusters::new(management.clone()),
            management,
        }
    }
}

/// The client certificate name the control plane provider uses for etcd.
pub const ETCD_CLIENT_CN: &str = "cluster-api.x-k8s.io";
const ETCD_DIAL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
const ETCD_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

struct NetworkClient {
    client: etcd_client::Client,
    tls: etcd_client::TlsOptions,
    /// The local URL that reaches each member's advertised client URL.
    routes: std::collections::BTreeMap<String, String>,
    /// Open while the client lives.
    _tunnels: Vec<super::tunnel::Tunnel>,
}

fn unreachable(e: impl std::fmt::Display) -> EtcdError {
    EtcdError::Unreachable(e.to_string())
}

/// A client of the first member whose URL answers, tried in order, as upstream's control
/// plane provider reaches etcd through the first available node: a client balanced over
/// every member sent some calls to one that had stopped (a member just removed, its Pod not
/// yet gone), and those calls failed however many members were fine. Each member comes as
/// the URL it advertises (what a failure names) and the URL that reaches it from here.
pub async fn first_answering(
    members: impl IntoIterator<Item = (String, String)>,
    tls: &etcd_client::TlsOptions,
) -> Result<etcd_client::Client> {
    let mut failures = Vec::new();
    for (advertised, url) in members {
        let answered = async {
            let mut client =
                etcd_client::Client::connect([url.as_str()], Some(options(tls))).await?;
            client.status().await?;
            Ok::<_, etcd_client::Error>(client)
        };
        match answered.await {
            Ok(client) => return Ok(client),
            Err(e) => failures.push(format!("{advertised}: {e}")),
        }
    }
    Err(EtcdError::Unreachable(if failures.is_empty() {
        "no etcd member to ask".into()
    } else {
        format!("no etcd member answers: {}", failures.join("; "))
    }))
}

fn options(tls: &etcd_client::TlsOptions) -> etcd_client::ConnectOptions {
    etcd_client::ConnectOptions::new()
        .with_tls(tls.clone())
        .with_connect_timeout(ETCD_DIAL_TIMEOUT)
        .with_timeout(ETCD_CALL_TIMEOUT)
}

impl NetworkClient {
    /// Each client URL `member` advertises and the local URL that reaches it (its tunnel).
    fn local_urls(&self, member: &etcd_client::Member) -> Vec<(String, String)> {
        member
            .client_urls()
            .iter()
            .filter_map(|u| Some((u.clone(), self.routes.get(u)?.clone())))
            .collect()
    }

    async fn member_list(&self) -> Result<Vec<etcd_client::Member>> {
        let mut c = self.client.clone();
        Ok(c.member_list()
            .await
            .map_err(unreachable)?
            .members()
            .to_vec())
    }
}

impl EtcdClient for NetworkClient {
    fn members(&self) -> BoxFuture<'_, Result<Vec<Member>>> {
        Box::pin(async move {
            Ok(self
                .member_list()
                .await?
                .iter()
                .map(|m| Member {
                    id: m.id(),
                    name: m.name().to_string(),
                    learner: m.is_learner(),
                })
                .collect())
        })
    }

    fn leader(&self) -> BoxFuture<'_, Result<Option<Member>>> {
        Box::pin(async move {
            let mut c = self.client.clone();
            let leader = c.status().await.map_err(unreachable)?.leader();
            Ok(self.members().await?.into_iter().find(|m| m.id == leader))
        })
    }

    fn alarms(&self) -> BoxFuture<'_, Result<Vec<Alarm>>> {
        Box::pin(async move {
            let mut c = self.client.clone();
            let response = c
                .alarm(
                    etcd_client::AlarmAction::Get,
                    etcd_client::AlarmType::None,
                    None,
                )
                .await
                .map_err(unreachable)?;
            let members = self.members().await?;
            let name = |id: u64| {
                members
                    .iter()
                    .find(|m| m.id == id)
                    .map(|m| m.name.clone())
                    .unwrap_or_else(|| format!("{id:x}"))
            };
            Ok(response
                .alarms()
                .iter()
                .filter_map(|a| match a.alarm() {
                    etcd_client::AlarmType::Nospace => Some(Alarm::NoSpace {
                        member: name(a.member_id()),
                    }),
                    etcd_client::AlarmType::Corrupt => Some(Alarm::Corrupt {
                        member: name(a.member_id()),
                    }),
                    _ => None,
                })
                .collect())
        })
    }

    fn move_leader<'a>(&'a self, to: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let members = self.member_list().await?;
            let target = members
                .iter()
                .find(|m| m.name() == to)
                .ok_or_else(|| EtcdError::NoSuchMember(to.to_string()))?;
            let mut c = self.client.clone();
            let leader = c.status().await.map_err(unreachable)?.leader();
            let leader_urls: Vec<(String, String)> = members
                .iter()
                .find(|m| m.id() == leader)
                .map(|m| self.local_urls(m))
                .ok_or_else(|| EtcdError::Unreachable("etcd has no leader now".into()))?;
            if leader_urls.is_empty() {
                return Err(EtcdError::Unreachable(
                    "the etcd leader's Pod is not reachable through the workload API server".into(),
                ));
            }
            // etcd takes MoveLeader only from the leader itself.
            let mut on_leader = first_answering(leader_urls, &self.tls).await?;
            on_leader
                .move_leader(target.id())
                .await
                .map_err(|e| EtcdError::Refused(format!("moving etcd leadership to {to}: {e}")))?;
            Ok(())
        })
    }

    fn remove_member<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let members = self.member_list().await?;
            let Some(member) = members.iter().find(|m| m.name() == name) else {
                return Ok(());
            };
            if members.len() == 1 {
                return Err(EtcdError::Refused(format!(
                    "{name} is the last etcd member"
                )));
            }
            // Asked of the others: a member cannot be relied on to remove itself.
            let others: Vec<(String, String)> = members
                .iter()
                .filter(|m| m.id() != member.id())
                .flat_map(|m| self.local_urls(m))
                .collect();
            if others.is_empty() {
                return Err(EtcdError::Unreachable(format!(
                    "no etcd member but {name} is reachable through the workload API server"
                )));
            }
            let mut c = first_answering(others, &self.tls).await?;
            c.member_remove(member.id())
                .await
                .map_err(|e| EtcdError::Refused(format!("removing etcd member {name}: {e}")))?;
            Ok(())
        })
    }
}

impl EtcdClients for NetworkEtcd {
    fn connect<'a>(
        &'a self,
        namespace: &'a str,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<Arc<dyn EtcdClient>>> {
        Box::pin(async move {
            use k8s_openapi::api::core::v1::{Pod, Secret};
            use kube::ResourceExt;
            let secrets: kube::Api<Secret> =
                kube::Api::namespaced(self.management.clone(), namespace);
            let secret = secrets
                .get_opt(&format!("{cluster}-etcd"))
                .await
                .map_err(unreachable)?
                .ok_or_else(|| {
                    EtcdError::Unreachable(format!(
                        "the etcd CA Secret {cluster}-etcd is not there yet"
                    ))
                })?;
            let ca = crate::kubeadm::certs::ca_from_secret(&secret).map_err(unreachable)?;
            let client_cert = ca
                .client_certificate(ETCD_CLIENT_CN, &[])
                .map_err(unreachable)?;
            let workload = self
                .workloads
                .client(namespace, cluster)
                .await
                .map_err(unreachable)?
                .ok_or_else(|| {
                    EtcdError::Unreachable(format!(
                        "the kubeconfig of {namespace}/{cluster} is not there yet"
                    ))
                })?;
            let pods: kube::Api<Pod> = kube::Api::namespaced(workload, "kube-system");
            let listed = pods
                .list(&kube::api::ListParams::default().labels("component=etcd,tier=control-plane"))
                .await
                .map_err(unreachable)?;
            let mut routes = std::collections::BTreeMap::new();
            let mut tunnels = Vec::new();
            for pod in &listed {
                let Some(urls) = pod
                    .annotations()
                    .get("kubeadm.kubernetes.io/etcd.advertise-client-urls")
                else {
                    continue;
                };
                for url in urls.split(',').map(str::trim) {
                    let port = url
                        .rsplit_once(':')
                        .and_then(|(_, p)| p.trim_end_matches('/').parse::<u16>().ok())
                        .unwrap_or(2379);
                    let tunnel = super::tunnel::open(pods.clone(), pod.name_any(), port)
                        .await
                        .map_err(unreachable)?;
                    routes.insert(url.to_string(), format!("https://{}", tunnel.local));
                    tunnels.push(tunnel);
                }
            }
            if routes.is_empty() {
                return Err(EtcdError::Unreachable(
                    "no etcd member has announced itself in kube-system yet".into(),
                ));
            }
            let tls = etcd_client::TlsOptions::new()
                .ca_certificate(etcd_client::Certificate::from_pem(&ca.ca.cert))
                .identity(etcd_client::Identity::from_pem(
                    &client_cert.cert,
                    &client_cert.key,
                ));
            let client = first_answering(routes.clone(), &tls).await?;
            Ok(Arc::new(NetworkClient {
                client,
                tls,
                routes,
                _tunnels: tunnels,
            }) as Arc<dyn EtcdClient>)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn etcd(names: &[&str]) -> SimulatedEtcd {
        let etcd = SimulatedEtcd::default();
        for n in names {
            etcd.join(n);
        }
        etcd
    }

    async fn names(etcd: &SimulatedEtcd) -> Vec<String> {
        etcd.members()
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.name)
            .collect()
    }

    #[tokio::test]
    async fn members_join_once_and_the_first_leads() {
        let etcd = etcd(&["cp-1", "cp-2", "cp-1"]);
        assert_eq!(names(&etcd).await, ["cp-1", "cp-2"]);
        assert_eq!(etcd.leader().await.unwrap().unwrap().name, "cp-1");
    }

    #[tokio::test]
    async fn releasing_the_leader_hands_leadership_to_the_successor_first() {
        let etcd = etcd(&["cp-1", "cp-2", "cp-3"]);
        release_member(&etcd, "cp-1", Some("cp-3")).await.unwrap();
        assert_eq!(names(&etcd).await, ["cp-2", "cp-3"]);
        assert_eq!(etcd.leader().await.unwrap().unwrap().name, "cp-3");
    }

    #[tokio::test]
    async fn releasing_a_follower_keeps_the_leader() {
        let etcd = etcd(&["cp-1", "cp-2"]);
        release_member(&etcd, "cp-2", None).await.unwrap();
        assert_eq!(names(&etcd).await, ["cp-1"]);
        assert_eq!(etcd.leader().await.unwrap().unwrap().name, "cp-1");
    }

    #[tokio::test]
    async fn releasing_a_member_that_is_gone_is_done_already() {
        let etcd = etcd(&["cp-1", "cp-2"]);
        release_member(&etcd, "cp-9", Some("cp-1")).await.unwrap();
        assert_eq!(names(&etcd).await, ["cp-1", "cp-2"]);
    }

    #[tokio::test]
    async fn the_last_member_and_a_leader_without_successor_are_refused() {
        let single = etcd(&["cp-1"]);
        assert!(matches!(
            release_member(&single, "cp-1", None).await,
            Err(EtcdError::Refused(_))
        ));
        let pair = etcd(&["cp-1", "cp-2"]);
        assert!(matches!(
            release_member(&pair, "cp-1", None).await,
            Err(EtcdError::Refused(_))
        ));
        assert_eq!(names(&pair).await, ["cp-1", "cp-2"], "nothing was removed");
    }

    #[tokio::test]
    async fn an_unreachable_etcd_is_an_error_not_an_empty_answer() {
        let etcd = etcd(&["cp-1", "cp-2"]);
        etcd.set_down(true);
        assert!(matches!(
            etcd.members().await,
            Err(EtcdError::Unreachable(_))
        ));
        assert!(matches!(
            release_member(&etcd, "cp-2", Some("cp-1")).await,
            Err(EtcdError::Unreachable(_))
        ));
        etcd.set_down(false);
        assert_eq!(names(&etcd).await, ["cp-1", "cp-2"]);
    }
}
