//! What kube-proxy does on a kubeadm node, done by the kubelet of capictl's node image in each
//! Pod's network namespace: the Services' cluster IPs translated to their ready endpoints with
//! iptables NAT rules, spread at random as kube-proxy's iptables mode spreads them, and the
//! cluster DNS address sent to the DNS server of the Pod's own node ([`super::dns`]).
//!
//! kube-proxy programs the node's namespace, which every Pod's traffic crosses; capictl's Pods
//! are containers on the host's Docker network that reach each other directly, so the rules go
//! where the traffic starts: the Pod's sandbox, which alone holds `NET_ADMIN` (its containers
//! do not). [`rules`] is pure; the runtime applies its text with `iptables-restore`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::ResourceExt;

use crate::kubernetes::endpoints::SERVICE_NAME_LABEL;

/// The chain in each Pod's `nat` table that holds the rules; `OUTPUT` jumps to it.
pub const CHAIN: &str = "CAPICTL-SERVICES";

/// How long a ClientIP affinity lasts when the Service does not say (kube's default, 3 h).
const DEFAULT_AFFINITY_SECONDS: i32 = 10800;

/// The `recent` list that remembers the sources a Service port's endpoint was given: named
/// for both, as kube-proxy names an endpoint's chain (`KUBE-SEP-<hash>`).
fn endpoint_list(service_port: &str, address: &str, target: i32) -> String {
    let text = format!("{service_port}/{address}:{target}");
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("CAPICTL-SEP-{hash:016X}")
}

/// Where a node's DNS server listens, and the cluster DNS address Pods ask.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterDns {
    /// The kubelet's `clusterDNS`: the `kube-dns` Service's address.
    pub address: String,
    /// The kubelet's `clusterDomain`.
    pub domain: String,
}

/// The ready addresses of a Service's port, by EndpointSlice port name; terminating
/// endpoints that still serve when none is ready, as kube-proxy falls back to them.
pub fn endpoints(
    service: &Service,
    slices: &[&EndpointSlice],
) -> BTreeMap<String, Vec<(String, i32)>> {
    let name = service.name_any();
    let namespace = service.namespace().unwrap_or_default();
    let mut ready: BTreeMap<String, Vec<(String, i32)>> = BTreeMap::new();
    let mut serving: BTreeMap<String, Vec<(String, i32)>> = BTreeMap::new();
    for slice in slices.iter().filter(|s| {
        s.namespace().as_deref() == Some(namespace.as_str())
            && s.labels().get(SERVICE_NAME_LABEL) == Some(&name)
            && s.address_type == "IPv4"
    }) {
        for port in slice.ports.iter().flatten() {
            let Some(number) = port.port else { continue };
            let key = port.name.clone().unwrap_or_default();
            for endpoint in slice.endpoints.iter().flatten() {
                let conditions = endpoint.conditions.clone().unwrap_or_default();
                let Some(address) = endpoint.addresses.first() else {
                    continue;
                };
                let target = (address.clone(), number);
                if conditions.ready != Some(false) {
                    ready.entry(key.clone()).or_default().push(target);
                } else if conditions.serving == Some(true) && conditions.terminating == Some(true) {
                    serving.entry(key.clone()).or_default().push(target);
                }
            }
        }
    }
    for (port, targets) in serving {
        ready.entry(port).or_insert(targets);
    }
    for targets in ready.values_mut() {
        targets.sort();
        targets.dedup();
    }
    ready
}

/// The `iptables-restore --noflush` input that makes [`CHAIN`] translate every Service's
/// cluster IP and port to one of its endpoints, and the cluster DNS address to the node's DNS
/// server at `node_ip`. The same inputs give the same text, so that an unchanged rule set is
/// not applied again.
pub fn rules(
    services: &[&Service],
    slices: &[&EndpointSlice],
    dns: Option<&ClusterDns>,
    node_ip: &str,
) -> String {
    let mut out = format!("*nat\n:{CHAIN} - [0:0]\n");
    if let Some(dns) = dns {
        for protocol in ["udp", "tcp"] {
            out.push_str(&format!(
                "-A {CHAIN} -d {}/32 -p {protocol} --dport 53 -m comment --comment \"cluster DNS\" -j DNAT --to-destination {node_ip}:53\n",
                dns.address
            ));
        }
    }
    let mut services: Vec<&&Service> = services.iter().collect();
    services.sort_by_key(|s| (s.namespace(), s.name_any()));
    for service in services {
        let spec = service.spec.clone().unwrap_or_default();
        let Some(ip) = spec
            .cluster_ip
            .filter(|ip| !ip.is_empty() && ip != "None" && !ip.contains(':'))
        else {
            continue;
        };
        if dns.is_some_and(|d| d.address == ip) {
            continue; // the node's DNS server answers there
        }
        let by_port = endpoints(service, slices);
        let affinity = (spec.session_affinity.as_deref() == Some("ClientIP")).then(|| {
            spec.session_affinity_config
                .as_ref()
                .and_then(|c| c.client_ip.as_ref()?.timeout_seconds)
                .unwrap_or(DEFAULT_AFFINITY_SECONDS)
        });
        for port in spec.ports.iter().flatten() {
            let protocol = port.protocol.as_deref().unwrap_or("TCP").to_lowercase();
            if protocol == "sctp" {
                continue;
            }
            let name = port.name.clone().unwrap_or_default();
            let Some(targets) = by_port.get(&name).filter(|t| !t.is_empty()) else {
                continue;
            };
            let comment = format!(
                "{}/{}{}",
                service.namespace().unwrap_or_default(),
                service.name_any(),
                if name.is_empty() {
                    String::new()
                } else {
                    format!(":{name}")
                }
            );
            let matching = format!(
                "-A {CHAIN} -d {ip}/32 -p {protocol} --dport {} -m comment --comment \"{comment}\"",
                port.port
            );
            // ClientIP affinity, as kube-proxy keeps it: each endpoint remembers the sources
            // it was given (`recent`), and a source seen within the timeout goes back to it.
            let list = |address: &str, target: i32| endpoint_list(&comment, address, target);
            if let Some(seconds) = affinity {
                for (address, target) in targets {
                    let list = list(address, *target);
                    out.push_str(&format!(
                        "{matching} -m recent --name {list} --rcheck --seconds {seconds} --reap -m recent --name {list} --set -j DNAT --to-destination {address}:{target}\n"
                    ));
                }
            }
            for (i, (address, target)) in targets.iter().enumerate() {
                let left = targets.len() - i;
                let spread = if left > 1 {
                    format!(
                        " -m statistic --mode random --probability {:.10}",
                        1.0 / left as f64
                    )
                } else {
                    String::new()
                };
                let remember = affinity
                    .map(|_| format!(" -m recent --name {} --set", list(address, *target)))
                    .unwrap_or_default();
                out.push_str(&format!(
                    "{matching}{spread}{remember} -j DNAT --to-destination {address}:{target}\n"
                ));
            }
        }
    }
    out.push_str("COMMIT\n");
    out
}

/// A node port's transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Transport {
    Tcp,
    Udp,
}

/// The endpoints each TCP and UDP node port of the NodePort and LoadBalancer Services leads to,
/// as kube-proxy forwards a node's ports (SCTP node ports are not served).
pub fn node_ports(
    services: &[&Service],
    slices: &[&EndpointSlice],
) -> BTreeMap<(Transport, u16), Vec<(String, i32)>> {
    let mut out = BTreeMap::new();
    for service in services {
        let spec = service.spec.clone().unwrap_or_default();
        if !matches!(spec.type_.as_deref(), Some("NodePort" | "LoadBalancer")) {
            continue;
        }
        let by_port = endpoints(service, slices);
        for port in spec.ports.iter().flatten() {
            let transport = match port.protocol.as_deref().unwrap_or("TCP") {
                "TCP" => Transport::Tcp,
                "UDP" => Transport::Udp,
                _ => continue,
            };
            let Some(node_port) = port.node_port.and_then(|p| u16::try_from(p).ok()) else {
                continue;
            };
            let name = port.name.clone().unwrap_or_default();
            let targets = by_port.get(&name).cloned().unwrap_or_default();
            out.insert((transport, node_port), targets);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(name: &str, ip: &str, ports: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterIP": ip, "ports": ports, "selector": {"app": name}},
        }))
        .unwrap()
    }

    fn slice(
        service: &str,
        ports: serde_json::Value,
        endpoints: serde_json::Value,
    ) -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{service}-abcde"), "namespace": "default",
                          "labels": {SERVICE_NAME_LABEL: service}},
            "addressType": "IPv4",
            "ports": ports,
            "endpoints": endpoints,
        }))
        .unwrap()
    }

    fn endpoint(ip: &str, ready: bool, serving: bool, terminating: bool) -> serde_json::Value {
        json!({"addresses": [ip], "conditions": {"ready": ready, "serving": serving, "terminating": terminating}})
    }

    #[test]
    fn node_ports_lead_to_the_ready_endpoints_of_their_port() {
        let mut web = service(
            "web",
            "10.96.0.20",
            json!([{"name": "http", "port": 80, "targetPort": 8080, "nodePort": 30080},
                   {"name": "dns", "port": 53, "protocol": "UDP", "nodePort": 30053}]),
        );
        let plain = service(
            "plain",
            "10.96.0.21",
            json!([{"port": 80, "nodePort": 30081}]),
        );
        let slices = [slice(
            "web",
            json!([{"name": "http", "port": 8080, "protocol": "TCP"},
                   {"name": "dns", "port": 5353, "protocol": "UDP"}]),
            json!([
                endpoint("172.18.0.9", true, true, false),
                endpoint("172.18.0.10", false, false, false)
            ]),
        )];
        let refs: Vec<&EndpointSlice> = slices.iter().collect();
        assert!(
            node_ports(&[&web], &refs).is_empty(),
            "a ClusterIP Service opens no node port"
        );
        web.spec.as_mut().unwrap().type_ = Some("NodePort".into());
        assert_eq!(
            node_ports(&[&web, &plain], &refs),
            BTreeMap::from([
                (
                    (Transport::Tcp, 30080),
                    vec![("172.18.0.9".to_string(), 8080)]
                ),
                (
                    (Transport::Udp, 30053),
                    vec![("172.18.0.9".to_string(), 5353)]
                ),
            ]),
            "TCP and UDP node ports of NodePort Services, each to its port's ready endpoints"
        );
    }

    #[test]
    fn cluster_ips_go_to_ready_endpoints_spread_at_random() {
        let web = service(
            "web",
            "10.96.0.20",
            json!([{"name": "http", "port": 80, "targetPort": 8080}]),
        );
        let web_slice = slice(
            "web",
            json!([{"name": "http", "port": 8080, "protocol": "TCP"}]),
            json!([
                endpoint("172.18.0.9", true, true, false),
                endpoint("172.18.0.7", true, true, false),
                endpoint("172.18.0.8", true, true, false),
                endpoint("172.18.0.10", false, false, false),
            ]),
        );
        let dns = ClusterDns {
            address: "10.96.0.10".into(),
            domain: "cluster.local".into(),
        };
        let kube_dns = service(
            "kube-dns",
            "10.96.0.10",
            json!([{"name": "dns", "port": 53, "protocol": "UDP"}]),
        );
        let headless = service("db", "None", json!([{"port": 5432}]));
        let text = rules(
            &[&web, &kube_dns, &headless],
            &[&web_slice],
            Some(&dns),
            "172.18.0.4",
        );
        insta::assert_snapshot!(text, @r#"
        *nat
        :CAPICTL-SERVICES - [0:0]
        -A CAPICTL-SERVICES -d 10.96.0.10/32 -p udp --dport 53 -m comment --comment "cluster DNS" -j DNAT --to-destination 172.18.0.4:53
        -A CAPICTL-SERVICES -d 10.96.0.10/32 -p tcp --dport 53 -m comment --comment "cluster DNS" -j DNAT --to-destination 172.18.0.4:53
        -A CAPICTL-SERVICES -d 10.96.0.20/32 -p tcp --dport 80 -m comment --comment "default/web:http" -m statistic --mode random --probability 0.3333333333 -j DNAT --to-destination 172.18.0.7:8080
        -A CAPICTL-SERVICES -d 10.96.0.20/32 -p tcp --dport 80 -m comment --comment "default/web:http" -m statistic --mode random --probability 0.5000000000 -j DNAT --to-destination 172.18.0.8:8080
        -A CAPICTL-SERVICES -d 10.96.0.20/32 -p tcp --dport 80 -m comment --comment "default/web:http" -j DNAT --to-destination 172.18.0.9:8080
        COMMIT
        "#);
    }

    #[test]
    fn client_ip_affinity_sends_a_source_back_to_its_endpoint() {
        let mut web = service(
            "web",
            "10.96.0.20",
            json!([{"name": "http", "port": 80, "targetPort": 8080}]),
        );
        let spec = web.spec.as_mut().unwrap();
        spec.session_affinity = Some("ClientIP".into());
        spec.session_affinity_config =
            serde_json::from_value(json!({"clientIP": {"timeoutSeconds": 600}})).unwrap();
        let web_slice = slice(
            "web",
            json!([{"name": "http", "port": 8080, "protocol": "TCP"}]),
            json!([
                endpoint("172.18.0.7", true, true, false),
                endpoint("172.18.0.8", true, true, false),
            ]),
        );
        insta::assert_snapshot!(rules(&[&web], &[&web_slice], None, "172.18.0.4"), @r#"
        *nat
        :CAPICTL-SERVICES - [0:0]
        -A CAPICTL-SERVICES -d 10.96.0.20/32 -p tcp --dport 80 -m comment --comment "default/web:http" -m recent --name CAPICTL-SEP-B1BB5A0A8E524CDA --rcheck --seconds 600 --reap -m recent --name CAPICTL-SEP-B1BB5A0A8E524CDA --set -j DNAT --to-destination 172.18.0.7:8080
        -A CAPICTL-SERVICES -d 10.96.0.20/32 -p tcp --dport 80 -m comment --comment "default/web:http" -m recent --name CAPICTL-SEP-4D4211A8BFCFEF19 --rcheck --seconds 600 --reap -m recent --name CAPICTL-SEP-4D4211A8BFCFEF19 --set -j DNAT --to-destination 172.18.0.8:8080
        -A CAPICTL-SERVICES -d 10.96.0.20/32 -p tcp --dport 80 -m comment --comment "default/web:http" -m statistic --mode random --probability 0.5000000000 -m recent --name CAPICTL-SEP-B1BB5A0A8E524CDA --set -j DNAT --to-destination 172.18.0.7:8080
        -A CAPICTL-SERVICES -d 10.96.0.20/32 -p tcp --dport 80 -m comment --comment "default/web:http" -m recent --name CAPICTL-SEP-4D4211A8BFCFEF19 --set -j DNAT --to-destination 172.18.0.8:8080
        COMMIT
        "#);
    }

    #[test]
    fn terminating_endpoints_serve_only_when_none_is_ready() {
        let web = service("web", "10.96.0.20", json!([{"port": 80}]));
        let draining = slice(
            "web",
            json!([{"port": 80}]),
            json!([endpoint("172.18.0.9", false, true, true)]),
        );
        assert_eq!(
            endpoints(&web, &[&draining])[""],
            vec![("172.18.0.9".to_string(), 80)]
        );
        let replaced = slice(
            "web",
            json!([{"port": 80}]),
            json!([
                endpoint("172.18.0.9", false, true, true),
                endpoint("172.18.0.11", true, true, false),
            ]),
        );
        assert_eq!(
            endpoints(&web, &[&replaced])[""],
            vec![("172.18.0.11".to_string(), 80)]
        );
        // Another Service's slice, or none: no rule, as kube-proxy has none to write.
        let other = slice(
            "api",
            json!([{"port": 80}]),
            json!([endpoint("172.18.0.5", true, true, false)]),
        );
        assert_eq!(
            rules(&[&web], &[&other], None, "172.18.0.4"),
            "*nat\n:CAPICTL-SERVICES - [0:0]\nCOMMIT\n"
        );
    }
}
