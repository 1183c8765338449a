//! The cluster DNS of capictl's nodes: each node's agent answers, on the node's address, what
//! CoreDNS's `kubernetes` plugin answers — `<service>.<namespace>.svc.<domain>` (the cluster
//! IP, or a headless Service's ready endpoints), `<hostname>.<service>.<namespace>.svc.<domain>`
//! and `<a-b-c-d>.<namespace>.pod.<domain>` — and forwards every other name to the node's own
//! resolver, as CoreDNS's `forward . /etc/resolv.conf` does. Pods reach it at the cluster DNS
//! address through their sandbox's rules ([`super::service_proxy`]).
//!
//! [`answer`] is pure: a query and the cluster's Services and EndpointSlices in, a reply or
//! "forward this" out; [`serve`] is the UDP and TCP server around it.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::service_proxy::endpoints;
use crate::kubernetes::endpoints::SERVICE_NAME_LABEL;

/// CoreDNS's `kubernetes` plugin's TTL.
const TTL: u32 = 5;
const TYPE_A: u16 = 1;
const TYPE_CNAME: u16 = 5;
const CLASS_IN: u16 = 1;
const NXDOMAIN: u8 = 3;
const SERVFAIL: u8 = 2;
/// How long a forwarded query may take.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(3);

/// A query's question: the name (lower case, no trailing dot), type and class, and where the
/// question ends in the message.
#[derive(Debug, PartialEq)]
struct Question {
    name: String,
    qtype: u16,
    qclass: u16,
    end: usize,
}

/// What the cluster knows of a name.
#[derive(Debug, PartialEq)]
pub enum Lookup {
    /// The name is the cluster's: these addresses (none: the name exists, without records of
    /// the type asked, or an ExternalName's target).
    Addresses(Vec<Ipv4Addr>),
    /// An ExternalName Service: a CNAME to this name.
    Alias(String),
    /// Under the cluster domain, but nothing of that name.
    NoSuchName,
    /// Not the cluster's: the node's resolver answers.
    Forward,
}

/// What a server does with a message.
#[derive(Debug, PartialEq)]
pub enum Reply {
    Answer(Vec<u8>),
    Forward,
}

fn question(message: &[u8]) -> Option<Question> {
    if message.len() < 12
        || message[2] & 0x80 != 0
        || u16::from_be_bytes([message[4], message[5]]) != 1
    {
        return None;
    }
    let mut at = 12;
    let mut labels = Vec::new();
    loop {
        let len = *message.get(at)? as usize;
        at += 1;
        if len == 0 {
            break;
        }
        if len > 63 {
            return None; // compression has no place in a question
        }
        labels.push(String::from_utf8_lossy(message.get(at..at + len)?).to_lowercase());
        at += len;
    }
    let field = |at: usize| {
        Some(u16::from_be_bytes([
            *message.get(at)?,
            *message.get(at + 1)?,
        ]))
    };
    Some(Question {
        name: labels.join("."),
        qtype: field(at)?,
        qclass: field(at + 2)?,
        end: at + 4,
    })
}

/// What the cluster's Services and EndpointSlices say of `name` under `domain`.
pub fn lookup(
    name: &str,
    domain: &str,
    services: &[Arc<Service>],
    slices: &[Arc<EndpointSlice>],
) -> Lookup {
    let Some(local) = name.strip_suffix(domain).and_then(|n| n.strip_suffix('.')) else {
        return if name == domain {
            Lookup::Addresses(vec![])
        } else {
            Lookup::Forward
        };
    };
    let labels: Vec<&str> = local.split('.').collect();
    let slices: Vec<&EndpointSlice> = slices.iter().map(|s| s.as_ref()).collect();
    match labels.as_slice() {
        [ip, _namespace, "pod"] => match ip.replace('-', ".").parse::<Ipv4Addr>() {
            Ok(ip) => Lookup::Addresses(vec![ip]),
            Err(_) => Lookup::NoSuchName,
        },
        [service, namespace, "svc"] => {
            let Some(service) = services
                .iter()
                .find(|s| s.name_any() == *service && s.namespace().as_deref() == Some(*namespace))
            else {
                return Lookup::NoSuchName;
            };
            let spec = service.spec.clone().unwrap_or_default();
            if spec.type_.as_deref() == Some("ExternalName") {
                return match spec.external_name {
                    Some(target) => Lookup::Alias(target),
                    None => Lookup::Addresses(vec![]),
                };
            }
            match spec.cluster_ip.as_deref() {
                Some("None") => {
                    let mut all: Vec<Ipv4Addr> = endpoints(service, &slices)
                        .into_values()
                        .flatten()
                        .filter_map(|(ip, _)| ip.parse().ok())
                        .collect();
                    all.sort();
                    all.dedup();
                    Lookup::Addresses(all)
                }
                Some(ip) => Lookup::Addresses(ip.parse().into_iter().collect()),
                None => Lookup::Addresses(vec![]),
            }
        }
        [hostname, service, namespace, "svc"] => {
            let found = slices
                .iter()
                .filter(|s| {
                    s.namespace().as_deref() == Some(*namespace)
                        && s.labels().get(SERVICE_NAME_LABEL).map(String::as_str) == Some(*service)
                })
                .flat_map(|s| s.endpoints.iter().flatten())
                .filter(|e| e.hostname.as_deref() == Some(*hostname))
                .filter_map(|e| e.addresses.first()?.parse().ok())
                .collect::<Vec<Ipv4Addr>>();
            if found.is_empty() {
                Lookup::NoSuchName
            } else {
                Lookup::Addresses(found)
            }
        }
        // `svc.<domain>`, `<namespace>.svc.<domain>`: names that exist without records.
        ["svc"] | [_, "svc"] | ["pod"] | [_, "pod"] => Lookup::Addresses(vec![]),
        _ => Lookup::NoSuchName,
    }
}

fn encode_name(name: &str, out: &mut Vec<u8>) {
    for label in name
        .trim_end_matches('.')
        .split('.')
        .filter(|l| !l.is_empty())
    {
        out.push(label.len().min(63) as u8);
        out.extend_from_slice(&label.as_bytes()[..label.len().min(63)]);
    }
    out.push(0);
}

/// The reply to `message`: the cluster's answer for its names, [`Reply::Forward`] for the
/// rest; None for what is not a query (nothing is sent back).
pub fn answer(message: &[u8], resolve: impl Fn(&str) -> Lookup) -> Option<Reply> {
    let q = question(message)?;
    let found = if q.qclass == CLASS_IN {
        resolve(&q.name)
    } else {
        Lookup::NoSuchName
    };
    let (rcode, records): (u8, Vec<Vec<u8>>) = match found {
        Lookup::Forward => return Some(Reply::Forward),
        Lookup::NoSuchName => (NXDOMAIN, vec![]),
        Lookup::Alias(target) => {
            let mut rdata = Vec::new();
            encode_name(&target, &mut rdata);
            (0, vec![record(TYPE_CNAME, &rdata)])
        }
        Lookup::Addresses(addresses) if q.qtype == TYPE_A || q.qtype == 255 => (
            0,
            addresses
                .iter()
                .map(|a| record(TYPE_A, &a.octets()))
                .collect(),
        ),
        Lookup::Addresses(_) => (0, vec![]),
    };
    let mut out = Vec::with_capacity(q.end + records.iter().map(Vec::len).sum::<usize>());
    out.extend_from_slice(&message[0..2]); // id
    // QR, authoritative, the query's RD, recursion available.
    out.push(0x84 | (message[2] & 0x01));
    out.push(0x80 | rcode);
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&(records.len() as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(&message[12..q.end]);
    for r in records {
        out.extend_from_slice(&r);
    }
    Some(Reply::Answer(out))
}

/// A resource record for the question's name (a pointer to offset 12).
fn record(rtype: u16, rdata: &[u8]) -> Vec<u8> {
    let mut r = vec![0xc0, 12];
    r.extend_from_slice(&rtype.to_be_bytes());
    r.extend_from_slice(&CLASS_IN.to_be_bytes());
    r.extend_from_slice(&TTL.to_be_bytes());
    r.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    r.extend_from_slice(rdata);
    r
}

/// A SERVFAIL for `message` (a forward that got no answer).
fn server_failure(message: &[u8]) -> Option<Vec<u8>> {
    let q = question(message)?;
    let mut out = message[..q.end].to_vec();
    out[2] = 0x80 | (message[2] & 0x01);
    out[3] = 0x80 | SERVFAIL;
    out[6..12].fill(0);
    Some(out)
}

/// The node's own resolver, from its `/etc/resolv.conf` (Docker's, on a node container).
fn upstream() -> SocketAddr {
    std::fs::read_to_string("/etc/resolv.conf")
        .ok()
        .and_then(|text| {
            text.lines()
                .filter_map(|l| l.trim().strip_prefix("nameserver"))
                .find_map(|ip| ip.trim().parse::<std::net::IpAddr>().ok())
        })
        .map(|ip| SocketAddr::new(ip, 53))
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 11], 53)))
}

async fn forward(message: &[u8]) -> Option<Vec<u8>> {
    let socket = tokio::net::UdpSocket::bind("0.0.0.0:0").await.ok()?;
    socket.send_to(message, upstream()).await.ok()?;
    let mut buf = vec![0u8; 65535];
    let (n, _) = tokio::time::timeout(FORWARD_TIMEOUT, socket.recv_from(&mut buf))
        .await
        .ok()?
        .ok()?;
    buf.truncate(n);
    Some(buf)
}

/// The cluster's Services and EndpointSlices, as the kubelet's caches hold them.
#[derive(Clone)]
pub struct Records {
    pub services: Store<Service>,
    pub slices: Store<EndpointSlice>,
    pub domain: String,
}

impl Records {
    async fn reply(&self, message: &[u8]) -> Option<Vec<u8>> {
        let (services, slices) = (self.services.state(), self.slices.state());
        match answer(message, |name| {
            lookup(name, &self.domain, &services, &slices)
        })? {
            Reply::Answer(bytes) => Some(bytes),
            Reply::Forward => match forward(message).await {
                Some(bytes) => Some(bytes),
                None => server_failure(message),
            },
        }
    }
}

/// Answers on `address`:53, UDP and TCP, until the task is dropped.
pub async fn serve(address: Ipv4Addr, records: Records) -> std::io::Result<()> {
    let at = SocketAddr::from((address, 53));
    let udp = Arc::new(tokio::net::UdpSocket::bind(at).await?);
    let tcp = tokio::net::TcpListener::bind(at).await?;
    tracing::info!(%at, "cluster DNS answers");
    let streams = {
        let records = records.clone();
        async move {
            loop {
                let Ok((mut stream, _)) = tcp.accept().await else {
                    continue;
                };
                let records = records.clone();
                tokio::spawn(async move {
                    // RFC 1035 §4.2.2: each message prefixed by its length.
                    loop {
                        let Ok(len) = stream.read_u16().await else {
                            return;
                        };
                        let mut message = vec![0u8; len as usize];
                        if stream.read_exact(&mut message).await.is_err() {
                            return;
                        }
                        let Some(reply) = records.reply(&message).await else {
                            return;
                        };
                        let mut framed = (reply.len() as u16).to_be_bytes().to_vec();
                        framed.extend_from_slice(&reply);
                        if stream.write_all(&framed).await.is_err() {
                            return;
                        }
                    }
                });
            }
        }
    };
    let datagrams = async move {
        let mut buf = vec![0u8; 4096];
        loop {
            let Ok((n, from)) = udp.recv_from(&mut buf).await else {
                continue;
            };
            let message = buf[..n].to_vec();
            let (udp, records) = (udp.clone(), records.clone());
            tokio::spawn(async move {
                if let Some(reply) = records.reply(&message).await {
                    let _ = udp.send_to(&reply, from).await;
                }
            });
        }
    };
    tokio::join!(streams, datagrams);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn query(name: &str, qtype: u16) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        encode_name(name, &mut m);
        m.extend_from_slice(&qtype.to_be_bytes());
        m.extend_from_slice(&CLASS_IN.to_be_bytes());
        m
    }

    /// The rcode and the A records' addresses of a reply.
    fn read(reply: &Reply) -> (u8, Vec<Ipv4Addr>) {
        let Reply::Answer(bytes) = reply else {
            panic!("forwarded")
        };
        assert_eq!(&bytes[0..2], &[0x12, 0x34], "the query's id");
        assert_eq!(bytes[2] & 0x80, 0x80, "a response");
        let count = u16::from_be_bytes([bytes[6], bytes[7]]) as usize;
        let end = question(&{
            let mut q = bytes.clone();
            q[2] &= 0x7f;
            q
        })
        .unwrap()
        .end;
        let mut at = end;
        let mut addresses = Vec::new();
        for _ in 0..count {
            let rdlength = u16::from_be_bytes([bytes[at + 10], bytes[at + 11]]) as usize;
            if u16::from_be_bytes([bytes[at + 2], bytes[at + 3]]) == TYPE_A {
                let o = &bytes[at + 12..at + 16];
                addresses.push(Ipv4Addr::new(o[0], o[1], o[2], o[3]));
            }
            at += 12 + rdlength;
        }
        assert_eq!(at, bytes.len());
        (bytes[3] & 0x0f, addresses)
    }

    fn cluster() -> (Vec<Arc<Service>>, Vec<Arc<EndpointSlice>>) {
        let service =
            |v: serde_json::Value| Arc::new(serde_json::from_value::<Service>(v).unwrap());
        let services = vec![
            service(json!({"metadata": {"name": "web", "namespace": "default"},
                           "spec": {"clusterIP": "10.96.0.20", "ports": [{"port": 80}]}})),
            service(json!({"metadata": {"name": "db", "namespace": "shop"},
                           "spec": {"clusterIP": "None", "ports": [{"port": 5432}]}})),
            service(json!({"metadata": {"name": "search", "namespace": "shop"},
                           "spec": {"type": "ExternalName", "externalName": "search.example.com"}})),
        ];
        let slices = vec![Arc::new(
            serde_json::from_value::<EndpointSlice>(json!({
                "metadata": {"name": "db-x", "namespace": "shop", "labels": {SERVICE_NAME_LABEL: "db"}},
                "addressType": "IPv4",
                "ports": [{"port": 5432}],
                "endpoints": [
                    {"addresses": ["172.18.0.9"], "hostname": "db-0", "conditions": {"ready": true}},
                    {"addresses": ["172.18.0.8"], "hostname": "db-1", "conditions": {"ready": true}},
                    {"addresses": ["172.18.0.7"], "conditions": {"ready": false}},
                ],
            }))
            .unwrap(),
        )];
        (services, slices)
    }

    #[test]
    fn cluster_names_are_answered_as_corednss_kubernetes_plugin_does() {
        let (services, slices) = cluster();
        let ask = |name: &str, qtype: u16| {
            answer(&query(name, qtype), |n| {
                lookup(n, "cluster.local", &services, &slices)
            })
            .unwrap()
        };
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        let cases: &[(&str, u16, u8, Vec<Ipv4Addr>)] = &[
            (
                "web.default.svc.cluster.local",
                TYPE_A,
                0,
                vec![ip("10.96.0.20")],
            ),
            (
                "WEB.default.svc.cluster.local.",
                TYPE_A,
                0,
                vec![ip("10.96.0.20")],
            ),
            // AAAA of a name that exists: no records, not NXDOMAIN (clients would give up).
            ("web.default.svc.cluster.local", 28, 0, vec![]),
            (
                "db.shop.svc.cluster.local",
                TYPE_A,
                0,
                vec![ip("172.18.0.8"), ip("172.18.0.9")],
            ),
            (
                "db-1.db.shop.svc.cluster.local",
                TYPE_A,
                0,
                vec![ip("172.18.0.8")],
            ),
            ("db-5.db.shop.svc.cluster.local", TYPE_A, NXDOMAIN, vec![]),
            ("web.shop.svc.cluster.local", TYPE_A, NXDOMAIN, vec![]),
            (
                "172-18-0-5.default.pod.cluster.local",
                TYPE_A,
                0,
                vec![ip("172.18.0.5")],
            ),
            ("default.svc.cluster.local", TYPE_A, 0, vec![]),
            ("web.default.cluster.local", TYPE_A, NXDOMAIN, vec![]),
        ];
        for (name, qtype, rcode, addresses) in cases {
            assert_eq!(
                read(&ask(name, *qtype)),
                (*rcode, addresses.clone()),
                "{name}"
            );
        }
        let Reply::Answer(alias) = ask("search.shop.svc.cluster.local", TYPE_A) else {
            panic!("forwarded")
        };
        assert!(
            alias.ends_with(b"\x06search\x07example\x03com\x00"),
            "{alias:?}"
        );
        assert_eq!(ask("example.com", TYPE_A), Reply::Forward);
        assert_eq!(ask("web.default.svc.other.local", TYPE_A), Reply::Forward);
    }

    #[test]
    fn what_is_not_a_query_gets_no_reply() {
        let mut response = query("web.default.svc.cluster.local", TYPE_A);
        response[2] |= 0x80;
        assert_eq!(answer(&response, |_| Lookup::Forward), None);
        assert_eq!(answer(&[0x12, 0x34, 1], |_| Lookup::Forward), None);
        let truncated = query("web.default.svc.cluster.local", TYPE_A);
        assert_eq!(
            answer(&truncated[..truncated.len() - 3], |_| Lookup::Forward),
            None
        );
        let failed = server_failure(&query("example.com", TYPE_A)).unwrap();
        assert_eq!(failed[3] & 0x0f, SERVFAIL);
    }
}
