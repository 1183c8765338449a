//! kube-apiserver's endpoint reconciler (its `lease` type): every API server of a cluster keeps
//! a Lease saying where it serves, renewed every [`RENEW`], and the `default/kubernetes`
//! Endpoints and EndpointSlice list the addresses of the servers whose Lease is current. Pods
//! then reach the API at the `kubernetes` Service's cluster IP and DNS name
//! (`kubernetes.default.svc`), across control-plane replacements; a server that stops takes
//! its address out at once, one that dies when its Lease runs out.
//!
//! kube-apiserver keeps these leases in etcd outside the API; here they are Leases in
//! `kube-system` labelled as kube-apiserver's identity Leases, with the address they announce.
//! [`live_addresses`] and [`objects`] decide, purely; [`Reconciler`] writes.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Endpoints;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::ApiServer;

const LEASE_NAMESPACE: &str = "kube-system";
/// kube-apiserver's identity Leases carry this label.
const IDENTITY_LABEL: &str = "apiserver.kubernetes.io/identity";
/// The `host:port` a server announces on its Lease.
const ADDRESS_ANNOTATION: &str = "apiserver.capictl.x-k8s.io/advertise-address";
/// How long a Lease holds without renewal (kube's master lease TTL).
const LEASE_SECONDS: i32 = 15;
/// How often a server renews its Lease and reconciles the endpoints.
pub const RENEW: Duration = Duration::from_secs(10);
const SERVICE: &str = "kubernetes";
const PORT_NAME: &str = "https";

/// The addresses (`ip`, `port`) of the API servers whose Lease holds at `now`, sorted.
pub fn live_addresses(leases: &[Lease], now: Timestamp) -> Vec<(String, i32)> {
    let mut out: Vec<(String, i32)> = leases
        .iter()
        .filter(|l| l.labels().get(IDENTITY_LABEL).map(String::as_str) == Some("kube-apiserver"))
        .filter(|l| {
            let spec = l.spec.clone().unwrap_or_default();
            let renewed = spec.renew_time.map(|t| t.0.as_second());
            let duration = i64::from(spec.lease_duration_seconds.unwrap_or(LEASE_SECONDS));
            renewed.is_some_and(|r| r + duration > now.as_second())
        })
        .filter_map(|l| {
            let address = l.annotations().get(ADDRESS_ANNOTATION)?;
            let (ip, port) = address.rsplit_once(':')?;
            Some((ip.trim_matches(['[', ']']).to_string(), port.parse().ok()?))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Whether a Lease ran out more than a minute ago.
fn expired_long_ago(lease: &Lease, now: Timestamp) -> bool {
    let spec = lease.spec.clone().unwrap_or_default();
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(LEASE_SECONDS));
    spec.renew_time
        .is_some_and(|r| r.0.as_second() + duration + 60 < now.as_second())
}

/// The `default/kubernetes` Endpoints' subsets and EndpointSlice for these addresses (one
/// port: all servers of a cluster serve on the same one).
pub fn objects(addresses: &[(String, i32)]) -> (Value, Value) {
    let port = addresses.first().map_or(6443, |(_, p)| *p);
    let ports = json!([{"name": PORT_NAME, "port": port, "protocol": "TCP"}]);
    let subsets = if addresses.is_empty() {
        json!([])
    } else {
        json!([{
            "addresses": addresses.iter().map(|(ip, _)| json!({"ip": ip})).collect::<Vec<_>>(),
            "ports": ports,
        }])
    };
    let slice_endpoints: Vec<Value> = addresses
        .iter()
        .map(|(ip, _)| json!({"addresses": [ip], "conditions": {"ready": true, "serving": true, "terminating": false}}))
        .collect();
    (
        subsets,
        json!({"endpoints": slice_endpoints, "ports": ports}),
    )
}

/// One API server's part: its Lease, and the endpoints it writes from everyone's.
pub struct Reconciler {
    client: Client,
    /// This server's Lease's name.
    name: String,
    address: String,
}

impl Reconciler {
    /// The reconciler of the server `server`, known as `identity` (its node's name), that
    /// serves at `ip`:`port`.
    pub fn new(server: &Arc<ApiServer>, identity: &str, ip: &str, port: u16) -> Reconciler {
        Reconciler {
            client: Client::new(super::local_router(server.clone()), "default"),
            name: format!("apiserver-{identity}"),
            address: crate::pki::join_host_port(ip, port),
        }
    }

    /// Renews this server's Lease and reconciles the endpoints every [`RENEW`], until dropped.
    pub async fn run(&self) {
        loop {
            if let Err(e) = self.pass().await {
                tracing::warn!(error = %e, "kube-apiserver: the default/kubernetes endpoints were not reconciled; retrying");
            }
            tokio::time::sleep(RENEW).await;
        }
    }

    /// Takes this server out: its Lease goes, and the endpoints are written without it.
    pub async fn withdraw(&self) {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), LEASE_NAMESPACE);
        let _ = leases.delete(&self.name, &DeleteParams::default()).await;
        if let Err(e) = self.write_endpoints().await {
            tracing::warn!(error = %e, "kube-apiserver: the default/kubernetes endpoints still name this server");
        }
    }

    async fn pass(&self) -> Result<(), kube::Error> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), LEASE_NAMESPACE);
        let lease: Lease = serde_json::from_value(json!({
            "metadata": {
                "name": self.name,
                "labels": {IDENTITY_LABEL: "kube-apiserver"},
                "annotations": {ADDRESS_ANNOTATION: self.address},
            },
            "spec": {
                "holderIdentity": self.name,
                "leaseDurationSeconds": LEASE_SECONDS,
                // A MicroTime.
                "renewTime": Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
            },
        }))
        .expect("a Lease");
        match leases.get_opt(&self.name).await? {
            None => {
                leases.create(&PostParams::default(), &lease).await?;
            }
            Some(current) => {
                let mut renewed = lease;
                renewed.metadata.resource_version = current.resource_version();
                leases
                    .replace(&self.name, &PostParams::default(), &renewed)
                    .await?;
            }
        }
        self.write_endpoints().await
    }

    async fn write_endpoints(&self) -> Result<(), kube::Error> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), LEASE_NAMESPACE);
        let listed = leases
            .list(&ListParams::default().labels(&format!("{IDENTITY_LABEL}=kube-apiserver")))
            .await?;
        let now = Timestamp::now();
        // The Leases of servers long gone (their nodes removed) go, as kube-controller-manager
        // collects expired identity Leases.
        for stale in listed.items.iter().filter(|l| expired_long_ago(l, now)) {
            let _ = leases
                .delete(&stale.name_any(), &DeleteParams::default())
                .await;
        }
        let addresses = live_addresses(&listed.items, now);
        let (subsets, slice) = objects(&addresses);
        let endpoints: Api<Endpoints> = Api::namespaced(self.client.clone(), "default");
        let wanted: Endpoints = serde_json::from_value(json!({
            "metadata": {"name": SERVICE, "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
            "subsets": subsets,
        }))
        .expect("Endpoints");
        match endpoints.get_opt(SERVICE).await? {
            None => {
                endpoints.create(&PostParams::default(), &wanted).await?;
            }
            Some(have)
                if have.subsets.clone().unwrap_or_default()
                    != wanted.subsets.clone().unwrap_or_default() =>
            {
                let mut replaced = wanted;
                replaced.metadata.resource_version = have.resource_version();
                endpoints
                    .replace(SERVICE, &PostParams::default(), &replaced)
                    .await?;
            }
            Some(_) => {}
        }
        let slices: Api<EndpointSlice> = Api::namespaced(self.client.clone(), "default");
        let wanted: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": SERVICE, "labels": {"kubernetes.io/service-name": SERVICE}},
            "addressType": "IPv4",
            "endpoints": slice["endpoints"],
            "ports": slice["ports"],
        }))
        .expect("an EndpointSlice");
        match slices.get_opt(SERVICE).await? {
            None => {
                slices.create(&PostParams::default(), &wanted).await?;
            }
            Some(have) if have.endpoints != wanted.endpoints || have.ports != wanted.ports => {
                let mut replaced = wanted;
                replaced.metadata.resource_version = have.resource_version();
                slices
                    .replace(SERVICE, &PostParams::default(), &replaced)
                    .await?;
            }
            Some(_) => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(name: &str, address: Option<&str>, renewed: &str, seconds: i32) -> Lease {
        let mut annotations = serde_json::Map::new();
        if let Some(a) = address {
            annotations.insert(ADDRESS_ANNOTATION.into(), json!(a));
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {IDENTITY_LABEL: "kube-apiserver"}, "annotations": annotations},
            "spec": {"renewTime": renewed, "leaseDurationSeconds": seconds},
        }))
        .unwrap()
    }

    #[test]
    fn the_endpoints_are_the_servers_whose_lease_holds() {
        let now: Timestamp = "2026-12-06T08:00:00Z".parse().unwrap();
        let leases = [
            lease(
                "apiserver-cp-2",
                Some("172.18.128.3:6443"),
                "2026-12-06T07:59:55.000000Z",
                15,
            ),
            lease(
                "apiserver-cp-1",
                Some("172.18.128.2:6443"),
                "2026-12-06T07:59:50.000000Z",
                15,
            ),
            // Ran out: its server died without withdrawing.
            lease(
                "apiserver-cp-0",
                Some("172.18.128.9:6443"),
                "2026-12-06T07:59:40.000000Z",
                15,
            ),
            lease("apiserver-odd", None, "2026-12-06T07:59:59.000000Z", 15),
        ];
        let live = live_addresses(&leases, now);
        assert_eq!(
            live,
            [
                ("172.18.128.2".to_string(), 6443),
                ("172.18.128.3".to_string(), 6443)
            ]
        );
        let (subsets, slice) = objects(&live);
        assert_eq!(
            subsets,
            json!([{"addresses": [{"ip": "172.18.128.2"}, {"ip": "172.18.128.3"}],
                "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}])
        );
        assert_eq!(slice["endpoints"][1]["addresses"], json!(["172.18.128.3"]));
        assert_eq!(objects(&[]).0, json!([]));
        let gone: Vec<bool> = leases.iter().map(|l| expired_long_ago(l, now)).collect();
        assert_eq!(gone, [false, false, false, false]);
        let later: Timestamp = "2026-12-06T08:01:00Z".parse().unwrap();
        assert!(expired_long_ago(&leases[2], later), "ran out 65 s before");
    }
}
